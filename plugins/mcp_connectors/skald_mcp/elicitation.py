"""The elicitation bridge: a server's ``elicitation/create`` during a tool call reaches
the member whose call it is, who answers or declines it on the Connectors page.

- The member is told at once with a note in the conversation (``TurnApi.notify``, which
  a channel such as Telegram relays too); the form itself is on the Connectors page.
- Only form-mode requests with flat, primitive fields are asked; anything else is
  declined. A request the member does not answer within ``WAIT_SECONDS`` is cancelled,
  as is one for a turn that is stopped.
- Requests and answers live in RAM only, for as long as the call waits: an answer goes
  to the server and nowhere else (not the member's file, not ``system.db``, not a log),
  since it may carry a secret.
- A global connector is shared: its request goes to the member only when that member's
  call is the only one in flight on it; otherwise it is declined.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

WAIT_SECONDS = 300.0
MAX_FIELDS = 20
TYPES = ("string", "number", "integer", "boolean")


class ElicitationError(ValueError):
    """A bad answer; the message says what was wrong."""


@dataclass
class Pending:
    id: str
    member_id: str
    connector: str
    message: str
    fields: list[dict[str, Any]]
    future: asyncio.Future[Any]
    created: float = field(default_factory=time.monotonic)

    def public(self) -> dict[str, Any]:
        return {"id": self.id, "connector": self.connector, "message": self.message, "fields": self.fields}


def _fields(schema: Any) -> list[dict[str, Any]] | None:
    """The form's fields, or None for a schema this bridge does not ask."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    if not isinstance(properties, dict) or len(properties) > MAX_FIELDS:
        return None
    out = []
    for name, prop in properties.items():
        if not isinstance(prop, dict) or prop.get("type") not in TYPES:
            return None
        enum = prop.get("enum")
        out.append(
            {
                "name": str(name)[:100],
                "type": prop["type"],
                "title": str(prop.get("title") or name)[:200],
                "description": str(prop.get("description") or "")[:500],
                "required": name in required,
                "enum": [str(e) for e in enum][:50] if isinstance(enum, list) else None,
            }
        )
    return out


class Elicitations:
    def __init__(self, host: Any) -> None:
        self.host = host
        self._pending: dict[str, Pending] = {}

    def for_member(self, member_id: str) -> list[dict[str, Any]]:
        return [p.public() for p in self._pending.values() if p.member_id == member_id]

    async def ask(self, ctx: Any, connector: str, params: Any) -> Any:
        """The SDK's elicitation callback for a call of ``ctx.member_id``."""
        import mcp_types as types

        fields = _fields(getattr(params, "requested_schema", None)) if getattr(params, "mode", "form") == "form" else None
        if fields is None:
            return types.ElicitResult(action="decline")
        loop = asyncio.get_running_loop()
        pending = Pending(secrets.token_urlsafe(12), ctx.member_id, connector, str(params.message)[:2000], fields, loop.create_future())
        self._pending[pending.id] = pending
        try:
            turn = getattr(ctx, "turn", None)
            if turn is not None:
                try:
                    locale = await self.host.member_locale(ctx.member_id)
                except Exception:  # noqa: BLE001 - English will do
                    locale = None
                await turn.notify(self.host.translate("mcp.elicit_note", locale, connector=connector, message=pending.message))
            waits = [pending.future]
            stop = asyncio.ensure_future(ctx.cancelled.wait()) if getattr(ctx, "cancelled", None) is not None else None
            if stop is not None:
                waits.append(stop)
            try:
                done, _ = await asyncio.wait(waits, timeout=WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if stop is not None:
                    stop.cancel()
            if pending.future not in done:
                return types.ElicitResult(action="cancel")
            return pending.future.result()
        finally:
            self._pending.pop(pending.id, None)
            if not pending.future.done():
                pending.future.cancel()

    def answer(self, member_id: str, elicitation_id: str, action: Any, content: Any) -> None:
        """The member's answer: ``accept`` with ``content`` matching the fields, or
        ``decline``. Another member's or an unknown request is refused."""
        import mcp_types as types

        pending = self._pending.get(elicitation_id)
        if pending is None or pending.member_id != member_id or pending.future.done():
            raise LookupError("this request is no longer waiting for an answer")
        if action == "decline":
            pending.future.set_result(types.ElicitResult(action="decline"))
            return
        if action != "accept":
            raise ElicitationError("action must be accept or decline")
        if not isinstance(content, dict):
            raise ElicitationError("content must be an object of the asked fields")
        known = {f["name"]: f for f in pending.fields}
        unknown = set(content) - set(known)
        if unknown:
            raise ElicitationError(f"not asked for: {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for name, spec in known.items():
            value = content.get(name)
            if value is None or value == "":
                if spec["required"]:
                    raise ElicitationError(f"{spec['title']} is required")
                continue
            values[name] = _coerce(spec, value)
        pending.future.set_result(types.ElicitResult(action="accept", content=values))


def _coerce(spec: dict[str, Any], value: Any) -> Any:
    kind = spec["type"]
    try:
        if kind == "boolean":
            if isinstance(value, bool):
                return value
            raise ValueError
        if kind == "integer":
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        if kind == "number":
            if isinstance(value, bool):
                raise ValueError
            return float(value)
    except (TypeError, ValueError):
        raise ElicitationError(f"{spec['title']} must be of type {kind}") from None
    if not isinstance(value, str) or len(value) > 4096:
        raise ElicitationError(f"{spec['title']} must be text of at most 4096 characters")
    if spec.get("enum") and value not in spec["enum"]:
        raise ElicitationError(f"{spec['title']} must be one of {', '.join(spec['enum'])}")
    return value

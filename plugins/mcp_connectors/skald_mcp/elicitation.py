"""The elicitation bridge: a server's ``elicitation/create`` during a tool call reaches
the member whose call it is, who answers or declines it in the conversation.

- The member is asked with the host's question card (``TurnApi.ask``, contract 1.3): a
  form in the conversation, relayed to its channel (Telegram shows buttons), and listed
  on the Connectors page too (``HostApi.member_questions``/``answer_question``).
- Only form-mode requests with flat, primitive fields are asked; anything else is
  declined. A request the member does not answer within ``WAIT_SECONDS`` is cancelled,
  as is one for a turn that is stopped.
- Requests and answers live in RAM only (the host's), for as long as the call waits: an
  answer goes to the server and nowhere else (not the member's file, not ``system.db``, not a log),
  since it may carry a secret.
- A global connector is shared: its request goes to the member only when that member's
  call is the only one in flight on it; otherwise it is declined.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

WAIT_SECONDS = 300.0
MAX_FIELDS = 20
TYPES = ("string", "number", "integer", "boolean")


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


class _Waiting:
    """One question in flight: whose, and whether they may still use its connector."""

    def __init__(self, member_id: str, allowed: Callable[[str], bool]) -> None:
        self.member_id = member_id
        self.allowed = allowed
        self.withdrawn = asyncio.Event()


class Elicitations:
    def __init__(self, host: Any) -> None:
        self.host = host
        #: The questions waiting for an answer (RAM only), for ``recheck``.
        self._waiting: set[_Waiting] = set()

    def recheck(self) -> None:
        """Access changed (a grant revoked, a template closed, a connector removed):
        each waiting question whose member may no longer use its connector is
        withdrawn now, before the admin's request is answered. Synchronous, no bus;
        the answer path checks again before anything is sent (``ask``)."""
        for waiting in list(self._waiting):
            if not waiting.allowed(waiting.member_id):
                waiting.withdrawn.set()

    async def ask(self, ctx: Any, connector: str, params: Any, allowed: Callable[[str], bool] | None = None) -> Any:
        """The SDK's elicitation callback for a call of ``ctx.member_id``: the host's
        question card (``TurnApi.ask``), the connector named in its text. ``allowed``:
        whether the member may use the connector, asked before the question, when
        access changes meanwhile (``recheck``) and when the answer would be sent: a
        member whose access was withdrawn is never asked, and what they typed is never
        sent (the server is declined)."""
        import mcp_types as types

        fields = _fields(getattr(params, "requested_schema", None)) if getattr(params, "mode", "form") == "form" else None
        turn = getattr(ctx, "turn", None)
        if fields is None or turn is None or getattr(turn, "unattended", False) or not hasattr(turn, "ask"):
            return types.ElicitResult(action="decline")  # nobody there to answer, or a form this bridge does not ask
        may = allowed or (lambda member_id: True)
        if not may(ctx.member_id):
            return types.ElicitResult(action="decline")
        try:
            locale = await self.host.member_locale(ctx.member_id)
        except Exception:  # noqa: BLE001 - English will do
            locale = None
        message = self.host.translate("mcp.elicit_card", locale, connector=connector, message=str(params.message)[:2000])
        waiting = _Waiting(ctx.member_id, may)
        self._waiting.add(waiting)
        asking = asyncio.ensure_future(turn.ask(message, fields, timeout=WAIT_SECONDS))
        withdrawn = asyncio.ensure_future(waiting.withdrawn.wait())
        try:
            await asyncio.wait({asking, withdrawn}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiting.discard(waiting)
            withdrawn.cancel()
            if not asking.done():
                asking.cancel()  # the host's question ends (its card resolves as cancelled)
                await asyncio.gather(asking, return_exceptions=True)
        if waiting.withdrawn.is_set() or not may(ctx.member_id):
            # Withdrawn while the card waited, or by the moment of the answer: the server
            # is declined with nothing of what the member typed, and the member told why.
            await self._say_withdrawn(turn, connector, locale)
            return types.ElicitResult(action="decline")
        answer = asking.result()
        if answer.get("action") == "accept":
            return types.ElicitResult(action="accept", content=dict(answer.get("content") or {}))
        return types.ElicitResult(action=answer.get("action") if answer.get("action") in ("decline", "cancel") else "cancel")

    async def _say_withdrawn(self, turn: Any, connector: str, locale: str | None) -> None:
        if not hasattr(turn, "notify"):
            return
        try:
            await turn.notify(self.host.translate("mcp.elicit_withdrawn", locale, connector=connector))
        except Exception:  # noqa: BLE001 - the decline is what matters
            pass

"""Questions a running tool asks the member (``TurnApi.ask``, contract 1.3): a short form
of flat fields shown as a card in the conversation (and relayed to the conversation's
channel, e.g. Telegram), answered or declined by the member while the call waits.

A question and its answer live in RAM only, for as long as the call waits: the answer
goes back to the tool and nowhere else (not the member's file, not ``system.db``, not a
log line), since it may carry a secret (an MCP server's elicitation, say). A question
that is not answered within its timeout, or whose turn is stopped, ends as ``cancel``.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

DEFAULT_TIMEOUT = 300.0
MAX_TIMEOUT = 3600.0
MAX_FIELDS = 20
MAX_TEXT_ANSWER = 4096
TYPES = ("string", "number", "integer", "boolean")


class QuestionError(ValueError):
    """A bad question or answer; the message says what was wrong in English (fit for the
    member, the tool and the log); ``code`` and ``values`` let the member's screen or
    channel say it in their language (``error.<code>``)."""

    def __init__(self, message: str, *, code: str = "question_invalid", values: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values = values or {}


class QuestionGone(LookupError):
    """The question is not (or no longer) waiting: answered, declined, or its tool gave up."""

    code = "question_gone"
    values: dict[str, Any] = {}


@dataclass
class Question:
    id: str
    conversation_id: str
    #: The plugin whose tool asked (it may answer for the member, from its own page).
    plugin_id: str | None
    message: str
    fields: list[dict[str, Any]]
    future: asyncio.Future[dict[str, Any]] = field(repr=False)
    #: A helper's (sub-agent's) tool asked: its frame and agent, so the card names the
    #: helper who waits, not "a tool" of the assistant. Empty for the conversation's own agent.
    asker: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, Any]:
        return {
            "question_id": self.id, "conversation_id": self.conversation_id, "plugin": self.plugin_id, "message": self.message,
            "fields": self.fields, **self.asker,
        }


def check_fields(raw: Any) -> list[dict[str, Any]]:
    """The form's fields as the host shows them: ``name``, ``type`` (string, number,
    integer, boolean), ``title``, ``description``, ``required``, ``enum`` (strings)."""
    if not isinstance(raw, (list, tuple)) or len(raw) > MAX_FIELDS:
        raise QuestionError(f"fields must be a list of at most {MAX_FIELDS}")
    out, names = [], set()
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not item["name"] or item.get("type") not in TYPES:
            raise QuestionError(f"each field needs a name and a type ({', '.join(TYPES)})")
        name = item["name"][:100]
        if name in names:
            raise QuestionError("field names must differ")
        names.add(name)
        enum = item.get("enum")
        out.append(
            {
                "name": name,
                "type": item["type"],
                "title": str(item.get("title") or name)[:200],
                "description": str(item.get("description") or "")[:500],
                "required": bool(item.get("required")),
                "enum": [str(e)[:200] for e in enum][:50] if isinstance(enum, (list, tuple)) and enum else None,
            }
        )
    return out


def _coerce(spec: Mapping[str, Any], value: Any) -> Any:
    kind, named = spec["type"], {"field": spec["title"]}
    wrong = f"{spec['title']} must be of type {kind}"
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise QuestionError(wrong, code="question_boolean", values=named)
    if kind in ("integer", "number"):
        try:
            if isinstance(value, bool) or isinstance(value, float) and not (math.isfinite(value) and (kind == "number" or value.is_integer())):
                raise ValueError  # 2.5 is no whole number: never quietly 2
            number = int(value) if kind == "integer" else float(value)
            if isinstance(number, float) and not math.isfinite(number):
                raise ValueError
            return number
        except (TypeError, ValueError):
            if kind == "integer":
                raise QuestionError(wrong, code="question_integer", values=named) from None
            raise QuestionError(wrong, code="question_number", values=named) from None
    if not isinstance(value, str):
        raise QuestionError(f"{spec['title']} must be text", code="question_text", values=named)
    if len(value) > MAX_TEXT_ANSWER:
        raise QuestionError(f"{spec['title']} may be at most {MAX_TEXT_ANSWER} characters long",
                            code="question_too_long", values={"field": spec["title"], "limit": MAX_TEXT_ANSWER})
    if spec.get("enum") and value not in spec["enum"]:
        raise QuestionError(f"{spec['title']} must be one of {', '.join(spec['enum'])}",
                            code="question_choice", values={"field": spec["title"], "choices": ", ".join(spec["enum"])})
    return value


def check_answer(question: Question, action: Any, content: Any) -> dict[str, Any]:
    if action == "decline":
        return {"action": "decline"}
    if action != "accept":
        raise QuestionError("action must be accept or decline", code="question_invalid")
    if content is None:
        content = {}
    if not isinstance(content, Mapping):
        raise QuestionError("content must be an object of the asked fields", code="question_invalid")
    known = {f["name"]: f for f in question.fields}
    unknown = set(content) - set(known)
    if unknown:
        raise QuestionError(f"not asked for: {', '.join(sorted(unknown))}", code="question_unknown", values={"fields": ", ".join(sorted(unknown))})
    values: dict[str, Any] = {}
    for name, spec in known.items():
        value = content.get(name)
        if value is None or value == "":
            if spec["required"]:
                raise QuestionError(f"{spec['title']} is required", code="question_required", values={"field": spec["title"]})
            continue
        values[name] = _coerce(spec, value)
    return {"action": "accept", "content": values}


class Questions:
    """One member's questions in flight (RAM only). ``emit(type, conversation_id,
    **data)`` announces them on the member's stream (the web chat, channels)."""

    def __init__(self, emit: Callable[..., None]) -> None:
        self._emit = emit
        self._open: dict[str, Question] = {}

    def get(self, question_id: Any) -> Question | None:
        return self._open.get(question_id) if isinstance(question_id, str) else None

    def pending(self, conversation_id: str | None = None) -> list[dict[str, Any]]:
        return [q.public() for q in self._open.values() if conversation_id is None or q.conversation_id == conversation_id]

    async def ask(
        self,
        conversation_id: str,
        plugin_id: str | None,
        message: Any,
        fields: Sequence[Mapping[str, Any]],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        cancelled: asyncio.Event | None = None,
        asker: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """``asker``: ``frame_id`` and ``agent`` of the helper whose tool asks, if one does."""
        if not isinstance(message, str) or not message.strip():
            raise QuestionError("a question needs a message")
        checked = check_fields(fields)
        timeout = min(max(float(timeout), 1.0), MAX_TIMEOUT)
        question = Question(
            secrets.token_urlsafe(12), conversation_id, plugin_id, message[:2000], checked, asyncio.get_running_loop().create_future(),
            asker={k: str(v) for k, v in (asker or {}).items() if k in ("frame_id", "agent")},
        )
        self._open[question.id] = question
        outcome = "cancel"
        try:
            public = question.public()
            del public["conversation_id"]
            self._emit("question", conversation_id, **public)
            waits: list[asyncio.Future[Any]] = [question.future]
            stop = asyncio.ensure_future(cancelled.wait()) if cancelled is not None else None
            if stop is not None:
                waits.append(stop)
            try:
                done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if stop is not None:
                    stop.cancel()
            if question.future not in done:
                return {"action": "cancel"}
            answer = question.future.result()
            outcome = answer["action"]
            return answer
        finally:
            self._open.pop(question.id, None)
            if not question.future.done():
                question.future.cancel()
            self._emit("question_resolved", conversation_id, question_id=question.id, status=outcome)

    def answer(self, question_id: Any, action: Any, content: Any) -> None:
        """The member's answer. ``LookupError`` for a question not (or no longer)
        waiting; ``QuestionError`` for a bad answer (the question keeps waiting)."""
        question = self.get(question_id)
        if question is None or question.future.done():
            raise QuestionGone("this question is no longer waiting for an answer")
        question.future.set_result(check_answer(question, action, content))

    def cancel_all(self) -> None:
        for question in list(self._open.values()):
            if not question.future.done():
                question.future.set_result({"action": "cancel"})

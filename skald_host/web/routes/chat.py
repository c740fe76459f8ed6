"""Conversations over HTTP: list, create, rename, delete, read, send, stop, compact,
and answering approvals. Everything resolves inside the caller's own file, so another
member's ids answer the same 404 as ids that never existed (check C1)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import unicodedata
from typing import Any
from urllib.parse import quote

from quart import Blueprint, Response, current_app, request

from skald_host.core.agent.approvals import raised_before_deactivation
from skald_host.core.agent.runtime import ChatError, MemberRuntime
from skald_host.core.agent.store import result_code
from skald_host.core.schedules.service import member_timezone
from skald_host.web.auth import current_principal, reader_locale, requires
from skald_host.web.body import BOOL, INT, JSON, TEXT, TIME, accepts, array, field, integer, json_object, nullable, obj, one_of, query, ref, returns, text
from skald_host.web.errors import ApiError

bp = Blueprint("chat", __name__)

MAX_MESSAGE_CHARS = 100_000
#: The longest search a member may type: the conversation list's, and the memory page's
#: (routes/memory.py), so both refuse the same query with the same ``too_long``.
MAX_SEARCH_CHARS = 200
ATTACHMENTS = "'attachments' must be a list of file paths"
MESSAGE = obj(
    {"text": text(MAX_MESSAGE_CHARS, min_length=1)},
    {
        "idempotency_key": text(description="8-128 characters: the same key twice stores the message once"),
        "attachments": {
            **array({**TEXT, "x-message": ATTACHMENTS}, description="agent paths of files uploaded to this conversation"),
            "x-message": ATTACHMENTS,
        },
    },
)


QUESTION = obj(
    {"question_id": TEXT, "conversation_id": TEXT, "message": TEXT, "fields": array(obj({"name": TEXT, "type": TEXT}))},
    {"plugin": nullable(TEXT), "frame_id": TEXT, "agent": TEXT},
)


async def runtime() -> MemberRuntime:
    core = current_app.config["SKALD_CORE"]
    try:
        return await core.chat.runtime(current_principal().member)
    except ChatError as exc:
        raise ApiError.refusing(423, exc) from None


def chat_error(exc: ChatError) -> ApiError:
    """The answer to a chat refusal: its status, English message, and code for the client."""
    return ApiError.refusing(exc.status, exc, field="model" if exc.code == "model_not_enabled" else None)


@bp.get("/api/chat/status")
@returns(obj({"models_configured": BOOL, "default_agent": TEXT, "agents": array(ref("Agent")),
              "upload_max_bytes": integer(1, description="the largest file an upload takes (files.upload_max_bytes)")}))
@requires("chat.use")
async def status() -> dict:
    core = current_app.config["SKALD_CORE"]
    member = current_principal().member
    models = await core.chat.models.candidates()
    locale = await reader_locale()
    return {
        "models_configured": bool(models),
        # What a conversation's model picker offers: every enabled model, by priority.
        # ``model`` is the name an answer's ``model`` field carries: the shell says its label.
        "models": [{"id": m.id, "model": m.model, "label": m.label, "provider": m.provider_name}
                   for m in sorted(models, key=lambda m: (m.priority, m.label))],
        "default_agent": core.chat.default_agent(member),
        # The composer says a file over it is too large as it is chosen, before any upload.
        "upload_max_bytes": current_app.config["SKALD_SETTINGS"].files.upload_max_bytes,
        # ``member_tools``: the plugins' per-member tools (connectors) each agent offers
        # this member now, by the rounds' own rule: a connector's page tells the member
        # which of their assistants uses its tools (a companion with a fixed list uses none).
        "agents": [
            {**a.summary(core.strings, locale, plugin=core.chat.agents.owner(a)),
             "member_tools": [t.name for t in core.chat.member_tools_offered(a, member)]}
            for a in core.chat.startable_agents(member)
        ],
    }


#: Conversations per page of ``GET /api/conversations``.
CONVERSATION_PAGE = 200
# The cursor is the last row's ``updated_at`` and id, as ``next_before`` gave it; "~m":
# a search row found by its messages (those come after the title matches).
_CONVERSATION_CURSOR = re.compile(r"(\d{4}-\d{2}-\d{2}T[0-9:.]{1,20}Z)~([A-Za-z0-9_-]{1,64})(~m)?")


@bp.get("/api/conversations")
@query(
    search=text(MAX_SEARCH_CHARS, description="part of a title, or words in the messages"),
    before={"type": "string", "maxLength": 100, "description": "the 'next_before' of the previous page: the conversations after its last one"},
)
@returns(obj({
    "conversations": array(ref("Conversation")),
    "next_before": nullable(text(description=f"null: this page ({CONVERSATION_PAGE} at most) is the last; else the 'before' of the next page")),
}))
@requires("chat.use")
async def list_conversations() -> dict:
    """The member's conversations, newest first, a page at a time."""
    search = request.args.get("search") or None
    if search is not None and len(search) > MAX_SEARCH_CHARS:
        raise ApiError(400, f"search is longer than {MAX_SEARCH_CHARS} characters", field="search", code="too_long",
                       values={"limit": MAX_SEARCH_CHARS})
    before = None
    if "before" in request.args:
        cursor = _CONVERSATION_CURSOR.fullmatch(request.args["before"])
        if cursor is None:
            raise ApiError(400, "'before' must be a 'next_before' of an earlier answer", field="before", code="field_invalid",
                           values={"field": "before"})
        before = (cursor[1], cursor[2], bool(cursor[3]))
    rt = await runtime()
    items = await rt.store.conversations(search=search, limit=CONVERSATION_PAGE + 1, before=before)
    items, more = items[:CONVERSATION_PAGE], len(items) > CONVERSATION_PAGE
    for item in items:
        item["running"] = rt.running(item["id"])
    last = items[-1] if more else None
    next_before = f"{last['updated_at']}~{last['id']}{'~m' if 'snippet' in last else ''}" if last else None
    return {"conversations": items, "next_before": next_before}


@bp.post("/api/conversations")
@accepts(obj(optional={
    "title": text(200), "agent": text(description="a chat agent id (GET /api/chat/status); default: the role's"),
    "model": nullable(text(200, description="the enabled model's id it uses first; absent or null: the agent's choice")),
}, extra=False))
@returns(ref("Conversation"), 201)
@requires("chat.use")
async def create_conversation():
    """A new conversation; ``model`` picks its model as PATCH does, in the same write, so
    a model picked before the first message costs no second request. Unknown fields are
    refused: ``agent_id`` (the answer's name for the agent) was silently ignored and the
    conversation went to the role's default agent."""
    data = await json_object()
    title = field(data, "title", str, required=False, default="")
    if len(title) > 200:
        raise ApiError(400, "title is longer than 200 characters", field="title", code="too_long", values={"limit": 200})
    model = field(data, "model", str, required=False)
    rt = await runtime()
    try:
        conversation = await rt.create_conversation(field(data, "agent", str, required=False), title=title, model_id=model)
    except ChatError as exc:
        raise chat_error(exc) from None
    return conversation, 201


RESOLVED_APPROVAL = obj(
    {"id": TEXT, "tool_call_id": TEXT, "tool": TEXT, "status": one_of("approved", "denied", "expired", "used"), "created_at": TIME, "resolved_at": nullable(TIME)},
    description="An approval already answered (used: approved and spent by its call, which then started; whether it finished, or a restart cut it, is the call's own status); resolved_at is null where a stop or restart expired it.",
)


#: Rows on screen per part of ``GET /api/conversations/<id>`` (its ``limit``'s default):
#: what the page draws at first (web/pages/chat-transcript.js ROWS_AT_ONCE).
TRANSCRIPT_PAGE = 100
TRANSCRIPT_PAGE_MAX = 500
_MESSAGE_ID = {"type": "string", "pattern": "^[0-9]{1,15}$"}
TRANSCRIPT_PART = obj(
    {
        "complete": BOOL, "base": INT, "earlier": nullable(INT), "later": nullable(INT), "found": nullable(INT),
    },
    description="Which part of the conversation 'messages' holds (whole turns: a call is never cut from its result, nor an"
    " answer from its versions). complete: all of it (?all=1, or a conversation that short); base: the id of the row"
    " before it (0: none); earlier: pass as 'before' for the part before it (null: none); later: pass as 'after' for the"
    " part after it (null: it reaches the newest row); found: the message 'find' found (null: none, or no 'find').",
)


def _message_id_arg(name: str) -> int | None:
    raw = request.args.get(name)
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 15:
        raise ApiError(400, f"'{name}' must be a message id", field=name, code="field_invalid", values={"field": name})
    return int(raw)


@bp.get("/api/conversations/<conversation_id>")
@query(
    all={"type": "string", "enum": ["1", "true"], "description": "every message (the whole conversation) in one answer, as before parts"},
    limit={"type": "string", "pattern": "^[0-9]{1,3}$",
           "description": f"about how many rows on screen a part holds (1-{TRANSCRIPT_PAGE_MAX}; default {TRANSCRIPT_PAGE}), widened to whole turns"},
    before={**_MESSAGE_ID, "description": "a part's 'earlier': the rows before that message"},
    after={**_MESSAGE_ID, "description": "a part's 'later': the rows after that message"},
    around={**_MESSAGE_ID, "description": "the rows around that message (a search hit)"},
    find=text(MAX_SEARCH_CHARS, description="search words: the rows around the earliest message on screen that holds every one"
              " (as GET /api/conversations?search= matches them); part.found names it"),
    snippet=text(MAX_SEARCH_CHARS, description="with find: the search's snippet; the message that holds it is preferred"),
)
@returns(obj({
    "conversation": ref("Conversation"), "messages": array(ref("Message")), "queued": array(ref("QueuedMessage")), "running": BOOL,
    "approvals": array(ref("Approval")), "resolved_approvals": array(RESOLVED_APPROVAL), "questions": array(QUESTION),
    "part": TRANSCRIPT_PART,
}))
@requires("chat.use")
async def get_conversation(conversation_id: str) -> dict:
    """A conversation and a part of its messages: without a parameter the newest (about
    ``limit`` rows on screen, whole turns); ``before``/``after``/``around``/``find`` another
    part; ``all=1`` all of them. ``resolved_approvals`` are those of the part's rows."""
    args = request.args
    whole = args.get("all") in ("1", "true")
    if "all" in args and not whole:
        raise ApiError(400, "'all' must be 1", field="all", code="field_invalid", values={"field": "all"})
    rows = TRANSCRIPT_PAGE
    if "limit" in args:
        raw = args["limit"]
        if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= TRANSCRIPT_PAGE_MAX:
            raise ApiError(400, f"'limit' must be a number from 1 to {TRANSCRIPT_PAGE_MAX}", field="limit", code="field_invalid",
                           values={"field": "limit"})
        rows = int(raw)
    before, after, around = _message_id_arg("before"), _message_id_arg("after"), _message_id_arg("around")
    find, snippet = args.get("find") or None, args.get("snippet") or ""
    for name, value in (("find", find), ("snippet", snippet)):
        if value and len(value) > MAX_SEARCH_CHARS:
            raise ApiError(400, f"{name} is longer than {MAX_SEARCH_CHARS} characters", field=name, code="too_long",
                           values={"limit": MAX_SEARCH_CHARS})
    if sum(x is not None for x in (before, after, around, find)) > 1:
        raise ApiError(400, "one of 'before', 'after', 'around' and 'find' at a time", field="before", code="field_invalid",
                       values={"field": "before"})
    rt = await runtime()
    try:
        conversation = await rt.conversation(conversation_id)
    except ChatError as exc:
        raise chat_error(exc) from None
    approvals = [a for a in await rt.store.pending_approvals() if a["conversation_id"] == conversation_id]
    # Answered cards are history too: without them a reload loses "Approved." (live and reload agree).
    resolved = await rt.store.resolved_approvals(conversation_id)
    if whole:
        messages = await rt.store.transcript(conversation_id)
        part = {"complete": True, "base": 0, "earlier": None, "later": None, "found": None}
    else:
        page = await rt.store.transcript_page(conversation_id, rows=rows, before=before, after=after, around=around, find=find,
                                              prefer=snippet)
        messages = page["messages"]
        part = {"complete": page["base"] == 0 and page["later"] is None, "base": page["base"], "earlier": page["earlier"],
                "later": page["later"], "found": page["found"]}
        if not part["complete"]:
            # The part's own cards: its calls', and a helper's (not a call of this frame) made between its edges.
            calls = {call["id"] for m in messages for call in m["tool_calls"]}
            since, until = page["span"]
            resolved = [
                a for a in resolved
                if a["tool_call_id"] in calls or (a["tool_call_id"] not in page["root_calls"]
                                                 and (since is None or a["created_at"] >= since) and (until is None or a["created_at"] < until))
            ]
    return {
        "conversation": conversation,
        "messages": rt.with_partials(messages),
        "queued": await rt.store.queued(conversation_id),
        "running": rt.running(conversation_id),
        "approvals": approvals,
        "resolved_approvals": resolved,
        "questions": rt.questions.pending(conversation_id),
        "part": part,
    }


@bp.patch("/api/conversations/<conversation_id>")
@accepts(obj(optional={"title": text(200), "model": nullable(text(200, description="an enabled model's id; null: the agent's choice"))}))
@returns(ref("Conversation"))
@requires("chat.use")
async def rename_conversation(conversation_id: str) -> dict:
    """Rename (``title``) and/or pick the model it uses first (``model``: an enabled
    model's id, or null for the agent's choice)."""
    data = await json_object()
    if "title" not in data and "model" not in data:
        raise ApiError(400, "'title' or 'model' is required", code="field_required", values={"field": "title"})
    title = field(data, "title", str, required=False)
    if title is not None and len(title) > 200:
        raise ApiError(400, "title is longer than 200 characters", field="title", code="too_long", values={"limit": 200})
    model = field(data, "model", str, required=False)
    rt = await runtime()
    try:
        conversation = await rt.conversation(conversation_id)
        if "model" in data:
            conversation = await rt.choose_model(conversation_id, model)
        if title is not None:  # each announced to the member's other clients once written
            conversation = await rt.rename(conversation_id, title.strip())
    except ChatError as exc:
        raise chat_error(exc) from None
    return conversation


@bp.delete("/api/conversations/<conversation_id>")
@returns(ref("Ok"))
@requires("chat.use")
async def delete_conversation(conversation_id: str) -> dict:
    rt = await runtime()
    try:
        await rt.delete(conversation_id)  # its turn stopped first; announced once deleted
    except ChatError as exc:
        raise chat_error(exc) from None
    return {"ok": True}


@bp.post("/api/conversations/<conversation_id>/messages")
@accepts(MESSAGE)
@returns(ref("SendAck"), 202)
@requires("chat.use")
async def send_message(conversation_id: str):
    data = await json_object()
    text = field(data, "text", str)
    if not text.strip():
        raise ApiError(400, "'text' must not be empty", field="text", code="message_empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ApiError(400, f"'text' is longer than {MAX_MESSAGE_CHARS} characters", field="text", code="too_long", values={"limit": MAX_MESSAGE_CHARS})
    key = field(data, "idempotency_key", str, required=False)
    if key is not None and not 8 <= len(key) <= 128:
        raise ApiError(400, "'idempotency_key' must be 8-128 characters", field="idempotency_key", code="field_invalid", values={"field": "idempotency_key"})
    attachments = data.get("attachments") or ()  # agent paths from the upload endpoint
    rt = await runtime()
    wait = rt.sending_too_fast(key)
    if wait:
        raise ApiError(429, f"too many messages at once: not stored; try again in {wait} s", headers={"Retry-After": str(wait)}, code="sending_too_fast", values={"seconds": wait})
    try:
        ack = await rt.send(conversation_id, text, key, attachments=attachments)
    except ChatError as exc:
        raise chat_error(exc) from None
    return ack, 202


@bp.post("/api/conversations/<conversation_id>/stop")
@returns(obj({"stopped": BOOL}))
@requires("chat.use")
async def stop(conversation_id: str) -> dict:
    rt = await runtime()
    try:
        return {"stopped": await rt.stop(conversation_id)}
    except ChatError as exc:
        raise chat_error(exc) from None


@bp.post("/api/conversations/<conversation_id>/retry")
@returns(obj({"retrying": BOOL}), 202)
@requires("chat.use")
async def retry(conversation_id: str):
    """Run a failed turn again (its failed answer goes)."""
    rt = await runtime()
    try:
        await rt.retry(conversation_id)
    except ChatError as exc:
        raise chat_error(exc) from None
    return {"retrying": True}, 202


@bp.post("/api/conversations/<conversation_id>/regenerate")
@returns(obj({"regenerating": BOOL}), 202)
@requires("chat.use")
async def regenerate(conversation_id: str):
    """Answer the last message again, keeping the answer it had as a version."""
    rt = await runtime()
    try:
        await rt.regenerate(conversation_id)
    except ChatError as exc:
        raise chat_error(exc) from None
    return {"regenerating": True}, 202


@bp.post("/api/conversations/<conversation_id>/edit")
@returns(obj({"message_id": INT}), 202)
@accepts(obj({"message_id": integer(1, description="the member's message to edit"), "text": text(MAX_MESSAGE_CHARS, min_length=1)}))
@requires("chat.use")
async def edit_message(conversation_id: str):
    """Edit a sent message (``message_id``) to ``text`` and continue from it; the
    conversation from that message on is kept as an earlier version."""
    data = await json_object()
    message_id = field(data, "message_id", int)
    if not 1 <= message_id < 2**63:
        raise ApiError(400, "'message_id' must be a message's id", field="message_id", code="field_invalid", values={"field": "message_id"})
    text = field(data, "text", str)
    if not text.strip():
        raise ApiError(400, "'text' must not be empty", field="text", code="message_empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ApiError(400, f"'text' is longer than {MAX_MESSAGE_CHARS} characters", field="text", code="too_long", values={"limit": MAX_MESSAGE_CHARS})
    rt = await runtime()
    try:
        message_id = await rt.edit(conversation_id, message_id, text)
    except ChatError as exc:
        raise chat_error(exc) from None
    return {"message_id": message_id}, 202


@bp.put("/api/conversations/<conversation_id>/version")
@returns(obj({"variant": INT}))
@accepts(obj({"variant": integer(1, description="a message's variant as listed")}))
@requires("chat.use")
async def show_version(conversation_id: str) -> dict:
    """Show an earlier version (``{"variant": n}``, a message's ``variant`` as listed)
    at its branch point, instead of the one shown there."""
    data = await json_object()
    variant = field(data, "variant", int)
    if not 1 <= variant < 2**63:
        raise ApiError(400, "'variant' must be a version's number (1 or more)", field="variant", code="field_invalid", values={"field": "variant"})
    rt = await runtime()
    try:
        await rt.show_version(conversation_id, variant)
    except ChatError as exc:
        raise chat_error(exc) from None
    return {"variant": variant}


EXPORT_FIELDS = ("id", "role", "content", "reasoning", "status", "model", "attachments", "variant", "branch_point", "created_at")


#: A failed answer's reason when the member stopped the turn before it was answered:
#: shown as "Not answered", not as "Failed" (web/pages/chat-transcript.js shownStatus).
UNANSWERED_CODE = "stopped_unanswered"


def _cut_before_a_word(message: dict) -> bool:
    """An answer that ended interrupted with nothing in it: no text, reasoning or call
    (not drawn on screen; the note after it says the answer had not begun)."""
    return (message["role"] == "assistant" and message["status"] == "interrupted" and not message.get("content")
            and not message.get("reasoning") and not message.get("tool_calls"))


def _reason_code(message: dict) -> str | None:
    reason = message.get("reason")
    return reason.get("code") if isinstance(reason, dict) else None


def shown_messages(messages: list[dict]) -> list[dict]:
    """The messages as the chat draws them (web/pages/chat-transcript.js ``load`` and
    ``placeFallback``): earlier versions left out (the JSON export has them), an answer
    a stopped server cut before its first word left out, the note after it saying that
    the answer had not begun, and a model fallback's note before the answer it led to
    (its row is written after that answer's, which existed before its model was asked)."""
    current = [m for m in messages if not m.get("variant")]
    shown: list[dict] = []
    for index, message in enumerate(current):
        if _cut_before_a_word(message):
            continue
        if message["role"] == "note" and _reason_code(message) == "answer_resumed" and index > 0 and _cut_before_a_word(current[index - 1]):
            message = {**message, "reason": {**message["reason"], "code": "answer_resumed_unstarted"}}
        shown.append(message)
    for note in [m for m in shown if m["role"] == "note" and _reason_code(m) == "model_fallback"]:
        answer_id = (note["reason"].get("values") or {}).get("message_id")
        answer = next((i for i, m in enumerate(shown) if m["id"] == answer_id), None)
        if answer is None or answer > shown.index(note):
            continue
        shown.remove(note)
        shown.insert(answer, note)
    return shown


def _json_export(conversation: dict, messages: list[dict]) -> str:
    """The JSON export's text: the conversation and its messages with their tool calls."""
    return json.dumps({
        "conversation": {k: conversation.get(k) for k in ("id", "title", "agent_id", "source", "created_at", "updated_at")},
        "messages": [
            {**{k: m.get(k) for k in EXPORT_FIELDS}, "current": not m.get("variant"), "attachments": _attachments(m.get("attachments")),
             "tool_calls": [{k: c.get(k) for k in ("id", "name", "arguments", "status", "result")} for c in m.get("tool_calls") or ()]}
            for m in messages
        ],
    }, ensure_ascii=False, indent=2)


def export_date(when: dt.datetime, locale: str | None, zone: str | None) -> str:
    """The export's moment for its header: in the reader's locale's CLDR format (Babel),
    in the member's own time zone when they set one (``member_timezone``, as schedules
    read it), else UTC, the zone named: "06.12.2026, 13:36:33 (Europe/Berlin)"."""
    from zoneinfo import ZoneInfo

    from babel import Locale, UnknownLocaleError
    from babel.dates import format_datetime

    try:
        tz = ZoneInfo(zone) if zone else dt.UTC
    except (ValueError, KeyError, OSError):
        zone, tz = None, dt.UTC
    try:
        cldr = Locale.parse(str(locale or "en").replace("_", "-"), sep="-")
    except (UnknownLocaleError, ValueError, TypeError):
        cldr = Locale("en")
    return f"{format_datetime(when, 'medium', tzinfo=tz, locale=cldr)} ({zone or 'UTC'})"


def _markdown_export(
    conversation: dict, messages: list[dict], strings: Any, locale: str, *, admin: bool = True, zone: str | None = None,
    now: dt.datetime | None = None,
) -> str:
    """The conversation as the member reads it, headings and states in their language:
    the host's own notes and failures (a stored ``reason``) worded from their code as
    the screen words them, their stored English only for a code no bundle has."""
    def say(key: str, **values: Any) -> str:
        return strings.translate(f"core.{key}", locale, **values)

    def state(key: str, status: str) -> str:
        text = strings.lookup(f"core.{key}_{status}", locale)
        return text if text is not None else status

    def round_lines(message: dict) -> list[str]:
        """One message's lines in its section: reasoning, text, files, tool calls."""
        lines: list[str] = []
        if message.get("reasoning"):  # labelled and quoted: not read as part of the answer
            reasoning = shifted_headings(message["reasoning"]).splitlines()
            lines += [f"> **{say('export.reasoning')}**", ">"] + [f"> {line}" if line else ">" for line in reasoning] + [""]
        content = strings.reason(message.get("reason"), locale, admin=admin) or message.get("content")
        if content or message["role"] != "assistant":  # a tool round has no text: no blank paragraph for it
            lines += [shifted_headings(closed_fences(content or "")), ""]
        files = [a for a in _attachments(message.get("attachments")) if isinstance(a, dict)]
        if files:  # the JSON export has them; without them "You" reads as if nothing was sent
            lines += [say("export.attachments"), ""]
            lines += [f"- {code(str(a.get('name') or ''))} ({code(str(a.get('path') or ''))})" for a in files] + [""]
        for call in message.get("tool_calls") or ():
            arguments = readable_json(call.get("arguments") or "{}")
            lines += [say("export.tool_call", name=f"`{call['name']}`", status=state("chat.tool", call["status"])), "",
                      fence(arguments) + "json", arguments, fence(arguments), ""]
            result = call_result(call, strings, locale, admin=admin)
            if result:
                lines += [fence(result), result, fence(result), ""]
        return lines

    title = conversation.get("title") or say("chat.untitled")
    exported_at = export_date(now or dt.datetime.now(dt.UTC), locale, zone)  # the export's own moment, as the line says
    lines = [f"# {title}", "", say("export.from", date=exported_at), ""]
    # One section per speaker's turn: a turn's tool rounds are assistant messages of their
    # own (most with no text), and each under its own "## Assistant" read as several
    # answers, the first ones empty. The messages are those on screen, in its order
    # (``shown_messages``), before the rounds are joined.
    sections: list[list[dict]] = []
    for message in shown_messages(messages):
        if sections and message["role"] == "assistant" and sections[-1][-1]["role"] == "assistant":
            sections[-1].append(message)
        else:
            sections.append([message])
    for rounds in sections:
        # The turn's outcome: a round that did not complete (the last, as a rule) says so.
        unfinished = [m for m in rounds if m["status"] != "complete"]
        status = ""
        if unfinished:
            last = unfinished[-1]
            shown = "unanswered" if last["status"] == "error" and _reason_code(last) == UNANSWERED_CODE else last["status"]
            status = f" ({state('chat.status', shown)})"
        role = strings.lookup(f"core.export.role_{rounds[0]['role']}", locale) or rounds[0]["role"]
        lines += [f"## {role}{status}", ""]
        for message in rounds:
            lines += round_lines(message)
    return "\n".join(lines)


def call_result(call: dict, strings: Any, locale: str, *, admin: bool = True) -> str | None:
    """A call's result as the tool card shows it (web/pages/chat-transcript.js
    ``resultText``): what the host itself answered for a call that did not run (to its
    end) and a host-made error with a code (its ``reason``) in the reader's language, a
    command's exit code as a label in it; a tool's own result as it is."""
    stored = call.get("result")
    host_result = result_code(stored)
    said = strings.lookup(f"core.chat.call_result.{host_result}", locale) if host_result else None
    if said is None:
        reason = call.get("reason")
        said = strings.reason(json.loads(reason) if isinstance(reason, str) else reason, locale, admin=admin)
    if said is None and call.get("name") == "execute_cmd" and isinstance(stored, str):
        exit = re.match(r"Exit code: (-?\d+)(?=\n|$)", stored)
        if exit:
            said = strings.translate("core.chat.exit_code", locale, code=exit[1]) + stored[exit.end():]
    return said or stored


def readable_json(text: str) -> str:
    """A call's arguments as the model wrote them, with its ``\\u`` escapes read
    (``{"task": "Prüfe"}``, not ``"Pr\\u00fcfe"``): decoded and written again as they
    were otherwise (``ensure_ascii=False``); text that is no JSON stays as it is."""
    try:
        readable = json.dumps(json.loads(text), ensure_ascii=False)
        readable.encode("utf-8")  # a lone surrogate ("\\ud800") stays escaped
        return readable
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return text


def fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``, so that the text
    cannot close it (CommonMark: a closing fence is at least as long as the opening)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def code(text: str) -> str:
    """``text`` as inline code that no backtick in it can end (a file name may hold one)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    tick = "`" * (longest + 1)
    return f"{tick} {text} {tick}" if text.startswith("`") or text.endswith("`") else f"{tick}{text}{tick}"


def closed_fences(text: str) -> str:
    """A message's Markdown with a code block it left open closed (an answer stopped
    mid-block): else every later section of the export would read as code."""
    opened: str | None = None
    for line in text.splitlines():
        marker = re.match(r" {0,3}(`{3,}|~{3,})", line)
        if marker is None:
            continue
        run = marker.group(1)
        if opened is None:
            opened = run
        elif run[0] == opened[0] and len(run) >= len(opened) and not line.strip()[len(run):].strip():
            opened = None
    return text if opened is None else f"{text}\n{opened}"


#: A message's own headings sit under its section ("## You", "## Assistant", under the
#: title's "#"): its "#" becomes "###", and so on, at most "######".
HEADING_SHIFT = 2
_ATX_HEADING = re.compile(r"( {0,3})(#{1,6})(?=[ \t]|$)")


def shifted_headings(text: str, by: int = HEADING_SHIFT) -> str:
    """``text``'s ATX headings (outside code fences) ``by`` levels down, capped at six,
    so that the answer's outline nests under the export's own headings."""
    opened: str | None = None
    out = []
    for line in text.split("\n"):
        marker = re.match(r" {0,3}(`{3,}|~{3,})", line)
        if marker is not None:
            run = marker.group(1)
            if opened is None:
                opened = run
            elif run[0] == opened[0] and len(run) >= len(opened) and not line.strip()[len(run):].strip():
                opened = None
        elif opened is None and (heading := _ATX_HEADING.match(line)):
            level = min(6, len(heading.group(2)) + by)
            line = f"{heading.group(1)}{'#' * level}{line[heading.end():]}"
        out.append(line)
    return "\n".join(out)


#: The longest file name stem (in characters) an export is offered under.
FILE_STEM_CHARS = 60


def _name_chars(text: str) -> str:
    """``text`` with every run of characters that are not letters or digits (of any
    script, with their combining marks), ".", "_" or "-" made one "-": no quote, slash,
    control or format character is left."""
    kept = (c if c.isalnum() or c in "._-" or unicodedata.category(c).startswith("M") else "-" for c in text)
    return re.sub(r"-{2,}", "-", "".join(kept))


def file_stem(title: str) -> str:
    """The export's file name stem from the conversation's title: its words in any
    script ("Rezept-Käsekuchen-Tipps"), at most ``FILE_STEM_CHARS`` characters."""
    stem = _name_chars(unicodedata.normalize("NFC", title))
    stem = stem.strip("-.")[:FILE_STEM_CHARS].strip("-.")
    return stem or "conversation"


#: Latin letters that NFKD does not take apart, for the ASCII fallback ("Straße" is
#: "Strasse" there, not "Strae").
_ASCII_LETTERS = str.maketrans({"ß": "ss", "ẞ": "SS", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O",
                                "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "þ": "th", "Þ": "Th"})


def content_disposition(name: str) -> str:
    """``attachment`` under ``name`` (from ``file_stem``), as RFC 6266 says: an ASCII
    ``filename`` for every client, and the name itself as ``filename*`` (RFC 5987,
    UTF-8, percent-encoded) when it is not ASCII (werkzeug's ``send_file`` does the same)."""
    name = _name_chars(name).strip("-.") or "conversation"
    if name.isascii():
        return f'attachment; filename="{name}"'
    stem, dot, ext = name.rpartition(".")
    simple = unicodedata.normalize("NFKD", (stem if dot else name).translate(_ASCII_LETTERS))
    simple = simple.encode("ascii", "ignore").decode("ascii")
    simple = re.sub(r"[^A-Za-z0-9._-]+", "-", simple).strip("-.") or "conversation"
    fallback = f"{simple}.{ext}" if dot and ext.isascii() else simple
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _attachments(raw: Any) -> list[Any]:
    """A message's attachments as a list (stored as JSON text)."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    return value if isinstance(value, list) else []


@bp.get("/api/conversations/<conversation_id>/export")
@query(format={"enum": ["md", "json"], "description": "md (the default): Markdown; json: the messages with their tool calls"})
@returns(
    {"type": "string", "description": "the conversation, sent as an attachment"},
    description="the conversation as a file", content_types=("text/markdown", JSON),
)
@requires("chat.use")
async def export(conversation_id: str):
    """The member's own conversation as a file: ``format=md`` (Markdown) or ``json``.
    Read from the caller's own file only, like every conversation route."""
    kind = request.args.get("format", "md")
    if kind not in ("md", "json"):
        raise ApiError(400, "format must be 'md' or 'json'", field="format", code="field_invalid", values={"field": "format"})
    rt = await runtime()
    try:
        conversation = await rt.conversation(conversation_id)
    except ChatError as exc:
        raise chat_error(exc) from None
    messages = await rt.store.transcript(conversation_id)
    stem = file_stem(conversation.get("title") or "")
    # Built in a thread: a long conversation's file is CPU work the event loop (every
    # other request) would otherwise wait on.
    if kind == "json":
        body = await asyncio.to_thread(_json_export, conversation, messages)
        mimetype = "application/json"
    else:
        strings, locale = current_app.config["SKALD_CORE"].strings, await reader_locale()
        body = await asyncio.to_thread(
            _markdown_export, conversation, messages, strings, locale, admin=current_principal().member.is_admin,
            zone=await member_timezone(rt.store),
        )
        mimetype = "text/markdown"
    return Response(body, mimetype=mimetype, headers={
        "Content-Disposition": content_disposition(f"{stem}.{kind}"), "Cache-Control": "no-store",
    })


@bp.post("/api/conversations/<conversation_id>/compact")
@returns(obj({"compacted": {"type": "boolean", "description": "false: nothing old enough to summarise"}}))
@requires("chat.use")
async def compact(conversation_id: str) -> dict:
    rt = await runtime()
    try:
        return {"compacted": await rt.compact(conversation_id)}
    except ChatError as exc:
        raise chat_error(exc) from None


@bp.get("/api/approvals")
@returns(obj({"approvals": array(ref("Approval"))}))
@requires("chat.use")
async def pending_approvals() -> dict:
    rt = await runtime()
    # A card raised before the member's deactivation is withdrawn (check C5), whether or
    # not the recovery after their reactivation has written it so yet: never listed.
    deactivated_at = rt.member.deactivated_at
    return {"approvals": [a for a in await rt.store.pending_approvals() if not raised_before_deactivation(a, deactivated_at)]}


@bp.post("/api/approvals/<approval_id>")
@accepts(obj({"decision": one_of("approve", "deny")}))
@returns(obj({"approval_id": TEXT, "decision": one_of("approved", "denied")}))
@requires("chat.use")
async def resolve_approval(approval_id: str) -> dict:
    data = await json_object()
    decision = field(data, "decision", str)
    if decision not in ("approve", "deny"):
        raise ApiError(400, "'decision' must be 'approve' or 'deny'", field="decision", code="field_invalid", values={"field": "decision"})
    rt = await runtime()
    try:
        return await rt.resolve_approval(approval_id, decision == "approve")
    except ChatError as exc:
        raise chat_error(exc) from None


@bp.post("/api/questions/<question_id>")
@accepts(obj({"action": one_of("accept", "decline")}, {"content": obj(description="field name -> value, for accept")}))
@returns(obj({"question_id": TEXT, "action": one_of("accept", "decline")}))
@requires("chat.use")
async def answer_question(question_id: str) -> dict:
    """Answer (or decline) what a running tool asks (``TurnApi.ask``). The answer goes
    to the waiting tool only: it is stored and logged nowhere."""
    from skald_host.core.agent.questions import QuestionError

    data = await json_object()
    rt = await runtime()
    try:
        rt.questions.answer(question_id, data.get("action"), data.get("content"))
    except LookupError as exc:
        raise ApiError.refusing(404, exc) from None
    except QuestionError as exc:
        raise ApiError.refusing(400, exc) from None
    return {"question_id": question_id, "action": data["action"]}

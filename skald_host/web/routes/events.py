"""The member's WebSocket: their own event bus out, small commands in.

The handshake is gated in ``gate_websocket`` (Origin and session) before this runs.
The socket listens to its session's revocation: logout elsewhere, a password change,
deactivation or deletion close it with 1008 at once (check A2).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import orjson
from quart import Blueprint, current_app, websocket

from skald_hookspecs.events import UserEvent
from skald_host.core import audit
from skald_host.core.agent.runtime import ChatError
from skald_host.core.identity.access import allowed
from skald_host.core.identity.sessions import told_reason
from skald_host.core.identity.users import MemberNotFound
from skald_host.core.storage import DiskFailure
from skald_host.web.auth import current_principal
from skald_host.web.body import loads
from skald_host.web.errors import STORAGE_RETRY_SECONDS

bp = Blueprint("events", __name__)
log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 100_000
TOO_FAST = "messages are coming faster than the server takes them; this one was not stored yet"


def _text(message: dict[str, Any], name: str, limit: int) -> str | None:
    value = message.get(name)
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


async def _runtime(member: Any) -> Any:
    return await current_app.config["SKALD_CORE"].chat.runtime(member)


def _refusal(exc: ChatError) -> dict[str, Any]:
    """A refused socket request: the English message, and the code and values a client
    says it with in its reader's language."""
    return {"error": str(exc), "code": exc.code, **({"values": exc.values} if exc.values else {})}


async def _send(member: Any, message: dict[str, Any]) -> dict[str, Any]:
    """A chat message over the socket; the ack (after the row is committed) echoes
    the client's idempotency key, and a retry with the same key is stored once."""
    key = _text(message, "idempotency_key", 128)
    conversation_id, text = _text(message, "conversation_id", 64), _text(message, "text", MAX_MESSAGE_CHARS)
    if isinstance(message.get("text"), str) and len(message["text"]) > MAX_MESSAGE_CHARS:
        # Said as the REST route's schema says it: too long is not the same mistake as missing.
        return {
            "type": "error", "idempotency_key": key, "error": f"'text' is longer than {MAX_MESSAGE_CHARS} characters",
            "code": "length_between", "values": {"field": "text", "limit": MAX_MESSAGE_CHARS},
        }
    if conversation_id is None or text is None or not text.strip():
        return {"type": "error", "idempotency_key": key, "error": "send needs conversation_id and non-empty text", "code": "send_invalid"}
    try:
        runtime = await _runtime(member)
        wait = runtime.sending_too_fast(key)
        if wait:  # not stored: the client keeps it and sends it again then (same key, stored once)
            return {"type": "error", "idempotency_key": key, "error": TOO_FAST, "code": "too_fast", "retry_after": wait}
        attachments = message.get("attachments") or ()  # agent paths from the upload endpoint
        ack = await runtime.send(conversation_id, text, key, attachments=attachments)
    except ChatError as exc:  # someone else's id reads exactly like a missing one
        return {"type": "error", "idempotency_key": key, **_refusal(exc)}
    except DiskFailure as exc:
        # Not stored, and no ack: the client keeps the message and sends it again
        # (same key, stored once) after ``retry_after`` seconds (check G4).
        log.error("member %s: a message could not be stored: %s", member.id, exc)
        return {
            "type": "error", "idempotency_key": key, "error": exc.member_text, "code": exc.code,
            "retry_after": STORAGE_RETRY_SECONDS,
        }
    return {"type": "ack", "idempotency_key": key, **ack}


async def _stop(member: Any, message: dict[str, Any]) -> dict[str, Any]:
    conversation_id = _text(message, "conversation_id", 64)
    try:
        stopped = await (await _runtime(member)).stop(conversation_id or "")
    except ChatError as exc:
        return {"type": "error", **_refusal(exc)}
    return {"type": "stopped", "conversation_id": conversation_id, "stopped": stopped}


async def _approve(member: Any, message: dict[str, Any]) -> dict[str, Any]:
    approval_id, decision = _text(message, "approval_id", 64), message.get("decision")
    if approval_id is None or decision not in ("approve", "deny"):
        return {"type": "error", "error": "approve needs approval_id and decision approve or deny", "code": "approve_invalid"}
    try:
        result = await (await _runtime(member)).resolve_approval(approval_id, decision == "approve")
    except ChatError as exc:
        return {"type": "error", **_refusal(exc)}
    return {"type": "approval", **result}


COMMANDS = {"send": _send, "stop": _stop, "approve": _approve}

#: A busy loop: the socket's writer came for an event this long after it was queued.
#: Then it lets ``COALESCE_ITERATIONS`` loop passes go by before it sends, and what
#: other streams' chunks publish meanwhile joins the frame (a frame costs the host
#: ~60-80 us of compression, framing and a socket write). Under the chat bench's 200
#: streams a pass is milliseconds long and holds several tokens of the member's streams
#: (WebSocket messages per streamed token 0.45-0.55 -> 0.25-0.4). On a host that keeps
#: up, a frame goes at once: the passes would hold a turn's first token behind the
#: turn's own work (time to first token p50 +0.7 ms, each tool round +0.3 ms measured).
BUSY_SECONDS = 0.002
COALESCE_ITERATIONS = 2


def coalesce_tokens(events: list[UserEvent]) -> list[UserEvent]:
    """Join consecutive token deltas of the same message and channel into one event.
    Under load a socket drains slower than tokens arrive; sending the backlog as one
    delta keeps the stream current instead of replaying it frame by frame. Clients
    already concatenate deltas, so nothing changes for them; the joined delta keeps
    the first one's ``at`` (where it starts in its channel)."""
    out: list[UserEvent] = []
    for event in events:
        data = event.data
        if out and data.get("type") == "token":
            last = out[-1].data
            if (
                last.get("type") == "token"
                and last.get("message_id") == data.get("message_id")
                and last.get("channel") == data.get("channel")
                and last.get("conversation_id") == data.get("conversation_id")
            ):
                out[-1] = UserEvent(event.kind, event.member_id, {**last, "delta": last["delta"] + data["delta"]})
                continue
        out.append(event)
    return out


def batch(wire: list[Any]) -> dict[str, Any]:
    """Events queued together go out as one message (``events``, in order): each
    WebSocket message is a socket write and a frame for the client to parse, and a
    turn's announcements come in bursts (its message and its start; its answer and
    its end)."""
    return {"type": "event", "event": wire[0]} if len(wire) == 1 else {"type": "events", "events": wire}


def _plain(value: Any) -> Any:
    if isinstance(value, UserEvent):
        return {"kind": value.kind, "member_id": value.member_id, "data": value.data}
    if isinstance(value, Mapping):  # an event's data may be any mapping, not only a dict
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode(message: Any) -> str:
    """A socket message as JSON text. orjson writes an event's dataclass as it is, as
    ``{"kind", "member_id", "data"}``, with no copy first (``dataclasses.asdict`` would
    deep-copy every token's data); it takes a few microseconds where ``json.dumps`` of
    the copies took ~15 per token. Text orjson refuses (a lone surrogate, which a model's
    stream may carry) goes out as ``json`` writes it, escaped."""
    try:
        return orjson.dumps(message, default=_plain, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(message, default=_plain)


def frame_sender(socket: Any) -> Any:
    """The accepted socket's own send, for the event frames. Quart's ``Websocket.send``
    first yields a loop pass (``asyncio.sleep(0)``, for a handler sending in a tight
    loop, which ``outbound`` is not: it waits on its subscription between frames) and
    accepts the socket again (a ``Headers`` each time), then calls this same sender
    (``websocket_sent`` still fires). For a stream that was a loop pass and ~40 calls
    more per token, through the ``websocket`` proxy each time (issue 19: 4.1 -> 3.5
    loop passes per streamed token, ~30 us of host CPU of ~370 per token of one
    stream). A Quart without the attribute gets its public send."""
    return getattr(socket, "_send", None) or socket.send


async def _resume(member: Any) -> None:
    """A connecting client is when interrupted work resumes (seed 001: recovery runs
    on WS connect): building the member's chat runtime recovers their conversations
    after a restart, so a turn cut off by a crash continues, and a pending approval
    is waited on again, without the member having to send anything first."""
    try:
        await _runtime(member)
    except ChatError:
        pass  # locked: the next login resumes it
    except Exception:
        log.exception("resuming the chat of member %s failed", member.id)


async def _current(core: Any, member: Any) -> Any:
    """The member as the registry has them now, for each command: the socket outlives
    the handshake's check, and a role changed since (``chat.use`` taken away) must
    hold for its next ``send`` as for the next HTTP request. ``None`` once deleted."""
    try:
        return await core.users.get(member.id)
    except MemberNotFound:
        return None


POLICY_VIOLATION = 1008
#: Closed at once: the member has ``server.websocket_max_per_member`` sockets open already.
#: The page says so and does not reconnect by itself (a close it would retry in a loop).
TOO_MANY_SOCKETS = 4029
TOO_MANY_SOCKETS_REASON = "too_many_sockets"


class MemberSockets:
    """Each member's open sockets, and the frame their sockets last encoded.

    Every socket of a member gets the same events, and each socket's writer encoded them
    itself on the event loop: with a hundred tabs a large answer was encoded a hundred
    times per chunk and every other member waited seconds (a hostile-input probe). So a
    member has at most ``limit`` sockets, and a batch of the very same events (the same
    objects, which one publish hands every subscription) is encoded once: the next
    socket that drained them sends the text the first one made."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: dict[str, int] = {}
        self._last: dict[str, tuple[list[UserEvent], str | None]] = {}

    def join(self, member_id: str) -> bool:
        """Count one more socket of the member's; ``False`` (not counted) past the limit."""
        if self.open.get(member_id, 0) >= self.limit:
            return False
        self.open[member_id] = self.open.get(member_id, 0) + 1
        return True

    def leave(self, member_id: str) -> None:
        left = self.open.get(member_id, 1) - 1
        if left > 0:
            self.open[member_id] = left
        else:
            self.open.pop(member_id, None)
            self._last.pop(member_id, None)

    def frame(self, member_id: str, drained: list[UserEvent]) -> str | None:
        """The text to send for the events a socket drained (``None``: nothing to send),
        shared with the member's other sockets that drained the same ones."""
        last = self._last.get(member_id)
        if last is not None and len(last[0]) == len(drained) and all(a is b for a, b in zip(last[0], drained)):
            return last[1]
        # Not "sessions_revoked": a socket whose own session ended is closed with 1008
        # (``revoked``), and the one a password change keeps must not read it as its end.
        events = [e for e in coalesce_tokens(drained) if e.kind != "sessions_revoked"]
        text = encode(batch(events)) if events else None
        self._last[member_id] = (drained, text)  # holding the events keeps their ids unique
        return text


def member_sockets() -> MemberSockets:
    """The app's ``MemberSockets``, made on first use with the configured limit."""
    found = current_app.extensions.get("skald.member_sockets")
    if found is None:
        limit = current_app.config["SKALD_SETTINGS"].server.websocket_max_per_member
        found = current_app.extensions["skald.member_sockets"] = MemberSockets(limit)
    return found
#: How long a graceful stop lets a socket send what the turns it cut said, at most.
STOP_FLUSH_SECONDS = 3.0


@bp.websocket("/api/ws")
async def member_socket() -> None:
    principal = current_principal()
    core = current_app.config["SKALD_CORE"]
    revoked = asyncio.Event()
    why: list[str] = []

    def ended(_session: Any, reason: str) -> None:
        why.append(reason)
        revoked.set()

    sockets = member_sockets()
    if not sockets.join(principal.member.id):
        # Accepted to be closed: a refused handshake reaches the page as 1006, no reason.
        log.warning("member %s: WebSocket refused, %d open already", principal.member.id, sockets.limit)
        await websocket.accept()
        await websocket.close(TOO_MANY_SOCKETS, TOO_MANY_SOCKETS_REASON)
        return
    try:
        # Refused for a session that ended since this request's check: it would never be told.
        if not core.auth.sessions.watch(principal.session, ended):
            revoked.set()
        subscription = core.buses.members.subscribe(principal.member.id)
        try:
            await _serve(principal, core, subscription, revoked, why, sockets)
        finally:
            # Also when the client left while the socket was being set up (Quart cancels the
            # handler then): the subscription and the listener outlived such a socket.
            subscription.close()
            core.auth.sessions.unwatch(principal.session, ended)
    finally:
        sockets.leave(principal.member.id)


async def _serve(
    principal: Any, core: Any, subscription: Any, revoked: asyncio.Event, why: list[str], sockets: MemberSockets
) -> None:
    """The member's socket once its subscription and revocation listener are set up."""
    await websocket.accept()
    if allowed(principal.member, "chat.use"):
        await _resume(principal.member)

    send = frame_sender(websocket._get_current_object())

    sending = [False]  # a batch is being written (``flush_before_stop``)

    async def outbound() -> None:
        async for event in subscription:
            if time.monotonic() - subscription.waiting_since > BUSY_SECONDS:
                for _ in range(COALESCE_ITERATIONS):
                    await asyncio.sleep(0)  # other streams' chunks of these passes join the frame
            text = sockets.frame(principal.member.id, [event, *subscription.drain()])
            if text is not None:
                sending[0] = True
                try:
                    await send(text)
                finally:
                    sending[0] = False

    async def flush_before_stop() -> None:
        """A graceful stop closes the socket (1001) once the turns it cut said so: each
        ``turn_finished`` reaches the page, which otherwise kept the typing cursor, the
        running dot and Stop for an answer no longer running. Bounded: a stop never
        waits long on a slow client."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_FLUSH_SECONDS
        try:
            await asyncio.wait_for(core.turns_interrupted.wait(), STOP_FLUSH_SECONDS)
        except TimeoutError:
            return
        while (subscription.pending or sending[0]) and not tasks[0].done() and loop.time() < deadline:
            await asyncio.sleep(0.01)

    async def inbound() -> None:
        while True:
            raw = await websocket.receive()
            try:
                message = loads(raw)  # the API's one reader: no NaN, no absurd nesting
                kind = message.get("type") if isinstance(message, dict) else None
            except (ValueError, RecursionError, TypeError):
                message, kind = None, None
            if not isinstance(kind, str):  # {"type": []} must not reach a dict lookup (unhashable)
                kind = None
            if kind == "ping":
                await websocket.send(json.dumps({"type": "pong"}))
            elif kind in COMMANDS:
                try:
                    member = await _current(core, principal.member)
                    if allowed(member, "chat.use"):
                        reply = await COMMANDS[kind](member, message)
                    else:
                        audit.denied(principal.member.id, "action:chat.use", via="websocket", command=kind)
                        reply = {"type": "error", "error": "forbidden", "code": "forbidden"}
                except DiskFailure as exc:
                    log.error("websocket command %s: %s", kind, exc)
                    reply = {"type": "error", "error": exc.member_text, "code": exc.code}
                except Exception:  # a failed command is an answer, never the end of the socket
                    log.exception("websocket command %s failed", kind)
                    reply = {"type": "error", "error": "the command failed; see the server log", "code": "command_failed"}
                await websocket.send(encode(reply))  # an ack each message: orjson, as the events
            else:
                await websocket.send(json.dumps({"type": "error", "error": "unknown or malformed message", "code": "socket_message_invalid"}))

    tasks = [
        asyncio.create_task(outbound()),
        asyncio.create_task(inbound()),
        asyncio.create_task(revoked.wait()),
        asyncio.create_task(core.stopping.wait()),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if tasks[3] in done and tasks[2] not in done and not tasks[0].done():
            await flush_before_stop()
        if tasks[2] in done or tasks[3] in done:
            # The close's reason is the code the page shows at sign-in when an admin's
            # deactivation or reset ended the session (told_reason), else "session ended".
            told = told_reason(why[0]) if why and tasks[2] in done else None
            await websocket.close(POLICY_VIOLATION if tasks[2] in done else 1001, told or "session ended")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

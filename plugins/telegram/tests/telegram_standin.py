"""A local stand-in of the Telegram Bot API, for the plugin's tests.

The real Bot API cannot be reached from a test (and would need a real bot), so this is
the one mock of the suite: an HTTP server on 127.0.0.1 (Quart under Hypercorn, which the
host already ships) that speaks the Bot API's wire format for the methods the plugin
calls — getMe, getUpdates (long polling over scripted updates), sendMessage,
editMessageText, sendChatAction, answerCallbackQuery, editMessageReplyMarkup, getFile
plus the file download URL, setWebhook and deleteWebhook. The plugin talks to it through
the real python-telegram-bot and httpx. Every request is recorded with the time it
arrived and what was answered.

It enforces the documented limits as Telegram does (Bot API FAQ, "My bot is hitting
limits"): a message call (send or edit) to a chat less than a second after the chat's
previous accepted one, or past thirty calls a second overall, is answered 429 with
``retry_after``; a chat given a 429 must wait that long — a call that comes earlier is
recorded in ``early`` (and answered 429 again); text over 4,096 UTF-16 units after
parsing, or HTML Telegram cannot parse, is answered 400; a callback query answered more
than 15 s after the press has expired (400). A method or a chat can be told to answer
429 first (``flood``, ``flood_chat``), or to refuse a text it is sent (``refusals``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from html.parser import HTMLParser

from hypercorn.asyncio import serve
from hypercorn.config import Config
from quart import Quart, request

TOKEN = "4242424242:AAE-standin-token-for-tests"
BOT_USER = {"id": 4242424242, "is_bot": True, "first_name": "Skald", "username": "skald_test_bot"}


#: Methods that put a message in a chat (Telegram's one-a-second rule applies).
MESSAGE_METHODS = {"sendMessage", "editMessageText", "editMessageReplyMarkup"}
#: Methods counted against the overall thirty a second.
COUNTED_METHODS = MESSAGE_METHODS | {"sendChatAction", "answerCallbackQuery"}
CHAT_INTERVAL = 1.0
GLOBAL_PER_SECOND = 30
CALLBACK_EXPIRY = 15.0


@dataclass
class Refusal:
    """Every ``method`` call whose text contains ``contains`` is answered ``status`` with
    ``description``, in which ``{text}`` stands for the text sent: Telegram's own
    refusals may repeat what they refuse, which no log line may carry on."""

    method: str
    contains: str
    description: str
    status: int = 400


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    result: Any = None  # what the stand-in answered (a sent message's ``message_id``)
    status: int = 200


@dataclass
class Early:
    """A call to a chat before the end of the flood wait the stand-in gave it."""

    chat_id: Any
    method: str
    at: float
    allowed_at: float


def _decode(value: str) -> Any:
    """PTB sends form fields JSON-encoded when they are not plain strings."""
    try:
        return json.loads(value)
    except ValueError:
        return value


#: The HTML subset of the Bot API's ``parse_mode=HTML`` (the tags this plugin may use).
HTML_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "code", "pre", "a", "blockquote"}


class TelegramHtml(HTMLParser):
    """Telegram's HTML check: known tags, properly nested and closed; the text's length
    is counted after the markup is parsed."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.text: list[str] = []
        self.error: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in HTML_TAGS:
            self.error = self.error or f"unsupported start tag \"{tag}\""
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.error = self.error or f"unexpected end tag \"{tag}\""

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @classmethod
    def check(cls, markup: str) -> tuple[str | None, str]:
        parser = cls()
        parser.feed(markup)
        parser.close()
        if parser.open and not parser.error:
            parser.error = f"tag \"{parser.open[-1]}\" is not closed"
        return parser.error, "".join(parser.text)


class BotApiStandIn:
    def __init__(self, token: str = TOKEN, *, port: int = 0) -> None:
        self.token = token
        self.port = port  # 0: any free port; a fixed one to come up where a bot already looks
        self.url = f"http://127.0.0.1:{port}" if port else ""
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.flood: dict[str, list[int]] = {}  # method -> retry_after of the next answers
        self.flood_chat: dict[int, list[int]] = {}  # chat -> retry_after of its next calls
        self.flood_until: dict[Any, float] = {}  # chat -> end of the flood wait it was given
        self.early: list[Early] = []
        self.last_message_at: dict[Any, float] = {}
        self.recent: deque[float] = deque()  # counted calls of the last second
        self.messages: dict[int, dict[str, Any]] = {}  # message_id -> {"chat_id", "text", "edits"}
        self.pressed_at: dict[str, float] = {}  # callback query id -> when it was pressed
        self.served_at: dict[int, float] = {}  # update id -> when getUpdates first handed it out
        self.refuse_entities = 0  # refuse this many next HTML texts (entities Telegram cannot parse)
        self.refusals: list[Refusal] = []
        self._ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()

    # -- scripting ----------------------------------------------------------------------

    def push(self, update: dict[str, Any], *, with_id: bool = True) -> int | None:
        """Queue a raw update (an ``update_id`` added unless it has one or ``with_id``
        is false); returns its id."""
        update = dict(update)
        if with_id:
            update.setdefault("update_id", next(self._ids))
        self.updates.append(update)
        self._poke()
        return update.get("update_id")

    def message(
        self, chat_id: int, text: str | None = None, *, chat_type: str = "private", from_id: int | None = None,
        first_name: str = "Alice", language_code: str = "en", **extra: Any,
    ) -> dict[str, Any]:
        """The ``message`` object of a user's message (not yet pushed)."""
        sender = {"id": from_id if from_id is not None else chat_id, "is_bot": False, "first_name": first_name, "language_code": language_code}
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = "A group"
        message = {"message_id": next(self._message_ids), "date": int(time.time()), "chat": chat, "from": sender, **extra}
        if text is not None:
            message["text"] = text
        return message

    def send(self, chat_id: int, text: str | None = None, **kwargs: Any) -> int:
        return self.push({"message": self.message(chat_id, text, **kwargs)})

    def press(self, chat_id: int, message_id: int, data: str) -> int:
        query_id = f"cq{next(self._ids)}"
        self.pressed_at[query_id] = time.monotonic()
        return self.push({
            "callback_query": {
                "id": query_id,
                "from": {"id": chat_id, "is_bot": False, "first_name": "Alice"},
                "chat_instance": "1",
                "data": data,
                "message": {"message_id": message_id, "date": int(time.time()), "chat": {"id": chat_id, "type": "private"}},
            }
        })

    def add_file(self, file_id: str, data: bytes) -> None:
        self.files[file_id] = data

    # -- reading what the plugin did ------------------------------------------------------------

    def of(self, method: str, chat_id: int | None = None) -> list[Call]:
        return [c for c in self.calls if c.method == method and (chat_id is None or c.params.get("chat_id") == chat_id)]

    def texts(self, chat_id: int) -> list[str]:
        """Each sendMessage to the chat: the message as it reads now (after any edits)
        when it was sent, else the text of the refused attempt."""
        out = []
        for c in self.of("sendMessage", chat_id):
            message = self.messages.get(c.result["message_id"]) if isinstance(c.result, dict) else None
            out.append(str(message["text"]) if message else str(c.params.get("text")))
        return out

    def to_chat(self, chat_id: int) -> list[Call]:
        """Every call that reached the chat (sends, edits, chat actions), in order."""
        return [c for c in self.calls if c.method in COUNTED_METHODS and c.params.get("chat_id") == chat_id]

    def shown(self, chat_id: int) -> list[str]:
        """What the member sees: the chat's messages, in order, as they read now."""
        return [str(m["text"]) for m in self.messages.values() if m["chat_id"] == chat_id]

    def _limit(self, method: str, chat_id: Any) -> tuple[dict[str, Any], int] | None:
        """Telegram's limits; a 429 answer, or None when the call may pass."""
        now = time.monotonic()

        def too_many(retry_after: int) -> tuple[dict[str, Any], int]:
            retry_after = max(1, int(retry_after))
            if chat_id is not None:
                self.flood_until[chat_id] = now + retry_after
            return {"ok": False, "error_code": 429, "description": f"Too Many Requests: retry after {retry_after}", "parameters": {"retry_after": retry_after}}, 429

        if chat_id is not None and now < self.flood_until.get(chat_id, 0.0):
            self.early.append(Early(chat_id, method, now, self.flood_until[chat_id]))
            return too_many(math.ceil(self.flood_until[chat_id] - now))
        scripted = self.flood_chat.get(chat_id) if chat_id is not None else None
        if scripted:
            return too_many(scripted.pop(0))
        if method in COUNTED_METHODS:
            while self.recent and now - self.recent[0] >= 1.0:
                self.recent.popleft()
            if len(self.recent) >= GLOBAL_PER_SECOND:
                return too_many(1)
        if method in MESSAGE_METHODS and chat_id is not None:
            since = now - self.last_message_at.get(chat_id, -10.0)
            if since < CHAT_INTERVAL:
                return too_many(math.ceil(CHAT_INTERVAL - since))
            self.last_message_at[chat_id] = now
        if method in COUNTED_METHODS:
            self.recent.append(now)
        return None

    async def wait_for(self, check: Callable[[], Any], *, timeout: float = 15.0, what: str = "the stand-in to see it") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                seen = [(c.method, c.params.get("text", "")[:60] if isinstance(c.params.get("text"), str) else "") for c in self.calls if c.method != "getUpdates"]
                raise AssertionError(f"waited {timeout} s for {what}; calls: {seen}")
            await asyncio.sleep(0.02)

    async def wait_texts(self, chat_id: int, count: int, **kwargs: Any) -> list[str]:
        await self.wait_for(lambda: len(self.texts(chat_id)) >= count, what=f"{count} messages to chat {chat_id}", **kwargs)
        return self.texts(chat_id)

    # -- the server ---------------------------------------------------------------------------

    def _poke(self) -> None:
        self._changed.set()

    def _app(self) -> Quart:
        app = Quart("telegram_standin")

        @app.route("/bot<token>/<method>", methods=["GET", "POST"])
        async def api(token: str, method: str) -> Any:
            params: dict[str, Any] = {}
            form = await request.form
            params.update({k: _decode(v) if k != "text" else v for k, v in form.items()})
            for name, upload in (await request.files).items():  # sendVoice's audio: the bytes
                params[name] = upload.read()
            body = await request.get_json(silent=True)
            if isinstance(body, dict):
                params.update(body)
            call = Call(method, params)
            self.calls.append(call)
            self._poke()
            if token != self.token:
                return {"ok": False, "error_code": 401, "description": "Unauthorized"}, 401
            flood = self.flood.get(method)
            chat_id = params.get("chat_id") if method in COUNTED_METHODS else None
            if flood:
                retry_after = flood.pop(0)
                if chat_id is not None:
                    self.flood_until[chat_id] = time.monotonic() + retry_after
                call.status = 429
                return {"ok": False, "error_code": 429, "description": f"Too Many Requests: retry after {retry_after}", "parameters": {"retry_after": retry_after}}, 429
            limited = self._limit(method, chat_id)
            if limited is not None:
                call.status = 429
                return limited
            text = params.get("text")
            for refusal in self.refusals:
                if refusal.method == method and isinstance(text, str) and refusal.contains in text:
                    call.status = refusal.status
                    return {"ok": False, "error_code": refusal.status, "description": refusal.description.replace("{text}", text)}, refusal.status
            handler = getattr(self, f"_do_{method}", None)
            if handler is None:
                return {"ok": False, "error_code": 404, "description": "Not Found: method not found"}, 404
            result = await handler(params)
            if isinstance(result, tuple):
                call.status = result[1]
                return result
            call.result = result
            return {"ok": True, "result": result}

        @app.get("/file/bot<token>/<path:file_path>")
        async def download(token: str, file_path: str) -> Any:
            self.calls.append(Call("download", {"file_path": file_path}))
            file_id = file_path.rsplit("/", 1)[-1]
            if token != self.token or file_id not in self.files:
                return "not found", 404
            return self.files[file_id], 200, {"Content-Type": "application/octet-stream"}

        return app

    async def _do_getMe(self, params: dict[str, Any]) -> Any:
        return BOT_USER

    async def _do_getUpdates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        self.updates = [u for u in self.updates if not isinstance(u.get("update_id"), int) or u["update_id"] >= offset]
        deadline = time.monotonic() + timeout
        while not self.updates and time.monotonic() < deadline and not self._stop.is_set():
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
        batch = list(self.updates)
        now = time.monotonic()
        for update in batch:
            if isinstance(update.get("update_id"), int):
                self.served_at.setdefault(update["update_id"], now)
        # An update without a usable id can never be confirmed by an offset: serve it once.
        self.updates = [u for u in self.updates if isinstance(u.get("update_id"), int)]
        return batch

    def _text(self, params: dict[str, Any]) -> tuple[str, None] | tuple[None, tuple[dict[str, Any], int]]:
        """The text as the member will read it, or a 400."""
        text = params.get("text")
        mode = params.get("parse_mode")
        if mode not in (None, "HTML"):
            return None, ({"ok": False, "error_code": 400, "description": f"Bad Request: the stand-in knows no parse_mode {mode}"}, 400)
        if mode == "HTML" and isinstance(text, str):
            error, text = TelegramHtml.check(text)
            if self.refuse_entities > 0:
                self.refuse_entities -= 1
                error = error or "can't find end of the entity (scripted)"
            if error:
                return None, ({"ok": False, "error_code": 400, "description": f"Bad Request: can't parse entities: {error}"}, 400)
        if not isinstance(text, str) or not text or len(text.encode("utf-16-le")) // 2 > 4096:
            return None, ({"ok": False, "error_code": 400, "description": "Bad Request: message text is empty or too long"}, 400)
        return text, None

    async def _do_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = params.get("chat_id")
        text, refused = self._text(params)
        if refused:
            return refused
        message_id = next(self._message_ids)
        # ``text`` as sent (markup included, as the tests compare it), ``plain`` as shown.
        self.messages[message_id] = {"chat_id": chat_id, "text": params.get("text"), "plain": text, "edits": 0, "at": time.monotonic()}
        return {"message_id": message_id, "date": int(time.time()), "chat": {"id": chat_id, "type": "private"}, "text": text}

    async def _do_editMessageText(self, params: dict[str, Any]) -> Any:
        chat_id = params.get("chat_id")
        message = self.messages.get(params.get("message_id"))  # type: ignore[arg-type]
        if message is None or message["chat_id"] != chat_id:
            return {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}, 400
        text, refused = self._text(params)
        if refused:
            return refused
        if params.get("text") == message["text"]:
            return {"ok": False, "error_code": 400, "description": "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}, 400
        message["text"], message["plain"], message["edits"] = params.get("text"), text, message["edits"] + 1
        message["at"] = time.monotonic()
        return {"message_id": params.get("message_id"), "date": int(time.time()), "chat": {"id": chat_id, "type": "private"}, "text": text}

    async def _do_sendVoice(self, params: dict[str, Any]) -> Any:
        """A voice note must be OGG/Opus (Telegram shows anything else as a file)."""
        voice = params.get("voice")
        if not isinstance(voice, bytes) or voice[:4] != b"OggS" or b"OpusHead" not in voice[:200]:
            return {"ok": False, "error_code": 400, "description": "Bad Request: the voice note is not OGG/Opus"}, 400
        chat_id = params.get("chat_id")
        return {
            "message_id": next(self._message_ids), "date": int(time.time()), "chat": {"id": chat_id, "type": "private"},
            "voice": {"file_id": f"voice-{len(voice)}", "file_unique_id": "v", "duration": 1, "mime_type": "audio/ogg"},
        }

    async def _do_sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    async def _do_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        pressed = self.pressed_at.get(str(params.get("callback_query_id")))
        if pressed is None or time.monotonic() - pressed > CALLBACK_EXPIRY:
            return {"ok": False, "error_code": 400, "description": "Bad Request: query is too old and response timeout expired or query ID is invalid"}, 400
        return True

    async def _do_editMessageReplyMarkup(self, params: dict[str, Any]) -> Any:
        return {"message_id": params.get("message_id"), "date": int(time.time()), "chat": {"id": params.get("chat_id"), "type": "private"}}

    async def _do_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            return {"ok": False, "error_code": 400, "description": "Bad Request: invalid file_id"}, 400
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(self.files[file_id]), "file_path": f"documents/{file_id}"}

    async def _do_setWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _do_deleteWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def __aenter__(self) -> "BotApiStandIn":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        sock.set_inheritable(True)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.graceful_timeout = 0.5
        config.accesslog = None
        config.errorlog = None
        self._task = asyncio.create_task(serve(self._app(), config, shutdown_trigger=self._stop.wait))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._stop.set()
        self._poke()
        await asyncio.wait_for(self._task, 10)

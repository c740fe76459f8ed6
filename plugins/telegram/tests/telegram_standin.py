"""A local stand-in of the Telegram Bot API, for the plugin's tests.

The real Bot API cannot be reached from a test (and would need a real bot), so this is
the one mock of the suite: an HTTP server on 127.0.0.1 (Quart under Hypercorn, which the
host already ships) that speaks the Bot API's wire format for the methods the plugin
calls — getMe, getUpdates (long polling over scripted updates), sendMessage,
sendChatAction, answerCallbackQuery, editMessageReplyMarkup, getFile plus the file
download URL, setWebhook and deleteWebhook. The plugin talks to it through the real
python-telegram-bot and httpx. Every request is recorded; a method can be told to
answer 429 with ``retry_after`` first.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from html.parser import HTMLParser

from hypercorn.asyncio import serve
from hypercorn.config import Config
from quart import Quart, request

TOKEN = "4242424242:AAE-standin-token-for-tests"
BOT_USER = {"id": 4242424242, "is_bot": True, "first_name": "Skald", "username": "skald_test_bot"}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    result: Any = None  # what the stand-in answered (a sent message's ``message_id``)


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
    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.flood: dict[str, list[int]] = {}  # method -> retry_after of the next answers
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
        return self.push({
            "callback_query": {
                "id": f"cq{next(self._ids)}",
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
        return [str(c.params.get("text")) for c in self.of("sendMessage", chat_id)]

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
            if flood:
                retry_after = flood.pop(0)
                return {"ok": False, "error_code": 429, "description": f"Too Many Requests: retry after {retry_after}", "parameters": {"retry_after": retry_after}}, 429
            handler = getattr(self, f"_do_{method}", None)
            if handler is None:
                return {"ok": False, "error_code": 404, "description": "Not Found: method not found"}, 404
            result = await handler(params)
            if isinstance(result, tuple):
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
        # An update without a usable id can never be confirmed by an offset: serve it once.
        self.updates = [u for u in self.updates if isinstance(u.get("update_id"), int)]
        return batch

    async def _do_sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = params.get("chat_id")
        text = params.get("text")
        mode = params.get("parse_mode")
        if mode not in (None, "HTML"):
            return {"ok": False, "error_code": 400, "description": f"Bad Request: the stand-in knows no parse_mode {mode}"}, 400
        if mode == "HTML" and isinstance(text, str):
            error, text = TelegramHtml.check(text)
            if error:
                return {"ok": False, "error_code": 400, "description": f"Bad Request: can't parse entities: {error}"}, 400
        if not isinstance(text, str) or not text or len(text.encode("utf-16-le")) // 2 > 4096:
            return {"ok": False, "error_code": 400, "description": "Bad Request: message text is empty or too long"}, 400
        return {"message_id": next(self._message_ids), "date": int(time.time()), "chat": {"id": chat_id, "type": "private"}, "text": text}

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
        sock.bind(("127.0.0.1", 0))
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

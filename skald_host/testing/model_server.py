"""A scripted OpenAI-compatible model server for the host's tests, benchmarks and plugin
authors, spoken to through the real ``openai`` SDK.

Why not a mock of the SDK: the host's agent loop must survive what real providers do on
the wire (429s, 500s, streams that break off, a /stop that closes the HTTP stream), and
only a real HTTP server shows whether it does. Why not a web framework: a benchmark runs
200 concurrent streaming conversations on a 2-core machine, so this is plain
``asyncio.start_server`` with HTTP/1.1 keep-alive (the SDK pools connections), JSON
answers with ``Content-Length`` and SSE answers with chunked transfer encoding, which
lets a stream end without closing the connection::

    async with ScriptedModelServer(models=("model-a",)) as server:
        server.script("model-a", [Reply("Hello!", token_delay=0.01), Error(429)])
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        ...
        assert server.requests_for("model-a")[0].messages[-1]["content"] == "Hi"

Each ``POST /v1/chat/completions`` consumes the next item of its model's script. When
the script is empty the ``responder`` (if any) decides, e.g. ``echo_last_user_message``;
otherwise the answer is a 500 saying "script exhausted for model ...", with
``x-should-retry: false`` so the SDK does not hide the mistake behind retries.

A stream is: one chunk with ``role``, one chunk per reasoning token (``delta.
reasoning_content``, or ``delta.reasoning`` with ``reasoning_field="reasoning"``), one
per text token, per tool call one chunk with id and name then one per argument fragment,
a chunk with ``finish_reason``, a ``usage`` chunk when ``stream_options.include_usage``
is set, then ``data: [DONE]``. The first token waits ``first_token_delay``, every later
one ``token_delay``; a non-streaming answer waits the same total.

Command line (the model server in another process)::

    python -m skald_host.testing.model_server --port 0 --script-file script.json

prints the base URL on one line and serves until SIGTERM. With ``--log-requests`` it
also prints a line per request it gets, to see what the host sent (``request_line``)::

    POST /v1/chat/completions model=test-model messages=3 tools=roll_dice,remember

The script file::

    {
      "models": ["model-a"],              optional; default: the keys of "script", else test-model
      "api_key": "sk-test",               optional; --api-key overrides
      "responder": "echo",                optional; echo the last user message when empty
      "reasoning_field": "reasoning",     optional; default "reasoning_content"
      "script": {
        "model-a": [
          "a plain string is a Reply with that text",
          {"reply": {"text": "Hi", "reasoning": "think", "token_delay": 0.01,
                     "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}},
          {"error": {"status": 429, "retry_after": 1}},
          {"broken_stream": {"after_chunks": 2}},
          {"hang": {}}
        ]
      }
    }

Each object has one key, the item's kind, whose value holds the item's fields.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import re
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Sequence, Union

from skald_host.core.asyncutil import await_me_maybe

logger = logging.getLogger(__name__)

# -- the script ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    name: str
    #: A dict is sent as JSON; a string is sent as is (to test invalid arguments).
    arguments: dict[str, Any] | str = field(default_factory=dict)
    #: ``None``: ``call_<answer number>_<index>``, the same in a stream and a whole answer.
    id: str | None = None

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    #: ``None``: ``"tool_calls"`` when there are tool calls, else ``"stop"``.
    finish_reason: str | None = None
    token_delay: float = 0.0
    first_token_delay: float = 0.0
    #: ``(prompt_tokens, completion_tokens)``; ``None``: counted in words.
    usage: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))  # a list reads fine in a test


@dataclass(frozen=True)
class Error:
    """An HTTP error in OpenAI's ``{"error": {...}}`` shape, before any stream starts."""

    status: int
    message: str = ""
    retry_after: float | None = None
    type: str | None = None
    code: str | None = None
    #: Sent as ``x-should-retry``, which the SDK obeys; ``None``: the SDK's own rules.
    should_retry: bool | None = None


@dataclass(frozen=True)
class BrokenStream:
    """Streams ``after_chunks`` text tokens, then drops the connection without [DONE]
    (a non-streaming request gets half a body)."""

    after_chunks: int = 2
    text: str = "partial answer that never ends"
    token_delay: float = 0.0


@dataclass(frozen=True)
class Hang:
    """Never answers until the client goes away; a streaming request first gets
    ``text``, if any (a /stop test then sees partial output)."""

    text: str = ""
    token_delay: float = 0.0


ScriptItem = Union[Reply, Error, BrokenStream, Hang]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server got it; refused ones (401, 404, 400) are recorded too,
    so a test sees what the host really sent."""

    model: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    stream: bool
    body: dict[str, Any] = field(repr=False)
    #: Lower-case names; kept out of repr so a failing assert doesn't print credentials.
    headers: dict[str, str] = field(repr=False)
    path: str
    #: ``time.monotonic()``, comparable with a test's own clock.
    received_at: float
    method: str = "POST"
    #: The body's bytes as they arrived.
    raw: bytes = field(default=b"", repr=False)

    @property
    def last_user_text(self) -> str | None:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):  # content parts
                    return "".join(part.get("text", "") for part in content if isinstance(part, dict))
                return content if isinstance(content, str) else None
        return None


Responder = Callable[[RecordedRequest], Union[ScriptItem, str, Awaitable[Union[ScriptItem, str]]]]


def echo_last_user_message(request: RecordedRequest) -> Reply:
    """A responder: answers with the last user message (good for load tests, where each
    conversation can check it got its own answer)."""
    return Reply(text=request.last_user_text or "")


def split_words(text: str) -> list[str]:
    """The default tokenizer: words with their leading whitespace, so tokens join back
    to the exact text."""
    return re.findall(r"\s*\S+|\s+\Z", text)


def _as_item(value: ScriptItem | str) -> ScriptItem:
    if isinstance(value, str):
        return Reply(text=value)
    if not isinstance(value, (Reply, Error, BrokenStream, Hang)):
        raise TypeError(f"a script item is a Reply, Error, BrokenStream, Hang or str, not {value!r}")
    return value


# -- the server ----------------------------------------------------------------------------

_MAX_HEAD_BYTES = 64 * 1024
_MAX_BODY_BYTES = 64 * 1024 * 1024


class ScriptedModelServer:
    """Serves ``models`` on 127.0.0.1 (a free port unless ``port`` is given) while used
    as ``async with``; see the module docstring for what a script does."""

    def __init__(
        self,
        models: Iterable[str] = ("test-model",),
        *,
        api_key: str | None = None,
        responder: Responder | None = None,
        reasoning_field: str = "reasoning_content",
        tokenizer: Callable[[str], Sequence[str]] = split_words,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.models = tuple(models)
        self.api_key = api_key
        self.responder = responder
        self.reasoning_field = reasoning_field
        self.tokenizer = tokenizer
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        #: Called with each request as it is recorded (the command line's ``--log-requests``).
        self.on_request: Callable[[RecordedRequest], None] | None = None
        self.active_streams = 0
        self.peak_active_streams = 0
        #: Responses the client walked away from (closed the connection mid-answer).
        self.disconnects = 0
        #: TCP connections accepted: with keep-alive, far fewer than requests.
        self.connections_opened = 0
        self._scripts: dict[str, deque[ScriptItem]] = {model: deque() for model in self.models}
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    # -- the test's side

    def script(self, model: str, items: Iterable[ScriptItem | str]) -> None:
        """Append answers for ``model``; each chat request consumes one."""
        if model not in self._scripts:
            raise ValueError(f"model {model!r} is not served here; this server has {list(self.models)}")
        self._scripts[model].extend(_as_item(item) for item in items)

    def pending(self, model: str) -> int:
        """Script items not yet consumed (assert 0 to prove every answer was asked for)."""
        return len(self._scripts[model])

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return [request for request in self.requests if request.model == model]

    async def wait_for_requests(self, count: int, *, timeout: float = 5.0) -> None:
        await self._wait_until(lambda: len(self.requests) >= count, timeout, f"{count} requests")

    async def wait_for_disconnects(self, count: int = 1, *, timeout: float = 5.0) -> None:
        """Disconnects are seen asynchronously (the client's FIN), hence a wait."""
        await self._wait_until(lambda: self.disconnects >= count, timeout, f"{count} disconnects")

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the model server is not started: use `async with ScriptedModelServer(...)`")
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> ScriptedModelServer:
        # The default backlog (100) drops SYNs when a benchmark opens 200 connections at once.
        self._server = await asyncio.start_server(self._serve_connection, self.host, self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    async def __aenter__(self) -> ScriptedModelServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _notify(self) -> None:
        self._changed.set()

    async def _wait_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not condition():
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise TimeoutError(
                f"waited {timeout} s for {what}; saw {len(self.requests)} requests, "
                f"{self.disconnects} disconnects, {self.active_streams} active streams"
            ) from None

    # -- HTTP

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_opened += 1
        connection = _Connection(reader, writer)
        try:
            while True:
                try:
                    request = await connection.read_request()
                except _BadRequest as bad:
                    await connection.send_json(bad.status, _error_body(bad.status, str(bad)), keep_alive=False)
                    break
                if request is None:
                    break
                # Recorded before answering: a client that leaves at once was still asked.
                recorded = self._record(request)
                keep_alive = await connection.unless_peer_leaves(self._answer(connection, request, recorded))
                if keep_alive is None:
                    self.disconnects += 1
                    self._notify()
                if not keep_alive:
                    break
        except (ConnectionError, OSError):
            pass
        except Exception:  # a bug here must not pass silently as a dropped connection
            logger.exception("the scripted model server failed to answer")
        except asyncio.CancelledError:
            # Only close() cancels this task, and Python 3.11's start_server logs a
            # cancelled callback task as an error ("task.exception()" raises).
            pass
        finally:
            self._connections.discard(task)
            connection.close()

    def _record(self, http: _HttpRequest) -> RecordedRequest:
        try:
            body = json.loads(http.body) if http.body else {}
        except ValueError as exc:
            body, http.body_error = {}, f"invalid JSON body: {exc}"
        if not isinstance(body, dict):
            body, http.body_error = {}, "the body is not a JSON object"
        recorded = RecordedRequest(
            model=body.get("model"),
            messages=list(body.get("messages") or []),
            tools=list(body.get("tools") or []),
            stream=bool(body.get("stream")),
            body=body,
            headers=http.headers,
            path=http.target.split("?", 1)[0].rstrip("/"),
            received_at=time.monotonic(),
            method=http.method,
            raw=http.body,
        )
        self.requests.append(recorded)
        if self.on_request is not None:
            self.on_request(recorded)
        self._notify()
        return recorded

    async def _answer(self, connection: _Connection, http: _HttpRequest, recorded: RecordedRequest) -> bool:
        path, keep_alive = recorded.path, http.keep_alive

        def error(status: int, message: str, **kwargs: Any) -> Awaitable[bool]:
            return connection.send_json(status, _error_body(status, message, **kwargs), keep_alive=keep_alive)

        if self.api_key is not None and http.headers.get("authorization") != f"Bearer {self.api_key}":
            return await error(401, "")
        if http.method == "GET" and path == "/v1/models":
            models = [_model_object(model) for model in self.models]
            return await connection.send_json(200, {"object": "list", "data": models}, keep_alive=keep_alive)
        if http.method == "GET" and path.startswith("/v1/models/"):
            model = path.removeprefix("/v1/models/")
            if model in self.models:
                return await connection.send_json(200, _model_object(model), keep_alive=keep_alive)
            return await error(404, f"The model '{model}' does not exist", code="model_not_found")
        if http.method != "POST" or path != "/v1/chat/completions":
            served = "GET /v1/models or POST /v1/chat/completions"
            return await error(404, f"{http.method} {path} is not served here; try {served}")
        if http.body_error is not None:
            return await error(400, http.body_error)
        if not isinstance(recorded.model, str):
            return await error(400, "'model' is a required property")
        if recorded.model not in self._scripts:
            message = f"The model '{recorded.model}' does not exist; served: {list(self.models)}"
            return await error(404, message, code="model_not_found")
        if not recorded.messages:
            return await error(400, "'messages' is a required property and must not be empty")
        item = await self._next_item(recorded)
        return await _Answer(self, connection, recorded, item, keep_alive).play()

    async def _next_item(self, request: RecordedRequest) -> ScriptItem:
        assert request.model is not None
        queue = self._scripts[request.model]
        if queue:
            return queue.popleft()
        if self.responder is None:
            answered = len(self.requests_for(request.model)) - 1
            return Error(
                500,
                f"script exhausted for model {request.model!r} after {answered} requests: add items with "
                f"server.script({request.model!r}, [...]) or pass responder=",
                should_retry=False,
            )
        try:
            return _as_item(await await_me_maybe(self.responder(request)))
        except Exception as exc:  # the test's bug, shown to the test rather than lost in a log
            return Error(500, f"the responder raised {exc!r}", should_retry=False)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"


class _Answer:
    """One chat completion answer, streamed or whole."""

    def __init__(
        self,
        server: ScriptedModelServer,
        connection: _Connection,
        request: RecordedRequest,
        item: ScriptItem,
        keep_alive: bool,
    ) -> None:
        self.server = server
        self.connection = connection
        self.request = request
        self.item = item
        self.keep_alive = keep_alive
        self.completion_id = server._next_id("chatcmpl-")
        self.created = int(time.time())
        self.tokens_sent = 0

    async def play(self) -> bool:
        item, stream = self.item, self.request.stream
        if isinstance(item, Error):
            headers = {}
            if item.retry_after is not None:
                headers["retry-after"] = f"{item.retry_after:g}"
            if item.should_retry is not None:
                headers["x-should-retry"] = "true" if item.should_retry else "false"
            body = _error_body(item.status, item.message, type=item.type, code=item.code)
            return await self.connection.send_json(item.status, body, keep_alive=self.keep_alive, headers=headers)
        if isinstance(item, Hang):
            if stream and item.text:
                await self._stream(self._text_deltas(item.text), item.token_delay, end=item)
            await _forever()
        if isinstance(item, BrokenStream):
            if stream:
                await self._stream(self._text_deltas(item.text)[: item.after_chunks], item.token_delay, end=item)
            else:
                payload = _encode(self._completion(Reply(text=item.text)))
                head = _head(200, "application/json", {"content-length": str(len(payload))}, keep_alive=True)
                await self.connection.write(head + payload[: len(payload) // 2])
            return False
        assert isinstance(item, Reply)
        deltas = self._deltas(item)
        if stream:
            await self._stream(deltas, item.token_delay, item.first_token_delay, end=item)
            return self.keep_alive
        if deltas:
            await asyncio.sleep(item.first_token_delay + item.token_delay * (len(deltas) - 1))
        self.tokens_sent = len(deltas)
        return await self.connection.send_json(200, self._completion(item), keep_alive=self.keep_alive)

    def _text_deltas(self, text: str) -> list[dict[str, Any]]:
        return [{"content": token} for token in self.server.tokenizer(text)]

    def _deltas(self, reply: Reply) -> list[dict[str, Any]]:
        tokenize = self.server.tokenizer
        deltas: list[dict[str, Any]] = [{self.server.reasoning_field: token} for token in tokenize(reply.reasoning)]
        deltas += self._text_deltas(reply.text)
        for index, call in enumerate(reply.tool_calls):
            # OpenAI's shape: id, type and name once with empty arguments, then fragments.
            opening = {"index": index, "id": self._call_id(call, index), "type": "function"}
            deltas.append({"tool_calls": [{**opening, "function": {"name": call.name, "arguments": ""}}]})
            for fragment in tokenize(call.arguments_json()):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        return deltas

    def _call_id(self, call: ToolCall, index: int) -> str:
        # Stable per answer: the streamed and the whole answer must agree.
        return call.id or f"call_{self.completion_id.removeprefix('chatcmpl-')}_{index}"

    async def _stream(
        self, deltas: list[dict[str, Any]], token_delay: float, first_token_delay: float = 0.0, *, end: ScriptItem
    ) -> None:
        """Headers and deltas, then the ``end``: a Reply finishes, a Hang waits for the
        client to leave, a BrokenStream returns mid-body (the caller then closes)."""
        server = self.server
        headers = {"transfer-encoding": "chunked", "cache-control": "no-cache"}
        await self.connection.write(_head(200, "text/event-stream; charset=utf-8", headers, self.keep_alive))
        server.active_streams += 1
        server.peak_active_streams = max(server.peak_active_streams, server.active_streams)
        try:
            await self._event(self._chunk({"role": "assistant", "content": ""}))
            for number, delta in enumerate(deltas):
                delay = first_token_delay if number == 0 else token_delay
                if delay:
                    await asyncio.sleep(delay)
                await self._event(self._chunk(delta))
                self.tokens_sent += 1
            if isinstance(end, Hang):
                await _forever()
            if not isinstance(end, Reply):
                return
            tail = _sse(self._chunk({}, finish_reason=self._finish_reason(end)))
            if (self.request.body.get("stream_options") or {}).get("include_usage"):
                usage_chunk = {**self._chunk({}), "choices": [], "usage": self._usage(end)}
                tail += _sse(usage_chunk)
            # [DONE] and the last chunk in one write: the SDK gives the rest of the body
            # only 100 ms after [DONE] before it drops the connection from its pool.
            await self.connection.write(_chunked(tail + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        finally:
            server.active_streams -= 1
            server._notify()

    async def _event(self, payload: dict[str, Any]) -> None:
        await self.connection.write(_chunked(_sse(payload)))

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }

    def _finish_reason(self, reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _usage(self, reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            contents = [m.get("content") for m in self.request.messages]
            prompt = sum(len(split_words(c)) for c in contents if isinstance(c, str))
            completion = self.tokens_sent
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion(self, reply: Reply) -> dict[str, Any]:
        content = reply.text or (None if reply.tool_calls else "")
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if reply.reasoning:
            message[self.server.reasoning_field] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": self._call_id(call, index),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for index, call in enumerate(reply.tool_calls)
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.request.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": self._finish_reason(reply)}
            ],
            "usage": self._usage(reply),
        }


async def _forever() -> None:
    """Until cancelled, which happens when the client leaves."""
    await asyncio.get_running_loop().create_future()


def _model_object(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": "skald-tests"}


#: (type, code, message) as OpenAI sends them, for an Error that names only its status.
_ERROR_KINDS = {
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (scripted)."),
    500: ("server_error", None, "The server had an error while processing your request (scripted)."),
}


def _error_body(status: int, message: str, *, type: str | None = None, code: str | None = None) -> dict[str, Any]:
    fallback = ("server_error" if status >= 500 else "invalid_request_error", None, f"scripted error {status}")
    default_type, default_code, default_message = _ERROR_KINDS.get(status, fallback)
    return {
        "error": {
            "message": message or default_message,
            "type": type or default_type,
            "param": None,
            "code": code or default_code,
        }
    }


def _encode(payload: dict[str, Any]) -> bytes:
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate a test scripts: sent as its escape, as a real server would
        return json.dumps(payload, separators=(",", ":")).encode()


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + _encode(payload) + b"\n\n"


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: int, content_type: str, headers: dict[str, str], keep_alive: bool) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Scripted"
    connection = "keep-alive" if keep_alive else "close"
    lines = [f"HTTP/1.1 {status} {phrase}", f"content-type: {content_type}", f"connection: {connection}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _HttpRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool
    body_error: str | None = None


class _Connection:
    """One client connection. A pump reads all the time, so the end of the client's
    side (the SDK closing a stream on /stop, a timeout) is seen while an answer is
    still being written, not at the next write to a dead socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._buffer = bytearray()
        self._arrived = asyncio.Event()
        self.peer_gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pump = asyncio.create_task(self._pump_bytes())

    async def _pump_bytes(self) -> None:
        try:
            while chunk := await self._reader.read(65536):
                self._buffer += chunk
                self._arrived.set()
        except (ConnectionError, OSError):
            pass
        finally:
            if not self.peer_gone.done():
                self.peer_gone.set_result(None)
            self._arrived.set()

    async def _more(self) -> bool:
        if self.peer_gone.done():
            return False
        self._arrived.clear()
        await self._arrived.wait()
        return True

    async def read_request(self) -> _HttpRequest | None:
        """The next request, or ``None`` when the client closed the connection."""
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD_BYTES:
                raise _BadRequest(431, "request head too large")
            if not await self._more():
                return None
        head = bytes(self._buffer[:end]).decode("latin-1").lstrip("\r\n")
        del self._buffer[: end + 4]
        request_line, *header_lines = head.split("\r\n")
        try:
            method, target, version = request_line.split(" ")
        except ValueError:
            raise _BadRequest(400, f"malformed request line {request_line!r}") from None
        headers: dict[str, str] = {}
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon:
                raise _BadRequest(400, f"malformed header line {line!r}")
            name = name.strip().lower()
            headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
        if "transfer-encoding" in headers:
            raise _BadRequest(501, "chunked request bodies are not supported; send Content-Length")
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            raise _BadRequest(400, "invalid Content-Length") from None
        if not 0 <= length <= _MAX_BODY_BYTES:
            raise _BadRequest(413, f"Content-Length must be between 0 and {_MAX_BODY_BYTES}")
        while len(self._buffer) < length:
            if not await self._more():
                return None
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        return _HttpRequest(method, target, headers, body, keep_alive)

    async def unless_peer_leaves(self, answer: Awaitable[bool]) -> bool | None:
        """The answer's keep-alive verdict, or ``None`` when the client left first (the
        answer is then cancelled)."""
        task = asyncio.ensure_future(answer)
        try:
            done, _ = await asyncio.wait({task, self.peer_gone}, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                try:
                    return task.result()
                except (ConnectionError, OSError):
                    return None
            return None
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def send_json(
        self, status: int, payload: dict[str, Any], *, keep_alive: bool, headers: dict[str, str] | None = None
    ) -> bool:
        body = _encode(payload)
        extra = {"content-length": str(len(body)), **(headers or {})}
        await self.write(_head(status, "application/json", extra, keep_alive) + body)
        return keep_alive

    def close(self) -> None:
        self._pump.cancel()
        try:
            self._writer.close()  # flushes what was written (a BrokenStream's chunks) first
        except (ConnectionError, OSError, RuntimeError):
            pass


# -- command line --------------------------------------------------------------------------


def _items_from_json(model: str, items: list[Any]) -> list[ScriptItem | str]:
    kinds: dict[str, type] = {"reply": Reply, "error": Error, "broken_stream": BrokenStream, "hang": Hang}
    parsed: list[ScriptItem | str] = []
    for position, item in enumerate(items):
        if isinstance(item, str):
            parsed.append(item)
            continue
        if not (isinstance(item, dict) and len(item) == 1 and next(iter(item)) in kinds):
            expected = f"a string or an object with one key, one of {sorted(kinds)}"
            raise ValueError(f"script[{model!r}][{position}]: expected {expected}, got {item!r}")
        (kind, fields), = item.items()
        fields = dict(fields)
        if kind == "reply":
            fields["tool_calls"] = tuple(ToolCall(**call) for call in fields.get("tool_calls", ()))
            if fields.get("usage") is not None:
                fields["usage"] = tuple(fields["usage"])
        try:
            parsed.append(kinds[kind](**fields))
        except TypeError as exc:
            raise ValueError(f"script[{model!r}][{position}]: {exc}") from None
    return parsed


def server_from_script_file(
    path: Path, *, api_key: str | None = None, host: str = "127.0.0.1", port: int = 0
) -> ScriptedModelServer:
    """The server the command line runs; ``api_key`` overrides the file's."""
    config = json.loads(Path(path).read_text(encoding="utf-8"))
    scripts: dict[str, list[Any]] = config.get("script", {})
    responders = {None: None, "echo": echo_last_user_message}
    if config.get("responder") not in responders:
        raise ValueError(f"unknown responder {config['responder']!r}; known: 'echo'")
    server = ScriptedModelServer(
        config.get("models") or list(scripts) or ["test-model"],
        api_key=api_key or config.get("api_key"),
        responder=responders[config.get("responder")],
        reasoning_field=config.get("reasoning_field", "reasoning_content"),
        host=host,
        port=port,
    )
    for model, items in scripts.items():
        server.script(model, _items_from_json(model, items))
    return server


def request_line(request: RecordedRequest) -> str:
    """One request as ``--log-requests`` prints it: which model, how many messages and
    which tools the host offered (the question a plugin author trying a tool by hand
    has: did my tool reach the model?). Never the messages' text or the headers."""
    functions = [tool.get("function") if isinstance(tool, dict) else None for tool in request.tools]
    names = [str(f.get("name", "?")) if isinstance(f, dict) else "?" for f in functions]
    return f"{request.method} {request.path} model={request.model} messages={len(request.messages)} tools={','.join(names) or '-'}"


async def _serve_until_terminated(server: ScriptedModelServer) -> None:
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stopped.set)
    async with server:
        print(server.base_url, flush=True)
        await stopped.wait()


def main(argv: Sequence[str] | None = None) -> None:
    summary = __doc__.split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m skald_host.testing.model_server", description=summary)
    parser.add_argument("--script-file", type=Path, help="JSON script (format: this module's docstring)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port; the base URL is printed")
    parser.add_argument("--api-key", help="require 'Authorization: Bearer <key>'")
    parser.add_argument(
        "--log-requests", action="store_true", help="print each request's model, message count and tool names"
    )
    args = parser.parse_args(argv)
    if args.script_file:
        server = server_from_script_file(args.script_file, api_key=args.api_key, host=args.host, port=args.port)
    else:
        # No script: an echo server, handy for poking at by hand.
        server = ScriptedModelServer(
            api_key=args.api_key, responder=echo_last_user_message, host=args.host, port=args.port
        )
    if args.log_requests:
        server.on_request = lambda request: print(request_line(request), flush=True)
    asyncio.run(_serve_until_terminated(server))


if __name__ == "__main__":
    main()


def self_signed_certificate(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no public root vouches for, and its key: the
    paths of both PEM files written in ``directory`` (a model server on the admin's own
    network, behind their own CA; serve it with ``ssl.SSLContext.load_cert_chain``)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "skald test model server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return str(cert_path), str(key_path)

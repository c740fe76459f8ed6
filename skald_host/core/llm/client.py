"""One model call through the ``openai`` SDK, streamed.

Token deltas go to ``on_delta`` as a best-effort side channel; the returned
``ModelTurn`` is the authoritative result. Errors become ``ModelError`` carrying the
real HTTP status, because retriability keys on the status, never on message text
(a model name containing "404" must not change anything): 401/403/404/422 never fall
back; 400, 429, 5xx and network failures do.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
import anyio
import openai
import orjson

from skald_host.core.files.media import text_only
from skald_host.core.llm.catalog import ModelChoice
from skald_host.core.llm.sse import SSEParser

try:  # the SDK's own HTTP library: httpx2 from openai 3, httpx before
    import httpx2 as http
except ImportError:  # pragma: no cover - older SDKs
    import httpx as http  # type: ignore[no-redef]

#: What a broken body stream raises while it is read (the SDK maps these the same way;
#: the aiohttp transport maps most of its own errors to these, not every one).
STREAM_ERRORS = (http.RequestError, http.StreamError, anyio.EndOfStream, ssl.SSLError, aiohttp.ClientError)

NEVER_RETRY = frozenset({401, 403, 404, 422})

DeltaSink = Callable[[str, str], None]  # (kind: "content" | "reasoning", text)


_WIRE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # one, not one per call


def wire_json(value: Any) -> bytes:
    """JSON as the SDK encodes a request body (``openapi_dumps``): pieces encoded here
    and joined are, byte for byte, the body the SDK would have made of the whole."""
    return _WIRE_ENCODER.encode(value).encode()


def _loads(text: str) -> Any:
    """A stream chunk's JSON: orjson, ~4x faster than ``json`` on a chunk of one token.
    What orjson refuses and ``json`` reads (NaN, a lone surrogate escape) is read as
    before."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


#: What the caller of ``complete`` wants called once its request is on its way.
_ON_SENT: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar("skald_model_request_sent", default=None)


async def _request_hook(_request: Any) -> None:
    """httpx calls this just before the transport sends. The callback runs two loop
    passes later, once the request is written: aiohttp writes the body from a task of
    its own, whose first step (before Python 3.12's eager tasks) is the next pass."""
    on_sent = _ON_SENT.get()
    if on_sent is not None:
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, on_sent)


class ModelError(Exception):
    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def retriable(self) -> bool:
        return self.status not in NEVER_RETRY


@dataclass
class ToolCallRequest:
    id: str
    name: str
    arguments: str


@dataclass
class ModelTurn:
    model: str
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish_reason: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    first_token_ms: int | None = None
    latency_ms: int = 0


class ModelClients:
    """One SDK client per (base URL, key), shared by every member's requests: the SDK
    pools connections, and a client holds no per-member state."""

    def __init__(self, timeout: float = 600.0) -> None:
        self._clients: dict[tuple[str, str | None], openai.AsyncOpenAI] = {}
        self._chat_urls: dict[tuple[str, str | None], str] = {}
        self._timeout = timeout

    def client(self, choice: ModelChoice) -> openai.AsyncOpenAI:
        key = (choice.base_url, choice.api_key)
        client = self._clients.get(key)
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=choice.base_url, api_key=choice.api_key or "not-needed", max_retries=0, timeout=self._timeout,
                # The SDK's aiohttp transport (its ``aiohttp`` extra): the same client and
                # requests, with aiohttp's C parser under them instead of httpcore and h11
                # in Python. Measured in the chat benchmark: ~0.5 ms less host CPU per
                # model round, time to first token p99 under 200 streams 1.5 s -> 0.9 s.
                http_client=openai.DefaultAioHttpClient(timeout=self._timeout, event_hooks={"request": [_request_hook]}),
            )
            self._clients[key] = client
            # The completions endpoint as an absolute URL, which the SDK takes as it is:
            # a path relative to the base URL is parsed, joined and parsed again on
            # every request (~5% of the loop's time in the chat benchmark's turns).
            # A query in the base URL (``?api-version=``) stays the endpoint's query;
            # the SDK's joining put the path after it.
            path, _, query = str(client.base_url).partition("?")
            self._chat_urls[key] = f"{path}chat/completions" + (f"?{query}" if query else "")
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
        self._chat_urls.clear()

    async def complete(
        self,
        choice: ModelChoice,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: DeltaSink | None = None,
        *,
        images: bool = True,
        on_sent: Callable[[], None] | None = None,
        encoded: tuple[bytes, bytes] | None = None,
    ) -> ModelTurn:
        """``images`` False: the caller knows no message carries image parts (no need to
        look through a long history for them). ``on_sent``: called once the request
        has gone out (work that may wait until then, off the request's path).
        ``encoded``: ``messages`` and ``tools`` already as JSON arrays (``wire_json``),
        kept from earlier rounds; a round then encodes only what it adds."""
        if images and not choice.vision:  # images of the turn stay path blocks for this model (fallback too)
            stripped = text_only(messages)
            if stripped is not messages:
                messages, encoded = stripped, None
        started = time.perf_counter()
        turn = ModelTurn(model=choice.model)
        calls: dict[int, dict[str, Any]] = {}
        messages_json, tools_json = encoded or (wire_json(messages), wire_json(tools))
        # The body as the SDK's json_data would encode it: its keys in this order.
        body = b'{"model":%s,"messages":%s,"stream":true,"stream_options":{"include_usage":true}%s}' % (
            wire_json(choice.model), messages_json, b',"tools":' + tools_json if tools else b"",
        )
        try:
            # Through the SDK's client (its pool, auth, headers, status errors), but with
            # the body as it is and the stream read as plain SSE: ``create`` walks every
            # message through its typed transform (~150 ms for 1,000 messages) and builds
            # an object per chunk, work a relay does not need.
            sent = _ON_SENT.set(on_sent)
            try:
                client = self.client(choice)
                url = self._chat_urls[(choice.base_url, choice.api_key)]
                response = await client.post(url, content=body, cast_to=http.Response, stream=True)
            finally:
                _ON_SENT.reset(sent)
            try:
                # The body's bytes as they came off the socket (decoded only if the
                # provider compressed them), each chunk's events handled together:
                # their deltas reach ``on_delta`` joined, one per channel in turn.
                identity = response.headers.get("content-encoding", "identity").strip().lower() in ("", "identity")
                parser = SSEParser()
                deltas: list[list[str]] = []
                async for raw in response.aiter_raw() if identity else response.aiter_bytes():
                    for data in parser.feed(raw):
                        if data.startswith("[DONE]"):
                            continue  # read to the end, so the connection goes back to the pool
                        chunk = _loads(data)
                        if not isinstance(chunk, dict):
                            raise ModelError("the model sent a malformed stream chunk", None)
                        if chunk.get("error"):
                            error = chunk["error"]
                            message = error.get("message") if isinstance(error, dict) else None
                            raise ModelError(f"the model failed mid-stream: {message or 'an error occurred during streaming'}"[:500], None)
                        self._chunk(turn, chunk, calls, started, deltas)
                    if deltas:
                        if on_delta:
                            for channel, *texts in deltas:
                                on_delta(channel, "".join(texts))
                        deltas.clear()
            finally:
                await response.aclose()
        except openai.APIStatusError as exc:
            raise ModelError(_message(exc), exc.status_code) from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise ModelError(f"the model could not be reached: {type(exc).__name__}", None) from None
        except STREAM_ERRORS as exc:
            raise ModelError(f"the model's stream broke: {type(exc).__name__}", None) from None
        except (ValueError, TypeError, AttributeError) as exc:  # a chunk that is not the documented shape
            raise ModelError(f"the model sent a malformed stream chunk: {type(exc).__name__}", None) from None
        except openai.APIError as exc:
            raise ModelError(f"the model call failed: {exc.message}", None) from None
        turn.tool_calls = [
            ToolCallRequest(slot["id"] or f"call_{index}", slot["name"], slot["arguments"] or "{}")
            for index, slot in sorted(calls.items())
        ]
        turn.latency_ms = int((time.perf_counter() - started) * 1000)
        return turn

    def _chunk(
        self, turn: ModelTurn, chunk: dict[str, Any], calls: dict[int, dict[str, Any]], started: float, deltas: list[list[str]]
    ) -> None:
        """One ``chat.completion.chunk``, as the OpenAI streaming format documents it.
        Its text goes to ``deltas``: ``[channel, text, ...]`` runs, a run per channel in
        the order they came (reasoning, then content, then reasoning again is three)."""
        usage = chunk.get("usage")
        if usage:
            turn.tokens_in = usage.get("prompt_tokens")
            turn.tokens_out = usage.get("completion_tokens")
        choices = chunk.get("choices")
        if not choices:
            return
        choice = choices[0]
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            self._first(turn, started)
            turn.reasoning += reasoning
            if deltas and deltas[-1][0] == "reasoning":
                deltas[-1].append(reasoning)
            else:
                deltas.append(["reasoning", reasoning])
        content = delta.get("content")
        if content:
            self._first(turn, started)
            turn.content += content
            if deltas and deltas[-1][0] == "content":
                deltas[-1].append(content)
            else:
                deltas.append(["content", content])
        for call in delta.get("tool_calls") or ():
            self._first(turn, started)
            slot = calls.setdefault(call.get("index", 0), {"id": None, "name": "", "arguments": ""})
            if call.get("id"):
                slot["id"] = call["id"]
            function = call.get("function")
            if function:
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
        if choice.get("finish_reason"):
            turn.finish_reason = choice["finish_reason"]

    @staticmethod
    def _first(turn: ModelTurn, started: float) -> None:
        if turn.first_token_ms is None:
            turn.first_token_ms = int((time.perf_counter() - started) * 1000)

    async def list_models(self, choice: ModelChoice, timeout: float = 10.0) -> list[str]:
        """The provider's model names — a connection test, so it gives up quickly
        instead of hanging an admin page on an address that never answers."""
        try:
            page = await self.client(choice).with_options(timeout=timeout).models.list()
        except openai.APIStatusError as exc:
            raise ModelError(_message(exc), exc.status_code) from None
        except openai.APIError as exc:
            raise ModelError(f"the provider could not be reached: {type(exc).__name__}", None) from None
        # Some OpenAI-compatible servers leave out ``id`` (naming a model "name" or
        # "model") or send it null: a name is what the admin can type, never "null".
        names = set()
        for entry in page.data or ():
            extra = getattr(entry, "model_extra", None) or {}
            name = getattr(entry, "id", None) or extra.get("name") or extra.get("model")
            if isinstance(name, str) and name.strip():
                names.add(name.strip())
        return sorted(names)


def _message(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
        detail = body.get("error", {}).get("message") if isinstance(body, dict) else None
    except (ValueError, json.JSONDecodeError, AttributeError):
        detail = None
    return f"HTTP {exc.status_code}: {detail or 'the model refused the request'}"[:500]

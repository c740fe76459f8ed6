"""One model call, streamed: the provider's chat completions endpoint over HTTP.

The streamed request goes straight through ``aiohttp`` (the HTTP library under the
``openai`` SDK's own aiohttp transport, which the host used before): the body is bytes
the host encoded, the answer is read as plain server-sent events (``sse``), so the
SDK's request machinery had nothing left to do but cost. In the chat benchmark it did
cost: per request a validated options model, header merging, an httpx request and
response wrapped around aiohttp's, and per network chunk three async iterators nested;
200 concurrent streams waited for it (time to first token p99 ~1.2 s -> ~0.76 s in the
same run). The SDK stays where its typed answers are worth it: the
model list of a connection test (``list_models``).

Token deltas go to ``on_delta`` as a best-effort side channel; the returned
``ModelTurn`` is the authoritative result. Errors become ``ModelError`` carrying the
real HTTP status, because retriability keys on the status, never on message text
(a model name containing "404" must not change anything): 401/403/404/422 never fall
back; 400, 429, 5xx and network failures do. Nothing here retries: a retry is the
caller's deliberate, logged decision (a paid provider is never billed twice silently).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from types import SimpleNamespace
from typing import Any, Callable

import aiohttp
import certifi
import openai
import orjson

from skald_host.core.files.media import text_only
from skald_host.core.llm.catalog import ModelChoice
from skald_host.core.llm.sse import SSEParser
from skald_host.core.text import encodable, surrogates_escaped

#: What a broken or stalled body stream raises while it is read.
STREAM_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, ssl.SSLError, ConnectionError)

NEVER_RETRY = frozenset({401, 403, 404, 422})

#: Connections open at once to all providers together (the SDK's default too).
CONNECTION_LIMIT = 1000

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


def _user_agent() -> str:
    try:
        return f"skald/{version('skald-host')}"
    except PackageNotFoundError:
        return "skald"


async def _body_sent(_session: Any, context: SimpleNamespace, _params: Any) -> None:
    """aiohttp's trace signal once the request's body is written to the socket: the
    request's ``on_sent`` (once: a body written in parts would signal each)."""
    on_sent = context.trace_request_ctx
    if on_sent is not None:
        context.trace_request_ctx = None
        on_sent()


class ModelError(Exception):
    """A model call that failed: the message in English (the log, the model's own
    context); ``code`` and ``values`` say it in the member's language (``error.<code>``;
    ``values`` carry only the provider's own words and the HTTP status)."""

    def __init__(self, message: str, status: int | None, *, code: str = "model_failed", values: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.values = {"detail": message, **(values or {})}

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
    #: The catalog entry that answered (``ModelChoice.id``): two providers may serve
    #: the same model name, and the entry says which one (its label, its provider).
    model_id: str | None = None
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish_reason: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    first_token_ms: int | None = None
    latency_ms: int = 0


def trust_roots() -> ssl.SSLContext:
    """certifi's roots, plus the files ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` name (httpx,
    under the SDK, honours them too)."""
    context = ssl.create_default_context(cafile=certifi.where())
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    cafile = cafile if cafile and os.path.isfile(cafile) else None
    capath = capath if capath and os.path.isdir(capath) else None
    if cafile or capath:
        context.load_verify_locations(cafile=cafile, capath=capath)
    return context


class ModelClients:
    """The HTTP connections to the model providers, shared by every member's requests
    (they hold no per-member state): one ``aiohttp`` session for the streamed requests,
    pooling connections per host, and one SDK client per (base URL, key) for listing
    models."""

    def __init__(self, timeout: float = 600.0) -> None:
        self._clients: dict[tuple[str, str | None], openai.AsyncOpenAI] = {}
        self._endpoints: dict[tuple[str, str | None], tuple[str, dict[str, str]]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._opening = asyncio.Lock()  # one session, however many first requests race for it
        self._timeout = timeout

    def client(self, choice: ModelChoice) -> openai.AsyncOpenAI:
        """The SDK's client for ``choice``'s provider (its typed model list)."""
        key = (choice.base_url, choice.api_key)
        client = self._clients.get(key)
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=choice.base_url, api_key=choice.api_key or "not-needed", max_retries=0, timeout=self._timeout,
                http_client=openai.DefaultAioHttpClient(timeout=self._timeout),
            )
            self._clients[key] = client
        return client

    def _endpoint(self, choice: ModelChoice) -> tuple[str, dict[str, str]]:
        """The completions endpoint of ``choice``'s provider and the request's headers,
        worked out once per provider. The endpoint is the base URL's path with
        ``chat/completions`` after it; a query in the base URL (``?api-version=``) stays
        the endpoint's query."""
        key = (choice.base_url, choice.api_key)
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            path, _, query = choice.base_url.partition("?")
            url = path.rstrip("/") + "/chat/completions" + (f"?{query}" if query else "")
            headers = {
                "Authorization": f"Bearer {choice.api_key or 'not-needed'}",
                "Content-Type": "application/json",
                "Accept": "text/event-stream",
                "User-Agent": _user_agent(),
            }
            endpoint = self._endpoints[key] = (url, headers)
        return endpoint

    async def _http(self) -> aiohttp.ClientSession:
        """The session of the streamed requests, made on first use (inside the loop).
        The SDK's transport settings: its timeout for connecting and for each read (a
        stream may run long; a silent one ends after ``timeout``), certifi's roots, no
        proxy from the environment, bytes as they came (decompressed only if the
        provider compressed them). ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` add a private
        CA (a model server inside the network), as they do for the SDK. The roots are
        parsed in a thread (~20 ms of CPU the loop's other members would wait for)."""
        if self._session is None or self._session.closed:
            async with self._opening:
                if self._session is None or self._session.closed:
                    context = await asyncio.to_thread(trust_roots)
                    trace = aiohttp.TraceConfig()
                    trace.on_request_chunk_sent.append(_body_sent)
                    self._session = aiohttp.ClientSession(
                        connector=aiohttp.TCPConnector(limit=CONNECTION_LIMIT, ssl=context),
                        timeout=aiohttp.ClientTimeout(total=None, connect=self._timeout, sock_connect=self._timeout, sock_read=self._timeout),
                        trace_configs=[trace],
                    )
        return self._session

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
        self._endpoints.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None

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
        turn = ModelTurn(model=choice.model, model_id=choice.id)
        calls: dict[int, dict[str, Any]] = {}
        messages_json, tools_json = encoded or (wire_json(messages), wire_json(tools))
        # The body as the SDK's json_data would encode it: its keys in this order.
        body = b'{"model":%s,"messages":%s,"stream":true,"stream_options":{"include_usage":true}%s}' % (
            wire_json(choice.model), messages_json, b',"tools":' + tools_json if tools else b"",
        )
        url, headers = self._endpoint(choice)
        try:
            response = await (await self._http()).post(url, data=body, headers=headers, allow_redirects=False, trace_request_ctx=on_sent)
        except asyncio.TimeoutError:
            raise ModelError("the model could not be reached: it did not answer in time", None, code="model_timeout") from None
        except (aiohttp.ClientError, ssl.SSLError, OSError) as exc:
            raise ModelError(f"the model could not be reached: {type(exc).__name__}", None, code="model_unreachable") from None
        whole = False  # read to its end: the connection goes back to the pool
        try:
            if response.status >= 300:
                raise _status_error(response.status, await _read_bounded(response))
            # The body's bytes as they came off the socket (decompressed only if the
            # provider compressed them), each network chunk's events handled together:
            # their deltas reach ``on_delta`` joined, one per channel in turn.
            parser = SSEParser()
            deltas: list[list[str]] = []
            async for raw in response.content.iter_any():
                for data in parser.feed(raw):
                    if data.startswith("[DONE]"):
                        continue  # read to the end, so the connection goes back to the pool
                    chunk = _loads(data)
                    if not isinstance(chunk, dict):
                        raise ModelError("the model sent a malformed stream chunk", None, code="model_malformed")
                    if chunk.get("error"):
                        error = chunk["error"]
                        message = error.get("message") if isinstance(error, dict) else None
                        raise ModelError(f"the model failed mid-stream: {message or 'an error occurred during streaming'}"[:500], None,
                                         code="model_stream_error", values={"reason": str(message or "")[:400]})
                    self._chunk(turn, chunk, calls, started, deltas)
                if deltas:
                    if on_delta:
                        for channel, *texts in deltas:
                            on_delta(channel, "".join(texts))
                    deltas.clear()
            whole = True
        except STREAM_ERRORS as exc:
            raise ModelError(f"the model's stream broke: {type(exc).__name__}", None, code="model_stream_broke") from None
        except (ValueError, TypeError, AttributeError) as exc:  # a chunk that is not the documented shape
            raise ModelError(f"the model sent a malformed stream chunk: {type(exc).__name__}", None, code="model_malformed") from None
        finally:
            if whole:
                response.release()
            else:  # a stream left unread (a Stop, a failure): its connection is dropped, so the provider stops too
                response.close()
        turn.tool_calls = [
            # A lone surrogate escape in a chunk is a raw one here, which no write of the answer takes.
            ToolCallRequest(encodable(slot["id"] or f"call_{index}"), encodable(slot["name"]), surrogates_escaped(slot["arguments"] or "{}"))
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
        started = time.monotonic()
        try:
            page = await self.client(choice).with_options(timeout=timeout).models.list()
        except openai.APIStatusError as exc:
            try:
                body = exc.response.content
            except Exception:  # noqa: BLE001 - a response without a readable body says its status
                body = b""
            error = _status_error(exc.status_code, body)
            if exc.status_code == 404:
                # No model list at this address: most often a base URL without its API
                # path (http://host:8000 for http://host:8000/v1), which a bare
                # "refused (HTTP 404)" gave no hint of (newcomer report 7).
                raise ModelError(str(error), 404, code="model_list_not_found", values=error.values) from None
            raise error from None
        except openai.APIError as exc:
            # The SDK's aiohttp transport calls a refused connection a ConnectTimeout: a
            # "timeout" long before the timeout is a refusal, said as such.
            if isinstance(exc, openai.APITimeoutError) and time.monotonic() - started >= timeout * 0.9:
                raise ModelError("the provider did not answer in time", None, code="model_timeout") from None
            raise connection_failure(exc) from None
        # Some OpenAI-compatible servers leave out ``id`` (naming a model "name" or
        # "model") or send it null: a name is what the admin can type, never "null".
        names = set()
        for entry in page.data or ():
            extra = getattr(entry, "model_extra", None) or {}
            name = getattr(entry, "id", None) or extra.get("name") or extra.get("model")
            if isinstance(name, str) and name.strip():
                names.add(name.strip())
        return sorted(names)


def connection_failure(exc: BaseException) -> ModelError:
    """A connection that never carried a request, said as what went wrong where: refused,
    a name DNS does not know, TLS (most often https:// to a server that speaks plain http)
    or a certificate not trusted. aiohttp's own text ("Cannot connect to host x:443
    ssl:default [...]") was the page's headline; it stays as ``why``, the detail an admin
    can search for, not the first thing read."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, aiohttp.ClientConnectorError):
        cause = cause.__cause__ or cause.__context__
    why = str(exc.__cause__ or exc)[:300] or type(exc).__name__
    if cause is None:
        return ModelError(f"the provider could not be reached: {why}", None, code="model_unreachable", values={"why": why})
    where = {"why": why, "host": cause.host, "port": cause.port}
    if isinstance(cause, aiohttp.ClientConnectorDNSError):
        code, said = "model_host_not_found", f"the provider's host name {cause.host!r} was not found"
    elif isinstance(cause, aiohttp.ClientConnectorCertificateError):
        code, said = certificate_failure(cause.certificate_error, cause.host)
    elif isinstance(cause, aiohttp.ClientConnectorSSLError):
        code, said = "model_tls_failed", f"the secure connection (TLS) to {cause.host} port {cause.port} failed"
    elif isinstance(cause.os_error, ConnectionRefusedError):
        code, said = "model_connection_refused", f"{cause.host} refused the connection on port {cause.port}"
    else:
        code, said = "model_cannot_connect", f"could not connect to {cause.host} port {cause.port}"
    return ModelError(f"the provider could not be reached: {said}: {why}", None, code=code, values=where)


# OpenSSL's verify codes (x509_vfy.h) for a certificate that is trusted but wrong for
# this connection. aiohttp raises one error for all of them and for an untrusted issuer;
# the advice for an untrusted issuer (SSL_CERT_FILE) does nothing for these.
CERTIFICATE_NOT_YET_VALID = 9
CERTIFICATE_EXPIRED = 10
CERTIFICATE_NAME_MISMATCH = (62, 64)  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


def certificate_failure(error: BaseException, host: str) -> tuple[str, str]:
    """The code and the log's words for a certificate the connection refused, by OpenSSL's
    own verdict: a certificate made for another name (a self-signed one without
    subjectAltName) was said to be untrusted, with advice to name its CA in SSL_CERT_FILE,
    which the admin had done already (newcomer report)."""
    verify_code = getattr(error, "verify_code", None)
    if verify_code in CERTIFICATE_NAME_MISMATCH:
        return "model_certificate_wrong_name", f"the certificate of {host} was made for another name"
    if verify_code == CERTIFICATE_EXPIRED:
        return "model_certificate_expired", f"the certificate of {host} has expired"
    if verify_code == CERTIFICATE_NOT_YET_VALID:
        return "model_certificate_not_yet_valid", f"the certificate of {host} is not valid yet"
    return "model_certificate_untrusted", f"the certificate of {host} was not trusted"


async def _read_bounded(response: aiohttp.ClientResponse, limit: int = 65536) -> bytes:
    """An error answer's body, at most ``limit`` bytes of it (what it says is in the
    first few hundred)."""
    body = b""
    try:
        while len(body) < limit and (chunk := await response.content.read(limit - len(body))):
            body += chunk
    except STREAM_ERRORS:
        pass
    return body


def _status_message(status: int, body: bytes) -> str:
    """An error answer said as the member's failure: its status and the provider's own
    ``error.message`` when it sent one (OpenAI's error shape)."""
    return f"HTTP {status}: {_provider_words(body) or 'the model refused the request'}"[:500]


def _provider_words(body: bytes) -> str | None:
    try:
        parsed = json.loads(body)
        error = parsed.get("error") if isinstance(parsed, dict) else None
        detail = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    except (ValueError, UnicodeDecodeError):
        detail = None
    return str(detail) if detail else None


def _status_error(status: int, body: bytes) -> ModelError:
    """A refusal by status; the provider's own words (if any) travel as they are."""
    words = _provider_words(body)
    return ModelError(_status_message(status, body), status, code="model_refused",
                      values={"status": status, "reason": f": {words[:400]}" if words else ""})


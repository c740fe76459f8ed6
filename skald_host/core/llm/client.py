"""One model call through the ``openai`` SDK, streamed.

Token deltas go to ``on_delta`` as a best-effort side channel; the returned
``ModelTurn`` is the authoritative result. Errors become ``ModelError`` carrying the
real HTTP status, because retriability keys on the status, never on message text
(a model name containing "404" must not change anything): 401/403/404/422 never fall
back; 400, 429, 5xx and network failures do.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import openai

from skald_host.core.files.media import text_only
from skald_host.core.llm.catalog import ModelChoice

NEVER_RETRY = frozenset({401, 403, 404, 422})

DeltaSink = Callable[[str, str], None]  # (kind: "content" | "reasoning", text)


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
        self._timeout = timeout

    def client(self, choice: ModelChoice) -> openai.AsyncOpenAI:
        key = (choice.base_url, choice.api_key)
        client = self._clients.get(key)
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=choice.base_url, api_key=choice.api_key or "not-needed", max_retries=0, timeout=self._timeout
            )
            self._clients[key] = client
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def complete(
        self,
        choice: ModelChoice,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: DeltaSink | None = None,
    ) -> ModelTurn:
        if not choice.vision:  # images of the turn stay path blocks for this model (fallback too)
            messages = text_only(messages)
        started = time.perf_counter()
        turn = ModelTurn(model=choice.model)
        calls: dict[int, dict[str, Any]] = {}
        request: dict[str, Any] = {
            "model": choice.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = tools
        try:
            stream = await self.client(choice).chat.completions.create(**request)
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        turn.tokens_in = chunk.usage.prompt_tokens
                        turn.tokens_out = chunk.usage.completion_tokens
                    if not chunk.choices:
                        continue
                    choice_delta = chunk.choices[0]
                    delta = choice_delta.delta
                    extra = getattr(delta, "model_extra", None) or {}
                    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                    if reasoning:
                        self._first(turn, started)
                        turn.reasoning += reasoning
                        if on_delta:
                            on_delta("reasoning", reasoning)
                    if delta.content:
                        self._first(turn, started)
                        turn.content += delta.content
                        if on_delta:
                            on_delta("content", delta.content)
                    for call in delta.tool_calls or ():
                        self._first(turn, started)
                        slot = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                        if call.id:
                            slot["id"] = call.id
                        if call.function is not None:
                            if call.function.name:
                                slot["name"] += call.function.name
                            if call.function.arguments:
                                slot["arguments"] += call.function.arguments
                    if choice_delta.finish_reason:
                        turn.finish_reason = choice_delta.finish_reason
        except openai.APIStatusError as exc:
            raise ModelError(_message(exc), exc.status_code) from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise ModelError(f"the model could not be reached: {type(exc).__name__}", None) from None
        except openai.APIError as exc:
            raise ModelError(f"the model call failed: {exc.message}", None) from None
        turn.tool_calls = [
            ToolCallRequest(slot["id"] or f"call_{index}", slot["name"], slot["arguments"] or "{}")
            for index, slot in sorted(calls.items())
        ]
        turn.latency_ms = int((time.perf_counter() - started) * 1000)
        return turn

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
        return sorted(m.id for m in page.data)


def _message(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
        detail = body.get("error", {}).get("message") if isinstance(body, dict) else None
    except (ValueError, json.JSONDecodeError, AttributeError):
        detail = None
    return f"HTTP {exc.status_code}: {detail or 'the model refused the request'}"[:500]

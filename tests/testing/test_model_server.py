"""The scripted model server, driven through the real ``openai`` SDK: what the host's agent
loop and the benchmarks will see on the wire."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from skald_host.testing.model_server import (
    BrokenStream,
    Error,
    Hang,
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    ToolCall,
    echo_last_user_message,
)

ROOT = Path(__file__).resolve().parents[2]


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


HELLO = user("Hello")


def sdk(server: ScriptedModelServer, **options) -> openai.AsyncOpenAI:
    options.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=options.pop("api_key", "x"), **options)


async def stream_chunks(client: openai.AsyncOpenAI, model: str = "test-model", **request) -> list:
    request.setdefault("messages", HELLO)
    stream = await client.chat.completions.create(model=model, stream=True, **request)
    return [chunk async for chunk in stream]


def text_of(chunks: list) -> str:
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


async def test_models_endpoint_lists_the_configured_models():
    async with ScriptedModelServer(models=("model-a", "model-b")) as server, sdk(server) as client:
        assert [model.id async for model in client.models.list()] == ["model-a", "model-b"]
        assert (await client.models.retrieve("model-b")).id == "model-b"
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("model-c")


async def test_non_streaming_reply_returns_the_text_and_usage():
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Reply("Hello there, friend.", usage=(7, 4))])
        completion = await client.chat.completions.create(model="test-model", messages=HELLO)
    choice = completion.choices[0]
    assert choice.message.content == "Hello there, friend."
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "stop"
    assert completion.model == "test-model"
    usage = completion.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (7, 4, 11)


async def test_streamed_text_arrives_token_by_token_with_the_scripted_delay():
    text = "The quick brown fox jumps over the lazy dog."
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Reply(text, token_delay=0.03)])
        started = time.monotonic()
        chunks = await stream_chunks(client)
        elapsed = time.monotonic() - started
    content_chunks = [chunk for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    assert text_of(chunks) == text
    assert len(content_chunks) == 9  # one per word
    assert elapsed >= 8 * 0.03 * 0.9  # 8 gaps between 9 tokens, loosely
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert len({chunk.id for chunk in chunks}) == 1
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)


async def test_first_token_delay_holds_back_the_first_token_only():
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Reply("a b c", first_token_delay=0.3)])
        stream = await client.chat.completions.create(model="test-model", messages=HELLO, stream=True)
        arrivals = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                arrivals.append(time.monotonic())
    assert len(arrivals) == 3
    assert arrivals[-1] - arrivals[0] < 0.2


async def test_reasoning_streams_first_as_reasoning_content():
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Reply("Four.", reasoning="Two plus two is four.")])
        chunks = await stream_chunks(client)
    deltas = [chunk.choices[0].delta for chunk in chunks]
    reasoning = [d.reasoning_content for d in deltas if getattr(d, "reasoning_content", None)]
    assert "".join(reasoning) == "Two plus two is four."
    assert len(reasoning) == 5
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    last_reasoning = max(i for i, d in enumerate(deltas) if getattr(d, "reasoning_content", None))
    assert last_reasoning < first_content
    assert text_of(chunks) == "Four."


async def test_reasoning_field_can_be_named_reasoning():
    async with ScriptedModelServer(reasoning_field="reasoning") as server, sdk(server) as client:
        server.script("test-model", [Reply("Yes.", reasoning="Let me think."), Reply("Yes.", reasoning="Hm.")])
        chunks = await stream_chunks(client)
        completion = await client.chat.completions.create(model="test-model", messages=HELLO)
    assert "".join(getattr(c.choices[0].delta, "reasoning", None) or "" for c in chunks) == "Let me think."
    assert not any(getattr(c.choices[0].delta, "reasoning_content", None) for c in chunks)
    assert completion.choices[0].message.reasoning == "Hm."


async def test_two_streamed_tool_calls_reassemble_into_valid_json():
    calls = (
        ToolCall("get_weather", {"city": "Paris", "unit": "celsius"}),
        ToolCall("search", {"query": "opening hours of the Louvre"}, id="call_fixed"),
    )
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Reply(tool_calls=calls)])
        chunks = await stream_chunks(client)
    assembled: dict[int, dict] = {}
    fragments: dict[int, int] = {}
    for chunk in chunks:
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = assembled.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
            if delta.id:
                call["id"] = delta.id
                assert delta.type == "function" and delta.function.arguments == ""
            if delta.function and delta.function.name:
                call["name"] += delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
                fragments[delta.index] = fragments.get(delta.index, 0) + 1
    assert sorted(assembled) == [0, 1]
    assert assembled[0]["name"] == "get_weather" and assembled[1]["name"] == "search"
    assert json.loads(assembled[0]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    assert json.loads(assembled[1]["arguments"]) == {"query": "opening hours of the Louvre"}
    assert fragments[0] > 1 and fragments[1] > 1
    assert assembled[0]["id"].startswith("call_") and assembled[1]["id"] == "call_fixed"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_non_streaming_reply_carries_reasoning_and_tool_calls():
    async with ScriptedModelServer() as server, sdk(server) as client:
        weather = ToolCall("get_weather", {"city": "Oslo"})
        server.script("test-model", [Reply(reasoning="Need the weather.", tool_calls=[weather])])
        completion = await client.chat.completions.create(model="test-model", messages=HELLO)
    message = completion.choices[0].message
    assert message.content is None
    assert message.reasoning_content == "Need the weather."
    assert [(call.function.name, json.loads(call.function.arguments)) for call in message.tool_calls] == [
        ("get_weather", {"city": "Oslo"})
    ]
    assert completion.choices[0].finish_reason == "tool_calls"


async def test_include_usage_adds_a_final_usage_chunk():
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", ["one two three", "four"])
        with_usage = await stream_chunks(client, stream_options={"include_usage": True})
        without = await stream_chunks(client)
    assert with_usage[-1].choices == []
    assert with_usage[-1].usage.completion_tokens == 3
    assert with_usage[-1].usage.prompt_tokens == 1
    assert all(chunk.usage is None for chunk in without)


@pytest.mark.parametrize(
    ("status", "exception"),
    [
        (401, openai.AuthenticationError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
async def test_scripted_errors_raise_the_sdk_exceptions(status, exception):
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Error(status), Error(status, "custom words")])
        with pytest.raises(exception) as raised:
            await client.chat.completions.create(model="test-model", messages=HELLO)
        with pytest.raises(exception, match="custom words"):
            await stream_chunks(client)  # a streaming request fails before the stream starts
    assert raised.value.status_code == status
    assert set(raised.value.body) >= {"message", "type", "code"}


async def test_rate_limit_retry_after_is_honoured_by_the_sdk_retry():
    async with ScriptedModelServer() as server, sdk(server, max_retries=1) as client:
        server.script("test-model", [Error(429, retry_after=0.3), "after the wait"])
        started = time.monotonic()
        completion = await client.chat.completions.create(model="test-model", messages=HELLO)
    assert completion.choices[0].message.content == "after the wait"
    assert time.monotonic() - started >= 0.3
    assert len(server.requests) == 2


async def test_broken_stream_raises_while_iterating_after_some_deltas():
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [BrokenStream(after_chunks=2, text="partial answer that never ends"), "still here"])
        received = []
        stream = await client.chat.completions.create(model="test-model", messages=HELLO, stream=True)
        with pytest.raises(openai.APIError):
            async for chunk in stream:
                received.append(chunk)
        assert text_of(received) == "partial answer"
        completion = await client.chat.completions.create(model="test-model", messages=HELLO)
        assert completion.choices[0].message.content == "still here"
        assert server.active_streams == 0


async def test_hang_until_the_client_times_out_counts_a_disconnect_and_keeps_serving():
    async with ScriptedModelServer() as server, sdk(server, timeout=0.3) as client:
        server.script("test-model", [Hang(), "next answer"])
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="test-model", messages=HELLO)
        await server.wait_for_disconnects(1)
        completion = await client.chat.completions.create(model="test-model", messages=HELLO)
        assert completion.choices[0].message.content == "next answer"
        assert server.disconnects == 1


async def test_closing_a_stream_mid_answer_counts_a_disconnect():
    """The agent loop's /stop: partial text arrives, then the loop closes the stream."""
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Hang(text="I am thinking about"), Reply("slow " * 50, token_delay=0.05), "done"])
        for _ in range(2):
            stream = await client.chat.completions.create(model="test-model", messages=HELLO, stream=True)
            received = [await stream.__anext__() for _ in range(3)]  # role + two tokens
            assert server.active_streams == 1
            await stream.close()
        await server.wait_for_disconnects(2)
        assert text_of(received) == "slow slow"
        assert server.active_streams == 0
        assert text_of(await stream_chunks(client)) == "done"


async def test_cancelling_the_request_task_counts_a_disconnect():
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", [Hang()])
        request = asyncio.create_task(client.chat.completions.create(model="test-model", messages=HELLO, stream=True))
        await server.wait_for_requests(1)
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await server.wait_for_disconnects(1)


async def test_requests_are_recorded_with_messages_tools_and_stream():
    now = {"name": "now", "description": "The time", "parameters": {"type": "object", "properties": {}}}
    tools = [{"type": "function", "function": now}]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What time is it?"}]
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", ["first", "second"])
        await client.chat.completions.create(model="test-model", messages=messages, tools=tools, temperature=0.2)
        await stream_chunks(client, messages=messages)
    first, second = server.requests
    assert isinstance(first, RecordedRequest)
    assert (first.model, first.messages, first.tools, first.stream) == ("test-model", messages, tools, False)
    assert first.body["temperature"] == 0.2
    assert first.path == "/v1/chat/completions" and first.method == "POST"
    assert first.headers["authorization"] == "Bearer x"
    assert first.last_user_text == "What time is it?"
    assert (second.stream, second.tools) == (True, [])
    assert first.received_at <= second.received_at
    assert "authorization" not in repr(first)  # credentials stay out of assertion output


async def test_each_model_consumes_its_own_script():
    async with ScriptedModelServer(models=("model-a", "model-b")) as server, sdk(server) as client:
        server.script("model-a", ["a1", "a2"])
        server.script("model-b", ["b1"])

        async def ask(model: str) -> str:
            completion = await client.chat.completions.create(model=model, messages=HELLO)
            return completion.choices[0].message.content

        assert [await ask("model-b"), await ask("model-a"), await ask("model-a")] == ["b1", "a1", "a2"]
        assert [len(server.requests_for("model-a")), len(server.requests_for("model-b"))] == [2, 1]
        assert server.pending("model-a") == server.pending("model-b") == 0
        with pytest.raises(openai.NotFoundError, match="model-c"):
            await ask("model-c")
        with pytest.raises(ValueError, match="model-c"):
            server.script("model-c", ["never"])


async def test_the_responder_answers_once_the_script_is_empty():
    async def shout(request: RecordedRequest) -> Reply:
        await asyncio.sleep(0)
        return Reply(request.last_user_text.upper())

    async with ScriptedModelServer(responder=echo_last_user_message) as server, sdk(server) as client:
        server.script("test-model", ["scripted first"])
        assert text_of(await stream_chunks(client, messages=user("ping"))) == "scripted first"
        assert text_of(await stream_chunks(client, messages=user("ping"))) == "ping"
        server.responder = shout
        completion = await client.chat.completions.create(model="test-model", messages=user("quiet"))
        assert completion.choices[0].message.content == "QUIET"


async def test_an_exhausted_script_answers_500_naming_the_model_without_retries():
    async with ScriptedModelServer(models=("model-a",)) as server, sdk(server, max_retries=2) as client:
        server.script("model-a", ["only one"])
        await client.chat.completions.create(model="model-a", messages=HELLO)
        with pytest.raises(openai.InternalServerError, match="script exhausted for model 'model-a'"):
            await client.chat.completions.create(model="model-a", messages=HELLO)
    assert len(server.requests) == 2  # x-should-retry: false, so the mistake shows at once


async def test_the_api_key_is_enforced():
    async with ScriptedModelServer(api_key="sk-right") as server:
        server.script("test-model", ["welcome"])
        async with sdk(server, api_key="sk-wrong") as wrong:
            with pytest.raises(openai.AuthenticationError) as raised:
                await wrong.chat.completions.create(model="test-model", messages=HELLO)
            with pytest.raises(openai.AuthenticationError):
                await wrong.models.list()
        assert raised.value.body["code"] == "invalid_api_key"
        assert "sk-right" not in str(raised.value)
        async with httpx.AsyncClient() as raw:
            response = await raw.get(f"{server.base_url}/models")
        assert response.status_code == 401 and set(response.json()["error"]) >= {"message", "type", "code"}
        async with sdk(server, api_key="sk-right") as right:
            completion = await right.chat.completions.create(model="test-model", messages=HELLO)
        assert completion.choices[0].message.content == "welcome"


async def test_sequential_streams_reuse_one_keep_alive_connection():
    async with ScriptedModelServer(responder=echo_last_user_message) as server, sdk(server) as client:
        for number in range(5):
            chunks = await stream_chunks(client, messages=user(f"message {number}"))
            assert text_of(chunks) == f"message {number}"
        await client.chat.completions.create(model="test-model", messages=HELLO)
    assert server.connections_opened == 1


async def test_a_custom_tokenizer_sets_the_chunking():
    async with ScriptedModelServer(tokenizer=list) as server, sdk(server) as client:
        server.script("test-model", ["héllo"])
        chunks = await stream_chunks(client)
    assert [chunk.choices[0].delta.content for chunk in chunks[1:-1]] == ["h", "é", "l", "l", "o"]


async def test_malformed_requests_get_openai_shaped_errors():
    async with ScriptedModelServer() as server, httpx.AsyncClient(base_url=server.base_url) as raw:
        bad_json = await raw.post("/chat/completions", content=b"{nope", headers={"content-type": "application/json"})
        no_messages = await raw.post("/chat/completions", json={"model": "test-model", "messages": []})
        unknown_path = await raw.post("/embeddings", json={})
    assert [bad_json.status_code, no_messages.status_code, unknown_path.status_code] == [400, 400, 404]
    assert "invalid JSON" in bad_json.json()["error"]["message"]
    assert len(server.requests) == 3


async def test_closing_the_server_mid_answer_logs_no_error(caplog):
    async with ScriptedModelServer() as server, sdk(server) as client:
        server.script("test-model", ["idle connection", Hang()])
        await client.chat.completions.create(model="test-model", messages=HELLO)  # leaves a keep-alive connection
        hanging = asyncio.create_task(client.chat.completions.create(model="test-model", messages=HELLO))
        await server.wait_for_requests(2)
        await server.close()
        with pytest.raises(openai.APIConnectionError):
            await hanging
    assert [record.getMessage() for record in caplog.records if record.levelname == "ERROR"] == []


async def test_two_hundred_concurrent_streams_complete_correctly():
    """The benchmark's shape: one client, 200 conversations streaming at once."""
    words = " ".join(f"w{number}" for number in range(20))

    async def when_all_have_asked(request: RecordedRequest) -> Reply:
        await server.wait_for_requests(200, timeout=10)  # so all 200 really stream at once
        return Reply(f"{request.last_user_text} {words}", token_delay=0.01, first_token_delay=0.1)

    async with ScriptedModelServer(responder=when_all_have_asked) as server:
        async with sdk(server, timeout=30) as client:

            async def converse(number: int) -> str:
                return text_of(await stream_chunks(client, messages=user(f"conversation-{number}")))

            started = time.monotonic()
            texts = await asyncio.gather(*(converse(number) for number in range(200)))
            elapsed = time.monotonic() - started
    assert texts == [f"conversation-{number} {words}" for number in range(200)]
    assert len(server.requests) == 200 and server.disconnects == 0
    assert server.peak_active_streams == 200
    assert server.active_streams == 0
    assert elapsed < 10, f"200 streams took {elapsed:.1f} s"
    print(f"200 concurrent streams of 22 chunks: {elapsed:.2f} s")


def test_the_command_line_serves_a_script_file_until_sigterm(tmp_path):
    script = {
        "api_key": "sk-file",
        "responder": "echo",
        "script": {
            "model-a": [
                "from the file",
                {"reply": {"text": "with a tool", "tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}},
                {"error": {"status": 429, "retry_after": 1}},
            ]
        },
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    command = [sys.executable, "-m", "skald_host.testing.model_server", "--port", "0", "--script-file", str(path)]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            base_url = process.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1"), process.stderr.read()
            with openai.OpenAI(base_url=base_url, api_key="sk-file", max_retries=0) as client:

                def ask(content: str):
                    return client.chat.completions.create(model="model-a", messages=user(content))

                assert ask("hi").choices[0].message.content == "from the file"
                assert ask("hi").choices[0].message.tool_calls[0].function.name == "search"
                with pytest.raises(openai.RateLimitError):
                    ask("hi")
                assert ask("echo me").choices[0].message.content == "echo me"
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0, process.stderr.read()
        finally:
            if process.poll() is None:
                process.kill()


def test_log_requests_prints_what_the_host_sent_each_time(tmp_path):
    """A plugin author trying a tool by hand sees whether it was offered to the model."""
    command = [sys.executable, "-m", "skald_host.testing.model_server", "--port", "0", "--log-requests"]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        try:
            base_url = process.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:"), process.stderr.read()
            tools = [
                {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
                for name in ("roll_dice", "greet")
            ]
            with openai.OpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
                messages = [{"role": "system", "content": "Be brief."}, *user("secret words")]
                answer = client.chat.completions.create(model="test-model", messages=messages, tools=tools)
                assert answer.choices[0].message.content == "secret words"  # still the echo server
                client.chat.completions.create(model="test-model", messages=user("hi"))
            first, second = process.stdout.readline().strip(), process.stdout.readline().strip()
            assert first == "POST /v1/chat/completions model=test-model messages=2 tools=roll_dice,greet"
            assert second == "POST /v1/chat/completions model=test-model messages=1 tools=-"
            process.send_signal(signal.SIGTERM)
            rest, _ = process.communicate(timeout=10)
            assert process.returncode == 0
            assert "secret words" not in first + second + rest  # the messages' text is never printed
        finally:
            if process.poll() is None:
                process.kill()

"""SIGKILL during a background run and during its continuation turn (seed 004 §4, §6):
the server is a real subprocess, killed outright; after a restart and the member's
login, the run's outcome reaches the member exactly once — one hidden trigger in the
model's history, one answer on the member's screen, the inbox event consumed once.

The scripted model server runs in the test process, so what the model was sent
across both lives of the server is counted from outside the process that died."""

from __future__ import annotations

from typing import Any, AsyncIterator

import pytest_asyncio

from durability.helpers import Servers, create_member, setup_admin
from skald_host.core.agent.subagents.limits import CONTINUATION_TOOLS
from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall

from .support import API_KEY, MODEL_A, ChatSocket, assert_well_formed, configure_models, eventually, messages, new_conversation

PASSWORD = "alice's passphrase for sub-agent crash tests"
TRIGGER = "[Background updates."
TASK = "Find the capital of Norway."


@pytest_asyncio.fixture
async def model() -> AsyncIterator[ScriptedModelServer]:
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as server:
        yield server


@pytest_asyncio.fixture
async def servers(tmp_path, monkeypatch) -> AsyncIterator[Servers]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    factory = Servers(tmp_path)
    try:
        yield factory
    finally:
        await factory.close()


def last(request: Any) -> dict[str, Any]:
    return request.messages[-1]


def triggers_in(request: Any) -> int:
    return sum(1 for m in request.messages if m["role"] == "user" and m["content"].startswith(TRIGGER))


async def start_background(servers: Servers, model: ScriptedModelServer, respond) -> tuple[Any, Any, str]:
    server = await servers.start()
    admin = await setup_admin(server)
    await configure_models(admin, model)
    await create_member(admin, "alice", PASSWORD)
    alice = await server.login("alice", PASSWORD)
    model.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Research it in the background.")
        await sock.turn(cid)
    return server, alice, cid


def before(on_task, on_trigger):
    def respond(request):
        content = last(request)["content"]
        if content == TASK:
            return on_task()
        if content.startswith(TRIGGER):
            return on_trigger()
        if last(request)["role"] == "tool":
            return Reply("Started; I'll tell you.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK, "mode": "background"})])

    return respond


async def after_restart(servers: Servers, server: Any, model: ScriptedModelServer, cid: str) -> tuple[Any, list[dict[str, Any]]]:
    server.kill()
    model.responder = before(lambda: Reply("Oslo."), lambda: Reply("Here is what came back."))
    again = await servers.start()
    alice = await again.login("alice", PASSWORD)
    async with ChatSocket(alice) as sock:  # connecting resumes the member's chat
        await sock.wait_event(cid, "turn_finished", timeout=20)
    return alice, await messages(alice, cid)


async def test_sigkill_during_a_background_run_delivers_its_interruption_exactly_once(servers, model):
    server, alice, cid = await start_background(servers, model, before(lambda: Hang(text="thinking"), lambda: Reply("unused")))
    await eventually(lambda: any(last(r)["content"] == TASK for r in model.requests_for(MODEL_A)), what="the run's request")
    seen_before = len(model.requests_for(MODEL_A))
    alice, transcript = await after_restart(servers, server, model, cid)

    after = model.requests_for(MODEL_A)[seen_before:]
    continuation = [r for r in after if last(r)["content"].startswith(TRIGGER)]
    assert len(continuation) == 1 and triggers_in(continuation[0]) == 1
    assert "status interrupted" in last(continuation[0])["content"]
    assert not any(last(r)["content"] == TASK for r in after)  # interrupted, not run again
    assert {t["function"]["name"] for t in continuation[0].tools or []} <= set(CONTINUATION_TOOLS)
    assert [m["content"] for m in transcript if m["role"] == "assistant"][-1] == "Here is what came back."
    assert sum(m["content"] == "Here is what came back." for m in transcript) == 1
    assert not any(m["content"].startswith(TRIGGER) for m in transcript)
    assert_well_formed(transcript)
    [run] = (await alice.get(f"/api/conversations/{cid}/runs")).json()["runs"]
    assert run["status"] == "interrupted"


async def test_sigkill_during_the_continuation_turn_answers_its_trigger_once_after_the_restart(servers, model):
    server, alice, cid = await start_background(servers, model, before(lambda: Reply("Oslo."), lambda: Hang(text="Here is wh")))
    await eventually(lambda: any(last(r)["content"].startswith(TRIGGER) for r in model.requests_for(MODEL_A)), what="the continuation's request")

    async def checkpointed() -> bool:  # the partial answer is on disk before the kill
        rows = await messages(alice, cid)
        return rows[-1]["status"] == "streaming" and rows[-1]["content"] == "Here is wh"

    await eventually(checkpointed, what="the continuation's partial answer to be checkpointed")
    seen_before = len(model.requests_for(MODEL_A))
    alice, transcript = await after_restart(servers, server, model, cid)

    after = model.requests_for(MODEL_A)[seen_before:]
    assert len(after) == 1  # the trigger answered again, nothing delivered anew
    assert triggers_in(after[0]) == 1 and "Oslo." in last(after[0])["content"]
    assert {t["function"]["name"] for t in after[0].tools or []} <= set(CONTINUATION_TOOLS)
    answers = [(m["status"], m["content"]) for m in transcript if m["role"] == "assistant"]
    assert answers[-2:] == [("interrupted", "Here is wh"), ("complete", "Here is what came back.")]
    assert not any(m["content"].startswith(TRIGGER) for m in transcript)
    assert_well_formed(transcript)
    [run] = (await alice.get(f"/api/conversations/{cid}/runs")).json()["runs"]
    assert run["status"] == "completed"

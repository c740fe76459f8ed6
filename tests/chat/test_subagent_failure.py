"""A sub-agent run whose frame ends without an answer — its model refuses (HTTP 404
"model does not exist"), every model it may try fails, or it runs out of rounds — is a
failed run, not a completed one with an empty result: the run row says ``failed`` and
why, its box hears ``agent_done`` ``failed`` (written first), and its caller's call is
an error whose text tells the caller's model that its helper failed and why. A
member's own turn whose model fails is unchanged: a failed answer, with Retry.

Responders keyed on what each request asks: a run's first request goes out while its
frame is being written, so the order of requests across frames is not fixed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skald_host.testing import Reply, ScriptedError, ToolCall

from .support import MODEL_A, MODEL_B, ChatSocket, allow_tool, assert_well_formed, configure_models, messages, new_conversation, write_agent

TASK = "Capital of Norway?"
TRIGGER = "[Background updates."
MISSING = "The model `model-a` does not exist or you do not have access to it."


def last(request: Any) -> dict[str, Any]:
    return request.messages[-1]


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


async def runs(client: Any, cid: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/conversations/{cid}/runs")
    assert response.status_code == 200, response.text
    return response.json()["runs"]


async def run_detail(client: Any, run_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/agent-runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()


def delegating(seen: dict[str, Any], helper: Any, *, agent: str = "researcher", mode: str = "foreground"):
    """The root asks ``agent`` once and then answers; ``helper`` answers the run's requests."""

    async def respond(request):
        message = last(request)
        if request.messages[1].get("content") == TASK:  # the run's own frame
            answer = helper(request)
            return await answer if asyncio.iscoroutine(answer) else answer
        if message["role"] == "tool":
            seen["tool_results"] = tool_results(request)
            return Reply("The helper could not do it.")
        if (message.get("content") or "").startswith(TRIGGER):
            seen["trigger"] = message["content"]
            return Reply("The background helper failed.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": agent, "task": TASK, "mode": mode})])

    return respond


@pytest.mark.parametrize("every_model", [False, True], ids=["refused_404", "every_model_failed"])
async def test_a_run_whose_model_fails_is_failed_and_its_caller_reads_why(chat, every_model):
    models = (MODEL_A, MODEL_B) if every_model else (MODEL_A,)
    await configure_models(chat.admin, chat.server, models)
    alice = await chat.host.member("alice")
    seen: dict[str, Any] = {}
    helper_requests: list[str] = []

    def helper(request):
        helper_requests.append(request.model)
        if every_model:
            return ScriptedError(503, f"{request.model} is overloaded", should_retry=False)
        return ScriptedError(404, MISSING, type="invalid_request_error", code="model_not_found")

    chat.server.responder = delegating(seen, helper)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the researcher.")
        events = await sock.turn(cid)
    assert helper_requests == list(models)  # each model tried once, none answered

    [row] = await runs(alice, cid)
    detail = await run_detail(alice, row["id"])
    # The run is failed, and says why; it has no result.
    assert detail["run"]["status"] == "failed", detail["run"]
    assert detail["run"]["result"] is None
    error = detail["run"]["error"]
    assert error and error.startswith("The model could not answer")
    assert ("overloaded" in error) if every_model else ("does not exist" in error and "404" in error), error
    # Its transcript keeps the failed answer (after it, the note of each fallback).
    answer = [m for m in detail["transcript"] if m["role"] != "note"][-1]
    assert (answer["role"], answer["status"]) == ("assistant", "error")

    # The caller's model is told its helper failed, and why.
    [result] = seen["tool_results"]
    assert result.startswith("Error: ") and f"run {row['id']} of agent researcher failed" in result, result
    assert error in result
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    [call] = [c for m in transcript for c in m["tool_calls"]]
    assert (call["name"], call["status"]) == ("execute_task", "error")
    assert call["result"] == result
    assert (transcript[-1]["content"], transcript[-1]["status"]) == ("The helper could not do it.", "complete")

    # The run's box hears that it failed (as any failed run's), before the call's result.
    [done] = [e for e in events if e["type"] == "agent_done"]
    assert (done["run_id"], done["status"]) == (row["id"], "failed")
    kinds = [e["type"] for e in events]
    assert kinds.index("agent_done") < kinds.index("tool_error")


async def test_a_background_run_whose_model_fails_arrives_as_a_failure(chat):
    """The completion event of a failed background run says failed and why: the
    continuation's trigger tells the root's model so."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    seen: dict[str, Any] = {}
    release = asyncio.Event()

    async def helper(request):
        await release.wait()
        return ScriptedError(404, MISSING, type="invalid_request_error", code="model_not_found")

    chat.server.responder = delegating(seen, helper, mode="background")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the researcher in the background.")
        await sock.turn(cid)
        release.set()
        await sock.turn(cid)  # the continuation
    [row] = await runs(alice, cid)
    detail = await run_detail(alice, row["id"])
    assert detail["run"]["status"] == "failed" and "does not exist" in detail["run"]["error"], detail["run"]
    assert f"status failed, run {row['id']}" in seen["trigger"]
    assert f"Error: {detail['run']['error']}" in seen["trigger"]
    assert (await messages(alice, cid))[-1]["content"] == "The background helper failed."


async def test_a_run_that_runs_out_of_rounds_is_failed(chat):
    """No final answer within max_iterations: the run failed (it used to be completed
    with the round-limit note as its result)."""
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "lookup")
    write_agent(chat.probe.agents_dir, "looper", "You look things up.", title="Looper", kind="task", allow_tools=True,
                tools=["lookup"], limits={"max_iterations": 2})
    alice = await chat.host.member("alice")
    seen: dict[str, Any] = {}
    chat.server.responder = delegating(seen, lambda request: Reply(tool_calls=[ToolCall("lookup", {"text": "more"})]), agent="looper")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the looper.")
        events = await sock.turn(cid)
    [row] = await runs(alice, cid)
    detail = await run_detail(alice, row["id"])
    assert detail["run"]["status"] == "failed", detail["run"]
    assert detail["run"]["error"] == "Stopped after 2 rounds without a final answer."
    [result] = seen["tool_results"]
    assert result == f"Error: the run {row['id']} of agent looper failed: Stopped after 2 rounds without a final answer."
    assert any(e["type"] == "agent_done" and e["run_id"] == row["id"] and e["status"] == "failed" for e in events)


async def test_a_members_turn_whose_model_fails_stays_a_failed_answer(chat):
    """The top-level turn is as before: the answer is failed (with its reason), the
    turn ends, nothing raised past it."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [ScriptedError(404, MISSING, type="invalid_request_error", code="model_not_found"), Reply("Back.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello?")
        events = await sock.turn(cid)
        error = next(e for e in events if e["type"] == "error")
        assert "does not exist" in error["error"] and error.get("message_id") is not None
        assert "turn_finished" in [e["type"] for e in events]
        answer = (await messages(alice, cid))[-1]
        assert (answer["role"], answer["status"]) == ("assistant", "error") and "does not exist" in answer["content"]
        await sock.send(cid, "Again?")
        await sock.turn(cid)
    assert (await messages(alice, cid))[-1]["content"] == "Back."

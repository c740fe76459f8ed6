"""A helper taken up again after a crash has what is left of its budget, not a fresh
one (seed 004 §1 "bounded"): the rounds it made before the SIGKILL are stored in its
frame and count toward its ``max_iterations``, and its time limit counts from its first
start — each crash must not buy another full round of paid requests."""

from __future__ import annotations

from typing import Any

from durability.helpers import Servers, member_dek, owner_file
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall

from .support import MODEL_A, ChatSocket, eventually, member_with_models, new_conversation

PASSWORD = "alice's passphrase for sub-agent budget tests"
TASK = "Keep looking it up."
ROUNDS = 6


def of_task(request: Any) -> bool:
    return len(request.messages) > 1 and request.messages[1]["content"] == TASK


def respond(life: list[int]):
    def answer(request):
        if of_task(request):
            made = sum(1 for r in answer.model.requests_for(MODEL_A) if of_task(r))
            if life[0] == 1 and made >= 4:
                return Hang(text="still")
            return Reply(tool_calls=[ToolCall("no_such_tool", {"q": str(made)})])
        if request.messages[-1]["role"] == "tool":
            return Reply("The helper gave up.")
        return Reply(tool_calls=[ToolCall(
            "execute_task", {"agent": "general-purpose", "task": TASK, "limits": {"max_iterations": ROUNDS}},
        )])

    return answer


async def crashed_in_the_fourth_round(servers: Servers, model: ScriptedModelServer) -> tuple[Any, str, str, list[int]]:
    life = [1]
    server = await servers.start()
    alice, member_id = await member_with_models(server, model, PASSWORD)
    model.responder = respond(life)
    model.responder.model = model
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Look it up with a helper.")
        await eventually(lambda: sum(1 for r in model.requests_for(MODEL_A) if of_task(r)) == 4, what="the helper's fourth round")
    server.kill()
    life[0] = 2
    return server, cid, member_id, life


async def resumed(servers: Servers, cid: str) -> Any:
    again = await servers.start()
    alice = await again.login("alice", PASSWORD)
    async with ChatSocket(alice) as sock:  # connecting resumes the member's chat
        await sock.wait_event(cid, "turn_finished", timeout=30)
    return alice


async def test_a_helper_resumed_after_a_crash_has_only_the_rounds_it_had_left(servers, model):
    _, cid, _, _ = await crashed_in_the_fourth_round(servers, model)
    alice = await resumed(servers, cid)
    assert sum(1 for r in model.requests_for(MODEL_A) if of_task(r)) == ROUNDS  # 4 before the crash, 2 after
    [run] = (await alice.get(f"/api/conversations/{cid}/runs")).json()["runs"]
    assert run["status"] == "failed" and str(ROUNDS) in run["error"]


async def test_a_helper_whose_time_ran_out_while_the_server_was_down_times_out_without_a_request(servers, model):
    _, cid, member_id, _ = await crashed_in_the_fourth_round(servers, model)
    dek = await member_dek(servers.data_dir, member_id, PASSWORD)
    db = await Database.open(owner_file(servers.data_dir, member_id), key=dek, migrations=OWNER_MIGRATIONS)
    try:  # it started longer ago than its time limit (general-purpose: 900 s)
        await db.transaction(lambda c: c.execute("UPDATE agent_runs SET started_at = '2000-01-01T00:00:00.000Z'"))
    finally:
        await db.close()
    seen = sum(1 for r in model.requests_for(MODEL_A) if of_task(r))
    alice = await resumed(servers, cid)
    assert sum(1 for r in model.requests_for(MODEL_A) if of_task(r)) == seen  # not one more request
    [run] = (await alice.get(f"/api/conversations/{cid}/runs")).json()["runs"]
    assert run["status"] == "timed_out"

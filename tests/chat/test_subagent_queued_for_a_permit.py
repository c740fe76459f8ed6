"""A delegation that must wait for a permit is written ``queued`` first (seed 004 §3.1
step 2), for a single run as for a batch: a probe found helpers holding all of the
member's permits (``max_concurrent_runs_per_member``), and a further conversation's
execute_task calls hung invisibly — no run row, an empty task strip — until those
helpers ended. The helpers holding them here run a long tool (the probe's ``wait``,
allowed): a helper waiting for its member's approval holds none any more
(``test_subagent_permits_while_waiting``).

A real host and the scripted model server; responders keyed on what each request asks."""

from __future__ import annotations

from typing import Any

import pytest

from skald_host.testing import Hang, Reply, ToolCall

from .support import MODEL_A, ChatSocket, allow_tool, configure_models, eventually, last, new_conversation, runs

HOLD = "Wait for it."  # a helper's task: it runs the probe's ``wait`` (allowed), holding its permit until released
WAITS = "Look it up."  # the tasks that wait for a permit


def users(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


def asked_for(chat: Any, task: str) -> int:
    return sum(1 for r in chat.server.requests_for(MODEL_A) if any(s.startswith(task) for s in users(r)))


def respond(request: Any) -> Reply | Hang:
    said = users(request)
    if HOLD in said:
        return Reply("Waited.") if last(request)["role"] == "tool" else Reply(tool_calls=[ToolCall("wait", {"text": "long"})])
    if any(s.startswith(WAITS) for s in said):
        return Reply("Found it.")
    if last(request)["role"] == "tool":
        return Reply("Over.")
    if said[-1] == "One lookup.":
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": WAITS})])
    if said[-1] == "Three lookups.":
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": f"{WAITS} {i}"}) for i in range(3)])
    return Reply(tool_calls=[ToolCall("execute_task", {"agent": "general-purpose", "task": HOLD})])


async def hold_every_permit(chat: Any, alice: Any, sock: ChatSocket, count: int) -> list[str]:
    """``count`` conversations, each with a helper running the probe's ``wait``."""
    await allow_tool(chat.admin, "wait")
    held = []
    for _ in range(count):
        cid = await new_conversation(alice)
        start = len(sock.events)
        await sock.send(cid, "Ask a helper to wait.")
        await sock.wait_event(cid, "tool_start", start=start, depth=1, name="wait")
        held.append(cid)
    return held


async def test_single_runs_waiting_for_a_permit_are_queued_visible_and_cancellable_from_the_strip(chat):
    """The probe's repro: four running helpers hold the member's four permits; a fifth
    conversation's three execute_task calls are three queued runs, in its runs and its
    task strip (announced, so the strip reads them), and the strip's Cancel ends one at
    once without a request; the rest run once the helpers end."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        held = await hold_every_permit(chat, alice, sock, 4)
        cid = await new_conversation(alice)
        start = len(sock.events)
        await sock.send(cid, "Three lookups.")
        await eventually(lambda: _statuses(alice, cid, ["queued"] * 3), what="three queued runs")
        assert [r["status"] for r in await runs(alice, cid, strip=True)] == ["queued"] * 3
        queued = await sock.wait_event(cid, "agent_queued", start=start)
        rows = await runs(alice, cid)
        assert queued["run_id"] in {r["id"] for r in rows}

        cancelled = rows[0]["id"]
        response = await alice.post(f"/api/agent-runs/{cancelled}/cancel")
        assert response.json() == {"cancelled": True}
        assert [r["status"] for r in await runs(alice, cid) if r["id"] == cancelled] == ["cancelled"]

        chat.probe.release.set()
        for held_cid in held:
            await sock.turn(held_cid)
        await sock.turn(cid)
    by_id = {r["id"]: r["status"] for r in await runs(alice, cid)}
    assert by_id.pop(cancelled) == "cancelled"
    assert sorted(by_id.values()) == ["completed"] * 2
    assert asked_for(chat, WAITS) == 2  # the cancelled run never asked


@pytest.mark.parametrize("chat_settings", [{"subagents": {"max_concurrent_runs_per_member": 1}}])
async def test_a_stop_cancels_a_single_run_waiting_for_a_permit(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        [held] = await hold_every_permit(chat, alice, sock, 1)
        cid = await new_conversation(alice)
        await sock.send(cid, "One lookup.")
        await eventually(lambda: _statuses(alice, cid, ["queued"]), what="a queued run")
        assert (await alice.post(f"/api/conversations/{cid}/stop")).status_code == 200
        await sock.turn(cid)
        await eventually(lambda: _statuses(alice, cid, ["cancelled"]), what="the run cancelled")
        chat.probe.release.set()
        await sock.turn(held)
    assert asked_for(chat, WAITS) == 0
    assert [r["status"] for r in await runs(alice, cid)] == ["cancelled"]


@pytest.mark.parametrize("chat_settings", [{"subagents": {"max_concurrent_runs_per_member": 1}}])
async def test_a_single_run_waiting_for_a_permit_is_the_same_run_after_a_restart(chat):
    """The member's file locks (a logout) while the run waits: after the next login its
    call runs again and takes up the same run, which runs then (the holding helper's
    cut ``wait`` is not run again: it ends, and gives the permit back)."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        [held] = await hold_every_permit(chat, alice, sock, 1)
        cid = await new_conversation(alice)
        await sock.send(cid, "One lookup.")
        await eventually(lambda: _statuses(alice, cid, ["queued"]), what="a queued run")
        [before] = await runs(alice, cid)
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)

    again = await chat.host.member("alice")
    async with ChatSocket(again):  # connecting resumes the member's chat
        await eventually(lambda: _statuses(again, cid, ["completed"]), what="the run completed")
    [after] = await runs(again, cid)
    assert after["id"] == before["id"]
    assert asked_for(chat, WAITS) == 1


async def _statuses(client: Any, cid: str, expected: list[str]) -> bool:
    return sorted(r["status"] for r in await runs(client, cid)) == expected

"""What a probe of helpers found (seed 004), each fixed and kept fixed:

- a Stop during a batch larger than may run at once left the runs still waiting for
  a permit ``queued`` for ever (and a restart called them interrupted while running);
- a helper that may delegate to nobody was still offered ``execute_task``;
- cancelling a background task from the task strip started a paid continuation turn
  only to tell the member what they had done;
- a failed helper's box said why only after a reload, and a batch's boxes came back
  in another order than live.

A real host and the scripted model server; responders keyed on what each request asks."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from skald_host.core.agent.subagents.runs import NewRun, RunStore, recover
from skald_host.testing import Hang, Reply, ScriptedError, ToolCall

from .support import (
    MODEL_A,
    TRIGGER,
    ChatSocket,
    cancel_run,
    configure_models,
    delegate_a_slow_task,
    eventually,
    inbox_counters,
    inbox_statuses,
    last,
    messages,
    new_conversation,
    offered,
    run,
    runs,
    start_a_slow_task,
    write_agent,
)


# -- 1. a Stop during a batch larger than may run at once -------------------------------------


async def test_a_stop_cancels_the_runs_of_a_batch_still_waiting_for_a_permit_and_a_restart_leaves_them_so(chat):
    """Six parts, four at once (the seed's per-conversation bound): the Stop cancels the
    four that run and the two that wait, all recorded as the member's cancel; none is
    left ``queued`` (shown "Waiting" with a Cancel button for ever), and the next start
    does not call them interrupted while they ran."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"] or ""
        if content.startswith("Part "):
            return Hang(text="working")
        if last(request)["role"] == "tool":
            return Reply("Stopped.")
        return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [{"agent": "researcher", "task": f"Part {i}."} for i in range(6)]})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Six parts.")
        await eventually(
            lambda: sum((last(r)["content"] or "").startswith("Part ") for r in chat.server.requests_for(MODEL_A)) == 4,
            what="four runs in flight",
        )
        assert sorted(r["status"] for r in await runs(alice, cid)) == ["queued"] * 2 + ["running"] * 4
        response = await alice.post(f"/api/conversations/{cid}/stop")
        assert response.status_code == 200
        await sock.wait_event(cid, "turn_finished")
        await eventually(lambda: _all_ended(alice, cid), what="every run ended")
    rows = await runs(alice, cid)
    assert [(r["status"], r["error"]) for r in rows] == [("cancelled", "cancelled")] * 6
    assert sum((last(r)["content"] or "").startswith("Part ") for r in chat.server.requests_for(MODEL_A)) == 4

    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    again = await chat.host.member("alice")
    assert [(r["status"], r["error"]) for r in await runs(again, cid)] == [("cancelled", "cancelled")] * 6


async def _all_ended(client: Any, cid: str) -> bool:
    return all(r["status"] not in ("queued", "running", "waiting_delegates") for r in await runs(client, cid))


async def test_recovery_does_not_say_a_run_that_never_started_ran_and_gives_the_members_stop_its_due(tmp_path):
    """A run of an earlier process that never started was not interrupted while it ran:
    its error says it never started. One still queued under a call the member stopped
    (as an earlier version's Stop left a batch's waiting runs) was the member's cancel."""
    import os

    from skald_host.core.schema import OWNER_MIGRATIONS
    from skald_host.core.storage import Database

    db = await Database.open(tmp_path / "owner.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)
    try:
        await db.transaction(lambda c: (
            c.execute("INSERT INTO conversations (id, agent_id) VALUES ('c1', 'assistant')"),
            c.execute("INSERT INTO frames (id, conversation_id, agent_id, depth) VALUES ('root', 'c1', 'assistant', 0)"),
            c.execute("INSERT INTO messages (id, conversation_id, frame_id, role) VALUES (1, 'c1', 'root', 'assistant')"),
            c.execute(
                "INSERT INTO tool_calls (id, message_id, conversation_id, frame_id, seq, name, arguments, status)"
                " VALUES ('call-1', 1, 'c1', 'root', 0, 'execute_task', '{}', 'cancelled')"
            ),
        ))
        old = RunStore(db, "gen-old")

        def run(mode: str, key: str | None) -> NewRun:
            return NewRun("researcher", "h" * 64, None, mode, 1, "t", {}, None, key)

        background, stopped = await old.accept(
            "c1", "tree", None, (), "root", "root", [run("background", None), run("foreground", "call-1#5")],
            max_runs_per_tree=16, max_pending=128,
        )
        report = await db.transaction(lambda c: recover(c, "gen-new", 8, time.time()))
        assert report["interrupted"] == 1 and report["cancelled"] == 1
        assert ((await old.run(background.run_id))["status"], (await old.run(background.run_id))["error"]) == (
            "interrupted", "the server stopped before this started",
        )
        assert ((await old.run(stopped.run_id))["status"], (await old.run(stopped.run_id))["error"]) == ("cancelled", "cancelled")
        [event] = await db.run(lambda c: [dict(r) for r in c.execute("SELECT * FROM agent_inbox_events")])
        assert json.loads(event["payload"])["error"] == "the server stopped before this started"
    finally:
        await db.close()


# -- 2. execute_task only for a helper that may delegate --------------------------------------


async def test_a_helper_that_may_delegate_to_nobody_is_not_offered_execute_task(chat):
    """``general-purpose`` says ``delegates: []``: its rounds offer no execute_task (a
    call could only be refused, a round wasted); a helper that may delegate is still
    offered it, and so is the conversation's own agent."""
    await configure_models(chat.admin, chat.server)
    write_agent(chat.probe.agents_dir, "lead", "You lead.", title="Lead", kind="task", tools=["*"], delegates=["general-purpose"])
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")
    seen: dict[str, set[str]] = {}

    def respond(request):
        content = last(request)["content"] or ""
        if content in ("Plain part.", "Lead part."):
            seen[content] = offered(request)
            return Reply(f"done {content}")
        if last(request)["role"] == "tool":
            return Reply("Both done.")
        seen["root"] = offered(request)
        return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [
            {"agent": "general-purpose", "task": "Plain part."}, {"agent": "lead", "task": "Lead part."},
        ]})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
    assert "execute_task" in seen["root"]
    assert "execute_task" not in seen["Plain part."]
    assert "read_file" in seen["Plain part."]  # its other tools stay
    assert "execute_task" in seen["Lead part."]


# -- 3. a cancel from the task strip starts no paid turn ---------------------------------------


async def test_a_background_run_the_member_cancels_wakes_no_turn_and_reaches_the_model_once_with_the_next(chat):
    """The member cancels a background task: no continuation turn comes of it (nothing
    is asked of the model); its outcome is in the next turn that runs, once, taken at
    that turn's safe boundary — here a later turn that looks its tasks up."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"] or ""
        if content.startswith(TRIGGER):
            return Reply("It was cancelled.")
        if content == "How are my tasks?":
            return Reply(tool_calls=[ToolCall("agent_task", {"action": "list"})])
        if last(request)["role"] == "tool" and "run" in content:
            return Reply("Looked.")
        return delegate_a_slow_task(request)

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid, started = await start_a_slow_task(chat, alice, sock)
        asked = len(chat.server.requests_for(MODEL_A))
        await cancel_run(alice, sock, cid, started["run_id"])
        await asyncio.sleep(1.0)
        assert len(chat.server.requests_for(MODEL_A)) == asked, "a cancel started a model turn"

        await sock.send(cid, "How are my tasks?")
        await sock.turn(cid)
    with_trigger = [r for r in chat.server.requests_for(MODEL_A) if any(TRIGGER in (m.get("content") or "") for m in r.messages)]
    assert with_trigger, "the cancel never reached the model"
    [trigger] = {m["content"] for m in with_trigger[-1].messages if TRIGGER in (m.get("content") or "")}
    assert "status cancelled" in trigger and started["run_id"] in trigger
    assert sum(TRIGGER in (m.get("content") or "") for m in with_trigger[-1].messages) == 1
    assert await inbox_statuses(chat, alice) == ["consumed"]
    assert await inbox_counters(chat, alice) == (0, 0)
    assert not any(m.get("origin") for m in await messages(alice, cid))  # hidden from the member


async def test_a_cancelled_runs_outcome_rides_with_the_continuation_another_run_asks_for(chat):
    """Two background tasks; the member cancels one, the other finishes: one
    continuation carries both outcomes (the cancel's exactly once), and the cancel
    alone started none."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    release = asyncio.Event()

    async def respond(request):
        content = last(request)["content"] or ""
        if content == "Slow task.":
            return Hang(text="thinking")
        if content == "Quick task.":
            await release.wait()
            return Reply("quick result")
        if content.startswith(TRIGGER):
            return Reply("One came back, one was cancelled.")
        if last(request)["role"] == "tool":
            return Reply("Started both.")
        return Reply(tool_calls=[
            ToolCall("execute_task", {"agent": "researcher", "task": "Slow task.", "mode": "background"}),
            ToolCall("execute_task", {"agent": "researcher", "task": "Quick task.", "mode": "background"}),
        ])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
        await eventually(lambda: any(last(r)["content"] == "Slow task." for r in chat.server.requests_for(MODEL_A)), what="the slow run")
        slow = next(r for r in await runs(alice, cid) if r["task"] == "Slow task.")
        assert (await alice.post(f"/api/agent-runs/{slow['id']}/cancel")).json() == {"cancelled": True}
        await asyncio.sleep(0.8)
        assert not any((last(r)["content"] or "").startswith(TRIGGER) for r in chat.server.requests_for(MODEL_A))
        release.set()
        await sock.turn(cid, timeout=15)
    triggers = [last(r)["content"] for r in chat.server.requests_for(MODEL_A) if (last(r)["content"] or "").startswith(TRIGGER)]
    assert len(triggers) == 1
    assert "status cancelled" in triggers[0] and "quick result" in triggers[0]
    assert (await messages(alice, cid))[-1]["content"] == "One came back, one was cancelled."


# -- 4. a helper's box: the same live as after a reload ----------------------------------------


async def test_a_failed_helpers_agent_done_names_its_failed_answer_and_a_batch_starts_say_their_place(chat):
    """The box of a helper whose model failed says why live: its ``agent_done`` names
    the failed answer (id and text) the run's transcript holds after a reload. A
    batch's ``agent_start`` says each run's place in its call, and the runs read back
    newest first come a batch's last call first (reversed: call order)."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"] or ""
        if content == "Part 0.":
            return ScriptedError(500, "scripted failure", should_retry=False)
        if content.startswith("Part "):
            return Reply(f"done {content}")
        if last(request)["role"] == "tool":
            return Reply("Done.")
        return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [{"agent": "researcher", "task": f"Part {i}."} for i in range(3)]})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Three parts.")
        events = await sock.turn(cid)
    starts = {e["run_id"]: e["index"] for e in events if e["type"] == "agent_start"}
    rows = await runs(alice, cid)
    assert [starts[r["id"]] for r in rows] == [2, 1, 0]
    failed = next(r for r in rows if r["status"] == "failed")
    done = next(e for e in events if e["type"] == "agent_done" and e["run_id"] == failed["id"])
    detail = await run(alice, failed["id"])
    answer = detail["transcript"][-1]
    assert (done["message_id"], done["error"]) == (answer["id"], answer["content"])
    assert "scripted failure" in done["error"]

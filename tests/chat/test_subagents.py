"""Named sub-agents end to end (seed 004): a real host, the real openai SDK against the
scripted model server, runs read back over HTTP. Each test names the seed section or
the §8 pitfall it would catch if it came back.

The model is answered by a responder keyed on what each request asks, not by a
script in order: a background run and the root's own turn race for the model, as
they do in production."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from skald_host.core.agent.subagents.coordinator import SubagentCoordinator
from skald_host.core.agent.subagents.limits import CONTINUATION_TOOLS
from skald_host.testing import Hang, Reply, ToolCall

from .support import (
    MODEL_A,
    TRIGGER,
    ChatSocket,
    assert_well_formed,
    cancel_run,
    configure_models,
    coordinator,
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


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def agents(chat: Any, **definitions: dict[str, Any]) -> None:
    """Write task agents into the probe's directory (before the first delegation reads it)."""
    for agent_id, meta in definitions.items():
        prompt = meta.pop("prompt", f"You are {agent_id}.")
        write_agent(chat.probe.agents_dir, agent_id, prompt, **{"title": agent_id, "kind": "task", **meta})


async def test_a_foreground_delegation_is_a_run_row_with_its_definition_hash_and_whole_result(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Capital of Norway?"})]),
        Reply("Oslo."),
        Reply("It is Oslo."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the researcher.")
        events = await sock.turn(cid)
    [row] = await runs(alice, cid)
    assert (row["agent_id"], row["mode"], row["status"], row["depth"]) == ("researcher", "foreground", "completed", 1)
    generation = chat.host.core.chat.subagent_catalog.current()
    assert row["definition_hash"] == generation.definitions["researcher"].definition_hash
    detail = await run(alice, row["id"])
    assert detail["run"]["result"] == "Oslo."
    assert [m["content"] for m in detail["transcript"]] == ["Capital of Norway?", "Oslo."]
    assert any(e["type"] == "agent_done" and e.get("run_id") == row["id"] and e["status"] == "completed" for e in events)


async def test_limits_the_model_cannot_mean_are_refused_with_what_was_wrong_and_start_no_run(chat):
    """A zero, a string or an unknown key in ``limits`` used to be dropped in silence:
    the run went ahead with the agent's own bounds while the model believed it had
    narrowed them. Now the call fails with the reason, and no run is written."""
    await configure_models(chat.admin, chat.server)
    agents(chat, worker={"allow_tools": False})
    alice = await chat.host.member("alice")
    asks = [{"max_iterations": 0}, {"timeout_secs": "60"}, {"rounds": 3}]

    def respond(request):
        results = tool_results(request)
        if len(results) < len(asks):
            limits = asks[len(results)]
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "worker", "task": "Work.", "limits": limits})])
        return Reply("Understood.")

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Delegate it.")
        await sock.turn(cid)
    said = tool_results(chat.server.requests[-1])
    assert "'limits.max_iterations' must be a positive whole number, not 0" in said[0]
    assert "'limits.timeout_secs' must be a positive whole number, not '60'" in said[1]
    assert "'limits' has no 'rounds'; it may hold timeout_secs, max_iterations, max_result_chars" in said[2]
    assert await runs(alice, cid) == []


async def test_a_clipped_result_tells_the_model_where_the_rest_is_and_get_result_returns_every_character(chat):
    """§8.11: the model sees at most max_result_chars; the row keeps it all, whole
    characters (multi-byte ones at the cut included)."""
    await configure_models(chat.admin, chat.server)
    agents(chat, clipper={"allow_tools": False, "limits": {"max_result_chars": 10}})
    alice = await chat.host.member("alice")
    whole = "æøå€😀" * 8  # 40 characters, 2-4 bytes each in UTF-8
    seen: dict[str, str] = {}

    def respond(request):
        results = tool_results(request)
        if last(request)["content"] == "Write it.":
            return Reply(whole)
        if len(results) == 1:
            seen["clipped"] = results[0]
            run_id = results[0].split("agent_task get_result ")[1].split(" ")[0]
            return Reply(tool_calls=[ToolCall("agent_task", {"action": "get_result", "run_id": run_id})])
        if len(results) == 2:
            seen["whole"] = results[1]
            return Reply("Done.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "clipper", "task": "Write it."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
    assert seen["clipped"].startswith(whole[:10] + "\n[result clipped at 10 of 40 characters")
    assert seen["whole"] == whole
    [row] = await runs(alice, cid)
    assert (await run(alice, row["id"]))["run"]["result"] == whole


async def test_a_batch_with_one_unknown_target_is_refused_before_any_run_row_is_written(chat):
    """§8.8: resolve every target, then write."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    batch = {"tasks": [{"agent": "researcher", "task": "One."}, {"agent": "no-such-agent", "task": "Two."}]}
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("execute_task", batch)]), Reply("Could not.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Both.")
        await sock.turn(cid)
    assert "no task agent named 'no-such-agent'" in tool_results(chat.server.requests_for(MODEL_A)[-1])[0]
    assert await runs(alice, cid) == []


async def test_a_batch_answers_in_request_order(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    async def respond(request):
        task = last(request)["content"]
        if task in ("First.", "Second."):
            await asyncio.sleep(0.2 if task == "First." else 0.0)  # the first finishes last
            return Reply(f"answer to {task}")
        if request.messages[-1]["role"] == "tool":
            return Reply("Both done.")
        batch = {"tasks": [{"agent": "researcher", "task": "First."}, {"agent": "general-purpose", "task": "Second."}]}
        return Reply(tool_calls=[ToolCall("execute_task", batch)])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Both.")
        await sock.turn(cid)
    result = tool_results(chat.server.requests_for(MODEL_A)[-1])[0]
    assert result.index("answer to First.") < result.index("answer to Second.")
    assert sorted(r["status"] for r in await runs(alice, cid)) == ["completed", "completed"]


async def test_a_named_caller_waits_for_its_delegates_and_runs_again_after(chat):
    """§8.16: ``waiting_delegates`` while its delegate runs, ``running`` after — the
    symmetric half restored — then completed."""
    await configure_models(chat.admin, chat.server)
    agents(chat, lead={"tools": ["execute_task"]})  # delegates absent: general-purpose only
    alice = await chat.host.member("alice")
    during: list[dict[str, str]] = []
    cid_box: list[str] = []

    async def respond(request):
        content = last(request)["content"]
        if content == "Sub-task.":
            during.extend({r["agent_id"]: r["status"]} for r in await runs(alice, cid_box[0]))
            return Reply("sub result")
        if content == "Lead it.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "general-purpose", "task": "Sub-task."})])
        if last(request)["role"] == "tool" and "sub result" in content:
            return Reply("lead result")
        if last(request)["role"] == "tool":
            return Reply("All done.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "lead", "task": "Lead it."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        cid_box.append(cid)
        await sock.send(cid, "Start.")
        await sock.turn(cid)
    assert {"lead": "waiting_delegates"} in during and {"general-purpose": "running"} in during
    rows = {r["agent_id"]: r for r in await runs(alice, cid)}
    assert rows["lead"]["status"] == "completed" and rows["general-purpose"]["status"] == "completed"
    assert (await messages(alice, cid))[-1]["content"] == "All done."


async def test_delegating_back_up_the_chain_is_refused_as_a_cycle_and_writes_no_row(chat):
    """§8.7: the ancestry check refuses a cycle at resolution."""
    await configure_models(chat.admin, chat.server)
    agents(chat, ping={"tools": ["execute_task"], "delegates": ["pong"]}, pong={"tools": ["execute_task"], "delegates": ["ping"]})
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"]
        if content == "Ping.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "pong", "task": "Pong."})])
        if content == "Pong.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "ping", "task": "Ping again."})])
        if last(request)["role"] == "tool":
            return Reply("said: " + content[:200])
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "ping", "task": "Ping."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
    assert "would be a cycle" in (await messages(alice, cid))[-1]["content"]
    assert sorted(r["agent_id"] for r in await runs(alice, cid)) == ["ping", "pong"]


async def test_a_background_result_reaches_the_member_once_through_a_hidden_read_only_continuation_turn(chat):
    """§3.2/§4: the delegate call returns at once; the result comes back through the
    inbox as a continuation turn whose trigger the member never sees and whose tools
    only read."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    release = asyncio.Event()

    async def respond(request):
        content = last(request)["content"]
        if content == "Find the capital of Norway.":
            await release.wait()
            return Reply("Oslo.")
        if content.startswith(TRIGGER):
            return Reply("The researcher is back: Oslo.")
        if last(request)["role"] == "tool":
            return Reply("I asked the researcher; I'll tell you.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Find the capital of Norway.", "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Research it in the background.")
        await sock.turn(cid)
        [row] = await runs(alice, cid, strip=True)
        assert (row["mode"], row["status"]) == ("background", "running")
        assert (await messages(alice, cid))[-1]["content"] == "I asked the researcher; I'll tell you."
        release.set()
        events = await sock.turn(cid)
    assert [e["type"] for e in events if e["type"] in ("turn_started", "turn_finished", "user_message")] == ["turn_started", "turn_finished"]
    continuation = [r for r in chat.server.requests_for(MODEL_A) if last(r)["content"].startswith(TRIGGER)]
    assert len(continuation) == 1
    assert "Oslo." in last(continuation[0])["content"] and row["id"] in last(continuation[0])["content"]
    assert offered(continuation[0]) <= set(CONTINUATION_TOOLS) and "agent_task" in offered(continuation[0])
    transcript = await messages(alice, cid)
    assert not any(m["content"].startswith(TRIGGER) for m in transcript)
    assert transcript[-1]["content"] == "The researcher is back: Oslo."
    assert_well_formed(transcript)
    assert [r["status"] for r in await runs(alice, cid)] == ["completed"]
    assert await runs(alice, cid, strip=True) == []  # a completed run leaves the task strip
    store = coordinator(chat, alice).store
    events_rows = await store.db.run(lambda c: [dict(r) for r in c.execute("SELECT status, event_type FROM agent_inbox_events")])
    assert events_rows == [{"status": "consumed", "event_type": "completion"}]


async def test_a_lost_wake_up_is_made_good_by_the_periodic_look(chat, monkeypatch):
    """§8.4: with every wake-up lost, the result still arrives (the worker looks again
    every recheck_secs)."""
    monkeypatch.setattr(SubagentCoordinator, "wake", lambda self, conversation_id=None: None)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"]
        if content == "Background task.":
            return Reply("background answer")
        if content.startswith(TRIGGER):
            return Reply("It came back.")
        if last(request)["role"] == "tool":
            return Reply("Started.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Background task.", "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
        await sock.turn(cid, timeout=15)
    assert (await messages(alice, cid))[-1]["content"] == "It came back."


async def test_stop_cancels_background_runs_and_nothing_continues_after_it(chat):
    """§6: a Stop's cancel completion is written consumed: no continuation turn."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = delegate_a_slow_task
    async with ChatSocket(alice) as sock:
        cid, _ = await start_a_slow_task(chat, alice, sock)
        response = await alice.post(f"/api/conversations/{cid}/stop")
        assert response.status_code == 200
        [row] = await runs(alice, cid)
        assert row["status"] == "cancelled"
        await asyncio.sleep(0.5)
    assert not any(last(r)["content"].startswith(TRIGGER) for r in chat.server.requests_for(MODEL_A))
    assert await inbox_statuses(chat, alice) == ["consumed"]
    assert await inbox_counters(chat, alice) == (0, 0)


async def test_cancelling_a_background_run_announces_its_end_like_any_other(chat):
    """The cancel commits the run's end, so its task's commit announces nothing: without
    the cancel's own ``agent_done`` the chat's box of the run stays "working"."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = delegate_a_slow_task
    async with ChatSocket(alice) as sock:
        cid, started = await start_a_slow_task(chat, alice, sock)
        done = await cancel_run(alice, sock, cid, started["run_id"])
    assert (done["status"], done["frame_id"], done["depth"]) == ("cancelled", started["frame_id"], 1)
    assert sum(e["type"] == "agent_done" for e in sock.events) == 1


async def test_a_run_id_is_not_a_credential_across_members_nor_across_a_tree(chat):
    """§7: another member's run answers 404 over HTTP and "no such run" to their
    agent; a named agent sees only its own run and those below it."""
    await configure_models(chat.admin, chat.server)
    agents(chat, lead={"tools": ["execute_task", "agent_task"]})
    alice = await chat.host.member("alice")
    bob = await chat.host.member("bob")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Alice's."})]),
        Reply("alice's result"),
        Reply("Done."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
    [alice_run] = await runs(alice, cid)
    assert (await bob.get(f"/api/agent-runs/{alice_run['id']}")).status_code == 404
    assert (await bob.post(f"/api/agent-runs/{alice_run['id']}/cancel")).status_code == 404

    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("agent_task", {"action": "get_result", "run_id": alice_run["id"]})]),
        Reply("Nothing."),
    ])
    async with ChatSocket(bob) as sock:
        bid = await new_conversation(bob)
        await sock.send(bid, "Read alice's run.")
        await sock.turn(bid)
    assert tool_results(chat.server.requests_for(MODEL_A)[-1]) == ["Error: no such run here"]

    # Inside one conversation: the lead (a named agent) lists runs and tries the root's other run.
    def respond(request):
        content = last(request)["content"]
        if content == "Look around.":
            return Reply(tool_calls=[ToolCall("agent_task", {"action": "list"}), ToolCall("agent_task", {"action": "get", "run_id": alice_run["id"]})])
        if last(request)["role"] == "tool" and request.messages[1]["content"] == "Look around.":
            return Reply("lead saw: " + " | ".join(tool_results(request)))
        if last(request)["role"] == "tool":
            return Reply("ok")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "lead", "task": "Look around."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "Again.")
        await sock.turn(cid)
    lead_final = next(r for r in chat.server.requests_for(MODEL_A) if r.messages[1]["content"] == "Look around." and last(r)["role"] == "tool")
    listing, refused = tool_results(lead_final)
    assert "lead" in listing and alice_run["id"] not in listing
    assert refused == "Error: no such run here"


async def test_signals_are_bounded_deduplicated_and_delivered_with_the_completion(chat):
    """§4.7/§8.15: the contract's bounds hold in the tool; one key once per cooldown
    window; the completion lists the signal ids."""
    await configure_models(chat.admin, chat.server)
    agents(chat, watcher={"tools": ["emit_signal"], "signal": {"delivery": "queue", "max_signals": 2, "cooldown_secs": 3600, "severities": ["info"]}})
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"]
        if content == "Watch.":
            calls = [
                ToolCall("emit_signal", {"key": "progress", "severity": "info", "summary": "half way"}),
                ToolCall("emit_signal", {"key": "progress", "severity": "info", "summary": "half way again"}),
                ToolCall("emit_signal", {"key": "alarm", "severity": "critical", "summary": "not allowed"}),
                ToolCall("emit_signal", {"key": "done", "severity": "info", "summary": "x" * 500}),
            ]
            return Reply(tool_calls=calls)
        if request.messages[1]["content"] == "Watch." and last(request)["role"] == "tool":
            return Reply("watched")
        if content.startswith(TRIGGER):
            return Reply("Noted.")
        if last(request)["role"] == "tool":
            return Reply("Started.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "watcher", "task": "Watch.", "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Watch it.")

        def delivered() -> str:
            return "\n".join(last(r)["content"] for r in chat.server.requests_for(MODEL_A) if last(r)["content"].startswith(TRIGGER))

        await eventually(lambda: "watched" in delivered(), what="the completion's continuation")
    watcher = next(r for r in chat.server.requests_for(MODEL_A) if r.messages[1]["content"] == "Watch." and last(r)["role"] == "tool")
    first, duplicate, severity, too_long = tool_results(watcher)
    assert first.startswith("Signal ") and "already sent in this cooldown window" in duplicate
    assert "'severity' must be one of info" in severity and "'summary' must be text of at most 280" in too_long
    assert delivered().count("half way") == 1
    store = coordinator(chat, alice).store
    completion = await store.db.run(lambda c: c.execute("SELECT payload FROM agent_inbox_events WHERE event_type = 'completion'").fetchone()[0])
    signal_ids = await store.db.run(lambda c: [r[0] for r in c.execute("SELECT id FROM agent_inbox_events WHERE event_type = 'signal'")])
    assert json.loads(completion)["signal_ids"] == signal_ids and len(signal_ids) == 1


async def test_a_locked_members_result_waits_in_their_file_until_they_log_in(chat):
    """§4: the member logs out (their file locks) while a background run works; the
    run cannot finish without them, and at their next login its outcome is delivered
    once, from their own file."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"]
        if content == "Long task.":
            return Hang(text="working")
        if content.startswith(TRIGGER):
            return Reply("While you were away: the task was interrupted.")
        if last(request)["role"] == "tool":
            return Reply("Started.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Long task.", "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
    await eventually(lambda: any(last(r)["content"] == "Long task." for r in chat.server.requests_for(MODEL_A)), what="the run's request")
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    assert chat.host.core.chat.live_runtime(alice.member["id"]) is None
    seen = len(chat.server.requests_for(MODEL_A))

    again = await chat.host.member("alice")
    async with ChatSocket(again) as sock:
        await sock.wait_event(cid, "turn_finished", timeout=15)
    after = chat.server.requests_for(MODEL_A)[seen:]
    assert sum(1 for r in after if last(r)["content"].startswith(TRIGGER)) == 1
    assert "status interrupted" in next(last(r)["content"] for r in after if last(r)["content"].startswith(TRIGGER))
    assert (await messages(again, cid))[-1]["content"] == "While you were away: the task was interrupted."
    assert [r["status"] for r in await runs(again, cid)] == ["interrupted"]


@pytest.mark.parametrize(
    ("chat_settings", "at_once"),
    [({}, 4), ({"subagents": {"max_concurrent_runs_per_session": 2}}, 2), ({"subagents": {"max_concurrent_runs": 3}}, 3)],
    ids=["seed-default-4", "configured-2-per-conversation", "configured-3-on-the-host"],
)
async def test_a_conversation_runs_at_most_its_bound_of_delegates_at_once_and_answers_all_in_order(chat, at_once):
    """§9: ``max_concurrent_runs_per_session`` and ``max_concurrent_runs`` (the seed's
    4 and 6, or the instance's ``subagents`` settings) bound the runs in flight; the
    rest wait queued, none is refused, and the batch answers in request order."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    in_flight, most = 0, 0

    async def respond(request):
        nonlocal in_flight, most
        content = last(request)["content"]
        if content.startswith("Part "):
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.15)
            in_flight -= 1
            return Reply(f"done {content}")
        if last(request)["role"] == "tool":
            return Reply("All parts done.")
        batch = {"tasks": [{"agent": "researcher", "task": f"Part {i}."} for i in range(6)]}
        return Reply(tool_calls=[ToolCall("execute_task", batch)])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Six parts.")
        await sock.turn(cid)
    assert most == at_once
    result = tool_results(chat.server.requests_for(MODEL_A)[-1])[0]
    assert [result.index(f"done Part {i}.") for i in range(6)] == sorted(result.index(f"done Part {i}.") for i in range(6))
    assert [r["status"] for r in await runs(alice, cid)] == ["completed"] * 6


@pytest.mark.parametrize("chat_settings", [{"subagents": {"max_concurrent_runs": 3, "max_concurrent_runs_per_member": 2}}])
async def test_one_members_delegations_never_take_every_run_of_the_instance(chat):
    """A security probe's member held all six of the instance's runs with two
    conversations' batches of slow tasks, and another member's delegation waited until
    they ended: each member has a share (``max_concurrent_runs_per_member``)."""
    await configure_models(chat.admin, chat.server)
    bob, alice = await chat.host.member("bob"), await chat.host.member("alice")
    release, bobs_running = asyncio.Event(), 0

    async def respond(request):
        nonlocal bobs_running
        content = last(request)["content"]
        if content.startswith("Bob part"):
            bobs_running += 1
            await release.wait()
            return Reply("done")
        if content == "Alice part.":
            return Reply("Alice's part is done.")
        if last(request)["role"] == "tool":
            return Reply("All parts done.")
        if content == "Alice asks.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Alice part."})])
        return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [{"agent": "researcher", "task": f"Bob part {i}."} for i in range(2)]})])

    chat.server.responder = respond
    async with ChatSocket(bob) as bob_sock, ChatSocket(alice) as alice_sock:
        bobs = [await new_conversation(bob) for _ in range(2)]
        for cid in bobs:
            await bob_sock.send(cid, "Bob asks.")
        while bobs_running < 2:
            await asyncio.sleep(0.02)
        alices = await new_conversation(alice)
        await alice_sock.send(alices, "Alice asks.")
        try:
            await asyncio.wait_for(alice_sock.turn(alices), 30)  # not behind bob's runs: they are held until it ends
        finally:
            release.set()
        assert bobs_running == 2  # bob's share: the other two of his tasks waited
        for cid in bobs:
            await bob_sock.turn(cid)
    assert (await messages(alice, alices))[-1]["content"] == "All parts done."


async def test_a_delegating_turn_writes_the_run_frame_with_its_call_and_the_run_end_with_its_answer(chat):
    """Fewer commits only by joining writes that announce nothing between them (the
    delegation benchmark): the caller's round with its execute_task call, the run's
    row and frame are one commit; the run's final answer and its completed state are
    one commit. Five commits on the member's file, beside a direct loop's four."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Capital of Norway?"})]),
        Reply("Oslo."),
        Reply("It is Oslo."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        db = chat.host.core.chat.live_runtime(alice.member["id"]).store.db
        commits: list[str] = []

        def counting(original):
            def counted(fn):
                commits.append(getattr(fn, "__qualname__", repr(fn)))
                return original(fn)
            return counted

        db.transaction, db.transaction_queued = counting(db.transaction), counting(db.transaction_queued)
        try:
            await sock.send(cid, "Ask the researcher.")
            events = await sock.turn(cid)
        finally:
            del db.transaction, db.transaction_queued
    [row] = await runs(alice, cid)
    assert row["status"] == "completed"
    # The member's message, the round with the call and the run's frame, the run's
    # answer with its end, the caller's tool result with its next round, its answer;
    # no steer claim (nothing can be pending in the inbox of a conversation without runs).
    assert len(commits) == 5 and not any("claim" in c for c in commits), commits
    kinds = [e["type"] for e in events]
    assert kinds.index("tool_start") < kinds.index("agent_start") < kinds.index("agent_done") < kinds.index("tool_done")


async def test_a_run_refused_inside_its_calls_round_leaves_that_round_written(chat):
    """The run's frame rides in its call's round under a savepoint: a refusal found in
    that transaction (the tree is full, §9) rolls back the run alone; the round and
    its call stay, and the call's result says why. A run the tree has no room for
    sends no request of its own before that write (the script has none to spare)."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "First?"})]),
        Reply("One."),
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Second?"})]),
        Reply("Only one ran."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        coord = coordinator(chat, alice)
        coord.limits = dataclasses.replace(coord.limits, max_runs_per_tree=1)
        await sock.send(cid, "Ask twice.")
        await sock.turn(cid)
    [row] = await runs(alice, cid)
    assert row["task"] == "First?"
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    calls = [c for m in transcript for c in m["tool_calls"]]
    assert [c["status"] for c in calls] == ["done", "error"]
    assert "at most 1 runs" in calls[1]["result"]
    assert transcript[-1]["content"] == "Only one ran."


async def test_stop_discards_a_finished_background_result_waiting_for_its_continuation(chat):
    """§8.6 with §6's suppress_continuation: a completion that came in while the turn
    ran waits for the next turn; a Stop discards that turn's input, so it is consumed
    with no continuation — its result kept on its run."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        content = last(request)["content"] or ""
        if content == "Quick task.":
            return Reply("Quick result.")
        if content.startswith(TRIGGER):
            return Reply("It came back.")
        if last(request)["role"] == "tool":
            return Hang(text="still talking")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Quick task.", "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.wait_event(cid, "token", depth=0)
        [row] = await eventually(lambda: _completed(alice, cid), what="the background run's completion")
        store = coordinator(chat, alice).store
        events = lambda: store.db.run(lambda c: [tuple(r) for r in c.execute("SELECT status, requires_continuation FROM agent_inbox_events")])
        assert await events() == [("pending", 1)]  # waiting for the running turn's end
        assert (await sock.stop(cid))["stopped"] is True
        await sock.turn(cid)
        await asyncio.sleep(0.5)  # the turn's end woke the inbox worker: nothing to deliver
        assert await events() == [("consumed", 0)]
    assert not any((last(r)["content"] or "").startswith(TRIGGER) for r in chat.server.requests_for(MODEL_A))
    assert await inbox_counters(chat, alice) == (0, 0)
    assert (await run(alice, row["id"]))["run"]["result"] == "Quick result."
    assert not any(m["content"] == "It came back." for m in await messages(alice, cid))


async def _completed(client: Any, cid: str) -> list[dict[str, Any]] | None:
    rows = await runs(client, cid)
    return rows if rows and rows[0]["status"] == "completed" else None


async def test_a_delegated_runs_first_request_goes_out_once_its_frame_commits_and_nothing_of_it_is_announced_before(chat):
    """The run's frame rides in its call's round write; its first request is built
    from memory meanwhile and sent once that commit has landed (its placeholder is what
    recovery counts the request by if a crash cuts it: sent beside the commit, it was
    billed and never logged when the crash came first), and its tokens and its
    agent_start are never announced before the write."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Capital of Norway?"})]),
        Reply("Oslo."),
        Reply("It is Oslo."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        db = chat.host.core.chat.live_runtime(alice.member["id"]).store.db
        original, committed, submitted = db.transaction, [], []

        async def slow_second(fn):
            submitted.append(fn)
            if len(submitted) == 2:  # the round with the call and the run's frame
                await asyncio.sleep(0.3)
            try:
                return await original(fn)
            finally:
                committed.append(asyncio.get_running_loop().time())

        db.transaction = slow_second  # type: ignore[method-assign]
        try:
            await sock.send(cid, "Ask the researcher.")
            events = await sock.turn(cid)
        finally:
            del db.transaction
    child_request = chat.server.requests_for(MODEL_A)[1]
    assert child_request.messages[-1]["content"] == "Capital of Norway?"
    frame_written = committed[1]
    assert child_request.received_at > frame_written  # sent once its frame was written
    child_events = [e for e in events if e.get("depth") == 1 or e["type"] == "agent_start"]
    assert child_events and all(e["_at"] >= frame_written for e in child_events)
    [row] = await runs(alice, cid)
    assert row["status"] == "completed" and (await run(alice, row["id"]))["run"]["result"] == "Oslo."


async def test_a_helpers_pending_approval_names_its_frame_and_helper_as_its_live_event_does(chat):
    """The approval a helper's call waits for, read with the conversation (a reload),
    names the helper's frame and agent, so the card says who asks, not "the assistant";
    one of the conversation's own agent names no helper."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        if "Note it." in [m["content"] for m in request.messages if m["role"] == "user"]:
            return Reply("Noted.") if last(request)["role"] == "tool" else Reply(tool_calls=[ToolCall("write_note", {"path": "a.txt"})])
        if last(request)["role"] == "tool":
            return Reply("Done." if "Noted." in last(request)["content"] else "Written.")
        if last(request)["content"] == "Write it yourself.":
            return Reply(tool_calls=[ToolCall("write_note", {"path": "b.txt"})])
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "general-purpose", "task": "Note it."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask a helper to note it.")
        asked = await sock.wait_event(cid, "approval_required")
        assert asked["depth"] == 1
        [pending] = (await alice.get(f"/api/conversations/{cid}")).json()["approvals"]
        assert (pending["id"], pending["frame_id"], pending["agent"]) == (asked["approval_id"], asked["frame_id"], "general-purpose")
        await sock.approve(asked["approval_id"], "deny")
        await sock.turn(cid)

        start = len(sock.events)
        await sock.send(cid, "Write it yourself.")
        own = await sock.wait_event(cid, "approval_required", start=start)
        assert own["depth"] == 0
        [pending] = (await alice.get(f"/api/conversations/{cid}")).json()["approvals"]
        assert pending["id"] == own["approval_id"] and pending["frame_id"] == own["frame_id"] and pending["agent"] is None
        await sock.approve(own["approval_id"], "deny")
        await sock.turn(cid)

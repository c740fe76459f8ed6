"""The steer lane (seed 004 §4.3/§4.4, pitfalls §8.5 and §8.6): a signal whose contract
says ``delivery: steer`` goes into the conversation's running turn at its next round
boundary, by two-phase admission (claim → a slot in the turn's mailbox → DB admit),
and is consumed by the write that puts it into history. Every other path is lossless:
a full mailbox, or a turn that ends first, leaves it to the queue lane (a
continuation); a Stop discards what the stopped turn owned, once.

A real host, the real openai SDK against the scripted model server; the state of the
inbox is read from the member's own file."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from skald_host.core.agent.subagents.runs import RunStore
from skald_host.testing import Hang, Reply, ToolCall

from .support import MODEL_A, ChatSocket, configure_models, eventually, messages, new_conversation
from .test_subagent_runs import CID, accept, counters, db, events, new_run  # noqa: F401 (db: the fixture)
from .test_subagents import TRIGGER, agents, coordinator, last

WATCH = "Watch."


def watcher(**signal: Any) -> dict[str, Any]:
    return {"tools": ["emit_signal"], "signal": {"delivery": "steer", "cooldown_secs": 3600, "severities": ["info"], **signal}}


async def inbox(chat: Any, member: Any) -> list[dict[str, Any]]:
    db = coordinator(chat, member).store.db
    return await db.run(lambda c: [dict(r) for r in c.execute("SELECT * FROM agent_inbox_events ORDER BY id")])


async def origin_of(chat: Any, member: Any, message_id: int) -> str | None:
    db = coordinator(chat, member).store.db
    return await db.run(lambda c: c.execute("SELECT origin FROM messages WHERE id = ?", (message_id,)).fetchone()[0])


async def counters_match_rows(chat: Any, member: Any) -> bool:
    db = coordinator(chat, member).store.db

    def read(c: Any) -> bool:
        stored = c.execute("SELECT coalesce(sum(pending_event_count), 0) FROM agent_session_state").fetchone()[0]
        rows = c.execute("SELECT count(*) FROM agent_inbox_events WHERE status IN ('pending', 'leased', 'admitted')").fetchone()[0]
        return stored == rows

    return await db.run(read)


def is_watcher(request: Any) -> bool:
    return request.messages[1]["content"] == WATCH


def watcher_signalled(chat: Any) -> bool:
    return any(is_watcher(r) and last(r)["role"] == "tool" for r in chat.server.requests_for(MODEL_A))


def delivered_as_last(chat: Any, text: str) -> list[Any]:
    """Requests whose newest message is a host trigger carrying ``text``: the moments
    the model was told (a later request replays it as history, and is not counted)."""
    return [
        r for r in chat.server.requests_for(MODEL_A)
        if last(r)["role"] == "user" and last(r)["content"].startswith(TRIGGER) and text in last(r)["content"]
    ]


def watcher_round(request: Any, *summaries: str) -> Reply | None:
    if not is_watcher(request):
        return None
    if last(request)["role"] == "tool":
        return Reply("watched")
    return Reply(tool_calls=[ToolCall("emit_signal", {"key": f"k{i}", "severity": "info", "summary": s}) for i, s in enumerate(summaries)])


async def test_a_steer_signal_enters_the_running_turn_before_its_next_round_exactly_once(chat):
    """§4.4: the running turn's next round is sent with the signal as its newest
    message; the event is consumed by that write (bound to a trigger of the steer
    origin, hidden from the member), and no continuation repeats it."""
    await configure_models(chat.admin, chat.server)
    agents(chat, watcher=watcher())
    alice = await chat.host.member("alice")
    root_rounds: list[str] = []

    async def respond(request):
        mine = watcher_round(request, "half way")
        if mine is not None:
            return mine
        content = last(request)["content"]
        if last(request)["role"] == "user" and content.startswith(TRIGGER):
            if "half way" in content:
                root_rounds.append("steered")
                return Reply("Heard: half way.")
            return Reply("Noted.")
        if last(request)["role"] == "tool" and not root_rounds:
            root_rounds.append("tool")
            await eventually(lambda: watcher_signalled(chat), what="the watcher's signal")
            return Reply(tool_calls=[ToolCall("list_agents", {})])
        if last(request)["role"] == "tool":
            return Reply("Unsteered answer.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "watcher", "task": WATCH, "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Watch it.")
        await sock.turn(cid)
        assert root_rounds == ["tool", "steered"]  # the signal came in this turn, not after it
        await eventually(lambda: delivered_as_last(chat, "Background task finished"), what="the completion's continuation")
        await sock.turn(cid)
    [steered] = delivered_as_last(chat, "half way")
    assert steered.messages[-2]["role"] == "tool"  # right after the round's results, at the boundary
    [signal] = [e for e in await inbox(chat, alice) if e["event_type"] == "signal"]
    assert (signal["delivery"], signal["status"], signal["attempt_count"]) == ("steer", "consumed", 1)
    assert await origin_of(chat, alice, signal["consumed_message_id"]) == "agent_steer"
    shown = [m["content"] for m in await messages(alice, cid)]
    assert "Heard: half way." in shown and not any(TRIGGER in text for text in shown)
    assert await counters_match_rows(chat, alice)


async def test_a_full_mailbox_leaves_the_signal_to_the_queue_lane(chat):
    """§4.4 failure path: the turn's mailbox holds one steer event; the second signal
    stays pending and arrives after the turn as a continuation — each exactly once."""
    await configure_models(chat.admin, chat.server)
    agents(chat, watcher=watcher())
    alice = await chat.host.member("alice")
    asked = False

    async def respond(request):
        nonlocal asked
        mine = watcher_round(request, "first news", "second news")
        if mine is not None:
            return mine
        if last(request)["role"] == "user" and last(request)["content"].startswith(TRIGGER):
            return Reply("Noted.")
        if last(request)["role"] == "tool" and not asked:
            asked = True
            await eventually(lambda: watcher_signalled(chat), what="the watcher's signals")
            return Reply(tool_calls=[ToolCall("list_agents", {})])
        if last(request)["role"] == "tool":
            return Reply("Done.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "watcher", "task": WATCH, "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        subagents = coordinator(chat, alice)  # live once the member has a conversation
        subagents.limits = dataclasses.replace(subagents.limits, steer_mailbox_capacity=1)
        await sock.send(cid, "Watch it.")
        await sock.turn(cid)

        async def settled() -> bool:
            return all(e["status"] == "consumed" for e in await inbox(chat, alice)) and len(await inbox(chat, alice)) == 3

        await eventually(settled, what="every event consumed")
        await eventually(lambda: delivered_as_last(chat, "second news"), what="the second signal's continuation")
    first, second = (e for e in await inbox(chat, alice) if e["event_type"] == "signal")
    assert len(delivered_as_last(chat, "first news")) == 1 and len(delivered_as_last(chat, "second news")) == 1
    assert await origin_of(chat, alice, first["consumed_message_id"]) == "agent_steer"
    assert await origin_of(chat, alice, second["consumed_message_id"]) == "agent_continuation"
    assert await counters_match_rows(chat, alice)


async def test_a_turn_that_ends_before_its_admitted_signal_is_taken_releases_it_to_the_queue_lane(chat):
    """§8.5: admitted into the running turn, which then answers without another round:
    the event goes back to pending by its lease token and the queue lane delivers it
    as a continuation, once; never dropped."""
    await configure_models(chat.admin, chat.server)
    agents(chat, watcher=watcher())
    alice = await chat.host.member("alice")
    seen: list[str] = []

    async def admitted() -> bool:
        return any(e["status"] == "admitted" for e in await inbox(chat, alice))

    async def respond(request):
        mine = watcher_round(request, "half way")
        if mine is not None:
            return mine
        if last(request)["role"] == "user" and last(request)["content"].startswith(TRIGGER):
            return Reply("Noted.")
        if last(request)["role"] == "tool":
            await eventually(admitted, what="the signal admitted into the running turn")
            seen.append("admitted")
            return Reply("Done before the signal.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "watcher", "task": WATCH, "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Watch it.")
        await sock.turn(cid)
        assert seen == ["admitted"]
        await eventually(lambda: delivered_as_last(chat, "half way"), what="the released signal's continuation")
    [signal] = [e for e in await inbox(chat, alice) if e["event_type"] == "signal"]
    assert signal["status"] == "consumed" and signal["attempt_count"] == 2  # one steer claim, released; one queue delivery
    assert await origin_of(chat, alice, signal["consumed_message_id"]) == "agent_continuation"
    assert len(delivered_as_last(chat, "half way")) == 1
    await eventually(lambda: counters_match_rows(chat, alice), what="the counters")


async def test_stop_discards_the_steer_events_its_turn_owned_and_the_next_turns_input(chat):
    """§8.6: input ownership is exclusive, and a Stop discards both owners' input. The
    admitted signal belongs to the stopped turn and is discarded with it (superseded,
    off the capacity count, never delivered); the finished run's completion was the
    next turn's (pending), and is consumed with no continuation (§6
    suppress_continuation), its result kept on its run. The run finished before the
    Stop, so the Stop's cancel cascade (which supersedes a cancelled run's signals)
    does not touch it."""
    await configure_models(chat.admin, chat.server)
    agents(chat, watcher=watcher())
    alice = await chat.host.member("alice")

    async def ready() -> bool:
        statuses = await coordinator(chat, alice).store.db.run(lambda c: [r[0] for r in c.execute("SELECT status FROM agent_runs")])
        return statuses == ["completed"] and any(e["status"] == "admitted" for e in await inbox(chat, alice))

    async def respond(request):
        mine = watcher_round(request, "half way")
        if mine is not None:
            return mine
        if last(request)["role"] == "user" and last(request)["content"].startswith(TRIGGER):
            return Reply("Noted.")
        if last(request)["role"] == "tool":
            await eventually(ready, what="the run finished and its signal admitted")
            return Hang(text="thinking")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "watcher", "task": WATCH, "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Watch it.")
        await eventually(lambda: any(last(r)["role"] == "tool" and not is_watcher(r) for r in chat.server.requests_for(MODEL_A)),
                         what="the root's second round")
        await eventually(ready, what="the run finished and its signal admitted")
        response = await alice.post(f"/api/conversations/{cid}/stop")
        assert response.status_code == 200, response.text
        await sock.wait_event(cid, "turn_finished")
        await asyncio.sleep(0.5)  # the turn's end woke the inbox worker: nothing is due
    events = {e["event_type"]: e for e in await inbox(chat, alice)}
    assert events["signal"]["status"] == "superseded"
    assert (events["completion"]["status"], events["completion"]["requires_continuation"]) == ("consumed", 0)
    assert not delivered_as_last(chat, "Background task finished")
    assert not delivered_as_last(chat, "half way")
    [row] = await coordinator(chat, alice).store.runs(cid)
    assert row["result"]
    assert not any("half way" in m["content"] for r in chat.server.requests_for(MODEL_A) for m in r.messages if m["role"] == "user")
    await eventually(lambda: counters_match_rows(chat, alice), what="the counters")


async def test_an_admitted_signal_left_by_a_stopping_server_is_delivered_once_after_the_restart(chat):
    """§6/§8.5: the member's runtime closes (logout locks the file) while the signal is
    admitted into a running turn. Closing leaves it admitted, as a crash would (the
    real SIGKILL is test_subagent_crash's); recovery at the next login releases it, and
    it reaches the model exactly once."""
    await configure_models(chat.admin, chat.server)
    agents(chat, watcher=watcher())
    alice = await chat.host.member("alice")
    life = 1

    async def ready() -> bool:
        statuses = await coordinator(chat, alice).store.db.run(lambda c: [r[0] for r in c.execute("SELECT status FROM agent_runs")])
        return statuses == ["completed"] and any(e["status"] == "admitted" for e in await inbox(chat, alice))

    async def respond(request):
        mine = watcher_round(request, "half way")
        if mine is not None:
            return mine
        if last(request)["role"] == "user" and last(request)["content"].startswith(TRIGGER):
            return Reply("Noted.")
        if last(request)["role"] == "tool" and life == 1:
            await eventually(ready, what="the run finished and its signal admitted")
            return Hang(text="thinking")
        if last(request)["role"] == "tool":
            return Reply("Done after the restart.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "watcher", "task": WATCH, "mode": "background"})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Watch it.")
        await eventually(ready, what="the run finished and its signal admitted")
        await eventually(lambda: any(last(r)["role"] == "tool" and not is_watcher(r) for r in chat.server.requests_for(MODEL_A)),
                         what="the root's hanging round")
    life = 2
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    assert chat.host.core.chat.live_runtime(alice.member["id"]) is None
    assert not delivered_as_last(chat, "half way")

    again = await chat.host.member("alice")
    async with ChatSocket(again):
        await eventually(lambda: delivered_as_last(chat, "half way"), what="the signal after the restart")

        async def consumed() -> bool:
            return all(e["status"] == "consumed" for e in await inbox(chat, again))

        await eventually(consumed, what="every event consumed")
    assert len(delivered_as_last(chat, "half way")) == 1
    [signal] = [e for e in await inbox(chat, again) if e["event_type"] == "signal"]
    assert await origin_of(chat, again, signal["consumed_message_id"]) in ("agent_continuation", "agent_steer")
    assert await counters_match_rows(chat, again)


async def test_admission_is_guarded_by_the_lease_token_and_each_way_out_keeps_the_count(db):
    """§4.3 in the store: the steer claim takes only steer events; admit acts only
    with the claim's token (a stale holder changes nothing) and binds each event to
    its turn, by which a Stop discards and a close releases; a released event is
    pending again, a discarded one is off the capacity count."""
    store = RunStore(db, generation="g")
    [run] = await accept(store, new_run())
    for key, delivery in (("s1", "steer"), ("q1", "queue"), ("s2", "steer")):
        assert (await store.insert_signal(run.run_id, run.execution_id, f"signal:{key}:0", delivery, "info", {}, 128))[0] == "ok"
    token, claimed = await store.claim(CID, time.time(), 60, delivery="steer")
    steer_ids = [e["id"] for e in claimed]
    assert [e["delivery"] for e in claimed] == ["steer", "steer"]
    assert await store.admit("not-the-token", steer_ids, "turn-a") == []
    assert await store.admit(token, steer_ids[:1], "turn-a") == steer_ids[:1]
    assert await store.admit(token, steer_ids[1:], "turn-b") == steer_ids[1:]
    assert [e["admitted_turn_id"] for e in await events(db) if e["id"] in steer_ids] == ["turn-a", "turn-b"]
    assert await store.discard_turn("another-turn") == 0
    assert await store.discard_turn("turn-a") == 1
    assert await store.release_turn("turn-a", max_attempts=8) == 0  # discarded: not the turn's any more
    assert await store.release_turn("turn-b", max_attempts=8) == 1
    by_id = {e["id"]: e for e in await events(db)}
    assert [by_id[i]["status"] for i in steer_ids] == ["superseded", "pending"]
    assert (by_id[steer_ids[1]]["lease_token"], by_id[steer_ids[1]]["admitted_turn_id"]) == (None, None)
    assert await counters(db) == (2, 1)  # the queued signal and the released one; the completion slot still reserved

"""A helper waiting for its member's answer holds no run permit (README, "Named
sub-agents"): a probe found four unanswered approval cards of helpers holding every
permit of their member, and six (four of alice's, two of bob's) every permit of the
host, so that every further delegation — of that member, then of anyone — stayed
``queued``, with no model request, until the cards expired half an hour later. The
permits are given back while the card waits and taken again when it is answered,
queued (and said so) when none is free then.

And a foreground run taken up again after a restart no longer shows the cut's error
("the server stopped while this ran") while it runs again.

A real host and the scripted model server; responders keyed on what each request asks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skald_host.testing import Hang, Reply, ToolCall

from .support import PROBE, MODEL_A, ChatSocket, configure_models, eventually, last, new_conversation, runs

NOTE = "Note it."  # a helper's task: it asks the member's approval (write_note)
LOOKUP = "Look it up."  # a helper's task answered at once
SLOW = "Look it up slowly."  # a helper's task answered when the test says so


def users(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


def helper_requests(chat: Any, task: str, *, after_a_tool: bool = False) -> int:
    return sum(
        1 for r in chat.server.requests_for(MODEL_A)
        if task in users(r) and (not after_a_tool or last(r)["role"] == "tool")
    )


def responder(release: asyncio.Event):
    async def respond(request: Any) -> Reply:
        said = users(request)
        if NOTE in said:
            return Reply("Noted.") if last(request)["role"] == "tool" else Reply(tool_calls=[ToolCall("write_note", {"text": "a"})])
        if SLOW in said:
            await release.wait()
            return Reply("Found it slowly.")
        if LOOKUP in said:
            return Reply("Found it.")
        if last(request)["role"] == "tool":
            return Reply("Over.")
        task = {"One lookup.": LOOKUP, "One slow lookup.": SLOW}.get(said[-1], NOTE)
        agent = "general-purpose" if task == NOTE else "researcher"
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": agent, "task": task})])

    return respond


async def helpers_waiting_for_cards(client: Any, sock: ChatSocket, count: int) -> list[str]:
    """``count`` conversations, each with a foreground helper waiting for the member's
    approval."""
    held = []
    for _ in range(count):
        cid = await new_conversation(client)
        start = len(sock.events)
        await sock.send(cid, "Ask a helper to note it.")
        await sock.wait_event(cid, "approval_required", start=start)
        held.append(cid)
    return held


async def deny_all(client: Any, sock: ChatSocket, held: list[str]) -> None:
    for cid in held:
        [card] = (await client.get(f"/api/conversations/{cid}")).json()["approvals"]
        await sock.approve(card["id"], "deny")
    for cid in held:
        await sock.turn(cid)


async def test_helpers_waiting_for_approval_leave_the_member_and_the_host_their_runs(chat):
    """The probe's repro: alice's four helpers and bob's two wait for cards (the
    member's share and the host's six); a fifth conversation of alice's and the admin's
    delegation run now, not when the cards are answered."""
    await configure_models(chat.admin, chat.server)
    alice, bob = await chat.host.member("alice"), await chat.host.member("bob")
    chat.server.responder = responder(asyncio.Event())
    async with ChatSocket(alice) as alice_sock, ChatSocket(bob) as bob_sock, ChatSocket(chat.admin) as admin_sock:
        alices = await helpers_waiting_for_cards(alice, alice_sock, 4)
        bobs = await helpers_waiting_for_cards(bob, bob_sock, 2)
        for client, cids in ((alice, alices), (bob, bobs)):
            for cid in cids:
                assert [r["status"] for r in await runs(client, cid)] == ["running"]  # waiting for its card, not queued

        cid = await new_conversation(alice)
        await alice_sock.send(cid, "One lookup.")
        await alice_sock.turn(cid)
        assert [r["status"] for r in await runs(alice, cid)] == ["completed"]

        admins = await new_conversation(chat.admin)
        await admin_sock.send(admins, "One lookup.")
        await admin_sock.turn(admins)
        assert [r["status"] for r in await runs(chat.admin, admins)] == ["completed"]
        assert helper_requests(chat, LOOKUP) == 2

        # The cards still wait; answered, each helper takes its permit again and ends.
        await deny_all(alice, alice_sock, alices)
        await deny_all(bob, bob_sock, bobs)
    for client, cids in ((alice, alices), (bob, bobs)):
        for cid in cids:
            assert [r["status"] for r in await runs(client, cid)] == ["completed"]
    assert helper_requests(chat, NOTE, after_a_tool=True) == 6


@pytest.mark.parametrize("chat_settings", [{"subagents": {"max_concurrent_runs_per_member": 1}}])
async def test_a_helper_whose_card_is_answered_while_every_permit_is_taken_waits_queued(chat):
    """alice's one permit: her helper waiting for a card gives it back, a second
    conversation's slow helper takes it; the card answered, the first helper is queued
    (its row and an ``agent_queued``), sends nothing, and goes on once the slow one ends."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    release = asyncio.Event()
    chat.server.responder = responder(release)
    async with ChatSocket(alice) as sock:
        [held] = await helpers_waiting_for_cards(alice, sock, 1)
        [waiting_run] = await runs(alice, held)
        slow = await new_conversation(alice)
        await sock.send(slow, "One slow lookup.")
        await eventually(lambda: helper_requests(chat, SLOW) == 1, what="the slow helper's request")

        start = len(sock.events)
        [card] = (await alice.get(f"/api/conversations/{held}")).json()["approvals"]
        await sock.approve(card["id"], "deny")
        queued = await sock.wait_event(held, "agent_queued", start=start)
        assert queued["run_id"] == waiting_run["id"]
        await eventually(lambda: _statuses(alice, held, ["queued"]), what="the answered helper queued")
        [row] = await runs(alice, held)
        assert row["started_at"] == waiting_run["started_at"] and row["frame_id"] == waiting_run["frame_id"]  # still the run that started
        await asyncio.sleep(0.3)
        assert helper_requests(chat, NOTE, after_a_tool=True) == 0  # no request without a permit

        release.set()
        await sock.turn(slow)
        await sock.turn(held)
    assert [r["status"] for r in await runs(alice, held)] == ["completed"]
    assert helper_requests(chat, NOTE, after_a_tool=True) == 1


@pytest.mark.parametrize("chat_settings", [{"subagents": {"max_concurrent_runs_per_member": 1}}])
async def test_a_stop_while_the_answered_helper_waits_queued_ends_it_and_the_permit_count_stays_whole(chat):
    """The answered helper is queued again (no permit free), then its conversation is
    stopped: the run ends there and then instead of waiting for a permit, and once the
    slow helper is done the member's one permit serves the next delegation (a take-back
    left running unseen, or a permit given twice, would show as a run stuck queued or
    two running at once)."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    release = asyncio.Event()
    chat.server.responder = responder(release)
    async with ChatSocket(alice) as sock:
        [held] = await helpers_waiting_for_cards(alice, sock, 1)
        slow = await new_conversation(alice)
        await sock.send(slow, "One slow lookup.")
        await eventually(lambda: helper_requests(chat, SLOW) == 1, what="the slow helper's request")
        start = len(sock.events)
        [card] = (await alice.get(f"/api/conversations/{held}")).json()["approvals"]
        await sock.approve(card["id"], "deny")
        await sock.wait_event(held, "agent_queued", start=start)

        assert (await alice.post(f"/api/conversations/{held}/stop")).status_code == 200
        await sock.turn(held)
        await eventually(lambda: _ended(alice, held), what="the stopped helper's run ended")
        assert helper_requests(chat, NOTE, after_a_tool=True) == 0

        release.set()
        await sock.turn(slow)
        after = await new_conversation(alice)
        await sock.send(after, "One lookup.")
        await sock.turn(after)
    assert [r["status"] for r in await runs(alice, after)] == ["completed"]
    assert [r["status"] for r in await runs(alice, slow)] == ["completed"]


async def _ended(client: Any, cid: str) -> bool:
    return all(r["status"] not in ("queued", "running", "waiting") for r in await runs(client, cid))


async def test_a_foreground_run_taken_up_after_a_restart_shows_no_error_while_it_runs(chat, skald):
    """The cut wrote "the server stopped while this ran" into the run for recovery to
    read; the run taken up again is queued and running without it."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: (
        Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": SLOW})]) if users(request)[-1] != SLOW
        else Hang(text="reading", token_delay=0.02)
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "One slow lookup.")
        await sock.wait_event(cid, "token", depth=1)
    await chat.host.stop()

    release = asyncio.Event()
    chat.server.responder = responder(release)
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        await eventually(lambda: helper_requests(chat, SLOW) == 2, what="the run taken up again")
        [row] = await runs(alice, cid)
        assert (row["status"], row["error"], row["finished_at"]) == ("running", None, None)
        release.set()
        await sock.wait_event(cid, "turn_finished")
    [row] = await runs(alice, cid)
    assert (row["status"], row["error"]) == ("completed", None)


async def _statuses(client: Any, cid: str, expected: list[str]) -> bool:
    return sorted(r["status"] for r in await runs(client, cid)) == expected

"""The approval gate end to end (seed 001 "Approval gate", check E1's live part): a
tool no rule allows raises a card, the card is a durable row, either channel answers
it, an approval is used once and only for the arguments it was given, a denial is a
result the model reads, and a turn nobody attends is denied instead of waiting."""

from __future__ import annotations

import asyncio
import json

from skald_host.testing import Reply, ToolCall

from .support import MODEL_A, ChatSocket, allow_tool, assert_well_formed, configure_models, conversation, messages, new_conversation, types


def write(text: str) -> Reply:
    return Reply(tool_calls=[ToolCall("write_note", {"text": text})])


async def pending(client) -> list[dict]:
    response = await client.get("/api/approvals")
    assert response.status_code == 200
    return response.json()["approvals"]


async def test_approval_is_required_durable_answerable_by_socket_and_http_used_once_and_asked_again_for_other_arguments(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("a"), write("b"), Reply("Both notes are written.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write notes a and b.")

        card = await sock.wait_event(cid, "approval_required")
        assert card["name"] == "write_note" and json.loads(card["arguments"]) == {"text": "a"}
        rows = await pending(alice)
        assert [(r["id"], r["tool"], r["tool_call_id"], json.loads(r["arguments"])) for r in rows] == [
            (card["approval_id"], "write_note", card["call_id"], {"text": "a"})
        ]
        assert (await messages(alice, cid))[1]["tool_calls"][0]["status"] == "awaiting_approval"
        assert chat.probe.writes == []

        reply = await sock.approve(card["approval_id"])
        assert reply == {"type": "approval", "approval_id": card["approval_id"], "decision": "approved"}

        # The next round asks for other arguments: a new card, the first approval does not cover it.
        second = await sock.wait_event(cid, "approval_required", start=sock.events.index(card) + 1)
        assert second["approval_id"] != card["approval_id"] and json.loads(second["arguments"]) == {"text": "b"}
        assert [r["id"] for r in await pending(alice)] == [second["approval_id"]]
        assert chat.probe.writes == [{"text": "a"}]

        response = await alice.post(f"/api/approvals/{second['approval_id']}", json={"decision": "approve"})
        assert response.status_code == 200 and response.json()["decision"] == "approved"
        events = await sock.turn(cid)
        assert types(events).count("tool_done") == 2 and types(events)[-2:] == ["done", "turn_finished"]

        # Replaying a used approval, by either channel, is refused and runs nothing.
        replay = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
        assert replay.status_code == 409
        assert (await sock.approve(second["approval_id"]))["type"] == "error"

    assert chat.probe.writes == [{"text": "a"}, {"text": "b"}]
    assert {(ctx.member_id, ctx.conversation_id) for ctx in chat.probe.contexts} == {(alice.member["id"], cid)}
    assert await pending(alice) == []
    final = chat.server.requests_for(MODEL_A)[-1]
    assert [m["content"] for m in final.messages if m["role"] == "tool"] == ["wrote 'a'", "wrote 'b'"]
    transcript = await messages(alice, cid)
    assert [c["status"] for c in transcript[1]["tool_calls"] + transcript[2]["tool_calls"]] == ["done", "done"]
    assert_well_formed(transcript)


async def test_denied_call_is_reported_to_the_model_which_continues(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("secret"), Reply("Understood, I did not write it.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
        assert (await sock.approve(card["approval_id"], "deny"))["decision"] == "denied"
        events = await sock.turn(cid)
    assert "tool_denied" in types(events) and types(events)[-2:] == ["done", "turn_finished"]
    assert chat.probe.writes == []
    second = chat.server.requests_for(MODEL_A)[1]
    assert second.messages[-1]["role"] == "tool" and second.messages[-1]["content"].startswith("Denied")
    transcript = await messages(alice, cid)
    assert transcript[1]["tool_calls"][0]["status"] == "denied"
    assert transcript[-1]["content"] == "Understood, I did not write it."
    assert (await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})).status_code == 409


async def test_a_conversation_lists_its_answered_approvals_for_its_member_only(chat):
    """A reloaded screen draws each answered card as it ended live, from
    ``resolved_approvals``; a waiting card is not in it, and another member's read of
    the conversation is the 404 of an id that never existed."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    bob = await chat.host.member("bob")
    chat.server.script(MODEL_A, [write("a"), write("b"), Reply("One written, one not.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write notes a and b.")
        first = await sock.wait_event(cid, "approval_required")
        waiting = await conversation(alice, cid)
        assert [a["id"] for a in waiting["approvals"]] == [first["approval_id"]] and waiting["resolved_approvals"] == []
        await sock.approve(first["approval_id"])
        second = await sock.wait_event(cid, "approval_required", start=sock.events.index(first) + 1)
        await sock.approve(second["approval_id"], "deny")
        await sock.turn(cid)
    read = await conversation(alice, cid)
    assert read["approvals"] == []
    assert [(a["id"], a["tool_call_id"], a["tool"], a["status"]) for a in read["resolved_approvals"]] == [
        (first["approval_id"], first["call_id"], "write_note", "used"),
        (second["approval_id"], second["call_id"], "write_note", "denied"),
    ]
    assert all(a["resolved_at"] for a in read["resolved_approvals"])
    refused = await bob.get(f"/api/conversations/{cid}")
    assert refused.status_code == 404 and "resolved_approvals" not in refused.text


async def test_unattended_scheduled_turn_denies_what_needs_approval_without_asking(chat):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "schedule_prompt")
    alice = await chat.host.member("alice")
    schedule = Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": "Write the daily note.", "in_minutes": 0.001})])
    chat.server.script(MODEL_A, [schedule, Reply("I will remind myself."), write("daily"), Reply("I could not write the note.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Remind yourself to write the daily note.")
        await sock.turn(cid)
        await asyncio.sleep(0.1)  # the job is due after 60 ms
        runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
        await runtime.deliver_due_jobs()  # the scheduler (woken by the job) may have delivered it already
        events = await sock.turn(cid)
    assert "approval_required" not in types(events)
    assert chat.probe.writes == []
    assert await pending(alice) == []
    unattended = chat.server.requests_for(MODEL_A)[2]
    assert unattended.messages[-1] == {"role": "user", "content": "[Scheduled] Write the daily note."}
    last = chat.server.requests_for(MODEL_A)[3]
    assert "nobody is there" in last.messages[-1]["content"]
    transcript = await messages(alice, cid)
    assert [c["status"] for c in transcript[-2]["tool_calls"]] == ["denied"]
    assert transcript[-1]["content"] == "I could not write the note."


async def test_rule_changes_on_the_admin_api_apply_to_the_very_next_call(chat):
    """The rules are kept in memory between edits; an edit (or a group's deletion,
    which takes its rules along) must reach the next call, not a later one."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("a"), Reply("Done."), write("b"), Reply("Asked.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        rule_id = await allow_tool(chat.admin, "write_note")
        await sock.send(cid, "Write a.")
        first = await sock.turn(cid)
        assert "approval_required" not in types(first) and chat.probe.writes == [{"text": "a"}]

        assert (await chat.admin.delete(f"/api/admin/approval-rules/{rule_id}")).status_code == 200
        await sock.send(cid, "Write b.")
        card = await sock.wait_event(cid, "approval_required", start=len(sock.events))
        await sock.approve(card["approval_id"], "deny")
        await sock.turn(cid)

        group = await chat.admin.post("/api/admin/security-groups", json={"id": "writers", "label": "Writers"})
        assert group.status_code == 201, group.text
        rule = await chat.admin.post(
            "/api/admin/approval-rules", json={"tool_pattern": "write_note", "action": "allow", "priority": 50, "group_id": "writers"}
        )
        assert rule.status_code == 201, rule.text
        assert (await chat.admin.delete("/api/admin/security-groups/writers")).status_code == 200
        assert [r for r in (await chat.admin.get("/api/admin/approval-rules")).json()["rules"] if r["group_id"] == "writers"] == []
    assert chat.probe.writes == [{"text": "a"}]


async def test_a_rule_made_to_refuse_while_the_card_waits_wins_over_the_members_approval(chat, caplog):
    """An admin probe: the rule was changed to Refuse while the member's card waited,
    the member then approved, and the file was written. The rules are asked again once
    the member answers; a refusal wins over an approval asked under the old rule."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("after the change"), Reply("It was refused.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
        refuse = await chat.admin.post("/api/admin/approval-rules", json={"tool_pattern": "write_note", "action": "deny", "priority": 50})
        assert refuse.status_code == 201, refuse.text
        assert (await sock.approve(card["approval_id"], "approve"))["decision"] == "approved"
        events = await sock.turn(cid)
    assert chat.probe.writes == []
    assert "tool_denied" in types(events)
    call = (await messages(alice, cid))[1]["tool_calls"][0]
    assert (call["status"], call["result"], call["result_code"]) == ("denied", "a rule denies this tool here.", "rule")
    assert [e["result_code"] for e in events if e["type"] == "tool_denied"] == ["rule"]  # said in the reader's language
    assert any(r.name == "skald.audit" and "rule:write_note" in r.getMessage() for r in caplog.records)


async def test_a_card_past_its_time_expires_while_its_turn_waits_and_a_late_approval_runs_nothing(chat, monkeypatch):
    """A card still pending past ``expires_at`` on a server that kept running stayed
    pending, and approving it ran the tool (a crash-kill probe; SECURITY-CHECKS G2:
    "still pending or explicitly expired"). The live wait now ends at the card's time,
    and the store refuses a member's answer to a card whose time is up."""
    import datetime as dt

    from skald_host.core.agent import approvals

    monkeypatch.setattr(approvals, "APPROVAL_TTL", dt.timedelta(seconds=2))
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("late"), Reply("It expired; I did not write it.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
        events = await sock.turn(cid)  # ends by itself once the card's time is up
    resolved = [e for e in events if e.get("type") == "approval_resolved"]
    assert [(e["approval_id"], e["decision"]) for e in resolved] == [(card["approval_id"], "expired")]
    late = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
    assert late.status_code == 409, late.text
    assert chat.probe.writes == []
    assert await pending(alice) == []
    transcript = await messages(alice, cid)
    assert transcript[1]["tool_calls"][0]["status"] == "denied"
    assert transcript[-1]["content"] == "It expired; I did not write it."


async def test_a_card_pending_past_its_time_cannot_be_approved_even_with_nobody_waiting(chat):
    """The store's own rule, for a card no turn waits on (written pending, its time past):
    the member's answer is refused, and the card can still be expired."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("stale")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
    store = (await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))).store
    await store.db.transaction(lambda c: c.execute("UPDATE approvals SET expires_at = '2000-01-01T00:00:00.000000Z' WHERE id = ?", (card["approval_id"],)))
    assert await store.resolve_approval(card["approval_id"], "approved") is False
    assert await store.resolve_approval(card["approval_id"], "denied") is False
    assert await store.resolve_approval(card["approval_id"], "expired") is True

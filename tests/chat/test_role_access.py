"""Access follows the role at the moment of use (issue 17, points 1 and 2).

Agents and the host's acting tools are role data: a role lists the chat agents its
members may start (the restricted preset: ``companion``), project chat needs
``projects.chat``, and ``execute_cmd``, file writes, scheduling and delegation need
``tools.*`` capabilities. What a round offers is computed from the member's current
role, grants and the enabled plugins, and each call is asked again as it starts: after
an approval (answered on the web or through a channel), after waiting in its batch,
after a restart, for a sub-agent and for a scheduled prompt. What the model was offered
is asserted on the wire (the scripted model server's requests), what ran on the probe's
record, and each refusal on the ``skald.audit`` logger.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from skald_hookspecs.channels import ChannelRequestError
from skald_host.builtins.sandbox_bwrap import BubblewrapBackend
from skald_host.core.agent.kernel import WITHDRAWN
from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from tests.folders.support import join_project

from .support import (
    ALL_MODELS,
    API_KEY,
    MODEL_A,
    PINNED,
    PROBE,
    ChatProbe,
    ChatSocket,
    allow_tool,
    assert_well_formed,
    configure_models,
    messages,
    new_conversation,
    types,
    write_agent,
    write_probe_agents,
)

ON_THE_WIRE = f"Denied: {WITHDRAWN}"  # a denied call's result, as the model reads it
ACTING = {"execute_cmd", "write_file", "edit_file", "schedule_prompt", "execute_task"}
ALL_CAPABILITIES = ["chat.use", "projects.chat", "tools.shell", "tools.files.write", "tools.schedule", "tools.delegate"]


def audit_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "skald.audit"]


def offered(request) -> set[str]:
    return {t["function"]["name"] for t in request.tools}


async def make_role(admin, role_id: str, capabilities: list[str], chat_agents: list[str] | None = None) -> None:
    response = await admin.post(
        "/api/admin/roles",
        json={"id": role_id, "label": role_id.title(), "capabilities": capabilities, "attrs": {"chat_agents": chat_agents or ["*"]}},
    )
    assert response.status_code == 201, response.text


async def set_role(admin, member_id: str, role: str) -> None:
    response = await admin.patch(f"/api/admin/members/{member_id}", json={"role": role})
    assert response.status_code == 200, response.text


async def set_capabilities(admin, role: str, capabilities: list[str]) -> None:
    response = await admin.patch(f"/api/admin/roles/{role}", json={"capabilities": capabilities})
    assert response.status_code == 200, response.text


def calls(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for m in transcript for c in m["tool_calls"]]


# -- point 1: agents and tools follow the role --------------------------------------------


async def test_a_restricted_member_may_start_only_the_agents_their_role_lists_by_every_route(chat, caplog):
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    kid = await chat.host.member("kid", role="restricted")
    kid_id = kid.member["id"]
    # The probe's chat agent is visible to the kid (granted), so only the role refuses it.
    assert (await chat.admin.put(f"/api/admin/members/{kid_id}/plugins", json={"plugins": [PROBE]})).status_code == 200

    for agent in ("assistant", "quiet"):
        response = await kid.post("/api/conversations", json={"agent": agent})
        assert response.status_code == 403, response.text
        assert f"your role does not let you talk with the agent {agent!r}" in response.json()["error"]
        assert f"denied member={kid_id} agent:{agent} via=new_conversation" in audit_lines(caplog)
    assert [c["agent_id"] for c in (await kid.get("/api/conversations")).json()["conversations"]] == []
    assert [a["id"] for a in (await kid.get("/api/chat/status")).json()["agents"]] == ["companion"]
    response = await kid.post("/api/conversations", json={})
    assert response.status_code == 201 and response.json()["agent_id"] == "companion"  # the role's default
    assert (await kid.post("/api/conversations", json={"agent": "companion"})).status_code == 201

    # Project chat needs projects.chat, which the restricted preset lacks: adding the kid
    # to a project hands them the folder, not the coordinator.
    olga = await chat.host.member("olga")
    project = (await olga.post("/api/projects", json={"slug": "garden", "title": "Garden"})).json()
    await join_project(olga, kid, project["id"])
    response = await kid.post(f"/api/projects/{project['id']}/chat")
    assert response.status_code == 403 and "project chat" in response.json()["error"]
    assert f"denied member={kid_id} action:projects.chat via=new_conversation" in audit_lines(caplog)
    assert (await olga.post(f"/api/projects/{project['id']}/chat")).status_code == 201

    # A channel's conversation starts the role's default agent, nothing else.
    cid = await chat.host.core.host_api(PROBE).new_conversation(kid_id)
    assert (await kid.get(f"/api/conversations/{cid}")).json()["conversation"]["agent_id"] == "companion"

    # The list is data: the admin widens it and the agent can be started.
    response = await chat.admin.patch("/api/admin/roles/restricted", json={"attrs": {"chat_agents": ["companion", "quiet"]}})
    assert response.status_code == 200 and response.json()["attrs"]["chat_agents"] == ["companion", "quiet"]
    assert (await kid.post("/api/conversations", json={"agent": "quiet"})).status_code == 201
    response = await chat.admin.patch("/api/admin/roles/restricted", json={"attrs": {"chat_agents": ["quiet"]}})
    assert response.status_code == 400 and "chat_agent must be one of" in response.json()["error"]


async def test_the_acting_host_tools_are_offered_only_to_roles_holding_their_capabilities(chat, caplog):
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    write_agent(chat.probe.agents_dir, "wide", "You may use every tool.", title="Wide", kind="chat", tools=["*"])
    response = await chat.admin.patch("/api/admin/roles/restricted", json={"attrs": {"chat_agents": ["companion", "wide"]}})
    assert response.status_code == 200, response.text
    kid = await chat.host.member("kid", role="restricted")
    alice = await chat.host.member("alice")
    assert (await chat.admin.put(f"/api/admin/members/{kid.member['id']}/plugins", json={"plugins": [PROBE]})).status_code == 200

    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice, "wide")
        chat.server.script(MODEL_A, [Reply("Hello.")])
        await sock.send(cid, "Hi.")
        await sock.turn(cid)
    assert ACTING <= offered(chat.server.requests_for(MODEL_A)[-1])  # the member preset holds them all

    async with ChatSocket(kid) as sock:
        cid = await new_conversation(kid, "wide")
        # The model names execute_cmd anyway: it was not offered, so it does not run.
        chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("execute_cmd", {"command": "id"})]), Reply("I cannot.")])
        await sock.send(cid, "Run id.")
        events = await sock.turn(cid)
    first, second = chat.server.requests_for(MODEL_A)[-2:]
    assert not ACTING & offered(first) and not ACTING & offered(second)
    assert {"read_file", "list_files", "notify", "write_note"} <= offered(first)  # reading, and the granted plugin
    assert "approval_required" not in types(events)
    assert "no tool named 'execute_cmd'" in [m for m in second.messages if m["role"] == "tool"][-1]["content"]


async def test_a_role_change_mid_turn_reaches_the_next_rounds_tools_and_the_agent(chat, caplog):
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait")
    await make_role(chat.admin, "plain", ["chat.use"])
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("wait", {"text": "x"})]), Reply("Done waiting.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Wait, then answer.")
        await sock.wait_event(cid, "tool_start", name="wait")
        await set_role(chat.admin, alice_id, "plain")  # while the round's call runs
        chat.probe.release.set()
        await sock.turn(cid)
        before, after = chat.server.requests_for(MODEL_A)
        assert ACTING <= offered(before)
        assert not ACTING & offered(after) and {"wait", "read_file", "notify"} <= offered(after)

        # Moved to a role that does not list the conversation's agent: the next turn is
        # refused before the model is asked.
        await set_role(chat.admin, alice_id, "restricted")
        await sock.send(cid, "Still there?")
        events = await sock.turn(cid)
    errors = [e for e in events if e["type"] == "error"]
    assert errors and "no longer allows this conversation's agent (assistant)" in errors[0]["error"], events
    assert len(chat.server.requests_for(MODEL_A)) == 2
    assert f"denied member={alice_id} agent:assistant via=round" in audit_lines(caplog)
    assert_well_formed(await messages(alice, cid))


# -- point 2: asked again as each call starts ----------------------------------------------


def write(text: str) -> Reply:
    return Reply(tool_calls=[ToolCall("write_note", {"text": text})])


async def _withdraw(chat, how: str, member_id: str) -> str:
    """Withdraw alice's use of the probe's write_note; the action the audit names."""
    admin = chat.admin
    if how == "grant":
        assert (await admin.put(f"/api/admin/members/{member_id}/plugins", json={"plugins": []})).status_code == 200
        return f"plugin:{PROBE}"
    if how == "plugin":
        assert (await admin.put(f"/api/admin/plugins/{PROBE}/enabled", json={"enabled": False})).status_code == 200
        return f"plugin:{PROBE}"
    await set_role(admin, member_id, "restricted")  # the conversation's agent is not the preset's
    return "agent:assistant"


@pytest.mark.parametrize("how", ["grant", "plugin", "role"])
async def test_a_plugin_tool_approved_after_its_access_was_withdrawn_does_not_run(chat, caplog, how):
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    chat.server.script(MODEL_A, [write("after the revoke"), Reply("Understood.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
        what = await _withdraw(chat, how, alice_id)
        response = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
        assert response.status_code == 200, response.text
        events = await sock.turn(cid)
    assert chat.probe.writes == []
    denied = [e for e in events if e["type"] == "tool_denied"]
    assert denied and denied[0]["result"] == WITHDRAWN, events
    call = calls(await messages(alice, cid))[0]
    assert (call["status"], call["result"]) == ("denied", WITHDRAWN)
    [resolved] = [e for e in events if e["type"] == "approval_resolved"]
    if how == "role":  # the conversation's agent: asked by the kernel as the call starts
        assert response.json()["decision"] == resolved["decision"] == "approved"
        assert f"denied member={alice_id} {what} via=tool_start tool=write_note" in audit_lines(caplog)
    else:  # said as what happens, not "approved" for a call that never runs
        assert response.json() == {"approval_id": card["approval_id"], "decision": "denied", "reason": "withdrawn"}
        assert (resolved["decision"], resolved["reason"]) == ("denied", "withdrawn")
        assert f"denied member={alice_id} {what} via=approval tool=write_note" in audit_lines(caplog)
    if how != "role":  # the model reads the refusal and answers; the role's refusal ends the turn instead
        assert [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"] == [ON_THE_WIRE]


async def test_a_deactivated_member_cannot_approve_by_web_or_channel_and_nothing_runs(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    api = chat.host.core.host_api(PROBE)
    chat.server.script(MODEL_A, [write("deactivated")])
    cid = await api.new_conversation(alice_id)  # a channel's conversation: its card can be answered there
    async with ChatSocket(alice) as sock:
        await api.send_message(alice_id, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
    response = await chat.admin.patch(f"/api/admin/members/{alice_id}", json={"active": False})
    assert response.status_code == 200, response.text
    assert (await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})).status_code == 401
    with pytest.raises(ChannelRequestError):
        await api.resolve_approval(alice_id, card["approval_id"], True)
    assert chat.probe.writes == []


async def test_a_card_pending_at_a_deactivation_is_withdrawn_and_never_runs_after_a_reactivation(chat, caplog):
    """Deactivating locks the member and ends their turn; their card stays in their
    file. Reactivated and signed in again, the card is withdrawn as their file opens
    (not listed again, audited), approving it changes nothing, and the turn is not
    resumed: no model request, it ends stopped, said so in the member's language."""
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    chat.server.script(MODEL_A, [write("before the deactivation"), Reply("Understood.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
    asked = len(chat.server.requests_for(MODEL_A))
    for active in (False, True):
        response = await chat.admin.patch(f"/api/admin/members/{alice_id}", json={"active": active})
        assert response.status_code == 200, response.text
    alice = await chat.host.member("alice")
    assert (await alice.get("/api/approvals")).json()["approvals"] == []
    response = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
    assert response.status_code == 409, response.text
    await _settled_a_while(chat)
    assert chat.probe.writes == []
    assert len(chat.server.requests_for(MODEL_A)) == asked  # the turn is not taken up again
    transcript = await messages(alice, cid)
    call = calls(transcript)[0]
    assert (call["status"], call["result"]) == ("interrupted", HOST_RESULTS["deactivated"])
    assert (transcript[-1]["role"], transcript[-1]["status"], transcript[-1]["reason"]["code"]) == ("assistant", "error", "stopped_deactivated")
    assert f"denied member={alice_id} member:deactivated via=approval tool=write_note" in audit_lines(caplog)


async def _settled_a_while(chat) -> None:
    """Long enough for a resumed turn to have asked the model (none should)."""
    await asyncio.sleep(1.5)


async def test_a_turn_cut_by_a_deactivation_stays_cut_after_a_reactivation(chat, caplog):
    """The probe's case: a turn whose model answer was on its way when an admin
    deactivated the member (its tool needs no approval). Reactivated and signed in, the
    member does nothing: the model is not asked again, nothing runs, and the turn ends
    stopped, saying why; the member's Retry asks again, and then it runs."""
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "write_note")
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    slow = Reply(tool_calls=[ToolCall("write_note", {"text": "cut"})], first_token_delay=1.5)
    chat.server.script(MODEL_A, [slow, slow, Reply("Noted.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        await chat.server.wait_for_requests(1)
        assert (await chat.admin.patch(f"/api/admin/members/{alice_id}", json={"active": False})).status_code == 200
    await asyncio.sleep(2.0)  # the model's answer came to nobody
    assert (await chat.admin.patch(f"/api/admin/members/{alice_id}", json={"active": True})).status_code == 200
    alice = await chat.host.member("alice")
    await alice.get("/api/conversations")
    await asyncio.sleep(2.5)  # a resumed turn would have asked and written by now
    assert len(chat.server.requests_for(MODEL_A)) == 1
    assert chat.probe.writes == []
    transcript = await messages(alice, cid)
    assert (transcript[-1]["role"], transcript[-1]["status"], transcript[-1]["reason"]["code"]) == ("assistant", "error", "stopped_deactivated")
    assert not [r for r in caplog.records if "resuming" in r.getMessage()]
    async with ChatSocket(alice) as sock:  # the member asks again: then it runs
        response = await alice.post(f"/api/conversations/{cid}/retry")
        assert response.status_code in (200, 202), response.text
        await sock.turn(cid)
    assert chat.probe.writes != []


async def test_a_turn_cut_before_a_deactivation_is_not_resumed_after_the_reactivation(chat):
    """A turn cut by a sign-out (cause "locked"), the member deactivated and reactivated
    while signed out: no runtime was live to say the deactivation cut it, as on a version
    that recorded no such cause (migration 24 dates an upgrade's inactive members' then).
    Its last row is older than the deactivation, so it is ended, not asked again."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    slow = Reply("An answer nobody reads.", first_token_delay=1.5)
    chat.server.script(MODEL_A, [slow, slow])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "A question.")
        await chat.server.wait_for_requests(1)
    await chat.host.core.users.lock(alice_id)  # her sign-out's cut, before any deactivation
    await asyncio.sleep(1.0)  # the rows' times and the deactivation's differ
    for active in (False, True):
        assert (await chat.admin.patch(f"/api/admin/members/{alice_id}", json={"active": active})).status_code == 200
    alice = await chat.host.member("alice")
    await alice.get("/api/conversations")
    await asyncio.sleep(2.5)  # a resumed turn would have asked by now
    assert len(chat.server.requests_for(MODEL_A)) == 1
    transcript = await messages(alice, cid)
    assert (transcript[-1]["role"], transcript[-1]["status"], transcript[-1]["reason"]["code"]) == ("assistant", "error", "stopped_deactivated")


async def test_a_card_raised_before_a_deactivation_is_never_listed_as_pending_after_a_reactivation(chat):
    """GET /api/approvals judges each card by the member's deactivation itself: a card
    raised before it and still pending in the file (the recovery that withdraws it not
    come yet) is not offered to the member, who would see it listed and approve it."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    chat.server.script(MODEL_A, [write("before the deactivation")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
    assert [a["id"] for a in (await alice.get("/api/approvals")).json()["approvals"]] == [card["approval_id"]]  # the control
    for active in (False, True):
        assert (await chat.admin.patch(f"/api/admin/members/{alice_id}", json={"active": active})).status_code == 200
    alice = await chat.host.member("alice")
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice_id))
    # As the file stands before its recovery withdrew the card: pending.
    await runtime.store.db.transaction(lambda c: c.execute(
        "UPDATE approvals SET status = 'pending', resolved_at = NULL WHERE id = ?", (card["approval_id"],)
    ))
    assert (await alice.get("/api/approvals")).json()["approvals"] == []


async def test_a_card_raised_after_a_reactivation_runs_as_ever(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    for active in (False, True):
        assert (await chat.admin.patch(f"/api/admin/members/{alice_id}", json={"active": active})).status_code == 200
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("after the reactivation"), Reply("Done.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
        response = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
        assert response.json()["decision"] == "approved", response.text
        await sock.turn(cid)
    assert chat.probe.writes != []


async def test_calls_waiting_in_their_batch_are_refused_when_access_went_meanwhile(chat, caplog):
    """The second call of a sequential batch waits for the first one's approval; the
    grant is revoked during that wait, so neither starts (``lookup`` needs no approval)."""
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "lookup")
    alice = await chat.host.member("alice")
    batch = Reply(tool_calls=[ToolCall("write_note", {"text": "a"}), ToolCall("lookup", {"text": "b"})])
    chat.server.script(MODEL_A, [batch, Reply("Understood.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write and look up.")
        card = await sock.wait_event(cid, "approval_required")
        await _withdraw(chat, "grant", alice.member["id"])
        await sock.approve(card["approval_id"])
        await sock.turn(cid)
    results = [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"]
    assert results == [ON_THE_WIRE, ON_THE_WIRE] and chat.probe.writes == []
    assert f"denied member={alice.member['id']} plugin:{PROBE} via=tool_start tool=lookup" in audit_lines(caplog)


async def test_a_sub_agent_is_refused_when_delegation_was_withdrawn_while_its_call_waited(chat, caplog):
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server, [MODEL_A, *PINNED.values()])
    await make_role(chat.admin, "helper", ALL_CAPABILITIES)
    alice = await chat.host.member("alice", role="helper")
    batch = Reply(tool_calls=[ToolCall("write_note", {"text": "a"}), ToolCall("execute_task", {"agent": "alpha", "task": "Count."})])
    chat.server.script(MODEL_A, [batch, Reply("Understood.")])
    chat.server.script(PINNED["alpha"], [Reply("Three.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write, then delegate.")
        card = await sock.wait_event(cid, "approval_required")
        await set_capabilities(chat.admin, "helper", [c for c in ALL_CAPABILITIES if c != "tools.delegate"])
        await sock.approve(card["approval_id"])
        await sock.turn(cid)
    results = [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"]
    assert results == ["wrote 'a'", ON_THE_WIRE]  # the plugin's grant stands; delegation went
    assert chat.server.requests_for(PINNED["alpha"]) == []
    assert "execute_task" not in offered(chat.server.requests_for(MODEL_A)[-1])
    assert f"denied member={alice.member['id']} action:tools.delegate via=tool_start tool=execute_task" in audit_lines(caplog)


async def test_approving_a_card_whose_plugin_was_uninstalled_refuses_the_call_at_once(chat, skald):
    """The tool's plugin is missing after the restart, not starting: the kernel's wait
    for a tool coming back (``TOOL_RETURN_SECONDS``) had the member wait for nothing."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [write("before the uninstall")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
    await chat.host.stop()

    chat.server.responder = lambda request: Reply("Understood.")
    host = await skald.start(settings=chat.host.settings)  # the probe's package is gone
    assert host.core.plugins.status(PROBE) is None  # the catalog lists it missing
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        started = time.monotonic()
        response = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
        assert response.status_code == 200, response.text
        await sock.wait_event(cid, "turn_finished", timeout=20)
        assert time.monotonic() - started < 10
    call = calls(await messages(alice, cid))[0]
    assert (call["status"], call["result"]) == ("denied", WITHDRAWN) and chat.probe.writes == []


async def test_a_pending_call_is_refused_on_recovery_after_a_restart_when_its_grant_went_meanwhile(chat, skald, caplog):
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    chat.server.script(MODEL_A, [write("before the restart")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note.")
        card = await sock.wait_event(cid, "approval_required")
    await chat.host.stop()

    chat.server.responder = lambda request: Reply("Understood.")
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    admin = await host.admin()
    assert (await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": []})).status_code == 200
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        await sock.wait_event(cid, "turn_finished")
    call = calls(await messages(alice, cid))[0]
    assert (call["status"], call["result"]) == ("denied", WITHDRAWN) and chat.probe.writes == []
    assert (await alice.get("/api/approvals")).json()["approvals"] == []  # not asked again for nothing
    assert (await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})).status_code == 409
    assert f"denied member={alice_id} plugin:{PROBE} via=tool_start tool=write_note" in audit_lines(caplog)


async def test_a_scheduled_prompt_is_not_delivered_once_scheduling_was_withdrawn(chat, caplog):
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    await make_role(chat.admin, "helper", ALL_CAPABILITIES)
    alice = await chat.host.member("alice", role="helper")
    cid = await new_conversation(alice)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    job_id = await runtime.store.schedule(cid, "Water the plants.", "2999-01-01T00:00:00.000000Z")
    await set_capabilities(chat.admin, "helper", [c for c in ALL_CAPABILITIES if c != "tools.schedule"])
    await runtime.store.db.transaction(
        lambda c: c.execute("UPDATE scheduled_jobs SET due_at = '2000-01-01T00:00:00.000000Z' WHERE id = ?", (job_id,))
    )
    await runtime.deliver_due_jobs()
    transcript = await messages(alice, cid)
    assert [(m["role"], m["content"]) for m in transcript] == [
        ("note", "A scheduled prompt was not delivered: access to scheduling was withdrawn.")
    ]
    assert chat.server.requests_for(MODEL_A) == []
    status = await runtime.store.db.run(lambda c: c.execute("SELECT status FROM scheduled_jobs WHERE id = ?", (job_id,)).fetchone()[0])
    assert status == "cancelled"
    assert f"denied member={alice.member['id']} action:tools.schedule via=scheduled_prompt" in audit_lines(caplog)


# -- execute_cmd, in a real sandbox (bubblewrap) --------------------------------------------


SANDBOX = {"backend": "bubblewrap", "pids": 64, "memory_mib": 256, "cpus": 0.5, "exec_timeout_seconds": 20.0, "output_limit_bytes": 4096}


@pytest.fixture
async def shell(skald, tmp_path):
    reason = BubblewrapBackend().available()
    if reason is not None:
        pytest.skip(f"bubblewrap cannot run here: {reason}")
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        probe = ChatProbe(write_probe_agents(tmp_path / "agents"))
        try:
            host = await skald.start(plugins=[probe], settings=skald.settings(sandbox=SANDBOX), enable=[PROBE])
            admin = await host.admin()
            await configure_models(admin, server)
            await make_role(admin, "helper", ALL_CAPABILITIES)
            await make_role(admin, "plain", ["chat.use"])
            yield host, admin, server
        finally:
            await skald.close()


def run(command: str) -> Reply:
    return Reply(tool_calls=[ToolCall("execute_cmd", {"command": command})])


@pytest.mark.parametrize("how", ["capability", "role", "restricted", "deactivated"])
async def test_execute_cmd_approved_after_the_shell_was_withdrawn_does_not_run(shell, caplog, how):
    caplog.set_level(logging.INFO)
    host, admin, server = shell
    alice = await host.member("alice", role="helper")
    alice_id = alice.member["id"]
    home = host.core.files.home(alice_id)
    server.script(MODEL_A, [run("echo first > first.txt; echo ran"), Reply("Ran."), run("echo second > second.txt"), Reply("Ok.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Run it.")
        card = await sock.wait_event(cid, "approval_required", name="execute_cmd")
        await sock.approve(card["approval_id"])
        await sock.turn(cid)
        first = calls(await messages(alice, cid))[0]
        assert (first["status"], first["result"]) == ("done", "Exit code: 0\nran\n"), first  # the control: with access, it runs
        assert (home / "first.txt").read_text() == "first\n"

        seen = len(sock.events)
        await sock.send(cid, "Again.")
        card = await sock.wait_event(cid, "approval_required", start=seen, name="execute_cmd")
        if how == "deactivated":
            assert (await admin.patch(f"/api/admin/members/{alice_id}", json={"active": False})).status_code == 200
            assert (await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})).status_code == 401
            with pytest.raises(ChannelRequestError):
                await host.core.host_api(PROBE).resolve_approval(alice_id, card["approval_id"], True)
            assert not (home / "second.txt").exists()
            return
        if how == "capability":
            await set_capabilities(admin, "helper", [c for c in ALL_CAPABILITIES if c != "tools.shell"])
        else:
            await set_role(admin, alice_id, "plain" if how == "role" else "restricted")
        await sock.approve(card["approval_id"])
        await sock.turn(cid)
    assert not (home / "second.txt").exists()
    call = calls(await messages(alice, cid))[-1]
    assert (call["name"], call["status"], call["result"]) == ("execute_cmd", "denied", WITHDRAWN)
    # Refused as the member approved (and the card said so), never run.
    assert f"denied member={alice_id} action:tools.shell via=approval tool=execute_cmd" in audit_lines(caplog)


async def test_execute_cmd_approved_from_a_channel_after_the_shell_was_withdrawn_does_not_run(shell, caplog):
    """The channel approval path (how Telegram answers a card) reaches the same check:
    it sits where the call starts, not at a route."""
    caplog.set_level(logging.INFO)
    host, admin, server = shell
    alice = await host.member("alice", role="helper")
    alice_id = alice.member["id"]
    api = host.core.host_api(PROBE)
    server.script(MODEL_A, [run("echo channel > channel.txt"), Reply("Ok.")])
    cid = await api.new_conversation(alice_id)
    async with ChatSocket(alice) as sock:
        await api.send_message(alice_id, "Run it.")
        card = await sock.wait_event(cid, "approval_required", name="execute_cmd")
        await set_role(admin, alice_id, "plain")
        answer = await api.resolve_approval(alice_id, card["approval_id"], True)
        assert (answer["decision"], answer["reason"]) == ("denied", "withdrawn")  # what happens, not what was pressed
        await sock.wait_event(cid, "turn_finished")
    assert not (host.core.files.home(alice_id) / "channel.txt").exists()
    call = calls(await messages(alice, cid))[-1]
    assert (call["status"], call["result"]) == ("denied", WITHDRAWN)
    assert [m["content"] for m in server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"] == [ON_THE_WIRE]
    assert "execute_cmd" not in offered(server.requests_for(MODEL_A)[-1])
    assert f"denied member={alice_id} action:tools.shell via=approval tool=execute_cmd" in audit_lines(caplog)


def test_the_turn_api_refuses_what_the_role_does_not_hold_whichever_tool_asks():
    """A plugin's tool reaches delegation, commands and scheduling through TurnApi: the
    capability is asked there too, not only of the host's own tools."""
    import asyncio
    from types import SimpleNamespace

    from skald_host.core.agent.kernel import AccessWithdrawn, Scope
    from skald_host.core.identity.roles import Role, RoleAttrs

    member = SimpleNamespace(active=True, is_admin=False, capabilities=frozenset({"chat.use"}), plugin_grants=frozenset(),
                             role=Role("plain", "Plain", RoleAttrs(), False, frozenset({"chat.use"})))
    kernel = SimpleNamespace(runtime=SimpleNamespace(member=member, member_id="m" * 32))
    scope = Scope(frame=SimpleNamespace(depth=0, conversation_id="c"), agent=None, unattended=False, reach=lambda: kernel)  # type: ignore[arg-type]
    for attempt in (scope.delegate("alpha", "x"), scope.schedule("x", "2999-01-01T00:00:00Z"), scope.run_command("id")):
        with pytest.raises(AccessWithdrawn, match="access was withdrawn"):
            asyncio.run(attempt)


async def test_a_member_demoted_from_chat_reaches_no_model_through_an_open_socket_or_a_channel(chat, caplog):
    """The socket's handshake and a channel's pairing are checked once; the role is
    asked again at each use (security sweep 4: a socket opened before the demotion, or a
    paired phone, still started turns for a role without ``chat.use``)."""
    await configure_models(chat.admin, chat.server)
    chat.server.script(MODEL_A, [Reply(text="answered")] * 4)
    alice = await chat.host.member("alice")
    alice_id = alice.member["id"]
    api = chat.host.core.host_api(PROBE)
    web_cid = await new_conversation(alice)
    channel_cid = await api.new_conversation(alice_id)
    await make_role(chat.admin, "mute", [])
    async with ChatSocket(alice) as sock:
        await set_role(chat.admin, alice_id, "mute")
        reply = await sock.send(web_cid, "Still here?")
        assert reply["code"] == "forbidden", reply
    delivery = await api.send_message(alice_id, "From the phone.")
    assert delivery.status == "refused" and "may not chat" in delivery.reason, delivery
    with pytest.raises(ChannelRequestError, match="may not chat"):
        await api.new_conversation(alice_id)
    with pytest.raises(ChannelRequestError, match="may not chat"):
        await api.use_conversation(alice_id, channel_cid)
    assert chat.server.requests_for(MODEL_A) == []
    lines = audit_lines(caplog)
    assert f"denied member={alice_id} action:chat.use via=websocket command=send" in lines
    assert sum(f"denied member={alice_id} action:chat.use via=channel" in line for line in lines) == 3, lines

"""The ``member_tools`` hook (spec 1.2) end to end: a plugin's tools that differ per member
and change while the host runs reach exactly the member they are for, pass through the
approval gate like any tool, are withdrawn at once when the plugin stops offering them,
never shadow a fixed tool, and vanish with the plugin."""

from __future__ import annotations

import asyncio
import logging

from typing import Any, AsyncIterator, Mapping

import pytest_asyncio

from skald_hookspecs import PluginInfo, Tool, ToolContext, hookimpl
from skald_hookspecs.types import NotReady
from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply, ScriptedModelServer, SkaldHarness, ToolCall

from .conftest import Chat
from .support import ALL_MODELS, API_KEY, MODEL_A, PROBE, ChatProbe, ChatSocket, allow_tool, configure_models, messages, new_conversation, write_probe_agents

DYNAMIC = "dynprobe"
OBJ = {"type": "object", "properties": {"text": {"type": "string"}}}


class MemberToolsProbe:
    """Hands each member the tools ``offered[member_id]`` holds right now."""

    def __init__(self) -> None:
        self.offered: dict[str, list[Tool]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.raise_for: set[str] = set()

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=DYNAMIC, title="Member tools probe", spec=">=1.2,<2")

    @hookimpl
    def member_tools(self, member_id: str) -> list[Tool]:
        if member_id in self.raise_for:
            raise RuntimeError("broken")
        return self.offered.get(member_id, [])

    def tool(self, name: str) -> Tool:
        async def run(args: Mapping[str, Any], ctx: ToolContext) -> str:
            self.calls.append((ctx.member_id, dict(args)))
            return f"{name} ran for {args.get('text')!r}"

        return Tool(name, f"The {name} tool.", OBJ, run)


@pytest_asyncio.fixture
async def dyn(skald: SkaldHarness, tmp_path) -> AsyncIterator[tuple[Chat, MemberToolsProbe]]:
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        probe = ChatProbe(write_probe_agents(tmp_path / "agents"))
        dynamic = MemberToolsProbe()
        try:
            host = await skald.start(plugins=[probe, dynamic], enable=[PROBE, DYNAMIC])
            yield Chat(host, await host.admin(), server, probe), dynamic
        finally:
            await skald.close()


def offered_names(chat: Chat) -> set[str]:
    return {t["function"]["name"] for t in chat.server.requests_for(MODEL_A)[-1].tools}


async def test_member_tools_reach_only_their_member_and_run_through_the_gate(dyn):
    chat, dynamic = dyn
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    bob = await chat.host.member("bob")
    dynamic.offered[alice.member["id"]] = [
        dynamic.tool("dyn_echo"),
        dynamic.tool("write_note"),  # clashes with ChatProbe's fixed tool: dropped, never shadows it
        Tool("bad name!", "invalid", OBJ, dynamic.tool("x").run),  # invalid: dropped
    ]
    await allow_tool(chat.admin, "dyn_echo")
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("dyn_echo", {"text": "hi"})]), Reply("Done."), Reply("Bob's answer.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Echo hi.")
        await sock.turn(cid)
    names = offered_names(chat)
    assert "dyn_echo" in names and "bad name!" not in names and "write_note" in names
    assert dynamic.calls == [(alice.member["id"], {"text": "hi"})]
    assert [c["status"] for c in (await messages(alice, cid))[1]["tool_calls"]] == ["done"]
    assert [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"] == ["dyn_echo ran for 'hi'"]

    async with ChatSocket(bob) as sock:
        cid = await new_conversation(bob)
        await sock.send(cid, "Hello.")
        await sock.turn(cid)
    assert "dyn_echo" not in offered_names(chat)


async def test_a_withdrawn_member_tool_is_refused_even_after_its_approval(dyn, caplog):
    """Revoked while its card waited (a connector's access taken away): refused as a
    withdrawn tool with an audit line, never "there is no tool named" to the model."""
    caplog.set_level(logging.WARNING, logger="skald.audit")
    chat, dynamic = dyn
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    dynamic.offered[alice.member["id"]] = [dynamic.tool("dyn_send")]
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("dyn_send", {"text": "x"})]), Reply("It was refused.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Send x.")
        card = await sock.wait_event(cid, "approval_required")
        assert card["name"] == "dyn_send"
        dynamic.offered[alice.member["id"]] = []  # revoked while the card waits
        await sock.approve(card["approval_id"])
        events = await sock.turn(cid)
    assert dynamic.calls == []
    call = (await messages(alice, cid))[1]["tool_calls"][0]
    assert (call["status"], call["result"]) == ("denied", HOST_RESULTS["withdrawn"])
    denied = [e for e in events if e["type"] == "tool_denied"]
    assert [e["result_code"] for e in denied] == ["withdrawn"]  # the card says it in its reader's language
    assert [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"] == ["Denied: " + HOST_RESULTS["withdrawn"]]
    assert any(
        r.name == "skald.audit" and "tool:dyn_send" in r.getMessage() and f"member={alice.member['id']}" in r.getMessage()
        for r in caplog.records
    ), caplog.text


async def test_a_member_tool_withdrawn_before_its_turn_in_the_batch_is_refused_as_withdrawn(dyn, caplog):
    """The round offered both tools; the first one's run withdraws the second (a plugin
    stopping, a grant revoked meanwhile): the second is refused with an audit line."""
    caplog.set_level(logging.WARNING, logger="skald.audit")
    chat, dynamic = dyn
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    member_id = alice.member["id"]
    second = dynamic.tool("dyn_second")

    async def withdraw_second(args: Mapping[str, Any], ctx: ToolContext) -> str:
        dynamic.offered[member_id] = [t for t in dynamic.offered[member_id] if t.name != "dyn_second"]
        return "first ran"

    dynamic.offered[member_id] = [Tool("dyn_first", "The first tool.", OBJ, withdraw_second), second]
    await allow_tool(chat.admin, "dyn_first")
    await allow_tool(chat.admin, "dyn_second")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("dyn_first", {"text": "a"}), ToolCall("dyn_second", {"text": "b"})]), Reply("Done."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Both.")
        await sock.turn(cid)
    assert dynamic.calls == []
    calls = (await messages(alice, cid))[1]["tool_calls"]
    assert [(c["status"], c["result"]) for c in calls] == [("done", "first ran"), ("denied", HOST_RESULTS["withdrawn"])]
    assert any(r.name == "skald.audit" and "tool:dyn_second" in r.getMessage() for r in caplog.records), caplog.text


async def test_a_failing_or_disabled_plugin_offers_no_member_tool(dyn):
    chat, dynamic = dyn
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    dynamic.offered[alice.member["id"]] = [dynamic.tool("dyn_echo")]
    chat.server.script(MODEL_A, [Reply("one"), Reply("two"), Reply("three")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "One.")
        await sock.turn(cid)
        assert "dyn_echo" in offered_names(chat)
        dynamic.raise_for.add(alice.member["id"])
        await sock.send(cid, "Two.")
        await sock.turn(cid)
        assert "dyn_echo" not in offered_names(chat) and "write_note" in offered_names(chat)
        dynamic.raise_for.clear()
        response = await chat.admin.put(f"/api/admin/plugins/{DYNAMIC}/enabled", json={"enabled": False})
        assert response.status_code == 200, response.text
        await sock.send(cid, "Three.")
        await sock.turn(cid)
        assert "dyn_echo" not in offered_names(chat) and "write_note" in offered_names(chat)


class NotReadyMemberTools(MemberToolsProbe):
    @hookimpl
    async def startup(self, host: Any) -> None:
        raise NotReady("the upstream refused the token")


async def test_an_enabled_plugin_that_is_not_running_offers_no_member_tool(skald, tmp_path):
    """The rule of registered tools: enabled is not enough, it must be running (the
    model was offered tools whose calls could only be refused as withdrawn)."""
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        probe, dynamic = ChatProbe(write_probe_agents(tmp_path / "agents")), NotReadyMemberTools()
        try:
            host = await skald.start(plugins=[probe, dynamic], enable=[PROBE, DYNAMIC])
            chat = Chat(host, await host.admin(), server, probe)
            await configure_models(chat.admin, server)
            alice = await host.member("alice")
            dynamic.offered[alice.member["id"]] = [dynamic.tool("dyn_echo")]
            server.script(MODEL_A, [Reply("one")])
            async with ChatSocket(alice) as sock:
                cid = await new_conversation(alice)
                await sock.send(cid, "One.")
                await sock.turn(cid)
            assert "dyn_echo" not in offered_names(chat) and "write_note" in offered_names(chat)
        finally:
            await skald.close()


async def test_a_card_from_before_a_restart_waits_for_its_member_tool_to_come_back(skald, tmp_path):
    """A connector's tools come back only once it has started again, after the recovery
    that shows its card. Approving that card then runs the tool; it is not answered
    "no tool named" before the member has even decided."""
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        agents = write_probe_agents(tmp_path / "agents")
        dynamic = MemberToolsProbe()
        host = await skald.start(plugins=[ChatProbe(agents), dynamic], enable=[PROBE, DYNAMIC])
        admin = await host.admin()
        await configure_models(admin, server)
        alice = await host.member("alice")
        dynamic.offered[alice.member["id"]] = [dynamic.tool("dyn_send")]
        server.script(MODEL_A, [Reply(tool_calls=[ToolCall("dyn_send", {"text": "x"})])])
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Send x.")
            card = await sock.wait_event(cid, "approval_required")
        await host.stop()

        restarted = MemberToolsProbe()  # its tools not there yet: the plugin is still starting them
        server.script(MODEL_A, [Reply("Sent.")])
        host = await skald.start(plugins=[ChatProbe(agents), restarted], settings=host.settings, enable=[PROBE, DYNAMIC])
        alice = await host.member("alice")
        async with ChatSocket(alice) as sock:
            again = await sock.wait_event(cid, "approval_required")
            assert again["approval_id"] == card["approval_id"]
            await sock.approve(card["approval_id"])  # at once: the plugin has not offered it yet
            await asyncio.sleep(0.3)
            restarted.offered[alice.member["id"]] = [restarted.tool("dyn_send")]  # started meanwhile
            await sock.wait_event(cid, "turn_finished")
        assert restarted.calls == [(alice.member["id"], {"text": "x"})]
        call = (await messages(alice, cid))[1]["tool_calls"][0]
        assert (call["status"], call["result"]) == ("done", "dyn_send ran for 'x'")
        await skald.close()


def test_a_tool_may_need_a_capability_a_role_can_hold_and_no_other():
    """``Tool.capability`` (spec 1.13): a name no role can hold would lock the tool away
    from everyone, admins included, so it is refused when the tool is checked."""
    import pytest

    from skald_host.core.agent.tools import RegisteredTool, validate_tool
    from skald_host.core.plugins.manager import PluginError

    async def run(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return ""

    needs = Tool("needs_remote", "d", OBJ, run, capability="connectors.remote")
    assert validate_tool(DYNAMIC, (needs,)) is needs
    assert RegisteredTool(DYNAMIC, needs, needs.capability).capability == "connectors.remote"
    with pytest.raises(PluginError, match="capability"):
        validate_tool(DYNAMIC, (Tool("needs_nothing_known", "d", OBJ, run, capability="connectors.everything"),))

"""The model half of the test kit: ``skald.model_server``, ``host.use_model``,
``host.allow_tool`` and ``client.chat`` (issue 18), on the host's own tools."""

from __future__ import annotations

import pytest

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.testing import Reply, ToolCall
from skald_host.testing.chat import wait_for_turn


class Echo:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="echo", title="Echo", spec=">=1.2,<2")

    @hookimpl
    def register_tools(self, register) -> None:
        async def echo(args, ctx):
            return str(args.get("text", ""))

        register(Tool(name="echo_text", description="Echo text.", parameters={"type": "object"}, run=echo))


async def test_chat_returns_the_finished_turn_with_its_tool_results(skald):
    host = await skald.start()
    server = await skald.model_server(Reply(tool_calls=[ToolCall("list_agents", {})]), Reply("There are agents."))
    await host.use_model(server)
    await host.allow_tool("list_agents")
    alice = await host.member("alice")
    turn = await alice.chat("Which agents are there?")
    assert (turn.text, turn.waiting, turn.error) == ("There are agents.", False, None)
    [call] = turn.tool_results
    assert (call.name, call.arguments, call.status) == ("list_agents", {}, "done")
    assert turn.result("list_agents") == call.result and "- " in call.result
    assert [m["role"] for m in turn.messages] == ["assistant", "assistant"]
    with pytest.raises(AssertionError, match="never called 'notify'"):
        turn.result("notify")

    # The next message in the same conversation: only the new turn is returned.
    server.script(server.models[0], [Reply("Again.")])
    again = await alice.chat("And now?", conversation=turn.conversation_id)
    assert (again.text, again.tool_results) == ("Again.", [])
    assert server.requests_for(server.models[0])[-1].messages[-1]["content"] == "And now?"


async def test_without_a_rule_a_plugins_tool_waits_for_the_members_approval(skald):
    host = await skald.start(plugins=[Echo()], enable=["echo"])
    server = await skald.model_server(Reply(tool_calls=[ToolCall("echo_text", {"text": "hi"})]))
    await host.use_model(server)
    alice = await host.member("alice")
    turn = await alice.chat("Echo hi")
    assert turn.waiting and turn.approvals[0]["tool"] == "echo_text"
    assert turn.tool_results[0].status == "awaiting_approval"
    # Approved as docs/plugins.md says (§4), the same turn goes on and ends.
    server.script(server.models[0], [Reply("Echoed.")])
    approved = await alice.post(f"/api/approvals/{turn.approvals[0]['id']}", json={"decision": "approve"})
    assert approved.status_code == 200, approved.text
    turn = await wait_for_turn(alice, turn.conversation_id)
    assert (turn.result("echo_text"), turn.text, turn.waiting) == ("hi", "Echoed.", False)

    await host.allow_tool("echo_*")
    server.script(server.models[0], [Reply(tool_calls=[ToolCall("echo_text", {"text": "hey"})]), Reply("Done.")])
    allowed = await alice.chat("Echo hey")  # a new conversation: the rule lets it run
    assert (allowed.result("echo_text"), allowed.text, allowed.waiting) == ("hey", "Done.", False)

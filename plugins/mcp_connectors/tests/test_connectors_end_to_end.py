"""The global runtime end to end: the admin adds real MCP servers (stdio and streamable
HTTP), a granted member's agent calls their tools through the approval gate, one session
serves every call, grants filter and revoke synchronously, a changed tool list is
withheld until the admin accepts it, notifications are discarded, and a disabled plugin
leaves no connector tool anywhere."""

from __future__ import annotations

import asyncio
import json
import os

from mcp_support import BASE, HttpDemo, Setup, allow, calls, card, decide, eventually, finished, new_conversation, send, shown
from skald_host.testing import Reply, ToolCall
from skald_mcp.spec import LOGIN_TOOLS


def call(name: str, **args) -> Reply:
    return Reply(tool_calls=[ToolCall(name, args)])


async def test_a_member_calls_a_stdio_connector_tool_through_the_gate_on_one_long_lived_session(setup: Setup):
    alice = await setup.host.member("alice")
    added = await setup.add_stdio(access=[alice.member["id"]])
    assert {t["exposed_as"] for t in added["tools"]} >= {"demo__echo", "demo__pid", "demo__grow"}
    # All but the login contract's, which Skald calls itself (test_qr_login.py).
    assert all(t["offered"] for t in added["tools"] if t["name"] not in LOGIN_TOOLS) and added["pending"] == []

    setup.model.script("model-mcp", [call("demo__echo", text="hi"), call("demo__pid"), call("demo__pid"), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Echo hi, then tell me the pid twice.")
    first = await card(alice, cid)  # no rule allows a connector tool: the gate asks
    assert first["tool"] == "demo__echo" and json.loads(first["arguments"]) == {"text": "hi"}
    await decide(alice, first["id"])
    await allow(setup.admin, "demo__*")  # from now on the rule lets them through
    messages = await finished(alice, cid)

    done = calls(messages)
    assert [c["status"] for c in done] == ["done", "done", "done"], done
    assert done[0]["result"] == "echo: hi"
    pids = {done[1]["result"], done[2]["result"]}
    assert len(pids) == 1 and int(pids.pop()) != os.getpid()  # one server process served both calls
    assert "demo__echo" in setup.offered()
    # The tool's description carries the connector's name; its schema is the server's.
    wire = next(t for t in setup.model.requests_for("model-mcp")[0].tools if t["function"]["name"] == "demo__echo")
    assert wire["function"]["description"].startswith("[demo] Echo") and "text" in wire["function"]["parameters"]["properties"]


async def test_a_streamable_http_connector_serves_a_members_call(setup: Setup):
    alice = await setup.host.member("alice")
    await allow(setup.admin, "web__*")
    async with HttpDemo() as demo:
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "web", "transport": "http", "url": demo.url, "access": [alice.member["id"]]})
        assert response.status_code == 201, response.text
        assert response.json()["state"] == "ready", response.json()
        setup.model.script("model-mcp", [call("web__echo", text="over http"), call("web__calls"), Reply("Done.")])
        cid = await new_conversation(alice)
        await send(alice, cid, "Echo over HTTP.")
        done = calls(await finished(alice, cid))
        await setup.admin.delete(f"{BASE}/servers/web")
    assert [(c["status"], c["result"]) for c in done] == [("done", "echo: over http"), ("done", "2")]


async def test_grants_filter_per_member_and_a_revoke_lands_before_a_waiting_call_runs(setup: Setup):
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    await setup.add_stdio(access=[alice.member["id"]])

    setup.model.script("model-mcp", [Reply("Hello Bob.")])
    cid = await new_conversation(bob)
    await send(bob, cid, "Hi.")
    await finished(bob, cid)
    assert not any("__" in name for name in setup.offered())  # bob holds no grant
    mine = (await bob.get(f"{BASE}/mine")).json()
    assert mine["connectors"] == [] and mine["is_admin"] is False

    mine = (await alice.get(f"{BASE}/mine")).json()
    assert [c["name"] for c in mine["connectors"]] == ["demo"] and "demo__echo" in mine["connectors"][0]["tools"]

    # Alice's call waits for her approval; the admin revokes meanwhile; her approval
    # then runs nothing.
    setup.model.script("model-mcp", [call("demo__calls"), Reply("It did not run.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Count.")
    pending = await card(alice, cid)
    await setup.set_access("demo", [])
    await decide(alice, pending["id"])
    done = calls(await finished(alice, cid))
    assert done[0]["status"] == "denied" and "access to this tool was withdrawn" in done[0]["result"]

    # The server never served it: granted again, its first counted call is 1.
    await setup.set_access("demo", [alice.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [call("demo__calls"), Reply("One.")])
    await send(alice, cid, "Count again.")
    messages = await finished(alice, cid)
    assert calls(messages)[-1]["result"] == "1"


async def test_a_tool_that_appears_at_runtime_is_withheld_until_the_admin_accepts_it(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [call("demo__grow"), Reply("Grown."), call("demo__double", n=21), Reply("42.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Grow.")
    await finished(alice, cid)

    async def listed() -> bool:
        return "double" in (await setup.server("demo"))["pending"]

    await eventually(listed, what="the new tool to be listed (tools/list_changed)")
    assert "demo__double" not in {t["exposed_as"] for t in (await setup.server("demo"))["tools"] if t["offered"]}

    response = await setup.admin.post(f"{BASE}/servers/demo/accept", json=shown(await setup.server("demo")))
    assert response.status_code == 200 and response.json()["pending"] == []
    await send(alice, cid, "Double 21.")
    messages = await finished(alice, cid)
    assert "demo__double" in setup.offered()
    assert calls(messages)[-1]["result"] == "42"


async def test_notifications_of_a_global_connector_are_discarded_and_errors_are_results(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [call("demo__shout", text="hey"), call("demo__fail"), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Shout.")
    done = calls(await finished(alice, cid))
    assert [c["status"] for c in done] == ["done", "error"]
    assert done[0]["result"] == "shouted" and "Error executing tool fail" in done[1]["result"]
    assert (await setup.server("demo"))["discarded_notifications"] >= 1


async def test_a_disabled_plugin_leaves_no_connector_tool_anywhere(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    setup.model.script("model-mcp", [Reply("one"), Reply("two"), Reply("three")])
    cid = await new_conversation(alice)
    await send(alice, cid, "One.")
    await finished(alice, cid)
    assert "demo__echo" in setup.offered()

    response = await setup.admin.put("/api/admin/plugins/mcp/enabled", json={"enabled": False})
    assert response.status_code == 200, response.text
    await send(alice, cid, "Two.")
    await finished(alice, cid)
    assert not any("__" in name for name in setup.offered())
    assert (await setup.admin.get(f"{BASE}/servers")).status_code == 404  # the routes are gone too

    # Enabled again, the stored connector comes back with its grants.
    response = await setup.admin.put("/api/admin/plugins/mcp/enabled", json={"enabled": True})
    assert response.status_code == 200, response.text

    async def ready() -> bool:
        response = await setup.admin.get(f"{BASE}/servers")
        return response.status_code == 200 and response.json()["servers"][0]["state"] == "ready"

    await eventually(ready, what="the connector to reconnect")
    await send(alice, cid, "Three.")
    await finished(alice, cid)
    assert "demo__echo" in setup.offered()


async def test_a_tool_whose_definition_changes_is_withheld_until_the_admin_accepts_it_again(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [call("demo__mutate"), Reply("Changed."), Reply("No echo now."), call("demo__echo", text="x"), Reply("Back.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Mutate.")
    await finished(alice, cid)

    async def withheld() -> bool:
        return "echo" in (await setup.server("demo"))["pending"]

    await eventually(withheld, what="the changed tool to be withheld")
    await send(alice, cid, "Echo?")
    await finished(alice, cid)
    assert "demo__echo" not in setup.offered() and "demo__pid" in setup.offered()

    assert (await setup.admin.post(f"{BASE}/servers/demo/accept", json=shown(await setup.server("demo")))).status_code == 200
    await send(alice, cid, "Echo now.")
    messages = await finished(alice, cid)
    wire = next(t for t in setup.model.requests_for("model-mcp")[-2].tools if t["function"]["name"] == "demo__echo")
    assert "attacker" in wire["function"]["description"]  # the accepted definition is the new one
    assert calls(messages)[-1]["result"] == "echo: x"


async def test_stopping_the_turn_stops_a_running_connector_call_and_the_session_goes_on(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [call("demo__sleep", seconds=60), call("demo__echo", text="after"), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Sleep.")

    async def running_call() -> bool:
        body = (await alice.get(f"/api/conversations/{cid}")).json()
        return any(c["status"] == "running" for c in calls(body["messages"]))

    await eventually(running_call, what="the call to run")
    response = await alice.post(f"/api/conversations/{cid}/stop")
    assert response.status_code in (200, 202), response.text
    messages = await finished(alice, cid)
    assert calls(messages)[0]["status"] == "cancelled"
    await send(alice, cid, "Echo.")
    assert calls(await finished(alice, cid))[-1]["result"] == "echo: after"  # the same session still serves


async def test_a_member_created_later_gets_the_connectors_granted_by_default(setup: Setup):
    await setup.add_stdio("demo")
    await setup.add_stdio("closed", grant_by_default=False)
    carol = await setup.host.member("carol")

    async def granted() -> bool:
        return carol.member["id"] in (await setup.server("demo"))["access"]

    await eventually(granted, what="carol's default grant")
    assert carol.member["id"] not in (await setup.server("closed"))["access"]
    assert (await setup.server("demo"))["grant_by_default"] is True


async def test_disabling_the_plugin_closes_http_sessions_without_errors_in_the_log(setup: Setup, caplog):
    """A deliberate stop breaks the sessions' streams on purpose; what the SDK logs of
    it (the closing DELETE failing against a server already gone, a stream reader
    finding its stream closed) was a WARNING or an ERROR the admin could not act on.
    Lowered to INFO while the session is closed on purpose, and only then."""
    import logging

    caplog.set_level(logging.INFO, logger="mcp.client")
    async with HttpDemo() as demo:
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "web", "transport": "http", "url": demo.url, "access": []})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        demo.process.kill()
        await asyncio.to_thread(demo.process.wait, 10)
        caplog.clear()
        response = await setup.admin.put("/api/admin/plugins/mcp/enabled", json={"enabled": False})
        assert response.status_code == 200, response.text
    sdk = [r for r in caplog.records if r.name.startswith("mcp.client")]
    assert any("Session termination failed" in r.getMessage() for r in sdk), [r.getMessage() for r in sdk]  # said, at INFO
    assert [r for r in sdk if r.levelno > logging.INFO] == [], [(r.levelname, r.getMessage()) for r in sdk]

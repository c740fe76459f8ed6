"""A connector whose server went away comes back at the next call: an HTTP server that
restarted no longer knows the session (it refuses the request before running the tool,
so the call is sent once more on a new session), a stdio server that exited is started
again. A call that broke after the server received it is never sent again, and a server
that stays gone leaves the connector reconnecting (in the background:
test_connectors_retry.py), with why, for the admin and the member."""

from __future__ import annotations

import os
import signal

from mcp_support import BASE, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send
from skald_host.testing import Reply, ToolCall
from skald_mcp import running
from skald_mcp.runtime import _transport_closed
from test_member_connectors import grant_remote
from test_oauth import allow_private


def call(tool: str, **args) -> Reply:
    return Reply(tool_calls=[ToolCall(tool, args)])


async def turn(setup: Setup, client, *replies: Reply) -> list[dict]:
    setup.model.script("model-mcp", [*replies, Reply("Done.")])
    cid = await new_conversation(client)
    await send(client, cid, "Go.")
    return calls(await finished(client, cid))


async def test_a_global_http_connector_reconnects_after_its_server_restarted_and_the_call_runs_once(setup: Setup):
    alice = await setup.host.member("alice")
    await allow(setup.admin, "web__*")
    async with HttpDemo() as demo:
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "web", "transport": "http", "url": demo.url, "access": [alice.member["id"]]})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        assert [c["result"] for c in await turn(setup, alice, call("web__calls"))] == ["1"]

        await demo.__aexit__()  # the server restarts on the same port: the session is gone
        await demo.__aenter__()
        done = await turn(setup, alice, call("web__calls"))
        # "1": the new server process saw this call exactly once.
        assert [(c["status"], c["result"]) for c in done] == [("done", "1")]
        server = await setup.server("web")
        assert server["state"] == "ready" and "web__calls" in [t["exposed_as"] for t in server["tools"] if t["offered"]]
        await setup.admin.delete(f"{BASE}/servers/web")


async def test_a_members_remote_connector_reconnects_after_its_server_restarted(setup: Setup):
    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    await allow(setup.admin, "home__*")
    async with HttpDemo() as demo:
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": demo.url}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        assert [c["result"] for c in await turn(setup, alice, call("home__calls"))] == ["1"]

        await demo.__aexit__()
        await demo.__aenter__()
        done = await turn(setup, alice, call("home__calls"), call("home__echo", text="back"))
        assert [(c["status"], c["result"]) for c in done] == [("done", "1"), ("done", "echo: back")]
        mine = (await alice.get(f"{BASE}/my/connectors/home")).json()
        assert mine["state"] == "ready" and "home__echo" in mine["tools"], mine


async def test_a_global_stdio_connector_whose_process_died_is_started_again_at_the_next_call(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    first = int((await turn(setup, alice, call("demo__pid")))[0]["result"])
    os.kill(first, signal.SIGKILL)
    # Dead, and the session has seen it (else the call goes to the dead process, and
    # breaks as a call the server may have received).
    await eventually(lambda: _transport_closed(running.runtime.connections["demo"]._client), what="the session to see the process end")
    done = await turn(setup, alice, call("demo__pid"), call("demo__calls"))
    assert [c["status"] for c in done] == ["done", "done"], done
    assert int(done[0]["result"]) != first and done[1]["result"] == "2"


async def test_a_call_that_broke_after_the_server_received_it_is_not_sent_again(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    done = await turn(setup, alice, call("demo__crash"), call("demo__calls"))
    assert done[0]["status"] == "error" and "may or may not have run" in done[0]["result"], done
    # A new process served the next call, and it never saw the crash again.
    assert (done[1]["status"], done[1]["result"]) == ("done", "1")


async def test_a_server_that_stays_gone_leaves_the_connector_reconnecting_with_why(setup: Setup):
    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    await allow(setup.admin, "web__*")
    await allow(setup.admin, "home__*")
    async with HttpDemo() as demo:
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "web", "transport": "http", "url": demo.url, "access": [alice.member["id"]]})
        assert response.status_code == 201, response.text
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": demo.url}})
        assert response.status_code == 201, response.text
        await demo.__aexit__()
        done = await turn(setup, alice, call("web__echo", text="x"), call("home__echo", text="x"))
        # Words for the model, not the host's "the tool failed (error id …)".
        assert [c["status"] for c in done] == ["error", "error"], done
        assert all("the tool failed" not in c["result"] and "the connector" in c["result"] for c in done), done
        server = await setup.server("web")
        assert server["state"] == "reconnecting" and server["cause"] == "connection_failed", server
        mine = await eventually(lambda: _own(alice, "home"), what="the member's connector to read reconnecting")
        assert mine["cause"] == "connection_failed" and mine["error"], mine
        await demo.__aenter__()


async def _own(client, name: str) -> dict | None:
    status = (await client.get(f"{BASE}/my/connectors/{name}")).json()
    return status if status["state"] == "reconnecting" else None

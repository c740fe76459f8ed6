"""*Allow private addresses* is a live setting (``ConfigField(live=True)``, contract
1.12): the admin saving it restarts nothing, so no call in flight breaks and global
servers keep their process; and it is live both ways for a member's own remote server:
turned off, a session that reaches a loopback address by it is refused from its next
request on (an open one included), turned on again it works after a Restart."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from mcp_support import BASE, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send
from skald_host.testing import Reply
from skald_mcp import running
from test_connectors_reconnect import call, turn
from test_member_connectors import grant_remote
from test_oauth import allow_private


async def set_private(setup: Setup, allowed: bool) -> None:
    response = await setup.admin.put("/api/admin/plugins/mcp/config", json={"config": {"allow_private_addresses": allowed}})
    assert response.status_code == 200, response.text


async def test_saving_the_setting_during_a_call_breaks_nothing_and_restarts_nothing(setup: Setup, tmp_path: Path):
    alice = await setup.host.member("alice")
    started = tmp_path / "starts"
    await setup.add_stdio(access=[alice.member["id"]], env={"DEMO_STARTS_FILE": str(started)})
    await allow(setup.admin, "demo__*")
    runtime = running.runtime
    marker = tmp_path / "held"

    setup.model.script("model-mcp", [call("demo__hold", marker=str(marker), seconds=4), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Hold on.")
    await eventually(lambda: marker.exists() and marker.read_text().strip(), what="the server to run the call")
    held_at = time.monotonic()
    # Toggled both ways while the server holds the call.
    await set_private(setup, True)
    await set_private(setup, False)
    saved_in = time.monotonic() - held_at

    (held,) = calls(await finished(alice, cid))
    assert (held["status"], held["result"]) == ("done", "held"), held
    assert saved_in < 3.5, f"saved {saved_in:.1f} s into a 4 s call: maybe after it, which proves nothing"
    # Not restarted: the same runtime (OAuth tokens, flows and sessions in RAM kept), the
    # same server process, started once.
    assert running.runtime is runtime
    assert (await setup.server("demo"))["state"] == "ready"
    done = await turn(setup, alice, call("demo__pid"))
    assert [(c["status"], c["result"]) for c in done] == [("done", marker.read_text().strip())], done
    assert started.read_text().split() == [marker.read_text().strip()]


async def test_a_members_session_to_a_private_address_is_refused_once_the_admin_turns_it_off(setup: Setup):
    await grant_remote(setup)
    await allow_private(setup)
    await allow(setup.admin, "home__*")
    alice = await setup.host.member("alice")
    async with HttpDemo() as demo:
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": demo.url}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        assert [c["result"] for c in await turn(setup, alice, call("home__calls"))] == ["1"]
        runtime = running.runtime

        await set_private(setup, False)
        assert running.runtime is runtime  # no restart: the open session is still there
        (refused,) = await turn(setup, alice, call("home__calls"))
        assert refused["status"] == "error" and "private or special address (127.0.0.1)" in refused["result"], refused
        (row,) = (await alice.get(f"{BASE}/my/connectors")).json()["connectors"]
        assert row["state"] == "failed" and "private or special address (127.0.0.1)" in (row["error"] or ""), row

        # Allowed again: the member's Restart brings it back; the refused call never
        # reached the server (its counter says 2, not 3).
        await set_private(setup, True)
        assert running.runtime is runtime
        response = await alice.post(f"{BASE}/my/connectors/home/restart")
        assert response.status_code == 200 and response.json()["state"] == "ready", response.text
        assert [(c["status"], c["result"]) for c in await turn(setup, alice, call("home__calls"))] == [("done", "2")]


async def test_the_guarded_client_drops_its_open_connections_when_the_allowance_is_withdrawn():
    """Below the session: a client that reached a loopback server by the allowance asks
    it again at each request; once withdrawn, the request is refused and the stream it
    held open is cut (the server sees its connection end)."""
    import httpx2
    from aiohttp import web

    from skald_mcp.guard import guarded_client

    streams: list[asyncio.Event] = []

    async def stream(request: web.Request) -> web.StreamResponse:
        ended = asyncio.Event()
        streams.append(ended)
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            while True:
                await response.write(b"tick\n")
                await asyncio.sleep(0.05)
        except (ConnectionResetError, asyncio.CancelledError):
            ended.set()
            raise
        finally:
            ended.set()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/stream", stream)
    app.router.add_get("/hello", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    allowed = {"now": True}

    async def allowance() -> bool:
        return allowed["now"]

    client = guarded_client({}, allowance)
    try:
        assert (await client.get(f"http://127.0.0.1:{port}/hello")).text == "hello"
        async with client.stream("GET", f"http://127.0.0.1:{port}/stream") as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "tick"
            allowed["now"] = False
            with pytest.raises(httpx2.ConnectError, match=r"private or special address \(127\.0\.0\.1\)"):
                await client.get(f"http://127.0.0.1:{port}/hello")
            await asyncio.wait_for(streams[0].wait(), 10)  # the open stream was cut
            with pytest.raises(httpx2.HTTPError):
                async for _ in lines:
                    pass

        # Allowed again: new connections may reach it.
        allowed["now"] = True
        assert (await client.get(f"http://127.0.0.1:{port}/hello")).text == "hello"
    finally:
        await client.aclose()
        await runner.cleanup()

    # Without the allowance asked (a client that never had it), loopback is refused.
    strict = guarded_client({})
    try:
        with pytest.raises(httpx2.ConnectError, match="private or special address"):
            await strict.get(f"http://127.0.0.1:{port}/hello")
    finally:
        await strict.aclose()

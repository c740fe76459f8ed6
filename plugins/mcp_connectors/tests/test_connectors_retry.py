"""A connector whose server went away, and could not be reached again at once, keeps
trying by itself: it reads reconnecting (with why) on the admin's and the member's page,
a call meanwhile is told so at once, and it is ready again when its server is back, with
no Restart. Only a session that was there is retried: a connector whose command or
address is wrong fails once and stays failed. A member restarts their own connector, and
only theirs; the log never names a member's connector.

The background waits (``runtime.RETRY_DELAYS``) are patched short, so the tests wait for
what happens (a start, a state), never for a clock."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

import pytest

from mcp_support import BASE, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send
from skald_hookspecs import ToolError
from skald_host.testing import Reply
from skald_host.testing.host import MEMBER_PASSWORD
from skald_mcp import running
from skald_mcp import runtime as mcp_runtime
from test_connectors_german_refusals import german
from test_connectors_reconnect import call, turn
from test_member_connectors import grant_remote
from test_oauth import allow_private

TAG = "skald-p-mcp-connectors"


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    # raising=False: without the background reconnect the tests fail on what they check.
    monkeypatch.setattr(mcp_runtime, "RETRY_DELAYS", (0.05, 0.1, 0.2), raising=False)


@pytest.fixture
def no_background_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    """An hour between the attempts: only a Restart can bring a connector back in the test."""
    monkeypatch.setattr(mcp_runtime, "RETRY_DELAYS", (3600.0,), raising=False)


async def home_of(setup: Setup, member: str, url: str):
    """``member`` (signed in) with their own remote connector ``home`` at ``url``, ready:
    the remote capability, private addresses and its tools allowed."""
    await grant_remote(setup)
    await allow_private(setup)
    await allow(setup.admin, "home__*")
    client = await setup.host.member(member)
    response = await client.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": url}})
    assert response.status_code == 201 and response.json()["state"] == "ready", response.text
    return client


async def held(setup: Setup, client, tool: str, marker: Path) -> str:
    """A turn whose call of ``tool`` (the demo's ``hold``) the server is running when this
    returns: the call wrote its process id to ``marker``. The conversation's id."""
    setup.model.script("model-mcp", [call(tool, marker=str(marker), seconds=300), Reply("Done.")])
    cid = await new_conversation(client)
    await send(client, cid, "Hold on.")
    await eventually(lambda: marker.exists() and marker.read_text().strip(), what="the server to run the call")
    return cid


async def state_of(setup: Setup, name: str) -> str:
    return (await setup.server(name))["state"]


def starts(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


async def test_an_http_connector_whose_server_stopped_during_a_call_comes_back_by_itself(setup: Setup, quick_retries, tmp_path: Path):
    alice = await setup.host.member("alice")
    bernd = await setup.host.member("bernd")
    await german(bernd)
    await allow(setup.admin, "web__*")
    async with HttpDemo() as demo:
        access = [alice.member["id"], bernd.member["id"]]
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "web", "transport": "http", "url": demo.url, "access": access})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text

        cid = await held(setup, alice, "web__hold", tmp_path / "held")
        await demo.__aexit__()  # redeployed: stopped under the call
        (broken,) = calls(await finished(alice, cid))
        assert broken["status"] == "error" and "may or may not have run" in broken["result"], broken

        server = await setup.server("web")
        assert server["state"] == "reconnecting" and server["cause"] == "connection_failed" and server["error"], server
        (row,) = (await alice.get(f"{BASE}/mine")).json()["connectors"]
        assert row["state"] == "reconnecting" and "reconnects by itself" in row["reason"], row
        (row,) = (await bernd.get(f"{BASE}/mine")).json()["connectors"]
        assert "verbindet sich von selbst neu" in row["reason"], row
        # A call meanwhile is told at once (the server is still away), not held.
        with pytest.raises(ToolError, match="is reconnecting by itself"):
            await asyncio.wait_for(running.runtime.connections["web"].call("echo", {"text": "x"}), 15)
        assert await state_of(setup, "web") == "reconnecting"

        await demo.__aenter__()  # back, on the same port
        await eventually(lambda: _is(setup, "web", "ready"), what="the connector to come back by itself")
        server = await setup.server("web")
        assert server["error"] is None and server["cause"] is None, server
        done = await turn(setup, alice, call("web__echo", text="back"))
        assert [(c["status"], c["result"]) for c in done] == [("done", "echo: back")]
        await setup.admin.delete(f"{BASE}/servers/web")


async def test_a_stdio_connector_whose_server_was_killed_during_a_call_comes_back_by_itself(setup: Setup, quick_retries, tmp_path: Path):
    alice = await setup.host.member("alice")
    down, started = tmp_path / "down", tmp_path / "starts"
    await setup.add_stdio(access=[alice.member["id"]], env={"DEMO_DOWN_FILE": str(down), "DEMO_STARTS_FILE": str(started)})
    await allow(setup.admin, "demo__*")

    marker = tmp_path / "held"
    cid = await held(setup, alice, "demo__hold", marker)
    down.touch()  # it cannot be started again for now
    os.kill(int(marker.read_text()), signal.SIGKILL)
    (broken,) = calls(await finished(alice, cid))
    assert broken["status"] == "error" and "may or may not have run" in broken["result"], broken
    server = await setup.server("demo")
    assert server["state"] == "reconnecting" and server["error"], server
    # It goes on trying in the background (each attempt starts the command once).
    now = starts(started)
    await eventually(lambda: starts(started) >= now + 3, what="reconnect attempts in the background")
    assert await state_of(setup, "demo") == "reconnecting"

    down.unlink()
    await eventually(lambda: _is(setup, "demo", "ready"), what="the connector to come back by itself")
    done = await turn(setup, alice, call("demo__calls"))
    # "1": a new process served it, and the held call was not sent again.
    assert [(c["status"], c["result"]) for c in done] == [("done", "1")], done


async def test_a_connector_whose_configuration_is_wrong_is_not_retried(setup: Setup, quick_retries, tmp_path: Path):
    # Wrong from the start: a command that stops at once, a program that is not there,
    # an address whose server hangs up (each start of the first and the last is counted).
    wrong_starts = tmp_path / "wrong-starts"
    script = f"open({str(wrong_starts)!r}, 'a').write('started\\n'); raise SystemExit(3)"
    wrong = {"name": "wrong", "transport": "stdio", "command": sys.executable, "args": ["-c", script], "access": []}
    nocmd = {"name": "nocmd", "transport": "stdio", "command": "/nonexistent/bin/mcp-nocmd", "access": []}
    hangups: list[int] = []

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hangups.append(1)
        writer.close()

    listener = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    refused = {"name": "refused", "transport": "http", "url": f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/mcp", "access": []}
    try:
        for body in (wrong, nocmd, refused):
            response = await setup.admin.post(f"{BASE}/servers", json=body)
            assert response.status_code == 201 and response.json()["state"] == "failed", response.text
        assert starts(wrong_starts) == 1
        hangups_at_start = len(hangups)

        # The yardstick: a connector that was ready, lost its server and cannot start it
        # again is retried meanwhile, with the same waits.
        down, flaky_starts = tmp_path / "down", tmp_path / "flaky-starts"
        await setup.add_stdio("flaky", env={"DEMO_DOWN_FILE": str(down), "DEMO_STARTS_FILE": str(flaky_starts)})
        flaky = running.runtime.connections["flaky"]
        pid = int(await flaky.call("pid", {}))
        down.touch()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(ToolError):
            await flaky.call("echo", {"text": "x"})
        await eventually(lambda: starts(flaky_starts) >= 6, what="the lost connector's attempts in the background")

        servers = {s["name"]: s for s in (await setup.admin.get(f"{BASE}/servers")).json()["servers"]}
        assert servers["flaky"]["state"] == "reconnecting", servers["flaky"]
        for name in ("wrong", "nocmd", "refused"):
            assert servers[name]["state"] == "failed", servers[name]
        assert servers["nocmd"]["cause"] == "command_not_found", servers["nocmd"]
        assert starts(wrong_starts) == 1 and len(hangups) == hangups_at_start
        # Its call says it is not running, at once.
        with pytest.raises(ToolError, match="is not running"):
            await asyncio.wait_for(running.runtime.connections["wrong"].call("anything", {}), 15)
    finally:
        listener.close()
        await listener.wait_closed()


async def test_a_member_restarts_their_own_connector_and_no_one_elses(setup: Setup, no_background_retry, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="skald_mcp")
    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    alice_id = alice.member["id"]
    await allow(setup.admin, "home__*")
    async with HttpDemo() as demo:
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": demo.url}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        session = running.runtime.members.connections[alice_id]["home"]
        # Another member's Restart of it: there is no such connector of theirs.
        response = await bob.post(f"{BASE}/my/connectors/home/restart")
        assert response.status_code == 404 and response.json()["code"] == "mcp.err_unknown", response.text
        assert running.runtime.members.connections[alice_id]["home"] is session

        await demo.__aexit__()
        (broken,) = await turn(setup, alice, call("home__echo", text="x"))
        assert broken["status"] == "error", broken
        mine = (await alice.get(f"{BASE}/my/connectors/home")).json()
        assert mine["state"] == "reconnecting" and mine["cause"] == "connection_failed", mine
        # Restarted while the server is still away: tried at once, and still trying.
        response = await alice.post(f"{BASE}/my/connectors/home/restart")
        assert response.status_code == 200 and response.json()["state"] == "reconnecting", response.text
        assert (await bob.post(f"{BASE}/my/connectors/home/restart")).status_code == 404

        await demo.__aenter__()
        # The background waits an hour here: only the Restart brings it back now.
        response = await alice.post(f"{BASE}/my/connectors/home/restart")
        assert response.status_code == 200 and response.json()["state"] == "ready", response.text
        assert "home__echo" in response.json()["tools"], response.json()
        done = await turn(setup, alice, call("home__echo", text="again"))
        assert [(c["status"], c["result"]) for c in done] == [("done", "echo: again")]

    # The log says what happened to a member's connector, never its name or address.
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("skald_mcp")]
    assert any("of a member" in line and "background" in line for line in lines), lines
    assert not [line for line in lines if "home" in line or str(demo.port) in line], lines


async def test_a_restart_pressed_while_the_server_is_away_keeps_trying_until_it_is_back(setup: Setup, quick_retries):
    """Restart of a connector that still read ready (nobody had called it since its
    server went away) was a first start: it failed and stayed failed for good, where
    leaving it alone would have brought it back (second security probe)."""
    async with HttpDemo() as demo:
        alice = await home_of(setup, "alice", demo.url)
        await demo.__aexit__()
        response = await alice.post(f"{BASE}/my/connectors/home/restart")
        assert response.status_code == 200 and response.json()["state"] == "reconnecting", response.text
        await demo.__aenter__()

        async def back() -> bool:
            return (await alice.get(f"{BASE}/my/connectors/home")).json()["state"] == "ready"

        await eventually(back, what="the connector back by itself after the Restart")
        done = await turn(setup, alice, call("home__echo", text="again"))
        assert [(c["status"], c["result"]) for c in done] == [("done", "echo: again")]


async def test_a_connector_whose_server_is_away_when_its_member_signs_in_again_comes_back_by_itself(setup: Setup, quick_retries):
    """At an unlock (after a restart, say) a member's connector that was working starts
    again; with its server away it read failed for good (crash-kill probe), where a
    session lost while running keeps trying."""
    async with HttpDemo() as demo:
        alice = await home_of(setup, "alice", demo.url)
        alice_id = alice.member["id"]
        await demo.__aexit__()
        await setup.host.core.users.lock(alice_id)
        alice = await setup.host.member("alice")  # signs in again: her connectors start

        await eventually(lambda: state_is(alice, "reconnecting"), what="the connector trying again in the background")
        await demo.__aenter__()
        await eventually(lambda: state_is(alice, "ready"), what="the connector back by itself")
        done = await turn(setup, alice, call("home__echo", text="again"))
        assert [(c["status"], c["result"]) for c in done] == [("done", "echo: again")]


async def state_is(client, wanted: str) -> bool:
    return (await client.get(f"{BASE}/my/connectors/home")).json()["state"] == wanted


def retrying() -> set[str]:
    """The background reconnects running now, by their tasks' names."""
    return {t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("mcp-retry:") and not t.done()}


async def test_the_background_reconnect_ends_when_the_members_file_locks_or_the_connector_is_removed(setup: Setup, no_background_retry):
    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await allow(setup.admin, "web__*")
    await allow(setup.admin, "home__*")
    async with HttpDemo() as demo:
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "web", "transport": "http", "url": demo.url, "access": [alice_id]})
        assert response.status_code == 201, response.text
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": demo.url}})
        assert response.status_code == 201, response.text
        await demo.__aexit__()
        await turn(setup, alice, call("web__echo", text="x"), call("home__echo", text="x"))
        assert retrying() == {"mcp-retry:web", "mcp-retry:home"}

        await setup.host.core.users.lock(alice_id)  # her file closes: her runtime stops
        assert alice_id not in running.runtime.members.connections
        assert retrying() == {"mcp-retry:web"}
        assert (await setup.admin.delete(f"{BASE}/servers/web")).status_code == 200
        assert retrying() == set()
        await demo.__aenter__()


async def test_the_page_shows_reconnecting_and_a_member_restarts_their_connector_in_a_browser(setup: Setup, no_background_retry, plugin_browser):
    async with HttpDemo() as demo:
        alice = await home_of(setup, "alice", demo.url)
        await demo.__aexit__()
        await turn(setup, alice, call("home__echo", text="x"))
        assert (await alice.get(f"{BASE}/my/connectors/home")).json()["state"] == "reconnecting"
        await demo.__aenter__()

        page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
        row = page.locator(f"{TAG} li.mcp-own-connector[data-name=home]")
        await row.locator(".mcp-state").filter(has_text="reconnecting").wait_for(timeout=10_000)
        await row.locator(".mcp-reconnecting").filter(has_text="reconnects by itself").wait_for(timeout=10_000)
        await row.locator("button.mcp-restart").click()
        await page.locator(f"{TAG} li.mcp-own-connector[data-name=home] .mcp-state").filter(has_text="running").wait_for(timeout=20_000)
        assert await page.locator(f"{TAG} li.mcp-own-connector[data-name=home] .mcp-reconnecting").count() == 0


async def _is(setup: Setup, name: str, wanted: str) -> bool:
    return await state_of(setup, name) == wanted

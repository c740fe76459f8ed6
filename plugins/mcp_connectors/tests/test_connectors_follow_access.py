"""A member's own connectors follow their access as the admin changes it, not only their
file's lock (``member_access_changed``, contract 1.15): the plugin taken from them stops
every session of theirs; their role losing ``connectors.activate`` stops their
activations of catalog templates, losing ``connectors.remote`` their own remote servers,
each leaving the other kind running. Their connectors stay in their file, and start
again once the access is back. Counted as the sessions the plugin opened that still run
and as the host's TCP connections to the real MCP servers, as in
test_connectors_concurrency.py. And the admin's Restart of a global connector, pressed
several times at once, leaves exactly one session."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_support import BASE, HttpDemo, Setup, eventually
from skald_mcp import members as members_module
from skald_mcp import runtime as runtime_module
from skald_mcp import running
from test_connectors_concurrency import established, live, opened  # noqa: F401 - the fixture
from test_member_connectors import grant_remote, put_template, set_member_capabilities
from test_oauth import allow_private


async def set_plugin_grant(setup: Setup, member_id: str, granted: bool) -> None:
    grants = (await setup.admin.get(f"/api/admin/members/{member_id}/plugins")).json()["plugins"]
    wanted = {g["plugin_id"] for g in grants if g["granted"]} - {"mcp"} | ({"mcp"} if granted else set())
    response = await setup.admin.put(f"/api/admin/members/{member_id}/plugins", json={"plugins": sorted(wanted)})
    assert response.status_code == 200, response.text


async def two_connectors(setup: Setup, alice: Any, web: HttpDemo, own: HttpDemo) -> None:
    """Alice's activation of the template ``web`` and her own remote server ``mine``."""
    await put_template(setup, web.url)
    await grant_remote(setup)
    await allow_private(setup)
    response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "sk-1"}})
    assert response.status_code == 201 and response.json()["state"] == "ready", response.text
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "mine", "url": own.url}})
    assert response.status_code == 201 and response.json()["state"] == "ready", response.text


def running_names(member_id: str) -> dict[str, str]:
    return {name: c.state for name, c in running.runtime.members.connections.get(member_id, {}).items()}


async def test_taking_the_plugin_from_a_member_stops_their_sessions_and_giving_it_back_starts_them(setup: Setup, opened: list[Any]):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as web, HttpDemo() as own:
        await two_connectors(setup, alice, web, own)
        assert len(live(opened)) == 2 and established(web.port) and established(own.port)

        await set_plugin_grant(setup, alice_id, False)
        # Before the admin's request answered: no session of hers, no connection.
        assert live(opened) == []
        assert established(web.port) == [] and established(own.port) == []
        assert alice_id not in running.runtime.members.records  # nothing of hers in RAM
        # Her file keeps them.
        names = await setup.host.core.host_api("mcp").member_secret_names(alice_id, members_module.PREFIX)
        assert sorted(names) == ["connector:mine", "connector:web"]

        await set_plugin_grant(setup, alice_id, True)
        await eventually(lambda: running_names(alice_id) == {"web": "ready", "mine": "ready"}, what="her connectors to start again")
        assert len(live(opened)) == 2
        assert established(web.port) and established(own.port)


async def test_a_role_losing_a_capability_stops_the_sessions_of_that_kind_only(setup: Setup, opened: list[Any]):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as web, HttpDemo() as own:
        await two_connectors(setup, alice, web, own)
        mine = running.runtime.members.connections[alice_id]["mine"]

        await set_member_capabilities(setup, remove={"connectors.activate"})
        assert live(opened) == [mine]  # her own remote server runs on
        assert established(web.port) == [] and established(own.port)
        rows = {r["name"]: r["state"] for r in (await alice.get(f"{BASE}/my/connectors")).json()["connectors"]}
        assert rows == {"web": "withdrawn", "mine": "ready"}  # kept, listed, not running
        # Her Restart starts nothing while the capability is gone.
        assert (await alice.post(f"{BASE}/my/connectors/web/restart")).status_code == 200
        assert live(opened) == [mine] and established(web.port) == []

        await set_member_capabilities(setup, remove={"connectors.remote"})
        assert live(opened) == []
        assert established(own.port) == []

        await set_member_capabilities(setup, add={"connectors.activate", "connectors.remote"})
        await eventually(lambda: running_names(alice_id) == {"web": "ready", "mine": "ready"}, what="her connectors to start again")
        assert len(live(opened)) == 2
        assert established(web.port) and established(own.port)


async def test_a_member_unlocked_without_the_plugin_runs_none_of_their_connectors(setup: Setup, opened: list[Any]):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as web, HttpDemo() as own:
        await two_connectors(setup, alice, web, own)
        await set_plugin_grant(setup, alice_id, False)
        await setup.host.core.users.lock(alice_id)
        await setup.host.member("alice")  # logs in again: her file opens
        await asyncio.sleep(0)
        for task in list(running.runtime.members._tasks):
            await asyncio.gather(task, return_exceptions=True)  # her load ran to its end
        assert live(opened) == [] and running_names(alice_id) == {}
        assert established(web.port) == [] and established(own.port) == []


@pytest.fixture
def opened_globally(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every session the admin's (global) runtime creates, stopped or not."""
    made: list[Any] = []

    class Tracked(runtime_module.Connection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(runtime_module, "Connection", Tracked)
    return made


async def test_concurrent_restarts_of_a_global_connector_leave_one_session(setup: Setup, opened_globally: list[Any]):
    async with HttpDemo() as demo:
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "globo", "transport": "http", "url": demo.url, "access": []})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text

        responses = await asyncio.gather(*(setup.admin.post(f"{BASE}/servers/globo/restart") for _ in range(5)))
        assert [r.status_code for r in responses] == [200] * 5, [r.text for r in responses]
        current = running.runtime.connections["globo"]
        assert current.state == "ready"
        assert live(opened_globally) == [current], [c.state for c in opened_globally]
        assert len(established(demo.port)) >= 1

        response = await setup.admin.delete(f"{BASE}/servers/globo")
        assert response.status_code == 200, response.text
        assert live(opened_globally) == []
        assert established(demo.port) == []

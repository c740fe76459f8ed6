"""Concurrent requests on one member's connector (a security probe's race): activations
of one name at once save one connector and refuse the others (409); Restarts at once
leave exactly one session; after a Delete, or the member's file closing, no session of
theirs stays open to the server (counted as the host process's TCP connections to the
real MCP server, and as the sessions the plugin opened that still run)."""

from __future__ import annotations

import asyncio
from typing import Any

import psutil
import pytest

from mcp_support import BASE, HttpDemo, Setup
from skald_mcp import members as members_module
from skald_mcp import running
from test_member_connectors import put_template

LIVE = ("starting", "ready", "reconnecting")


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every session the per-member runtime creates, stopped or not."""
    made: list[Any] = []

    class Tracked(members_module.Connection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(members_module, "Connection", Tracked)
    return made


def live(made: list[Any]) -> list[Any]:
    return [c for c in made if c.state in LIVE]


def established(port: int) -> list[Any]:
    """This process's (the host's) TCP connections to the MCP server on ``port``."""
    return [c for c in psutil.Process().net_connections(kind="tcp") if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED]


async def activate_at_once(setup: Setup, client: Any, count: int) -> list[Any]:
    body = {"template": "web", "values": {"api_key": "sk-race"}}
    return await asyncio.gather(*(client.post(f"{BASE}/my/connectors", json=body) for _ in range(count)))


async def restart_at_once(client: Any, count: int) -> list[Any]:
    return await asyncio.gather(*(client.post(f"{BASE}/my/connectors/web/restart") for _ in range(count)))


async def test_concurrent_activations_save_one_and_a_delete_leaves_no_session(setup: Setup, opened: list[Any]):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await put_template(setup, demo.url)

        responses = await activate_at_once(setup, alice, 6)
        assert sorted(r.status_code for r in responses) == [201, 409, 409, 409, 409, 409], [r.text for r in responses]
        assert {r.json()["code"] for r in responses if r.status_code == 409} == {"mcp.err_exists"}
        assert [r.json()["state"] for r in responses if r.status_code == 201] == ["ready"]
        rows = (await alice.get(f"{BASE}/my/connectors")).json()["connectors"]
        assert [(row["name"], row["state"]) for row in rows] == [("web", "ready")]
        current = running.runtime.members.connections[alice_id]["web"]
        assert live(opened) == [current]

        responses = await restart_at_once(alice, 5)
        assert [r.status_code for r in responses] == [200] * 5, [r.text for r in responses]
        current = running.runtime.members.connections[alice_id]["web"]
        assert current.state == "ready"
        assert live(opened) == [current], [c.state for c in opened]
        assert established(demo.port)

        response = await alice.delete(f"{BASE}/my/connectors/web")
        assert response.status_code == 200, response.text
        assert live(opened) == []
        assert established(demo.port) == []
        assert (await alice.get(f"{BASE}/my/connectors")).json()["connectors"] == []


async def test_after_concurrent_restarts_the_members_lock_closes_every_session(setup: Setup, opened: list[Any]):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        (response,) = await activate_at_once(setup, alice, 1)
        assert response.status_code == 201, response.text

        responses = await restart_at_once(alice, 5)
        assert [r.status_code for r in responses] == [200] * 5, [r.text for r in responses]
        assert len(live(opened)) == 1, [c.state for c in opened]

        await setup.host.core.users.lock(alice_id)
        assert live(opened) == []
        assert established(demo.port) == []
        assert alice_id not in running.runtime.members.connections

"""Seventh probe: a whole access list must name its ``members`` (a body with the create
route's ``access`` key changed who may use a connector the other way than meant); the
device-login routes refuse a connector that has no device login; an answer larger than
the HTTP transport reads is said as such, the session kept; a template moved at the same
version stops its activations when it is saved; a call whose access ended while it ran
says so; a member's failing connector is logged by the failure's kind."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from mcp_support import BASE, HttpDemo, Setup
from skald_hookspecs import ToolContext, ToolError
from skald_mcp import running
from skald_mcp.runtime import MAX_RESULT
from test_connectors_follow_access import set_plugin_grant
from test_member_connectors import SECRET, grant_remote, put_template
from test_oauth import allow_private

async def template_access(setup: Setup, name: str) -> list[str] | None:
    templates = (await setup.admin.get(f"{BASE}/catalog")).json()["templates"]
    return next(t for t in templates if t["name"] == name)["access"]


async def test_a_whole_access_list_without_members_is_refused_and_changes_nothing(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await setup.add_stdio("gstd", access=[alice_id])
    for body, code in (
        ({"access": [alice_id]}, "mcp.err_unknown_fields"),  # the create route's key
        ({"name": 1}, "mcp.err_unknown_fields"),
        ({"members": [alice_id], "extra": True}, "mcp.err_unknown_fields"),
        ({}, "mcp.err_members_missing"),
        ({"members": None}, "mcp.err_members_invalid"),  # a connector has no "everyone"
    ):
        response = await setup.admin.put(f"{BASE}/servers/gstd/access", json=body)
        assert response.status_code == 400 and response.json()["code"] == code, (body, response.text)
        assert (await setup.server("gstd"))["access"] == [alice_id], body

    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        assert (await setup.admin.put(f"{BASE}/catalog/web/access", json={"members": [alice_id]})).status_code == 200
        for body in ({"access": [alice_id]}, {}, {"name": 1}):
            response = await setup.admin.put(f"{BASE}/catalog/web/access", json=body)
            assert response.status_code == 400 and response.json()["code"].startswith("mcp.err_"), (body, response.text)
            assert await template_access(setup, "web") == [alice_id], body  # never opened to everyone
        german = await setup.admin.put(f"{BASE}/catalog/web/access", json={}, headers={"Accept-Language": "de"})
        assert german.json()["code"] == "mcp.err_members_missing"
        # Null still means every member the plugin is granted to, said on purpose.
        assert (await setup.admin.put(f"{BASE}/catalog/web/access", json={"members": None})).status_code == 200
        assert await template_access(setup, "web") is None


async def test_the_device_login_routes_refuse_a_connector_without_one_and_restart_undoes_a_stuck_wait(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await grant_remote(setup)
    await allow_private(setup)
    async with HttpDemo() as demo:
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "myremote", "url": demo.url}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        for route in ("login/reset", "login/check"):
            response = await alice.post(f"{BASE}/my/connectors/myremote/{route}")
            assert response.status_code == 400 and response.json()["code"] == "mcp.err_no_device_login", (route, response.text)
        status = (await alice.get(f"{BASE}/my/connectors/myremote")).json()
        assert status["state"] == "ready" and "myremote__echo" in status["tools"], status
        record = await setup.host.core.host_api("mcp").member_secret_get(alice_id, "connector:myremote")
        assert '"needs_login"' not in record

        # One an earlier version left waiting for a device it has not: Restart brings it back.
        members = running.runtime.members
        await members.save(alice_id, "myremote", {**members.records[alice_id]["myremote"], "state": "needs_login"})
        response = await alice.post(f"{BASE}/my/connectors/myremote/restart")
        assert response.status_code == 200 and response.json()["state"] == "ready", response.text


async def test_an_answer_larger_than_the_transport_reads_is_said_and_the_session_is_kept(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "web", "transport": "http", "url": demo.url, "access": [alice_id]})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        tools = {t.name: t for t in running.runtime.member_tools(alice_id)}
        session = running.runtime.connections["web"]._task

        # Over the SDK's default 1 MiB event: read, and cut for the model.
        answer = await tools["web__big"].run({"mb": 2}, ToolContext(member_id=alice_id))
        assert answer.endswith("[truncated]") and len(answer) <= MAX_RESULT + 20

        with pytest.raises(ToolError) as refused:
            await tools["web__big"].run({"mb": 9}, ToolContext(member_id=alice_id))
        said = str(refused.value)
        assert "more than 8 MB" in said and "not read" in said and "may or may not" not in said and "broke" not in said, said
        assert running.runtime.connections["web"]._task is session  # no reconnect: the session was fine
        assert (await setup.server("web"))["state"] == "ready"
        assert await tools["web__echo"].run({"text": "still"}, ToolContext(member_id=alice_id)) == "echo: still"
        assert running.runtime.connections["web"]._task is session


async def test_a_template_moved_at_the_same_version_stops_its_activations_when_saved(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo, HttpDemo() as elsewhere:
        await put_template(setup, demo.url)
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": SECRET}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        assert [t for t in running.runtime.member_tools(alice_id) if t.name.startswith("web__")]

        await put_template(setup, elsewhere.url)  # same version: only the address moved
        # Stopped before the admin's save is answered: no Restart, no new login.
        assert not [t for t in running.runtime.member_tools(alice_id) if t.name.startswith("web__")]
        connection = running.runtime.members.connections[alice_id]["web"]
        assert connection.state == "failed" and connection.spec.url != demo.url
        status = (await alice.get(f"{BASE}/my/connectors/web")).json()
        assert status["state"] == "failed" and "different address" in (status["error"] or ""), status
        assert status["update"]["moved"] is True


async def test_a_call_whose_access_ended_while_it_ran_says_so(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await grant_remote(setup)
    await allow_private(setup)
    async with HttpDemo() as demo:
        # A global connector whose grant is revoked mid-call: its shared session goes on,
        # and the call that ran finishes with its answer (README, "Revocation is
        # synchronous"); the next one is refused.
        response = await setup.admin.post(f"{BASE}/servers", json={"name": "gstd", "transport": "http", "url": demo.url, "access": [alice_id]})
        assert response.status_code == 201, response.text
        sleep = next(t for t in running.runtime.member_tools(alice_id) if t.name == "gstd__sleep")
        call = asyncio.ensure_future(sleep.run({"seconds": 1.0}, ToolContext(member_id=alice_id)))
        await asyncio.sleep(0.3)
        assert (await setup.admin.delete(f"{BASE}/servers/gstd/access/{alice_id}")).status_code == 200
        assert await call == "slept"
        with pytest.raises(ToolError) as refused:
            await sleep.run({"seconds": 0.1}, ToolContext(member_id=alice_id))
        assert "not available to you" in str(refused.value), refused.value

        # Her own connector while the plugin is taken from her: not "the connection broke".
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "myremote", "url": demo.url}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        sleep = next(t for t in running.runtime.member_tools(alice_id) if t.name == "myremote__sleep")
        call = asyncio.ensure_future(sleep.run({"seconds": 5.0}, ToolContext(member_id=alice_id)))
        await asyncio.sleep(0.3)
        await set_plugin_grant(setup, alice_id, False)
        with pytest.raises(ToolError) as stopped:
            await asyncio.wait_for(call, 10)
        said = str(stopped.value)
        assert "no longer available to you" in said and "may or may not have run" in said and "broke" not in said, said


async def test_a_members_failing_connector_is_logged_by_the_kind_of_its_failure(setup: Setup, caplog):
    alice = await setup.host.member("alice")
    await grant_remote(setup)
    await allow_private(setup)
    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    caplog.set_level(logging.INFO, logger="skald_mcp")
    url = f"http://127.0.0.1:{port}/mcp?key=KEY3e8a"
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "bank-3e8a", "url": url}})
    assert response.status_code == 201 and response.json()["state"] == "failed", response.text
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("skald_mcp") and "of a member" in r.getMessage()]
    assert any("connection_failed (" in line and "ConnectError" in line for line in lines), lines
    assert not [line for line in lines if "3e8a" in line or str(port) in line], lines


def test_a_failures_kind_names_its_classes_and_the_plugins_code_never_its_words():
    from skald_mcp.runtime import failure_kind
    from skald_mcp.spec import SpecError

    assert failure_kind(SpecError(code="destination_changed", template="'web'")) == "SpecError destination_changed"
    try:
        raise ExceptionGroup("session", [RuntimeError("Bearer sk-member-secret refused")])
    except ExceptionGroup as group:
        assert failure_kind(group) == "RuntimeError"

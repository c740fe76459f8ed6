"""What a connector may pile up or leave dangling: a member's connector's notifications
are coalesced and bounded in their file; a template that moved at the same version
offers its update; a template cannot send two values to one header; access lists name
members only; a global connector that never connected stays failed after a restart."""

from __future__ import annotations

import asyncio

import pytest

from pathlib import Path

from mcp_support import BASE, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send
from skald_host.testing import Reply, ToolCall
from skald_hookspecs import ToolContext
from skald_mcp import members as member_module, running
from skald_mcp.spec import SpecError, parse_template


async def put_template(setup: Setup, url: str, **extra) -> None:
    body = {
        "title": "Web demo", "transport": "http", "url": url,
        "fields": [{"name": "api_key", "label": "API key", "secret": True, "header": "Authorization", "format": "Bearer {value}"}],
        **extra,
    }
    response = await setup.admin.put(f"{BASE}/catalog/web", json=body)
    assert response.status_code == 200, response.text


async def test_a_burst_of_notifications_is_written_in_few_events_and_only_the_newest_are_kept(setup: Setup, monkeypatch):
    monkeypatch.setattr(member_module, "NOTIFICATION_EVENTS_KEPT", 2, raising=False)
    monkeypatch.setattr(member_module, "PRUNE_EVERY", 1, raising=False)
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    api = setup.host.core.host_api("mcp")
    for n in range(3):  # as an earlier version wrote them: one event each, never pruned
        await api.append_member_event(alice_id, "mcp.notification", {"connector": "web", "method": "notifications/message", "n": n})
    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text

        # The first write is held until the whole burst has arrived: what came meanwhile
        # goes in the next writes together, not one write per notification.
        host = running.runtime.members.host
        append, gate, appended = host.append_member_event, asyncio.Event(), []

        async def held(member_id, kind, data):
            appended.append(len(data.get("notifications") or [data]))
            await gate.wait()
            return await append(member_id, kind, data)

        monkeypatch.setattr(host, "append_member_event", held)
        tool = next(t for t in running.runtime.member_tools(alice_id) if t.name == "web__shout")
        call = asyncio.ensure_future(tool.run({"text": "hey", "times": 200}, ToolContext(member_id=alice_id)))
        unwritten = lambda: sum(len(v) for v in getattr(running.runtime.members, "_unwritten", {}).values())  # noqa: E731
        await eventually(lambda: appended and unwritten() >= 199, what="the burst to arrive")
        gate.set()
        assert await call == "shouted"
        assert sum(appended) == 200 and len(appended) <= 5, appended

        # Written before the call's answer was handed on, and bounded: the newest only.
        events = await api.member_events(alice_id, limit=1000)
        assert len(events) <= 2, [e["kind"] for e in events]
        assert {e["kind"] for e in events} == {"mcp.notification:web"}  # the legacy ones deleted too
        last = events[-1]["data"]
        assert last["connector"] == "web" and last["notifications"][-1]["params"]["data"] == "shouted hey 199"


async def test_a_template_moved_at_the_same_version_offers_its_update(setup: Setup):
    alice = await setup.host.member("alice")
    async with HttpDemo() as demo, HttpDemo() as elsewhere:
        await put_template(setup, demo.url)
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k-1"}})).status_code == 201
        await put_template(setup, elsewhere.url)  # the same version 1

        response = await alice.post(f"{BASE}/my/connectors/web/restart")
        assert "different address" in response.json()["error"], response.text
        offer = (await alice.get(f"{BASE}/my/connectors/web")).json()["update"]
        assert offer is not None and offer["moved"] is True and [f["name"] for f in offer["fields"]] == ["api_key"], offer
        catalog = (await alice.get(f"{BASE}/mine")).json()["catalog"]
        assert catalog[0]["update_available"] is True

        response = await alice.post(f"{BASE}/my/connectors/web/update", json={"values": {"api_key": "k-2"}})
        assert response.status_code == 200, response.text
        assert response.json()["state"] == "ready" and response.json()["update"] is None
        assert (await alice.post(f"{BASE}/my/connectors/web/update")).status_code == 409  # nothing left to take


@pytest.mark.parametrize(
    ("fields", "oauth", "header"),
    [
        ([{"name": "k", "header": "X-K"}, {"name": "j", "header": "x-k"}], None, "x-k"),
        ([{"name": "k", "header": "authorization", "format": "Token {value}"}], {"provider": "idp"}, "authorization"),
    ],
)
def test_a_template_cannot_send_two_values_to_one_header(fields, oauth, header):
    body = {"name": "web", "transport": "http", "url": "https://example.org/mcp", "fields": fields}
    if oauth:
        body["oauth"] = oauth
    with pytest.raises(SpecError, match=f"header {header}"):
        parse_template(body)
    parse_template({**body, "fields": [{**f, "header": f"X-{f['name']}"} for f in fields]})  # apart, they are fine


async def test_an_access_list_naming_no_member_is_refused_and_nothing_is_stored(setup: Setup):
    alice_id = (await setup.host.member("alice")).member["id"]
    body = {"name": "demo", "transport": "stdio", "command": "/nonexistent/bin", "access": [alice_id, "nobody"]}
    response = await setup.admin.post(f"{BASE}/servers", json=body)
    assert response.status_code == 400 and "nobody" in response.json()["error"], response.text
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"] == []

    response = await setup.admin.post(f"{BASE}/servers", json={**body, "access": [alice_id]})
    assert response.status_code == 201, response.text
    for method, path, json in [
        ("put", "/servers/demo/access", {"members": [alice_id, "nobody"]}),
        ("put", "/servers/demo/access/nobody", None),
    ]:
        response = await getattr(setup.admin, method)(f"{BASE}{path}", json=json)
        assert response.status_code == 400 and "nobody" in response.json()["error"], (path, response.text)
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"][0]["access"] == [alice_id]

    template = {"transport": "http", "url": "https://example.org/mcp"}
    response = await setup.admin.put(f"{BASE}/catalog/web", json={**template, "access": ["nobody"]})
    assert response.status_code == 400 and "nobody" in response.json()["error"], response.text
    assert (await setup.admin.get(f"{BASE}/catalog")).json()["templates"] == []
    assert (await setup.admin.put(f"{BASE}/catalog/web", json={**template, "access": [alice_id]})).status_code == 200
    for path, json in [("/catalog/web/access", {"members": ["nobody"]}), ("/catalog/web/access/nobody", None)]:
        response = await setup.admin.put(f"{BASE}{path}", json=json)
        assert response.status_code == 400 and "nobody" in response.json()["error"], (path, response.text)
    assert (await setup.admin.get(f"{BASE}/catalog")).json()["templates"][0]["access"] == [alice_id]
    assert (await setup.admin.delete(f"{BASE}/servers/demo/access/{alice_id}")).status_code == 200  # taking out is never asked


async def test_a_global_connector_that_never_connected_stays_failed_after_the_plugin_restarts(setup: Setup):
    response = await setup.admin.post(f"{BASE}/servers", json={"name": "broken", "transport": "stdio", "command": "/nonexistent/bin", "access": []})
    assert response.status_code == 201 and response.json()["state"] == "failed", response.text
    for enabled in (False, True):
        response = await setup.admin.put("/api/admin/plugins/mcp/enabled", json={"enabled": enabled})
        assert response.status_code == 200, response.text

    async def settled() -> dict | None:
        response = await setup.admin.get(f"{BASE}/servers")
        server = response.json()["servers"][0] if response.status_code == 200 else None
        return server if server and server["state"] != "starting" else None

    server = await eventually(settled, what="the connector's first start to end")
    assert server["state"] == "failed" and server["cause"] == "command_not_found", server


async def test_a_call_cut_by_the_connectors_removal_says_it_was_removed(setup: Setup, tmp_path: Path):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    marker = tmp_path / "held"
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("demo__hold", {"marker": str(marker), "seconds": 300})]), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Hold on.")
    await eventually(lambda: marker.exists() and marker.read_text().strip(), what="the server to run the call")
    assert (await setup.admin.delete(f"{BASE}/servers/demo")).status_code == 200
    (cut,) = calls(await finished(alice, cid))
    assert cut["status"] == "error" and "was removed during the call" in cut["result"], cut

"""The route sweep of the mobile connector (checks C1 and C2 for its routes): every route
has an access level here, so a new one cannot ship unlisted; nobody gets in without a
credential; and with another member's ids every id-bearing route refuses and changes
nothing, while that member is unlocked and again while they are locked."""

from __future__ import annotations

import asyncio

import pytest

from skald_hookspecs import PUBLIC_ATTRIBUTE
from skald_host.testing import Reply, ToolCall
from mobile_support import BASE, MODEL, paired_device, project_with_a_file

#: public: no credential; member: a session or one of this plugin's device tokens;
#: browser: a session only (a phone cannot pair more phones); device: a device token only.
EXPECTED = {
    ("/page.js", "GET"): "member",
    ("/page/strings", "GET"): "member",
    ("/pairing", "POST"): "browser",
    ("/devices", "GET"): "member",
    ("/devices/<device_id>", "DELETE"): "member",
    ("/app/", "GET"): "public",
    ("/app/<name>", "GET"): "public",
    ("/app/strings", "GET"): "public",
    ("/pair", "POST"): "public",
    ("/me", "GET"): "member",
    ("/conversations", "GET"): "member",
    ("/conversations", "POST"): "member",
    ("/conversations/<conversation_id>", "GET"): "member",
    ("/conversations/<conversation_id>/messages", "POST"): "member",
    ("/conversations/<conversation_id>/stop", "POST"): "member",
    ("/approvals/<approval_id>", "POST"): "member",
    ("/uploads", "POST"): "member",
    ("/speech", "POST"): "member",
    ("/notifications", "GET"): "member",
    ("/notifications/ack", "POST"): "member",
    ("/push", "PUT"): "device",
    ("/push", "DELETE"): "member",
    ("/stream", "GET"): "member",
    ("/projects", "GET"): "member",
    ("/projects/<project_id>/files", "GET"): "member",
    ("/projects/<project_id>/file", "GET"): "member",
}

#: Every route with an id in its path, and what Bob's phone sends with Alice's id.
IDOR_CASES = {
    ("/devices/<device_id>", "DELETE"): None,
    ("/conversations/<conversation_id>", "GET"): None,
    ("/conversations/<conversation_id>/messages", "POST"): {"text": "hijack"},
    ("/conversations/<conversation_id>/stop", "POST"): None,
    ("/approvals/<approval_id>", "POST"): {"approve": True},
    ("/projects/<project_id>/files", "GET"): None,
    ("/projects/<project_id>/file", "GET"): {"params": {"path": "plans/beds.md"}},
}


def plugin_routes(app) -> set[tuple[str, str]]:
    found = set()
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(f"{BASE}/"):
            for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
                found.add((rule.rule[len(BASE):], method))
    return found


async def test_every_mobile_route_has_an_expected_access_level(setup):
    app = setup.host.app
    assert plugin_routes(app) == set(EXPECTED)
    # The public ones are exactly the views marked public (the app shell and the pairing exchange).
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(f"{BASE}/"):
            marked = bool(getattr(app.view_functions[rule.endpoint], PUBLIC_ATTRIBUTE, False))
            levels = {EXPECTED[(rule.rule[len(BASE):], m)] for m in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
            assert marked == (levels == {"public"}), rule.rule


async def test_no_credential_gets_401_on_every_route_but_the_public_ones(setup):
    anonymous = setup.host.client()
    for (rule, method), level in EXPECTED.items():
        path = BASE + rule.replace("<conversation_id>", "c").replace("<approval_id>", "a").replace("<device_id>", "d").replace("<project_id>", "p").replace("<name>", "app.js")
        response = await anonymous.request(method, path)
        if level == "public":
            assert response.status_code != 401, (method, rule)
        else:
            assert response.status_code == 401, (method, rule, response.status_code)
    # A web session token is no device token and the other way round: each is checked
    # by the same path, and a made-up device token is nobody.
    fake = setup.host.client()
    fake.bearer = "skd_" + "A" * 43
    assert (await fake.get(f"{BASE}/me")).status_code == 401


@pytest.mark.parametrize("alice_state", ["unlocked", "locked"])
async def test_another_members_ids_are_refused_on_every_id_route_and_change_nothing(setup, alice_state):
    assert {k for k in EXPECTED if "<" in k[0] and k[0] != "/app/<name>"} == set(IDOR_CASES), "an id-bearing route lacks an IDOR case"
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    alice_phone = await paired_device(setup, alice)
    bob_phone = await paired_device(setup, bob)
    setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("write_note", {"text": "secret"}),))])
    conversation = (await alice_phone.post(f"{BASE}/conversations")).json()["id"]
    await alice_phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "note"})
    for _ in range(200):
        before = (await alice_phone.get(f"{BASE}/conversations/{conversation}")).json()
        if before["approvals"]:
            break
        await asyncio.sleep(0.05)
    project_id = await project_with_a_file(alice)
    assert (await alice_phone.get(f"{BASE}/projects/{project_id}/file", params={"path": "plans/beds.md"})).status_code == 200
    ids = {
        "<conversation_id>": conversation, "<approval_id>": before["approvals"][0]["approval_id"],
        "<device_id>": alice_phone.device_id, "<project_id>": project_id,
    }
    if alice_state == "locked":
        assert (await alice.post("/api/auth/logout")).status_code == 200
    for (rule, method), body in IDOR_CASES.items():
        path = BASE + rule
        for placeholder, value in ids.items():
            path = path.replace(placeholder, value)
        for caller in (bob_phone, bob):
            if body is None:
                response = await caller.request(method, path)
            elif "params" in body:
                response = await caller.request(method, path, params=body["params"])
            else:
                response = await caller.request(method, path, json=body)
            assert response.status_code in (403, 404), (alice_state, method, rule, response.status_code, response.text)
    # The upload route names its conversation in the query: Alice's is refused as well.
    for caller in (bob_phone, bob):
        response = await caller.post(f"{BASE}/uploads", params={"name": "x.txt", "conversation_id": conversation},
                                     content=b"hi", headers={"Content-Type": "application/octet-stream"})
        assert response.status_code in (403, 404), (alice_state, response.status_code, response.text)
    assert not (setup.host.core.files.home(bob.member["id"]) / "uploads" / conversation).exists()
    assert setup.probe.notes == []
    assert [d["id"] for d in (await alice_phone.get(f"{BASE}/devices")).json()["devices"]] == [alice_phone.device_id]
    if alice_state == "locked":
        assert (await alice.login("alice", "member password for tests")).status_code == 200
    after = (await alice_phone.get(f"{BASE}/conversations/{conversation}")).json()
    assert after["messages"] == before["messages"] and after["approvals"] == before["approvals"]
    assert [c["id"] for c in (await bob_phone.get(f"{BASE}/conversations")).json()["conversations"]] == []

"""Web Push against a local push-service stand-in that decrypts with the subscription's
keys, and the revocation matrix of a device token: unlink, deactivation, password
change, admin reset → refused on the next request (and an open stream ends); the
plugin disabled → every mobile route 404 and no push."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import pytest

from skald_host.testing import Reply, ToolCall
from mobile_support import BASE, MODEL, PLUGIN, EventStream, paired_device
from push_standin import PushStandIn, verify_vapid


async def _ring(setup, browser, text: str) -> None:
    setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("ring", {"text": text}),)), Reply("Done.")])
    await browser.chat("ring me")


async def test_web_push_carries_nothing_but_that_something_is_new(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    await setup.host.allow_tool("ring")
    assert (await alice.put("/api/me/home-source", json={"home_source": PLUGIN})).status_code == 200
    async with PushStandIn() as service:
        subscription = service.subscription("alice-phone")
        saved = await phone.put(f"{BASE}/push", json=subscription.as_json())
        assert saved.status_code == 200, saved.text
        assert (await phone.get(f"{BASE}/me")).json()["push"] is True
        # The subscription names the phone: it is kept in the member's own file, not the registry.
        db = sqlite3.connect(setup.host.settings.data_dir / "database" / "system.db")
        try:
            assert "alice-phone" not in "\n".join(db.iterdump())
        finally:
            db.close()
        await _ring(setup, alice, "CANARY-secret-laundry-text")
        (message,) = await service.wait("alice-phone")
        assert message.headers["content-encoding"] == "aes128gcm" and int(message.headers["ttl"]) > 0
        assert b"CANARY" not in message.body
        assert json.loads(subscription.decrypt(message)) == {"t": "new"}  # no content beyond "something is new"
        public_key = (await phone.get(f"{BASE}/me")).json()["vapid_public_key"]
        claims = verify_vapid(message, public_key)
        assert claims["aud"] == service.url and claims["sub"].startswith("mailto:")
        # The VAPID keys were made once: a restart of the plugin keeps them.
        await setup.enable(False)
        await setup.enable(True)
        assert (await phone.get(f"{BASE}/me")).json()["vapid_public_key"] == public_key
        # The push service says the subscription is gone: it is forgotten, the outbox still waits.
        service.gone.add("alice-phone")
        await _ring(setup, alice, "third")
        await service.wait("alice-phone", 2)
        for _ in range(50):
            if (await phone.get(f"{BASE}/me")).json()["push"] is False:
                break
            await asyncio.sleep(0.05)
        assert (await phone.get(f"{BASE}/me")).json()["push"] is False
        assert "third" in [n.get("text") for n in (await phone.get(f"{BASE}/notifications")).json()["notifications"]]
        service.gone.clear()
        assert (await phone.put(f"{BASE}/push", json=subscription.as_json())).status_code == 200
        # Unsubscribed: no more pushes.
        assert (await phone.delete(f"{BASE}/push")).status_code == 200
        await _ring(setup, alice, "second")
        await asyncio.sleep(0.5)
        assert len(service.to("alice-phone")) == 2


async def test_push_endpoints_must_be_https_unless_the_admin_allows_a_local_service(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    await setup.configure(allow_http_push=False)
    await setup.enable(False)
    await setup.enable(True)
    keys = {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", "auth": "tBHItJI5svbpez7KI4CCXg"}
    # The address the name resolves to is what counts (check F2), not the URL's text:
    # 127.1, 2130706433 and 0x7f.1 are names the resolver answers with 127.0.0.1.
    for endpoint in ("http://push.example/x", "https://127.0.0.1/x", "https://10.1.2.3/x", "https://localhost/x", "file:///etc/passwd",
                     "https://127.1/x", "https://2130706433/x", "https://0x7f.1/x", "https://[::ffff:127.0.0.1]/x",
                     "https://[64:ff9b::a00:1]/x", "https://169.254.169.254/x", "https://nothing.invalid/x", "https:///x"):
        refused = await phone.put(f"{BASE}/push", json={"endpoint": endpoint, "keys": keys})
        assert refused.status_code == 400, endpoint
    assert (await phone.put(f"{BASE}/push", json={"endpoint": "https://8.8.8.8/x", "keys": keys})).status_code == 200
    # A browser session has no device to push to.
    assert (await alice.put(f"{BASE}/push", json={"endpoint": "https://8.8.8.8/x", "keys": keys})).status_code == 403


async def test_a_push_never_connects_to_a_private_address_even_to_an_endpoint_accepted_earlier(setup, caplog):
    """The check is made again on every connection: an endpoint whose name points at
    this machine by now (DNS rebinding; here: accepted while the admin allowed a local
    service, then that setting off) gets no connection, and the failure is logged."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    await setup.host.allow_tool("ring")
    assert (await alice.put("/api/me/home-source", json={"home_source": PLUGIN})).status_code == 200
    async with PushStandIn() as service:
        assert (await phone.put(f"{BASE}/push", json=service.subscription("alice-phone").as_json())).status_code == 200
        await _ring(setup, alice, "first")
        await service.wait("alice-phone", 1)
        await setup.configure(allow_http_push=False)
        await setup.enable(False)
        await setup.enable(True)
        await _ring(setup, alice, "second")
        for _ in range(100):
            if "mobile push to a device of member" in caplog.text:
                break
            await asyncio.sleep(0.05)
        assert len(service.to("alice-phone")) == 1  # the second push reached nothing
        assert "failed (ConnectionError)" in caplog.text


@pytest.mark.parametrize("event", ["unlink", "unlink from the phone", "deactivate", "password change", "admin reset", "end sessions"])
async def test_every_revocation_refuses_the_device_on_its_next_request_and_ends_its_stream(setup, event):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    other = await paired_device(setup, alice, "Tablet")
    member_id = alice.member["id"]
    assert (await phone.get(f"{BASE}/conversations")).status_code == 200
    async with EventStream(phone) as stream:
        if event == "unlink":
            response = await alice.delete(f"{BASE}/devices/{phone.device_id}")
        elif event == "unlink from the phone":
            response = await phone.delete(f"{BASE}/devices/{phone.device_id}")
        elif event == "deactivate":
            response = await setup.admin.patch(f"/api/admin/members/{member_id}", json={"active": False})
        elif event == "password change":
            response = await alice.post("/api/auth/password", json={"current_password": "member password for tests", "new_password": "another good password 9"})
        elif event == "admin reset":
            response = await setup.admin.post(f"/api/admin/members/{member_id}/reset-password", json={"new_password": "reset by the admin 12", "confirm_data_loss": True})
        else:
            response = await setup.admin.post(f"/api/admin/members/{member_id}/end-sessions")
        assert response.status_code == 200, response.text
        refused = await phone.get(f"{BASE}/conversations")
        assert refused.status_code == 401, refused.text
        assert (await phone.get(f"{BASE}/me")).status_code == 401
        await stream.wait_for("closed", timeout=1.5)  # pushed, not at the next heartbeat
    # Unlinking one device leaves the other; the member-wide events end every device.
    expected = 200 if event.startswith("unlink") else 401
    assert (await other.get(f"{BASE}/me")).status_code == expected


async def test_disabled_plugin_answers_404_on_every_route_and_sends_no_push(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    await setup.host.allow_tool("ring")
    assert (await alice.put("/api/me/home-source", json={"home_source": PLUGIN})).status_code == 200
    async with PushStandIn() as service:
        subscription = service.subscription("p")
        assert (await phone.put(f"{BASE}/push", json=subscription.as_json())).status_code == 200
        await setup.enable(False)
        routes = [
            rule for rule in setup.host.app.url_map.iter_rules() if rule.rule.startswith(f"{BASE}/")
        ]
        assert len(routes) >= 15
        for rule in routes:
            path = rule.rule.replace("<conversation_id>", "x").replace("<approval_id>", "x").replace("<device_id>", "x").replace("<name>", "app.js")
            for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
                for client in (phone, alice):
                    response = await client.request(method, path)
                    assert response.status_code == 404, (method, path, response.status_code)
        await setup.admin.put("/api/admin/plugins/" + PLUGIN + "/enabled", json={"enabled": False})
        setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("ring", {"text": "x"}),)), Reply("Done.")])
        await alice.chat("ring me")
        await asyncio.sleep(0.5)
        assert service.received == []


async def _state_of(setup, device_id: str) -> tuple[Any, bool]:
    """What the plugin keeps of a device in the registry: its cursor, and whether its
    index of paired devices still names it."""
    host = setup.service.host
    index = await host.kv_get("devices") or {}
    return await host.kv_get(f"cursor:{device_id}"), any(device_id in devices for devices in index.values())


async def _eventually_forgotten(setup, device_id: str) -> None:
    for _ in range(200):
        if await _state_of(setup, device_id) == (None, False):
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"the revoked device's state stayed: {await _state_of(setup, device_id)}")
    # Gone, not a row holding null (kv_set(key, None) removes the key since spec 1.10).
    rows = await setup.host.core.registry.run(
        lambda c: c.execute("SELECT count(*) FROM plugin_kv WHERE key = ?", (f"cursor:{device_id}",)).fetchone()[0]
    )
    assert rows == 0, "the revoked device's cursor is still a row of system.db"


@pytest.mark.parametrize("event", ["password change", "deactivate", "admin reset", "end sessions", "delete"])
async def test_a_device_the_host_revokes_loses_its_stored_state(setup, event):
    """Not only an unlink: however the host revoked the device's token, its cursor
    (and push subscription) go with it, and nothing of it waits in the registry."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    member_id = alice.member["id"]
    subscribed = await phone.put(f"{BASE}/push", json={"endpoint": "http://127.0.0.1:9/push", "keys": {"p256dh": "x", "auth": "y"}})
    assert subscribed.status_code == 200, subscribed.text
    assert (await _state_of(setup, phone.device_id))[0] is not None  # paired: its cursor is kept
    if event == "password change":
        response = await alice.post("/api/auth/password", json={"current_password": "member password for tests", "new_password": "another good password 9"})
    elif event == "deactivate":
        response = await setup.admin.patch(f"/api/admin/members/{member_id}", json={"active": False})
    elif event == "admin reset":
        response = await setup.admin.post(f"/api/admin/members/{member_id}/reset-password", json={"new_password": "reset by the admin 12", "confirm_data_loss": True})
    elif event == "end sessions":
        response = await setup.admin.post(f"/api/admin/members/{member_id}/end-sessions")
    else:
        response = await setup.admin.delete(f"/api/admin/members/{member_id}")
    assert response.status_code == 200, response.text
    await _eventually_forgotten(setup, phone.device_id)
    if event == "password change":  # still signed in on the web: the subscription in her file went too
        assert await setup.service.subscription(member_id, phone.device_id) is None


async def test_a_device_revoked_while_the_plugin_was_stopped_loses_its_state_at_start(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    tablet = await paired_device(setup, alice, "Tablet")
    await setup.enable(False)
    response = await alice.post("/api/auth/password", json={"current_password": "member password for tests", "new_password": "another good password 9"})
    assert response.status_code == 200, response.text
    await setup.enable(True)
    await _eventually_forgotten(setup, phone.device_id)
    await _eventually_forgotten(setup, tablet.device_id)

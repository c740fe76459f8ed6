"""Pairing (check A6): a short single-use code with a 10-minute expiry and a QR code,
traded once for a device token the host keeps hashed; a lockout after five wrong codes;
the device list with name, platform and last seen; binding-managed access."""

from __future__ import annotations

import hashlib
import re
import sqlite3

from mobile_support import BASE, PLUGIN, PROBE, pairing_code, paired_device


async def test_pairing_code_is_short_single_use_with_a_qr_code_and_a_hashed_token(setup):
    alice = await setup.host.member("alice", display_name="Alice")
    response = await alice.post(f"{BASE}/pairing")
    assert response.status_code == 201, response.text
    pairing = response.json()
    assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}", pairing["code"])  # 8 of 32 symbols: 40 bits
    assert pairing["expires_in"] == 600
    assert pairing["qr_svg"].startswith("data:image/svg+xml") and pairing["pair_url"].endswith(f"#pair={pairing['code']}")
    phone = setup.host.client()
    # Typed loosely on a phone: lower case, without the dash.
    paired = await phone.post(f"{BASE}/pair", json={"code": pairing["code"].lower().replace("-", ""), "name": "Pixel", "platform": "android"})
    assert paired.status_code == 201, paired.text
    token = paired.json()["token"]
    again = await setup.host.client().post(f"{BASE}/pair", json={"code": pairing["code"], "name": "Thief"})
    assert again.status_code == 400 and again.json()["code"] == "code"  # single use
    phone.bearer = token
    me = await phone.get(f"{BASE}/me")
    assert me.status_code == 200 and me.json()["member"]["display_name"] == "Alice" and me.json()["locked"] is False
    assert me.json()["device_id"] == paired.json()["device_id"] and me.json()["vapid_public_key"]
    # The device list, as the page shows it.
    devices = (await alice.get(f"{BASE}/devices")).json()["devices"]
    assert [(d["name"], d["platform"]) for d in devices] == [("Pixel", "android")] and devices[0]["last_seen_at"]
    # Only the hash is in the registry; the token opens nothing of the host's own API.
    db = sqlite3.connect(setup.host.settings.data_dir / "database" / "system.db")
    try:
        dump = "\n".join(db.iterdump())
    finally:
        db.close()
    assert token not in dump and hashlib.sha256(token.encode()).hexdigest() in dump
    assert (await phone.get("/api/me")).status_code == 401
    # A phone cannot mint codes for more phones.
    refused = await phone.post(f"{BASE}/pairing")
    assert refused.status_code == 403


async def test_wrong_and_expired_codes_are_refused_and_five_failures_lock_the_address_out(setup):
    alice = await setup.host.member("alice")
    phone = setup.host.client()
    for attempt in range(5):
        wrong = await phone.post(f"{BASE}/pair", json={"code": "0000-0000"})
        assert wrong.status_code == 400, (attempt, wrong.text)
    code = await pairing_code(alice)
    locked_out = await phone.post(f"{BASE}/pair", json={"code": code})
    assert locked_out.status_code == 429 and locked_out.json()["code"] == "too_many"
    # Expiry: the same service with its clock ten minutes on.
    codes = setup.service.codes
    codes._failures.clear()
    clock = codes._clock
    code = await pairing_code(alice)
    codes._clock = lambda: clock() + 601
    try:
        expired = await phone.post(f"{BASE}/pair", json={"code": code})
    finally:
        codes._clock = clock
    assert expired.status_code == 400 and expired.json()["code"] == "expired"
    # German words for a German reader of the app.
    german = await phone.post(f"{BASE}/pair?locale=de", json={"code": "1111-1111"})
    assert "Code stimmt nicht" in german.json()["error"]


async def test_the_plugin_manages_its_own_access_and_is_never_granted_by_default(setup):
    status = setup.host.core.plugins.status(PLUGIN)
    assert status.info.manages_own_access is True and status.info.grant_by_default is False
    bob = await setup.host.member("bob")
    grants = await setup.admin.get(f"/api/admin/members/{bob.member['id']}/plugins")
    assert grants.status_code == 200 and PROBE in str(grants.json())
    assert PLUGIN not in str(grants.json())  # absent from the grant list
    refused = await setup.admin.put(f"/api/admin/members/{bob.member['id']}/plugins", json={"plugins": [PLUGIN]})
    assert refused.status_code >= 400  # and its writer refuses it
    # Any active member may pair: the pairing is the binding.
    device = await paired_device(setup, bob)
    assert (await device.get(f"{BASE}/conversations")).status_code == 200

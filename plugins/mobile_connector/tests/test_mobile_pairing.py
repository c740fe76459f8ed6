"""Pairing (check A6): a short single-use code with a 10-minute expiry and a QR code,
traded once for a device token the host keeps hashed; five wrong codes burn the code they
aim at, a limit a minute per client address and a far higher one for all (one guesser
locks out only their own address); the device list with name, platform and last seen;
binding-managed access."""

from __future__ import annotations

import asyncio
import hashlib
import re
import sqlite3

from mobile_support import BASE, PLUGIN, PROBE, pairing_code, paired_device


async def test_pairing_code_is_short_single_use_with_a_qr_code_and_a_hashed_token(setup):
    alice = await setup.host.member("alice", display_name="Alice")
    response = await alice.post(f"{BASE}/pairing")
    assert response.status_code == 201, response.text
    pairing = response.json()
    # 4 symbols name the pairing session, 8 of 32 symbols are its secret: 40 bits.
    assert re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}", pairing["code"])
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


async def test_five_wrong_codes_burn_that_code_only_and_a_flood_is_slowed_for_a_minute_not_an_hour(setup):
    from skald_mobile_connector.service import ADDRESS_FAILURES

    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    codes = setup.service.codes
    # Every test client comes from 127.0.0.1: a reverse proxy not listed in
    # server.trusted_proxies, one address for all.
    guesser, alices_phone, bobs_phone = setup.host.client(), setup.host.client(), setup.host.client()
    alices, bobs = await pairing_code(alice), await pairing_code(bob)
    session = alices.split("-")[0]
    for attempt in range(5):  # aimed at Alice's pairing session, with wrong secrets
        wrong = await guesser.post(f"{BASE}/pair", json={"code": f"{session}-0000-000{attempt}"})
        assert wrong.status_code == 400 and wrong.json()["code"] == "code", (attempt, wrong.text)
    burnt = await alices_phone.post(f"{BASE}/pair", json={"code": alices})
    assert burnt.status_code == 400 and burnt.json()["code"] == "code"  # she shows a new code
    # Bob, from the same address, is not locked out: his code is his.
    assert (await bobs_phone.post(f"{BASE}/pair", json={"code": bobs})).status_code == 201
    assert (await alices_phone.post(f"{BASE}/pair", json={"code": await pairing_code(alice)})).status_code == 201
    # Guessing from that one address: past ADDRESS_FAILURES wrong codes a minute, whoever
    # comes from it waits a minute (test_one_guessing_address_locks_out_only_itself: others do not).
    for _ in range(ADDRESS_FAILURES - len(codes._failures)):
        assert (await guesser.post(f"{BASE}/pair", json={"code": "0000-0000-0000"})).status_code == 400
    carols_code = await pairing_code(await setup.host.member("carol"))
    carols_phone = setup.host.client()
    slowed = await carols_phone.post(f"{BASE}/pair", json={"code": carols_code})
    assert slowed.status_code == 429 and slowed.json()["code"] == "too_many" and "minute" in slowed.json()["error"]
    assert 1 <= int(slowed.headers["Retry-After"]) <= 60  # when to try again, as every 429 of the server says
    clock = codes._clock
    codes._clock = lambda: clock() + 61
    try:
        assert (await carols_phone.post(f"{BASE}/pair", json={"code": carols_code})).status_code == 201
    finally:
        codes._clock = clock
    # Expiry: the same service with its clock ten minutes on.
    codes._failures.clear()
    codes._by_client.clear()
    code = await pairing_code(alice)
    codes._clock = lambda: clock() + 601
    try:
        expired = await guesser.post(f"{BASE}/pair", json={"code": code})
    finally:
        codes._clock = clock
    assert expired.status_code == 400 and expired.json()["code"] == "expired"
    # German words for a German reader of the app.
    german = await guesser.post(f"{BASE}/pair?locale=de", json={"code": "1111-1111-1111"})
    assert "Code stimmt nicht" in german.json()["error"]


async def test_one_guessing_address_locks_out_only_itself(skald, monkeypatch):
    """A stranger sending wrong codes gets 429 after ``ADDRESS_FAILURES`` a minute, and
    only they do: a member's right code from another address pairs. Everyone waits only
    past ``GLOBAL_FAILURES`` wrong codes a minute from all addresses together (made small
    here), and then for the rest of that minute only."""
    from mobile_support import mobile_host
    from skald_mobile_connector import service
    from skald_mobile_connector.service import ADDRESS_FAILURES

    def at(address):
        return {"X-Forwarded-For": address}

    settings = skald.settings(server={"trusted_proxies": ["127.0.0.1"]})  # the test clients' proxy
    async with mobile_host(skald, settings=settings) as setup:
        alice = await setup.host.member("alice")
        guesser, phone = setup.host.client(), setup.host.client()
        for attempt in range(ADDRESS_FAILURES):
            wrong = await guesser.post(f"{BASE}/pair", json={"code": "0000-0000-0000"}, headers=at("203.0.113.9"))
            assert wrong.status_code == 400, (attempt, wrong.text)
        refused = await guesser.post(f"{BASE}/pair", json={"code": "0000-0000-0000"}, headers=at("203.0.113.9"))
        assert refused.status_code == 429 and refused.json()["code"] == "too_many"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        # Even with her right code, the guessing address stays refused ...
        code = await pairing_code(alice)
        assert (await guesser.post(f"{BASE}/pair", json={"code": code}, headers=at("203.0.113.9"))).status_code == 429
        # ... and her phone, elsewhere, pairs.
        paired = await phone.post(f"{BASE}/pair", json={"code": code, "name": "Pixel"}, headers=at("198.51.100.20"))
        assert paired.status_code == 201, paired.text
        # An IPv6 guesser counts by its /64: a fresh address of the same line is no fresh budget.
        for attempt in range(ADDRESS_FAILURES):
            wrong = await guesser.post(f"{BASE}/pair", json={"code": "0000-0000-0000"}, headers=at(f"2001:db8:1:2::{attempt + 1:x}"))
            assert wrong.status_code == 400, (attempt, wrong.text)
        assert (await guesser.post(f"{BASE}/pair", json={"code": "0000-0000-0000"}, headers=at("2001:db8:1:2::ffff"))).status_code == 429
        # Many addresses together: past GLOBAL_FAILURES wrong codes in the minute, everyone waits.
        codes = setup.service.codes
        monkeypatch.setattr(service, "GLOBAL_FAILURES", len(codes._failures) + 2)
        for n in range(2):
            assert (await guesser.post(f"{BASE}/pair", json={"code": "0000-0000-0000"}, headers=at(f"192.0.2.{n + 1}"))).status_code == 400
        code = await pairing_code(alice)
        slowed = await phone.post(f"{BASE}/pair", json={"code": code}, headers=at("198.51.100.20"))
        assert slowed.status_code == 429 and slowed.json()["code"] == "too_many"
        clock = codes._clock
        codes._clock = lambda: clock() + 61
        try:
            assert (await phone.post(f"{BASE}/pair", json={"code": code}, headers=at("198.51.100.20"))).status_code == 201
            # The minute over, the guessing address starts afresh too.
            assert (await guesser.post(f"{BASE}/pair", json={"code": "0000-0000-0000"}, headers=at("203.0.113.9"))).status_code == 400
        finally:
            codes._clock = clock


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


async def _registry_state(setup) -> tuple[list, list]:
    """What a request could have changed in system.db for the plugin: its device tokens
    and its key-value rows (the device index, the cursors)."""

    def read(conn):
        tokens = conn.execute("SELECT * FROM device_tokens ORDER BY id").fetchall()
        kv = conn.execute("SELECT * FROM plugin_kv WHERE plugin_id = ? ORDER BY key", (PLUGIN,)).fetchall()
        return [tuple(r) for r in tokens], [tuple(r) for r in kv]

    return await setup.host.core.registry.run(read)


async def test_a_pairing_whose_answer_never_reached_the_phone_is_not_listed_as_a_paired_phone(setup, monkeypatch):
    """The server died (or the connection dropped) after it issued the token and before
    the phone read it (crash probe: 2 of 3 such kills): that token no request carries is
    left out of the device list once the pairing had time to finish, and revoked where
    state changes anyway (a new pairing, an unlink, the plugin's sweep), never by the
    GET that lists the devices (check A4)."""
    from skald_mobile_connector import service

    alice = await setup.host.member("alice")
    used = await paired_device(setup, alice, "Pixel")
    assert (await used.get(f"{BASE}/me")).status_code == 200
    lost = await paired_device(setup, alice, "Lost")  # its answer "never arrived": nothing uses it
    listed = (await alice.get(f"{BASE}/devices")).json()["devices"]
    assert [d["name"] for d in listed] == ["Pixel", "Lost"]  # it may still be on its way
    monkeypatch.setattr(service, "UNFINISHED_PAIRING_MINUTES", -1)  # later: its time to finish is over
    before = await _registry_state(setup)
    listed = (await alice.get(f"{BASE}/devices")).json()["devices"]
    assert [d["name"] for d in listed] == ["Pixel"]  # not a paired phone
    assert await _registry_state(setup) == before  # the GET wrote nothing: the token is hidden, not revoked
    # A new pairing changes state anyway: the unfinished one is revoked then.
    await pairing_code(alice)
    assert (await lost.get(f"{BASE}/me")).status_code == 401  # revoked, not only hidden
    assert (await used.get(f"{BASE}/me")).status_code == 200


async def test_the_plugins_own_sweep_revokes_a_pairing_that_never_finished(setup, monkeypatch):
    """Also for a member who never pairs or unlinks again: the plugin's background pass
    (at its start, then every ``SWEEP_SECONDS``) revokes the unfinished pairing."""
    from skald_mobile_connector import service

    alice = await setup.host.member("alice")
    lost = await paired_device(setup, alice, "Lost")
    monkeypatch.setattr(service, "UNFINISHED_PAIRING_MINUTES", -1)
    monkeypatch.setattr(service, "SWEEP_SECONDS", 0.05)
    await setup.enable(False)
    await setup.enable(True)
    for _ in range(200):
        if not await setup.host.core.host_api(PLUGIN).device_tokens(alice.member["id"]):
            break
        await asyncio.sleep(0.05)
    assert await setup.host.core.host_api(PLUGIN).device_tokens(alice.member["id"]) == []
    assert (await lost.get(f"{BASE}/me")).status_code == 401


async def test_listing_the_devices_changes_nothing(setup):
    """Check A4 for the device list, which the pairing page asks for every few seconds:
    however the devices stand (one used, one whose pairing is under way, one unlinked
    behind the plugin's back), the GET answers and system.db is as it was."""
    alice = await setup.host.member("alice")
    used = await paired_device(setup, alice, "Pixel")
    assert (await used.get(f"{BASE}/me")).status_code == 200
    await paired_device(setup, alice, "Tablet")  # not used yet
    gone = await paired_device(setup, alice, "Old")
    assert await setup.host.core.auth.devices.revoke(PLUGIN, alice.member["id"], gone.device_id)  # the host, not the plugin
    before = await _registry_state(setup)
    for _ in range(3):
        response = await alice.get(f"{BASE}/devices")
        assert response.status_code == 200, response.text
        assert [d["name"] for d in response.json()["devices"]] == ["Pixel", "Tablet"]
    assert await _registry_state(setup) == before

"""Who the login limits count (check A3): the real client behind a trusted reverse proxy,
a browser that signed in before under its own device token rather than its address or
the account, the password change as a login of the account, and the log lines that let
the admin see failures and lockouts.

Every test runs the real server; the test client sits at 127.0.0.1, so "a shared
address" is every client of a test.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging

import pytest

from skald_host.core.identity.throttle import address_key
from skald_host.server import forwarded_client
from skald_host.settings import SettingsError, load_settings
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from skald_host.web.routes.auth import PLAIN_DEVICE_COOKIE, SECURE_DEVICE_COOKIE

WRONG = "wrong password here"
NEW_PASSWORD = "another good password 9"


def device_cookie(response) -> str:
    """The device token a sign-in hands the browser (the test client keeps only the
    session cookie, so tests carry this one themselves). Over loopback it is the
    ``__Host-`` one, like the session cookie."""
    for header in response.headers.get_list("set-cookie"):
        name, _, rest = header.partition("=")
        if name in (SECURE_DEVICE_COOKIE, PLAIN_DEVICE_COOKIE):
            return rest.partition(";")[0]
    raise AssertionError(f"no device cookie in {response.headers.get_list('set-cookie')}")


async def login(client, username: str, password: str, *, device: str | None = None, forwarded_for: str | None = None):
    headers = {}
    if device:
        headers["Cookie"] = f"{SECURE_DEVICE_COOKIE}={device}"
    if forwarded_for:
        headers["X-Forwarded-For"] = forwarded_for
    return await client.post("/api/auth/login", json={"username": username, "password": password}, headers=headers)


# -- a spray from a shared address ---------------------------------------------------------


async def test_a_browser_that_signed_in_before_signs_in_after_a_spray_of_unknown_names_from_its_address(skald):
    """The finding's sequence: 10 wrong logins for one account, then made-up names, all
    from 127.0.0.1, until the address is refused. Alice's browser, which signed in
    there before, still signs in with her password; a browser without her device token
    waits like any other client of the address, and her token does not open the way
    for another account."""
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 10, "login_failures_per_address": 30}))
    await host.admin()
    await host.create_member("alice")
    await host.create_member("bob")
    signed_in = await login(host.client(), "alice", MEMBER_PASSWORD)
    assert signed_in.status_code == 200
    alice_device = device_cookie(signed_in)

    sprayer = host.client()
    for _ in range(10):
        assert (await login(sprayer, "bob", WRONG)).status_code == 401
    for n in range(20):
        assert (await login(sprayer, f"made-up-{n}", WRONG)).status_code == 401
    refused = await login(sprayer, "made-up-next", WRONG)
    assert refused.status_code == 429 and refused.json()["code"] == "login_throttled"

    # A client of the address without a device token is refused (documented in SECURITY.md).
    assert (await login(host.client(), "alice", MEMBER_PASSWORD)).status_code == 429
    # Alice's browser: a wrong password is an ordinary failure, the right one signs in.
    alices_browser = host.client()
    assert (await login(alices_browser, "alice", WRONG, device=alice_device)).status_code == 401
    again = await login(alices_browser, "alice", MEMBER_PASSWORD, device=alice_device)
    assert again.status_code == 200, again.text
    assert device_cookie(again) == alice_device  # the same token: its failures stay counted
    # Her token names her account only; forged or other accounts' tokens count nothing.
    assert (await login(host.client(), "bob", MEMBER_PASSWORD, device=alice_device)).status_code == 429
    nonce = alice_device.partition(".")[0]
    assert (await login(host.client(), "alice", MEMBER_PASSWORD, device=f"{nonce}.forged")).status_code == 429


async def test_a_device_token_keeps_the_per_account_limit(skald):
    """The device token spares the address limit, never the account's pace: guesses from
    a browser that signed in before still stop after as many failures as the account's
    limit (they count against that device's own budget)."""
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 3, "login_failures_per_address": 30}))
    await host.admin()
    await host.create_member("alice")
    device = device_cookie(await login(host.client(), "alice", MEMBER_PASSWORD))
    client = host.client()
    for _ in range(3):
        assert (await login(client, "alice", WRONG, device=device)).status_code == 401
    assert (await login(client, "alice", MEMBER_PASSWORD, device=device)).status_code == 429


async def test_one_browser_keeps_device_tokens_for_each_account_signed_in_there(skald):
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_address": 2}))
    await host.admin()
    await host.create_member("alice")
    await host.create_member("bob")
    device = device_cookie(await login(host.client(), "alice", MEMBER_PASSWORD))
    device = device_cookie(await login(host.client(), "bob", MEMBER_PASSWORD, device=device))
    sprayer = host.client()
    for n in range(2):
        assert (await login(sprayer, f"made-up-{n}", WRONG)).status_code == 401
    assert (await login(sprayer, "made-up-next", WRONG)).status_code == 429
    for name in ("alice", "bob"):
        assert (await login(host.client(), name, MEMBER_PASSWORD, device=device)).status_code == 200, name


# -- the account-wide lock holds clients without a device token only ----------------------


async def test_wrong_passwords_from_anywhere_do_not_lock_the_owner_out_of_the_browser_they_signed_in_from(skald):
    """The probe's sequence: ten wrong passwords for ``admin``, no sign-in needed, then
    the right one with the admin's valid device cookie. It got 429 for the window, and
    repeating the ten every 15 minutes kept the admin out for good. Clients without the
    token stay locked, a sign-in from the admin's browser does not lift that for them."""
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 10, "login_failures_per_address": 30}))
    await host.admin()
    device = device_cookie(await login(host.client(), "admin", ADMIN_PASSWORD))

    attacker = host.client()
    for _ in range(10):
        assert (await login(attacker, "admin", WRONG)).status_code == 401
    assert (await login(attacker, "admin", ADMIN_PASSWORD)).status_code == 429
    back = await login(host.client(), "admin", ADMIN_PASSWORD, device=device)
    assert back.status_code == 200, back.text
    assert (await login(host.client(), "admin", ADMIN_PASSWORD)).status_code == 429


async def test_failures_with_a_device_token_count_for_that_device_only(skald):
    """A stolen device cookie guesses at the device's pace and locks out nobody else:
    another browser of the member, and clients without a token, still sign in."""
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 3, "login_failures_per_address": 30}))
    await host.admin()
    await host.create_member("alice")
    stolen = device_cookie(await login(host.client(), "alice", MEMBER_PASSWORD))
    own = device_cookie(await login(host.client(), "alice", MEMBER_PASSWORD))
    assert stolen != own

    thief = host.client()
    for _ in range(3):
        assert (await login(thief, "alice", WRONG, device=stolen)).status_code == 401
    refused = await login(thief, "alice", MEMBER_PASSWORD, device=stolen)
    assert refused.status_code == 429 and refused.json()["code"] == "login_throttled"
    assert (await login(host.client(), "alice", MEMBER_PASSWORD, device=own)).status_code == 200
    assert (await login(host.client(), "alice", MEMBER_PASSWORD)).status_code == 200


async def test_parallel_guesses_with_one_device_token_meet_its_limit_together_and_leave_the_account_alone(skald):
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 3, "login_failures_per_address": 30}))
    await host.admin()
    await host.create_member("alice")
    device = device_cookie(await login(host.client(), "alice", MEMBER_PASSWORD))
    answers = await asyncio.gather(*(login(host.client(), "alice", WRONG, device=device) for _ in range(10)))
    codes = [a.status_code for a in answers]
    assert codes.count(401) <= 3 and codes.count(429) >= 7, codes
    assert (await login(host.client(), "alice", MEMBER_PASSWORD, device=device)).status_code == 429
    assert (await login(host.client(), "alice", MEMBER_PASSWORD)).status_code == 200


async def test_a_member_changes_their_password_in_their_browser_while_others_lock_the_account(skald):
    """The password change splits like a sign-in: from the browser holding the session
    and its device token it meets that device's limit, not the lock that wrong
    passwords from elsewhere built up; without the token it is refused as before."""
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 3, "login_failures_per_address": 30}))
    await host.admin()
    await host.create_member("alice")
    browser = host.client()
    signed_in = await browser.login("alice", MEMBER_PASSWORD)
    assert signed_in.status_code == 200
    bearer = host.client()
    assert (await bearer.login("alice", MEMBER_PASSWORD, bearer=True)).status_code == 200
    browser.cookies[SECURE_DEVICE_COOKIE] = device_cookie(signed_in)  # as a browser keeps it

    for _ in range(3):
        assert (await login(host.client(), "alice", WRONG)).status_code == 401
    assert (await login(host.client(), "alice", MEMBER_PASSWORD)).status_code == 429
    change = {"current_password": MEMBER_PASSWORD, "new_password": NEW_PASSWORD}
    refused = await bearer.post("/api/auth/password", json=change)
    assert refused.status_code == 429 and refused.json()["code"] == "login_throttled"
    wrong = await browser.post("/api/auth/password", json={**change, "current_password": WRONG})
    assert wrong.status_code == 403 and wrong.json()["code"] == "current_password_wrong"
    changed = await browser.post("/api/auth/password", json=change)
    assert changed.status_code == 200, changed.text


# -- failures and lockouts in the log ------------------------------------------------------


def auth_log(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "skald_host.web.routes.auth"]


async def test_failed_sign_ins_are_logged_with_the_address_and_only_an_existing_accounts_name(skald, caplog):
    """People type their password into the name field: a name that is no account is
    never written down, nor any password or device token."""
    caplog.set_level(logging.INFO)
    host = await skald.start()
    await host.admin()
    await host.create_member("alice")
    device = device_cookie(await login(host.client(), "alice", MEMBER_PASSWORD))
    typed_into_the_name = ["Tr0ub4dor-and-3", "correct horse battery staple"]  # a valid name, and not even that
    caplog.clear()

    client = host.client()
    assert (await login(client, " Alice", WRONG)).status_code == 401
    for name in typed_into_the_name:
        assert (await login(client, name, WRONG)).status_code == 401
    assert (await login(client, "alice", WRONG, device=device)).status_code == 401
    alice = await host.member("alice")
    wrong = await alice.post("/api/auth/password", json={"current_password": WRONG, "new_password": NEW_PASSWORD})
    assert wrong.status_code == 403

    assert auth_log(caplog) == [
        ("INFO", "failed sign-in for account 'alice' from 127.0.0.1"),
        ("INFO", "failed sign-in for an unknown name from 127.0.0.1"),
        ("INFO", "failed sign-in for an unknown name from 127.0.0.1"),
        ("INFO", "failed sign-in for account 'alice' from 127.0.0.1 (a browser with its device token)"),
        ("INFO", "wrong current password in a password change for account 'alice' from 127.0.0.1"),
    ]
    for secret in (*typed_into_the_name, WRONG, MEMBER_PASSWORD, device, device.partition(".")[0]):
        assert secret.lower() not in caplog.text.lower(), secret


async def test_an_account_an_address_or_a_device_becoming_throttled_is_logged_once_per_window(skald, caplog):
    """One WARNING the moment each limit is reached, none for the attempts it refuses
    after (a flood must not flood the log), and an unknown name still unnamed."""
    caplog.set_level(logging.INFO)
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 3, "login_failures_per_address": 9}))
    await host.admin()
    await host.create_member("alice")
    device = device_cookie(await login(host.client(), "alice", MEMBER_PASSWORD))
    caplog.clear()

    client = host.client()
    for name in ("alice", "s3cret-typed-here"):
        for _ in range(3):
            assert (await login(client, name, WRONG)).status_code == 401
        for _ in range(5):
            assert (await login(client, name, WRONG)).status_code == 429
    for n in range(3):
        assert (await login(client, f"made-up-{n}", WRONG)).status_code == 401
    for _ in range(5):
        assert (await login(client, "made-up-next", WRONG)).status_code == 429
    for _ in range(3):
        assert (await login(client, "alice", WRONG, device=device)).status_code == 401
    for _ in range(5):
        assert (await login(client, "alice", MEMBER_PASSWORD, device=device)).status_code == 429

    warnings = [message for level, message in auth_log(caplog) if level == "WARNING"]
    assert warnings == [
        "sign-in to account 'alice' throttled: 3 failed attempts within 15 min from clients without its device token"
        " (last from 127.0.0.1); browsers that signed in to it before are not held",
        "sign-in to an unknown name throttled: 3 failed attempts within 15 min from clients without its device token"
        " (last from 127.0.0.1)",
        "sign-in from 127.0.0.1 throttled: 9 failed attempts within 15 min from it",
        "sign-in to account 'alice' throttled for one browser holding its device token: 3 failed attempts within 15 min"
        " (last from 127.0.0.1)",
    ]
    assert len(auth_log(caplog)) == 3 + 3 + 3 + 3 + len(warnings)  # one INFO per failure, nothing per refusal
    for secret in ("s3cret-typed-here", "made-up", device.partition(".")[0]):
        assert secret not in caplog.text, secret


# -- the client's address behind a reverse proxy -------------------------------------------


async def test_forwarded_address_is_honoured_from_a_trusted_proxy(skald):
    """The test client plays the proxy (127.0.0.1, listed). Failures count per forwarded
    client: one client's spray leaves another's login alone, and hops the client wrote
    left of the proxy's own entry do not move it to a fresh key."""
    host = await skald.start(
        settings=skald.settings(
            server={"trusted_proxies": ["127.0.0.1", "10.0.0.0/8"]},
            auth={"login_failures_per_account": 10, "login_failures_per_address": 3},
        )
    )
    await host.admin()
    await host.create_member("alice")
    proxy = host.client()
    for n in range(3):
        assert (await login(proxy, f"made-up-{n}", WRONG, forwarded_for="203.0.113.5")).status_code == 401
    assert (await login(proxy, "alice", MEMBER_PASSWORD, forwarded_for="203.0.113.5")).status_code == 429
    # Forged hops on the left, a second trusted proxy on the right: still 203.0.113.5.
    for chain in ("198.51.100.7, 203.0.113.5", "198.51.100.8,203.0.113.5, 10.1.2.3", "[::ffff:203.0.113.5]:4711"):
        assert (await login(proxy, "alice", MEMBER_PASSWORD, forwarded_for=chain)).status_code == 429, chain
    # Another client behind the same proxy is not that one.
    assert (await login(proxy, "alice", MEMBER_PASSWORD, forwarded_for="203.0.113.6")).status_code == 200


@pytest.mark.parametrize("trusted", [[], ["10.0.0.0/8"]], ids=["none-configured", "peer-not-listed"])
async def test_forwarded_address_is_ignored_from_a_peer_that_is_not_a_trusted_proxy(skald, trusted):
    """A client that is not a listed proxy cannot pick a fresh address per guess."""
    host = await skald.start(
        settings=skald.settings(
            server={"trusted_proxies": trusted}, auth={"login_failures_per_account": 10, "login_failures_per_address": 3}
        )
    )
    await host.admin()
    await host.create_member("alice")
    client = host.client()
    for n in range(3):
        assert (await login(client, f"made-up-{n}", WRONG, forwarded_for=f"203.0.113.{n}")).status_code == 401
    assert (await login(client, "alice", MEMBER_PASSWORD, forwarded_for="203.0.113.99")).status_code == 429


async def test_addresses_in_one_ipv6_64_share_one_budget_and_another_64_has_its_own(skald):
    """One home line owns a /64: a fresh address from it per guess is the same client.
    The zone id and the IPv4-mapped spelling are no way out either."""
    host = await skald.start(
        settings=skald.settings(
            server={"trusted_proxies": ["127.0.0.1"]},
            auth={"login_failures_per_account": 10, "login_failures_per_address": 3},
        )
    )
    await host.admin()
    await host.create_member("alice")
    proxy = host.client()
    for n, address in enumerate(("2001:db8:1:2::1", "2001:db8:1:2:ffff::7", "2001:db8:1:2:abcd:1:2:3")):
        assert (await login(proxy, f"made-up-{n}", WRONG, forwarded_for=address)).status_code == 401
    refused = await login(proxy, "alice", MEMBER_PASSWORD, forwarded_for="2001:db8:1:2:9:9:9:9")
    assert refused.status_code == 429 and refused.json()["code"] == "login_throttled"
    assert (await login(proxy, "alice", MEMBER_PASSWORD, forwarded_for="2001:db8:1:3::1")).status_code == 200


def test_address_key_counts_ipv6_by_its_64_and_leaves_the_rest_as_given():
    assert address_key("2001:db8:1:2:3:4:5:6") == address_key("2001:DB8:1:2::9") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("fe80::1%eth0") == address_key("fe80::2%wlan0") == address_key("fe80::1") == "fe80::/64"
    assert address_key("::ffff:203.0.113.5") == address_key("203.0.113.5") == "203.0.113.5"
    assert address_key("203.0.113.6") != address_key("203.0.113.5")  # IPv4 stays per address
    for given in ("unknown", "device:abc123", "not:an:address", ""):
        assert address_key(given) == given


def test_forwarded_client_takes_the_rightmost_hop_that_is_not_a_trusted_proxy():
    trusted = (ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128"))
    assert forwarded_client("127.0.0.1", [], trusted) == "127.0.0.1"
    assert forwarded_client("127.0.0.1", ["203.0.113.5"], trusted) == "203.0.113.5"
    assert forwarded_client("192.0.2.1", ["203.0.113.5"], trusted) == "192.0.2.1"  # untrusted peer
    assert forwarded_client("127.0.0.1", ["1.1.1.1, 203.0.113.5", "10.0.0.2"], trusted) == "203.0.113.5"  # two header lines
    assert forwarded_client("::1", ["[2001:db8::7]:443"], trusted) == "2001:db8::7"
    assert forwarded_client("::ffff:127.0.0.1", ["203.0.113.5:8080"], trusted) == "203.0.113.5"
    assert forwarded_client("127.0.0.1", ["203.0.113.5, not-an-address"], trusted) == "127.0.0.1"  # garbage ends the walk
    assert forwarded_client("127.0.0.1", ["10.0.0.9, 10.0.0.8"], trusted) == "10.0.0.9"  # all proxies: the furthest


def test_trusted_proxies_setting_refuses_what_is_not_an_address(tmp_path):
    settings = load_settings(data_dir=tmp_path, environ={"SKALD_SERVER_TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8, ::1"})
    assert settings.server.trusted_proxies == ("127.0.0.1", "10.0.0.0/8", "::1")
    with pytest.raises(SettingsError, match=r"server.trusted_proxies: 'proxy.lan'"):
        load_settings(data_dir=tmp_path, environ={"SKALD_SERVER_TRUSTED_PROXIES": "proxy.lan"})


# -- the password change is a login of the account -----------------------------------------


async def test_guessing_the_current_password_is_throttled_like_a_login(skald):
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 5, "login_failures_per_address": 30}))
    await host.admin()
    alice = await host.member("alice")
    for _ in range(5):
        wrong = await alice.post("/api/auth/password", json={"current_password": WRONG, "new_password": NEW_PASSWORD})
        assert wrong.status_code == 403 and wrong.json()["code"] == "current_password_wrong"

    kdf = host.core.users.kdf
    derivations = []
    for name in ("unseal", "check_verifier"):
        original = getattr(kdf, name)

        async def counted(*args, _original=original, **kwargs):
            derivations.append(1)
            return await _original(*args, **kwargs)

        setattr(kdf, name, counted)
    throttled = await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": NEW_PASSWORD})
    assert throttled.status_code == 429, throttled.text
    seconds = int(throttled.headers["Retry-After"])
    assert throttled.json() == {"error": "too many failed logins; try again later", "code": "login_throttled", "values": {"seconds": seconds}}
    assert derivations == []  # refused before any Argon2 work
    # The guesses were failed logins of the account: signing in is refused too.
    assert (await host.client().login("alice", MEMBER_PASSWORD)).status_code == 429
    assert (await host.client().login("alice", NEW_PASSWORD)).status_code == 429


async def test_failed_logins_count_toward_the_password_change_limit(skald):
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 3, "login_failures_per_address": 30}))
    await host.admin()
    alice = await host.member("alice")
    for _ in range(3):
        assert (await host.client().login("alice", WRONG)).status_code == 401
    response = await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": NEW_PASSWORD})
    assert response.status_code == 429 and response.json()["code"] == "login_throttled"

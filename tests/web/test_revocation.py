"""The revocation matrix (check A2) for the channels that exist today: the HTTP cookie,
a bearer token, an open WebSocket on each, and a device token a plugin issued (the
mobile connector's, spec 1.3).

After every event the next request on each channel is refused with 401, open sockets
are closed with 1008 within a second, and the member is locked (their owner database
connection closed, the key gone from memory). Revocation is synchronous in the core,
so "within a second" has a wide margin; the test still measures it.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from websockets.exceptions import InvalidStatus

from quart import Blueprint

from skald_hookspecs import PluginInfo, current_caller, hookimpl
from skald_host.core.identity.sessions import SessionStore
from skald_host.testing.host import MEMBER_PASSWORD
from web_support import POLICY_VIOLATION, close_code

NEW_PASSWORD = "a brand new password 42"
DEVICES = "revdevices"


class DevicePlugin:
    """A binding-managed plugin with one route, for the device-token row."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=DEVICES, title="Devices", spec=">=1.3,<2", manages_own_access=True, grant_by_default=False)

    @hookimpl
    def register_routes(self, register, host) -> None:
        blueprint = Blueprint(DEVICES, __name__)

        @blueprint.get("/whoami")
        async def whoami() -> dict:
            return {"device_id": current_caller().device_id}

        register(blueprint)


async def _alice_on_every_channel(host):
    """An admin, and alice logged in twice: by cookie and by bearer token."""
    admin = await host.admin()
    cookie = await host.member("alice")
    bearer = host.client()
    assert (await bearer.login("alice", MEMBER_PASSWORD, bearer=True)).status_code == 200
    return admin, cookie, bearer, cookie.member["id"]


async def _deactivate(admin, member_id, changer):
    return await admin.patch(f"/api/admin/members/{member_id}", json={"active": False})


async def _delete(admin, member_id, changer):
    return await admin.delete(f"/api/admin/members/{member_id}")


async def _end_sessions(admin, member_id, changer):
    return await admin.post(f"/api/admin/members/{member_id}/end-sessions")


async def _reset(admin, member_id, changer):
    return await admin.post(
        f"/api/admin/members/{member_id}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True}
    )


async def _change(admin, member_id, changer):
    return await changer.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": NEW_PASSWORD})


EVENTS = {
    "admin deactivate": _deactivate,
    "admin delete": _delete,
    "admin end-sessions": _end_sessions,
    "admin reset-password": _reset,
    "password change by the member": _change,
}


async def _assert_refused(client) -> None:
    assert (await client.get("/api/auth/session")).status_code == 401
    assert (await client.put("/api/me/settings", json={"after": "revocation"})).status_code == 401
    with pytest.raises(InvalidStatus) as refused:
        async with client.ws():
            pass
    assert refused.value.response.status_code == 401


@pytest.mark.parametrize("event", EVENTS)
async def test_event_ends_every_channel_of_the_member(skald, event):
    host = await skald.start(plugins=[DevicePlugin()], enable=[DEVICES])
    admin, cookie, bearer, alice_id = await _alice_on_every_channel(host)
    changer = await host.member("alice")  # the session that changes its own password
    assert host.core.users.is_unlocked(alice_id)
    device = host.client()
    device.bearer = (await host.core.host_api(DEVICES).issue_device_token(alice_id, {"name": "phone"}))["token"]
    assert (await device.get(f"/api/plugin/{DEVICES}/whoami")).status_code == 200

    async with cookie.ws() as cookie_socket, bearer.ws() as bearer_socket:
        started = time.monotonic()
        response = await EVENTS[event](admin, alice_id, changer)
        assert response.status_code == 200, response.text
        remaining = max(0.0, started + 1.0 - time.monotonic())
        codes = await asyncio.gather(close_code(cookie_socket, remaining), close_code(bearer_socket, remaining))
        assert codes == [POLICY_VIOLATION, POLICY_VIOLATION]

    await _assert_refused(cookie)
    await _assert_refused(bearer)
    assert (await device.get(f"/api/plugin/{DEVICES}/whoami")).status_code == 401
    if event == "password change by the member":
        # The changing session stays, so the member stays unlocked for it.
        assert (await changer.get("/api/auth/session")).status_code == 200
        assert host.core.users.is_unlocked(alice_id)
    else:
        assert not host.core.users.is_unlocked(alice_id)
        assert alice_id not in host.core.users.unlocked_ids
        assert host.core.auth.sessions.count_for(alice_id) == 0


async def test_the_session_a_password_change_keeps_keeps_its_socket_and_is_not_told_it_ended(skald):
    """The changing session's socket stays open and hears no ``sessions_revoked``: the
    shell read that event as its own end and showed the sign-in page after every
    password change, though the page says this session stays signed in."""
    host = await skald.start()
    other = await host.member("alice")
    changer = await host.member("alice")
    async with changer.ws() as kept, other.ws() as ended:
        response = await _change(None, None, changer)
        assert response.status_code == 200, response.text
        assert await close_code(ended) == POLICY_VIOLATION
        await kept.send('{"type": "ping"}')
        heard = []
        while "pong" not in (frame := await asyncio.wait_for(kept.recv(), 5)):
            heard.append(frame)
        assert not any("sessions_revoked" in frame for frame in heard), heard
    assert (await changer.get("/api/auth/session")).status_code == 200


async def test_a_password_change_gives_the_changing_session_a_new_token_and_the_old_one_opens_nothing(skald):
    """A copy of the token taken before the change (a thief's, the reason to change the
    password) is refused after it; the changer goes on under the new cookie, its socket
    open, and a bearer session gets its new token in the answer (security sweep 4)."""
    host = await skald.start()
    changer = await host.member("alice")
    thief = host.client()
    thief.cookies = dict(changer.cookies)
    thief.csrf_token = changer.csrf_token
    assert (await thief.get("/api/auth/session")).status_code == 200
    async with changer.ws() as kept:
        response = await _change(None, None, changer)
        assert response.status_code == 200, response.text
        assert changer.cookies != thief.cookies  # the answer set the new cookie
        await kept.send('{"type": "ping"}')
        while "pong" not in await asyncio.wait_for(kept.recv(), 5):
            pass
    assert (await thief.get("/api/auth/session")).status_code == 401
    assert (await thief.get("/api/conversations")).status_code == 401
    assert (await changer.get("/api/conversations")).status_code == 200

    bearer = host.client()
    assert (await bearer.login("alice", NEW_PASSWORD, bearer=True)).status_code == 200
    old = bearer.bearer
    response = await bearer.post("/api/auth/password", json={"current_password": NEW_PASSWORD, "new_password": MEMBER_PASSWORD})
    assert response.status_code == 200, response.text
    token = response.json()["token"]
    assert token and token != old
    stale = host.client()
    stale.bearer = old
    assert (await stale.get("/api/conversations")).status_code == 401
    bearer.bearer = token
    assert (await bearer.get("/api/conversations")).status_code == 200


async def test_logout_ends_only_that_session_and_the_last_one_locks(skald):
    host = await skald.start()
    _, cookie, bearer, alice_id = await _alice_on_every_channel(host)

    async with cookie.ws() as cookie_socket, bearer.ws() as bearer_socket:
        assert (await cookie.post("/api/auth/logout")).status_code == 200
        assert await close_code(cookie_socket) == POLICY_VIOLATION
        await bearer_socket.send('{"type": "ping"}')
        assert "pong" in await bearer_socket.recv()
        assert host.core.users.is_unlocked(alice_id)  # the bearer session still needs the key

        assert (await bearer.post("/api/auth/logout")).status_code == 200
        assert await close_code(bearer_socket) == POLICY_VIOLATION

    for client in (cookie, bearer):
        assert (await client.get("/api/auth/session")).status_code == 401
    assert not host.core.users.is_unlocked(alice_id)


async def test_a_deactivated_member_gets_the_generic_401_at_login_until_reactivated(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    await alice.put("/api/me/settings", json={"note": "still here"})
    alice_id = alice.member["id"]
    wrong = await host.client().login("alice", "wrong password here")
    assert (await admin.patch(f"/api/admin/members/{alice_id}", json={"active": False})).status_code == 200

    for bearer in (False, True):
        refused = await host.client().login("alice", MEMBER_PASSWORD, bearer=bearer)
        assert (refused.status_code, refused.content) == (401, wrong.content)
    assert not host.core.users.is_unlocked(alice_id)

    assert (await admin.patch(f"/api/admin/members/{alice_id}", json={"active": True})).status_code == 200
    back = host.client()
    assert (await back.login("alice", MEMBER_PASSWORD)).status_code == 200
    assert (await back.get("/api/me/settings")).json()["settings"] == {"note": "still here"}


async def test_a_deleted_member_cannot_log_in_and_their_file_is_gone(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = alice.member["id"]
    owner_file = host.core.users.owner_path(alice_id)
    assert owner_file.exists()
    assert (await admin.delete(f"/api/admin/members/{alice_id}")).status_code == 200
    assert not owner_file.exists()
    assert (await host.client().login("alice", MEMBER_PASSWORD)).status_code == 401
    assert (await admin.get(f"/api/admin/members/{alice_id}")).status_code == 404


# -- idle and absolute timeouts --------------------------------------------------------


def test_session_store_expires_idle_sessions_and_keeps_touched_ones():
    now = [1000.0]
    store = SessionStore(idle_seconds=60, absolute_seconds=3600, clock=lambda: now[0])
    token, session = store.create("a" * 32)
    reasons = []
    session.listeners.append(lambda _session, reason: reasons.append(reason))
    now[0] += 59
    assert store.resolve(token) is session  # touched: the idle clock restarts
    now[0] += 59
    assert store.resolve(token) is session
    now[0] += 61
    assert store.resolve(token) is None
    assert reasons == ["expired"]
    assert store.count_for("a" * 32) == 0


def test_session_store_ends_a_busy_session_at_its_absolute_lifetime():
    now = [1000.0]
    store = SessionStore(idle_seconds=60, absolute_seconds=300, clock=lambda: now[0])
    token, _ = store.create("a" * 32)
    for _ in range(5):
        now[0] += 59
        assert store.resolve(token) is not None
    now[0] += 10  # 305 s after creation, 10 s after the last touch
    assert store.resolve(token) is None


def test_session_store_sweep_reports_the_members_who_lost_a_session():
    now = [1000.0]
    store = SessionStore(idle_seconds=60, absolute_seconds=3600, clock=lambda: now[0])
    idle, _ = store.create("a" * 32)
    busy, _ = store.create("b" * 32)
    now[0] += 50
    store.resolve(busy)
    now[0] += 20
    assert store.expire() == {"a" * 32}
    assert store.resolve(idle) is None
    assert store.resolve(busy) is not None


async def test_idle_expiry_closes_sockets_refuses_requests_and_locks_the_member(skald):
    """Minutes are whole numbers in the settings, so the test shortens the running
    store's idle limit and calls the sweep the host runs every 30 s."""
    host = await skald.start()
    _, cookie, bearer, alice_id = await _alice_on_every_channel(host)
    async with cookie.ws() as socket:
        host.core.auth.sessions.idle_seconds = 0.3
        await asyncio.sleep(0.4)
        await host.core.auth.expire_idle()
        assert await close_code(socket) == POLICY_VIOLATION
    assert not host.core.users.is_unlocked(alice_id)
    for client in (cookie, bearer):
        assert (await client.get("/api/auth/session")).status_code == 401


async def test_absolute_lifetime_ends_a_session_in_constant_use(skald):
    """On the session store's clock, moved on (a real 0.5 s lifetime failed on a loaded
    machine whose two sign-ins before it took longer): used all along, so never idle,
    the session ends at its absolute lifetime, its socket with it."""
    host = await skald.start()
    _, cookie, _, _ = await _alice_on_every_channel(host)
    sessions = host.core.auth.sessions
    sessions.idle_seconds, sessions.absolute_seconds = 10**9, 3600
    real, moved = sessions._clock, 0.0
    sessions._clock = lambda: real() + moved
    async with cookie.ws() as socket:
        assert (await cookie.get("/api/auth/session")).status_code == 200
        moved = 3000.0
        assert (await cookie.get("/api/auth/session")).status_code == 200
        moved = 3700.0
        assert (await cookie.get("/api/auth/session")).status_code == 401
        assert await close_code(socket) == POLICY_VIOLATION
    assert (await cookie.get("/api/auth/session")).status_code == 401


async def test_a_closed_socket_leaves_no_listener_on_its_session(skald):
    """Each socket added a revocation listener to its session and never took it off:
    a tab reconnecting all day grew its session's list (and kept each socket's state)."""
    host = await skald.start()
    _, cookie, _, _ = await _alice_on_every_channel(host)
    [session] = [s for s in host.core.auth.sessions._sessions.values() if s.member_id == cookie.member["id"] and s.kind == "web"]
    before = len(session.listeners)
    for _ in range(3):
        async with cookie.ws():
            pass
    for _ in range(50):  # the server ends its side of each socket on its own loop
        if len(session.listeners) == before:
            break
        await asyncio.sleep(0.1)
    assert len(session.listeners) == before


async def test_a_session_found_expired_by_a_request_still_locks_the_member(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    alice_id = alice.member["id"]
    host.core.auth.sessions.idle_seconds = 0.2
    await asyncio.sleep(0.3)
    assert (await alice.get("/api/auth/session")).status_code == 401
    await host.core.auth.expire_idle()  # even allowing the periodic sweep its turn
    assert not host.core.users.is_unlocked(alice_id)


# -- admin password reset ------------------------------------------------------------------


async def test_reset_of_an_encrypted_member_needs_confirmation_then_starts_them_empty(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = alice.member["id"]
    canary = "CANARY-reset-4f1c"
    assert (await alice.put("/api/me/settings", json={"diary": canary})).status_code == 200
    quarantine = host.settings.database_dir / "quarantine"

    refused = await admin.post(f"/api/admin/members/{alice_id}/reset-password", json={"new_password": NEW_PASSWORD})
    assert refused.status_code == 400
    assert "confirm_data_loss" in refused.json()["error"]
    assert (await alice.get("/api/me/settings")).json()["settings"] == {"diary": canary}
    assert not quarantine.exists() or not any(quarantine.iterdir())

    for not_true in ("true", 1, False):
        response = await admin.post(
            f"/api/admin/members/{alice_id}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": not_true}
        )
        assert response.status_code == 400, not_true

    done = await admin.post(
        f"/api/admin/members/{alice_id}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True}
    )
    assert done.status_code == 200
    body = done.json()
    assert body["data_lost"] is True
    assert body["quarantined_file"]
    assert (quarantine / body["quarantined_file"]).is_file()
    assert (await alice.get("/api/me/settings")).status_code == 401

    assert (await host.client().login("alice", MEMBER_PASSWORD)).status_code == 401
    fresh = host.client()
    assert (await fresh.login("alice", NEW_PASSWORD)).status_code == 200
    assert (await fresh.get("/api/me/settings")).json() == {"settings": {}}
    assert canary.encode() not in host.core.users.owner_path(alice_id).read_bytes()


async def test_reset_of_an_unencrypted_member_keeps_their_data(skald):
    host = await skald.start()
    admin = await host.admin()
    await host.create_member("bob", encrypted=False)
    bob = await host.member("bob")
    assert (await bob.put("/api/me/settings", json={"note": "kept"})).status_code == 200

    done = await admin.post(f"/api/admin/members/{bob.member['id']}/reset-password", json={"new_password": NEW_PASSWORD})
    assert done.status_code == 200
    assert done.json() == {"ok": True, "data_lost": False, "quarantined_file": None, "removed_from": []}
    assert (await bob.get("/api/auth/session")).status_code == 401
    fresh = host.client()
    assert (await fresh.login("bob", NEW_PASSWORD)).status_code == 200
    assert (await fresh.get("/api/me/settings")).json()["settings"] == {"note": "kept"}

"""A stream opened with a member's session (bearer token or cookie, not a paired
device's token) ends when that session ends, as the host's own /api/ws closes with
1008: a password change from another session, the admin's "end sessions",
deactivation. Before, only a device's stream was checked again: a session's went on
after every other request of it was refused, and delivered the answers of the
member's next sign-in. The heartbeat is an hour here, so a stream that ends was told
(pushed), not found out at its next check."""

from __future__ import annotations

import asyncio

import pytest

from skald_host.testing import Reply
from skald_host.testing.host import MEMBER_PASSWORD
from mobile_support import BASE, MODEL, EventStream, paired_device

NEW_PASSWORD = "another good password 9"
#: Generous: without the push a session's stream never ends at all.
ENDS_WITHIN = 20.0


@pytest.fixture(autouse=True)
def no_heartbeat_recheck(monkeypatch):
    from skald_mobile_connector import routes

    monkeypatch.setattr(routes, "STREAM_HEARTBEAT_SECONDS", 3600.0)


async def _end(setup, event: str, alice, member_id: str) -> str:
    """Ends the streaming session by ``event``; returns the password to sign in with next."""
    if event == "password change":  # from her other (web) session, which stays
        response = await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": NEW_PASSWORD})
        password = NEW_PASSWORD
    elif event == "end sessions":
        response = await setup.admin.post(f"/api/admin/members/{member_id}/end-sessions")
        password = MEMBER_PASSWORD
    else:
        response = await setup.admin.patch(f"/api/admin/members/{member_id}", json={"active": False})
        password = MEMBER_PASSWORD
    assert response.status_code == 200, response.text
    return password


@pytest.mark.parametrize("credential", ["bearer", "cookie"])
@pytest.mark.parametrize("event", ["password change", "end sessions", "deactivate"])
async def test_a_stream_opened_with_a_session_ends_with_it_and_hears_nothing_of_a_later_turn(setup, event, credential):
    alice = await setup.host.member("alice")
    member_id = alice.member["id"]
    streaming = setup.host.client()
    assert (await streaming.login("alice", MEMBER_PASSWORD, bearer=credential == "bearer")).status_code == 200
    async with EventStream(streaming) as stream:
        password = await _end(setup, event, alice, member_id)
        assert (await streaming.get(f"{BASE}/me")).status_code == 401
        await stream.wait_for("closed", timeout=ENDS_WITHIN)
        await asyncio.wait_for(stream.ended.wait(), ENDS_WITHIN)  # the response itself ended
        heard = len(stream.events)

        # Her next sign-in, and a turn of it: a stream of the new session hears its answer.
        if event == "deactivate":
            back = await setup.admin.patch(f"/api/admin/members/{member_id}", json={"active": True})
            assert back.status_code == 200, back.text
        again = setup.host.client()
        assert (await again.login("alice", password, bearer=credential == "bearer")).status_code == 200
        setup.model.script(MODEL, [Reply("CANARY answer of the next sign-in.")])
        created = await again.post(f"{BASE}/conversations")
        assert created.status_code == 201, created.text
        conversation = created.json()["id"]
        async with EventStream(again) as fresh:
            sent = await again.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "hi"})
            assert sent.status_code == 202, sent.text
            await fresh.wait_for("answer", conversation_id=conversation)
        assert len(stream.events) == heard
        assert not any("CANARY" in str(e) for e in stream.events)


async def test_a_stream_of_the_session_a_password_change_keeps_goes_on(setup):
    """As /api/ws: the session that changed the password stays signed in, its stream too."""
    alice = await setup.host.member("alice")
    async with EventStream(alice) as stream:
        await _end(setup, "password change", alice, alice.member["id"])
        assert (await alice.get(f"{BASE}/me")).status_code == 200
        setup.model.script(MODEL, [Reply("Still here.")])
        created = await alice.post(f"{BASE}/conversations")
        conversation = created.json()["id"]
        assert (await alice.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "hi"})).status_code == 202
        await stream.wait_for("answer", conversation_id=conversation)
        assert "closed" not in stream.kinds()


async def test_a_device_stream_ends_when_its_token_is_revoked_without_a_recheck_of_the_plugin(setup):
    """The host's watch on a device token: revoked through the HostApi directly (no
    ``recheck_streams`` of the plugin's own unlink route), the stream still ends."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    async with EventStream(phone) as stream:
        assert await setup.service.host.revoke_device_token(alice.member["id"], phone.device_id)
        await stream.wait_for("closed", timeout=ENDS_WITHIN)
        await asyncio.wait_for(stream.ended.wait(), ENDS_WITHIN)
    assert (await phone.get(f"{BASE}/me")).status_code == 401

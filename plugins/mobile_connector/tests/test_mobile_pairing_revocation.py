"""A pending pairing code never outlives the member's credentials: whatever revokes
their sessions and device tokens (a password change, the admin's "end sessions" or
reset, a deactivation, a deletion) or ends the browser session that showed the code
ends the code too. Otherwise anyone who saw it could trade it afterwards for a working
device token, on the account of whoever holds it now."""

from __future__ import annotations

import pytest

from mobile_support import BASE, PLUGIN, pairing_code

NEW_PASSWORD = "another good password 9"


@pytest.mark.parametrize(
    "event",
    ["password change", "password change elsewhere", "end sessions", "admin reset", "deactivate", "delete", "logout"],
)
async def test_a_pending_code_dies_with_the_members_sessions(setup, event):
    alice = await setup.host.member("alice")
    member_id = alice.member["id"]
    code = await pairing_code(alice)
    if event == "password change":  # from the very session that showed the code, which stays
        response = await alice.post("/api/auth/password", json={"current_password": "member password for tests", "new_password": NEW_PASSWORD})
    elif event == "password change elsewhere":
        other = await setup.host.member("alice")
        response = await other.post("/api/auth/password", json={"current_password": "member password for tests", "new_password": NEW_PASSWORD})
    elif event == "end sessions":
        response = await setup.admin.post(f"/api/admin/members/{member_id}/end-sessions")
    elif event == "admin reset":
        response = await setup.admin.post(f"/api/admin/members/{member_id}/reset-password", json={"new_password": "reset by the admin 12", "confirm_data_loss": True})
    elif event == "deactivate":
        response = await setup.admin.patch(f"/api/admin/members/{member_id}", json={"active": False})
    elif event == "delete":
        response = await setup.admin.delete(f"/api/admin/members/{member_id}")
    else:
        response = await alice.post("/api/auth/logout")
    assert response.status_code == 200, response.text
    assert not [p for p in setup.service.codes._sessions.values() if p.member_id == member_id]  # nothing kept of it
    if event == "deactivate":  # and back: the code shown before stays dead
        response = await setup.admin.patch(f"/api/admin/members/{member_id}", json={"active": True})
        assert response.status_code == 200, response.text
    stranger = setup.host.client()  # unauthenticated: only the code
    paired = await stranger.post(f"{BASE}/pair", json={"code": code, "name": "Thief"})
    assert paired.status_code == 400 and paired.json()["code"] == "code", paired.text
    assert await setup.host.core.auth.devices.list(PLUGIN, member_id) == []


async def test_a_code_made_after_the_password_change_still_pairs(setup):
    alice = await setup.host.member("alice")
    response = await alice.post("/api/auth/password", json={"current_password": "member password for tests", "new_password": NEW_PASSWORD})
    assert response.status_code == 200, response.text
    paired = await setup.host.client().post(f"{BASE}/pair", json={"code": await pairing_code(alice), "name": "Pixel"})
    assert paired.status_code == 201, paired.text


async def test_a_device_token_for_a_deleted_member_is_a_clear_refusal_not_a_500(setup):
    """The contract: ``issue_device_token`` raises ``ChannelRequestError`` for an unknown
    member; a member deleted while a plugin held their id is one."""
    from skald_hookspecs import ChannelRequestError

    alice = await setup.host.member("alice")
    member_id = alice.member["id"]
    assert (await setup.admin.delete(f"/api/admin/members/{member_id}")).status_code == 200
    with pytest.raises(ChannelRequestError):
        await setup.host.core.host_api(PLUGIN).issue_device_token(member_id, {"name": "Pixel"})
    # And through /pair: a code the plugin still held for her (as if no revocation reached it).
    code, _ = setup.service.codes.create(member_id)
    paired = await setup.host.client().post(f"{BASE}/pair", json={"code": code, "name": "Pixel"})
    assert paired.status_code == 400 and paired.json()["code"] == "code", paired.text

"""What an admin's action tells whom: the session an admin's deactivation or password
reset ended is told why (its next request's 401, its socket's close), and nobody else
is (a sign-in stays "wrong user name or password"); a password reset names the shared
folders and projects it took the member out of; a reversed usage period says so."""

from __future__ import annotations

import pytest
from websockets.exceptions import ConnectionClosed

from skald_host.testing.host import MEMBER_PASSWORD
from web_support import POLICY_VIOLATION

NEW_PASSWORD = "a brand new password 42"


async def _closed(ws) -> tuple[int | None, str | None]:
    try:
        while True:
            await ws.recv()
    except ConnectionClosed as closed:
        return (closed.rcvd.code, closed.rcvd.reason) if closed.rcvd else (None, None)


async def _deactivate(admin, member_id):
    return await admin.patch(f"/api/admin/members/{member_id}", json={"active": False})


async def _reset(admin, member_id):
    return await admin.post(f"/api/admin/members/{member_id}/reset-password",
                            json={"new_password": NEW_PASSWORD, "confirm_data_loss": True})


async def _end_sessions(admin, member_id):
    return await admin.post(f"/api/admin/members/{member_id}/end-sessions")


CASES = {
    "deactivate": (_deactivate, "account_deactivated"),
    "reset": (_reset, "password_reset"),
    "end sessions": (_end_sessions, None),  # no news: "your session has ended" says it
}


@pytest.mark.parametrize("case", CASES)
async def test_the_ended_session_alone_is_told_why(skald, case):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = alice.member["id"]
    action, code = CASES[case]
    async with alice.ws() as socket:
        assert (await action(admin, alice_id)).status_code == 200
        close_code, reason = await _closed(socket)
    assert close_code == POLICY_VIOLATION
    assert reason == (code or "session ended")

    answer = await alice.get("/api/auth/session")
    assert answer.status_code == 401
    assert answer.json()["code"] == (code or "authentication_required")
    assert (await alice.put("/api/me/settings", json={"after": "end"})).json()["code"] == (code or "authentication_required")

    # Anyone else learns nothing: no session, the generic 401; a sign-in with the old
    # password (or as a deactivated member) is the one "wrong user name or password".
    stranger = host.client()
    assert (await stranger.get("/api/auth/session")).json()["code"] == "authentication_required"
    if code is None:
        return  # ended sessions only: the password still signs in
    signing_in = await stranger.login("alice", MEMBER_PASSWORD)
    assert signing_in.status_code == 401
    assert signing_in.json()["code"] == "login_failed"
    assert signing_in.json() == (await stranger.login("nobody-here", MEMBER_PASSWORD)).json()


async def test_a_reset_names_the_folders_and_projects_it_took_the_member_out_of(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = alice.member["id"]
    folder = await admin.post("/api/admin/shared-folders", json={"slug": "garden", "title": "Garden photos"})
    assert folder.status_code == 201, folder.text
    added = await admin.post(f"/api/admin/shared-folders/{folder.json()['id']}/members", json={"username": "alice"})
    assert added.status_code == 201, added.text
    project = await alice.post("/api/projects", json={"slug": "recipes", "title": "Recipes"})
    assert project.status_code == 201, project.text

    answer = await _reset(admin, alice_id)
    assert answer.status_code == 200, answer.text
    assert answer.json()["data_lost"] is True
    assert sorted(answer.json()["removed_from"], key=lambda item: item["kind"]) == [
        {"kind": "project", "title": "Recipes"}, {"kind": "shared", "title": "Garden photos"}]
    assert await host.core.folders.memberships(alice_id) == []


async def test_a_reversed_usage_period_has_its_own_code(skald):
    host = await skald.start()
    admin = await host.admin()
    answer = await admin.get("/api/admin/usage?since=2026-03-10&until=2026-03-01")
    assert answer.status_code == 400
    assert answer.json()["code"] == "range_reversed"
    assert answer.json()["field"] == "since"

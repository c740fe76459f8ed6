"""An admin reset of an encrypted member survives a SIGKILL at any point: up to the
registry's commit the member keeps their old password and their data, untouched;
from the commit on the new password opens the new, empty file, and the old one is in
quarantine, still openable with the old password (found by a crash probe: the old
file used to be moved aside before the new key existed, so a kill in between left
the old password refused with "your previous data is lost" while it was intact)."""

from __future__ import annotations

import uuid

import pytest

from .helpers import ADMIN_PASSWORD, create_member, crash_during, database_dir, get_settings, put_settings, setup_admin

OLD, NEW = "alice's first passphrase 7", "alice's passphrase after the reset 8"
POINTS = ["admin_reset.before_commit", "admin_reset.after_commit", "admin_reset.after_quarantine"]


@pytest.mark.parametrize("point", POINTS)
async def test_an_admin_reset_killed_midway_loses_neither_password_nor_data(servers, point):
    server = await servers.start()
    admin = await setup_admin(server)
    alice_id = await create_member(admin, "alice", OLD)
    alice = await server.login("alice", OLD)
    expected = await put_settings(alice, {"note": f"CANARY-{uuid.uuid4()}"})
    assert (await alice.post("/api/auth/logout")).status_code == 200
    assert await server.terminate() == 0

    armed = await servers.start(crash_at=point)
    admin = await armed.login("admin", ADMIN_PASSWORD)
    await crash_during(armed, admin.post(
        f"/api/admin/members/{alice_id}/reset-password", json={"new_password": NEW, "confirm_data_loss": True},
    ))

    server = await servers.start()
    committed = point != "admin_reset.before_commit"
    # The boot log says what happened: an uncommitted reset's new file is gone already
    # (a crash probe found "it completes at their next login" for one never committed).
    files = {p.name for p in database_dir(servers.data_dir).iterdir() if p.name.startswith(alice_id)}
    if committed:
        assert "was cut short by a stop after its commit; it completes at their next login" in server.output
    else:
        assert f"member {alice_id}: an admin reset cut short by a stop was not committed" in server.output
        assert "completes at their next login" not in server.output
        assert not any(".reset" in name for name in files), files
    statuses = {label: (await server.client().login("alice", password)).status_code for label, password in (("old", OLD), ("new", NEW))}
    assert statuses == ({"old": 401, "new": 200} if committed else {"old": 200, "new": 401}), statuses
    alice = await server.login("alice", NEW if committed else OLD)
    assert await get_settings(alice) == ({} if committed else expected)
    files = {p.name for p in database_dir(servers.data_dir).iterdir() if p.name.startswith(alice_id)}
    assert f"{alice_id}.db" in files and not any(".reset" in name for name in files), files  # in place, or gone
    quarantined = list((database_dir(servers.data_dir) / "quarantine").glob(f"{alice_id}.*admin-reset.db"))
    assert len(quarantined) == (1 if committed else 0)
    # With the wrapped key beside it, whenever the kill came: the old password still opens it.
    assert all(q.with_name(q.name.removesuffix(".db") + ".key.json").is_file() for q in quarantined)
    assert "Traceback" not in server.output


@pytest.mark.parametrize("point", [*POINTS, "admin_reset.after_set_aside"])
async def test_an_admin_reset_killed_midway_never_shows_the_old_home_or_folders_to_the_new_password(servers, point):
    server = await servers.start()
    admin = await setup_admin(server)
    alice_id = await create_member(admin, "alice", OLD)
    await create_member(admin, "bob", OLD)
    bob = await server.login("bob", OLD)
    project = (await bob.post("/api/projects", json={"slug": "garden", "title": "Garden"})).json()["id"]
    assert (await bob.post(f"/api/projects/{project}/members", json={"username": "alice"})).status_code == 201
    invited = await server.login("alice", OLD)  # a member only once she accepts
    [invitation] = (await invited.get("/api/projects")).json()["invitations"]
    assert (await invited.post(f"/api/project-invitations/{invitation['id']}/accept")).status_code == 200
    canary = f"CANARY-{uuid.uuid4()}"
    home = servers.data_dir / "homes" / alice_id
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "diary.txt").write_text(canary)
    assert await server.terminate() == 0

    armed = await servers.start(crash_at=point)
    admin = await armed.login("admin", ADMIN_PASSWORD)
    await crash_during(armed, admin.post(
        f"/api/admin/members/{alice_id}/reset-password", json={"new_password": NEW, "confirm_data_loss": True},
    ))

    server = await servers.start()
    committed = point != "admin_reset.before_commit"
    alice = await server.login("alice", NEW if committed else OLD)
    diary = await alice.get("/api/file?path=diary.txt")
    projects = [p["id"] for p in (await alice.get("/api/projects")).json()["projects"]]
    if committed:
        assert (diary.status_code, projects) == (404, [])
        [old_home] = (database_dir(servers.data_dir) / "quarantine").glob(f"{alice_id}.*admin-reset.home")
        assert (old_home / "diary.txt").read_text() == canary
    else:
        assert (diary.status_code, diary.text, projects) == (200, canary, [project])
    assert "Traceback" not in server.output

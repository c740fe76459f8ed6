"""G5: a crash between the owner-file write and the registry commit leaves something the
boot reconciler repairs — an unregistered file is quarantined (never deleted), a member
without a file is reported, a deletion the registry committed is finished — and the
interrupted operation can simply be retried."""

from __future__ import annotations

import logging

from skald_host.core.host import Skald, build_plugin_manager
from skald_host.testing.host import MEMBER_PASSWORD
from tests.folders.support import join_project

from .helpers import (
    ADMIN_PASSWORD,
    cli_setup,
    crash_during,
    create_member,
    get_settings,
    owner_file,
    owner_files,
    put_settings,
    quarantined,
    registry_ids,
    setup_admin,
)

CAROL_PASSWORD = "carol was here first 3"
DAVE_PASSWORD = "dave is about to go 8"


def assert_registry_matches_files(data_dir) -> None:
    """0 members without a file and 0 files without a member."""
    assert set(registry_ids(data_dir).values()) == owner_files(data_dir)


async def test_crash_after_owner_file_quarantines_it_and_create_can_be_retried(servers, tmp_path):
    data_dir = servers.data_dir
    cli_setup(data_dir, tmp_path / "cli")
    admin_id = registry_ids(data_dir)["admin"]

    armed = await servers.start(crash_at="register.after_owner_file")
    admin = await armed.login("admin", ADMIN_PASSWORD)
    await crash_during(armed, admin.post("/api/admin/members", json={"username": "carol", "password": CAROL_PASSWORD}))
    [orphan] = owner_files(data_dir) - {admin_id}
    assert "carol" not in registry_ids(data_dir), "the crash came before the registry insert"

    server = await servers.start()
    assert not owner_file(data_dir, orphan).exists()
    [moved] = quarantined(data_dir, orphan)
    assert "unregistered" in moved.name
    assert "carol" not in registry_ids(data_dir)
    assert_registry_matches_files(data_dir)

    admin = await server.login("admin", ADMIN_PASSWORD)
    carol_id = await create_member(admin, "carol", CAROL_PASSWORD)
    assert carol_id != orphan
    carol = await server.login("carol", CAROL_PASSWORD)
    assert await put_settings(carol, {"hello": "again"}) == {"hello": "again"}
    assert await server.terminate() == 0
    assert_registry_matches_files(data_dir)


async def test_crash_after_registry_delete_completes_the_deletion_quarantine_included(servers):
    """A deletion the registry committed is the admin's decision: the member's file and
    everything of theirs in the quarantine (here an admin reset's old database and home,
    the upload in clear) go at the next start, as their home does. (It used to quarantine
    the file as unregistered, where it stayed, and every backup copied it.)"""
    data_dir = servers.data_dir
    armed = await servers.start(crash_at="delete.after_registry")
    admin = await setup_admin(armed)
    dave_id = await create_member(admin, "dave", DAVE_PASSWORD)
    dave = await armed.login("dave", DAVE_PASSWORD)
    await put_settings(dave, {"last.words": "gone with me"})
    conversation_id = (await dave.post("/api/conversations", json={"title": "files"})).json()["id"]
    response = await dave.post(f"/api/conversations/{conversation_id}/uploads", content=b"my diary", headers={"X-Filename": "d.txt"})
    assert response.status_code == 201, response.text
    response = await admin.post(
        f"/api/admin/members/{dave_id}/reset-password", json={"new_password": DAVE_PASSWORD + " new", "confirm_data_loss": True}
    )
    assert response.status_code == 200, response.text
    quarantine = data_dir / "database" / "quarantine"
    assert {p.name.rsplit(".", 1)[-1] for p in quarantine.glob(f"{dave_id}.*")} >= {"db", "home"}
    await crash_during(armed, admin.delete(f"/api/admin/members/{dave_id}"))
    assert "dave" not in registry_ids(data_dir)
    assert owner_file(data_dir, dave_id).exists()

    server = await servers.start()
    assert not owner_file(data_dir, dave_id).exists()
    assert list(quarantine.glob(f"{dave_id}.*")) == []
    assert f"member {dave_id}: a deletion cut short by a stop" in server.output
    assert (await server.client().login("dave", DAVE_PASSWORD)).status_code == 401
    assert await server.terminate() == 0
    assert_registry_matches_files(data_dir)


async def test_crash_after_registry_delete_leaves_no_home_or_projects_of_the_deleted_member(servers):
    """The home (uploads, in clear) and projects go with the deletion's callbacks, after
    the registry commit: a kill between left them for ever. The next start finishes it."""
    data_dir = servers.data_dir
    armed = await servers.start(crash_at="delete.after_registry")
    admin = await setup_admin(armed)
    dave_id = await create_member(admin, "dave", DAVE_PASSWORD)
    dave = await armed.login("dave", DAVE_PASSWORD)
    conversation_id = (await dave.post("/api/conversations", json={"title": "files"})).json()["id"]
    response = await dave.post(f"/api/conversations/{conversation_id}/uploads", content=b"my secret", headers={"X-Filename": "s.txt"})
    assert response.status_code == 201, response.text
    admin_conversation = (await admin.post("/api/conversations", json={"title": "mine"})).json()["id"]
    response = await admin.post(f"/api/conversations/{admin_conversation}/uploads", content=b"kept", headers={"X-Filename": "k.txt"})
    assert response.status_code == 201, response.text
    home = data_dir / "homes" / dave_id
    assert any(p.is_file() for p in home.rglob("*"))
    projects = data_dir / "projects" / dave_id
    # His own project (nobody else in it): erased, not kept in the trash every backup
    # copies; one the admin is in too goes to the trash, as a deleted owner's always did.
    mine = (await dave.post("/api/projects", json={"slug": "mine"})).json()["id"]
    response = await dave.post(f"/api/projects/{mine}/files/upload/notes.txt", content=b"private")
    assert response.status_code == 201, response.text
    await join_project(dave, admin, (await dave.post("/api/projects", json={"slug": "ours"})).json()["id"])
    (projects / "ours" / "plan.txt").write_text("shared")
    await crash_during(armed, admin.delete(f"/api/admin/members/{dave_id}"))
    assert "dave" not in registry_ids(data_dir) and home.exists()
    assert (projects / "mine" / "notes.txt").exists(), "the crash came before the projects went"

    server = await servers.start()
    assert not home.exists() and not projects.exists()
    assert f"home folder of {dave_id} has no member" in server.output
    assert f"member {dave_id}: a deletion cut short by a stop" in server.output
    [trashed] = (data_dir / "trash").iterdir()
    assert sorted(p.name for p in trashed.iterdir()) == ["ours"]
    assert (trashed / "ours" / "plan.txt").read_text() == "shared"
    assert not [p for p in data_dir.rglob("*") if p.is_file() and not p.is_symlink() and b"private" == p.read_bytes()]
    assert any(p.is_file() for p in (data_dir / "homes" / admin.member["id"]).rglob("*"))  # a member's own stays
    assert await server.terminate() == 0


async def test_member_whose_file_vanished_is_reported_and_the_host_still_starts(skald, caplog):
    host = await skald.start()
    erin = await host.member("erin")
    await put_settings(erin, {"x": 1})
    erin_id = erin.member["id"]
    admin_id = (await host.core.users.find("admin")).id
    await host.stop()
    owner_file(host.settings.data_dir, erin_id).unlink()

    caplog.set_level(logging.ERROR, logger="skald_host.core.identity.users")
    core = await Skald.start(host.settings, build_plugin_manager(host.settings, use_entry_points=False))
    try:
        assert any(erin_id in r.getMessage() and "no private database file" in r.getMessage() for r in caplog.records)
        assert await core.users.reconcile() == {"quarantined": [], "missing": [erin_id]}
        assert core.users.owner_path(admin_id).exists()
        assert (await core.users.get(erin_id)).username == "erin"
    finally:
        await core.stop()


async def test_member_without_file_can_log_in_again_after_an_admin_reset(skald):
    """The repair G5 promises for a reported member: the admin reset creates an empty
    file (the data is gone with the file), and the member logs in."""
    host = await skald.start()
    admin = await host.admin()
    frank_id = await create_member(admin, "frank", MEMBER_PASSWORD)
    owner_file(host.settings.data_dir, frank_id).unlink()
    assert (await host.client().login("frank", MEMBER_PASSWORD)).status_code == 409
    reset = await admin.post(
        f"/api/admin/members/{frank_id}/reset-password",
        json={"new_password": "frank starts over 9", "confirm_data_loss": True},
    )
    assert reset.status_code == 200, reset.text
    frank = host.client()
    assert (await frank.login("frank", "frank starts over 9")).status_code == 200
    assert await get_settings(frank) == {}

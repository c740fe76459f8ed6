"""Deleting a member removes everything of theirs, the quarantine included. An admin
reset moves an encrypted member's old database, home (their uploads, in clear) and
projects to ``database/quarantine/<id>.<time>.admin-reset.*``; deleting the member left
them there, and every later backup copied them. The dialog promises the data is removed."""

from __future__ import annotations

import os
from pathlib import Path

from tests.folders.support import join_project
from tests.identity.test_admin_reset_reach import _reset, _signed_in, _upload

SECRET = b"dear diary, nobody may read this after I am gone"


def _traces(root: Path, member_id: str) -> list[str]:
    """Every path under ``root`` named with the member id or holding the diary (the
    registry and logs may name the id: they hold no data of the member's)."""
    found = []
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            if member_id in name:
                found.append(str(path))
            elif name in files and not path.is_symlink() and SECRET in path.read_bytes():
                found.append(str(path))
    return found


async def test_deleting_a_member_after_a_reset_leaves_nothing_of_theirs_on_disk_or_in_a_backup(skald):
    host = await skald.start()
    admin = await host.admin()
    m2, keeper = await host.member("m2"), await host.member("keeper")
    m2_id, keeper_id = m2.member["id"], keeper.member["id"]
    await _upload(m2, "diary.txt", SECRET)
    assert (await _reset(admin, m2_id)).status_code == 200
    m2 = await _signed_in(host, "m2")
    await _upload(m2, "after.txt", SECRET)  # the fresh home after the reset, in the new file's reach
    data_dir = host.settings.data_dir
    quarantine = data_dir / "database" / "quarantine"
    assert any(p.name.endswith(".admin-reset.home") for p in quarantine.iterdir())
    # The other kinds the quarantine holds, named the same way: a file set aside as
    # unreadable (with a sidecar), a reset's key sidecar. And another member's, which stays.
    (quarantine / f"{m2_id}.20240101T000000Z.unreadable.db").write_bytes(SECRET)
    (quarantine / f"{m2_id}.20240101T000000Z.unreadable.db-wal").write_bytes(b"wal")
    (quarantine / f"{m2_id}.20240101T000000Z.admin-reset.key.json").write_text("{}")
    kept = quarantine / f"{keeper_id}.20240101T000000Z.unreadable.db"
    kept.write_bytes(b"the operator's to decide")
    assert _traces(data_dir, m2_id)

    response = await admin.delete(f"/api/admin/members/{m2_id}")
    assert response.status_code == 200, response.text

    assert _traces(data_dir, m2_id) == []
    assert kept.read_bytes() == b"the operator's to decide"
    info = await host.core.backups.take()
    assert _traces(info.path, m2_id) == []
    assert (info.path / "data" / "database" / "quarantine" / kept.name).exists()


async def test_a_refused_deletion_leaves_no_mark_and_the_quarantine_as_it_was(skald):
    """The mark a deletion writes before its commit goes when the commit is refused (the
    last admin): the next start must not take it for a deletion cut short."""
    host = await skald.start()
    admin = await host.admin()
    admin_id = admin.member["id"]
    quarantine = host.settings.data_dir / "database" / "quarantine"
    quarantine.mkdir(exist_ok=True)
    kept = quarantine / f"{admin_id}.20240101T000000Z.unreadable.db"
    kept.write_bytes(b"still the admin's")
    response = await admin.delete(f"/api/admin/members/{admin_id}")
    assert response.status_code in (400, 409), response.text
    assert not (quarantine / f"{admin_id}.deleting").exists()  # the mark (quarantine.deletion_mark)
    await host.core.users.reconcile()  # what the next start runs
    assert kept.read_bytes() == b"still the admin's"


async def test_a_deleted_members_own_project_is_erased_and_a_shared_one_trashed(skald):
    """A project only the member was in is their own files: it used to go to
    ``trash/``, in clear, for ever, and every later backup copied it. A project others
    belong to holds their work too: it still goes to the trash (README, projects)."""
    host = await skald.start()
    admin = await host.admin()
    bob, ann = await host.member("bob"), await host.member("ann")
    bob_id = bob.member["id"]
    mine = (await bob.post("/api/projects", json={"slug": "proj-bob"})).json()["id"]
    response = await bob.post(f"/api/projects/{mine}/files/upload/secret.txt", content=SECRET)
    assert response.status_code == 201, response.text
    shared = (await bob.post("/api/projects", json={"slug": "garden"})).json()["id"]
    await join_project(bob, ann, shared)
    response = await bob.post(f"/api/projects/{shared}/files/upload/plan.txt", content=b"beds")
    assert response.status_code == 201, response.text
    data_dir = host.settings.data_dir
    folder = data_dir / "projects" / bob_id / "proj-bob"
    (folder / "sub").mkdir()
    (folder / "sub" / "ro.txt").write_bytes(SECRET)
    os.chmod(folder / "sub" / "ro.txt", 0o400)
    os.chmod(folder / "sub", 0o500)  # a read-only folder a sandbox left
    outside = data_dir.parent / "outside-keep.txt"
    outside.write_text("not bob's")
    os.symlink(outside, folder / "link")  # a link out: removed as a link, never followed

    response = await admin.delete(f"/api/admin/members/{bob_id}")
    assert response.status_code == 200, response.text

    assert _traces(data_dir, bob_id) == []
    assert outside.read_text() == "not bob's"
    [trashed] = (data_dir / "trash").iterdir()
    assert sorted(p.name for p in trashed.iterdir()) == ["garden"]
    assert (trashed / "garden" / "plan.txt").read_bytes() == b"beds"
    info = await host.core.backups.take()
    assert _traces(info.path, bob_id) == []
    assert list(info.path.rglob("plan.txt"))  # the shared project's trash is backed up as before


async def test_a_deletion_whose_projects_cannot_be_removed_still_clears_the_quarantine_and_the_start(skald, monkeypatch):
    """A deleted member's project folder that cannot be removed (a sandbox's chmod, a
    read-only disk) once stopped the deletion before the quarantine's clear copies, and
    made every later start fail in the reconciler. The copies go, the mark stays, the
    start goes on, and the next reconcile finishes the deletion."""
    from skald_host.core.folders.service import FolderService

    host = await skald.start()
    admin = await host.admin()
    bob = await host.member("bob")
    bob_id = bob.member["id"]
    quarantine = host.settings.data_dir / "database" / "quarantine"
    quarantine.mkdir(exist_ok=True)
    copy = quarantine / f"{bob_id}.20240101T000000Z.unreadable.db"
    copy.write_bytes(SECRET)
    original = FolderService.finish_deletion

    def stuck(self, member_id, note):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(FolderService, "finish_deletion", stuck)
    response = await admin.delete(f"/api/admin/members/{bob_id}")
    assert response.status_code == 200, response.text
    assert not copy.exists()  # the clear copy went all the same
    mark = quarantine / f"{bob_id}.deleting"
    assert mark.exists()  # the rest is still to finish
    await host.core.users.reconcile()  # what the next start runs: no exception
    assert mark.exists()
    monkeypatch.setattr(FolderService, "finish_deletion", original)
    await host.core.users.reconcile()
    assert not mark.exists()

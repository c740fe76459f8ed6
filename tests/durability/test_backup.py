"""Check G6: an online backup during a write load, restored on a fresh data dir.

Real ``skald serve`` processes, the real CLI (``skald backup`` reaching the running
server over its control socket, ``skald restore``), real SQLCipher files. Alice writes
without pause while the backup is taken (her file is open); Bob logged out before (his
file is closed, so it is copied under the unlock lock).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from skald_host.core.backups import BackupError, list_backups, restore, verify
from skald_host.settings import SettingsError, load_settings

from .helpers import (
    ADMIN_PASSWORD,
    create_member,
    files_under,
    get_settings,
    put_settings,
    registry_ids,
    scan,
    server_env,
    setup_admin,
    text_forms,
    ServerProcess,
)

ALICE_PASSWORD = "alice's long passphrase for backups"
BOB_PASSWORD = "bob's long passphrase for backups"


def skald(work_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "skald_host", *args], cwd=work_dir, env=server_env(work_dir / "tmp"),
        capture_output=True, text=True, timeout=300,
    )


run_cli = skald  # for tests whose ``skald`` is the in-process host fixture


def only_backup(root: Path) -> Path:
    found = [p for p in root.iterdir() if p.name.startswith("skald-backup-")]
    assert len(found) == 1, found
    return found[0]


async def test_online_backup_under_load_restores_on_a_fresh_data_dir(servers, tmp_path):
    server = await servers.start()
    admin = await setup_admin(server)
    await create_member(admin, "alice", ALICE_PASSWORD)
    await create_member(admin, "bob", BOB_PASSWORD)
    alice = await server.login("alice", ALICE_PASSWORD)
    bob = await server.login("bob", BOB_PASSWORD)
    canary, bob_canary = f"CANARY-{uuid.uuid4()}", f"CANARY-{uuid.uuid4()}"
    await put_settings(alice, {"secret": f"alice's secret {canary}"})
    bob_settings = await put_settings(bob, {"secret": f"bob's secret {bob_canary}", "colour": "green", "n": 7})
    assert (await bob.post("/api/auth/logout")).status_code in (200, 204)
    provider_key = f"sk-{uuid.uuid4().hex}"  # an instance secret: sealed in system.db, opened after a restore
    response = await admin.post("/api/admin/models/providers", json={"name": "p", "base_url": "http://127.0.0.1:9/v1", "api_key": provider_key})
    assert response.status_code == 201, response.text
    provider_id = response.json()["id"]

    acked = 0
    stop = asyncio.Event()

    async def load() -> None:  # every PUT answered 200 is a durable write of Alice's file
        nonlocal acked
        while not stop.is_set():
            await put_settings(alice, {"counter": acked + 1, "filler": canary * 20})
            acked += 1

    writer = asyncio.create_task(load())
    while acked < 20:
        await asyncio.sleep(0.01)
    backups = tmp_path / "backups"
    backups.mkdir()
    before = acked
    done = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(servers.data_dir), "--to", str(backups))
    after = acked
    await asyncio.sleep(0.2)
    stop.set()
    await writer
    assert done.returncode == 0, done.stderr
    assert "2 member(s)" in done.stdout or "3 member(s)" in done.stdout, done.stdout
    backup = only_backup(backups)
    assert after > before  # the load really ran while the backup was taken

    # Nothing private in clear in the backup (check B1's scan, the same forms).
    secrets = {"alice's canary": text_forms(canary), "bob's canary": text_forms(bob_canary),
               "alice's password": text_forms(ALICE_PASSWORD), "bob's password": text_forms(BOB_PASSWORD),
               "the provider's API key": text_forms(provider_key)}
    assert scan(files_under(backup), secrets) == []
    assert not list(backup.rglob("*.db-shm")) and not list(backup.rglob("control.sock"))

    assert await server.terminate() == 0
    fresh = tmp_path / "restored"
    checked = await asyncio.to_thread(skald, tmp_path, "restore", str(backup), "--check")
    assert checked.returncode == 0 and "whole" in checked.stdout, checked.stderr
    restored = await asyncio.to_thread(skald, tmp_path, "restore", str(backup), "--data-dir", str(fresh))
    assert restored.returncode == 0, restored.stderr
    assert registry_ids(fresh) == registry_ids(servers.data_dir)

    second = await ServerProcess(fresh, tmp_path, "restored").start()
    try:
        alice2 = await second.login("alice", ALICE_PASSWORD)
        bob2 = await second.login("bob", BOB_PASSWORD)
        alice_settings = await get_settings(alice2)
        assert await get_settings(bob2) == bob_settings  # a quiet member's content, exactly
        assert alice_settings["secret"] == f"alice's secret {canary}"
        # Every write acked before the backup began is in it; none is torn.
        assert before <= alice_settings["counter"] <= after
        assert alice_settings["filler"] == canary * 20
        login = await second.client().login("admin", ADMIN_PASSWORD)
        assert login.status_code == 200
    finally:
        await second.aclose()
    # The restored data dir's key opens the restored registry's sealed provider key.
    from skald_host.core.storage.sealing import Sealer

    stored = sqlite3.connect(fresh / "database" / "system.db").execute(
        "SELECT api_key FROM llm_providers WHERE id = ?", (provider_id,)).fetchone()[0]
    assert Sealer.load_or_create(fresh).open(stored, "llm_providers", "api_key", provider_id) == provider_key


async def test_backup_api_lists_and_takes_and_is_admin_only(servers, tmp_path):
    server = await servers.start()
    admin = await setup_admin(server)
    await create_member(admin, "bob", BOB_PASSWORD)
    bob = await server.login("bob", BOB_PASSWORD)
    assert (await bob.post("/api/admin/backups")).status_code == 403
    assert (await bob.get("/api/admin/backups")).status_code == 403

    empty = (await admin.get("/api/admin/backups")).json()
    assert empty["backups"] == [] and empty["dir"] == str(servers.data_dir / "backups")
    taken = await admin.post("/api/admin/backups")
    assert taken.status_code == 201, taken.text
    listed = (await admin.get("/api/admin/backups")).json()["backups"]
    assert [b["name"] for b in listed] == [taken.json()["backup"]["name"]]
    assert listed[0]["members"] == 2
    # The next backup does not copy the backups into itself.
    again = (await admin.post("/api/admin/backups")).json()["backup"]
    manifest = json.loads((Path(again["path"]) / "manifest.json").read_text())
    assert not [e for e in manifest["entries"] if e["path"].startswith("backups")]
    assert not [e for e in manifest["entries"] if e["path"].startswith("logs/skald.log")]


async def test_a_second_server_and_an_offline_backup_respect_the_running_one(servers, tmp_path):
    server = await servers.start()
    await setup_admin(server)
    second = skald(tmp_path, "serve", "--data-dir", str(servers.data_dir), "--port", "1")
    assert second.returncode == 1 and f"in use by process {server.pid}" in second.stderr
    assert f"Only one server can use a data dir: stop it first (Ctrl-C where it runs, or 'kill -TERM {server.pid}')" in second.stderr
    # Commands that start a core of their own wait for the server to stop: its
    # reconciler and theirs would each take the other's new member file for an orphan.
    refused = skald(tmp_path, "plugins", "--data-dir", str(servers.data_dir))
    assert refused.returncode == 1 and f"in use by process {server.pid}" in refused.stderr, refused.stderr
    assert refused.stderr.startswith("error: 'skald plugins' needs the server stopped:"), refused.stderr
    assert f"'kill -TERM {server.pid}'), then run 'skald plugins' again." in refused.stderr
    assert skald(tmp_path, "setup", "--check", "--data-dir", str(servers.data_dir)).returncode == 0  # a read: answered
    assert server.running
    assert await server.terminate() == 0

    (tmp_path / "b").mkdir()
    offline = skald(tmp_path, "backup", "--data-dir", str(servers.data_dir), "--to", str(tmp_path / "b"))
    assert offline.returncode == 0, offline.stderr
    backup = only_backup(tmp_path / "b")
    listed = skald(tmp_path, "backup", "--list", "--to", str(tmp_path / "b"))
    assert backup.name in listed.stdout

    # A damaged backup is found out before anything is written.
    system = backup / "data" / "database" / "system.db"
    raw = bytearray(system.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    system.write_bytes(bytes(raw))
    refused = skald(tmp_path, "restore", str(backup), "--data-dir", str(tmp_path / "new"))
    assert refused.returncode == 1 and "does not match its checksum" in refused.stderr
    assert not (tmp_path / "new").exists() and not (tmp_path / "new.restoring").exists()

    # Restoring never overwrites a data dir that holds something.
    raw[len(raw) // 2] ^= 0xFF
    system.write_bytes(bytes(raw))
    occupied = skald(tmp_path, "restore", str(backup), "--data-dir", str(servers.data_dir))
    assert occupied.returncode == 1 and "is not empty" in occupied.stderr
    with sqlite3.connect(servers.data_dir / "database" / "system.db") as conn:
        assert conn.execute("SELECT count(*) FROM users").fetchone()[0] == 1
    shutil.rmtree(backup)


async def test_an_older_copy_of_one_members_file_is_noticed(servers, tmp_path):
    """SQLCipher has no rollback protection: the open counter mirrored in system.db
    tells the admin when one member's file was put back from an older backup."""
    server = await servers.start()
    admin = await setup_admin(server)
    alice_id = await create_member(admin, "alice", ALICE_PASSWORD)
    alice = await server.login("alice", ALICE_PASSWORD)
    await put_settings(alice, {"note": "in the backup"})
    backup = Path((await admin.post("/api/admin/backups")).json()["backup"]["path"])
    await put_settings(alice, {"note": "after the backup"})
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    await server.login("alice", ALICE_PASSWORD)  # one more opening the copy does not have
    assert await server.terminate() == 0
    assert "older copy" not in server.output

    live = servers.data_dir / "database" / f"{alice_id}.db"
    for sidecar in ("-wal", "-shm"):
        Path(f"{live}{sidecar}").unlink(missing_ok=True)
    shutil.copyfile(backup / "data" / "database" / f"{alice_id}.db", live)

    again = await servers.start()
    alice = await again.login("alice", ALICE_PASSWORD)  # the member still gets in
    assert (await get_settings(alice))["note"] == "in the backup"
    warnings = [line for line in again.output.splitlines() if "older copy" in line]
    assert len(warnings) == 1 and alice_id in warnings[0], warnings
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    await again.login("alice", ALICE_PASSWORD)  # said once, not at every login after
    assert len([line for line in again.output.splitlines() if "older copy" in line]) == 1
    admin = await again.login("admin", ADMIN_PASSWORD)
    warnings = (await admin.get("/api/admin/status")).json()["warnings"]
    assert [w["values"] for w in warnings if w["id"] == "older_copy"] == [{"member": "alice"}]


async def test_scheduled_backups_keep_the_newest(skald):
    """``backup.every_hours`` takes them without anyone asking; ``backup.keep`` bounds
    how many stay (here every half second, keeping 2)."""
    host = await skald.start(settings=skald.settings(backup={"every_hours": 0.5 / 3600, "keep": 2}))
    await host.admin()
    root = host.core.backups.root
    assert "scheduled-backups" in host.core.supervisor.names
    seen: set[str] = set()
    for _ in range(200):
        names = [b.path.name for b in await host.core.backups.list()]
        assert len(names) <= 3  # the newest is complete a moment before the oldest goes
        seen |= set(names)
        if len(seen) >= 4:
            break
        await asyncio.sleep(0.1)
    assert len(seen) >= 4, seen
    await host.stop()
    kept = [b.path.name for b in list_backups(root)]
    assert len(kept) == 2 and kept[0] == max(seen | set(kept))
    assert [b.kind for b in list_backups(root)] == ["scheduled", "scheduled"]
    assert not list(root.glob("*.partial"))  # one interrupted by the stop is removed


async def test_backup_keep_removes_only_scheduled_backups_never_one_taken_by_hand(skald, tmp_path):
    """The README says to take a backup by hand before an upgrade, to go back to. With
    ``backup.keep: 2`` the next scheduled runs removed it. Only scheduled backups count
    and go; one taken by hand stays, and so does one an earlier version wrote (its
    manifest has no kind: nobody can tell it was scheduled)."""
    host = await skald.start(settings=skald.settings(backup={"keep": 2}))
    await host.admin()
    root = host.core.backups.root
    by_hand = await host.core.backups.take()
    assert by_hand.kind == "manual"
    older = root / "skald-backup-20200101T000000000000Z"  # as an earlier version wrote it
    shutil.copytree(by_hand.path, older)
    manifest = json.loads((older / "manifest.json").read_text())
    del manifest["kind"]
    (older / "manifest.json").write_text(json.dumps(manifest))
    scheduled = []
    for _ in range(4):
        await asyncio.sleep(0.01)  # names are stamped to the microsecond
        scheduled.append((await host.core.backups.take(scheduled=True)).path.name)
    listed = {b.path.name: b.kind for b in await host.core.backups.list()}
    assert listed == {by_hand.path.name: "manual", older.name: None, scheduled[-1]: "scheduled", scheduled[-2]: "scheduled"}
    await host.core.backups.take()  # another by hand prunes no scheduled one either
    assert sum(kind == "scheduled" for kind in [b.kind for b in await host.core.backups.list()]) == 2
    await host.stop()

    listed = await asyncio.to_thread(run_cli, tmp_path, "backup", "--list", "--to", str(root))
    assert listed.returncode == 0, listed.stderr
    lines = {line.split(":", 1)[0]: line for line in listed.stdout.splitlines()}
    assert lines[str(by_hand.path)].endswith("; taken by hand, never removed automatically")
    assert lines[str(older)].endswith("; kind not recorded (an earlier version), never removed automatically")
    assert lines[str(root / scheduled[-1])].endswith("; scheduled")


async def test_a_member_without_a_file_does_not_stop_the_backup(skald):
    """A member whose file went missing (the boot reconciler reports it) is named in
    the backup's skipped list; everyone else is backed up."""
    host = await skald.start()
    await host.admin()
    bob = await host.member("bob")
    assert (await bob.post("/api/auth/logout")).status_code == 200
    host.core.users.owner_path(bob.member["id"]).unlink()
    info = await host.core.backups.take()
    assert info.skipped == ({"path": f"database/{bob.member['id']}.db", "reason": "this member has no database file"},)
    assert info.members == 2
    assert verify(info.path).files == info.files


async def test_a_backup_into_an_existing_directory_leaves_its_mode_alone(skald, tmp_path):
    """``--to /tmp`` must not make /tmp private to the server's account; the backup
    inside it is private itself (0700, as the data dir is: files keep their modes
    behind it)."""
    host = await skald.start()
    await host.admin()
    shared = tmp_path / "shared-dir"
    shared.mkdir()
    shared.chmod(0o755)
    info = await host.core.backups.take(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert stat.S_IMODE(info.path.stat().st_mode) == 0o700
    assert stat.S_IMODE((info.path / "manifest.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((info.path / "data" / "database" / "system.db").stat().st_mode) == 0o600


async def test_links_in_a_home_are_kept_as_links_never_followed(skald, tmp_path):
    """A member's sandbox can make a link to anywhere; a backup (and a restore) copy
    the link itself, never what it points at."""
    host = await skald.start()
    await host.admin()
    bob = await host.member("bob")
    home = host.core.files.home(bob.member["id"])
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("NOT-IN-ANY-BACKUP")
    (home / "escape").symlink_to(secret)
    (home / "notes.txt").write_text("bob's notes")
    info = await host.core.backups.take()
    copied = info.path / "data" / "homes" / bob.member["id"]
    assert (copied / "escape").is_symlink() and os.readlink(copied / "escape") == str(secret)
    assert (copied / "notes.txt").read_text() == "bob's notes"
    assert not [p for p in info.path.rglob("*") if p.is_file() and not p.is_symlink() and b"NOT-IN-ANY-BACKUP" in p.read_bytes()]
    restored = tmp_path / "restored"
    restore(info.path, restored)
    assert os.readlink(restored / "homes" / bob.member["id"] / "escape") == str(secret)


async def test_a_backup_and_restore_keep_every_files_modification_time(skald, tmp_path):
    """A project's "Changed" column reads a file's mtime: a backup and a restore must
    not stamp every file (or folder) with their own time. The backup still verifies."""
    host = await skald.start()
    await host.admin()
    bob = await host.member("bob")
    home = host.core.files.home(bob.member["id"])
    (home / "old-project").mkdir()
    old_file = home / "old-project" / "report.txt"
    old_file.write_text("written long ago")
    (home / "old-link").symlink_to("old-project/report.txt")
    long_ago = 1_500_000_000  # July 2017
    os.utime(old_file, (long_ago, long_ago))
    os.utime(home / "old-link", (long_ago + 1, long_ago + 1), follow_symlinks=False)
    os.utime(home / "old-project", (long_ago + 2, long_ago + 2))
    info = await host.core.backups.take()
    assert verify(info.path).files == info.files
    restored = tmp_path / "restored"
    restore(info.path, restored)
    for copy in (info.path / "data", restored):
        restored_home = copy / "homes" / bob.member["id"]
        assert int((restored_home / "old-project" / "report.txt").stat().st_mtime) == long_ago
        assert int((restored_home / "old-link").lstat().st_mtime) == long_ago + 1
        assert int((restored_home / "old-project").stat().st_mtime) == long_ago + 2
        assert (restored_home / "old-project" / "report.txt").read_text() == "written long ago"


async def test_entries_swapped_for_links_while_copied_are_never_followed(skald, tmp_path, monkeypatch):
    """The race a member's sandbox can run against a backup (renameat2 in a loop), won
    every time here: right after the backup looked at a file, a folder and a FIFO's
    place, each becomes a link out of the home. Nothing outside is copied (the probe
    got root-only files into backups as the member's own), the FIFO does not hang it,
    and a tree nested too deep or named too long is skipped and said, not the end."""
    from skald_host.core.backups import archive

    host = await skald.start()
    await host.admin()
    bob = await host.member("bob")
    home = host.core.files.home(bob.member["id"])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("NOT-IN-ANY-BACKUP")
    (home / "file.txt").write_text("decoy")
    (home / "folder").mkdir()
    (home / "folder" / "inner.txt").write_text("decoy")
    deep = home / "deep"
    for _ in range(archive.MAX_DEPTH + 5):
        deep = deep / "d"
    deep.mkdir(parents=True)
    real_stat = os.stat
    swapped: list[str] = []

    def stat_then_swap(path, *args, dir_fd=None, follow_symlinks=True):
        found = real_stat(path, *args, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        if dir_fd is not None and path in ("file.txt", "folder") and path not in swapped:
            here = home / path
            if here.exists() and not here.is_symlink():
                here.rename(home / f"{path}.real")
                here.symlink_to(outside / "secret.txt" if path == "file.txt" else outside)
                swapped.append(path)
        return found

    monkeypatch.setattr(archive.os, "stat", stat_then_swap)
    info = await host.core.backups.take()
    monkeypatch.setattr(archive.os, "stat", real_stat)
    assert sorted(swapped) == ["file.txt", "folder"], "the swaps did not happen: the test proves nothing"
    leaked = [p for p in info.path.rglob("*") if p.is_file() and not p.is_symlink() and b"NOT-IN-ANY-BACKUP" in p.read_bytes()]
    assert leaked == []
    reasons = {item["path"].split("/", 2)[-1]: item["reason"] for item in info.skipped}
    assert reasons["file.txt"].startswith("cannot copy") and reasons["folder"].startswith("cannot copy"), info.skipped
    assert any(reason == f"nested deeper than {archive.MAX_DEPTH} folders" for reason in reasons.values())
    assert verify(info.path).files == info.files


def nested_backups(backup: Path) -> list[str]:
    """Entries of ``backup``'s manifest that are (or are inside) another backup."""
    manifest = json.loads((backup / "manifest.json").read_text())
    return [e["path"] for e in manifest["entries"] if "skald-backup-" in e["path"]]


async def test_a_backup_with_to_never_holds_an_earlier_backup(servers, tmp_path):
    """Issue 17.5: ``--to`` used to leave out only its own target, so the configured
    folder (``<data dir>/backups``) and every earlier target inside the data dir were
    copied in and backups nested. Online (the running server takes them) and offline."""
    server = await servers.start()
    admin = await setup_admin(server)
    data_dir = servers.data_dir
    configured = Path((await admin.post("/api/admin/backups")).json()["backup"]["path"])
    assert configured.parent == data_dir / "backups"

    outside = tmp_path / "outside"
    outside.mkdir()
    first = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(data_dir), "--to", str(outside))
    assert first.returncode == 0, first.stderr
    inner = data_dir / "kept-here"
    inner.mkdir()
    second = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(data_dir), "--to", str(inner))
    assert second.returncode == 0, second.stderr
    assert nested_backups(only_backup(outside)) == []
    inner_backup = only_backup(inner)
    assert nested_backups(inner_backup) == []
    entries = [e["path"] for e in json.loads((inner_backup / "manifest.json").read_text())["entries"]]
    assert not [p for p in entries if p.split("/")[0] in ("backups", "kept-here")]
    assert "database/system.db" in entries  # the data itself is there

    # The configured folder's next backup leaves out the one --to put inside the data dir.
    again = Path((await admin.post("/api/admin/backups")).json()["backup"]["path"])
    assert nested_backups(again) == []
    assert await server.terminate() == 0

    # Offline, into the outside folder again: nothing from the folders inside the data dir.
    offline = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(data_dir), "--to", str(outside))
    assert offline.returncode == 0, offline.stderr
    newest = max(p for p in outside.iterdir() if p.name.startswith("skald-backup-"))
    assert nested_backups(newest) == []
    assert verify(newest).files > 0


async def test_a_backup_left_elsewhere_in_the_data_dir_is_not_copied(skald, tmp_path):
    """Backups in a folder that is neither the configured one nor the target (an
    earlier ``--to``) are recognised by themselves, left out and named as such; with
    the configured folder outside the data dir, a target inside it is left out too."""
    host = await skald.start(settings=skald.settings(backup={"dir": str(tmp_path / "configured")}))
    await host.admin()
    data_dir = host.core.settings.data_dir
    (data_dir / "once").mkdir()  # a --to folder must exist (a disk not mounted is not made)
    earlier = await host.core.backups.take(data_dir / "once")
    into_configured = await host.core.backups.take()
    assert into_configured.path.parent == tmp_path / "configured"
    assert nested_backups(into_configured.path) == []
    assert {"path": f"once/{earlier.path.name}", "reason": "a backup: never copied into another"} in into_configured.skipped
    (data_dir / "inner").mkdir()
    inner = await host.core.backups.take(data_dir / "inner")
    assert nested_backups(inner.path) == []
    # A member's own folder named like a backup, with no manifest, is their data: kept.
    bob = await host.member("bob")
    home = host.core.files.home(bob.member["id"])
    (home / "skald-backup-notes").mkdir()
    (home / "skald-backup-notes" / "a.txt").write_text("mine")
    # ... and so is one that looks like a finished backup: backups never go into a
    # member's home, so a member cannot keep files out of backups by naming a folder.
    (home / "skald-backup-2020").mkdir()
    (home / "skald-backup-2020" / "manifest.json").write_text("{}")
    (home / "skald-backup-2020" / "b.txt").write_text("also mine")
    kept = await host.core.backups.take()
    kept_home = kept.path / "data" / "homes" / bob.member["id"]
    assert (kept_home / "skald-backup-notes" / "a.txt").read_text() == "mine"
    assert (kept_home / "skald-backup-2020" / "b.txt").read_text() == "also mine"


async def test_a_backup_never_goes_into_a_folder_the_server_writes(skald):
    """A member's home is readable from their sandbox, and a backup holds every
    member's wrapped key: a target inside homes/ (or database/, shared/, ...) is refused
    before anything is written."""
    host = await skald.start()
    await host.admin()
    bob = await host.member("bob")
    home = host.core.files.home(bob.member["id"])
    for target in (home / "b", host.core.settings.data_dir / "database" / "b"):
        try:
            await host.core.backups.take(target)
        except BackupError as error:
            assert "is the server's" in str(error)
        else:
            raise AssertionError(f"a backup went into {target}")
        assert not target.exists()
    # A configured backup.dir there is refused when the settings load, before any start.
    with pytest.raises(SettingsError, match="backup.dir: backups cannot go into .*homes/ in the data dir is the server's"):
        load_settings(None, data_dir=host.core.settings.data_dir, environ={}, overrides={"backup": {"dir": "homes/backups"}})


async def test_a_backup_a_killed_server_left_unfinished_is_removed_at_the_next_start(skald):
    """It holds the wrapped keys and every member's file and ``--list`` does not show
    it: with no schedule, no later backup would ever remove it."""
    from skald_host.core.backups.service import NAME_PREFIX, PARTIAL_SUFFIX

    host = await skald.start()
    await host.admin()
    settings = host.settings
    root = host.core.backups.root
    await host.stop()
    unfinished = root / f"{NAME_PREFIX}20261203T101010000000Z{PARTIAL_SUFFIX}"
    (unfinished / "data" / "database").mkdir(parents=True)
    (unfinished / "data" / "database" / "system.db").write_bytes(b"half a copy")
    finished = root / f"{NAME_PREFIX}20261203T090909000000Z"
    finished.mkdir()
    host = await skald.start(settings=settings)
    for _ in range(100):
        if not unfinished.exists():
            break
        await asyncio.sleep(0.05)
    assert not unfinished.exists()
    assert finished.is_dir()  # a finished one is the admin's to keep


# -- a server killed under ``skald backup``, and the unfinished backups it leaves --------------


def write_big(path: Path, size: int) -> None:
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as handle:
        for _ in range(size >> 20):
            handle.write(chunk)


def killed_writer(root: Path) -> Path:
    """An unfinished backup whose writer was SIGKILLed while filling it (a process of
    its own, marked as the server marks one)."""
    script = (
        "import os, sys, time; from pathlib import Path; from skald_host.core.backups.service import start_partial;"
        "p, _ = start_partial(Path(sys.argv[1])); (p / 'data').mkdir(); (p / 'data' / 'half').write_bytes(b'x' * 4096);"
        "print(p, flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        path = Path(proc.stdout.readline().strip())
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL and path.name.endswith(".partial") and path.is_dir(), path
    return path


async def test_a_server_killed_under_skald_backup_says_no_backup_was_made_and_leaves_nothing(servers, tmp_path):
    """The crash-kill probe: the server SIGKILLed while it takes ``skald backup --to
    DIR`` of a large home. The CLI says plainly that no backup was made and what to do,
    and removes the unfinished copy the server was writing (a restart cleans only
    ``backup.dir``), never the one another backup run is writing into DIR meanwhile."""
    from skald_host.core.backups.service import start_partial

    server = await servers.start(crash_at="backup.before_manifest")
    admin = await setup_admin(server)
    bob_id = await create_member(admin, "bob", BOB_PASSWORD)
    home = servers.data_dir / "homes" / bob_id
    home.mkdir(parents=True, exist_ok=True)
    write_big(home / "big.bin", 48 << 20)
    target = tmp_path / "x"
    target.mkdir()
    other, writing = start_partial(target)  # another backup run, writing into DIR now
    try:
        done = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(servers.data_dir), "--to", str(target))
        assert await server.wait_exit() == -signal.SIGKILL, server.output[-4000:]
        assert done.returncode == 1, done.stderr
        error = done.stderr
        assert f"error: the server (process {server.pid}) running on {servers.data_dir} stopped while taking the backup" in error
        assert "No backup was made." in error
        removed = re.search(r"The unfinished copy it was writing, (\S+) \((\d+) MB\), was removed\.", error)
        assert removed is not None, error
        assert Path(removed[1]).parent == target and int(removed[2]) >= 50  # the big file was in it
        assert f"Start the server again (skald serve, or its service) and run 'skald backup --data-dir {servers.data_dir} --to {target}' again." in error
        assert sorted(target.iterdir()) == [other]  # nothing of it left; the other run's copy untouched
        assert f"kept the unfinished backup {other}" in error and "a backup is writing it now" in error
    finally:
        os.close(writing)


async def test_list_and_the_next_backup_remove_what_a_killed_backup_left_never_one_being_written(servers, tmp_path):
    """When nobody removed it (the CLI was gone too, or a scheduled or offline backup
    into DIR was killed), ``--list`` and the next ``skald backup`` into DIR say what
    they find and remove it, with the clean-up the server runs in ``backup.dir``: an
    unfinished backup whose writer was killed goes, one being written stays."""
    from skald_host.core.backups.service import start_partial

    target = tmp_path / "x"
    target.mkdir()
    stale = killed_writer(target)
    live, writing = start_partial(target)
    try:
        listed = await asyncio.to_thread(skald, tmp_path, "backup", "--list", "--to", str(target))
        assert listed.returncode == 0, listed.stderr
        assert f"removed the unfinished backup {stale} (4.1 kB): the backup writing it stopped before it was whole" in listed.stderr
        assert f"kept the unfinished backup {live} (0 bytes): a backup is writing it now" in listed.stderr
        assert not stale.exists() and live.is_dir()

        server = await servers.start()
        await setup_admin(server)
        stale = killed_writer(target)
        done = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(servers.data_dir), "--to", str(target))
        assert done.returncode == 0, done.stderr
        assert f"removed the unfinished backup {stale}" in done.stderr and not stale.exists()
        assert live.is_dir()
        backup = [p for p in target.iterdir() if not p.name.endswith(".partial")]
        assert len(backup) == 1 and not (backup[0] / ".writing").exists()  # a finished one carries no mark
        assert verify(backup[0]).files > 0
    finally:
        os.close(writing)
    listed = await asyncio.to_thread(skald, tmp_path, "backup", "--list", "--to", str(target))
    assert f"removed the unfinished backup {live}" in listed.stderr and not live.exists()
    assert listed.stdout.startswith(f"{backup[0]}: 1 member(s)"), listed.stdout


async def test_list_says_when_a_folder_holds_no_backups(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    listed = await asyncio.to_thread(skald, tmp_path, "backup", "--list", "--to", str(empty))
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, f"no backups in {empty}\n", "")
    nowhere = tmp_path / "nowhere"
    listed = await asyncio.to_thread(skald, tmp_path, "backup", "--list", "--to", str(nowhere))
    assert (listed.returncode, listed.stdout) == (0, f"no backups in {nowhere} (it does not exist)\n")
    assert not nowhere.exists()


async def test_a_mistyped_data_dir_is_said_and_never_made_an_instance(tmp_path):
    """``skald plugins --data-dir <typo>`` made a new, empty instance there and printed
    its table as the server's (operator probe); ``backup --list`` said only "no backups"."""
    typo = tmp_path / "dat"
    listed = await asyncio.to_thread(skald, tmp_path, "backup", "--list", "--data-dir", str(typo))
    assert listed.returncode == 2 and f"{typo} holds no Skald data" in listed.stderr, listed.stderr
    table = await asyncio.to_thread(skald, tmp_path, "plugins", "--data-dir", str(typo))
    assert table.returncode == 0, table.stderr
    assert f"note: {typo} holds no Skald data" in table.stderr
    assert any(line.split()[:2] == ["fs-tools", "loaded"] for line in table.stdout.splitlines()), table.stdout  # what is installed
    assert not typo.exists()


async def test_a_to_folder_that_does_not_exist_is_refused_online_and_offline(servers, tmp_path):
    """``skald backup --to /mnt/elsewhere`` made the folder and wrote there: a USB disk
    not mounted got its "off-site" backup on the same disk (newcomer report 7, point 5).
    The configured backup.dir is still made when missing."""
    server = await servers.start()
    await setup_admin(server)
    unmounted = tmp_path / "mnt" / "elsewhere"
    online = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(servers.data_dir), "--to", str(unmounted))
    assert online.returncode == 1, online.stderr
    assert online.stderr == f"error: the folder {unmounted} does not exist: is the disk mounted? Create it first, then run the backup again\n"
    assert not unmounted.exists() and not unmounted.parent.exists()
    assert await server.terminate() == 0

    offline = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(servers.data_dir), "--to", str(unmounted))
    assert offline.returncode == 1 and f"{unmounted} does not exist: is the disk mounted?" in offline.stderr, offline.stderr
    assert not unmounted.parent.exists()
    configured = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(servers.data_dir))
    assert configured.returncode == 0, configured.stderr
    only_backup(servers.data_dir / "backups")


async def test_a_mistyped_path_is_named_as_missing_and_a_backup_without_a_data_dir_says_how_to_name_one(tmp_path):
    """The README's own restore example with a path that does not exist was told "is
    not a Skald backup: it has no manifest.json (an unfinished backup ...)"; ``skald
    backup`` run away from the data dir did not say how to name it (newcomer walk 4)."""
    missing = tmp_path / "skald-backup-20261130T120000000000Z"
    checked = await asyncio.to_thread(skald, tmp_path, "restore", str(missing), "--check")
    assert checked.returncode != 0 and f"{missing} does not exist" in checked.stderr, checked.stderr
    assert "manifest" not in checked.stderr
    (tmp_path / "elsewhere").mkdir()
    backup = await asyncio.to_thread(skald, tmp_path, "backup", "--data-dir", str(tmp_path / "elsewhere"))
    assert backup.returncode == 2 and "--data-dir or SKALD_DATA_DIR" in backup.stderr, backup.stderr


async def test_a_server_keeps_an_unfinished_backup_another_run_is_writing(skald, tmp_path):
    """Neither a backup nor a restart removes an unfinished backup whose writer runs
    (another server backing up into the same folder); both remove one whose writer is
    gone."""
    from skald_host.core.backups.service import start_partial

    host = await skald.start(settings=skald.settings(backup={"dir": str(tmp_path / "shared")}))
    await host.admin()
    root = host.core.backups.root
    root.mkdir(parents=True, exist_ok=True)
    live, writing = start_partial(root)
    gone, closed = start_partial(root)
    os.close(closed)  # as the kernel does when its writer is killed
    try:
        info = await host.core.backups.take()
        assert live.is_dir() and not gone.exists()
        assert not (info.path / ".writing").exists()
        await host.core.backups.remove_unfinished()
        assert live.is_dir()
    finally:
        os.close(writing)
    await host.core.backups.remove_unfinished()
    assert not live.exists()

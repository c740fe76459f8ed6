"""Consistent copies of live and closed databases (check G6), on real SQLCipher files."""

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skald_host.core.storage import Database, StorageError, copy_closed_database

from .conftest import select


async def test_snapshot_of_a_file_being_written_is_whole_and_encrypted(tmp_path, db_path, key, one_step):
    """Writers run flat out while the copy is taken: the copy opens with the same key,
    passes both integrity checks and holds an unbroken prefix of the commits — at least
    every one committed before the snapshot was asked for."""
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await db.run(lambda c: c.execute("PRAGMA wal_autocheckpoint = 0"))  # the commits stay in the WAL
    committed = 0
    stop = asyncio.Event()

    async def writer() -> None:
        nonlocal committed
        while not stop.is_set():
            body = f"secret note {committed + 1} " + "x" * 500
            await db.transaction(lambda c: c.execute("INSERT INTO notes (body) VALUES (?)", (body,)))
            committed += 1

    task = asyncio.create_task(writer())
    while committed < 200:
        await asyncio.sleep(0.01)
    assert os.path.getsize(f"{db_path}-wal") > 0
    before = committed
    copy = tmp_path / "copy.db"
    await db.snapshot(copy)
    stop.set()
    await task
    await db.close()

    assert not Path(f"{copy}-wal").exists()
    assert b"secret note" not in copy.read_bytes()
    restored = await Database.open(copy, key=key, migrations=one_step)
    assert await restored.integrity_check() == "ok"
    ids = [row[0] for row in await select(restored, "SELECT id FROM notes ORDER BY id")]
    await restored.close()
    assert len(ids) >= before
    assert ids == list(range(1, len(ids) + 1))
    assert len(ids) < committed  # the writes after the copy are not in it


async def test_snapshot_never_overwrites(tmp_path, db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    existing = tmp_path / "there.db"
    existing.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        await db.snapshot(existing)
    await db.close()
    assert existing.read_bytes() == b"keep me"


async def test_snapshot_refused_while_another_process_reads(tmp_path, db_path, one_step):
    """A second connection in the middle of a read would keep the checkpoint from
    finishing; the copy is refused rather than taken inconsistent."""
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    await db.run(lambda c: c.execute("INSERT INTO notes (body) VALUES ('a')"))
    import sqlite3

    other = sqlite3.connect(db_path)
    other.execute("BEGIN")
    other.execute("SELECT count(*) FROM notes").fetchone()
    await db.run(lambda c: c.execute("INSERT INTO notes (body) VALUES ('b')"))
    with pytest.raises(StorageError, match="cannot be copied consistently"):
        await db.snapshot(tmp_path / "copy.db")
    other.close()
    await db.close()


async def test_closed_file_is_copied_with_the_wal_a_crash_left(tmp_path, db_path, key, one_step):
    """A process that died before checkpointing leaves its last commits in the WAL:
    the copy takes the WAL along, and opening it replays them."""
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await db.close()
    script = (
        "import os, sys\n"
        "from sqlcipher3 import dbapi2 as s\n"
        "c = s.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute(f\"PRAGMA key = \\\"x'{sys.argv[2]}'\\\"\")\n"
        "c.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "c.execute(\"INSERT INTO notes (body) VALUES ('after the crash')\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(db_path), key.hex()], check=True)
    assert os.path.getsize(f"{db_path}-wal") > 0

    copy = tmp_path / "copy.db"
    copy_closed_database(db_path, copy)
    assert Path(f"{copy}-wal").exists() and not Path(f"{copy}-shm").exists()
    restored = await Database.open(copy, key=key, migrations=one_step)
    assert await select(restored, "SELECT body FROM notes") == [("after the crash",)]
    assert await restored.integrity_check() == "ok"
    await restored.close()


FOREIGN_READ = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM notes').fetchone(); c.close()"


async def test_a_snapshot_keeps_the_servers_locks_so_another_programs_read_cannot_take_the_wal(db_path, tmp_path, one_step):
    """Closing any descriptor of a file drops all of the process's POSIX locks on it. The
    copy opened the live file by name and closed it, so after a backup the server held no
    lock on its own databases: another program's read then found itself the last user,
    checkpointed and deleted the -wal the server still wrote into, and a crash lost every
    commit since (admin probe, on system.db, which the README calls plain SQLite). The copy
    now reads through a descriptor kept as long as the connection."""
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    await db.transaction(lambda c: c.execute("INSERT INTO notes (body) VALUES ('before')"))
    await db.snapshot(tmp_path / "copy.db")
    read = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", FOREIGN_READ, str(db_path)], capture_output=True, text=True)
    assert read.returncode == 0, read.stderr

    assert Path(f"{db_path}-wal").exists()  # still ours: the other program's close left it
    await db.transaction(lambda c: c.execute("INSERT INTO notes (body) VALUES ('after')"))
    # The commit went to the file others see (a deleted -wal would hide it from them).
    read = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT body FROM notes ORDER BY id').fetchall())", str(db_path)],
        capture_output=True, text=True,
    )
    assert read.stdout.strip() == "[('before',), ('after',)]", read.stderr
    await db.close()


async def test_two_databases_on_one_file_share_the_held_descriptor_until_the_last_closes(db_path, one_step):
    first = await Database.open(db_path, key=None, migrations=one_step, create=True)
    second = await Database.open(db_path, key=None, migrations=one_step)
    held = first._held
    assert second._held is held and held.users == 2
    await first.close()
    os.fstat(held.fd)  # still open: closing it now would drop the second one's locks
    await second.close()
    with pytest.raises(OSError):
        os.fstat(held.fd)


async def test_a_full_target_disk_names_the_copy_not_the_database(tmp_path, db_path, key, one_step, monkeypatch):
    """A backup to a full disk said "the disk is full: <data dir>/database/system.db
    could not be written", blaming the source."""
    from skald_host.core.storage import DiskFull
    from skald_host.core.storage import snapshot as snapshot_module

    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    copy = tmp_path / "elsewhere" / "copy.db"
    copy.parent.mkdir()
    real_fsync = os.fsync

    def full(fd):
        if os.readlink(f"/proc/self/fd/{fd}") == str(copy):
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(snapshot_module.os, "fsync", full)
    with pytest.raises(DiskFull) as refused:
        await db.snapshot(copy)
    monkeypatch.undo()
    await db.close()
    assert str(refused.value) == f"the disk is full: {copy} could not be written"

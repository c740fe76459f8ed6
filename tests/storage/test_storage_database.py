import asyncio
import errno
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest
from sqlcipher3 import dbapi2 as sqlcipher

from skald_host.core.storage import (
    Database,
    DatabaseMissing,
    DatabaseUnreadable,
    DiskFull,
    StorageError,
    StorageFailing,
    disk_failure,
)

from .conftest import select

SQLITE_HEADER = b"SQLite format 3\x00"


async def add_note(db: Database, body: str) -> None:
    await db.run(lambda conn: conn.execute("INSERT INTO notes (body) VALUES (?)", (body,)))


async def test_encrypted_file_is_unreadable_by_stdlib_sqlite(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await add_note(db, "a secret")
    await db.close()

    assert db_path.read_bytes()[:16] != SQLITE_HEADER
    assert b"a secret" not in db_path.read_bytes()
    plain = sqlite3.connect(db_path)
    with pytest.raises(sqlite3.DatabaseError, match="file is not a database"):
        plain.execute("SELECT count(*) FROM sqlite_master").fetchone()
    plain.close()


async def test_plain_file_is_an_ordinary_sqlite_database(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    await add_note(db, "hello")
    assert not db.encrypted
    await db.close()

    assert db_path.read_bytes()[:16] == SQLITE_HEADER


async def test_rows_are_indexable_by_column_name(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await add_note(db, "hello")
    row = await db.run(lambda conn: conn.execute("SELECT id, body FROM notes").fetchone())
    assert row["body"] == "hello"
    await db.close()


async def test_wrong_key_raises_database_unreadable(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await db.close()
    other_key = bytes(byte ^ 0xFF for byte in key)

    with pytest.raises(DatabaseUnreadable) as caught:
        await Database.open(db_path, key=other_key, migrations=one_step)
    message = str(caught.value) + "".join(getattr(caught.value, "__notes__", []))
    assert other_key.hex() not in message and key.hex() not in message
    assert caught.value.__cause__ is None


async def test_encrypted_file_opened_without_key_is_unreadable(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await db.close()

    with pytest.raises(DatabaseUnreadable):
        await Database.open(db_path, key=None, migrations=one_step)


async def test_missing_file_is_not_created(db_path, key, one_step):
    for k in (key, None):
        with pytest.raises(DatabaseMissing):
            await Database.open(db_path, key=k, migrations=one_step)
    assert not db_path.exists()
    assert not db_path.parent.exists()


async def test_create_opens_an_existing_file_without_resetting_it(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await add_note(db, "kept")
    await db.close()

    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    assert await select(db, "SELECT body FROM notes") == [("kept",)]
    await db.close()


async def test_corrupt_file_raises_unreadable(db_path, key, one_step):
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(os.urandom(8192))
    for k in (key, None):
        with pytest.raises(DatabaseUnreadable):
            await Database.open(db_path, key=k, migrations=one_step)


async def test_truncated_empty_file_is_not_silently_reinitialised(db_path, key, one_step):
    db_path.parent.mkdir(parents=True)
    db_path.touch()
    with pytest.raises(DatabaseUnreadable, match="empty"):
        await Database.open(db_path, key=key, migrations=one_step)
    assert db_path.stat().st_size == 0


async def test_create_refuses_a_stale_wal_left_beside_a_missing_file(db_path, one_step):
    db_path.parent.mkdir(parents=True)
    stale = db_path.with_name(db_path.name + "-wal")
    stale.write_bytes(b"old frames")
    with pytest.raises(StorageError, match="stale"):
        await Database.open(db_path, key=None, migrations=one_step, create=True)
    assert not db_path.exists()
    assert stale.read_bytes() == b"old frames"


@pytest.mark.parametrize("encrypted", [True, False])
async def test_pragmas_on_every_connection(db_path, key, one_step, encrypted):
    k = key if encrypted else None
    for create in (True, False):  # a new file and a reopened one
        db = await Database.open(db_path, key=k, migrations=one_step, create=create)
        assert await db.pragmas() == {
            "journal_mode": "wal",
            "synchronous": 2,  # FULL
            "temp_store": 2,  # MEMORY
            "foreign_keys": 1,
            "cache_size": -2000,  # 2 MiB, not SQLCipher's 8 MiB per unlocked member
        }
        assert await db.run(lambda conn: conn.execute("PRAGMA busy_timeout").fetchone()[0]) == 5000
        await db.close()


async def test_transaction_rolls_back_on_error(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await add_note(db, "before")

    def insert_then_fail(conn):
        conn.execute("INSERT INTO notes (body) VALUES ('half')")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await db.transaction(insert_then_fail)
    bodies = await db.run(lambda conn: [r[0] for r in conn.execute("SELECT body FROM notes")])
    assert bodies == ["before"]
    assert not await db.run(lambda conn: conn.in_transaction)
    await db.close()


async def test_transaction_commits_and_returns_the_result(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)

    def insert_two(conn):
        conn.execute("INSERT INTO notes (body) VALUES ('a')")
        return conn.execute("INSERT INTO notes (body) VALUES ('b')").lastrowid

    assert await db.transaction(insert_two) == 2
    assert await db.run(lambda conn: conn.execute("SELECT count(*) FROM notes").fetchone()[0]) == 2
    await db.close()


async def test_run_that_leaves_a_transaction_open_is_rolled_back(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)

    def forgets_commit(conn):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO notes (body) VALUES ('dangling')")

    with pytest.raises(StorageError, match="transaction open"):
        await db.run(forgets_commit)
    assert await db.run(lambda conn: conn.execute("SELECT count(*) FROM notes").fetchone()[0]) == 0
    await db.close()


async def test_closed_database_refuses_work_and_close_is_idempotent(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    await db.close()
    await db.close()
    assert db.closed
    with pytest.raises(StorageError, match="database is closed"):
        await db.run(lambda conn: None)
    with pytest.raises(StorageError, match="database is closed"):
        await db.transaction(lambda conn: None)


async def test_concurrent_runs_are_serialised_on_one_thread(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    threads: set[int] = set()
    running = 0
    most_running = 0

    def job(conn):
        nonlocal running, most_running
        running += 1
        most_running = max(most_running, running)
        threads.add(threading.get_ident())
        time.sleep(0.001)  # blocking, as SQLite is
        running -= 1
        return conn.execute("SELECT 1").fetchone()[0]

    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    results = await asyncio.gather(*(db.run(job) for _ in range(200)))
    ticking.cancel()

    assert results == [1] * 200
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert most_running == 1
    assert ticks > 50  # the loop kept running while ~200 ms of blocking work went by
    await db.close()


async def test_key_is_first_statement(db_path, key, one_step, monkeypatch):
    """Observed with SQLite's trace hook on the real connection: the test only passes a
    Connection subclass that records statements from the moment it exists."""
    statements: list[str] = []

    class TracedConnection(sqlcipher.Connection):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.set_trace_callback(statements.append)

    real_connect = sqlcipher.connect
    monkeypatch.setattr(
        sqlcipher, "connect", lambda *a, **kw: real_connect(*a, factory=TracedConnection, **kw)
    )
    for create in (True, False):
        statements.clear()
        db = await Database.open(db_path, key=key, migrations=one_step, create=create)
        await db.close()
        assert statements[0] == f"PRAGMA key = \"x'{key.hex()}'\""
        assert statements[1:2] == ["PRAGMA busy_timeout = 5000"]
        assert "PRAGMA journal_mode = WAL" in statements


async def test_fts5_available_in_encrypted_file(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)

    def search(conn):
        conn.execute("CREATE VIRTUAL TABLE memory USING fts5(body)")
        conn.execute("INSERT INTO memory VALUES ('the quick brown fox'), ('lazy dogs')")
        found = conn.execute("SELECT body FROM memory WHERE memory MATCH 'quick'")
        return [row["body"] for row in found]

    assert await db.transaction(search) == ["the quick brown fox"]
    await db.close()


async def test_new_files_are_private(tmp_path: Path, key, one_step):
    old = os.umask(0o022)  # the usual umask, which would leave new files world-readable
    try:
        data_dir = tmp_path / "data" / "database"
        path = data_dir / "u1.db"
        db = await Database.open(path, key=key, migrations=one_step, create=True)
        await add_note(db, "private")
        files = [path, path.with_name("u1.db-wal"), path.with_name("u1.db-shm")]
        for file in files:
            assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        await db.close()
    finally:
        os.umask(old)


async def test_integrity_check_reports_ok_then_a_damaged_page(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await db.transaction(
        lambda conn: conn.executemany(
            "INSERT INTO notes (body) VALUES (?)", [(os.urandom(200).hex(),) for _ in range(500)]
        )
    )
    assert await db.integrity_check() == "ok"
    await db.close()

    damaged = bytearray(db_path.read_bytes())
    damaged[4096 * 10 + 100] ^= 0xFF
    db_path.write_bytes(damaged)
    db = await Database.open(db_path, key=key, migrations=one_step)
    assert "HMAC verification failed for page 11" in await db.integrity_check()
    await db.close()


async def test_key_must_be_32_bytes(db_path, one_step):
    with pytest.raises(ValueError, match="32 raw bytes"):
        await Database.open(db_path, key=b"short", migrations=one_step, create=True)
    assert not db_path.exists()


async def test_a_full_database_raises_disk_full_rolls_back_and_takes_writes_again_once_there_is_room(db_path, key, one_step):
    """SQLite's own SQLITE_FULL (``max_page_count`` is how SQLite's tests make a disk
    full): the typed error callers map to 507, nothing of the transaction is kept, and
    the same connection writes again afterwards. The real disk: tests/durability."""
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    await add_note(db, "before")
    pages = await db.run(lambda c: c.execute("PRAGMA page_count").fetchone()[0])
    await db.run(lambda c: c.execute(f"PRAGMA max_page_count = {pages}").fetchone())

    def two_notes(conn):
        conn.execute("INSERT INTO notes (body) VALUES ('small')")
        conn.execute("INSERT INTO notes (body) VALUES (?)", ("x" * 50_000,))

    with pytest.raises(DiskFull, match="disk is full") as raised:
        await db.transaction(two_notes)
    assert isinstance(raised.value.__cause__, sqlcipher.OperationalError)  # the driver's own, for the log
    assert await select(db, "SELECT body FROM notes") == [("before",)]

    await db.run(lambda c: c.execute("PRAGMA max_page_count = 1000000").fetchone())
    await db.transaction(two_notes)
    assert len(await select(db, "SELECT body FROM notes")) == 3
    assert await db.integrity_check() == "ok"
    await db.close()


def test_os_errors_of_the_disk_are_told_apart_from_other_failures():
    assert isinstance(disk_failure(OSError(errno.ENOSPC, "No space left on device"), "f"), DiskFull)
    assert isinstance(disk_failure(OSError(errno.EDQUOT, "Disk quota exceeded"), "f"), DiskFull)
    assert isinstance(disk_failure(OSError(errno.EIO, "Input/output error"), "f"), StorageFailing)
    assert isinstance(disk_failure(OSError(errno.EROFS, "Read-only file system"), "f"), StorageFailing)
    assert disk_failure(OSError(errno.ENOENT, "No such file"), "f") is None
    assert disk_failure(ValueError("not a disk problem"), "f") is None
    constraint = sqlite3.IntegrityError("UNIQUE constraint failed")
    constraint.sqlite_errorcode = sqlite3.SQLITE_CONSTRAINT_UNIQUE
    assert disk_failure(constraint, "f") is None


async def test_jobs_run_in_the_order_submitted_awaited_or_queued(db_path, one_step):
    """``run``, ``transaction`` and ``transaction_queued`` share the file's one queue."""
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    order: list[int] = []

    def job(index):
        def step(conn):
            order.append(index)
            if index % 3 == 0:
                conn.execute("INSERT INTO notes (body) VALUES (?)", (str(index),))
        return step

    waits = []
    for index in range(60):
        if index % 3 == 0:
            waits.append(db.transaction_queued(job(index)))
        elif index % 3 == 1:
            waits.append(asyncio.ensure_future(db.transaction(job(index))))
        else:
            waits.append(asyncio.ensure_future(db.run(job(index))))
        await asyncio.sleep(0)  # the task submits its job at its first step
    await asyncio.gather(*waits)
    assert order == list(range(60))
    await db.close()


async def test_a_cancelled_job_that_has_not_started_never_runs_and_one_running_finishes(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    started, release = threading.Event(), threading.Event()

    def blocking(conn):
        started.set()
        release.wait(5)
        conn.execute("INSERT INTO notes (body) VALUES ('running when cancelled')")

    running = asyncio.ensure_future(db.transaction(blocking))
    waiting = asyncio.ensure_future(db.transaction(lambda conn: conn.execute("INSERT INTO notes (body) VALUES ('never started')")))
    await asyncio.to_thread(started.wait, 5)
    running.cancel()
    waiting.cancel()
    release.set()
    await asyncio.gather(running, waiting, return_exceptions=True)
    assert running.cancelled() and waiting.cancelled()
    assert await db.run(lambda conn: [r[0] for r in conn.execute("SELECT body FROM notes")]) == ["running when cancelled"]
    await db.close()


async def test_a_failing_job_raises_in_the_awaiting_task_and_the_next_job_runs(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    with pytest.raises(Exception, match="no such table"):
        await db.run(lambda conn: conn.execute("SELECT * FROM missing"))
    assert await db.run(lambda conn: conn.execute("SELECT 1").fetchone()[0]) == 1
    await db.close()

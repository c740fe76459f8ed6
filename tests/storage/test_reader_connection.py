"""``Database.open(reader=True)``: a second, read-only connection on its own thread, so
that a long read (a member's full-text search) and the writes queued on the file's one
thread do not wait for each other (WAL lets a reader read while the writer writes). A
scale probe saw a message's send wait ~400 ms (up to 1.7 s) behind searches."""

from __future__ import annotations

import asyncio
import threading

import pytest

from skald_host.core.storage import Database, StorageError


async def test_a_write_commits_while_a_read_is_running_and_the_read_sees_commits(db_path, key, one_step):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True, reader=True)
    try:
        await db.run(lambda c: c.execute("INSERT INTO notes (body) VALUES ('before')"))
        entered, release = threading.Event(), threading.Event()

        def long_read(conn):  # holds its read open until released
            rows = [r[0] for r in conn.execute("SELECT body FROM notes ORDER BY id")]
            entered.set()
            assert release.wait(30)
            return rows

        reading = asyncio.ensure_future(db.read(long_read))
        assert await asyncio.to_thread(entered.wait, 30)
        try:
            # The writer is not behind the read: it commits while the read still runs.
            await asyncio.wait_for(db.transaction(lambda c: c.execute("INSERT INTO notes (body) VALUES ('during')")), 30)
            assert not reading.done()
        finally:
            release.set()
        assert await reading == ["before"]
        assert await db.read(lambda c: [r[0] for r in c.execute("SELECT body FROM notes ORDER BY id")]) == ["before", "during"]
        with pytest.raises(Exception, match="read-?only"):  # the reader only reads (query_only)
            await db.read(lambda c: c.execute("INSERT INTO notes (body) VALUES ('no')"))
    finally:
        await db.close()
    with pytest.raises(StorageError, match="closed"):
        await db.read(lambda c: None)


async def test_a_snapshot_waits_for_the_readers_read_and_copies_everything(db_path, key, one_step, tmp_path):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True, reader=True)
    try:
        await db.run(lambda c: c.execute("INSERT INTO notes (body) VALUES ('kept')"))
        entered, release = threading.Event(), threading.Event()

        def long_read(conn):
            cursor = conn.execute("SELECT body FROM notes")
            cursor.fetchone()  # a read transaction open on the WAL
            entered.set()
            assert release.wait(30)
            return cursor.fetchall()

        reading = asyncio.ensure_future(db.read(long_read))
        assert await asyncio.to_thread(entered.wait, 30)
        copying = asyncio.ensure_future(db.snapshot(tmp_path / "copy.db"))
        await asyncio.sleep(0)
        release.set()
        await reading
        await copying  # not "busy": the reader was held while the checkpoint ran
    finally:
        await db.close()
    copy = await Database.open(tmp_path / "copy.db", key=key, migrations=one_step)
    try:
        assert await copy.run(lambda c: [r[0] for r in c.execute("SELECT body FROM notes")]) == ["kept"]
    finally:
        await copy.close()


async def test_without_a_reader_read_runs_on_the_files_thread(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    try:
        threads = {await db.read(lambda c: threading.current_thread().name), await db.run(lambda c: threading.current_thread().name)}
        assert len(threads) == 1
    finally:
        await db.close()

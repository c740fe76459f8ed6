"""One database file served by one dedicated worker thread (DESIGN: "SQLite is synchronous").

The connection is created, used and closed on that thread only, so SQLite's threading
rules never come into play, and queued jobs run one at a time in submission order: a
``transaction`` can never interleave with another job. Async callers await the thread and
the event loop keeps serving meanwhile.

Cancelling an awaiting task does not stop a job that has already started; it finishes
(a transaction commits or rolls back as a whole) and its result is dropped.
"""

import asyncio
import queue
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from .connection import Connection, open_connection, rollback_quietly
from .errors import StorageError, disk_failure
from .migrations import MigrationSet, apply_migrations
from .snapshot import HeldFile, checkpoint_and_copy

T = TypeVar("T")


class Database:
    """An open SQLite or SQLCipher file. Create with ``await Database.open(...)``.

    For an owner file, an open Database *is* the member's unlock token (DESIGN): the key is
    used once to open the connection and is not kept here; ``close`` locks the file again.
    """

    def __init__(
        self,
        path: Path,
        conn: Connection,
        executor: "JobThread",
        *,
        encrypted: bool,
        schema_version: int,
        reader: "tuple[Connection, JobThread] | None" = None,
    ) -> None:
        self._path = path
        self._conn = conn
        self._executor = executor
        self._reader = reader
        self._encrypted = encrypted
        self._schema_version = schema_version
        self._closed = False
        #: Jobs on the writer connection that changed rows (``changes``).
        self._changes = 0
        self._held = HeldFile.hold(path)  # what a backup reads the file through (``snapshot``)

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        key: bytes | None,
        migrations: MigrationSet,
        create: bool = False,
        verify_pages: bool = False,
        reader: bool = False,
    ) -> "Database":
        """Open ``path``, migrate it to ``migrations.latest`` and start serving it.

        ``key`` None: plain SQLite. 32 raw bytes: SQLCipher keyed with that DEK. Without
        ``create`` a missing file raises DatabaseMissing and nothing is created.
        ``verify_pages`` checks every page before anything else touches the file (owner
        files at unlock: a file damaged past page 1 must fail here, not mid-request).
        Raises DatabaseUnreadable, SchemaTooNew or StorageError (failed migration); the
        file path is attached to the error as a note.

        ``reader``: a second connection, read-only (``query_only``), on a thread of its
        own, for ``read``: WAL lets it read while the first one writes, so a long read
        (a member's full-text search) does not hold up the writes queued behind it on
        the one thread (a message's send waited ~400 ms, up to 1.7 s, behind searches).
        Opened with the same key, here, once; the key is not kept for it either.
        """
        executor = JobThread(f"skald-db-{path.stem}")
        job = executor.submit(_open_and_migrate, path, key, migrations, create, verify_pages)
        try:
            conn, schema_version = await asyncio.wrap_future(job)
        except BaseException as error:
            # If we were cancelled while the job ran, it may still open the connection:
            # queue a job that closes it, so the key does not stay live in a leaked thread.
            executor.submit(_close_if_opened, job)
            executor.shutdown(wait=False)
            if isinstance(error, StorageError):
                error.add_note(f"database file: {path}")
            raise
        reading: tuple[Connection, JobThread] | None = None
        if reader:
            reader_thread = JobThread(f"skald-db-read-{path.stem}")
            opening = reader_thread.submit(_open_reader, path, key)
            try:
                reading = (await asyncio.wrap_future(opening), reader_thread)
            except BaseException as error:
                reader_thread.submit(_close_reader_if_opened, opening)
                reader_thread.shutdown(wait=False)
                executor.submit(conn.close)
                executor.shutdown(wait=False)
                if isinstance(error, StorageError):
                    error.add_note(f"database file: {path}")
                raise
        return cls(path, conn, executor, encrypted=key is not None, schema_version=schema_version, reader=reading)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def encrypted(self) -> bool:
        return self._encrypted

    @property
    def schema_version(self) -> int:
        return self._schema_version

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def changes(self) -> int:
        """A number that grows with every job whose writes reached this file, by the
        time its caller resumes: a copy of rows read while it stayed the same is still
        what the file holds (one process opens a data dir, ``data_dir_lock``, and the
        reader connection refuses writes). What ``UserManager.get`` keys its members on."""
        return self._changes

    def _counted(self, job: Callable[[Connection], T]) -> Callable[[Connection], T]:
        def counted(conn: Connection) -> T:
            before = conn.total_changes
            try:
                return job(conn)
            finally:
                if conn.total_changes != before:  # a rolled-back write counts too: a copy is only dropped early
                    self._changes += 1  # only the writer's thread adds

        return counted

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` on the worker thread in autocommit mode (reads, single writes).

        Several writes that must land together belong in ``transaction``; a ``fn`` that
        leaves a transaction open is rolled back and refused, so it cannot leak into the
        next caller's job.
        """
        return await self._submit(partial(_run_autocommit, fn))

    async def read(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)``, which only reads, on the reader connection when the file has
        one (``open(reader=True)``), in autocommit mode: it sees what was committed
        before it started and does not wait for the writes queued on ``run`` and
        ``transaction``, nor they for it. Without a reader, ``run``."""
        if self._reader is None:
            return await self.run(fn)
        if self._closed:
            raise StorageError(f"database is closed: {self._path}")
        conn, thread = self._reader
        try:
            return await thread.run(partial(_run_autocommit, fn), conn)
        except Exception as error:
            failure = disk_failure(error, self._path)
            if failure is None:
                raise
            raise failure from error

    async def transaction(self, fn: Callable[[Connection], T], *, bookkeeping: bool = False) -> T:
        """Run ``fn(conn)`` inside ``BEGIN IMMEDIATE … COMMIT``; roll back and re-raise on error.

        IMMEDIATE takes the write lock up front, so a transaction that reads then writes
        cannot fail halfway with SQLITE_BUSY against another process (e.g. a backup tool).
        ``bookkeeping``: ``fn`` only adds rows nothing keeps a copy of (usage rows), so
        ``changes`` stays as it is (the usage log's commit every few hundred ms would
        otherwise drop every kept member).
        """
        return await self._submit(partial(_run_in_transaction, fn), counted=not bookkeeping)

    def transaction_queued(self, fn: Callable[[Connection], T]) -> "asyncio.Future[T]":
        """``transaction``, its place in the file's one queue taken before this returns:
        a write that must be committed before whatever the caller writes next, without
        the caller waiting for it (a sub-agent run's terminal state before its result's
        tool row)."""
        if self._closed:
            raise StorageError(f"database is closed: {self._path}")
        submitted = self._executor.submit(self._counted(partial(_run_in_transaction, fn)), self._conn)

        async def outcome() -> T:
            try:
                return await asyncio.wrap_future(submitted)
            except Exception as error:
                failure = disk_failure(error, self._path)
                if failure is None:
                    raise
                raise failure from error

        return asyncio.ensure_future(outcome())

    async def pragmas(self) -> dict[str, str | int]:
        """The settings every connection must have, for the startup assertion and tests."""

        def read(conn: Connection) -> dict[str, str | int]:
            return {
                name: conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "temp_store", "foreign_keys", "cache_size")
            }

        return await self.run(read)

    async def integrity_check(self) -> str:
        """Return "ok", or the problems found, one per line.

        On SQLCipher, ``cipher_integrity_check`` runs first: it verifies every page's HMAC
        (tampering, bit rot) and, unlike ``integrity_check``, reports the failing page
        instead of aborting with "database disk image is malformed".
        """
        encrypted = self._encrypted

        def check(conn: Connection) -> str:
            problems: list[str] = []
            if encrypted:
                problems += [row[0] for row in conn.execute("PRAGMA cipher_integrity_check")]
            try:
                problems += [
                    row[0] for row in conn.execute("PRAGMA integrity_check") if row[0] != "ok"
                ]
            except Exception as error:  # a malformed page aborts the check itself
                problems.append(f"integrity_check aborted: {error}")
            return "\n".join(problems) or "ok"

        return await self.run(check)

    async def snapshot(self, destination: Path) -> None:
        """Copy the file, consistent and as encrypted as it is, to the new file
        ``destination`` (backups). Writes queued meanwhile wait for the copy, and so do
        reads on the reader connection (its open read would keep the checkpoint from
        emptying the WAL)."""
        copy = partial(checkpoint_and_copy, path=self._path, held=self._held, destination=destination)
        if self._reader is None or self._closed:  # (closed: ``_submit`` says so)
            await self._submit(copy)
            return
        paused: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        resume = threading.Event()

        def hold(_conn: Connection) -> None:  # on the reader's thread: nothing reads until resumed
            paused.get_loop().call_soon_threadsafe(_succeed, paused, None)
            resume.wait()

        held = self._reader[1].run(hold, self._reader[0])
        try:
            await paused
            await self._submit(copy)
        finally:
            resume.set()
            await asyncio.shield(held)

    async def close(self) -> None:
        """Close the connection on its thread and stop the thread. Idempotent.

        Jobs queued before ``close`` still run first (the queue is FIFO); later calls raise.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._reader is not None:  # reads queued before ``close`` still run first
                conn, thread = self._reader
                try:
                    await asyncio.wrap_future(thread.submit(conn.close))
                finally:
                    thread.shutdown(wait=False)
            await asyncio.wrap_future(self._executor.submit(self._conn.close))
            self._held.release()  # after the connection: closing it earlier would drop its locks
        finally:
            self._executor.shutdown(wait=False)

    async def _submit(self, job: Callable[[Connection], T], *, counted: bool = True) -> T:
        if self._closed:
            raise StorageError(f"database is closed: {self._path}")
        try:
            return await self._executor.run(self._counted(job) if counted else job, self._conn)
        except Exception as error:  # the disk's failure, said as such (503/507, not 500)
            failure = disk_failure(error, self._path)
            if failure is None:
                raise
            raise failure from error

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"v{self._schema_version}"
        kind = "sqlcipher" if self._encrypted else "sqlite"
        return f"<Database {self._path} {kind} {state}>"


class JobThread:
    """One thread running a file's jobs one at a time, in the order submitted.

    A ``ThreadPoolExecutor`` of one worker did the same with more on every job's path
    (a concurrent future with its lock and condition, a work item, the pool's thread
    accounting, and ``wrap_future`` bridging two futures both ways): ~35-60 us of CPU
    per job, on the loop's thread, four jobs a chat turn. Here an awaited job (``run``)
    puts its function and an asyncio future on a queue, and the thread hands the result
    back with one ``call_soon_threadsafe``. ``submit`` (opening, closing, a queued
    transaction) returns a ``concurrent.futures.Future`` as the pool did. A job whose
    awaiting task was cancelled before it started is skipped, as the pool skipped it;
    one already running finishes and its result is dropped.

    The thread is a daemon: the host closes its files on stop (``close`` runs after
    every job queued before it), and a process that exits with a file open loses what a
    crash there would lose, no more (SQLite's commit is atomic)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, args, future, loop))
        return future

    def submit(self, fn: Callable[..., T], *args: Any) -> "Future[T]":
        future: Future[T] = Future()
        self._jobs.put((fn, args, future, None))
        return future

    def shutdown(self, wait: bool = True) -> None:
        """Ends the thread once the jobs queued before have run."""
        self._jobs.put(None)
        if wait:
            self._thread.join()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, future, loop = job
            if loop is None:
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    result = fn(*args)
                except BaseException as error:
                    future.set_exception(error)
                else:
                    future.set_result(result)
                continue
            if future.cancelled():  # read across threads: at worst a job cancelled just now runs
                continue
            try:
                result = fn(*args)
            except BaseException as error:
                outcome: tuple[Any, ...] = (_fail, future, error)
            else:
                outcome = (_succeed, future, result)
            try:
                loop.call_soon_threadsafe(*outcome)
            except RuntimeError:  # the loop has closed: nobody waits for it any more
                pass
            del job, future, outcome  # nothing of a job kept alive while the queue waits


def _succeed(future: "asyncio.Future[Any]", result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: "asyncio.Future[Any]", error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _open_and_migrate(
    path: Path, key: bytes | None, migrations: MigrationSet, create: bool, verify_pages: bool
) -> tuple[Connection, int]:
    """A file this call creates and cannot finish (a full disk, say) is removed again:
    a 0-byte or half-initialised database left behind would later read as a damaged
    one (check G4)."""
    created = create and not path.exists()
    # Sidecars already there are not this call's to remove: creating beside a stale
    # one is refused, and it may hold another database's last transactions.
    present = {suffix for suffix in SIDECARS if Path(f"{path}{suffix}").exists()}
    try:
        conn = open_connection(path, key=key, create=create, verify_pages=verify_pages)
        try:
            _, schema_version = apply_migrations(conn, migrations)
        except BaseException:
            conn.close()
            raise
    except BaseException as error:
        if created:
            remove_database_files(path, keep=present)
        cause: BaseException | None = error
        while cause is not None:  # a migration wraps the driver's error in a StorageError
            failure = disk_failure(cause, path)
            if failure is not None:
                raise failure from error
            cause = cause.__cause__
        raise
    return conn, schema_version


SIDECARS = ("-wal", "-shm", "-journal")


def remove_database_files(path: Path, *, keep: Collection[str] = ()) -> None:
    """The file and its sidecars (WAL, shared memory, rollback journal), but for the
    sidecar suffixes in ``keep``."""
    for suffix in ("", *SIDECARS):
        if suffix not in keep:
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _open_reader(path: Path, key: bytes | None) -> Connection:
    """The reader connection of ``Database.open(reader=True)``: the file as migrated by
    the first one, refused every write (``query_only``)."""
    conn = open_connection(path, key=key, create=False)
    try:
        conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _close_reader_if_opened(job: "Future[Connection]") -> None:
    if not job.cancelled() and job.exception() is None:
        job.result().close()


def _close_if_opened(job: "Future[tuple[Connection, int]]") -> None:
    if not job.cancelled() and job.exception() is None:
        job.result()[0].close()


def _run_autocommit(fn: Callable[[Connection], T], conn: Connection) -> T:
    try:
        result = fn(conn)
    finally:
        left_open = conn.in_transaction
        rollback_quietly(conn)
    if left_open:
        raise StorageError(
            "Database.run left a transaction open and it was rolled back; use "
            "Database.transaction for multi-statement writes"
        )
    return result


def _run_in_transaction(fn: Callable[[Connection], T], conn: Connection) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
        conn.execute("COMMIT")
    except BaseException:
        rollback_quietly(conn)
        raise
    return result

"""Opening one SQLite/SQLCipher connection the safe way.

Runs on the database's worker thread (see ``database.py``). The order matters:

1. never create a file unless asked (``mode=rw``), and create it 0o600 ourselves;
2. ``PRAGMA key`` is the very first statement: SQLCipher reads the header on first use,
   and anything executed before the key would read (or, on a new file, write) it unkeyed;
3. prove the key by reading ``sqlite_master``, before any pragma that writes;
4. the pragmas every connection must have (DESIGN: WAL; durability; no temp files).
"""

import os
import sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

from sqlcipher3 import dbapi2 as sqlcipher

from .errors import DatabaseMissing, DatabaseUnreadable, DiskFull, StorageError, disk_failure
from .permissions import create_private_file, secure_dir

# sqlite3.Connection or sqlcipher3.dbapi2.Connection: the same DB-API surface, no common base.
Connection = Any

KEY_BYTES = 32
BUSY_TIMEOUT_MS = 5000
PAGE_CACHE_KIB = 2000


def open_connection(path: Path, *, key: bytes | None, create: bool, verify_pages: bool = False) -> Connection:
    """Open, key, verify and configure ``path``; the caller owns the returned connection.

    ``key`` None opens plain SQLite (system.db, members without encryption); 32 raw bytes
    open SQLCipher with that DEK as a raw key, so no KDF runs (Argon2 already did).
    """
    if key is not None and len(key) != KEY_BYTES:
        raise ValueError(f"a database key is {KEY_BYTES} raw bytes, got {len(key)}")
    module: ModuleType = sqlite3 if key is None else sqlcipher
    if not path.exists():
        if not create:
            raise DatabaseMissing(
                f"database {path} does not exist. Restore it from a backup; Skald does not "
                "create an empty database in place of a missing one"
            )
        _refuse_stale_journal(path)
        secure_dir(path.parent)
        create_private_file(path)
    elif not create and path.stat().st_size == 0:
        raise DatabaseUnreadable(
            f"database {path} is empty (0 bytes) where an existing database was expected; it "
            "was probably truncated. Move it aside (quarantine) and restore from a backup"
        )
    try:
        # mode=rw: even if the file vanished since the check above, SQLite must not create it.
        conn = module.connect(
            f"{path.absolute().as_uri()}?mode=rw", uri=True, isolation_level=None
        )
    except module.OperationalError as error:
        if not path.exists():
            raise DatabaseMissing(f"database {path} vanished while opening it") from None
        raise StorageError(
            f"cannot open database {path} ({error}): check that the file and its directory "
            "are readable and writable by the user Skald runs as"
        ) from None
    try:
        if key is not None:
            conn.execute(f"PRAGMA key = \"x'{key.hex()}'\"")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except module.DatabaseError as error:
            # A disk that refuses the -wal and -shm files is no wrong key: advice to
            # quarantine a healthy file would be the worst one.
            failing = disk_failure(error, path)
            if failing is not None:
                raise (DiskFull(f"the disk is full: {path} cannot be opened (SQLite needs room beside it)") if _disk_full(path) else failing) from None
            # `from None`: the driver's text adds nothing and nothing key-derived may leak.
            raise DatabaseUnreadable(
                f"cannot read database {path}: wrong key, or the file is corrupt or not a "
                f"{'SQLCipher' if key is not None else 'plain SQLite'} database. If the key "
                "is right, quarantine the file and restore it from a backup"
            ) from None
        if verify_pages:
            _verify_pages(conn, path, encrypted=key is not None)
        _configure(conn, path)
        conn.row_factory = module.Row
        return conn
    except BaseException:
        conn.close()
        raise


def _disk_full(path: Path) -> bool:
    """Whether no byte is left on the disk holding ``path`` (an open in WAL mode then
    fails as an I/O error, not as SQLITE_FULL)."""
    try:
        return os.statvfs(path.parent).f_bavail == 0
    except OSError:
        return False


def _verify_pages(conn: Connection, path: Path, *, encrypted: bool) -> None:
    """Read every page once. The key check proves page 1 only; SQLCipher checks a page's
    HMAC when the page is read, so damage further in would otherwise surface as failures
    of later requests (or of a migration). ``cipher_integrity_check`` HMACs every page in
    one sequential pass (about 0.25 s per 100 MB); a plain file gets ``quick_check``."""
    try:
        if encrypted:
            problems = [r[0] for r in conn.execute("PRAGMA cipher_integrity_check")]
        else:
            problems = [r[0] for r in conn.execute("PRAGMA quick_check") if r[0] != "ok"]
    except Exception:  # a malformed page can abort the check itself
        problems = ["check aborted"]
    if problems:
        raise DatabaseUnreadable(
            f"database {path} is damaged ({len(problems)} problem(s), first: {str(problems[0])[:120]}); "
            "quarantine it and restore it from a backup"
        )


def _configure(conn: Connection, path: Path) -> None:
    """Set the per-connection pragmas (none of them persist except journal_mode).

    synchronous=FULL: in WAL, NORMAL may lose the last commits on power loss, and a commit
    here is a member's message. temp_store=MEMORY: sorts and temp tables never touch disk
    next to an encrypted file. foreign_keys=ON: SQLite's default is off per connection.
    cache_size: SQLCipher's default page cache is 8 MiB per connection, and every
    unlocked member holds one: an hour's soak (check H2) grew the host by the size of
    each member's file, towards 8 MiB each. 2 MiB (SQLite's own default) bounds it;
    the histories a turn reads are kept in Python anyway.
    """
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StorageError(
            f"database {path} refused WAL mode (journal_mode is {mode!r}); it needs a "
            "local filesystem that supports shared memory (not a network share or read-only)"
        )
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB}")
    conn.execute("PRAGMA foreign_keys = ON")


def _refuse_stale_journal(path: Path) -> None:
    """Refuse to create a database beside a leftover -wal or -journal.

    SQLite would replay that journal into the new file (a classic corruption: the pages
    belong to the old database). It happens when a database file was deleted or moved
    without its sidecars.
    """
    for suffix in ("-wal", "-journal"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            raise StorageError(
                f"refusing to create database {path}: a stale {sidecar.name} from a previous "
                f"database is beside it. Move {sidecar} aside (it may hold that database's "
                "last transactions), then retry"
            )


def rollback_quietly(conn: Connection) -> None:
    """Roll back if a transaction is open, without masking the error that caused it.

    SQLite may already have rolled back by itself (e.g. after SQLITE_FULL); a second
    ROLLBACK would then raise over the real error.
    """
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except Exception:  # sqlite3.Error and sqlcipher3's Error share no base class
            pass

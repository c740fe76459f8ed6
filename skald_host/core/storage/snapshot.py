"""Consistent copies of database files, for backups (check G6).

A live file is never copied as it lies: its last commits may still sit in the -wal, and
a writer may change pages mid-copy. An open ``Database`` copies itself on its own thread,
where no other job can write meanwhile, right after a TRUNCATE checkpoint has moved the
whole WAL into the main file. A closed file (a locked member's) is copied with its
sidecars, and the caller keeps it from being opened meanwhile. Either way the copy is the
file's own bytes: an encrypted database stays encrypted and no key is needed.
"""

import os
import shutil
from pathlib import Path

from .connection import Connection
from .errors import StorageError
from .permissions import PRIVATE_FILE_MODE

#: What SQLite needs beside a closed file to open it as it was; "-shm" is rebuilt.
DURABLE_SIDECARS = ("-wal", "-journal")
COPY_CHUNK = 1 << 20


def copy_private(source: Path | int, destination: Path) -> None:
    """Copy ``source`` (a path, or a descriptor the caller opened and keeps) into a new
    0o600 file, flushed to disk; never overwrite."""
    fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as target, open(source, "rb", closefd=not isinstance(source, int)) as origin:
        shutil.copyfileobj(origin, target, COPY_CHUNK)
        target.flush()
        os.fsync(target.fileno())


def checkpoint_and_copy(conn: Connection, *, path: Path, destination: Path) -> None:
    """Runs as a job on the database's thread (``Database.snapshot``)."""
    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise StorageError(
            f"{path}: another connection is reading or writing it, so it cannot be copied "
            "consistently now (is a second process using the data dir?)"
        )
    copy_private(path, destination)


def copy_closed_database(path: Path, destination: Path) -> None:
    """A closed database and the sidecars that hold its last commits (a WAL left by a
    crash is replayed when the copy is opened)."""
    copy_private(path, destination)
    for suffix in DURABLE_SIDECARS:
        sidecar = Path(f"{path}{suffix}")
        if sidecar.exists():
            copy_private(sidecar, Path(f"{destination}{suffix}"))

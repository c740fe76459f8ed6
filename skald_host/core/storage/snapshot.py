"""Consistent copies of database files, for backups (check G6).

A live file is never copied as it lies: its last commits may still sit in the -wal, and
a writer may change pages mid-copy. An open ``Database`` copies itself on its own thread,
where no other job can write meanwhile, right after a TRUNCATE checkpoint has moved the
whole WAL into the main file. A closed file (a locked member's) is copied with its
sidecars, and the caller keeps it from being opened meanwhile. Either way the copy is the
file's own bytes: an encrypted database stays encrypted and no key is needed.
"""

import os
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

from .connection import Connection
from .errors import StorageError, disk_failure
from .permissions import PRIVATE_FILE_MODE

#: What SQLite needs beside a closed file to open it as it was; "-shm" is rebuilt.
DURABLE_SIDECARS = ("-wal", "-journal")
COPY_CHUNK = 1 << 20
T = TypeVar("T")


def copy_private(source: Path | int, destination: Path) -> None:
    """Copy ``source`` (a path, or a descriptor the caller opened and keeps) into a new
    0o600 file, flushed to disk; never overwrite."""
    fd = _writing(destination, os.open, destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as target, open(source, "rb", closefd=not isinstance(source, int)) as origin:
        while chunk := origin.read(COPY_CHUNK):
            _writing(destination, target.write, chunk)
        _writing(destination, target.flush)
        _writing(destination, os.fsync, target.fileno())


def _writing(destination: Path, write: Callable[..., T], *args: Any) -> T:
    """A write to the copy: a full (or failing) disk there is said as the copy's, not
    as the source database's (a backup to a full disk once "blamed" system.db)."""
    try:
        return write(*args)
    except OSError as error:
        failure = disk_failure(error, destination)
        if failure is None:
            raise
        raise failure from error


class HeldFile:
    """A read descriptor to an open database's file, kept until the last ``Database`` on
    that file closes: the only descriptor this process reads the live file through.

    On Linux, closing *any* descriptor of a file drops every POSIX lock the process holds
    on it, SQLite's included. A backup that opened the live file by name and closed it
    left the server lockless: another program's connection then deleted the -wal the
    server was still committing into, and a crash lost those commits (admin probe). So
    the copy reads through this descriptor, opened once and closed only when no
    connection of this process is left on the file (SQLite defers its own closes the
    same way)."""

    _lock = threading.Lock()
    _held: dict[tuple[int, int], "HeldFile"] = {}

    def __init__(self, key: tuple[int, int], fd: int) -> None:
        self.key, self.fd, self.users = key, fd, 0

    @classmethod
    def hold(cls, path: Path) -> "HeldFile":
        """After the connection opened ``path``: the file's descriptor, shared by every
        ``Database`` on it. A stat names the file without opening (and so without ever
        closing) a second descriptor to it."""
        info = os.stat(path)
        key = (info.st_dev, info.st_ino)
        with cls._lock:
            held = cls._held.get(key)
            if held is None:
                held = cls._held[key] = cls(key, os.open(path, os.O_RDONLY | os.O_CLOEXEC))
            held.users += 1
            return held

    def release(self) -> None:
        """After the connection closed: the descriptor goes with the file's last user."""
        with self._lock:
            self.users -= 1
            if self.users == 0:
                del self._held[self.key]
                os.close(self.fd)


def copy_held(held: HeldFile, destination: Path) -> None:
    """``copy_private`` from a held descriptor, by offset (two copies of one file on two
    threads share it), leaving it open."""
    fd = _writing(destination, os.open, destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as target:
        offset = 0
        while chunk := os.pread(held.fd, COPY_CHUNK, offset):
            _writing(destination, target.write, chunk)
            offset += len(chunk)
        _writing(destination, target.flush)
        _writing(destination, os.fsync, target.fileno())


def checkpoint_and_copy(conn: Connection, *, path: Path, held: HeldFile, destination: Path) -> None:
    """Runs as a job on the database's thread (``Database.snapshot``)."""
    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise StorageError(
            f"{path}: another connection is reading or writing it, so it cannot be copied "
            "consistently now (is a second process using the data dir?)"
        )
    copy_held(held, destination)


def copy_closed_database(path: Path, destination: Path) -> None:
    """A closed database and the sidecars that hold its last commits (a WAL left by a
    crash is replayed when the copy is opened)."""
    copy_private(path, destination)
    for suffix in DURABLE_SIDECARS:
        sidecar = Path(f"{path}{suffix}")
        if sidecar.exists():
            copy_private(sidecar, Path(f"{destination}{suffix}"))

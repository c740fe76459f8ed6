"""One server per data dir.

Two processes on one data dir would each think they own every member's file (one
connection per file is what keeps a transaction from interleaving and a backup's copy
consistent). ``skald serve`` and an offline ``skald backup`` hold an exclusive
``flock`` on ``<data dir>/.skald.lock`` for as long as they run; the kernel drops it
when the process dies, so a crash never leaves a stale lock.
"""

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".skald.lock"
CONTROL_SOCKET = "control.sock"
#: Files that describe the running process, not data: a backup leaves them out.
RUNTIME_FILES = (LOCK_FILE, CONTROL_SOCKET)


class DataDirBusy(Exception):
    """Another process holds the data dir; ``pid`` is the one it wrote, if readable."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        self.pid = pid
        who = f"process {pid}" if pid and pid > 0 else "another process"
        super().__init__(f"{data_dir} is in use by {who} (a running skald serve?)")


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "DataDirLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = holder(self.path.parent)
            os.close(fd)
            raise DataDirBusy(self.path.parent, pid) from None
        os.ftruncate(fd, 0)
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the pid only names the holder in a refusal; the lock is the flock (a full disk says so later, once)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "DataDirLock":
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


def holder(data_dir: Path) -> int | None:
    """The pid of the process holding ``data_dir``, or None when nobody holds it."""
    path = data_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

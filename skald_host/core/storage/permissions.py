"""Private files and directories for the data dir.

Owner files hold members' conversations and system.db holds the registry: neither may be
readable by other local users. We set modes per path instead of calling ``os.umask``,
which is process-wide and would race with every other thread creating files.
"""

import os
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def secure_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) and make it 0o700; return it.

    Only the leaf is tightened: an existing parent such as the user's home is not ours to
    change. An existing leaf is tightened too, so a data dir created by hand is fixed:
    call this for the data dir and folders inside it only (``make_private_dir`` for a
    folder elsewhere, which may be anyone's).
    """
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR_MODE)
    return path


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with the leaf 0o700 when it is missing; an
    existing folder is left as it is. For folders outside the data dir that a setting
    names (``log.file: /tmp/skald.log``): ``secure_dir`` there once made /tmp 0o700 at
    every start. Only a folder Skald creates is Skald's to make private."""
    try:
        path.mkdir(mode=PRIVATE_DIR_MODE, parents=True)
    except FileExistsError:
        return path
    os.chmod(path, PRIVATE_DIR_MODE)  # a umask may have taken bits away; none are added
    return path


def create_private_file(path: Path) -> bool:
    """Create an empty 0o600 file unless one exists; return whether we created it.

    Creating it ourselves (``O_EXCL`` with the mode given at creation) leaves no moment in
    which the file is world-readable, and SQLite then opens it with ``mode=rw``; SQLite
    gives its -wal/-shm/-journal files the same mode as the database file.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # a umask such as 0o277 would have taken bits away
    finally:
        os.close(fd)
    return True


def fsync_dir(path: Path) -> None:
    """Flush a directory entry change (create, rename) so it survives a power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

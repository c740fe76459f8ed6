"""Moving a broken database aside, never deleting it.

A file that will not open may still hold a member's only copy of their history (a key
problem, a bug in a migration): it is kept for the operator, who decides what to do.
Only deleting its member removes it (``remove_entries_of``).
"""

import os
import re
import shutil
from collections.abc import Mapping
from typing import Any
from datetime import UTC, datetime
from itertools import count
from pathlib import Path

from .permissions import fsync_dir, secure_dir

# Sidecars move before the main file: if we crash halfway, what is left at the old place
# is the main file (quarantined again next time), never a stale -wal that SQLite would
# replay into a newly created database of the same name.
SIDECAR_SUFFIXES = ("-journal", "-wal", "-shm")
QUARANTINE_DIR = "quarantine"


def quarantine(path: Path, reason: str, companions: Mapping[str, bytes] | None = None) -> Path:
    """Move ``path`` and its -wal/-shm/-journal into ``path.parent / "quarantine"``.

    Names are ``{stem}.{UTC yyyymmddThhmmssZ}.{reason-slug}{suffix}`` plus the sidecar's
    suffix, so the moved set still opens together; a counter is added rather than
    overwriting anything. Returns the main file's new path. The database must be closed.

    ``companions`` are written (0o600, flushed) as ``{new stem}{suffix}`` *before* the
    file moves: what is needed to open it (an admin reset's wrapped key) is never missing
    beside it, whenever a crash comes. A crash between the two leaves the file in place
    (quarantined again, under a new name, on the next try) and a companion without a
    file: a copy, never the only one.
    """
    if not path.is_file():
        raise FileNotFoundError(f"cannot quarantine {path}: no such file")
    target_dir = secure_dir(path.parent / QUARANTINE_DIR)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    slug = re.sub(r"[^a-z0-9]+", "-", reason.lower()).strip("-")[:48] or "unspecified"
    sidecars = {
        suffix: path.with_name(path.name + suffix)
        for suffix in SIDECAR_SUFFIXES
        if path.with_name(path.name + suffix).exists()
    }
    for attempt in count():
        stem = f"{path.stem}.{stamp}.{slug}" + (f".{attempt}" if attempt else "")
        target = target_dir / f"{stem}{path.suffix}"
        targets = [target] + [target.with_name(target.name + s) for s in sidecars]
        targets += [target_dir / f"{stem}{suffix}" for suffix in companions or {}]
        if not any(os.path.lexists(t) for t in targets):
            break
    for suffix, content in (companions or {}).items():
        write_private_file(target_dir / f"{stem}{suffix}", content)
    for suffix, sidecar in sidecars.items():
        _move_without_overwriting(sidecar, target.with_name(target.name + suffix))
    _move_without_overwriting(path, target)
    fsync_dir(target_dir)
    fsync_dir(path.parent)
    return target


def write_private_file(path: Path, content: bytes) -> None:
    """A new 0o600 file holding ``content``, flushed with its directory entry: written
    under a temporary name and linked into place, so ``path`` is either absent or whole,
    and an existing file there is never replaced."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        _move_without_overwriting(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    fsync_dir(path.parent)


def _move_without_overwriting(source: Path, destination: Path) -> None:
    """``rename`` would silently replace an existing destination; a hard link cannot.

    On a filesystem without hard links, fall back to a checked rename (the name was just
    found free, so only a concurrent quarantine of the same file in the same second races).
    """
    try:
        os.link(source, destination)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(destination):
            raise FileExistsError(f"{destination} exists; refusing to overwrite it") from None
        os.rename(source, destination)
        return
    os.unlink(source)


# -- a member's deletion -------------------------------------------------------------
# The quarantine holds a deleted member's data too: the old database, home (in clear)
# and projects of an admin reset, a file set aside as unreadable, their sidecars. Every
# entry of a member is named ``<member id>.<time>.<reason>...``, so ``<id>.`` finds them
# all. Deleting the member removes them; a mark written before the registry commit lets
# the next start finish a deletion a stop cut short (``UserManager.reconcile``), as an
# orphan home is (``FileService``): the mark tells a deleted member's entries from those
# of a file found unregistered, which are kept for the operator. In the registry
# transaction that deletes the member the mark is given a note (``write_deletion_note``):
# what finishing the deletion needs that the commit takes away (which of the member's
# projects others belong to), so a deletion finished at the next start does the same.

DELETION_MARK_SUFFIX = ".deleting"


def deletion_mark(quarantine_dir: Path, member_id: str) -> Path:
    return quarantine_dir / f"{member_id}{DELETION_MARK_SUFFIX}"


def mark_deletion(quarantine_dir: Path, member_id: str) -> None:
    """Durably, before the registry forgets the member."""
    secure_dir(quarantine_dir)
    fd = os.open(deletion_mark(quarantine_dir, member_id), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(quarantine_dir)


def write_deletion_note(quarantine_dir: Path, member_id: str, note: bytes) -> None:
    """Replace the mark by one holding ``note``, whole or not at all (a temporary file
    flushed and renamed over it): the mark is there throughout, as before."""
    mark = deletion_mark(quarantine_dir, member_id)
    temporary = mark.with_name(f"{member_id}.deleting-note.tmp")  # ``<id>.``: a stray one goes with the member
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(note)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, mark)
    fsync_dir(quarantine_dir)


def read_deletion_note(quarantine_dir: Path, member_id: str) -> bytes:
    """The mark's note; empty for a mark without one (written by a version before
    notes, or the commit never came)."""
    try:
        fd = os.open(deletion_mark(quarantine_dir, member_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    with os.fdopen(fd, "rb") as mark:
        return mark.read()


def unmark_deletion(quarantine_dir: Path, member_id: str) -> None:
    deletion_mark(quarantine_dir, member_id).unlink(missing_ok=True)


def marked_deletions(quarantine_dir: Path) -> list[str]:
    """The member ids whose deletion mark is there (a deletion under way or cut short)."""
    if not quarantine_dir.is_dir():
        return []
    return sorted(p.name.removesuffix(DELETION_MARK_SUFFIX) for p in quarantine_dir.glob(f"*{DELETION_MARK_SUFFIX}")
                  if re.fullmatch(r"[0-9a-f]{32}", p.name.removesuffix(DELETION_MARK_SUFFIX)))


def remove_entries_of(quarantine_dir: Path, member_id: str, *, keep_mark: bool = False) -> list[str]:
    """Remove everything of ``member_id`` in the quarantine (files, folders whole, links
    as links, never followed), the deletion mark last, so a failure midway is taken up
    again at the next start. Returns the names removed. Raises OSError when one cannot
    be removed (the mark then stays)."""
    if not re.fullmatch(r"[0-9a-f]{32}", member_id):  # the id names files: never a pattern or a path
        raise ValueError(f"not a member id: {member_id!r}")
    if not quarantine_dir.is_dir():
        return []
    mark = deletion_mark(quarantine_dir, member_id)
    removed = []
    for entry in sorted(quarantine_dir.iterdir()):
        if not entry.name.startswith(member_id + ".") or entry == mark:
            continue
        erase_tree(entry)
        removed.append(entry.name)
    fsync_dir(quarantine_dir)
    if not keep_mark:  # kept: something else of the deletion is still to finish
        mark.unlink(missing_ok=True)
        fsync_dir(quarantine_dir)
    return removed


def erase_tree(path: Path) -> None:
    """Remove ``path`` for good: a folder with all it holds, a file, a link as a link.

    Nothing is followed out: ``rmtree`` opens every folder without following links (and
    refuses a tree whose top is a link), so a link a sandbox left inside goes as a link.
    A read-only file goes as any other (removing needs its folder's write bit, not its
    own); a folder without its write or search bit (a sandbox may ``chmod 500`` one) is
    opened up, by descriptor and without following a link swapped in, and tried again.
    Raises OSError when something still cannot be removed."""
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return

    def open_up_and_retry(function: Any, failed: str, error: Any) -> None:
        if not isinstance(error[1], PermissionError):
            raise error[1]
        # The folder the entry is in (removal) or the folder itself (listing it).
        folder = failed if function in (os.open, os.scandir, os.listdir) else os.path.dirname(failed)
        # O_PATH opens a folder without its read bit (mode 000, 300), which O_RDONLY
        # cannot; such a descriptor takes no fchmod, so the mode is set through its
        # /proc link, which names exactly the folder opened, not a link swapped in.
        fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.chmod(f"/proc/self/fd/{fd}", 0o700)
        finally:
            os.close(fd)
        if function in (os.open, os.scandir, os.listdir):
            shutil.rmtree(failed)  # its content now opens; links in it still go as links
        else:
            function(failed)  # os.unlink or os.rmdir, by its full path

    shutil.rmtree(path, onerror=open_up_and_retry)

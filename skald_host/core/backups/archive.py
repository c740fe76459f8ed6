"""A backup on disk, and restoring one (check G6).

``skald-backup-<UTC stamp>/`` holds ``data/``, the data dir as it was (databases copied
consistently by ``service.py``, everything else file by file, owners, modes and
modification times kept),
and ``manifest.json``: every entry's type, mode, owner, and for a file its size and
SHA-256. Nothing here needs a member's key: encrypted files are copied as they are, so a
backup is exactly as private as the data dir, and as sensitive (it holds the wrapped
keys; anyone who has it and a member's password has that member's data).

Restoring checks every entry against the manifest before anything is written, then
copies into a data dir that holds nothing yet, under a temporary name renamed at the end:
a restore either completes or leaves no data dir behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skald_host.core.storage.permissions import PRIVATE_DIR_MODE, fsync_dir, secure_dir
from skald_host.core.storage.snapshot import COPY_CHUNK, copy_private

FORMAT = "skald-backup/1"
MANIFEST = "manifest.json"
DATA = "data"
NAME_PREFIX = "skald-backup-"
PARTIAL_SUFFIX = ".partial"

#: A backup's ``kind`` in its manifest. ``backup.keep`` removes only scheduled ones: a
#: backup taken by hand (``skald backup``, "Back up now") is the one an admin took
#: before an upgrade to go back to, and a schedule must never take it away. A manifest
#: written before kinds were recorded has none (``BackupInfo.kind`` None): nobody can
#: tell it was scheduled, so it is never removed automatically either.
SCHEDULED = "scheduled"
MANUAL = "manual"
KINDS = (SCHEDULED, MANUAL)


class BackupError(Exception):
    """A backup that cannot be taken, or one that is not whole or not ours; the
    message names the file. ``code`` and ``values`` let the admin page say it in the
    reader's language (the message, for the operator, is its ``reason``)."""

    code = "backup_failed"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.values = {"reason": message}


class BackupBusy(BackupError):
    """One backup at a time: another is being taken."""

    code = "backup_busy"


@dataclass(frozen=True)
class BackupInfo:
    path: Path
    created_at: str
    files: int
    bytes: int
    members: int
    skipped: tuple[dict[str, str], ...] = ()
    #: ``SCHEDULED``, ``MANUAL``, or None (a backup from before kinds were recorded).
    kind: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.path.name,
            "path": str(self.path),
            "created_at": self.created_at,
            "files": self.files,
            "bytes": self.bytes,
            "members": self.members,
            "skipped": list(self.skipped),
            "kind": self.kind,
        }


def backup_name(now: datetime | None = None) -> str:
    return NAME_PREFIX + (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")


#: Folders nested deeper than this are not copied (and said so): the walk holds one
#: descriptor per level, and a tree that deep is a member's doing, never the host's.
MAX_DEPTH = 200
_NO_FOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def copy_tree(source: Path, target: Path, *, exclude: Callable[[str], bool] = lambda _: False) -> list[dict[str, str]]:
    """Copy the tree under ``source`` into the existing directory ``target``, keeping
    modes and times (and owners, as root). Links are copied as links, never followed: a member's
    home may hold one to anywhere. ``exclude`` gets paths relative to ``source``.
    Returns what could not be copied, each with the reason.

    Walked by descriptor, never by name: a member's sandbox renames and links in their
    home while this runs, so an entry checked by name may be a link to anywhere when it
    is opened (a security probe had host files copied into backups, as the member's own,
    by swapping links in a loop). Each entry is opened from its folder's descriptor with
    ``O_NOFOLLOW`` and judged by what was opened; a FIFO or device is never opened. An
    entry that cannot be copied (a name too long, a tree too deep) is skipped and said,
    never the end of the backup."""
    skipped: list[dict[str, str]] = []
    try:
        root = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return skipped
    # One frame per open folder on the way down: its descriptor, its relative path,
    # the names still to copy, and what it was (its metadata is set once it is filled).
    frames: list[tuple[int, str, list[str], os.stat_result | None]] = []

    def enter(fd: int, relative: str, info: os.stat_result | None) -> None:
        try:
            names = sorted(os.listdir(fd), reverse=True)
        except OSError as error:
            skipped.append({"path": relative or ".", "reason": f"cannot list: {error.strerror}"})
            names = []
        frames.append((fd, relative, names, info))

    enter(root, "", None)
    while frames:
        fd, relative, names, info = frames[-1]
        if not names:
            frames.pop()
            os.close(fd)
            if info is not None:
                _keep_metadata(target / relative, info)
            continue
        name = names.pop()
        rel = f"{relative}/{name}" if relative else name
        if exclude(rel):
            continue
        try:
            inner = _copy_entry(fd, name, target / rel, rel, skipped, deep=len(frames) > MAX_DEPTH)
        except FileNotFoundError:
            continue  # gone since the listing: it was not there to keep
        except OSError as error:  # a link swapped in (ELOOP), a name too long, no permission...
            skipped.append({"path": rel, "reason": f"cannot copy: {error.strerror or type(error).__name__}"})
            continue
        if inner is not None:
            enter(inner[0], rel, inner[1])
    return skipped


def _copy_entry(
    folder: int, name: str, destination: Path, rel: str, skipped: list[dict[str, str]], *, deep: bool,
) -> tuple[int, os.stat_result] | None:
    """Copy one entry of the folder open as ``folder``; for a folder, its descriptor and
    what it is, for the walk to enter."""
    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(name, dir_fd=folder), destination)
        _keep_metadata(destination, info)
        return None
    if stat.S_ISDIR(info.st_mode):
        if deep:
            skipped.append({"path": rel, "reason": f"nested deeper than {MAX_DEPTH} folders"})
            return None
        fd = os.open(name, _NO_FOLLOW | os.O_DIRECTORY, dir_fd=folder)
        try:
            opened = os.fstat(fd)
            destination.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
        except BaseException:
            os.close(fd)
            raise
        return fd, opened
    if not stat.S_ISREG(info.st_mode):
        skipped.append({"path": rel, "reason": "not a regular file, directory or link"})
        return None
    # O_NONBLOCK: a FIFO swapped in after the stat must not hang the backup.
    fd = os.open(name, _NO_FOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=folder)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            skipped.append({"path": rel, "reason": "not a regular file, directory or link"})
            return None
        os.set_blocking(fd, True)
        copy_private(fd, destination)
    finally:
        os.close(fd)
    _keep_metadata(destination, opened)
    return None


def _keep_metadata(path: Path, info: os.stat_result) -> None:
    """Owner, mode and times as the original had them. Times matter to members: a
    project's "Changed" column reads a file's mtime, and a backup and restore that
    stamp every file with its own time erase when anything was last worked on. Times go
    last, since writing a file or adding to a folder moves them (a folder's entries are
    all copied before this is called for it)."""
    if os.geteuid() == 0:
        os.chown(path, info.st_uid, info.st_gid, follow_symlinks=False)
    if not stat.S_ISLNK(info.st_mode):
        os.chmod(path, stat.S_IMODE(info.st_mode))
    if stat.S_ISLNK(info.st_mode) and os.utime not in os.supports_follow_symlinks:
        return  # a platform that cannot set a link's own times: never touch its target's
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def inventory(root: Path) -> list[dict[str, Any]]:
    """Every entry under ``root`` (relative paths, sorted), as the manifest lists them."""
    entries: list[dict[str, Any]] = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs) + sorted(files):
            path = Path(directory) / name
            info = path.lstat()
            entry: dict[str, Any] = {
                "path": path.relative_to(root).as_posix(),
                "mode": stat.S_IMODE(info.st_mode),
                "uid": info.st_uid,
                "gid": info.st_gid,
            }
            if stat.S_ISLNK(info.st_mode):
                entry.update(type="link", target=os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                entry.update(type="dir")
            else:
                entry.update(type="file", size=info.st_size, sha256=sha256_of(path))
            entries.append(entry)
    entries.sort(key=lambda e: e["path"])
    return entries


def write_manifest(
    backup: Path, *, created_at: str, members: list[str], skipped: list[dict[str, str]], extra: dict[str, Any], kind: str,
) -> BackupInfo:
    if kind not in KINDS:
        raise ValueError(f"a backup's kind is one of {KINDS}, not {kind!r}")
    entries = inventory(backup / DATA)
    manifest = {
        "format": FORMAT, "created_at": created_at, "kind": kind, "members": members, "entries": entries,
        "skipped": skipped, **extra,
    }
    path = backup / MANIFEST
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    return _info(backup, manifest)


def _info(backup: Path, manifest: dict[str, Any]) -> BackupInfo:
    files = [e for e in manifest["entries"] if e["type"] == "file"]
    return BackupInfo(
        path=backup,
        created_at=manifest["created_at"],
        files=len(files),
        bytes=sum(e["size"] for e in files),
        members=len(manifest["members"]),
        skipped=tuple(manifest.get("skipped", ())),
        kind=manifest["kind"] if manifest.get("kind") in KINDS else None,
    )


def read_manifest(backup: Path) -> dict[str, Any]:
    if not backup.is_dir():  # a mistyped path is not "an unfinished backup"
        raise BackupError(f"{backup} does not exist" if not backup.exists() else f"{backup} is not a backup folder")
    try:
        manifest = json.loads((backup / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackupError(f"{backup} is not a Skald backup: it has no {MANIFEST} (an unfinished backup ends in {PARTIAL_SUFFIX})") from None
    except (OSError, ValueError) as error:
        raise BackupError(f"{backup / MANIFEST} cannot be read: {error}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise BackupError(f"{backup / MANIFEST}: format {found!r} is not {FORMAT!r}")
    return manifest


def verify(backup: Path) -> BackupInfo:
    """Check every entry against the manifest: nothing missing, changed or added."""
    manifest = read_manifest(backup)
    expected = {e["path"]: e for e in manifest["entries"]}
    found = {e["path"]: e for e in inventory(backup / DATA)} if (backup / DATA).is_dir() else {}
    for path, entry in expected.items():
        actual = found.get(path)
        if actual is None:
            raise BackupError(f"{backup}: {DATA}/{path} is missing")
        if actual["type"] != entry["type"]:
            raise BackupError(f"{backup}: {DATA}/{path} is a {actual['type']}, the manifest says {entry['type']}")
        if entry["type"] == "file" and (actual["size"], actual["sha256"]) != (entry["size"], entry["sha256"]):
            raise BackupError(f"{backup}: {DATA}/{path} does not match its checksum (damaged or altered)")
        if entry["type"] == "link" and actual["target"] != entry["target"]:
            raise BackupError(f"{backup}: {DATA}/{path} points elsewhere than the manifest says")
    extra = sorted(set(found) - set(expected))
    if extra:
        raise BackupError(f"{backup}: {DATA}/{extra[0]} is not in the manifest (added after the backup)")
    return _info(backup, manifest)


def restore(backup: Path, data_dir: Path) -> BackupInfo:
    """Verify ``backup``, then make ``data_dir`` (which must not hold anything) a copy
    of its data. Run with the server stopped; start it on ``data_dir`` afterwards."""
    info = verify(backup)
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise BackupError(f"{data_dir} is not empty: restore into a new data dir (nothing is overwritten)")
    staging = data_dir.with_name(data_dir.name + ".restoring")
    if staging.exists():
        raise BackupError(f"{staging} exists: an earlier restore was interrupted; remove it and try again")
    secure_dir(staging)
    try:
        skipped = copy_tree(backup / DATA, staging)
        if skipped:
            raise BackupError(f"{backup}: {DATA}/{skipped[0]['path']}: {skipped[0]['reason']}")
        if data_dir.exists():
            data_dir.rmdir()  # empty, checked above
        os.rename(staging, data_dir)
        fsync_dir(data_dir.parent)
    except BaseException:
        _remove_tree(staging)
        raise
    return info


def list_backups(root: Path) -> list[BackupInfo]:
    """Completed backups under ``root``, newest first; unreadable ones are left out."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        if path.name.startswith(NAME_PREFIX) and not path.name.endswith(PARTIAL_SUFFIX) and path.is_dir():
            try:
                found.append(_info(path, read_manifest(path)))
            except BackupError:
                continue
    return sorted(found, key=lambda b: b.path.name, reverse=True)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

"""``BackupService`` (``Skald.backups``): online backups of the whole data dir (check G6).

A backup runs while members chat. Its point in time is system.db's copy: members'
files are copied after it, each consistently (``Database.snapshot`` for an open file,
a copy under the unlock lock for a closed one), while deletes and admin resets wait
(``UserManager.membership_changes``), so every member in the copied registry has a
file made with the key the registry wraps. A member created meanwhile is in neither.
The other files (homes, folders, quarantine) are copied file by file as they are.

A backup is written as ``skald-backup-<stamp>.partial`` and renamed when whole. Its
writer holds an ``flock`` on the ``.writing`` file inside it until then; the kernel
drops it when the writer dies, so anyone (the next backup, a restart, ``skald backup
--list``) tells an unfinished backup a killed server left from one being written now.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from skald_host.core.backups.archive import (
    DATA,
    MANIFEST,
    MANUAL,
    NAME_PREFIX,
    PARTIAL_SUFFIX,
    SCHEDULED,
    BackupBusy,
    BackupError,
    BackupInfo,
    backup_name,
    copy_tree,
    list_backups,
    now_iso,
    write_manifest,
)
from skald_host.core.faults import crash_point
from skald_host.core.storage.data_dir_lock import RUNTIME_FILES
from skald_host.core.storage.permissions import fsync_dir, secure_dir

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

#: Top-level files of ``database/`` that ``service.py`` copies consistently itself.
_DATABASE_FILE = re.compile(r"^database/(system|[0-9a-f]{32})\.db(-wal|-shm|-journal)?$")


class BackupFolderUnusable(BackupError):
    """The folder for backups cannot be made (``backup.dir: /proc/skald-b``, a read-only
    disk). A ``BackupError`` like any failed backup, so the schedule logs it and tries
    again at its next slot, the control socket answers it, and the API can say it by
    ``code`` (``error.backup_dir_unusable``) with the folder in ``values``."""

    code = "backup_dir_unusable"

    def __init__(self, root: Path, error: OSError) -> None:
        super().__init__(
            f"the folder for backups {root} cannot be made: {error.strerror or error}"
            " (set backup.dir, or skald backup --to, to a folder this user can write)"
        )
        self.values = {"dir": str(root)}


class BackupTargetMissing(BackupError):
    """A folder named for one backup (``skald backup --to /mnt/elsewhere``) that does not
    exist. Never made: a USB disk that is not mounted leaves its mount point missing (or
    empty on the same disk), and the "off-site" copy would land beside the data. Only
    the configured ``backup.dir`` is made when missing (``remove_partials``)."""

    code = "backup_target_missing"

    def __init__(self, root: Path) -> None:
        super().__init__(f"the folder {root} does not exist: is the disk mounted? Create it first, then run the backup again")
        self.values = {"dir": str(root)}


class BackupService:
    def __init__(self, core: Skald) -> None:
        self._core = core
        self._running = asyncio.Lock()

    @property
    def root(self) -> Path:
        return self._core.settings.resolve(self._core.settings.backup.dir)

    async def list(self) -> list[BackupInfo]:
        return await asyncio.to_thread(list_backups, self.root)

    async def take(self, root: Path | None = None, *, scheduled: bool = False) -> BackupInfo:
        """Take a backup into ``root`` (default: the configured directory), then keep
        the newest ``backup.keep`` scheduled ones there. ``scheduled``: only the
        schedule says so; every other caller (``skald backup``, the admin page) takes
        one by hand, which nothing removes automatically (``_prune``). Raises
        BackupError if one is running or this one failed; a failed one leaves nothing
        behind."""
        if self._running.locked():
            raise BackupBusy("a backup is already being taken; wait for it to finish")
        async with self._running:
            named = root
            root = root or self.root
            check_backup_root(self._core.settings.data_dir, root)  # a server's folder first: that is what is wrong with it
            if named is not None and not named.is_dir():
                raise BackupTargetMissing(named)
            started = time.monotonic()
            _log_unfinished(await asyncio.to_thread(remove_partials, root), "that stopped before they were whole")
            try:
                staging, writing = await asyncio.to_thread(start_partial, root)
            except OSError as error:
                raise BackupError(f"the backup cannot be started in {root}: {error}") from error
            try:
                try:
                    info = await self._take(staging, SCHEDULED if scheduled else MANUAL)
                    final = staging.with_name(staging.name.removesuffix(PARTIAL_SUFFIX))
                    staging.rename(final)
                    fsync_dir(root)
                except BaseException as error:
                    await asyncio.to_thread(shutil.rmtree, staging, True)
                    if isinstance(error, (BackupError, asyncio.CancelledError, KeyboardInterrupt)):
                        raise
                    raise BackupError(f"the backup failed and was removed: {error}") from error
                (final / WRITING).unlink(missing_ok=True)  # whole now: the mark goes, then the lock
            finally:
                os.close(writing)
            info = replace(info, path=final)
            log.info(
                "backup %s taken: %d members, %d files, %d bytes, %.1f s%s", final.name, info.members, info.files,
                info.bytes, time.monotonic() - started, f", {len(info.skipped)} entries skipped" if info.skipped else "",
            )
            for item in info.skipped:
                log.warning("backup %s: %s not copied: %s", final.name, item["path"], item["reason"])
            await asyncio.to_thread(_prune, root, self._core.settings.backup.keep)
            return info

    async def _take(self, staging: Path, kind: str) -> BackupInfo:
        from skald_host.core.host import host_version  # the host imports this module

        core = self._core
        data_dir = core.settings.data_dir
        database = secure_dir(staging / DATA / "database")
        secure_dir(staging)
        created_at = now_iso()
        missing: list[dict[str, str]] = []
        async with core.users.membership_changes:
            await core.registry.snapshot(database / "system.db")
            members = await asyncio.to_thread(_member_ids, database / "system.db")
            for member_id in members:
                try:
                    await core.users.snapshot_owner(member_id, database / f"{member_id}.db")
                except FileNotFoundError:  # reported at boot; an admin reset makes a new one
                    missing.append({"path": f"database/{member_id}.db", "reason": "this member has no database file"})
        left_out, earlier = _left_out(core, (self.root, staging.parent))
        skipped = missing + await asyncio.to_thread(copy_tree, data_dir, staging / DATA, exclude=left_out)
        skipped += earlier
        crash_point("backup.before_manifest")  # durability tests: killed with every file copied, none summed
        return await asyncio.to_thread(
            write_manifest, staging, created_at=created_at, members=members, skipped=skipped, kind=kind,
            extra={"skald_version": host_version(), "registry_schema": core.registry.schema_version},
        )

    def start_schedule(self) -> None:
        """Called by the server once it serves (not by CLI commands that start the core)."""
        if self._core.safe_mode:
            # A restored copy's settings name the live server's backup folder: its
            # schedule would add backups there, its retention remove the live ones, and
            # its cleanup the live server's backup under way (``Skald.safe_mode``).
            log.warning("safe mode: no scheduled backups (a backup by hand still works)")
            return
        self._core.supervisor.spawn("unfinished-backups", self.remove_unfinished())
        if self._core.settings.backup.every_hours > 0:
            self._core.supervisor.spawn("scheduled-backups", self.run_schedule())

    async def remove_unfinished(self) -> None:
        """The unfinished backup a killed server was taking: a full copy of the wrapped
        keys and every member's file, left until the next backup (never, with no
        schedule). Under the backup lock, as ``take``."""
        if self._running.locked():
            return  # a backup already started: it removes them itself
        async with self._running:
            found = await asyncio.to_thread(remove_partials, self.root, make=False)
        _log_unfinished(found, "a stopped server left behind")

    async def run_schedule(self) -> None:
        """Take one every ``backup.every_hours``, counted from the newest one there, so
        a restart neither skips nor doubles one. A failure is logged and retried at the
        next slot."""
        every = self._core.settings.backup.every_hours * 3600
        stopping = self._core.stopping
        while not stopping.is_set():
            existing = await self.list()
            last = _parse_stamp(existing[0].path.name) if existing else None
            wait = max(0.0, every - (time.time() - last)) if last else 0.0
            try:
                await asyncio.wait_for(stopping.wait(), wait)
                return
            except TimeoutError:
                pass
            try:
                await self.take(scheduled=True)
            except BackupError as error:
                log.error("scheduled backup: %s", error)
                try:
                    await asyncio.wait_for(stopping.wait(), every)
                    return
                except TimeoutError:
                    pass


#: Folders of the data dir the server writes itself: a backup never goes into one (a
#: member's home or a shared folder is readable from a sandbox; the others are the
#: server's own), and the folder holding backups is never one of them.
SERVER_AREAS = ("database", "homes", "shared", "projects", "trash", "logs")


def check_backup_root(data_dir: Path, root: Path) -> None:
    """Refuse a folder for backups that is the data dir or inside a folder the server
    writes (checked when settings load, and for every backup, ``--to`` included)."""
    data_dir, root = data_dir.resolve(), root.resolve()
    if root == data_dir:
        raise BackupError("backups cannot go into the data dir itself; set backup.dir to a directory of their own")
    if root.is_relative_to(data_dir):
        area = root.relative_to(data_dir).parts[0]
        if area in SERVER_AREAS:
            raise BackupError(f"backups cannot go into {root}: {area}/ in the data dir is the server's; choose a directory of their own")


def _is_backup(path: Path) -> bool:
    """A backup's own directory, finished (it holds a manifest) or not (``.partial``)."""
    if not path.name.startswith(NAME_PREFIX) or path.is_symlink() or not path.is_dir():
        return False
    return path.name.endswith(PARTIAL_SUFFIX) or (path / MANIFEST).is_file()


def _left_out(core: Skald, backup_roots: Iterable[Path]) -> tuple[Callable[[str], bool], list[dict[str, str]]]:
    """Whether a path (relative to the data dir) is not copied as a file: the databases
    (copied consistently before), the process's lock and socket, the log file and its
    rotations (``skald.log.1``, ...), and never a backup: the folders backups go into
    (the configured one and this backup's target, when inside the data dir) are left
    out whole, and any other backup found on the way (one an earlier ``--to`` put
    elsewhere in the data dir) is left out and named in the returned list, which fills
    as the copy walks."""
    data_dir = core.settings.data_dir.resolve()
    earlier: list[dict[str, str]] = []

    def inside(path: Path | None) -> str | None:
        try:
            return path.resolve().relative_to(data_dir).as_posix() if path is not None else None
        except ValueError:
            return None  # outside the data dir: not walked anyway

    roots = {rel for rel in map(inside, backup_roots) if rel is not None}
    exact = set(RUNTIME_FILES) | roots
    log_file = inside(core.settings.resolve(core.settings.log.file) if core.settings.log.file else None)

    def left_out(rel: str) -> bool:
        if rel in exact or _DATABASE_FILE.match(rel):
            return True
        # Backups never go into a server area (check_backup_root), so a backup-shaped
        # folder there is a member's own files and is copied like any other.
        if rel.split("/", 1)[0] not in SERVER_AREAS and _is_backup(data_dir / rel):
            earlier.append({"path": rel, "reason": "a backup: never copied into another"})
            return True
        return log_file is not None and (rel == log_file or rel.startswith(log_file + "."))

    return left_out, earlier


def _member_ids(registry_copy: Path) -> list[str]:
    # immutable: read the copy as it lies, creating no -wal or -shm inside the backup.
    conn = sqlite3.connect(f"{registry_copy.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT id FROM users ORDER BY id")]
    finally:
        conn.close()


#: Inside an unfinished backup: its writer holds an ``flock`` on it (see the module doc).
WRITING = ".writing"


def start_partial(root: Path) -> tuple[Path, int]:
    """A new, empty unfinished backup in the existing ``root``, and the descriptor that
    marks it as being written for as long as it is open (close it when the backup is
    renamed or removed). It never exists unmarked: it is made under a hidden name,
    marked, then renamed into place (a writer killed in between leaves that hidden
    folder, empty)."""
    staging = root / (backup_name() + PARTIAL_SUFFIX)
    hidden = root / ("." + staging.name)
    hidden.mkdir(mode=0o700)
    writing = -1
    try:
        os.chmod(hidden, 0o700)
        writing = os.open(hidden / WRITING, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(writing, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:  # a file system without locks: every look there fails alike, and keeps it
            log.warning("%s cannot be marked as being written (%s): nothing removes it while unfinished", staging, error.strerror)
        os.rename(hidden, staging)
    except BaseException:
        if writing >= 0:
            os.close(writing)
        shutil.rmtree(hidden, ignore_errors=True)
        raise
    return staging, writing


#: Why ``remove_partials`` keeps an unfinished backup whose writer runs.
BEING_WRITTEN = "a backup is writing it now"


@dataclass(frozen=True)
class Unfinished:
    """An unfinished backup ``remove_partials`` found: ``removed`` (no backup writes it
    any more), or kept, with ``reason``. ``bytes``: what it held when found."""

    path: Path
    bytes: int
    removed: bool
    reason: str = ""

    @property
    def being_written(self) -> bool:
        return self.reason == BEING_WRITTEN


def remove_partials(root: Path, *, make: bool = True) -> list[Unfinished]:
    """Remove the unfinished backups in ``root`` whose writer is gone (a server or a
    ``skald backup`` killed while taking them); keep, and return as kept, one being
    written now (by this server, another one, or an offline ``skald backup``: its writer
    holds the lock on its ``.writing``) and one whose lock cannot be tested. The one
    clean-up of unfinished backups: before each backup, at each start (``backup.dir``),
    and in the CLI (``--list``, ``skald backup``, after the server died under it).

    A missing ``root`` is made private (``make``); an existing one is the admin's
    (``--to /tmp``) and keeps its mode: each backup in it is private itself."""
    if make:
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise BackupFolderUnusable(root, error) from error
    elif not root.is_dir():
        return []
    found: list[Unfinished] = []
    for path in sorted(root.glob(NAME_PREFIX + "*" + PARTIAL_SUFFIX)):
        if path.is_symlink() or not path.is_dir():
            continue
        size = _tree_bytes(path)
        try:
            mark = os.open(path / WRITING, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            mark = -1  # made by a version that did not mark them: removed, as it did
        except OSError as error:
            found.append(Unfinished(path, size, False, f"cannot tell whether a backup is still writing it: {path / WRITING}: {error.strerror}"))
            continue
        try:
            if mark >= 0:
                fcntl.flock(mark, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while it goes: nobody takes it up again
            shutil.rmtree(path, ignore_errors=True)
        except OSError as error:
            busy = error.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            reason = BEING_WRITTEN if busy else f"cannot tell whether a backup is still writing it: {error.strerror}"
            found.append(Unfinished(path, size, False, reason))
            continue
        finally:
            if mark >= 0:
                os.close(mark)
        found.append(Unfinished(path, size, not path.exists(), "" if not path.exists() else "it could not be removed whole"))
    return found


def _tree_bytes(path: Path) -> int:
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                continue
    return total


def _log_unfinished(found: list[Unfinished], where: str) -> None:
    removed = [u for u in found if u.removed]
    if removed:
        log.info("removed %d unfinished backup(s) %s: %s", len(removed), where, ", ".join(str(u.path) for u in removed))
    for kept in (u for u in found if not u.removed and not u.being_written):
        log.warning("unfinished backup %s kept: %s", kept.path, kept.reason)


def _prune(root: Path, keep: int) -> None:
    """The scheduled backups beyond the newest ``keep``. Only those are counted and
    removed: one taken by hand (an admin's, before an upgrade, to go back to) stays
    until the admin removes it, and so does one whose manifest does not say its kind
    (written by an earlier version): what cannot be told scheduled is never removed."""
    scheduled = [info for info in list_backups(root) if info.kind == SCHEDULED]
    for info in scheduled[keep:]:
        shutil.rmtree(info.path, ignore_errors=True)
        log.info("scheduled backup %s removed (backup.keep is %d)", info.path.name, keep)


def _parse_stamp(name: str) -> float | None:
    try:
        return datetime.strptime(name.removeprefix(NAME_PREFIX), "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None

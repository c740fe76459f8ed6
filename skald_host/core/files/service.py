"""``FileService`` (``Skald.files``): members' home folders, their sandbox uids and
mounts, the agent namespace router and the one upload seam.

The agent sees one namespace routed on the first path component (seed 001
"Filesystem & containers"):

==========================  =============================================
``user-memory/…``           the member's private note store
``shared-memory/…``         the shared note store
``shared/{X}/…``            a shared folder the member belongs to
``projects/{O}/{S}/…``      a project the member belongs to
``~/…``, relative           the member's home folder
any other absolute path     inside the member's sandbox
==========================  =============================================

Home spellings (``./``, ``~/``, ``/root/``, ``/home/member/``) are stripped first, so
``~/user-memory/x.md`` is a note and ``/home/member/shared/X/a`` is the shared folder,
exactly like the sandbox shows them. A folder the member does not belong to answers
"no such folder", the same as one that does not exist.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import re
import secrets
import shutil
import stat
import threading
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, AsyncIterator, Literal

from skald_hookspecs.types import ToolError
from skald_hookspecs.sandbox import Mount
from skald_host.core.faults import crash_point
from skald_host.core.files.paths import PathRefused, clean_relative, contain, open_dirs_inside
from skald_host.core.files.sniff import IMAGE_TYPES, sniff
from skald_host.core.folders.listing import CUT_WRITE, PARTIAL_UPLOAD
from skald_host.core.identity.users import MemberError
from skald_host.core.memory.notes import MEMORY_ROOTS, classify_memory  # noqa: F401 - MEMORY_ROOTS is re-exported for the sandbox
from skald_host.core.storage.errors import DiskFailure
from skald_host.core.refusal import Refusal
from skald_host.core.storage.permissions import fsync_dir

if TYPE_CHECKING:
    from skald_host.core.host import Skald
    from skald_host.core.identity.users import Member

log = logging.getLogger(__name__)

SANDBOX_HOME = "/home/member"
UPLOADS_DIR = "uploads"
FIRST_UID = 20000
UIDS_KEY = "files.uids"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
#: A member id (``identity.users._MEMBER_ID``), as a home folder is named.
_MEMBER_DIR = re.compile(r"^[0-9a-f]{32}$")
MAX_UPLOAD_NAME = 200
CHUNK = 1024 * 1024


class FileError(Refusal, ToolError):  # a ToolError: its message is fit for the model when a tool lets it through
    """A file operation that cannot be done; the message is fit for the agent and the member."""

    @classmethod
    def of(cls, refused: PathRefused) -> "FileError":
        """A refused path as a file error, keeping its code and values for the web shell."""
        return cls(str(refused), code=refused.code, **refused.values)


class UploadTooLarge(FileError):
    """``limit``: the upload cap it passed, or None when it is the member's home that is
    full (``left`` bytes to go), so the refusal can say which in the member's language."""

    def __init__(self, message: str, *, limit: int | None = None, left: int = 0) -> None:
        super().__init__(message)
        self.limit = limit
        self.left = max(left, 0)


@dataclass(frozen=True)
class Resolved:
    """Where one agent path goes.

    ``kind``: ``memory`` (``memory_root`` + ``memory_key`` name the note), ``host``
    (``host_path`` is canonical and inside ``base``; ``read_only`` for a membership
    without write access), ``sandbox`` (``sandbox_path`` is an absolute path inside the
    member's sandbox), or ``folders`` (the virtual ``shared/`` or ``projects/`` level
    that lists the member's memberships).
    """

    kind: Literal["memory", "host", "sandbox", "folders"]
    agent_path: str
    host_path: Path | None = None
    base: Path | None = None
    read_only: bool = False
    memory_root: str | None = None
    memory_key: str | None = None
    sandbox_path: str | None = None
    title: str = ""


@dataclass(frozen=True)
class SavedUpload:
    path: str  # agent path, e.g. uploads/<conversation>/<name>
    host_path: Path
    mime: str
    size: int
    is_image: bool

    def summary(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.host_path.name, "mime": self.mime, "size": self.size, "is_image": self.is_image}


def safe_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not _SAFE_ID.match(value):
        raise FileError(f"{what} is not a valid id", code="field_invalid", field=what)
    return value


#: A Windows absolute path (C:\… or \\server\share\…), as old browsers sent an
#: upload's name.
_WINDOWS_PATH = re.compile(r"^(?:[A-Za-z]:\\|\\\\)")


def sanitize_filename(name: str) -> str:
    """A display-safe single path component: no separators (the part after the last
    "/", or after a Windows path's last backslash; any other backslash becomes "_"),
    no control or format characters (bidi overrides included), no leading dots, at
    most 200 bytes with the extension kept. Never empty."""
    if not isinstance(name, str):
        name = ""
    name = unicodedata.normalize("NFC", name)
    # A browser sends the base name. Old Internet Explorer sent a Windows client's full
    # path (C:\Users\…\name.txt): its last part is the name. Anywhere else a
    # backslash is a character of the name, replaced, not a separator to cut at.
    if _WINDOWS_PATH.match(name):
        name = name.rsplit("\\", 1)[-1]
    name = name.split("/")[-1].replace("\\", "_")
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = name.strip().lstrip(".").strip()
    if not name:
        name = "upload"
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or len(ext.encode()) > 16:
        stem, ext = name, ""
    limit = MAX_UPLOAD_NAME - (len(ext.encode()) + 1 if ext else 0)
    while len(stem.encode()) > limit:
        stem = stem[:-1]
    return f"{stem}.{ext}" if ext else stem


def home_relative(path: str) -> str:
    """An agent path in the one spelling the resolver and the approval rules both read:
    runs of slashes collapsed, an absolute path's ``.`` and ``..`` resolved, the home's
    spellings (``~/``, ``./``, ``/home/member/``) removed. ``//home/member/shared/x`` is
    ``shared/x``, the file it reaches: a rule on ``shared/*`` must judge it as that."""
    path = re.sub(r"/{2,}", "/", path)
    if path.startswith("/"):
        path = os.path.normpath(path)
    return _strip_home(path)


def _strip_home(path: str, spellings: tuple[str, ...] = ("./", "~/", SANDBOX_HOME + "/")) -> str:
    """Remove home spellings; ``~``/``/home/member`` alone mean the home itself."""
    while True:
        if path in ("~", ".", SANDBOX_HOME):
            return ""
        prefix = next((p for p in spellings if path.startswith(p)), None)
        if prefix is None:
            return path
        path = path[len(prefix):]


class FileService:
    def __init__(self, core: "Skald") -> None:
        self._reach = lambda: core
        self.settings = core.settings.files
        self.root = core.settings.data_dir / "homes"
        self._uids: dict[str, int] = {}
        self._persisting: set[asyncio.Task[None]] = set()
        #: ``uid_for`` is reached from worker threads too (an upload's quota walk makes
        #: the home): allocation is locked, and the write is handed to the loop.
        self._allocating = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeping: asyncio.Task[int] | None = None  # the start's look for cut writes

    @property
    def _core(self) -> "Skald":
        return self._reach()

    # -- members' ids and homes -------------------------------------------------------------

    async def start(self) -> None:
        """Load the uid map and give every member without one a uid."""
        self.root.mkdir(mode=0o711, parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)
        members = await self._core.registry.run(lambda c: [r[0] for r in c.execute("SELECT id FROM users").fetchall()])

        def stored(conn: Any) -> dict[str, int]:
            row = conn.execute("SELECT value FROM config WHERE key = ?", (UIDS_KEY,)).fetchone()
            return {str(k): int(v) for k, v in (json.loads(row[0]) if row else {}).items()}

        # Read, not written: a start that changes nothing must start on a full disk. A
        # member without a uid yet gets one as a new member does (stored in the background).
        self._loop = asyncio.get_running_loop()
        self._uids = await self._core.registry.run(stored)
        unsaved = [m for m in members if m not in self._uids]
        for member_id, uid in (await asyncio.to_thread(self._owners_of_homes, unsaved)).items():
            self._uids[member_id] = uid
            self._persist_later(member_id, uid)
        for member_id in members:
            self.uid_for(member_id)
        await self._remove_homes_of_deleted(set(members))
        removed = await asyncio.to_thread(_remove_partial_uploads, self.root)
        removed += await asyncio.to_thread(_remove_partial_project_uploads, self._core.settings.data_dir / "projects")
        if removed:
            log.info("removed %d partial upload(s) a stopped server left behind", removed)
        # A file write (``MemberFiles.write_text``) a killed server cut leaves its temporary file,
        # anywhere in a home, a shared folder or a project, counted against the disk
        # limit. Looked for after the start, not during it (a large home takes a while);
        # only files older than this start go, so a write begun since is never touched.
        started = time.time()
        roots = [self.root, self._core.settings.data_dir / "shared", self._core.settings.data_dir / "projects"]
        self._sweeping = asyncio.create_task(asyncio.to_thread(_remove_cut_writes, roots, started))
        self._sweeping.add_done_callback(_log_cut_writes)

    def uid_for(self, member_id: str) -> int:
        """Stable per member, unique, >= 20000. Known members are allocated at start; a
        member created since is allocated here (in memory at once, so two callers can
        never get the same uid) and persisted in the background."""
        safe_id(member_id, "member id")
        uid = self._uids.get(member_id)
        if uid is not None:
            return uid
        with self._allocating:
            uid = self._uids.get(member_id)
            if uid is not None:
                return uid
            uid = max(self._uids.values(), default=FIRST_UID - 1) + 1
            self._uids[member_id] = uid
        self._persist_later(member_id, uid)
        return uid

    def _persist_later(self, member_id: str, uid: int) -> None:
        """Stores a new allocation in the background, from the loop or from a worker
        thread alike (a uid handed out and never stored went to someone else at the
        next start, and its member's sandbox could no longer open their own home)."""
        def schedule() -> None:
            task = asyncio.get_running_loop().create_task(self._persist_uid(member_id, uid))
            self._persisting.add(task)
            task.add_done_callback(self._persisting.discard)

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._loop is None or self._loop.is_closed():
                log.warning("the sandbox uid of a member was allocated with no server running to store it")
                return
            self._loop.call_soon_threadsafe(schedule)
        else:
            schedule()

    def _owners_of_homes(self, member_ids: list[str]) -> dict[str, int]:
        """The uid owning each of these members' homes, where it is a sandbox uid no
        stored member holds: an allocation an earlier version made and never stored
        (it lost allocations made from a worker thread). Reused, so the files stay the
        member's own; blocking (stat)."""
        taken = set(self._uids.values())
        found: dict[str, int] = {}
        for member_id in member_ids:
            try:
                uid = (self.root / member_id).stat(follow_symlinks=False).st_uid
            except OSError:
                continue
            if uid >= FIRST_UID and uid not in taken:
                found[member_id] = uid
                taken.add(uid)
        return found

    async def _persist_uid(self, member_id: str, uid: int) -> None:
        def write(conn: Any) -> None:
            row = conn.execute("SELECT value FROM config WHERE key = ?", (UIDS_KEY,)).fetchone()
            uids = json.loads(row[0]) if row else {}
            uids.setdefault(member_id, uid)
            conn.execute(
                "INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (UIDS_KEY, json.dumps(uids)),
            )

        try:
            await self._core.registry.transaction(write)
        except DiskFailure as exc:  # kept in memory; the next start allocates it again, in the same order
            log.warning("the sandbox uid of a member could not be stored: %s", exc)
        except Exception:
            log.exception("the sandbox uid of a member could not be stored")

    async def flush(self) -> None:
        if self._persisting:
            await asyncio.gather(*list(self._persisting), return_exceptions=True)

    def home_room(self, member_id: str) -> int:
        """Bytes the member's home may still grow by under ``sandbox.home_quota_mib``
        (negative when it is over): the file tools and uploads obey the same disk limit
        as the sandbox. Blocking (it walks the home)."""
        from skald_host.core.sandbox.quota import MIB, home_usage

        quota = self._core.settings.sandbox.home_quota_mib * MIB
        return quota - home_usage(self.home(member_id), quota)

    def home(self, member_id: str) -> Path:
        """``<data_dir>/homes/<member_id>/``, created 0700 on demand and owned by the
        member's sandbox uid when the host runs as root."""
        safe_id(member_id, "member id")
        path = self.root / member_id
        if not path.is_dir():
            self.root.mkdir(mode=0o711, parents=True, exist_ok=True)
            path.mkdir(mode=0o700, exist_ok=True)
            os.chmod(path, 0o700)
            self.own(path, member_id)
        return path

    async def _remove_homes_of_deleted(self, members: set[str]) -> None:
        """A home whose member the registry no longer has: a stop between a deletion's
        registry commit and its ``after_delete`` (``UserManager._delete``) left it, in
        clear. The deletion was committed; this finishes it (their file, the boot
        reconciler quarantines)."""
        orphans = await asyncio.to_thread(
            lambda: sorted(p.name for p in self.root.iterdir() if _MEMBER_DIR.match(p.name) and p.name not in members and p.is_dir() and not p.is_symlink())
        )
        for member_id in orphans:
            log.warning("home folder of %s has no member (a deletion cut short by a stop); removing it", member_id)
            await self.remove_home(member_id)

    async def remove_home(self, member_id: str) -> None:
        """A deleted member's home goes with their database file: it holds their uploads
        and the agent's files, in clear. ``rmtree`` never follows a link out of it."""
        safe_id(member_id, "member id")
        path = self.root / member_id
        if path.is_dir() and not path.is_symlink():
            await asyncio.to_thread(shutil.rmtree, path)
            log.info("home of deleted member %s removed", member_id)

    # -- a data-losing password reset (``ResetParticipant``) ---------------------------------
    # The home holds the member's uploads and the agent's files in clear, readable by
    # whoever signs in with the new password (the admin who chose it, say). It follows
    # the old database into the quarantine, for the operator; ``home`` makes a fresh one,
    # the member's sandbox uid's, on first use.

    async def check_set_aside(self, member_id: str, quarantine_dir: Path) -> None:
        home = self.root / safe_id(member_id, "member id")

        def other_disk() -> bool:
            return home.is_dir() and not home.is_symlink() and os.stat(home).st_dev != os.stat(quarantine_dir).st_dev

        if await asyncio.to_thread(other_disk):
            raise MemberError(
                "the member's home folder is on another disk than the quarantine, where a reset moves it: "
                "nothing was changed; the operator must put homes/ and database/ on one disk first",
                code="reset_set_aside_impossible",
            )

    def withdraw(self, conn: Any, member_id: str) -> None:
        """The home is not in the registry."""

    async def set_aside(self, member_id: str, stem: Path) -> None:
        moved = await asyncio.to_thread(self.set_aside_home, member_id, stem)
        if moved is not None:
            log.info("home of member %s set aside as %s", member_id, moved.name)

    def set_aside_home(self, member_id: str, stem: Path) -> Path | None:
        """Move the home to ``<stem>.home`` (a counter added rather than overwriting);
        None when there is none (moved by an earlier run, or never made). One rename,
        on one disk (checked before the reset's commit): there is no half-moved home."""
        home = self.root / safe_id(member_id, "member id")
        if not os.path.lexists(home):
            return None
        target = stem.with_name(stem.name + ".home")
        counter = 0
        while os.path.lexists(target):
            counter += 1
            target = stem.with_name(f"{stem.name}.{counter}.home")
        os.rename(home, target)
        fsync_dir(target.parent)
        fsync_dir(self.root)
        return target

    async def restore(self, member_id: str, stem: Path) -> None:
        moved = await asyncio.to_thread(self.restore_home, member_id, stem)
        if moved:
            log.info("home of member %s brought back from %s", member_id, stem.name + ".home")

    def restore_home(self, member_id: str, stem: Path) -> bool:
        """``<stem>.home`` back as the member's home, unless one exists (made since: it
        is not replaced, and the old one stays in the quarantine for the operator)."""
        home = self.root / safe_id(member_id, "member id")
        kept = stem.with_name(stem.name + ".home")
        if not kept.is_dir() or kept.is_symlink():
            return False
        if os.path.lexists(home):
            log.warning("member %s: a home exists, so the one at %s stays in the quarantine", member_id, kept.name)
            return False
        os.rename(kept, home)
        fsync_dir(self.root)
        fsync_dir(kept.parent)
        return True

    def own(self, path: Path | int, member_id: str) -> None:
        """Give a file the host created to the member's sandbox uid (root only), so the
        sandbox and the host-side tools share ownership on the bind mounts."""
        if os.geteuid() != 0:
            return
        uid = self.uid_for(member_id)
        if isinstance(path, int):
            os.fchown(path, uid, uid)
        else:
            os.chown(path, uid, uid, follow_symlinks=False)

    # -- memberships and mounts -------------------------------------------------------------

    async def memberships(self, member_id: str) -> list[Any]:
        """The member's shared folders and projects (empty until folders exist)."""
        try:
            folders = self._core.folders  # type: ignore[attr-defined]
        except (AttributeError, AssertionError):
            return []
        if folders is None:
            return []
        return list(await folders.memberships(member_id))

    async def sandbox_mounts(self, member_id: str) -> tuple[Mount, ...]:
        home = Path(os.path.realpath(self.home(member_id)))
        mounts = [Mount(home, SANDBOX_HOME, read_only=False)]
        for access in await self.memberships(member_id):
            source = Path(os.path.realpath(access.host_path))
            mounts.append(Mount(source, f"{SANDBOX_HOME}/{access.agent_prefix.strip('/')}", read_only=not access.can_write))
        return tuple(mounts)

    # -- the namespace router ---------------------------------------------------------------

    async def resolve(self, member: "Member", agent_path: str, *, write: bool) -> Resolved:
        """Route one agent path. Host paths are contained (symlinks followed, fail-closed);
        a write to a read-only membership is refused here."""
        if not isinstance(agent_path, str) or not agent_path.strip():
            raise FileError("a path is required", code="field_required", field="path")
        if "\x00" in agent_path:
            raise FileError("path contains a NUL byte", code="path_nul_byte")
        path = agent_path.strip()
        memory = classify_memory(path)  # the note store's own rule: ".." clamps inside it
        if memory is not None:
            root, key = memory
            return Resolved("memory", f"{root}/{key}".rstrip("/"), memory_root=root, memory_key=key)
        relative = home_relative(path)
        if relative.startswith("/"):
            try:
                clean_relative(relative.lstrip("/"))
            except PathRefused as exc:
                raise FileError.of(exc) from None
            sandbox_path = "/" + str(PurePosixPath(os.path.normpath(relative))).lstrip("/")
            return Resolved("sandbox", sandbox_path, sandbox_path=sandbox_path)
        try:
            rel = clean_relative(relative)
        except PathRefused as exc:
            raise FileError.of(exc) from None
        parts = rel.parts if str(rel) != "." else ()
        if parts and parts[0] in ("shared", "projects"):
            return await self._resolve_membership(member, parts, write=write)
        home = self.home(member.id)
        try:
            host = contain(home, str(rel))
        except PathRefused as exc:
            raise FileError.of(exc) from None
        except OSError:  # a link changed under ``realpath`` while it read the path
            raise FileError(f"{'/'.join(parts)} changed while it was looked up; try again", code="try_again") from None
        return Resolved("host", "/".join(parts) or "~", host_path=host, base=Path(os.path.realpath(home)))

    async def _resolve_membership(self, member: "Member", parts: tuple[str, ...], *, write: bool) -> Resolved:
        depth = 2 if parts[0] == "shared" else 3
        accesses = await self.memberships(member.id)
        if len(parts) < depth:
            if write:
                raise FileError(f"{'/'.join(parts)}/ lists your folders; write inside one of them", code="path_lists_folders", path="/".join(parts))
            return Resolved("folders", "/".join(parts), read_only=True)
        prefix = "/".join(parts[:depth])
        access = next((a for a in accesses if a.agent_prefix.strip("/") == prefix), None)
        if access is None:
            raise FileError(f"no such folder: {prefix}", code="no_such_folder", path=prefix)
        if write and not access.can_write:
            raise FileError(f"{prefix} is read-only for you; you cannot change files there", code="folder_read_only", path=prefix)
        tail = "/".join(parts[depth:]) or "."
        try:
            host = contain(access.host_path, tail)
        except PathRefused as exc:
            raise FileError.of(exc) from None
        except OSError:  # a link changed under ``realpath`` while it read the path
            raise FileError(f"{'/'.join(parts)} changed while it was looked up; try again", code="try_again") from None
        return Resolved(
            "host", "/".join(parts), host_path=host, base=Path(os.path.realpath(access.host_path)),
            read_only=not access.can_write, title=access.title,
        )

    def agent_path_of(self, member_id: str, host_path: Path) -> str | None:
        """The agent path of a host file in the member's home (for listings)."""
        home = Path(os.path.realpath(self.home(member_id)))
        real = Path(os.path.realpath(host_path))
        if real == home:
            return "~"
        if home in real.parents:
            return str(real.relative_to(home))
        return None

    # -- uploads: the one save seam ---------------------------------------------------------

    async def save_upload(
        self,
        member_id: str,
        conversation_id: str,
        filename: str,
        chunks: AsyncIterator[bytes] | bytes,
        declared_type: str | None = None,
    ) -> SavedUpload:
        """Stream a member's file into ``~/uploads/<conversation>/`` under a sanitised,
        collision-free name. The size limit is enforced while streaming (the partial
        file is deleted past it); the type is sniffed from the bytes, never taken from
        the name or ``declared_type`` (kept only as a hint for logs)."""
        safe_id(conversation_id, "conversation id")
        name = sanitize_filename(filename)
        limit = self.settings.upload_max_bytes
        room = await asyncio.to_thread(self.home_room, member_id)
        home = self.home(member_id)
        folder, dir_fd = await asyncio.to_thread(self._upload_dir, home, member_id, conversation_id)
        temp = f".part-{secrets.token_hex(8)}"
        fd = -1
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
            size = 0
            head = b""
            buffer: list[bytes] = []
            buffered = 0

            async def flush() -> None:
                nonlocal buffer, buffered
                if buffer:
                    data = b"".join(buffer)
                    buffer, buffered = [], 0
                    await asyncio.to_thread(_write_all, fd, data)

            async for chunk in _aiter(chunks):
                if not chunk:
                    continue
                size += len(chunk)
                if size > limit:
                    raise UploadTooLarge(f"the file is larger than the upload limit of {limit} bytes", limit=limit)
                if size > room:
                    raise UploadTooLarge(f"the file does not fit: your home has {max(room, 0)} bytes left under its disk limit", left=room)
                if len(head) < 8192:
                    head += chunk[: 8192 - len(head)]
                buffer.append(bytes(chunk))
                buffered += len(chunk)
                if buffered >= CHUNK:
                    await flush()
                    crash_point("upload.after_first_write")
            await flush()
            mime = sniff(head, complete=size <= len(head))
            self.own(fd, member_id)
            os.close(fd)
            fd = -1
            final = await asyncio.to_thread(_link_unique, dir_fd, temp, name)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(temp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            os.close(dir_fd)
            raise
        os.unlink(temp, dir_fd=dir_fd)
        os.close(dir_fd)
        host_path = folder / final
        return SavedUpload(f"{UPLOADS_DIR}/{conversation_id}/{final}", host_path, mime, size, mime in IMAGE_TYPES)

    def _upload_dir(self, home: Path, member_id: str, conversation_id: str) -> tuple[Path, int]:
        """``~/uploads/<conversation>/`` and a descriptor of it, made where missing (and
        given to the member). By descriptor from the home's own (``open_dirs_inside``):
        the member's sandbox can rename and link in the home while this runs, so a
        folder checked by name could be made or given to the member somewhere else."""
        folder = Path(os.path.realpath(home)) / UPLOADS_DIR / conversation_id
        try:
            return folder, open_dirs_inside(home, folder, lambda fd: self.own(fd, member_id))
        except (PathRefused, NotADirectoryError):  # a link out of the home, or a file, on the way
            raise FileError(
                f"~/{UPLOADS_DIR}/{conversation_id} is not a folder; move what is there away and upload again",
                code="upload_folder_blocked", path=f"~/{UPLOADS_DIR}/{conversation_id}",
            ) from None

    async def remove_uploads(self, member_id: str, conversation_id: str) -> None:
        """A deleted conversation's ``~/uploads/<conversation>/``: its files would
        otherwise stay in the home, served by ``/api/file`` and counted against the disk
        limit, with nothing left that names them. Called once the conversation's rows
        are gone (a crash between leaves a folder nothing names, never a conversation
        naming missing files); a folder already gone is fine. A failure is logged, not
        raised: the conversation is deleted either way."""
        if not (_SAFE_ID.match(member_id) and _SAFE_ID.match(conversation_id)):
            return  # no upload is ever saved under such a name (``save_upload``)
        try:
            removed = await asyncio.to_thread(_remove_upload_folder, self.root / member_id, conversation_id)
        except OSError as exc:
            log.warning("the uploads of a deleted conversation could not all be removed: %s", type(exc).__name__)
            return
        if removed:
            log.info("uploads of deleted conversation %s removed", conversation_id)


def _remove_upload_folder(home: Path, conversation_id: str) -> bool:
    """``uploads/<conversation>`` in ``home``, removed by descriptor: the member's
    sandbox can put links in the home, so neither ``uploads`` nor the folder is
    followed if it is a link now (``rmtree`` with ``dir_fd`` never follows one inside
    either). False when there is no such folder (blocking: run it in a thread)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        home_fd = os.open(home, flags)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        try:
            uploads_fd = os.open(UPLOADS_DIR, flags, dir_fd=home_fd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # ``uploads`` is a link: nothing of ours is behind it
                return False
            raise
        try:
            try:
                info = os.stat(conversation_id, dir_fd=uploads_fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if not stat.S_ISDIR(info.st_mode):
                return False
            shutil.rmtree(conversation_id, dir_fd=uploads_fd)
            return True
        finally:
            os.close(uploads_fd)
    finally:
        os.close(home_fd)


def _remove_partial_uploads(root: Path) -> int:
    """The ``.part-*`` files of uploads a killed server was writing (the file listing
    hides them, the disk limit counted them). Only at start, when no upload runs;
    ``homes/*/uploads/*/`` only, never following a link a sandbox may have made."""
    removed = 0
    for home in _dirs(root):
        for uploads in _dirs(Path(home.path), UPLOADS_DIR):
            for folder in _dirs(Path(uploads.path)):
                with os.scandir(folder.path) as entries:
                    partial = [e.path for e in entries if PARTIAL_UPLOAD.fullmatch(e.name) and e.is_file(follow_symlinks=False)]
                for path in partial:
                    os.unlink(path)
                    removed += 1
    return removed


def _remove_partial_project_uploads(root: Path) -> int:
    """The same for the project explorer's uploads, which are written beside their
    target anywhere in a project (``projects/<owner>/<slug>/**``). Walked by descriptor
    (``fwalk`` checks each folder it enters is the one it listed), removed by name
    relative to it: a sandbox left running by the killed server cannot redirect it."""
    removed = 0
    for owner in _dirs(root):
        for project in _dirs(Path(owner.path)):
            try:
                for _, _, files, folder in os.fwalk(project.path, follow_symlinks=False):
                    for name in files:
                        if PARTIAL_UPLOAD.fullmatch(name):
                            try:
                                if stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                                    os.unlink(name, dir_fd=folder)
                                    removed += 1
                            except FileNotFoundError:
                                pass
            except (OSError, RecursionError) as exc:  # a tree nested past Python's limit: what was walked is clean
                log.warning("partial uploads in a project could not all be looked for: %s", type(exc).__name__)
    return removed


def _remove_cut_writes(roots: list[Path], before: float) -> int:
    """The temporary files of writes cut by a killed server (``CUT_WRITE``) under
    ``roots``, modified before ``before``. Walked by descriptor without following links
    and removed by name relative to the folder walked, as the project uploads are: a
    sandbox left running cannot redirect it."""
    removed = 0
    for root in roots:
        if not root.is_dir():  # no shared folder or project made yet
            continue
        try:
            for _, _, files, folder in os.fwalk(root, follow_symlinks=False):
                for name in files:
                    if not CUT_WRITE.fullmatch(name):
                        continue
                    try:
                        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                        if stat.S_ISREG(info.st_mode) and info.st_mtime < before:
                            os.unlink(name, dir_fd=folder)
                            removed += 1
                    except FileNotFoundError:
                        pass
        except (OSError, RecursionError) as exc:
            log.warning("cut file writes could not all be looked for: %s", type(exc).__name__)
    return removed


def _log_cut_writes(done: asyncio.Future[int]) -> None:
    if done.cancelled():
        return
    if done.exception() is not None:
        log.warning("cut file writes could not be looked for: %s", type(done.exception()).__name__)
    elif done.result():
        log.info("removed %d cut file write(s) a stopped server left behind", done.result())


def _dirs(path: Path, name: str | None = None) -> list[os.DirEntry[str]]:
    """Real directories (no links) in ``path``, or only the one called ``name``."""
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if (name is None or e.name == name) and e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


async def _aiter(chunks: AsyncIterator[bytes] | bytes) -> AsyncIterator[bytes]:
    if isinstance(chunks, (bytes, bytearray, memoryview)):
        data = bytes(chunks)
        for start in range(0, len(data), CHUNK):
            yield data[start:start + CHUNK]
        return
    async for chunk in chunks:
        yield chunk


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


#: What counts as a file name's extension, kept after the " (2)" of a second upload.
_EXTENSION = re.compile(r"[A-Za-z0-9]{1,10}")


def _link_unique(dir_fd: int, temp: str, name: str) -> str:
    """Link the finished temp file under ``name``, ``name (2)``, ... — whichever is free
    first. ``link`` never replaces an existing file, so two uploads cannot collide."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem or not _EXTENSION.fullmatch(ext):  # "a..=2Fb" has none: "a..=2Fb (2)"
        stem, ext = name, ""
    for n in range(1, 10_000):
        candidate = name if n == 1 else (f"{stem} ({n}).{ext}" if ext else f"{stem} ({n})")
        try:
            os.link(temp, candidate, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            return candidate
        except FileExistsError:
            continue
    raise FileError("too many files with this name in this conversation", code="upload_name_taken")

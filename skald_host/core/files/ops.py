"""What the fs tools and the file viewer do to one member's namespace.

``MemberFiles`` is bound to one member: every operation resolves its agent path
through ``FileService.resolve`` (so the tools and ``/api/file`` route identically),
then acts on the note store, a contained host path, or the member's sandbox. Disk work
runs in a thread; every open re-checks containment on the opened descriptor.
"""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import os
import re
import secrets
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skald_host.core.faults import crash_point
from skald_host.core.files.paths import PathRefused, is_inside, open_dir_inside, open_dirs_inside, open_inside, read_all
from skald_host.core.files.service import FileError, Resolved
from skald_host.core.files.sniff import TEXT, sniff
from skald_host.core.folders.listing import PARTIAL_UPLOAD
from skald_host.core.folders.service import SHARED_FILE_MODE, open_to_members

if TYPE_CHECKING:
    from skald_host.core.host import Skald
    from skald_host.core.identity.users import Member

LIST_LIMIT = 500
SEARCH_LIMIT = 200
GREP_FILE_LIMIT = 5000
GREP_MATCH_LIMIT = 200
GREP_FILE_BYTES = 2 * 1024 * 1024
LINE_CHARS = 2000
RANGE_BYTES = 48 * 1024  # what one ranged read returns at most (the kernel caps a result at 64 KiB)
SANDBOX_TIMEOUT = 30.0
#: What the sandbox prints instead of a file's base64 (whose alphabet has no colon).
MISSING_MARK, FOLDER_MARK = "skald:missing", "skald:folder"
SANDBOX_WRITE_BYTES = 64 * 1024  # the content travels as one argument (Linux caps one at 128 KiB)


@dataclass(frozen=True)
class FileBlob:
    """A file's bytes for the viewer: the whole file up to the cap, its sniffed type."""

    name: str
    data: bytes
    mime: str
    size: int


@dataclass(frozen=True)
class OpenFile:
    """A host file opened for the viewer to stream, of any size: a descriptor checked to
    be a regular file inside its folder, its size when opened and the type sniffed from
    its first bytes. Whoever takes it closes ``fd`` (``file_response`` does)."""

    name: str
    fd: int
    mime: str
    size: int


class MemberFiles:
    def __init__(self, core: "Skald", member: "Member") -> None:
        self._reach = lambda: core
        self.member = member

    @property
    def _core(self) -> "Skald":
        return self._reach()

    async def resolve(self, path: str, *, write: bool = False) -> Resolved:
        return await self._core.files.resolve(self.member, path, write=write)

    def _notes(self, resolved: Resolved) -> Any:
        return self._core.memory.notes(self.member.id, resolved.memory_root)

    async def _read_note(self, resolved: Resolved) -> str:
        try:
            return await self._notes(resolved).read(resolved.memory_key)
        except FileNotFoundError:  # a missing note is the agent's answer, as a missing file is
            raise FileError(f"{resolved.agent_path} does not exist", code="no_such_entry", path=resolved.agent_path) from None

    # -- reading ----------------------------------------------------------------------------

    async def read_text(self, path: str) -> str:
        """A text file's content, refused clearly when it is binary or over the cap."""
        resolved = await self.resolve(path)
        if resolved.kind == "memory":
            if not resolved.memory_key:
                raise FileError(f"{resolved.agent_path} is a folder of notes; use list_files")
            return await self._read_note(resolved)
        if resolved.kind == "folders":
            raise FileError(f"{resolved.agent_path} is a folder; use list_files")
        limit = self._core.settings.files.read_max_bytes
        if resolved.kind == "sandbox":
            data = await self._sandbox_read(resolved.sandbox_path or "/", limit)
        else:
            data = await asyncio.to_thread(_read_host, resolved, limit)
        mime = sniff(data[:8192], complete=len(data) <= 8192)
        if data and mime != TEXT:  # an empty file is empty text to read (sniff calls it no type at all)
            raise FileError(
                f"{resolved.agent_path} is a binary file ({mime}, {len(data)} bytes); it cannot be read as text."
                " show_file_to_user shows it to the member."
            )
        return data.decode("utf-8", errors="replace")

    async def read_lines(self, path: str, start: int, end: int | None) -> tuple[list[str], int | None]:
        """Lines ``start``..``end`` (1-based, inclusive) and the total when it is known.
        A host file is streamed, so a range of a file larger than the read cap works."""
        resolved = await self.resolve(path)
        if resolved.kind != "host":
            lines = (await self.read_text(path)).splitlines()
            return lines[start - 1:end], len(lines)
        return await asyncio.to_thread(_read_host_lines, resolved, start, end)

    async def read_blob(self, path: str, *, start_sandbox: bool = True) -> FileBlob:
        """The viewer's read: any type, up to the viewer's cap. Without
        ``start_sandbox`` (a GET, which changes nothing) a sandbox path is read only
        from a sandbox that is up."""
        resolved = await self.resolve(path)
        if resolved.kind == "host":
            data = await asyncio.to_thread(_read_host, resolved, self._core.settings.files.view_max_bytes)
            assert resolved.host_path is not None
            return FileBlob(resolved.host_path.name, data, sniff(data[:8192], complete=len(data) <= 8192), len(data))
        return await self._read_whole(resolved, start_sandbox)

    async def open_blob(self, path: str, *, start_sandbox: bool = True) -> FileBlob | OpenFile:
        """The file viewer's read (``/api/file``): a host file opened to be streamed,
        whatever its size (an upload may be larger than anything read whole); a note or
        a sandbox file read whole up to the viewer's cap, as ``read_blob`` does."""
        resolved = await self.resolve(path)
        if resolved.kind == "host":
            return await asyncio.to_thread(_open_host, resolved)
        return await self._read_whole(resolved, start_sandbox)

    async def _read_whole(self, resolved: Resolved, start_sandbox: bool) -> FileBlob:
        """A note's or a sandbox file's bytes, up to the viewer's cap (a sandbox file
        crosses as one command's output)."""
        limit = self._core.settings.files.view_max_bytes
        if resolved.kind == "memory":
            if not resolved.memory_key:
                raise FileError("that is a folder of notes", code="path_is_folder", path=resolved.agent_path)
            text = await self._read_note(resolved)
            data = text.encode("utf-8")
            return FileBlob(resolved.memory_key.rsplit("/", 1)[-1], data, TEXT, len(data))
        if resolved.kind == "folders":
            raise FileError("that is a folder", code="path_is_folder", path=resolved.agent_path)
        if not start_sandbox and not self._sandbox().is_up(self.member.id):
            raise FileError("no such file now: your sandbox is not running (it starts with the next command the assistant runs)", code="sandbox_not_running")
        data = await self._sandbox_read(resolved.sandbox_path or "/", limit)
        return FileBlob((resolved.sandbox_path or "file").rsplit("/", 1)[-1], data, sniff(data[:8192], complete=len(data) <= 8192), len(data))

    # -- writing ----------------------------------------------------------------------------

    async def write_text(self, path: str, content: str) -> str:
        if not isinstance(content, str):
            raise FileError("'content' must be text")
        resolved = await self.resolve(path, write=True)
        if resolved.kind == "memory":
            if not resolved.memory_key:
                raise FileError("name the note, e.g. user-memory/notes.md")
            await self._notes(resolved).write(resolved.memory_key, content)
            return f"Saved {resolved.agent_path} ({len(content.encode())} bytes)."
        data = content.encode("utf-8")
        if resolved.kind == "sandbox":
            existed = await self._sandbox_write(resolved.sandbox_path or "/", data)
        else:
            existed = await asyncio.to_thread(self._write_host, resolved, data)
        return f"{'Overwrote' if existed else 'Created'} {resolved.agent_path} ({len(data)} bytes)."

    def _write_host(self, resolved: Resolved, data: bytes) -> bool:
        assert resolved.host_path is not None and resolved.base is not None
        target = resolved.host_path
        if target == resolved.base:
            raise FileError("that is a folder; name a file inside it")
        owner = self.member.id if is_inside(self._core.files.home(self.member.id), resolved.base) else None
        # In the member's home: theirs. In a shared folder or project: its members' (the
        # group and setgid the sandbox manager gives those folders), never root's alone.
        on_create = (lambda fd: self._core.files.own(fd, owner)) if owner else open_to_members
        try:
            dir_fd = open_dirs_inside(resolved.base, target.parent, on_create)
        except PathRefused as exc:
            raise FileError.of(exc) from None
        try:
            try:
                existing = os.stat(target.name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None and stat.S_ISLNK(existing.st_mode):
                raise FileError(f"{resolved.agent_path} is a symbolic link; it is not followed")
            if existing is not None and stat.S_ISDIR(existing.st_mode):
                raise FileError(f"{resolved.agent_path} is a folder")
            growth = len(data) - (existing.st_blocks * 512 if existing is not None else 0)
            if owner and growth > 0 and growth > (room := self._core.files.home_room(owner)):
                raise FileError(f"{resolved.agent_path} does not fit: your home has {max(room, 0)} bytes left under its disk limit")
            # Written beside the target and renamed over it: a reader never sees half a file
            # (the name is ``CUT_WRITE``'s: one a killed server left is removed at the next start).
            temp = f".{target.name[:200]}.{secrets.token_hex(4)}.tmp"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600 if owner else SHARED_FILE_MODE, dir_fd=dir_fd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                    crash_point("file_write.after_first_write")
                if existing is not None:
                    # Its permission bits, never setuid/setgid/sticky: in a shared folder
                    # the new file is root's, and would carry a member's setuid bit.
                    os.fchmod(fd, stat.S_IMODE(existing.st_mode) & 0o777)
                if owner:
                    self._core.files.own(fd, owner)
            finally:
                os.close(fd)
            os.replace(temp, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return existing is not None
        finally:
            os.close(dir_fd)

    async def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> str:
        if not isinstance(old, str) or not old:
            raise FileError("'old_text' must be the exact non-empty text to replace")
        if not isinstance(new, str):
            raise FileError("'new_text' must be text")
        await self.resolve(path, write=True)  # refuse a read-only folder before reading
        text = await self.read_text(path)
        count = text.count(old)
        if count == 0:
            raise FileError("'old_text' was not found in the file; read it again and copy the text exactly")
        if count > 1 and not replace_all:
            raise FileError(f"'old_text' occurs {count} times; add more context to make it unique, or set all=true")
        await self.write_text(path, text.replace(old, new) if replace_all else text.replace(old, new, 1))
        return f"Replaced {count if replace_all else 1} occurrence{'s' if replace_all and count > 1 else ''} in {path}."

    # -- listing and searching --------------------------------------------------------------

    async def list(self, path: str, *, recursive: bool = False) -> list[dict[str, Any]]:
        resolved = await self.resolve(path or ".")
        if resolved.kind == "memory":
            notes = await self._notes(resolved).list(resolved.memory_key or "", limit=LIST_LIMIT + 1)
            return [{"path": f"{resolved.memory_root}/{n.key}", "is_dir": False, "size": n.size} for n in notes]
        if resolved.kind == "folders":
            accesses = await self._core.files.memberships(self.member.id)
            prefix = resolved.agent_path + "/"
            return [
                {"path": a.agent_prefix, "is_dir": True, "size": None, "read_only": not a.can_write, "title": a.title}
                for a in accesses if a.agent_prefix.startswith(prefix)
            ]
        if resolved.kind == "sandbox":
            return await self._sandbox_list(resolved.sandbox_path or "/")
        entries = await asyncio.to_thread(_list_host, resolved, recursive)
        if resolved.agent_path == "~" and not recursive:
            accesses = await self._core.files.memberships(self.member.id)
            for top in sorted({a.agent_prefix.split("/", 1)[0] for a in accesses}):
                entries.append({"path": top, "is_dir": True, "size": None})
        return entries

    async def search_file(self, path: str, text: str, *, ignore_case: bool = False) -> list[tuple[int, str]]:
        if not isinstance(text, str) or not text:
            raise FileError("'text' must be non-empty")
        content = await self.read_text(path)
        needle = text.lower() if ignore_case else text
        hits = []
        for number, line in enumerate(content.splitlines(), 1):
            if needle in (line.lower() if ignore_case else line):
                hits.append((number, line[:LINE_CHARS]))
                if len(hits) >= SEARCH_LIMIT:
                    break
        return hits

    async def grep(self, pattern: str, path: str, *, glob: str | None = None, ignore_case: bool = False) -> tuple[list[tuple[str, int, str]], bool]:
        """Regex across a folder tree on disk (notes are searched with memory_search).
        Returns the matches and whether a cap cut the search short."""
        if not isinstance(pattern, str) or not pattern:
            raise FileError("'pattern' must be a non-empty regular expression")
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise FileError(f"'pattern' is not a valid regular expression: {exc}") from None
        resolved = await self.resolve(path or ".")
        if resolved.kind == "memory":
            raise FileError("grep_files searches files on disk; use memory_search for notes")
        if resolved.kind == "sandbox":
            raise FileError("grep_files searches your home, shared folders and projects; for other sandbox paths use execute_cmd with rg or grep")
        if resolved.kind == "folders":
            raise FileError(f"name one folder inside {resolved.agent_path}/ (list_files {resolved.agent_path} shows them)")
        return await asyncio.to_thread(_grep_host, resolved, regex, glob)

    # -- the sandbox branch -----------------------------------------------------------------

    def _sandbox(self) -> Any:
        try:
            sandbox = self._core.sandbox  # type: ignore[attr-defined]
        except (AttributeError, AssertionError):
            sandbox = None
        if sandbox is None:
            raise FileError("paths outside your home live in your sandbox, and the sandbox is not available on this server", code="sandbox_unavailable")
        return sandbox

    async def _sandbox_run(self, command: str, limit: int) -> str:
        from skald_hookspecs.sandbox import SandboxUnavailable

        try:
            result = await self._sandbox().execute(self.member.id, command, workdir="/", timeout=SANDBOX_TIMEOUT)
        except SandboxUnavailable as exc:
            raise FileError(f"paths outside your home live in your sandbox, which is not available: {exc}", code="sandbox_unavailable") from None
        if result.exit_code != 0:
            detail = result.output.strip()[-300:]
            detail = detail or f"exit code {result.exit_code}"
            raise FileError(f"the sandbox could not do this: {detail}", code="sandbox_failed", detail=detail)
        if result.truncated or len(result.output) > limit:
            raise FileError("the file is larger than the limit for reading from the sandbox", code="sandbox_file_too_large")
        return result.output

    async def _sandbox_read(self, sandbox_path: str, limit: int) -> bytes:
        quoted = shlex.quote(sandbox_path)
        # Told apart in the sandbox, so a missing file reads as one (a 404 on the web)
        # rather than as base64's own complaint.
        output = await self._sandbox_run(
            f"if [ ! -e {quoted} ]; then echo {MISSING_MARK}; elif [ -d {quoted} ]; then echo {FOLDER_MARK};"
            f" else base64 -w0 -- {quoted}; fi",
            limit * 4 // 3 + 16,
        )
        if output.strip() == MISSING_MARK:
            raise FileError(f"{sandbox_path} does not exist", code="no_such_entry", path=sandbox_path)
        if output.strip() == FOLDER_MARK:
            raise FileError(f"{sandbox_path} is a folder; use list_files", code="path_is_folder", path=sandbox_path)
        try:
            return base64.b64decode(output.strip(), validate=True)
        except ValueError:
            raise FileError("the sandbox returned something that is not the file", code="sandbox_answer_unreadable") from None

    async def _sandbox_write(self, sandbox_path: str, data: bytes) -> bool:
        if len(data) > SANDBOX_WRITE_BYTES:
            raise FileError(
                f"at most {SANDBOX_WRITE_BYTES // 1024} KiB can be written to a sandbox path at once;"
                " write larger files in your home (e.g. ~/work/file) instead"
            )
        quoted = shlex.quote(sandbox_path)
        encoded = base64.b64encode(data).decode()
        out = await self._sandbox_run(
            f"if [ -e {quoted} ]; then echo existed; fi; mkdir -p -- \"$(dirname -- {quoted})\" &&"
            f" printf %s {shlex.quote(encoded)} | base64 -d > {quoted}",
            4096,
        )
        return "existed" in out

    async def _sandbox_list(self, sandbox_path: str) -> list[dict[str, Any]]:
        out = await self._sandbox_run(f"find {shlex.quote(sandbox_path)} -mindepth 1 -maxdepth 1 -printf '%y %s %p\\n' | head -n {LIST_LIMIT}", 512 * 1024)
        entries = []
        for line in out.splitlines():
            kind, _, rest = line.partition(" ")
            size, _, name = rest.partition(" ")
            entries.append({"path": name, "is_dir": kind == "d", "size": int(size) if size.isdigit() and kind != "d" else None})
        return entries


def _open_regular(resolved: Resolved) -> int:
    """A descriptor of the host file ``resolved``, checked to be a regular file inside
    its folder (blocking: run it in a thread)."""
    assert resolved.host_path is not None and resolved.base is not None
    try:
        fd = open_inside(resolved.base, resolved.host_path, os.O_RDONLY)
    except FileNotFoundError:
        raise FileError(f"{resolved.agent_path} does not exist", code="no_such_entry", path=resolved.agent_path) from None
    except IsADirectoryError:
        raise FileError(f"{resolved.agent_path} is a folder; use list_files", code="path_is_folder", path=resolved.agent_path) from None
    except PathRefused as exc:
        raise FileError.of(exc) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileError(f"{resolved.agent_path} is a folder; use list_files", code="path_is_folder", path=resolved.agent_path)
        if not stat.S_ISREG(info.st_mode):
            raise FileError(f"{resolved.agent_path} is not a regular file", code="path_not_regular")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_host(resolved: Resolved, limit: int) -> bytes:
    fd = _open_regular(resolved)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise FileError(f"{resolved.agent_path} is {size} bytes, more than the {limit} bytes that can be read at once")
        return read_all(fd, limit)
    finally:
        os.close(fd)


def _open_host(resolved: Resolved) -> OpenFile:
    fd = _open_regular(resolved)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, 8192, 0)
    except BaseException:
        os.close(fd)
        raise
    assert resolved.host_path is not None
    return OpenFile(resolved.host_path.name, fd, sniff(head, complete=size <= len(head)), size)


def _read_host_lines(resolved: Resolved, start: int, end: int | None) -> tuple[list[str], int | None]:
    assert resolved.host_path is not None and resolved.base is not None
    try:
        fd = open_inside(resolved.base, resolved.host_path, os.O_RDONLY)
    except FileNotFoundError:
        raise FileError(f"{resolved.agent_path} does not exist", code="no_such_entry", path=resolved.agent_path) from None
    except PathRefused as exc:
        raise FileError.of(exc) from None
    with os.fdopen(fd, "rb") as handle:
        if stat.S_ISDIR(os.fstat(handle.fileno()).st_mode):
            raise FileError(f"{resolved.agent_path} is a folder; use list_files")
        if sniff(handle.read(8192)) != TEXT:
            raise FileError(f"{resolved.agent_path} is a binary file; it cannot be read as text")
        handle.seek(0)
        lines: list[str] = []
        total = 0
        budget = RANGE_BYTES
        for total, raw in enumerate(handle, 1):
            if total < start:
                continue
            if (end is not None and total > end) or budget <= 0:
                return lines, None
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")[:LINE_CHARS]
            budget -= len(line) + 1
            lines.append(line)
        return lines, total


def _agent_path_below(resolved: Resolved, path: Path) -> str:
    """The agent path of ``path``, found below the resolved folder."""
    assert resolved.host_path is not None
    tail = path.relative_to(resolved.host_path).as_posix()
    return tail if resolved.agent_path == "~" else f"{resolved.agent_path}/{tail}"


def _list_host(resolved: Resolved, recursive: bool) -> list[dict[str, Any]]:
    assert resolved.host_path is not None and resolved.base is not None
    root = resolved.host_path
    if not root.exists():
        raise FileError(f"{resolved.agent_path} does not exist")
    if not root.is_dir():
        raise FileError(f"{resolved.agent_path} is a file; use read_file")
    entries: list[dict[str, Any]] = []
    pending = [root]
    while pending and len(entries) < LIST_LIMIT:
        folder = pending.pop(0)
        try:
            # Listed through a descriptor checked to be inside: a folder checked by
            # name may be a link out of it by now (a sandbox renames and links freely).
            fd = open_dir_inside(resolved.base, folder)
        except (OSError, PathRefused):
            continue
        try:
            _list_folder(resolved, folder, fd, recursive, entries, pending)
        finally:
            os.close(fd)
    return entries


def _list_folder(
    resolved: Resolved, folder: Path, fd: int, recursive: bool, entries: list[dict[str, Any]], pending: list[Path],
) -> None:
    try:
        inside = sorted(os.scandir(fd), key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
    except OSError:
        return
    for entry in inside:
        if PARTIAL_UPLOAD.fullmatch(entry.name):  # an upload being written
            continue
        path = folder / entry.name
        is_link = entry.is_symlink()
        is_dir = entry.is_dir(follow_symlinks=False)
        item = {"path": _agent_path_below(resolved, path), "is_dir": is_dir, "size": None if is_dir or is_link else entry.stat(follow_symlinks=False).st_size}
        if is_link:
            item["symlink"] = True
        entries.append(item)
        if recursive and is_dir:
            pending.append(path)
        if len(entries) >= LIST_LIMIT:
            break


def _grep_host(resolved: Resolved, regex: re.Pattern[str], glob: str | None) -> tuple[list[tuple[str, int, str]], bool]:
    assert resolved.host_path is not None and resolved.base is not None
    root = resolved.host_path
    if not root.exists():
        raise FileError(f"{resolved.agent_path} does not exist")
    files = [root] if root.is_file() else []
    capped = False
    if root.is_dir():
        for folder, dirs, names in os.walk(root, followlinks=False):
            dirs.sort()
            for name in sorted(names):
                if glob and not fnmatch.fnmatch(name, glob):
                    continue
                files.append(Path(folder) / name)
                if len(files) >= GREP_FILE_LIMIT:
                    capped = True
                    break
            if capped:
                break
    matches: list[tuple[str, int, str]] = []
    for path in files:
        if path.is_symlink() or not is_inside(resolved.base, path):
            continue
        try:
            fd = open_inside(resolved.base, path, os.O_RDONLY)
        except (OSError, PathRefused):
            continue
        try:
            if os.fstat(fd).st_size > GREP_FILE_BYTES:
                continue
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read()
        finally:
            os.close(fd)
        if sniff(data[:8192], complete=len(data) <= 8192) != TEXT:
            continue
        name = _agent_path_below(resolved, path) if path != root else resolved.agent_path
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line[:LINE_CHARS]):
                matches.append((name, number, line[:LINE_CHARS]))
                if len(matches) >= GREP_MATCH_LIMIT:
                    return matches, True
    return matches, capped

"""Fail-closed path containment: the one place that turns an untrusted relative path
into a host path under a base folder.

Every host path the agent, the file API or a project explorer touches goes through
``contain``: the candidate is canonicalised with symlinks followed (a link planted from
inside the sandbox that points at ``/etc`` resolves to ``/etc`` and is refused), then
prefix-checked against the canonical base. Anything odd — NUL bytes, over-long names,
absolute paths, encoded traversal that decodes to ``..`` past the base — is an error,
never a silently different file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from skald_hookspecs.types import ToolError
from skald_host.core.refusal import Refusal

MAX_PATH = 4096
MAX_COMPONENT = 255


class PathRefused(Refusal, ToolError):  # a ToolError: its message is fit for the model when a tool lets it through
    """The path is malformed or would leave its base; the message says which, and its
    ``code`` (with ``values``) lets the web shell say it in the reader's language."""


def _leaves() -> PathRefused:
    return PathRefused("path leaves its folder", code="path_leaves_folder")


def clean_relative(path: str) -> PurePosixPath:
    """Validate an untrusted relative path and normalise ``.``/``..`` lexically.

    ``..`` that would climb above the base is refused rather than clamped: a caller
    asking for ``../x`` meant a file outside, and handing them a different file inside
    would be worse than saying no.
    """
    if not isinstance(path, str):
        raise PathRefused("path must be text", code="path_not_text")
    if "\x00" in path:
        raise PathRefused("path contains a NUL byte", code="path_nul_byte")
    if len(path.encode()) > MAX_PATH:
        raise PathRefused(f"path is longer than {MAX_PATH} bytes", code="path_too_long", limit=MAX_PATH)
    if path.startswith("/"):
        raise PathRefused("path must be relative here", code="path_absolute")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if len(part.encode()) > MAX_COMPONENT:
            raise PathRefused(f"a path component is longer than {MAX_COMPONENT} bytes", code="path_component_too_long", limit=MAX_COMPONENT)
        if part == "..":
            if not parts:
                raise _leaves()
            parts.pop()
            continue
        parts.append(part)
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def contain(base: Path, relative: str, *, must_exist: bool = False) -> Path:
    """``base / relative`` canonicalised, guaranteed to be ``base`` or inside it.

    Symlinks are followed (``realpath``) for the existing part of the path, so a link
    anywhere along it that points outside is refused. ``base`` itself is canonicalised
    too, so a data dir reached through a symlink still works.
    """
    root = Path(os.path.realpath(base))
    candidate = Path(os.path.realpath(root / clean_relative(relative)))
    if candidate != root and root not in candidate.parents:
        raise _leaves()
    if must_exist and not candidate.exists():
        raise FileNotFoundError(relative)
    return candidate


def is_inside(base: Path, path: Path) -> bool:
    """Whether ``path`` (canonicalised) is ``base`` or below it."""
    root = Path(os.path.realpath(base))
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


def _fd_path(fd: int) -> Path:
    """Where an open descriptor really is (Linux ``/proc``): the name can be swapped
    after a check, the opened inode cannot."""
    return Path(os.readlink(f"/proc/self/fd/{fd}"))


def open_inside(base: Path, path: Path, flags: int, mode: int = 0o600) -> int:
    """Open ``path`` (already ``contain``-ed, so free of links when it was checked)
    one component at a time from ``base``'s descriptor, none of them followed if it is
    a link by now: a link swapped in after the check is refused before anything it
    points at is opened (a device's open alone can act). What was opened is re-checked
    to be inside ``base`` and to be a regular file or a folder."""
    root = Path(os.path.realpath(base))
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise _leaves() from None
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a folder on the way became a link (or a file)
                    raise _leaves() from None
                raise
            os.close(fd)
            fd = inner
        if parts:
            # O_NONBLOCK: a FIFO planted from the sandbox must not hang the reader.
            last = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY, mode, dir_fd=fd)
        else:
            last, fd = fd, -1
    except OSError as exc:
        # ELOOP: the last component is a symlink; ENOTDIR too when a folder was asked for.
        if exc.errno == errno.ELOOP or exc.errno == errno.ENOTDIR and os.path.islink(path):
            raise PathRefused("path is a symbolic link", code="path_is_link") from None
        raise
    finally:
        if fd >= 0:
            os.close(fd)
    if not is_inside(base, _fd_path(last)):
        os.close(last)
        raise _leaves()
    kind = os.fstat(last).st_mode
    if not (stat.S_ISREG(kind) or stat.S_ISDIR(kind)):
        os.close(last)
        raise PathRefused("path is not a regular file or folder", code="path_not_regular")
    os.set_blocking(last, True)
    return last


def read_all(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes of an open file, read in 1 MiB chunks (a file may grow
    between fstat and the read; whatever it grew by is cut off, never buffered)."""
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(1024 * 1024, remaining))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def open_dir_inside(base: Path, path: Path) -> int:
    return open_inside(base, path, os.O_RDONLY | os.O_DIRECTORY)


def open_dirs_inside(base: Path, path: Path, on_create=None) -> int:
    """A descriptor of the folder ``path`` (already ``contain``-ed), the missing folders
    from ``base`` down to it made one at a time. Walked by descriptor from ``base``'s
    own, never through a link: a sandbox renaming and linking inside ``base`` while this
    runs can neither have a folder made elsewhere nor have one there handed over.
    ``on_create(fd)`` runs for each new folder, with its descriptor."""
    root = Path(os.path.realpath(base))
    target = Path(os.path.realpath(path))
    if target != root and root not in target.parents:
        raise _leaves()
    fd = open_dir_inside(root, root)
    try:
        for part in target.relative_to(root).parts:
            try:
                os.mkdir(part, 0o700, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:  # a link (ELOOP) or a file (ENOTDIR) under that name
                raise PathRefused(f"{part} is not a folder", code="path_not_folder", name=part) from None
            os.close(fd)
            fd = inner
            if made and on_create is not None:
                on_create(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd

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

import os
from pathlib import Path, PurePosixPath

MAX_PATH = 4096
MAX_COMPONENT = 255


class PathRefused(ValueError):
    """The path is malformed or would leave its base; the message says which."""


def clean_relative(path: str) -> PurePosixPath:
    """Validate an untrusted relative path and normalise ``.``/``..`` lexically.

    ``..`` that would climb above the base is refused rather than clamped: a caller
    asking for ``../x`` meant a file outside, and handing them a different file inside
    would be worse than saying no.
    """
    if not isinstance(path, str):
        raise PathRefused("path must be text")
    if "\x00" in path:
        raise PathRefused("path contains a NUL byte")
    if len(path.encode()) > MAX_PATH:
        raise PathRefused(f"path is longer than {MAX_PATH} bytes")
    if path.startswith("/"):
        raise PathRefused("path must be relative here")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if len(part.encode()) > MAX_COMPONENT:
            raise PathRefused(f"a path component is longer than {MAX_COMPONENT} bytes")
        if part == "..":
            if not parts:
                raise PathRefused("path leaves its folder")
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
        raise PathRefused("path leaves its folder")
    if must_exist and not candidate.exists():
        raise FileNotFoundError(relative)
    return candidate


def is_inside(base: Path, path: Path) -> bool:
    """Whether ``path`` (canonicalised) is ``base`` or below it."""
    root = Path(os.path.realpath(base))
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents

"""One folder's entries as the explorers show them (the web's project files and a
channel's read-only project view, spec 1.3): links are listed as links, never followed."""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from typing import Any

MAX_LISTING = 5000
#: An upload being written beside its target (``.part-<16 hex>``): never listed.
PARTIAL_UPLOAD = re.compile(r"\.part-[0-9a-f]{16}")
#: A file write (``MemberFiles.write_text``) beside its target, renamed over it once whole
#: (``.<name>.<8 hex>.tmp``): one a killed server cut is removed at the next start.
CUT_WRITE = re.compile(r"\..{1,200}\.[0-9a-f]{8}\.tmp", re.DOTALL)


def stamp(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def listing(folder: int, rel: str) -> list[dict[str, Any]]:
    """The entries of the folder open as ``folder`` (a descriptor checked to be inside
    its project: a name could have become a link out of it since the check). Folders
    first, then by name; at most ``MAX_LISTING`` entries. Blocking: run it in a thread."""
    entries = []
    with os.scandir(folder) as it:
        for entry in it:
            if len(entries) >= MAX_LISTING:
                break
            if PARTIAL_UPLOAD.fullmatch(entry.name):
                continue  # an upload being written (or one a killed server left, removed at start)
            info = entry.stat(follow_symlinks=False)
            kind = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "link" if stat.S_ISLNK(info.st_mode) else "other"
            entries.append(
                {
                    "name": entry.name,
                    "path": f"{rel}/{entry.name}" if rel else entry.name,
                    "kind": kind,
                    "is_dir": kind == "dir",
                    "size": info.st_size if kind == "file" else None,
                    "modified_at": stamp(info.st_mtime),
                }
            )
    entries.sort(key=lambda e: (not e["is_dir"], e["name"].lower(), e["name"]))
    return entries

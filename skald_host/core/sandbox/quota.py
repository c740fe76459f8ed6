"""The per-member disk limit of the home (``sandbox.home_quota_mib``; check E4's
"write 10 GB").

The home is a plain folder under the data dir bind-mounted into the sandbox, and
this filesystem has no kernel quotas (nor may the host run as root), so the limit
is made of three parts that hold without either:

- ``RLIMIT_FSIZE`` on every command, set by both backends' launchers to the room
  left in the home when the command starts: one file can never grow past it (the
  writer gets SIGXFSZ, or EFBIG if it ignores that), so a single big write stops at
  the limit exactly, however fast the disk is.
- A check before each command: in a home already over its limit the command may not
  write (no file may grow past ``MIN_FILE_SIZE``, the home not past its size now plus
  ``OVER_LIMIT_SLACK``) and its output begins with a notice saying so. It still runs,
  because refusing every command would leave the member no way to free space: ``rm``
  works, writing does not.
- A watchdog thread while the command runs, measuring the home every 50 to 500 ms
  (``WATCH_INTERVAL``: the bigger the home, the longer a walk and the pause after it,
  so the watchdog takes at most 1/``WATCH_COST`` of a core) and killing the command's process group once it is
  over. Many small files are caught this way; what it cannot stop is what is
  written between two measurements, so the overshoot is bounded by the write rate
  times the interval plus the time a kill takes (a ``docker exec`` on Docker). A
  walk stops as soon as the total passes the limit.

Usage is what the files occupy on disk (``st_blocks``), each inode counted once, so
sparse files and hard links are not charged for space they do not take. Folders
the host cannot read are skipped (they are the member's own, made unreadable from
inside; their contents go uncounted — a known gap, see the README).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MIB = 1024 * 1024
#: Seconds between two measurements of a running command's home (shortest, longest):
#: the pause is ``WATCH_COST`` times the last walk's duration within these bounds.
WATCH_INTERVAL = (0.05, 0.5)
WATCH_COST = 20
#: The file size cap of a command in a home over its limit: bubblewrap itself needs a
#: few bytes of it to start, and nothing useful can be written in it.
MIN_FILE_SIZE = 4096
#: How far a command in a home over its limit may grow it (folders, links) before the
#: watchdog kills it.
OVER_LIMIT_SLACK = MIB
#: What a command in a full home and a killed one tell the member (sizes in MiB).
OVER_LIMIT = (
    "[Refused to write: your home (~) uses {used} MiB, over its disk limit of {limit} MiB."
    " This command ran without the right to write files; delete files (e.g. rm) to write again.]"
)
KILLED = (
    "The command was killed: your home (~) passed its disk limit (sandbox.home_quota_mib)."
    " Delete what it wrote (e.g. with rm) before writing more."
)


def home_usage(home: Path | str, stop_above: int | None = None) -> int:
    """Bytes the files under ``home`` occupy on disk, symlinks not followed. With
    ``stop_above`` the walk ends as soon as the total passes it (the caller only
    needs to know that it did), which keeps a check of a full home cheap.

    Each folder is opened (one at a time) and must be the very folder its listing
    showed (device and inode): the sandbox renames and links in the home while this
    runs, and a folder swapped for a link to ``/`` had the host's whole disk walked."""
    total = 0
    seen: set[tuple[int, int]] = set()
    try:
        top = os.stat(home)
    except OSError:
        return 0
    device = top.st_dev
    pending = [(os.fspath(home), (top.st_dev, top.st_ino))]
    while pending:
        folder, expected = pending.pop()
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # vanished meanwhile, became a link, or unreadable to the host
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != expected:
                continue  # not the folder that was listed: something was swapped in
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        if info.st_dev == device:  # a filesystem mounted below is not the home's
                            pending.append((f"{folder}/{entry.name}", (info.st_dev, info.st_ino)))
                        total += info.st_blocks * 512
                    elif info.st_nlink > 1:
                        key = (info.st_dev, info.st_ino)
                        if key in seen:
                            continue
                        seen.add(key)
                        total += info.st_blocks * 512
                    else:
                        total += info.st_blocks * 512
                    if stop_above is not None and total > stop_above:
                        return total
        finally:
            os.close(fd)
    return total


def mib(size: int) -> int:
    """Rounded up, so "over the limit" never reads as "at it"."""
    return -(-size // MIB)

"""Moving a broken database aside, never deleting it.

A file that will not open may still hold a member's only copy of their history (a key
problem, a bug in a migration): it is kept for the operator, who decides what to do.
"""

import os
import re
from datetime import UTC, datetime
from itertools import count
from pathlib import Path

from .permissions import fsync_dir, secure_dir

# Sidecars move before the main file: if we crash halfway, what is left at the old place
# is the main file (quarantined again next time), never a stale -wal that SQLite would
# replay into a newly created database of the same name.
SIDECAR_SUFFIXES = ("-journal", "-wal", "-shm")
QUARANTINE_DIR = "quarantine"


def quarantine(path: Path, reason: str) -> Path:
    """Move ``path`` and its -wal/-shm/-journal into ``path.parent / "quarantine"``.

    Names are ``{stem}.{UTC yyyymmddThhmmssZ}.{reason-slug}{suffix}`` plus the sidecar's
    suffix, so the moved set still opens together; a counter is added rather than
    overwriting anything. Returns the main file's new path. The database must be closed.
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
        if not any(os.path.lexists(t) for t in targets):
            break
    for suffix, sidecar in sidecars.items():
        _move_without_overwriting(sidecar, target.with_name(target.name + suffix))
    _move_without_overwriting(path, target)
    fsync_dir(target_dir)
    fsync_dir(path.parent)
    return target


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

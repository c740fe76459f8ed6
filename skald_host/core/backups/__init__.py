"""Backups of the whole data dir, online (check G6): ``service.py`` takes them from the
running core, ``archive.py`` is the format on disk, verification and restore."""

from .archive import BackupBusy, BackupError, BackupInfo, list_backups, restore, verify
from .service import BackupService, Unfinished, remove_partials

__all__ = [
    "BackupBusy", "BackupError", "BackupInfo", "BackupService", "Unfinished", "list_backups", "remove_partials", "restore", "verify",
]

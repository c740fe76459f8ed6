"""The storage layer: SQLite/SQLCipher files, migrations, quarantine (DESIGN: "Identity,
storage, privacy"). Nothing outside the core gets a connection; plugins go through HostApi.
"""

from .connection import Connection
from .database import Database, remove_database_files
from .errors import (
    DatabaseMissing,
    DatabaseUnreadable,
    DiskFailure,
    DiskFull,
    SchemaTooNew,
    SqlCipherUnavailable,
    StorageError,
    StorageFailing,
    disk_failure,
)
from .migrations import Migration, MigrationSet, apply_migrations
from .permissions import secure_dir
from .quarantine import quarantine
from .snapshot import copy_closed_database
from .sqlcipher import check_sqlcipher_build

__all__ = [
    "Connection",
    "Database",
    "DatabaseMissing",
    "DatabaseUnreadable",
    "DiskFailure",
    "DiskFull",
    "Migration",
    "MigrationSet",
    "SchemaTooNew",
    "SqlCipherUnavailable",
    "StorageError",
    "StorageFailing",
    "apply_migrations",
    "check_sqlcipher_build",
    "copy_closed_database",
    "disk_failure",
    "quarantine",
    "remove_database_files",
    "secure_dir",
]

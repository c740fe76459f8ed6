"""The storage layer: SQLite/SQLCipher files, migrations, quarantine (DESIGN: "Identity,
storage, privacy"). Nothing outside the core gets a connection; plugins go through HostApi.
"""

from .connection import Connection
from .database import Database
from .errors import (
    DatabaseMissing,
    DatabaseUnreadable,
    SchemaTooNew,
    SqlCipherUnavailable,
    StorageError,
)
from .migrations import Migration, MigrationSet, apply_migrations
from .permissions import secure_dir
from .quarantine import quarantine
from .sqlcipher import check_sqlcipher_build

__all__ = [
    "Connection",
    "Database",
    "DatabaseMissing",
    "DatabaseUnreadable",
    "Migration",
    "MigrationSet",
    "SchemaTooNew",
    "SqlCipherUnavailable",
    "StorageError",
    "apply_migrations",
    "check_sqlcipher_build",
    "quarantine",
    "secure_dir",
]

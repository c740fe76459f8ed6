"""Storage errors.

Each says what was wrong and what the operator can do about it. None ever carries key
material: a message may end up in a log line, an admin page or a bug report.
"""


class StorageError(Exception):
    """Base for every failure of the storage layer."""


class DatabaseMissing(StorageError):
    """A database file that should exist does not.

    Raised instead of letting SQLite create an empty file in its place: an empty owner file
    would look like a member with no history, hiding the real loss.
    """


class DatabaseUnreadable(StorageError):
    """The file exists but cannot be read: wrong key, corrupt, or not a database.

    SQLCipher cannot tell a wrong key from corruption (both fail the page HMAC), so neither
    can we; the message never guesses which.
    """


class SchemaTooNew(StorageError):
    """The file's schema version is newer than any migration this Skald knows.

    It was written by a newer Skald. Opening it would risk writing rows an older schema does
    not understand, so we refuse; migrations only ever go forward.
    """


class SqlCipherUnavailable(StorageError):
    """The installed sqlcipher3 cannot encrypt, or not in the SQLCipher 4 format."""

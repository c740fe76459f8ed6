"""Storage errors.

Each says what was wrong and what the operator can do about it. None ever carries key
material: a message may end up in a log line, an admin page or a bug report.
"""

import errno
import os


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


class DiskFailure(StorageError):
    """The disk refused a write (check G4): nothing of it was kept. ``code`` and
    ``member_text`` say which failure, in words fit for a member and a client."""

    code = "disk_failure"
    member_text = "the server could not write to its disk, so this was not saved"


class DiskFull(DiskFailure):
    """The disk (or a file size limit) is full: the change was not saved. SQLite rolled
    the transaction back, so nothing is half-written; the same request succeeds once an
    admin has freed space, without a restart (check G4). ``member_text`` is what a
    member is told (the message names the file: the operator's log only)."""

    code = "disk_full"
    member_text = "the server's disk is full, so this was not saved; try again once an admin has freed space"


class StorageFailing(DiskFailure):
    """An I/O error or a read-only filesystem: the change was not saved. Retrying may
    work once the disk is back (check G4)."""

    code = "storage_failing"
    member_text = "the server cannot write to its disk right now, so this was not saved; try again later"


#: SQLite primary result codes (``sqlite_errorcode & 0xff``) that mean the disk, not the query.
_SQLITE_FULL = 13
_SQLITE_FAILING = {8: "read-only", 10: "I/O error", 14: "cannot open a file"}  # READONLY, IOERR, CANTOPEN
_ERRNO_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_ERRNO_FAILING = {errno.EIO, errno.EROFS}


def disk_failure(error: BaseException, where: object) -> DiskFailure | None:
    """``error`` as DiskFull or StorageFailing when it is the disk's failure (a SQLite
    error by its code, or an OSError by its errno), else None. ``where``: the file or
    directory, for the operator."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        primary = code & 0xFF
        if primary == _SQLITE_FULL:
            return DiskFull(f"the disk is full: {where} could not be written")
        if primary in _SQLITE_FAILING:
            return StorageFailing(f"storage is failing ({_SQLITE_FAILING[primary]}): {where} could not be written")
        return None
    if isinstance(error, OSError):
        if error.errno in _ERRNO_FULL:
            return DiskFull(f"the disk is full: {where} could not be written")
        if error.errno in _ERRNO_FAILING:
            return StorageFailing(f"storage is failing ({os.strerror(error.errno or 0)}): {where} could not be written")
    return None

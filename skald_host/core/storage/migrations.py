"""Forward-only schema migrations tracked by ``PRAGMA user_version`` (DESIGN: "Schema
versioning from day one").

One mechanism for every bucket (the registry at boot, an owner file at unlock). Each step
commits together with its version bump, so a crash leaves the file at a version whose
schema it really has, and the next open resumes from there.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .connection import Connection, rollback_quietly
from .errors import SchemaTooNew, StorageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Migration:
    """One schema step. ``statements`` run first, one ``execute`` each, then ``apply``.

    Each entry of ``statements`` is exactly one SQL statement (a CREATE TRIGGER may contain
    ``;``). We never use ``executescript``: it commits first, which would break the step's
    transaction. ``apply`` is for steps SQL cannot express (backfilling from JSON...); it
    must not commit.
    """

    version: int
    description: str
    statements: tuple[str, ...] = ()
    apply: Callable[[Connection], None] | None = None

    def __post_init__(self) -> None:
        # `statements=("CREATE ...")` without a trailing comma is a str, and iterating it
        # would execute single characters.
        if not isinstance(self.statements, tuple) or not all(
            isinstance(statement, str) for statement in self.statements
        ):
            raise TypeError(
                f"migration {self.version} ({self.description}): statements must be a "
                "tuple of str (did you forget the trailing comma of a 1-tuple?)"
            )
        if not self.statements and self.apply is None:
            raise ValueError(
                f"migration {self.version} ({self.description}) has neither statements nor apply"
            )


@dataclass(frozen=True)
class MigrationSet:
    """The ordered migrations of one bucket (``registry``, ``owner``); versions 1..N."""

    bucket: str
    steps: tuple[Migration, ...]

    def __post_init__(self) -> None:
        versions = [step.version for step in self.steps]
        if versions != list(range(1, len(versions) + 1)):
            raise ValueError(
                f"migrations of bucket {self.bucket!r} must be numbered 1..N consecutively, "
                f"got {versions}"
            )

    @property
    def latest(self) -> int:
        return len(self.steps)

    def before(self, version: int) -> "MigrationSet":
        """The same bucket as an earlier release had it (steps below ``version``): what an
        upgrade test opens a file with to write the rows that release wrote."""
        return MigrationSet(self.bucket, tuple(step for step in self.steps if step.version < version))


def apply_migrations(conn: Connection, migration_set: MigrationSet) -> tuple[int, int]:
    """Bring ``conn`` up to ``migration_set.latest``; return (from_version, to_version).

    Foreign-key enforcement is switched off while steps run and checked with
    ``PRAGMA foreign_key_check`` before each commit, as SQLite's documented table-rebuild
    procedure requires: otherwise dropping a referenced table during a rebuild would
    cascade-delete (or refuse) the rows that point at it. The pragma is a no-op inside a
    transaction, so it is toggled around the steps.
    """
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    latest = migration_set.latest
    if current > latest:
        raise SchemaTooNew(
            f"the {migration_set.bucket} database is at schema version {current}, but this "
            f"Skald knows versions up to {latest}: it was written by a newer Skald. Upgrade "
            "Skald to open it, or restore the backup taken before the upgrade to go back (skald restore): databases "
            "are never downgraded"
        )
    if current == latest:
        return current, current
    if conn.in_transaction:
        raise StorageError("apply_migrations needs a connection with no open transaction")
    foreign_keys = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        for step in migration_set.steps[current:]:
            _apply_step(conn, migration_set.bucket, step)
    finally:
        conn.execute(f"PRAGMA foreign_keys = {int(foreign_keys)}")
    if current:  # not a new file: the upgrade is said, since an earlier Skald refuses it from now on
        # Named by its file: each member's file moves at their first sign-in, and identical
        # lines did not say whose had moved.
        files = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main" and row[2]]
        log.info("the %s database%s moved from schema version %d to %d (an earlier Skald can no longer open it)",
                 migration_set.bucket, f" {Path(files[0]).name}" if files else "", current, latest)
    return current, latest


def _apply_step(conn: Connection, bucket: str, step: Migration) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in step.statements:
            conn.execute(statement)
        if step.apply is not None:
            step.apply(conn)
        violations = conn.execute("PRAGMA foreign_key_check").fetchall()
        if violations:
            tables = sorted({row[0] for row in violations})
            raise StorageError(f"it leaves rows with dangling foreign keys in {tables}")
        # A pragma cannot take a bound parameter; version is an int from a validated set.
        conn.execute(f"PRAGMA user_version = {int(step.version)}")
        conn.execute("COMMIT")
    except BaseException as error:
        rollback_quietly(conn)
        if not isinstance(error, Exception):
            raise
        raise StorageError(
            f"migration {bucket} v{step.version} ({step.description}) failed and was rolled "
            f"back: {error}. The file stays at v{step.version - 1}, unchanged. A file another build"
            " of Skald wrote (a development branch whose migrations differ) fails so: start that build"
            " again, or restore a backup a released version made, then restart"
        ) from error

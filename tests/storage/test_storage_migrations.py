import sqlite3

import pytest

from skald_host.core.storage import (
    Database,
    Migration,
    MigrationSet,
    SchemaTooNew,
    StorageError,
    apply_migrations,
)

from .conftest import NOTES_V1, NOTES_V2, select


async def test_migrations_upgrade_old_file_without_losing_rows(db_path, key, one_step, three_steps):
    db = await Database.open(db_path, key=key, migrations=one_step, create=True)
    assert db.schema_version == 1
    await db.transaction(
        lambda conn: conn.executemany("INSERT INTO notes (body) VALUES (?)", [("a",), ("b",)])
    )
    await db.close()

    db = await Database.open(db_path, key=key, migrations=three_steps)
    assert db.schema_version == 3
    assert await db.run(lambda conn: conn.execute("PRAGMA user_version").fetchone()[0]) == 3
    rows = await db.run(lambda conn: conn.execute("SELECT body, title FROM notes").fetchall())
    assert [tuple(row) for row in rows] == [("a", None), ("b", None)]
    await db.run(lambda conn: conn.execute("INSERT INTO notes (body) VALUES ('c')"))
    assert await db.run(
        lambda conn: conn.execute("SELECT title FROM notes WHERE body = 'c'").fetchone()[0]
    ) == "untitled"  # the trigger (a statement containing `;`) was created whole
    await db.run(lambda conn: conn.execute("INSERT INTO tags VALUES (1, 'x')"))
    await db.close()


async def test_failed_migration_rolls_back_step_and_version(db_path, one_step):
    db = await Database.open(db_path, key=None, migrations=one_step, create=True)
    await db.run(lambda conn: conn.execute("INSERT INTO notes (body) VALUES ('kept')"))
    await db.close()
    broken = MigrationSet(
        "owner",
        (
            NOTES_V1,
            NOTES_V2,
            Migration(
                3,
                "half done",
                ("CREATE TABLE half (x)", "UPDATE notes SET body = 'changed'", "NOT SQL"),
            ),
        ),
    )

    with pytest.raises(StorageError, match=r"owner v3 \(half done\)") as caught:
        await Database.open(db_path, key=None, migrations=broken)
    assert "database file: " in "".join(caught.value.__notes__)
    # What the admin can do, in their words: an upgrade probe's data dir from a
    # development build was told to "fix the migration".
    assert "stays at v2, unchanged" in str(caught.value) and "restore a backup a released version made" in str(caught.value)

    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2  # v2 committed on its own
    assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "half" not in tables
    conn.close()


async def test_failing_apply_callable_rolls_back_its_statements(db_path, one_step):
    def explode(conn):
        conn.execute("INSERT INTO notes (body) VALUES ('from apply')")
        raise ValueError("bad data")

    await (await Database.open(db_path, key=None, migrations=one_step, create=True)).close()
    steps = MigrationSet("owner", (NOTES_V1, Migration(2, "backfill", apply=explode)))
    with pytest.raises(StorageError, match="bad data"):
        await Database.open(db_path, key=None, migrations=steps)
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM notes").fetchone()[0] == 0
    conn.close()


async def test_newer_schema_refused(db_path, key, one_step, three_steps):
    db = await Database.open(db_path, key=key, migrations=three_steps, create=True)
    await db.close()

    with pytest.raises(SchemaTooNew, match="version 3.*up to 1.*newer Skald.*restore the backup taken before the upgrade"):
        await Database.open(db_path, key=key, migrations=one_step)
    db = await Database.open(db_path, key=key, migrations=three_steps)  # untouched
    assert db.schema_version == 3
    await db.close()


async def test_migration_can_rebuild_a_referenced_table_without_cascading(db_path, three_steps):
    db = await Database.open(db_path, key=None, migrations=three_steps, create=True)
    await db.transaction(
        lambda conn: (
            conn.execute("INSERT INTO notes (body) VALUES ('n')"),
            conn.execute("INSERT INTO tags VALUES (1, 't')"),
        )
    )
    await db.close()
    rebuild = Migration(
        4,
        "rebuild notes with NOT NULL title",
        (
            "CREATE TABLE notes_new (id INTEGER PRIMARY KEY, body TEXT NOT NULL,"
            " title TEXT NOT NULL DEFAULT 'untitled')",
            "INSERT INTO notes_new SELECT id, body, coalesce(title, 'untitled') FROM notes",
            "DROP TABLE notes",  # with foreign keys on, this would cascade-delete the tags
            "ALTER TABLE notes_new RENAME TO notes",
        ),
    )
    four = MigrationSet("owner", (*three_steps.steps, rebuild))

    db = await Database.open(db_path, key=None, migrations=four)
    assert await select(db, "SELECT * FROM tags") == [(1, "t")]
    assert (await db.pragmas())["foreign_keys"] == 1
    await db.close()


async def test_migration_leaving_dangling_foreign_keys_is_rolled_back(db_path, three_steps):
    db = await Database.open(db_path, key=None, migrations=three_steps, create=True)
    await db.close()
    dangling = Migration(4, "orphan tag", ("INSERT INTO tags VALUES (99, 'orphan')",))

    with pytest.raises(StorageError, match="dangling foreign keys in \\['tags'\\]"):
        await Database.open(
            db_path, key=None, migrations=MigrationSet("owner", (*three_steps.steps, dangling))
        )
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(*) FROM tags").fetchone()[0] == 0
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    conn.close()


def test_apply_migrations_reports_from_and_to_versions(three_steps):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    assert apply_migrations(conn, MigrationSet("owner", three_steps.steps[:1])) == (0, 1)
    assert apply_migrations(conn, three_steps) == (1, 3)
    assert apply_migrations(conn, three_steps) == (3, 3)


def test_migration_set_requires_consecutive_versions_from_one():
    with pytest.raises(ValueError, match="1..N"):
        MigrationSet("owner", (NOTES_V2,))
    with pytest.raises(ValueError, match="1..N"):
        MigrationSet("owner", (NOTES_V1, NOTES_V1))


def test_statements_given_as_a_bare_string_are_rejected():
    with pytest.raises(TypeError, match="trailing comma"):
        Migration(1, "oops", ("CREATE TABLE t (x)"))  # type: ignore[arg-type]


async def test_a_database_whose_creation_fails_is_not_left_behind(db_path, one_step):
    """Created whole or not at all: a half-made file would later read as damaged."""
    steps = MigrationSet("owner", (NOTES_V1, Migration(2, "backfill", apply=lambda conn: 1 / 0)))
    with pytest.raises(StorageError, match="division by zero"):
        await Database.open(db_path, key=None, migrations=steps, create=True)
    assert list(db_path.parent.iterdir()) == []

import os
from pathlib import Path

import pytest

from skald_host.core.storage import Migration, MigrationSet

NOTES_V1 = Migration(
    1,
    "notes table",
    ("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",),
)
NOTES_V2 = Migration(2, "notes.title", ("ALTER TABLE notes ADD COLUMN title TEXT",))
NOTES_V3 = Migration(
    3,
    "tags table with a trigger",
    (
        "CREATE TABLE tags (note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,"
        " tag TEXT NOT NULL)",
        # One statement that contains `;`: must be executed as one entry.
        "CREATE TRIGGER notes_title_default AFTER INSERT ON notes WHEN NEW.title IS NULL "
        "BEGIN UPDATE notes SET title = 'untitled' WHERE id = NEW.id; END",
    ),
)


@pytest.fixture
def one_step() -> MigrationSet:
    return MigrationSet("owner", (NOTES_V1,))


@pytest.fixture
def three_steps() -> MigrationSet:
    return MigrationSet("owner", (NOTES_V1, NOTES_V2, NOTES_V3))


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "database" / "u1.db"


async def select(db, sql: str) -> list[tuple]:
    """Rows as plain tuples: sqlite3.Row does not compare equal to a tuple."""
    return await db.run(lambda conn: [tuple(row) for row in conn.execute(sql)])

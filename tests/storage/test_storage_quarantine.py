import re
import stat

from skald_host.core.storage import Database, quarantine

from .conftest import select

SIDECARS = ("-wal", "-shm", "-journal")


def make_database_with_sidecars(directory, name="u1.db"):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"main")
    for suffix in SIDECARS:
        path.with_name(name + suffix).write_bytes(suffix.encode())
    return path


def test_quarantine_moves_all_sidecars(tmp_path):
    path = make_database_with_sidecars(tmp_path / "database")

    moved = quarantine(path, "Wrong key / corrupt!")

    assert moved.parent == tmp_path / "database" / "quarantine"
    assert re.fullmatch(r"u1\.\d{8}T\d{6}Z\.wrong-key-corrupt\.db", moved.name)
    assert moved.read_bytes() == b"main"
    for suffix in SIDECARS:
        assert moved.with_name(moved.name + suffix).read_bytes() == suffix.encode()
        assert not path.with_name(path.name + suffix).exists()
    assert not path.exists()
    assert stat.S_IMODE(moved.parent.stat().st_mode) == 0o700


def test_quarantine_never_overwrites(tmp_path):
    directory = tmp_path / "database"
    first = quarantine(make_database_with_sidecars(directory), "corrupt")
    second = quarantine(make_database_with_sidecars(directory), "corrupt")
    third = quarantine(make_database_with_sidecars(directory), "corrupt")

    assert len({first, second, third}) == 3
    assert all(p.read_bytes() == b"main" for p in (first, second, third))
    assert len(list(first.parent.iterdir())) == 3 * (1 + len(SIDECARS))


def test_quarantine_without_sidecars_moves_only_the_file(tmp_path):
    path = tmp_path / "system.db"
    path.write_bytes(b"x")
    moved = quarantine(path, "")
    assert moved.name.endswith(".unspecified.db")
    assert [p.name for p in moved.parent.iterdir()] == [moved.name]


async def test_quarantined_database_still_opens_with_its_key(tmp_path, key, one_step):
    path = tmp_path / "database" / "u1.db"
    db = await Database.open(path, key=key, migrations=one_step, create=True)
    await db.run(lambda conn: conn.execute("INSERT INTO notes (body) VALUES ('saved')"))
    await db.close()

    moved = quarantine(path, "operator request")
    db = await Database.open(moved, key=key, migrations=one_step)
    assert await select(db, "SELECT body FROM notes") == [("saved",)]
    await db.close()

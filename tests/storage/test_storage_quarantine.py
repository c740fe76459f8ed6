import os
import re
import stat
from pathlib import Path

import pytest

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


def test_erase_tree_opens_up_folders_without_read_write_or_search_bits(tmp_path):
    """A sandbox may leave a folder at mode 000, 300 or 100 in what a deletion erases;
    opening it up once took a read bit it did not have, so a deleted member's projects
    stayed and the next start failed (review). Root ignores the bits, so as root the
    erase runs as nobody, in a process of its own."""
    import shutil
    import subprocess
    import sys
    import tempfile

    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="skald-erase-"))
    try:
        os.chmod(root, 0o755)
        cases = {}
        for mode in (0o000, 0o300, 0o100, 0o500):
            top = root / f"mode{mode:o}"
            (top / "sub").mkdir(parents=True)
            (top / "f").write_text("x")
            (top / "sub" / "g").write_text("y")
            os.symlink("/etc", top / "link")  # goes as a link, /etc untouched
            cases[mode] = top
        if os.geteuid() == 0:
            for path in [root, *root.rglob("*")]:
                os.lchown(path, 65534, 65534)
        for mode, top in cases.items():
            os.chmod(top, mode)
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        if prefix and shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is needed to run the erase as another user than root")
        script = ("import sys; from pathlib import Path; from skald_host.core.storage.quarantine import erase_tree\n"
                  "for p in sys.argv[1:]: erase_tree(Path(p))")
        repo = str(Path(__file__).resolve().parents[2])
        result = subprocess.run([*prefix, sys.executable, "-c", script, *map(str, cases.values())],
                                capture_output=True, text=True, timeout=60, cwd="/", env={**os.environ, "PYTHONPATH": repo})
        if result.returncode and "Permission denied" in result.stderr and "erase_tree" not in result.stderr:
            pytest.skip(f"this Python cannot run as nobody here: {result.stderr[-200:]}")
        assert result.returncode == 0, result.stderr[-2000:]
        assert [p.name for p in root.iterdir()] == []
        assert Path("/etc/hostname").exists() or Path("/etc").is_dir()
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)

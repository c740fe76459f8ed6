"""B2/B4: a member's file names its owner, and a file that names another is refused.

An unencrypted member's file is plain SQLite: it opens at any member's path. Two such
files swapped on disk while the server was stopped showed each member the other's
data, with nothing logged. Now every member's file carries its owner's member id
(owner migration 22), and a file at the wrong path is refused at login as an
unreadable one is: 409 ``owner_db_unreadable``, the file quarantined, an ERROR line
naming both ids. A file from before the record gets it at its member's first open
(trust on first use).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.testing.host import MEMBER_PASSWORD

from .helpers import (
    create_member,
    get_settings,
    owner_file,
    put_settings,
    quarantined,
    setup_admin,
    upgraded_from,
)

CAROL_PASSWORD = "carol's own long passphrase"
DAVE_PASSWORD = "dave's own long passphrase"


def recorded_owner(path: Path) -> str | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT member_id FROM file_owner WHERE id = 1").fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def swap(first: Path, second: Path) -> None:
    """``mv`` the two files (and any sidecar) into each other's place."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        a, b = Path(f"{first}{suffix}"), Path(f"{second}{suffix}")
        held = a.with_name(a.name + ".swapping")
        if a.exists():
            a.rename(held)
        if b.exists():
            b.rename(a)
        if held.exists():
            held.rename(b)


async def test_swapped_unencrypted_files_are_refused_after_a_restart(servers):
    server = await servers.start()
    admin = await setup_admin(server)
    carol_id = await create_member(admin, "carol", CAROL_PASSWORD, encrypted=False)
    dave_id = await create_member(admin, "dave", DAVE_PASSWORD, encrypted=False)
    for name, password, secret in (("carol", CAROL_PASSWORD, "carol's diary"), ("dave", DAVE_PASSWORD, "dave's diary")):
        member = await server.login(name, password)
        await put_settings(member, {"diary": secret})
        assert (await member.post("/api/auth/logout")).status_code == 200
    assert await server.terminate() == 0

    data_dir = servers.data_dir
    carol_path, dave_path = owner_file(data_dir, carol_id), owner_file(data_dir, dave_id)
    swap(carol_path, dave_path)

    server = await servers.start()
    for name, password in (("carol", CAROL_PASSWORD), ("dave", DAVE_PASSWORD)):
        response = await server.client().login(name, password)
        assert response.status_code == 409, response.text
        assert response.json()["code"] == "owner_db_unreadable"
        assert "diary" not in response.text
    # Set aside, never replaced: each member's quarantine holds the other's file.
    assert not carol_path.exists() and not dave_path.exists()
    [carol_moved], [dave_moved] = quarantined(data_dir, carol_id), quarantined(data_dir, dave_id)
    assert (recorded_owner(carol_moved), recorded_owner(dave_moved)) == (dave_id, carol_id)
    # Still refused (missing now), never an empty file that would hide the loss.
    again = await server.client().login("carol", CAROL_PASSWORD)
    assert again.status_code == 409 and again.json()["code"] == "owner_db_missing"
    assert await server.terminate() == 0

    logged = server.output + (data_dir / "logs" / "skald.log").read_text(errors="replace") \
        if (data_dir / "logs" / "skald.log").exists() else server.output
    errors = [line for line in logged.splitlines() if "ERROR" in line and "'s file" in line]
    assert any(carol_id in line and dave_id in line for line in errors), logged[-4000:]
    assert "diary" not in logged


async def test_a_file_from_before_the_record_opens_for_its_member_and_then_names_them(skald):
    host = await skald.start()
    alice = await host.member("alice", encrypted=False)
    assert (await alice.post("/api/auth/logout")).status_code == 200
    member_id = alice.member["id"]
    path = host.core.users.owner_path(member_id)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)

    # The file as the release before step 22 wrote it (no owner record), upgraded.
    older_rows = lambda c: c.execute("INSERT INTO member_settings (key, value) VALUES ('diary', '\"from before\"')")  # noqa: E731
    async with upgraded_from(path, OWNER_MIGRATIONS, 22, older_rows) as db:
        assert await db.run(lambda c: c.execute("SELECT count(*) FROM file_owner").fetchone()[0]) == 0

    response = await host.client().login("alice", MEMBER_PASSWORD)
    assert response.status_code == 200, response.text
    assert host.core.users.is_unlocked(member_id)
    client = host.client()
    assert (await client.login("alice", MEMBER_PASSWORD)).status_code == 200
    assert (await get_settings(client))["diary"] == "from before"
    assert recorded_owner(path) == member_id

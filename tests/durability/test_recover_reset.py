"""``skald recover-reset``: an admin reset of an encrypted member promised that the old
database "stays encrypted with the old password", but the key that opens it lived only
in the registry row the reset overwrote, so not even the old password could open it
(operator probe). The wrapped key now goes beside the quarantined file, and the command
gives the account its old database and home back when the old password is given."""

from __future__ import annotations

import stat
import uuid

from tests.plugins.test_cli import skald

from .helpers import ADMIN_PASSWORD, create_member, database_dir, get_settings, put_settings, setup_admin

OLD, NEW = "alice's first passphrase 7", "alice's passphrase after the reset 8"


def _quarantined(data, member_id: str) -> set[str]:
    return {p.name for p in (database_dir(data) / "quarantine").iterdir() if p.name.startswith(f"{member_id}.")}


async def test_a_reset_keeps_the_old_key_and_recover_reset_gives_the_old_data_back(servers, tmp_path):
    server = await servers.start()
    admin = await setup_admin(server)
    alice_id = await create_member(admin, "alice", OLD)
    alice = await server.login("alice", OLD)
    before = await put_settings(alice, {"note": f"BEFORE-{uuid.uuid4()}"})
    diary = f"DIARY-{uuid.uuid4()}"
    home = servers.data_dir / "homes" / alice_id
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "diary.txt").write_text(diary)
    assert (await alice.post("/api/auth/logout")).status_code == 200
    reset = await admin.post(f"/api/admin/members/{alice_id}/reset-password", json={"new_password": NEW, "confirm_data_loss": True})
    assert reset.status_code == 200, reset.text

    # The old file went with its key: the same stem, 0600, and nothing left half done.
    [old_db] = (database_dir(servers.data_dir) / "quarantine").glob(f"{alice_id}.*.admin-reset.db")
    stem = old_db.name.removesuffix(".db")
    key = old_db.with_name(stem + ".key.json")
    assert key.is_file() and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert {f"{stem}.db", f"{stem}.key.json", f"{stem}.home"} <= _quarantined(servers.data_dir, alice_id)
    assert not any(".reset" in p.name for p in database_dir(servers.data_dir).iterdir())

    alice = await server.login("alice", NEW)
    after = await put_settings(alice, {"note": f"AFTER-{uuid.uuid4()}"})
    assert after != before
    assert await server.terminate() == 0
    data = str(servers.data_dir)

    # Wrong old password: refused, nothing changed (files and passwords).
    files = _quarantined(servers.data_dir, alice_id)
    wrong = skald("recover-reset", "alice", "--data-dir", data, "--password-stdin", cwd=tmp_path, stdin="not the old one 9\n")
    assert wrong.returncode == 2 and "nothing was changed" in wrong.stderr, wrong.stderr
    assert _quarantined(servers.data_dir, alice_id) == files

    done = skald("recover-reset", "alice", "--data-dir", data, "--password-stdin", cwd=tmp_path, stdin=OLD + "\n")
    assert done.returncode == 0, done.stderr
    assert old_db.name in done.stdout and "not given back" in done.stdout
    # The set-aside data opens with the password the account had until now (the member
    # may have chosen their own after the reset: the operator probe saw "set at the reset").
    assert "the password the account had until now" in done.stdout, done.stdout

    # The post-reset database is quarantined with its own key file; the recovered one left.
    now = _quarantined(servers.data_dir, alice_id)
    assert f"{stem}.db" not in now and f"{stem}.key.json" not in now and f"{stem}.home" not in now
    [replaced] = [n for n in now if n.endswith(".replaced-by-recovery.db")]
    replaced_key = database_dir(servers.data_dir) / "quarantine" / replaced.replace(".db", ".key.json")
    assert stat.S_IMODE(replaced_key.stat().st_mode) == 0o600
    assert not any(".reset" in p.name for p in database_dir(servers.data_dir).iterdir())

    server = await servers.start()
    assert (await server.client().login("alice", NEW)).status_code == 401
    alice = await server.login("alice", OLD)
    assert await get_settings(alice) == before
    assert (await alice.get("/api/file?path=diary.txt")).text == diary
    assert "Traceback" not in server.output
    assert await server.terminate() == 0

    # And back again: the post-reset data opens with the reset's password, by name.
    again = skald("recover-reset", "alice", "--data-dir", data, "--from", replaced, "--password-stdin", cwd=tmp_path, stdin=NEW + "\n")
    assert again.returncode == 0, again.stderr
    server = await servers.start()
    alice = await server.login("alice", NEW)
    assert await get_settings(alice) == after
    admin = await server.login("admin", ADMIN_PASSWORD)
    assert "Traceback" not in server.output

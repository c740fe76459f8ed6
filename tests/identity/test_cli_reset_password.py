"""``skald reset-password``: the way back for a lone admin who forgot their password
(there is no other admin to reset it). The server stopped: it takes the data dir's
lock as the other commands do. An encrypted account loses its data exactly as the
admin's reset screen says, so the command states it and changes nothing without
``--confirm-data-loss``; with it, the same reset the admin's route runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from skald_host.core.buses import Buses
from skald_host.core.identity.crypto import CredentialError, KDF_FLOOR, KeyDerivation
from skald_host.core.identity.users import UserManager
from skald_host.core.schema import REGISTRY_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.core.storage.data_dir_lock import DataDirLock

from tests.plugins.test_cli import skald

OLD = "the admin's forgotten password"
NEW = "a new password for the admin 3"


def _signs_in(data: Path, username: str, password: str) -> tuple[bool, bool]:
    """Whether ``password`` opens ``username``'s account, and whether the account is
    marked as having a password an admin chose."""

    async def check() -> tuple[bool, bool]:
        database_dir = data / "database"
        registry = await Database.open(database_dir / "system.db", key=None, migrations=REGISTRY_MIGRATIONS)
        try:
            users = UserManager(registry, database_dir, KeyDerivation(KDF_FLOOR), Buses())
            try:
                member, _ = await users.verify_password(username, password)
            except CredentialError:
                return False, False
            return True, member.password_set_by_admin
        finally:
            await registry.close()

    return asyncio.run(check())


def test_a_lone_admin_resets_their_own_forgotten_password_from_the_command_line(tmp_path):
    data = tmp_path / "data"
    created = skald("setup", "--data-dir", str(data), "--username", "admin", "--password-stdin", cwd=tmp_path, stdin=OLD + "\n")
    assert created.returncode == 0, created.stderr

    # Encrypted: the loss is said, as the reset screen says it, and nothing changes.
    refused = skald("reset-password", "admin", "--data-dir", str(data), "--password-stdin", cwd=tmp_path, stdin=NEW + "\n")
    assert refused.returncode == 2
    assert "Their old data is set aside on the server" in refused.stderr and "skald recover-reset" in refused.stderr
    assert "--confirm-data-loss" in refused.stderr
    assert _signs_in(data, "admin", OLD) == (True, False)

    # A running server holds the data dir: refused, nothing changed.
    with DataDirLock(data):
        # 'setup' beside it says what is true at once (it said to stop the server first).
        again = skald("setup", "--data-dir", str(data), "--username", "admin2", "--password-stdin", cwd=tmp_path, stdin=NEW + "\n")
        assert (again.returncode, again.stdout) == (0, f"Skald is already set up in {data.resolve()}; nothing was changed.\n"), again.stderr
        busy = skald("reset-password", "admin", "--data-dir", str(data), "--password-stdin", "--confirm-data-loss",
                     cwd=tmp_path, stdin=NEW + "\n")
    assert busy.returncode == 1
    assert "'skald reset-password' needs the server stopped" in busy.stderr
    assert _signs_in(data, "admin", OLD) == (True, False)

    unknown = skald("reset-password", "nobody", "--data-dir", str(data), "--password-stdin", "--confirm-data-loss",
                    cwd=tmp_path, stdin=NEW + "\n")
    assert unknown.returncode == 1 and "no account named 'nobody'" in unknown.stderr

    short = skald("reset-password", "admin", "--data-dir", str(data), "--password-stdin", "--confirm-data-loss",
                  cwd=tmp_path, stdin="short\n")
    assert short.returncode == 2 and "at least 8 characters" in short.stderr
    assert _signs_in(data, "admin", OLD) == (True, False)

    done = skald("reset-password", "admin", "--data-dir", str(data), "--password-stdin", "--confirm-data-loss",
                 cwd=tmp_path, stdin=NEW + "\n")
    assert done.returncode == 0, done.stderr
    assert "The password of 'admin' is reset" in done.stdout
    assert "empty database and home folder" in done.stdout
    # The old password opens nothing; the new one does, and it is the admin's own choice.
    assert _signs_in(data, "admin", OLD) == (False, False)
    assert _signs_in(data, "admin", NEW) == (True, False)
    # The old file was set aside, as the admin's reset route does it.
    assert [p.name.endswith(".admin-reset.db") for p in (data / "database" / "quarantine").glob("*.db")] == [True]


def test_reset_password_without_a_set_up_data_dir_says_so(tmp_path):
    result = skald("reset-password", "admin", "--data-dir", str(tmp_path / "data"), "--password-stdin", cwd=tmp_path, stdin=NEW + "\n")
    assert result.returncode == 1
    assert "not set up" in result.stderr

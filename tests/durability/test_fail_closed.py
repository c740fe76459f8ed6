"""B2/B3: the encryption layer fails closed.

A binding without SQLCipher stops the host at boot; a member whose file is missing or
damaged gets an explicit 409 after the right password, the damaged file is moved to
``database/quarantine/`` and nothing is ever created in its place; a wrong password
still gets the one generic 401. A sealed record edited down to weak KDF parameters
does not open; raised parameters re-wrap the same DEK at the next login.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from skald_host.core import host as host_module
from skald_host.core import storage
from skald_host.core.host import Skald, StartupError, build_plugin_manager
from skald_host.core.identity.crypto import SealedKey
from skald_host.testing import test_settings as settings_in
from skald_host.testing.host import MEMBER_PASSWORD

from .helpers import get_settings, member_dek, put_settings, quarantined, sealed_record

INVALID_LOGIN = {"error": "invalid user name or password", "code": "login_failed"}
WRONG_PASSWORD = "not alice's password at all"


def database_listing(database_dir: Path) -> set[str]:
    return {p.name for p in database_dir.iterdir() if p.is_file()}


async def alice_with_content(host) -> tuple[str, Path]:
    """Alice writes a setting, then logs out: her file is closed (locked) again."""
    alice = await host.member("alice")
    await put_settings(alice, {"diary": "something worth keeping"})
    assert (await alice.post("/api/auth/logout")).status_code == 200
    member_id = alice.member["id"]
    assert not host.core.users.is_unlocked(member_id)
    return member_id, host.core.users.owner_path(member_id)


async def login(host, password: str):
    return await host.client().login("alice", password)


async def assert_generic_401(host, password: str = WRONG_PASSWORD) -> None:
    response = await login(host, password)
    assert (response.status_code, response.json()) == (401, INVALID_LOGIN)
    unknown = await host.client().login("nobody-by-this-name", password)
    assert (unknown.status_code, unknown.json()) == (401, INVALID_LOGIN)


async def test_start_refuses_a_binding_without_sqlcipher(tmp_path, monkeypatch):
    def plain_sqlite_build() -> str:
        return storage.check_sqlcipher_build(module=sqlite3)

    monkeypatch.setattr(host_module, "check_sqlcipher_build", plain_sqlite_build)
    settings = settings_in(tmp_path / "data")
    with pytest.raises(StartupError, match="plain SQLite"):
        await Skald.start(settings, build_plugin_manager(settings, use_entry_points=False))
    assert not (tmp_path / "data").exists(), "nothing may be written before the build check passes"


async def test_started_host_reports_sqlcipher_4(skald):
    host = await skald.start()
    assert int(host.core.sqlcipher_version.split(".")[0]) >= 4


async def test_missing_owner_file_gives_409_and_is_never_recreated(skald):
    host = await skald.start()
    member_id, path = await alice_with_content(host)
    path.unlink()
    before = database_listing(path.parent)

    await assert_generic_401(host)
    for _ in range(2):
        response = await login(host, MEMBER_PASSWORD)
        assert response.status_code == 409
        assert "missing" in response.json()["error"] and "reset" in response.json()["error"]
    await assert_generic_401(host)
    assert not path.exists()
    assert database_listing(path.parent) == before
    assert quarantined(host.settings.data_dir, member_id) == []
    assert not host.core.users.is_unlocked(member_id)


def overwrite_middle(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + os.urandom(64) + data[middle + 64:]


@pytest.mark.parametrize(
    "damage",
    [overwrite_middle, lambda data: data[: len(data) // 2], lambda data: data[:4096], lambda data: b""],
    ids=["overwrite-middle", "truncate-half", "truncate-to-one-page", "truncate-to-zero"],
)
async def test_damaged_owner_file_is_quarantined_never_replaced(skald, damage):
    host = await skald.start()
    member_id, path = await alice_with_content(host)
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)

    # A wrong password learns nothing and moves nothing: the password is checked first.
    await assert_generic_401(host)
    assert path.read_bytes() == damaged

    response = await login(host, MEMBER_PASSWORD)
    assert response.status_code == 409, response.text
    assert "could not be read" in response.json()["error"]
    assert not path.exists()
    [moved] = quarantined(host.settings.data_dir, member_id)
    assert moved.read_bytes() == damaged, "the quarantined file is kept exactly as it was"
    assert not host.core.users.is_unlocked(member_id)

    await assert_generic_401(host)
    again = await login(host, MEMBER_PASSWORD)
    assert again.status_code == 409 and "missing" in again.json()["error"]
    assert not path.exists(), "a fresh unkeyed (or keyed) file must never take the damaged one's place"
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-journal").exists()


async def test_damaged_plain_owner_file_is_quarantined_too(skald):
    """A member who chose no encryption has no page HMACs; a broken b-tree page header
    (page 2, the settings table) is what ``quick_check`` sees."""
    host = await skald.start()
    alice = await host.member("alice", encrypted=False)
    await put_settings(alice, {"diary": "plain but still mine"})
    assert (await alice.post("/api/auth/logout")).status_code == 200
    member_id = alice.member["id"]
    path = host.core.users.owner_path(member_id)
    data = path.read_bytes()
    damaged = data[:4096] + b"\xff" * 16 + data[4096 + 16:]
    path.write_bytes(damaged)

    await assert_generic_401(host)
    response = await login(host, MEMBER_PASSWORD)
    assert response.status_code == 409, response.text
    assert not path.exists()
    [moved] = quarantined(host.settings.data_dir, member_id)
    assert moved.read_bytes() == damaged


def edit_record(host, member_id: str, **fields: int) -> str:
    path = host.settings.database_dir / "system.db"
    record = json.loads(sealed_record(host.settings.data_dir, member_id))
    record.update(fields)
    text = json.dumps(record, separators=(",", ":"))
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("UPDATE users SET credentials = ? WHERE id = ?", (text, member_id))
    finally:
        conn.close()
    return text


async def test_record_edited_down_to_weak_kdf_params_does_not_open(skald):
    host = await skald.start()
    alice = await host.member("alice")
    member_id = alice.member["id"]
    original = sealed_record(host.settings.data_dir, member_id)

    weakened = edit_record(host, member_id, memory_kib=8, time_cost=1)
    await assert_generic_401(host, MEMBER_PASSWORD)
    assert sealed_record(host.settings.data_dir, member_id) == weakened, "a refused record is never re-sealed"

    edit_record(host, member_id, **{k: json.loads(original)[k] for k in ("memory_kib", "time_cost")})
    assert (await login(host, MEMBER_PASSWORD)).status_code == 200  # the control: only the edit was refused


async def test_raised_kdf_params_rewrap_the_same_dek_on_next_login(skald):
    first = await skald.start()
    alice = await first.member("alice")
    member_id = alice.member["id"]
    await put_settings(alice, {"diary": "written under the old parameters"})
    data_dir = first.settings.data_dir
    before = SealedKey.from_json(sealed_record(data_dir, member_id))
    dek = await member_dek(data_dir, member_id, MEMBER_PASSWORD)
    assert before.memory_kib == 19456
    await first.stop()

    second = await skald.start(settings=skald.settings(kdf={"memory_kib": 32768}))
    assert second.settings.data_dir == data_dir
    alice = second.client()
    assert (await alice.login("alice", MEMBER_PASSWORD)).status_code == 200
    after = SealedKey.from_json(sealed_record(data_dir, member_id))
    assert (after.memory_kib, after.time_cost, after.parallelism) == (32768, 2, 1)
    assert after.salt != before.salt and after.nonce != before.nonce
    assert await member_dek(data_dir, member_id, MEMBER_PASSWORD) == dek, "re-wrapped, not re-keyed"
    assert (await get_settings(alice))["diary"] == "written under the old parameters"

    again = second.client()
    assert (await again.login("alice", MEMBER_PASSWORD)).status_code == 200
    assert sealed_record(data_dir, member_id) == after.to_json(), "an up-to-date record is left alone"

"""B1/B2: what a member writes never reaches the disk in the clear.

A real ``skald serve`` process; members write canaries into their private settings
(their own SQLCipher file); then every file of the data dir, the process's TMPDIR, its
logs and ``/proc/<pid>/environ`` are scanned for the canary, the passwords, the DEKs
and the session tokens in UTF-8, UTF-16 and base64. A member who chose no encryption
is the positive control: the same scan finds their canary.

The API caps one setting at 16 KiB (``MAX_VALUE_BYTES``), so the 200 KB of canary text
is spread over 14 values of ~15 KB: large enough to spill into overflow pages and
fill the WAL with many frames.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlcipher3 import dbapi2 as sqlcipher

from .helpers import (
    ADMIN_PASSWORD,
    ServerProcess,
    Servers,
    create_member,
    files_under,
    get_settings,
    key_forms,
    member_dek,
    owner_file,
    put_settings,
    scan,
    setup_admin,
    text_forms,
)

ALICE_PASSWORD = "alice keeps her diary here 7"
BOB_PASSWORD = "bob chose no encryption 5"
SQLITE_HEADER = b"SQLite format 3\x00"


def canary_settings(canary: str) -> dict[str, object]:
    chunk = (canary + " ") * 340  # ~15 KB, under the 16 KiB per-value limit
    values: dict[str, object] = {
        "note": canary,
        "sentence": f"my secret is {canary}, do not tell",
        "nested": {"list": [canary, {"deep": canary}]},
        canary: "the setting's name is the canary too",
        "unicode": f"größe {canary} \U0001f642",
    }
    values.update({f"big.{i}": chunk for i in range(14)})
    assert sum(len(json.dumps(v)) for v in values.values()) > 200_000
    return values


@dataclass
class Scenario:
    server: ServerProcess
    data_dir: Path
    admin_id: str
    alice_id: str
    bob_id: str
    canary: str
    bob_canary: str
    secrets: dict[str, set[bytes]]  # none of these may be anywhere on disk


async def populate(servers: Servers) -> Scenario:
    """Admin, Alice (encrypted) and Bob (not encrypted) write canaries; sessions of
    every kind are live when this returns."""
    server = await servers.start()
    admin = await setup_admin(server)
    alice_id = await create_member(admin, "alice", ALICE_PASSWORD)
    bob_id = await create_member(admin, "bob", BOB_PASSWORD, encrypted=False)
    alice = await server.login("alice", ALICE_PASSWORD)
    alice_bearer = await server.login("alice", ALICE_PASSWORD, bearer=True)
    bob = await server.login("bob", BOB_PASSWORD)

    canary, bob_canary = f"CANARY-{uuid.uuid4()}", f"CANARY-{uuid.uuid4()}"
    stored = await put_settings(alice, canary_settings(canary))
    assert stored["note"] == canary and len(stored) == 19
    await put_settings(alice_bearer, {"from.bearer": f"second session {canary}"})
    await put_settings(bob, canary_settings(bob_canary))
    # Error paths must not write what they were sent anywhere either.
    refused = await alice.put("/api/me/settings", json={f"{canary}!": "an invalid name"})
    assert refused.status_code == 400
    wrong_password = f"{canary} is not the password"
    assert (await server.client().login("alice", wrong_password)).status_code == 401
    assert (await get_settings(alice))["from.bearer"].endswith(canary)

    # The instance's own secrets, which system.db holds sealed (check B1 names the bot token).
    provider_key, bot_token = f"sk-{uuid.uuid4().hex}", f"123456:{uuid.uuid4().hex}"
    response = await admin.post("/api/admin/models/providers", json={"name": "canary", "base_url": "http://127.0.0.1:9/v1", "api_key": provider_key})
    assert response.status_code == 201, response.text
    response = await admin.put("/api/admin/plugins/telegram/config", json={"config": {"bot_token": bot_token}})
    assert response.status_code == 200, response.text
    assert response.json()["config"]["bot_token"] != bot_token  # masked

    data_dir = servers.data_dir
    secrets = {
        "the model provider's API key": text_forms(provider_key),
        "the Telegram bot token": text_forms(bot_token),
        "alice's canary": text_forms(canary),
        "a wrong password tried at login": text_forms(wrong_password),
        "admin's DEK": key_forms(await member_dek(data_dir, admin.member["id"], ADMIN_PASSWORD)),
        "alice's DEK": key_forms(await member_dek(data_dir, alice_id, ALICE_PASSWORD)),
    }
    for who, password in (("admin", ADMIN_PASSWORD), ("alice", ALICE_PASSWORD), ("bob", BOB_PASSWORD)):
        secrets[f"{who}'s password"] = text_forms(password)
    for who, client in (("admin", admin), ("alice", alice), ("alice (bearer)", alice_bearer), ("bob", bob)):
        assert client.session_token
        secrets[f"{who}'s session token"] = text_forms(client.session_token)
        if client.csrf_token:
            secrets[f"{who}'s CSRF token"] = text_forms(client.csrf_token)
    return Scenario(server, data_dir, admin.member["id"], alice_id, bob_id, canary, bob_canary, secrets)


def test_scan_finds_each_encoding_at_any_offset(tmp_path):
    """The scanner's own positive control: every form it claims to match is found
    wherever it sits between arbitrary bytes."""
    canary = f"CANARY-{uuid.uuid4()}"
    key = os.urandom(32)
    raw = canary.encode()
    placements = {
        "utf-8": raw,
        "utf-16-le": canary.encode("utf-16-le"),
        "utf-16-be": canary.encode("utf-16-be"),
        **{f"base64 after {n} bytes": base64.b64encode(os.urandom(n) + raw + os.urandom(5)) for n in range(3)},
        **{f"urlsafe base64 after {n} bytes": base64.urlsafe_b64encode(os.urandom(n) + raw) for n in range(3)},
    }
    for name, blob in placements.items():
        path = tmp_path / name
        path.write_bytes(os.urandom(1000) + blob + os.urandom(1000))
        assert scan([path], {"canary": text_forms(canary)}) == [(str(path), "canary")], name
    key_placements = {
        "raw": key,
        "hex": key.hex().encode(),
        "HEX utf-16": key.hex().upper().encode("utf-16-le"),
        **{f"base64 after {n}": base64.b64encode(os.urandom(n) + key) for n in range(3)},
    }
    for name, blob in key_placements.items():
        path = tmp_path / f"key {name}"
        path.write_bytes(os.urandom(777) + blob + os.urandom(777))
        assert scan([path], {"key": key_forms(key)}) == [(str(path), "key")], name
    clean = tmp_path / "clean"
    clean.write_bytes(os.urandom(100_000))
    assert scan([clean], {"canary": text_forms(canary), "key": key_forms(key)}) == []


async def test_no_secret_reaches_disk_while_serving_or_after_stop(servers):
    s = await populate(servers)
    server = s.server
    alice_wal = Path(f"{owner_file(s.data_dir, s.alice_id)}-wal")
    assert alice_wal.exists() and alice_wal.stat().st_size > 200_000, "Alice's writes should sit in her WAL now"

    proc_files = [Path(f"/proc/{server.pid}/environ"), Path(f"/proc/{server.pid}/cmdline")]
    running = files_under(s.data_dir, server.tmp_dir) + servers.outputs + proc_files
    assert any(p.name.endswith("-wal") for p in running) and any(p.name.endswith("-shm") for p in running)
    assert scan(running, s.secrets) == []
    # Positive control: the same scan sees Bob's canary in his plain file.
    found = scan(running, {"bob's canary": text_forms(s.bob_canary)})
    assert found and all(s.bob_id in path for path, _ in found), found

    assert await server.terminate() == 0, server.output[-4000:]
    stopped = files_under(s.data_dir, server.tmp_dir) + servers.outputs
    assert s.data_dir / "logs" / "skald.log" in stopped
    assert owner_file(s.data_dir, s.alice_id) in stopped
    assert scan(stopped, s.secrets) == []
    found = scan(stopped, {"bob's canary": text_forms(s.bob_canary)})
    assert found and all(s.bob_id in path for path, _ in found), found
    assert not list(servers.tmp_path.rglob("core*")), "no core file may exist (the process runs in tmp_path)"


async def test_encrypted_owner_files_are_sqlcipher_and_readable_only_with_the_dek(servers):
    """B2. system.db and the file of a member who chose no encryption are plain SQLite by
    design; every encrypted member's file must not be."""
    s = await populate(servers)
    assert await s.server.terminate() == 0
    alice_path = owner_file(s.data_dir, s.alice_id)

    for member_id in (s.admin_id, s.alice_id):
        path = owner_file(s.data_dir, member_id)
        assert path.read_bytes()[:16] != SQLITE_HEADER
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        try:
            with pytest.raises(sqlite3.DatabaseError, match="file is not a database"):
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    assert owner_file(s.data_dir, s.bob_id).read_bytes()[:16] == SQLITE_HEADER  # the control

    # Positive control: with the DEK, SQLCipher reads the canary back from the file the
    # scan found nothing in.
    dek = await member_dek(s.data_dir, s.alice_id, ALICE_PASSWORD)
    conn = sqlcipher.connect(str(alice_path))
    try:
        conn.execute(f"PRAGMA key = \"x'{dek.hex()}'\"")
        value = conn.execute("SELECT value FROM member_settings WHERE key = 'note'").fetchone()[0]
        assert json.loads(value) == s.canary
    finally:
        conn.close()
    conn = sqlcipher.connect(str(alice_path))
    try:
        conn.execute(f"PRAGMA key = \"x'{os.urandom(32).hex()}'\"")
        with pytest.raises(sqlcipher.DatabaseError):
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        conn.close()


async def test_every_connection_keeps_temp_in_memory_with_wal_and_full_sync(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    bob = await host.member("bob", encrypted=False)
    expected = {"journal_mode": "wal", "synchronous": 2, "temp_store": 2, "foreign_keys": 1, "cache_size": -2000}
    assert await host.core.registry.pragmas() == expected
    ids = [c.member["id"] for c in (admin, alice, bob)]
    assert sorted(host.core.users.unlocked_ids) == sorted(ids)
    for member_id in ids:
        owner = host.core.users.owner_db(member_id)
        assert owner is not None
        assert await owner.pragmas() == expected, member_id


async def test_server_process_cannot_write_a_core_dump(servers):
    server = await servers.start()
    limits = Path(f"/proc/{server.pid}/limits").read_text()
    line = next(l for l in limits.splitlines() if l.startswith("Max core file size"))
    soft, hard = line[len("Max core file size"):].split()[:2]
    assert (soft, hard) == ("0", "0"), line
    assert await server.terminate() == 0

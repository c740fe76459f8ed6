"""Check G4, a failing disk and a read-only one, on a real ``skald serve`` process.

An LD_PRELOAD shim (``io_fault_shim.c``, built here with the system's C compiler)
makes writes and syncs of the files under one directory fail with EIO or EROFS while
a flag file says so. It stands in for what this machine does not have: a
fault-injection FUSE or dm-flakey layer, and a read-only remount, which Linux refuses
while files on the filesystem are open for writing. SQLite's VFS and Python's os
module both call write/fsync through libc, so the server meets the fault where a real
disk would give it. A full disk is tested on a real tmpfs in test_disk_full.py.

Pass (as the check words it): the affected requests fail with 503 (and Retry-After),
nothing is acknowledged that was not stored, no half-made file is left, and once the
fault is gone the same requests succeed on the same process, with both databases
passing their integrity checks.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest

from .helpers import (
    create_member,
    get_settings,
    member_dek,
    owner_file,
    owner_files,
    put_settings,
    read_owner_file,
    registry_ids,
    setup_admin,
)

SHIM_SOURCE = Path(__file__).with_name("io_fault_shim.c")
ALICE_PASSWORD = "alice's passphrase for a failing disk"


@pytest.fixture(scope="session")
def io_fault_shim(tmp_path_factory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the I/O fault shim (apt-get install gcc)")
    shim = tmp_path_factory.mktemp("shim") / "io_fault_shim.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(shim), str(SHIM_SOURCE), "-ldl"], check=True)
    return shim


def _fail(flag: Path, kind: str, under: Path) -> None:
    flag.write_text(f"{kind} {under}/")


def _refused(response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers.get("Retry-After"), response.headers
    assert "storage" in response.json()["error"].lower() or "disk" in response.json()["error"].lower(), response.text


async def _said(client, conversation: str, text: str) -> int:
    """How many of the member's own messages in the conversation say ``text``."""
    detail = (await client.get(f"/api/conversations/{conversation}")).json()
    return len([m for m in detail["messages"] if m["role"] == "user" and m["content"] == text])


@pytest.mark.parametrize("kind", ["EIO", "EROFS"])
async def test_a_failing_disk_refuses_writes_whole_and_service_resumes_without_a_restart(servers, tmp_path, io_fault_shim, kind):
    flag = tmp_path / "io-fault"
    server = await servers.start(extra_env={"LD_PRELOAD": str(io_fault_shim), "SKALD_IO_FAULT_FLAG": str(flag)})
    pid = server.pid
    admin = await setup_admin(server)
    alice_id = await create_member(admin, "alice", ALICE_PASSWORD)
    alice = await server.login("alice", ALICE_PASSWORD)
    await put_settings(alice, {"colour": "green"})
    created = await alice.post("/api/conversations", json={})
    assert created.status_code == 201, created.text
    conversation = created.json()["id"]
    key = f"key-{uuid.uuid4()}"
    databases = servers.data_dir / "database"

    # The databases fail: every write is refused whole, reads go on.
    _fail(flag, kind, databases)
    _refused(await alice.put("/api/me/settings", json={"colour": "red"}))
    _refused(await alice.post(f"/api/conversations/{conversation}/messages", json={"text": "hello", "idempotency_key": key}))
    _refused(await admin.post("/api/admin/members", json={"username": "carol", "password": "carol's long passphrase"}))
    assert (await get_settings(alice))["colour"] == "green"
    assert "carol" not in registry_ids(servers.data_dir)
    assert owner_files(servers.data_dir) == {admin.member["id"], alice_id}  # no half-made file for carol
    assert await _said(alice, conversation, "hello") == 0

    # The disk is back: the same requests succeed on the same process.
    flag.unlink()
    assert (await put_settings(alice, {"colour": "red"}))["colour"] == "red"
    sent = await alice.post(f"/api/conversations/{conversation}/messages", json={"text": "hello", "idempotency_key": key})
    assert sent.status_code == 202, sent.text
    assert await _said(alice, conversation, "hello") == 1  # acked: stored, once
    await create_member(admin, "carol", "carol's long passphrase")

    # Her home fails: an upload is refused and leaves no partial file.
    home = servers.data_dir / "homes" / alice_id
    _fail(flag, kind, home)
    upload = await alice.post(
        f"/api/conversations/{conversation}/uploads", content=b"x" * 200_000, headers={"X-Filename": "notes.txt", "Content-Type": "text/plain"}
    )
    _refused(upload)
    assert not [p for p in home.rglob("*") if p.is_file()]
    flag.unlink()
    upload = await alice.post(
        f"/api/conversations/{conversation}/uploads", content=b"x" * 200_000, headers={"X-Filename": "notes.txt", "Content-Type": "text/plain"}
    )
    assert upload.status_code == 201, upload.text

    assert server.pid == pid and server.running
    assert await server.terminate() == 0
    settings, integrity = await read_owner_file(owner_file(servers.data_dir, alice_id), await member_dek(servers.data_dir, alice_id, ALICE_PASSWORD))
    assert integrity == "ok" and '"red"' in settings["colour"]
    with sqlite3.connect(databases / "system.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

"""B5: a password change survives a SIGKILL at any point.

The server process kills itself (``SKALD_FAULT_CRASH_AT``) before the KDF, after it,
inside the registry transaction, after the commit, or the test kills it right after
the 200. After a restart exactly one of the two passwords logs in (the old one up to
the commit, the new one from then on), the member's content is unchanged and the
owner file passes ``cipher_integrity_check`` and ``integrity_check``.

Each point runs ``SKALD_CRASH_RUNS`` times on one data dir (default 3, to keep the suite
fast). SECURITY-CHECKS B5 asks for 20 runs per point: the long run (``make test-long``)
sets ``SKALD_CRASH_RUNS=20``, and so can you.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest

from .helpers import (
    crash_during,
    create_member,
    get_settings,
    member_dek,
    owner_file,
    put_settings,
    read_owner_file,
    setup_admin,
)

RUNS = int(os.environ.get("SKALD_CRASH_RUNS", "3"))

AFTER_RESPONSE = "after-response"  # not a crash point: the test SIGKILLs after the 200
POINTS = [
    "password_change.before_kdf",
    "password_change.after_kdf",
    "password_change.in_transaction",
    "password_change.after_commit",
    AFTER_RESPONSE,
]
NEW_PASSWORD_WINS = {"password_change.after_commit", AFTER_RESPONSE}


def passphrase(run: int) -> str:
    return f"alice passphrase {run} {uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("point", POINTS)
async def test_password_change_crash_leaves_exactly_one_password(servers, point):
    data_dir = servers.data_dir
    current = passphrase(0)
    server = await servers.start()
    admin = await setup_admin(server)
    alice_id = await create_member(admin, "alice", current)
    alice = await server.login("alice", current)
    expected = await put_settings(alice, {"first": f"CANARY-{uuid.uuid4()}"})
    assert await server.terminate() == 0

    for run in range(1, RUNS + 1):
        new = passphrase(run)
        armed = await servers.start(crash_at=None if point == AFTER_RESPONSE else point)
        alice = await armed.login("alice", current)
        expected = await put_settings(alice, {f"run{run}": f"CANARY-{uuid.uuid4()}"})
        change = alice.post("/api/auth/password", json={"current_password": current, "new_password": new})
        if point == AFTER_RESPONSE:
            response = await change
            assert response.status_code == 200, response.text
            armed.kill()
            assert await armed.wait_exit() == -signal.SIGKILL
        else:
            await crash_during(armed, change)

        server = await servers.start()
        statuses = {}
        for label, password in (("old", current), ("new", new)):
            statuses[label] = (await server.client().login("alice", password)).status_code
        winner = "new" if point in NEW_PASSWORD_WINS else "old"
        assert statuses == {winner: 200, ({"old", "new"} - {winner}).pop(): 401}, f"run {run}: {statuses}"
        current = new if winner == "new" else current
        alice = await server.login("alice", current)
        assert await get_settings(alice) == expected, f"run {run}: content changed"
        assert await server.terminate() == 0, server.output[-4000:]

        dek = await member_dek(data_dir, alice_id, current)
        stored, integrity = await read_owner_file(owner_file(data_dir, alice_id), dek)
        assert integrity == "ok", f"run {run}: {integrity}"
        assert set(stored) == set(expected)

"""``FileService`` bookkeeping: sandbox uids are unique, at least 20000 and survive a
restart (they own files on disk, so a changed uid would lock a member out of them)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3

import pytest

from skald_host.core.files.service import FIRST_UID, UIDS_KEY
from skald_host.testing import SkaldHarness


async def test_uids_are_unique_stable_and_persisted_across_a_restart(skald: SkaldHarness):
    settings = skald.settings()
    host = await skald.start(settings=settings)
    await host.admin()
    ids = [(await host.create_member(name))["id"] for name in ("alice", "bob", "carol")]
    first = {member_id: host.core.files.uid_for(member_id) for member_id in ids}
    assert len(set(first.values())) == 3 and min(first.values()) >= FIRST_UID
    await host.core.files.flush()
    await skald.close()

    host = await skald.start(settings=settings)
    assert {member_id: host.core.files.uid_for(member_id) for member_id in ids} == first
    stored = await host.core.registry.run(lambda c: c.execute("SELECT value FROM config WHERE key = ?", (UIDS_KEY,)).fetchone())
    assert {k: v for k, v in json.loads(stored[0]).items() if k in first} == first
    dave = (await host.create_member("dave"))["id"]
    assert host.core.files.uid_for(dave) not in set(first.values()) | {0}
    home = host.core.files.home(dave)
    assert home.parent == settings.data_dir / "homes" and (home.stat().st_mode & 0o777) == 0o700
    if os.geteuid() == 0:
        assert home.stat().st_uid == host.core.files.uid_for(dave)


async def test_a_uid_first_handed_out_on_a_worker_thread_is_stored_and_kept(skald: SkaldHarness):
    """An upload's quota walk makes the home, and so the uid, on a worker thread: that
    allocation is stored like any other. It was not, so at the next start the member got
    another uid and their sandbox could no longer open their own home."""
    settings = skald.settings()
    host = await skald.start(settings=settings)
    await host.admin()
    alice = (await host.create_member("alice"))["id"]
    bob = (await host.create_member("bob"))["id"]
    alices = await asyncio.to_thread(host.core.files.uid_for, alice)
    bobs = host.core.files.uid_for(bob)  # later, on the loop, so a restart cannot hand out alice's again by luck
    await asyncio.sleep(0)  # the thread's write was handed to the loop
    await host.core.files.flush()
    await skald.close()

    host = await skald.start(settings=settings)
    assert (host.core.files.uid_for(alice), host.core.files.uid_for(bob)) == (alices, bobs)


@pytest.mark.skipif(os.geteuid() != 0, reason="homes are given to sandbox uids only when the host runs as root")
async def test_a_uid_an_earlier_version_never_stored_is_read_back_from_the_members_home(skald: SkaldHarness):
    """A data dir an earlier version wrote may lack a member's uid that their home is
    already owned by: the next start gives them that uid again, not a new one."""
    settings = skald.settings()
    host = await skald.start(settings=settings)
    await host.admin()
    ids = [(await host.create_member(name))["id"] for name in ("alice", "bob")]
    uids = {member_id: host.core.files.uid_for(member_id) for member_id in ids}
    for member_id in ids:
        host.core.files.home(member_id)
    await host.core.files.flush()
    await skald.close()
    with sqlite3.connect(settings.database_dir / "system.db") as conn:  # as the earlier version left it: alice's lost
        (stored,) = conn.execute("SELECT value FROM config WHERE key = ?", (UIDS_KEY,)).fetchone()
        kept = {k: v for k, v in json.loads(stored).items() if k != ids[0]}
        conn.execute("UPDATE config SET value = ? WHERE key = ?", (json.dumps(kept), UIDS_KEY))

    host = await skald.start(settings=settings)
    assert {member_id: host.core.files.uid_for(member_id) for member_id in ids} == uids
    await host.core.files.flush()
    stored = await host.core.registry.run(lambda c: c.execute("SELECT value FROM config WHERE key = ?", (UIDS_KEY,)).fetchone())
    assert json.loads(stored[0])[ids[0]] == uids[ids[0]]


async def test_a_deleted_members_home_goes_with_their_database(skald: SkaldHarness):
    """Uploads and agent files are kept in clear: deleting the member removes them as
    it removes their database file, and another member's home is untouched."""
    from tests.files.test_uploads import upload

    host = await skald.start()
    admin = await host.admin()
    alice, bob = await host.member("alice"), await host.member("bob")
    conversation = (await alice.post("/api/conversations", json={})).json()["id"]
    assert (await upload(alice, conversation, "diary.txt", b"private words\n")).status_code == 201
    alice_id = (await host.core.users.find("alice")).id
    bob_id = (await host.core.users.find("bob")).id
    alice_home, bob_home = host.core.files.home(alice_id), host.core.files.home(bob_id)
    (bob_home / "keep.txt").write_text("bob's\n")
    assert any(alice_home.rglob("diary.txt"))

    response = await admin.delete(f"/api/admin/members/{alice_id}")
    assert response.status_code in (200, 204), response.text
    assert not alice_home.exists()
    assert not host.core.users.owner_path(alice_id).exists()
    assert (bob_home / "keep.txt").read_text() == "bob's\n"

"""Locking a member races their unlock and a backup's copy of their file; the unlock
lock orders all three, on real files (check A2: a revoked session must leave the key
out of memory, even when the revocation lands while the file is being opened)."""

from __future__ import annotations

import asyncio

from skald_host.core.buses import Buses
from skald_host.core.identity import users as users_module
from skald_host.core.identity.crypto import KDF_FLOOR, KeyDerivation
from skald_host.core.identity.users import UserManager
from skald_host.core.schema import OWNER_MIGRATIONS, REGISTRY_MIGRATIONS
from skald_host.core.storage import Database

PASSWORD = "a passphrase for the lock races"


async def _manager(tmp_path) -> tuple[UserManager, Database]:
    registry = await Database.open(tmp_path / "database" / "system.db", key=None, migrations=REGISTRY_MIGRATIONS, create=True)
    return UserManager(registry, tmp_path / "database", KeyDerivation(KDF_FLOOR), Buses()), registry


async def test_a_lock_during_a_slow_unlock_leaves_the_member_locked(tmp_path, monkeypatch):
    users, registry = await _manager(tmp_path)
    try:
        member = await users.register("alice", PASSWORD)
        _, dek = await users.verify_password("alice", PASSWORD)
        opening = asyncio.Event()
        real_open = users_module.Database.open

        async def slow_open(*args, **kwargs):
            opening.set()
            await asyncio.sleep(0.2)  # a large file's page check at unlock
            return await real_open(*args, **kwargs)

        monkeypatch.setattr(users_module.Database, "open", slow_open)
        unlocking = asyncio.create_task(users.unlock(member.id, dek))
        await opening.wait()
        await users.lock(member.id)  # the revocation lands while the file opens
        db = await unlocking
        assert not users.is_unlocked(member.id) and db.closed
    finally:
        await users.lock_all()
        await registry.close()


async def test_a_backup_copy_and_a_lock_never_overlap(tmp_path):
    """The copy of an open file runs on its thread before the close queued after it;
    the member ends locked and the copy opens with their key."""
    users, registry = await _manager(tmp_path)
    try:
        member = await users.register("bob", PASSWORD)
        _, dek = await users.verify_password("bob", PASSWORD)
        await users.unlock(member.id, dek)
        copy = tmp_path / "copy.db"
        await asyncio.gather(users.snapshot_owner(member.id, copy), users.lock(member.id))
        assert not users.is_unlocked(member.id)
        opened = await Database.open(copy, key=dek, migrations=OWNER_MIGRATIONS)
        assert await opened.integrity_check() == "ok"
        await opened.close()
    finally:
        await users.lock_all()
        await registry.close()


async def test_a_chat_runtime_asked_for_while_the_member_locks_is_refused_and_never_outlives_the_file(skald):
    """A phone polling while its member logged out on the web made a chat runtime on the
    file being closed (between the chat's before-lock step and the close): the member's
    next login found that runtime, its file closed, and every read failed. Asked for
    while the lock runs, it is refused as locked; the next login gets a working one."""
    from skald_host.core.agent.runtime import ChatError

    host = await skald.start()
    alice = await host.member("alice")
    member_id = alice.member["id"]
    core = host.core
    asked: list[str] = []

    async def phone_asks_meanwhile(locking_id: str) -> None:  # after the chat's own before-lock step
        try:
            await core.chat.runtime(await core.users.get(locking_id))
            asked.append("built")
        except ChatError as exc:
            asked.append(exc.code)

    core.users.before_lock.append(phone_asks_meanwhile)
    assert (await alice.post("/api/auth/logout")).status_code == 200
    assert asked == ["member_locked"]
    core.users.before_lock.remove(phone_asks_meanwhile)

    assert (await alice.login("alice", "member password for tests")).status_code == 200
    runtime = await core.chat.runtime(await core.users.get(member_id))
    assert not runtime.store.db.closed
    assert (await alice.get("/api/conversations")).status_code == 200

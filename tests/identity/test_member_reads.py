"""``UserManager.get`` keeps the member it read last while the registry is unchanged
(it is asked at every socket command and channel call), and reads again after any
write to it: a role's capabilities, the member's role or active flag, a deletion. Real
registry file; the writes go through the same services the admin's routes call."""

from __future__ import annotations

import pytest

from skald_host.core.buses import Buses
from skald_host.core.identity.crypto import KDF_FLOOR, KeyDerivation
from skald_host.core.identity.role_store import RoleStore
from skald_host.core.identity.users import MemberNotFound, UserManager
from skald_host.core.schema import REGISTRY_MIGRATIONS
from skald_host.core.storage import Database

PASSWORD = "a passphrase for the member reads"


async def test_a_member_read_again_only_after_the_registry_changed(tmp_path):
    registry = await Database.open(tmp_path / "database" / "system.db", key=None, migrations=REGISTRY_MIGRATIONS, create=True)
    users = UserManager(registry, tmp_path / "database", KeyDerivation(KDF_FLOOR), Buses())
    roles = RoleStore(registry)
    try:
        alice = await users.register("alice", PASSWORD, encrypted=False)
        first = await users.get(alice.id)
        assert "chat.use" in first.role.capabilities
        jobs = registry.changes
        again = await users.get(alice.id)
        assert again is first and registry.changes == jobs  # kept: no write since
        # The usage log's commits (every few hundred ms under load) leave it kept.
        await registry.transaction(
            lambda c: c.execute("INSERT INTO llm_requests (id, member_id, model, status) VALUES ('r1', ?, 'm', 'ok')", (alice.id,)),
            bookkeeping=True,
        )
        assert await users.get(alice.id) is first

        # Another service's write (the role's capabilities) is seen at the next read.
        await roles.update("member", capabilities=["memory.shared.read"])
        changed = await users.get(alice.id)
        assert "chat.use" not in changed.role.capabilities, changed.role

        await users.update(alice.id, active=False)
        assert (await users.get(alice.id)).active is False
        await users.update(alice.id, role_id="restricted")
        assert (await users.get(alice.id)).role.id == "restricted"

        # A job that wrote and then failed (rolled back) also drops the copy: never stale.
        kept = await users.get(alice.id)

        def fails(conn):
            conn.execute("UPDATE users SET display_name = 'x' WHERE id = ?", (alice.id,))
            raise RuntimeError("after the write")

        with pytest.raises(RuntimeError):
            await registry.transaction(fails)
        reread = await users.get(alice.id)
        assert reread is not kept and reread == kept

        await users.delete(alice.id)
        with pytest.raises(MemberNotFound):
            await users.get(alice.id)
    finally:
        await registry.close()

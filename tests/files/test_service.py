"""``FileService`` bookkeeping: sandbox uids are unique, at least 20000 and survive a
restart (they own files on disk, so a changed uid would lock a member out of them)."""

from __future__ import annotations

import json
import os

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

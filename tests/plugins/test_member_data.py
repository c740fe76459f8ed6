"""Contract 1.2's per-member data and lifecycle: ``member_unlocked`` / ``member_locking``
follow a member's private file; ``member_secret_*`` and ``append_member_event`` /
``member_events`` keep a plugin's rows in that encrypted file only (never the
registry, never in clear on disk), scoped to the plugin, refused while the file is
locked and for bad input; ``unlocked_members`` lists who is open."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skald_hookspecs import MemberLocked, PluginInfo, hookimpl

SECRET = "tok-5f1c0b7e-only-in-the-members-file"


class LifecycleProbe:
    def __init__(self, plugin_id: str) -> None:
        self.plugin_id = plugin_id
        self.unlocked: list[str] = []
        self.locking: list[str] = []
        self.hosts: list[Any] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.plugin_id, title=self.plugin_id, spec=">=1.2,<2")

    @hookimpl
    async def member_unlocked(self, member_id: str, host: Any) -> None:
        self.unlocked.append(member_id)
        self.hosts.append(host)
        # The file is open by now: the plugin may read its rows from here.
        await host.member_secret_names(member_id)

    @hookimpl
    async def member_locking(self, member_id: str) -> None:
        self.locking.append(member_id)


def clear_text_hits(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_member_secrets_and_events_live_in_the_members_file_scoped_to_the_plugin(skald):
    probe, other = LifecycleProbe("lifeprobe"), LifecycleProbe("otherprobe")
    host = await skald.start(plugins=[probe, other], enable=["lifeprobe", "otherprobe"])
    await host.member("alice")
    alice_id = (await host.core.users.find("alice")).id
    assert probe.unlocked[-1] == alice_id and other.unlocked[-1] == alice_id  # (the admin unlocked first)
    api, other_api = host.core.host_api("lifeprobe"), host.core.host_api("otherprobe")
    assert alice_id in api.unlocked_members()

    await api.member_secret_set(alice_id, "connector:demo", SECRET)
    await api.member_secret_set(alice_id, "other:x", "1")
    assert await api.member_secret_get(alice_id, "connector:demo") == SECRET
    assert await api.member_secret_names(alice_id, "connector:") == ["connector:demo"]
    assert await other_api.member_secret_get(alice_id, "connector:demo") is None  # another plugin's rows
    assert await other_api.member_secret_names(alice_id) == []
    await api.member_secret_set(alice_id, "connector:demo", SECRET + "-2")
    assert await api.member_secret_get(alice_id, "connector:demo") == SECRET + "-2"

    first = await api.append_member_event(alice_id, "mcp.notification", {"connector": "demo", "text": SECRET})
    second = await api.append_member_event(alice_id, "mcp.notification", {"n": 2})
    await other_api.append_member_event(alice_id, "elsewhere", {})
    events = await api.member_events(alice_id)
    assert [(e["id"], e["kind"], e["data"]) for e in events] == [
        (first, "mcp.notification", {"connector": "demo", "text": SECRET}),
        (second, "mcp.notification", {"n": 2}),
    ]
    assert [e["id"] for e in await api.member_events(alice_id, after=first)] == [second]
    assert len(await api.member_events(alice_id, limit=1)) == 1

    # Nothing of it in the registry, nor in clear anywhere under the data dir (logs included).
    def registry_values(conn: Any) -> str:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return repr([conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])

    assert SECRET not in await host.core.registry.run(registry_values)
    assert clear_text_hits(host.settings.data_dir, SECRET.encode()) == []

    await api.member_secret_set(alice_id, "connector:demo", None)
    assert await api.member_secret_get(alice_id, "connector:demo") is None


async def test_member_data_is_refused_while_locked_and_for_bad_input(skald):
    probe = LifecycleProbe("lifeprobe")
    host = await skald.start(plugins=[probe], enable=["lifeprobe"])
    await host.member("alice")
    alice_id = (await host.core.users.find("alice")).id
    api = host.core.host_api("lifeprobe")

    with pytest.raises(ValueError, match="name"):
        await api.member_secret_set(alice_id, "", "x")
    with pytest.raises(ValueError, match="name"):
        await api.member_secret_get(alice_id, "n" * 201)
    with pytest.raises(ValueError, match="value"):
        await api.member_secret_set(alice_id, "big", "x" * (64 * 1024 + 1))
    with pytest.raises(ValueError, match="kind"):
        await api.append_member_event(alice_id, "", {})
    with pytest.raises(ValueError, match="data"):
        await api.append_member_event(alice_id, "big", {"x": "y" * (64 * 1024)})
    with pytest.raises(TypeError):
        await api.append_member_event(alice_id, "bad", {"x": object()})
    assert await api.member_secret_names(alice_id) == [] and await api.member_events(alice_id) == []  # nothing half-written

    await host.core.users.lock(alice_id)
    assert probe.locking == [alice_id]
    assert alice_id not in api.unlocked_members()
    with pytest.raises(MemberLocked):
        await api.member_secret_get(alice_id, "x")
    with pytest.raises(MemberLocked):
        await api.append_member_event(alice_id, "x", {})
    with pytest.raises(MemberLocked):
        await api.member_secret_set("no-such-member", "x", "y")


async def test_prune_member_events_deletes_only_the_calling_plugins_events(skald):
    probe, other = LifecycleProbe("lifeprobe"), LifecycleProbe("otherprobe")
    host = await skald.start(plugins=[probe, other], enable=["lifeprobe", "otherprobe"])
    await host.member("alice")
    alice_id = (await host.core.users.find("alice")).id
    api, other_api = host.core.host_api("lifeprobe"), host.core.host_api("otherprobe")
    mine = [await api.append_member_event(alice_id, "outbox" if n % 2 == 0 else "log", {"n": n}) for n in range(6)]
    theirs = [await other_api.append_member_event(alice_id, "outbox", {"n": n}) for n in range(3)]

    async def ids(which: Any) -> list[int]:
        return [e["id"] for e in await which.member_events(alice_id, limit=1000)]

    # Another plugin pruning "everything up to my newest id" touches none of mine.
    assert await other_api.prune_member_events(alice_id, through_id=max(mine + theirs)) == 3
    assert await ids(api) == mine and await ids(other_api) == []

    # By acknowledged id, one kind only: mine[0] and mine[2] are "outbox" events up to mine[3].
    assert await api.prune_member_events(alice_id, kind="outbox", through_id=mine[3]) == 2
    assert await ids(api) == [mine[1], mine[3], mine[4], mine[5]]
    # A count bound: the newest two stay.
    assert await api.prune_member_events(alice_id, keep_last=2) == 2
    assert await ids(api) == [mine[4], mine[5]]
    # An age bound: nothing is older than a day ago; everything is older than a minute ahead.
    assert await api.prune_member_events(alice_id, before="2000-01-01T00:00:00Z") == 0
    from datetime import datetime, timedelta, timezone

    soon = (datetime.now(timezone.utc) + timedelta(minutes=1)).isoformat()
    assert await api.prune_member_events(alice_id, before=soon) == 2
    assert await ids(api) == []

    for bad in ({}, {"through_id": -1}, {"keep_last": "3"}, {"before": "yesterday"}, {"before": "2026-01-01T00:00:00"}, {"kind": "", "through_id": 1}):
        with pytest.raises(ValueError):
            await api.prune_member_events(alice_id, **bad)
    await host.core.users.lock(alice_id)
    with pytest.raises(MemberLocked):
        await api.prune_member_events(alice_id, through_id=1)

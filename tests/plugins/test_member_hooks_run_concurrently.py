"""The per-member lifecycle hooks (``member_unlocked``, ``member_locking``, ...) of several
plugins run concurrently, each under its own hook timeout: a login waits for the slowest
plugin's hook, at most one timeout, not for one plugin after another (one slow plugin
delayed the others' hooks, and N slow ones every login by N timeouts).

Without waiting on a clock: each plugin's hook finishes only once the other plugin's
hook has begun, which one after the other never happens before the first times out."""

from __future__ import annotations

import asyncio

from skald_hookspecs import PluginInfo, hookimpl


class Waiting:
    def __init__(self, plugin_id: str, begun: dict[str, asyncio.Event]) -> None:
        self.__name__ = plugin_id
        self.plugin_id = plugin_id
        self.begun = begun
        self.finished: list[str] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.plugin_id, title=self.plugin_id, spec=">=1.2,<2")

    async def _meet(self, hook: str) -> None:
        other = "second" if self.plugin_id == "first" else "first"
        # Each time anew: the hook runs at each open and each close of the file.
        mine, theirs = f"{self.plugin_id}:{hook}", f"{other}:{hook}"
        self.begun.setdefault(mine, asyncio.Event()).set()
        await self.begun.setdefault(theirs, asyncio.Event()).wait()
        self.begun.pop(theirs, None)  # both have met: the next round starts afresh
        self.finished.append(hook)

    @hookimpl
    async def member_unlocked(self, member_id: str, host) -> None:
        await self._meet("member_unlocked")

    @hookimpl
    async def member_locking(self, member_id: str) -> None:
        await self._meet("member_locking")


async def test_plugins_member_hooks_run_concurrently_each_under_its_own_timeout(skald):
    begun: dict[str, asyncio.Event] = {}
    first, second = Waiting("first", begun), Waiting("second", begun)
    host = await skald.start(plugins=[first, second], enable=["first", "second"])
    await host.member("alice")
    alice = (await host.core.users.find("alice")).id
    await host.core.users.lock(alice)

    for plugin in (first, second):
        # (her file opened once when she was created, and again at her login)
        assert set(plugin.finished) == {"member_unlocked", "member_locking"} and plugin.finished[-1] == "member_locking", plugin.finished
        assert list(host.core.plugins.status(plugin.plugin_id).failures) == []  # neither timed out

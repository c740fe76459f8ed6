"""A throwaway system-agent plugin and a clock the tests move."""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

from skald_hookspecs import ConfigField, ConfigSet, I18nBundle, NotReady, PluginInfo, SystemAgent, hookimpl

UTC = dt.timezone.utc


class Clock:
    """The scheduler's clock, moved by hand; starts at the real now so rows the host
    stamps itself (messages) fall inside the windows it computes."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


class CountingAgents:
    """One agent (``counted``), recording each run; ``work`` decides ``has_work``."""

    __name__ = "counting"

    def __init__(self, *, scope: str = "per_member", unit: str = "days", interval: int = 7, per_member_interval: bool = False,
                 with_settings: bool = True, fail: bool = False) -> None:
        self.scope, self.unit, self.interval, self.per_member_interval = scope, unit, interval, per_member_interval
        self.with_settings, self.fail = with_settings, fail
        self.work = True
        self.runs: list[tuple[str, str | None]] = []
        self.looked: list[str] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="counting", title="Counting", spec=">=1.3,<2")

    @hookimpl
    def register_config_sets(self, register: Callable[..., None]) -> None:
        if self.with_settings:
            register(ConfigSet("counted", "Counted", (
                ConfigField("enabled", "boolean", default=True),
                ConfigField("interval", "integer", default=self.interval),
            ), owner="counted"))

    @hookimpl
    def register_system_agents(self, register: Callable[..., None]) -> None:
        seconds = {"minutes": 60, "hours": 3600, "days": 86400}[self.unit]
        register(SystemAgent(
            id="counted", title="Counted", interval_seconds=self.interval * seconds, run=self.run, has_work=self.has_work,
            scope=self.scope, interval_unit=self.unit, per_member_interval=self.per_member_interval,  # type: ignore[arg-type]
        ))

    async def has_work(self, ctx: Any) -> bool:
        self.looked.append(ctx.member_id)
        return self.work

    async def run(self, ctx: Any) -> None:
        self.runs.append((ctx.member_id, ctx.subject_id))
        ctx.stats["seen"] = 1
        if self.fail:
            raise RuntimeError("a private detail that must not reach the run log")


async def runs_in_file(core: Any, member_id: str) -> list[dict[str, Any]]:
    return await core.system_agents.runs_of(member_id)


class NotReadyAgents(CountingAgents):
    """Enabled, but its startup waits for a token: its agent runs no more than if it
    were off, and the pages say why in the reader's language."""

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("counting", {"en": {"error.no_token": "Set a token first."}, "de": {"error.no_token": "Erst ein Token setzen."}}))

    @hookimpl
    async def startup(self, host) -> None:
        raise NotReady("no token is set", key="error.no_token")

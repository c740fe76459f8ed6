"""The single enumeration of system agents and their settings (seed 000 "Where the
settings live"): an agent is what a plugin registered with ``register_system_agents``,
its settings the one ``ConfigSet`` the same plugin registered with ``owner`` = its id.
The scheduler, the system-agents page and the per-member interval all read this."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from skald_hookspecs.system_agents import UNIT_SECONDS, SystemAgent
from skald_hookspecs.types import ConfigSet
from skald_host.core.agent.tools import _is_async_callable
from skald_host.core.plugins.manager import Contribution, PluginError
from skald_host.core.system_agents import store

if TYPE_CHECKING:
    from skald_host.core.host import Skald

_AGENT_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MIN_TICK_SECONDS = 60
MAX_TICK_SECONDS = 15 * 60
#: The longest interval honoured (ten years): an agent's ``interval`` field may have no
#: maximum, and a larger value would overflow the scheduler's date arithmetic.
MAX_INTERVAL_SECONDS = 10 * 366 * 86400
DEFAULT_RUN_AT_HOUR = 4
REQUIRED_FIELDS = ("enabled", "interval")
#: The type each of an agent's settings must have, where the set has the field.
FIELD_TYPES_REQUIRED = {"enabled": "boolean", "interval": "integer", "run_at_hour": "integer"}


def validate_agent(plugin_id: str, args: tuple[Any, ...]) -> SystemAgent:
    """``register(SystemAgent(...))``: a well-formed id, a known scope and unit, an
    interval of at least a minute, async ``run`` (and ``has_work``)."""
    if len(args) != 1 or not isinstance(args[0], SystemAgent):
        raise PluginError("register() expects one SystemAgent")
    agent = args[0]
    if not _AGENT_ID.match(agent.id):
        raise PluginError(f"system agent id {agent.id!r} must be lower-case letters, digits, '-' or '_'")
    if agent.scope not in ("per_member", "per_subject", "instance"):
        raise PluginError(f"system agent {agent.id!r}: scope must be per_member, per_subject or instance")
    if agent.interval_unit not in UNIT_SECONDS:
        raise PluginError(f"system agent {agent.id!r}: interval_unit must be one of {', '.join(UNIT_SECONDS)}")
    if not isinstance(agent.interval_seconds, int) or agent.interval_seconds < MIN_TICK_SECONDS:
        raise PluginError(f"system agent {agent.id!r}: interval_seconds must be at least {MIN_TICK_SECONDS}")
    if agent.run_at_hour is not None and not 0 <= agent.run_at_hour <= 23:
        raise PluginError(f"system agent {agent.id!r}: run_at_hour must be 0-23")
    # A plain ``def`` was accepted here and then failed every pass with a bare TypeError.
    if not _is_async_callable(agent.run):
        raise PluginError(f"system agent {agent.id!r}: run must be an async callable (async def)")
    if agent.has_work is not None and not _is_async_callable(agent.has_work):
        raise PluginError(f"system agent {agent.id!r}: has_work must be an async callable (async def) or None")
    return agent


@dataclass(frozen=True)
class RegisteredAgent:
    plugin_id: str
    agent: SystemAgent
    config_set: ConfigSet

    @property
    def id(self) -> str:
        return self.agent.id

    @property
    def unit_seconds(self) -> int:
        return UNIT_SECONDS[self.agent.interval_unit]

    @property
    def run_at_hour(self) -> int:
        return DEFAULT_RUN_AT_HOUR if self.agent.run_at_hour is None else self.agent.run_at_hour


def pair_agents_with_sets(
    agents: Iterable[Contribution], sets: Iterable[Contribution]
) -> tuple[list[RegisteredAgent], dict[str, tuple[str, str]]]:
    """Each agent with its one settings set; and per plugin, why its agents and sets
    disagree (an agent without a set, or without ``enabled``/``interval``) and where in
    its code (``Contribution.place``: the set's ``register`` call, the agent's when it
    has no one set). A plugin that disagrees contributes no agent: its settings page
    and its schedule would otherwise describe different things."""
    sets = list(sets)
    paired: list[RegisteredAgent] = []
    problems: dict[str, str] = {}
    for contribution in agents:
        agent = contribution.value
        registered = [s for s in sets if s.plugin_id == contribution.plugin_id and s.value.owner == agent.id]
        owned = [s.value for s in registered]
        if len(owned) != 1:
            problems[contribution.plugin_id] = (
                f"system agent {agent.id!r} needs exactly one ConfigSet with owner={agent.id!r}, found {len(owned)}",
                contribution.place,
            )
            continue
        names = {f.name for f in owned[0].fields}
        # A per-subject agent comes due by its hour of the day, not by an interval.
        required = ("enabled",) if agent.scope == "per_subject" else REQUIRED_FIELDS
        missing = [name for name in required if name not in names]
        if missing:
            # Where to fix it: the set is registered elsewhere (register_config_sets), and
            # the message names the hook it is reported under (register_system_agents).
            problems[contribution.plugin_id] = (
                f"the settings of system agent {agent.id!r} lack the field(s) {', '.join(missing)}:"
                f" add them to the ConfigSet {owned[0].id!r} it registers in register_config_sets",
                registered[0].place,
            )
            continue
        # A field of another type was accepted and then never read as meant: an integer
        # ``enabled`` left the agent off for good, a text ``interval`` on its default.
        wrong = [
            f"{f.name!r} is of type {f.type!r}, not {FIELD_TYPES_REQUIRED[f.name]!r}"
            for f in owned[0].fields
            if f.name in FIELD_TYPES_REQUIRED and f.type != FIELD_TYPES_REQUIRED[f.name]
        ]
        if wrong:
            problems[contribution.plugin_id] = (
                f"the settings of system agent {agent.id!r}: {'; '.join(wrong)}:"
                f" change the field(s) of the ConfigSet {owned[0].id!r} it registers in register_config_sets",
                registered[0].place,
            )
            continue
        paired.append(RegisteredAgent(contribution.plugin_id, agent, owned[0]))
    return [p for p in paired if p.plugin_id not in problems], problems


class AgentRegistry:
    def __init__(self, core: "Skald", entries: list[RegisteredAgent]) -> None:
        self.core = core
        self.entries = entries

    def get(self, agent_id: str) -> RegisteredAgent | None:
        return next((e for e in self.entries if e.id == agent_id), None)

    def plugin_running(self, entry: RegisteredAgent) -> bool:
        """The agent's plugin is enabled and started: disabled, or enabled but its
        ``startup`` failed, timed out or waits for settings, none of its agents runs."""
        status = self.core.plugins.status(entry.plugin_id)
        return bool(status and status.state == "loaded" and status.started and status.healthy)

    def plugin_enabled(self, entry: RegisteredAgent) -> bool:
        """The admin turned the agent's plugin on, whether or not it runs: "an admin must
        enable it" sent the admin to a switch already on."""
        return self.core.plugins.is_enabled(entry.plugin_id)

    def plugin_error(self, entry: RegisteredAgent, locale: str | None) -> str | None:
        """Why the agent's plugin, enabled, does not run, in the reader's language when
        the plugin or the host has the words (``PluginCatalog.error_text``); None when it
        runs, is off, or nobody said why."""
        status = self.core.plugins.status(entry.plugin_id)
        if status is None or not self.plugin_enabled(entry) or self.plugin_running(entry):
            return None
        return self.core.catalog.error_text(status, locale) or None

    async def settings(self, entry: RegisteredAgent) -> dict[str, Any]:
        """The agent's settings as its plugin reads them (``HostApi.get_settings``): a
        stored value the plugin's current schema refuses reads as the default."""
        from skald_host.core.plugins.host_api import read_settings

        stored = await self.core.instance_settings.values(entry.config_set.id)
        return read_settings(self.core, entry.plugin_id, f"settings set {entry.config_set.id!r}", entry.config_set.fields, stored)

    async def enabled(self, entry: RegisteredAgent) -> bool:
        return self.plugin_running(entry) and bool((await self.settings(entry)).get("enabled", True))

    def instance_interval(self, entry: RegisteredAgent, settings: dict[str, Any]) -> int:
        """The ``interval`` setting in the agent's own unit (an admin types 7 days, not
        10080 minutes), else the agent's default."""
        value = settings.get("interval")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
            return max(MIN_TICK_SECONDS, min(MAX_INTERVAL_SECONDS, int(min(value, MAX_INTERVAL_SECONDS) * entry.unit_seconds)))
        return entry.agent.interval_seconds

    async def member_intervals(self, entry: RegisteredAgent) -> dict[str, int]:
        if not entry.agent.per_member_interval:
            return {}
        return await self.core.registry.run(lambda c: store.member_intervals(c, entry.id))

    async def interval_for(self, entry: RegisteredAgent, member_id: str, settings: dict[str, Any]) -> int:
        """What due-ness measures against for this member: their override, else the
        instance value (failing open onto it)."""
        return (await self.member_intervals(entry)).get(member_id) or self.instance_interval(entry, settings)

    async def shortest_interval(self, entry: RegisteredAgent, settings: dict[str, Any]) -> int:
        """The shortest interval any member of this agent asks for: an override may be
        shorter than the instance value, and the wake-up must come round that often or
        the override would silently do nothing."""
        return min([self.instance_interval(entry, settings), *(await self.member_intervals(entry)).values()])

    async def base_tick(self) -> float:
        """How often the scheduler looks: the shortest enabled interval, clamped to
        [60 s, 15 min]. It decides nothing: due-ness is read from persisted state."""
        shortest = MAX_TICK_SECONDS
        for entry in self.entries:
            if await self.enabled(entry):
                shortest = min(shortest, await self.shortest_interval(entry, await self.settings(entry)))
        return float(max(MIN_TICK_SECONDS, min(MAX_TICK_SECONDS, shortest)))

"""System agents: the one scheduler, its run log, supervision and reports (seed 000).

The agents themselves are plugins (``register_system_agents``); this package owns when
and for whom they run, and where what they leave behind lands."""

from skald_host.core.system_agents.registry import AgentRegistry, RegisteredAgent, pair_agents_with_sets, validate_agent
from skald_host.core.system_agents.reports import ReportService
from skald_host.core.system_agents.scheduler import Outcome, RunContext, SystemAgentScheduler
from skald_host.core.system_agents.timing import most_recent_occurrence

__all__ = [
    "AgentRegistry",
    "Outcome",
    "RegisteredAgent",
    "ReportService",
    "RunContext",
    "SystemAgentScheduler",
    "most_recent_occurrence",
    "pair_agents_with_sets",
    "validate_agent",
]

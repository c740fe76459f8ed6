"""The bounds of delegation (seed 004 §9). The model can only narrow them: a
``delegate`` call may ask for a shorter timeout or fewer rounds, never more."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from skald_host.settings import SubagentSettings

#: The built-in definition a named agent delegates to when its ``delegates`` is absent.
GENERAL_PURPOSE = "general-purpose"
#: Ids no definition may take: they name the caller side of the graph (seed 004 §2.1).
RESERVED_IDS = frozenset({"root", "main", "default", "general"})
#: Per-definition limits when the definition names none.
DEFAULT_RUN_LIMITS = {"timeout_secs": 900, "max_iterations": 24, "max_result_chars": 16_000}
#: The tools of a continuation turn: it reads, it never acts (seed 004 §4.5).
CONTINUATION_TOOLS = (
    "read_file", "list_files", "search_file", "memory_search", "web_fetch", "calculator", "list_agents", "agent_task",
)


_SEED = SubagentSettings()


@dataclass(frozen=True)
class OrchestrationLimits:
    """Host-wide bounds. The first nine are the instance's ``subagents`` settings
    (seed 004 §9, defaults the seed's; ``from_settings``); the rest are the host's own."""

    max_tree_depth: int = _SEED.max_tree_depth
    max_runs_per_tree: int = _SEED.max_runs_per_tree
    max_concurrent_runs: int = _SEED.max_concurrent_runs
    max_concurrent_runs_per_session: int = _SEED.max_concurrent_runs_per_session
    max_concurrent_runs_per_member: int = _SEED.max_concurrent_runs_per_member
    max_pending_inbox_events_per_session: int = _SEED.max_pending_inbox_events_per_session
    max_inbox_delivery_attempts: int = _SEED.max_inbox_delivery_attempts
    max_user_turn_burst_before_inbox: int = _SEED.max_user_turn_burst_before_inbox
    max_inbox_wait_secs: float = _SEED.max_inbox_wait_secs
    #: The agent lane of a turn's mailbox: steer events admitted into one running turn
    #: at most (its own room, apart from the member's queued messages, §4.4).
    steer_mailbox_capacity: int = 8
    #: How long a claimed inbox event stays leased before recovery may take it back.
    lease_secs: float = 120.0
    #: The inbox worker looks again this often even if no wake-up arrived (§4.6).
    recheck_secs: float = 2.0
    #: Bounds of the definition files (seed 004 §2.1).
    max_definition_bytes: int = 256 * 1024
    max_prompt_chars: int = 64 * 1024

    @classmethod
    def from_settings(cls, settings: SubagentSettings) -> "OrchestrationLimits":
        """The instance's configured bounds (validated when the settings loaded)."""
        return cls(**dataclasses.asdict(settings))


def run_limits(definition_limits: Mapping[str, int], asked: Mapping[str, Any] | None) -> dict[str, int]:
    """The limits of one run: the definition's (or the defaults), narrowed by what the
    caller asked. An ask above the definition's bound, or not a positive number, is
    ignored rather than honoured: the model can only narrow."""
    limits = {**DEFAULT_RUN_LIMITS, **definition_limits}
    for key, value in (asked or {}).items():
        if key in limits and isinstance(value, int) and not isinstance(value, bool) and 0 < value < limits[key]:
            limits[key] = value
    return limits

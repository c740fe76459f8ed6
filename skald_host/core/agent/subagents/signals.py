"""``emit_signal`` (seed 004 §4.7): a run with a signal contract tells the root
something before it finishes. Every bound of the contract is enforced here, in the
tool, and the store enforces the rest again: the run is this live attempt, the inbox
has unreserved room, and one key is sent once per cooldown window."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from skald_hookspecs.types import ToolError

if TYPE_CHECKING:
    from skald_host.core.agent.kernel import Scope

#: Per run (the tool's state lives with the run, not with the model's good will).
_SENT: dict[str, list[float]] = {}


def _depth(value: Any, level: int = 0) -> int:
    if isinstance(value, dict):
        return max([_depth(v, level + 1) for v in value.values()], default=level + 1)
    if isinstance(value, list):
        return max([_depth(v, level + 1) for v in value], default=level + 1)
    return level


def event_key(key: str, now: float, cooldown: float) -> str:
    """§8.15: the window is part of the key, so the same key is one signal inside a
    window and a new one in the next."""
    window = int(now // cooldown) if cooldown > 0 else int(now * 1000)
    return f"signal:{key}:{window}"


async def emit(scope: "Scope", key: str, severity: str, summary: str, details: Any = None, dedupe_key: str | None = None, *, now: float | None = None) -> str:
    run = scope.run
    if run is None or not run.signal_contract:
        raise ToolError("this agent has no signal contract: it reports by its answer")
    contract = run.signal_contract
    now = time.time() if now is None else now
    if not isinstance(key, str) or not key.strip() or len(key) > contract["max_key_chars"]:
        raise ToolError(f"'key' must be text of at most {contract['max_key_chars']} characters")
    if severity not in contract["severities"]:
        raise ToolError(f"'severity' must be one of {', '.join(contract['severities'])}")
    if not isinstance(summary, str) or not summary.strip() or len(summary) > contract["max_summary_chars"]:
        raise ToolError(f"'summary' must be text of at most {contract['max_summary_chars']} characters")
    encoded = json.dumps(details)
    if len(encoded.encode()) > contract["max_payload_bytes"]:
        raise ToolError(f"'details' is larger than {contract['max_payload_bytes']} bytes")
    if _depth(details) > contract["max_payload_depth"]:
        raise ToolError(f"'details' is nested deeper than {contract['max_payload_depth']} levels")
    if len(_SENT) > 10_000:
        _SENT.clear()  # bounded: a lost count only makes a later run's first signals free
    sent = _SENT.setdefault(run.execution_id, [])
    if len(sent) >= contract["max_signals"]:
        raise ToolError(f"this run has sent its {contract['max_signals']} signals")
    if sent and now - sent[-1] < contract["min_interval_secs"]:
        raise ToolError(f"signals are at least {contract['min_interval_secs']} s apart")
    if len([t for t in sent if now - t < 1.0]) >= contract["burst"]:
        raise ToolError(f"at most {contract['burst']} signals a second")
    coordinator = scope.kernel.runtime.subagents
    outcome, event_id = await coordinator.store.insert_signal(
        run.run_id, run.execution_id, event_key(dedupe_key or key, now, contract["cooldown_secs"]), contract["delivery"], severity,
        {"key": key, "summary": summary, "details": details}, coordinator.limits.max_pending_inbox_events_per_session,
    )
    if outcome == "stale":
        raise ToolError("this run is no longer live")
    if outcome == "full":
        raise ToolError("the conversation's inbox is full; the signal was not sent (the final answer still arrives)")
    if outcome == "duplicate":
        return "A signal with this key was already sent in this cooldown window; not sent again."
    sent.append(now)
    coordinator.wake(scope.frame.conversation_id)
    return f"Signal {event_id} sent."

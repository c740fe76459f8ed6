"""Crash injection for durability tests (checks B5, G5).

``SKALD_FAULT_CRASH_AT=<point>`` makes the process SIGKILL itself when it reaches the
named point — a real kill, no cleanup, exactly what a power cut or OOM-kill leaves
behind. Read once at import; unset in production, where ``crash_point`` is a no-op
dictionary lookup.
"""

from __future__ import annotations

import os
import signal

_ARMED = frozenset(p for p in os.environ.get("SKALD_FAULT_CRASH_AT", "").split(",") if p)


def crash_point(name: str) -> None:
    if name in _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)

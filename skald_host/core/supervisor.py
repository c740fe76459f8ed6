"""Named background tasks, joined against one deadline on shutdown (seed 002,
"Graceful Shutdown"): a laggard is cancelled and logged by name instead of hanging
the process."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Coroutine

log = logging.getLogger(__name__)


class Supervisor:
    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as the task ``name``; a crash is logged, never silent."""
        if name in self._tasks and not self._tasks[name].done():
            coro.close()
            raise ValueError(f"a background task named {name!r} is already running")
        task = asyncio.create_task(coro, name=name)
        task.add_done_callback(self._report)
        self._tasks[name] = task
        return task

    def _report(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("background task %s crashed: %s", task.get_name(), exc, exc_info=exc)

    @property
    def names(self) -> list[str]:
        return sorted(n for n, t in self._tasks.items() if not t.done())

    async def join_all(self, deadline_seconds: float = 10.0) -> list[str]:
        """Wait for every task until the deadline, then cancel the rest; returns the
        names of tasks that had to be cancelled."""
        pending = {t for t in self._tasks.values() if not t.done()}
        end = time.monotonic() + deadline_seconds
        if pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, end - time.monotonic()))
        laggards = sorted(t.get_name() for t in pending)
        for task in pending:
            log.warning("background task %s did not stop in time; cancelling", task.get_name())
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        self._tasks.clear()
        return laggards

    async def cancel_all(self, deadline_seconds: float = 10.0) -> list[str]:
        for task in self._tasks.values():
            task.cancel()
        return await self.join_all(deadline_seconds)

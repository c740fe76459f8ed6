"""A channel plugin for tests: it records every event the host delivers to it and can
be told to fail, as a broken channel would."""

from __future__ import annotations

import asyncio
from typing import Any

from skald_hookspecs import hookimpl
from skald_hookspecs.channels import ChannelEvent
from skald_hookspecs.types import PluginInfo

CHANNEL = "testchannel"


class RecordingChannel:
    def __init__(self) -> None:
        self.api: Any = None
        self.events: list[tuple[str, ChannelEvent]] = []
        self.fail = False
        self._changed = asyncio.Event()

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=CHANNEL, title="Test channel", spec=">=1.0,<2")

    @hookimpl
    def register_channels(self, register) -> None:
        register(CHANNEL, self)

    @hookimpl
    def startup(self, host) -> None:
        self.api = host

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        self.events.append((member_id, event))
        self._changed.set()
        if self.fail:
            raise RuntimeError("the channel's far end is down")

    def kinds(self, member_id: str | None = None) -> list[str]:
        return [e.kind for m, e in self.events if member_id in (None, m)]

    async def wait_for(self, kind: str, *, start: int = 0, timeout: float = 10.0, **match: Any) -> ChannelEvent:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for _, event in self.events[start:]:
                if event.kind == kind and all(getattr(event, k) == v for k, v in match.items()):
                    return event
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no {kind} event {match or ''} within {timeout} s; saw {[e.kind for _, e in self.events]}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

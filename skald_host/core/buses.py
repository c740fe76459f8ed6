"""The three event buses of seed 001: chat, system, and one per member.

Each is a bounded broadcast. Loss behaviour, deliberately: publishing never blocks
the producer; a subscriber whose queue is full loses its *oldest* undelivered event
and its ``lagged`` counter grows (tokio's broadcast semantics). So a bus is right for
"settles at the next login" reactions and wrong for anything that must happen, such
as revoking access: those are direct calls.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import AsyncIterator, Generic, TypeVar

from skald_hookspecs.events import ChatEvent, SystemEvent, UserEvent

log = logging.getLogger(__name__)
T = TypeVar("T")

CHAT_BUS_CAPACITY = 256
SYSTEM_BUS_CAPACITY = 64
MEMBER_BUS_CAPACITY = 512


class Subscription(Generic[T]):
    """One subscriber's bounded queue. Iterate it with ``async for``; ``close()`` ends it."""

    def __init__(self, bus: "Broadcast[T]", capacity: int) -> None:
        self._bus = bus
        self._queue: collections.deque[T] = collections.deque(maxlen=capacity)
        self._ready = asyncio.Event()
        self.lagged = 0
        self.closed = False
        #: When the oldest event queued now was queued (``time.monotonic``): how long a
        #: consumer took to come for it says how busy the loop is.
        self.waiting_since = 0.0

    def _offer(self, event: T) -> None:
        if not self._queue:
            self.waiting_since = time.monotonic()
        elif len(self._queue) == self._queue.maxlen:
            self.lagged += 1
        self._queue.append(event)
        self._ready.set()

    async def get(self) -> T:
        while not self._queue:
            if self.closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        return self._queue.popleft()

    @property
    def pending(self) -> int:
        """How many events wait to be taken."""
        return len(self._queue)

    def drain(self) -> list[T]:
        """Everything already queued, without waiting (a slow consumer catches up in
        one pass instead of one event per wake-up)."""
        items = list(self._queue)
        self._queue.clear()
        return items

    async def until(self, stopping: asyncio.Event) -> AsyncIterator[T]:
        """The events, one by one, until ``stopping`` is set or the subscription
        closes; closes it at the end. For background followers that must let the host
        stop while they wait."""
        stop = asyncio.ensure_future(stopping.wait())
        try:
            while True:
                nxt = asyncio.ensure_future(self.get())
                done, _ = await asyncio.wait({nxt, stop}, return_when=asyncio.FIRST_COMPLETED)
                if nxt not in done:
                    nxt.cancel()
                    return
                try:
                    yield nxt.result()
                except StopAsyncIteration:
                    return
        finally:
            stop.cancel()
            self.close()

    def __aiter__(self) -> "Subscription[T]":
        return self

    async def __anext__(self) -> T:
        return await self.get()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._ready.set()
            self._bus._subscribers.discard(self)


class Broadcast(Generic[T]):
    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self._subscribers: set[Subscription[T]] = set()

    def subscribe(self) -> Subscription[T]:
        sub: Subscription[T] = Subscription(self, self.capacity)
        self._subscribers.add(sub)
        return sub

    def publish(self, event: T) -> int:
        """Deliver to every current subscriber; returns how many received it."""
        for sub in list(self._subscribers):
            sub._offer(event)
        return len(self._subscribers)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def close(self) -> None:
        for sub in list(self._subscribers):
            sub.close()


class MemberBuses:
    """One broadcast per member, created on first use and dropped with its last
    subscriber, so an idle member costs nothing."""

    def __init__(self, capacity: int = MEMBER_BUS_CAPACITY) -> None:
        self.capacity = capacity
        self._buses: dict[str, Broadcast[UserEvent]] = {}

    def subscribe(self, member_id: str) -> Subscription[UserEvent]:
        bus = self._buses.get(member_id)
        if bus is None:
            bus = self._buses[member_id] = Broadcast(f"member:{member_id}", self.capacity)
        return bus.subscribe()

    def listening(self, member_id: str) -> bool:
        """Whether anything follows this member's bus (a socket, a channel, a plugin):
        a producer asks first to build no event, a token's say, that nobody receives."""
        return member_id in self._buses

    def publish(self, event: UserEvent) -> int:
        bus = self._buses.get(event.member_id)
        if bus is None:
            return 0
        delivered = bus.publish(event)
        if not bus.subscriber_count:
            self._buses.pop(event.member_id, None)
        return delivered

    def close_member(self, member_id: str) -> None:
        bus = self._buses.pop(member_id, None)
        if bus is not None:
            bus.close()

    def close(self) -> None:
        for member_id in list(self._buses):
            self.close_member(member_id)


class Buses:
    def __init__(self) -> None:
        self.chat: Broadcast[ChatEvent] = Broadcast("chat", CHAT_BUS_CAPACITY)
        self.system: Broadcast[SystemEvent] = Broadcast("system", SYSTEM_BUS_CAPACITY)
        self.members = MemberBuses()

    def close(self) -> None:
        self.chat.close()
        self.system.close()
        self.members.close()

"""A member's event streams are bounded, as the host's own sockets are: every event of
theirs is copied to each open stream, so one credential opening thousands held up
every member's events. A phone holds one; the bound leaves room for many devices and
a few half-dropped connections."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, ExitStack

from skald_mobile_connector import running
from skald_mobile_connector.service import MAX_STREAMS_PER_MEMBER
from mobile_support import BASE, EventStream, paired_device


async def test_a_member_holds_at_most_the_bound_and_the_next_is_refused_with_why(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    async with AsyncExitStack() as streams:
        opened = [await streams.enter_async_context(EventStream(phone)) for _ in range(MAX_STREAMS_PER_MEMBER)]
        refused = await phone.get(f"{BASE}/stream")
        assert refused.status_code == 429, refused.text
        assert refused.json()["code"] == "too_many_streams" and refused.json()["limit"] == MAX_STREAMS_PER_MEMBER
        assert f"at most {MAX_STREAMS_PER_MEMBER}" in refused.json()["error"]

        # The bound is the member's own: another member's phone opens its stream.
        bob = await setup.host.member("bob")
        async with EventStream(await paired_device(setup, bob, name="Bob's phone")) as other:
            assert other.kinds()[0] == "hello"

        # A stream that ends gives its place back.
        await opened[0].__aexit__(None, None, None)
        for _ in range(100):
            if not (await phone.get(f"{BASE}/me")).is_success:
                break
            again = EventStream(phone)
            try:
                await streams.enter_async_context(again)
                break
            except AssertionError:  # the ended one's place is not given back yet
                await asyncio.sleep(0.05)
        assert again.kinds()[0] == "hello"


async def test_a_burst_of_opens_leaves_no_more_than_the_bound_open(setup):
    """The route counts before the stream opens; opens racing past that count are
    closed at once, with the reason, when their stream would begin."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    burst = [EventStream(phone) for _ in range(MAX_STREAMS_PER_MEMBER + 10)]
    tasks = [asyncio.create_task(stream._read()) for stream in burst]  # all at once, not one after another
    try:
        for _ in range(400):
            settled = [s for s in burst if s.status == 429 or "hello" in s.kinds() or "closed" in s.kinds()]
            if len(settled) == len(burst):
                break
            await asyncio.sleep(0.05)
        live = [s for s in burst if "hello" in s.kinds() and not s.ended.is_set()]
        turned_away = [s for s in burst if s.status == 429 or {"kind": "closed", "reason": "too_many_streams"} in s.events]
        assert len(live) == MAX_STREAMS_PER_MEMBER
        assert len(turned_away) == 10
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_stream_past_the_bound_opens_no_queue_even_when_it_passed_the_routes_count(setup):
    """The stream's own guard, for opens that all passed the route's count before any
    of their streams began (a burst interleaving so is timing-dependent; the guard is not)."""
    service = running.service
    with ExitStack() as held:
        queues = [held.enter_context(service.stream("member-x")) for _ in range(MAX_STREAMS_PER_MEMBER)]
        assert None not in queues and service.streams_open("member-x") == MAX_STREAMS_PER_MEMBER
        with service.stream("member-x") as extra:
            assert extra is None
        assert service.streams_open("member-x") == MAX_STREAMS_PER_MEMBER
    assert service.streams_open("member-x") == 0

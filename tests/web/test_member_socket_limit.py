"""One member's tab count cannot hold up everyone (check H3): a hostile-input probe with
100 sockets of one member and a 1 MB streamed answer stalled every member's requests for
seconds, each socket encoding (and compressing) the same events on the event loop. A
member gets ``server.websocket_max_per_member`` sockets, the next is closed with 4029 and
a reason the page shows; and the same events are encoded once for all their sockets.
Real sockets against a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json

from websockets.exceptions import ConnectionClosed

from skald_hookspecs.events import UserEvent
from skald_host.web.routes import events

LIMIT = 3


async def pong(ws) -> None:
    """The socket is open and served: a ping is answered."""
    await ws.send('{"type":"ping"}')
    while json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] != "pong":
        pass


async def refusal(ws) -> tuple[int | None, str | None]:
    try:
        while True:
            await asyncio.wait_for(ws.recv(), 5)
    except ConnectionClosed as closed:
        return (closed.rcvd.code, closed.rcvd.reason) if closed.rcvd else (None, None)


async def test_a_member_past_the_limit_is_closed_with_a_reason_and_others_are_not(skald):
    host = await skald.start(settings=skald.settings(server={"websocket_max_per_member": LIMIT}))
    alice, bob = await host.member("alice"), await host.member("bob")
    opened = [await alice.ws().__aenter__() for _ in range(LIMIT)]
    try:
        for ws in opened:
            await pong(ws)
        async with alice.ws() as extra:
            assert await refusal(extra) == (events.TOO_MANY_SOCKETS, "too_many_sockets")
        async with bob.ws() as other:  # another member's sockets are their own count
            await pong(other)
        await opened.pop().close()
        for _ in range(100):  # the closed one is no longer counted once its handler ended
            if host.app.extensions["skald.member_sockets"].open.get(alice.member["id"]) == LIMIT - 1:
                break
            await asyncio.sleep(0.02)
        async with alice.ws() as again:
            await pong(again)
    finally:
        for ws in opened:
            await ws.close()


async def test_the_same_events_are_encoded_once_for_all_of_a_members_sockets(skald, monkeypatch):
    host = await skald.start()
    alice = await host.member("alice")
    encoded: list[str] = []
    real = events.encode

    def counting(message):
        text = real(message)
        encoded.append(text)
        return text

    sockets = [await alice.ws().__aenter__() for _ in range(5)]
    try:
        for ws in sockets:
            await pong(ws)
        monkeypatch.setattr(events, "encode", counting)
        host.core.buses.members.publish(UserEvent("notification", alice.member["id"], {"text": "x" * 100_000}))
        received = [json.loads(await asyncio.wait_for(ws.recv(), 5)) for ws in sockets]
        assert all(r["event"]["data"]["text"] == "x" * 100_000 for r in received)
        assert len(encoded) == 1  # one encoding, five sockets
    finally:
        for ws in sockets:
            await ws.close()

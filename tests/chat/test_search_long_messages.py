"""A search for one letter in a file with a message that holds it 50,000 times
("a " * 50000, the longest a member may send) took 10 to 40 s: FTS5's ``snippet()``
scores a window at every match against every other, so its cost grows with the square
of a message's matches. A long message's snippet now comes from its first matching
piece: the search answers as before, at once."""

from __future__ import annotations

import time

from skald_host.core.agent import store as store_module
from skald_host.core.agent.store import SNIPPET_PIECE


async def test_a_message_of_fifty_thousand_matches_is_searched_and_snipped_at_once(owner_store, monkeypatch):
    store = owner_store
    long_one, _ = await store.create_conversation("assistant")
    frame = await store.root_frame(long_one)
    await store.add_member_message(frame, "a " * 50000, None, queued=False)
    tail = "ab " * 30000 + "the rhubarb grows far down"
    await store.finish_assistant(await store.start_assistant(frame, "m"), content=tail, reasoning="", model="m", calls=[])
    short_one, _ = await store.create_conversation("assistant")
    await store.add_member_message(await store.root_frame(short_one), "an apple a day", None, queued=False)

    pieces: list[int] = []
    cut = store_module.snippet_pieces

    def counted(text: str) -> list[str]:
        result = cut(text)
        pieces.extend(len(piece) for piece in result)
        return result

    monkeypatch.setattr(store_module, "snippet_pieces", counted)

    started = time.monotonic()
    found = {c["id"]: c["snippet"] for c in await store.conversations(search="a")}
    assert found == {short_one: "an apple a day", long_one: "a a a a a a a a a a a a…"}
    assert {c["id"]: c["snippet"] for c in await store.conversations(search="ab")} == {long_one: "ab ab ab ab ab ab ab ab ab ab ab ab…"}
    # A word only far down a long message: found, its snippet around it.
    rhubarb = await store.conversations(search="rhubarb")
    assert [c["id"] for c in rhubarb] == [long_one]
    assert rhubarb[0]["snippet"].startswith("…") and "the rhubarb grows far down" in rhubarb[0]["snippet"]
    # Words in different pieces of one message: the first word's snippet.
    both = await store.conversations(search="ab rhubarb")
    assert [c["id"] for c in both] == [long_one] and both[0]["snippet"]
    assert time.monotonic() - started < 5.0  # was 10 to 40 s for the first search alone
    # The work done: snippet() never ran over more than a piece of a long message.
    assert pieces and max(pieces) <= SNIPPET_PIECE


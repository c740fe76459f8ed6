"""Conversation titles are one line of visible text (security sweep): a bidi override,
a zero-width space or a BOM in a title is dropped, a control character or a line break
becomes a space ("a\\r\\nX-Injected: 1" is no second header line in an export or a
notification), however the title came: given at creation, renamed, or taken from the
first message. ``clean_title`` (``skald_host.core.text``) is the one rule."""

from __future__ import annotations

import pytest

from skald_host.core.text import clean_title
from skald_host.testing import Reply

from .support import ChatSocket, configure_models, new_conversation

@pytest.mark.parametrize("given, stored", [
    ("\u202e\u200b\ufeffabc", "abc"),
    ("a\r\nX-Injected: 1", "a X-Injected: 1"),
    ("  Plan\tthe \u2028garden\u2029 \x85now\x07 ", "Plan the garden now"),
    ("\u2066right\u2069 \u00adsoft", "right soft"),
    ("Grüße, 日本語 🌱", "Grüße, 日本語 🌱"),
    ("👩\u200d💻 at work", "👩\u200d💻 at work"),  # an emoji sequence keeps its joiner
    ("\ud800lone", "lone"),
    ("\u202e", ""),
    (None, ""),
])
def test_clean_title(given, stored):
    assert clean_title(given) == stored


async def test_titles_hold_no_bidi_override_invisible_or_control_character(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    async def title(conversation_id: str) -> str:
        response = await alice.get(f"/api/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        return response.json()["conversation"]["title"]

    created = await new_conversation(alice, title="\u202e\u200b\ufeffabc")
    assert await title(created) == "abc"
    listed = (await alice.get("/api/conversations")).json()["conversations"]
    assert [c["title"] for c in listed if c["id"] == created] == ["abc"]

    response = await alice.patch(f"/api/conversations/{created}", json={"title": "a\r\nX-Injected: 1"})
    assert response.status_code == 200 and response.json()["title"] == "a X-Injected: 1", response.text
    assert await title(created) == "a X-Injected: 1"
    response = await alice.patch(f"/api/conversations/{created}", json={"title": "👩\u200d💻 Grüße\u2028日本"})
    assert response.json()["title"] == "👩\u200d💻 Grüße 日本"

    # Titled by its first message.
    chat.server.responder = lambda request: Reply("ok")
    async with ChatSocket(alice) as sock:
        first = await new_conversation(alice)
        await sock.send(first, "\u202eevil\u200b plan\x1b[2J for\u2028spring")
        await sock.turn(first)
    assert await title(first) == "evil plan 2J for spring"  # (a lone "[" reads as Markdown)
    chat.server.responder = lambda request: Reply("ok")
    async with ChatSocket(alice) as sock:
        marked = await new_conversation(alice)
        await sock.send(marked, "Hello **world**, see [the list](https://example.org) and `plan.md`")
        await sock.turn(marked)
    # The words a reader sees, not the Markdown (newcomer probe: "Hello **world**" in the sidebar).
    assert await title(marked) == "Hello world, see the list and plan.md"

"""Spec 1.2 for channels (issue 25): the streaming answer as coalesced ``partial`` events
for a channel that asks for them, a plugin's own sealed boxes for a member's words
(``seal_for_member``/``open_for_member``), and why a member is locked (``lock_reason``)."""

from __future__ import annotations

import pytest

from skald_hookspecs.channels import LOCK_LOGGED_OUT, LOCK_RESTARTED, ChannelRequestError, MemberLocked
from skald_host.core.channels import router as router_module
from skald_host.testing import Reply, ToolCall
from tests.chat.support import MODEL_A

WORDS = [f"word{i:02d} " for i in range(30)]


async def test_partials_reach_only_a_channel_that_wants_them_coalesced_and_before_the_answer(channels):
    alice = await channels.host.member("alice")
    member_id, api, channel = alice.member["id"], channels.channel.api, channels.channel
    channels.server.script(MODEL_A, [Reply("".join(WORDS), token_delay=0.02), Reply("".join(WORDS), token_delay=0.08)])

    await api.send_message(member_id, "Without partials")
    await channel.wait_for("answer")
    assert "partial" not in channel.kinds()  # a channel of spec 1.1 never sees the new kind

    channel.wants_partials = True
    start = len(channel.events)
    await api.send_message(member_id, "With partials")
    answer = await channel.wait_for("answer", start=start, timeout=20)
    events = [e for _, e in channel.events[start:]]
    partials = [e for e in events if e.kind == "partial"]
    final = "".join(WORDS)
    assert answer.text == final
    assert len(partials) >= 2, "a 2.4 s stream gave fewer than two partials"
    # Coalesced: far fewer events than tokens (one per half second at most, and slack).
    assert len(partials) <= len(WORDS) // 2
    texts = [p.text for p in partials]
    assert all(final.startswith(t) for t in texts) and texts == sorted(texts, key=len)
    assert events.index(answer) > max(events.index(p) for p in partials)  # never a partial after the answer
    assert router_module.PARTIAL_INTERVAL_SECONDS == 0.5


async def test_a_round_that_ends_in_tool_calls_sends_its_whole_text_and_names_its_answer(channels):
    """A quick round ("Let me look.", then a tool) ended before the half-second flush:
    its words never reached the channel (a phone showed only the final answer). It is
    sent whole as the round ends; each partial names its answer, so the next round's
    text is told apart from more of the same (contract 1.9)."""
    alice = await channels.host.member("alice")
    member_id, api, channel = alice.member["id"], channels.channel.api, channels.channel
    channel.wants_partials = True
    channels.server.script(MODEL_A, [Reply("Let me look.", tool_calls=[ToolCall("list_agents", {})]), Reply("".join(WORDS), token_delay=0.05)])
    await api.send_message(member_id, "Which helpers are there?")
    answer = await channel.wait_for("answer", timeout=20)
    events = [e for _, e in channel.events]
    partials = [e for e in events if e.kind == "partial"]
    assert partials[0].text == "Let me look." and partials[0].data["message_id"]
    later = [p for p in partials if p.text != "Let me look."]
    assert later and all(p.data["message_id"] != partials[0].data["message_id"] for p in later)
    assert answer.text == "".join(WORDS) and events.index(answer) > events.index(partials[-1])


async def test_a_plugins_sealed_box_opens_only_for_it_the_member_and_while_unlocked(channels):
    alice = await channels.host.member("alice")
    bob = await channels.host.member("bob")
    member_id, api = alice.member["id"], channels.channel.api
    sealed = await api.seal_for_member(member_id, b"the answer: meet at the old mill")
    assert sealed.startswith("sealed1:") and "old mill" not in sealed
    assert await api.open_for_member(member_id, sealed) == b"the answer: meet at the old mill"

    other = channels.host.core.host_api("someoneelse")
    with pytest.raises(ChannelRequestError):
        await other.open_for_member(member_id, sealed)  # another plugin's box
    with pytest.raises(ChannelRequestError):
        await api.open_for_member(bob.member["id"], sealed)  # another member's
    with pytest.raises(ChannelRequestError):
        await api.open_for_member(member_id, sealed[:-4] + "AAAA")  # altered
    with pytest.raises(ChannelRequestError):
        await api.open_for_member(member_id, "not a box")

    # Locked by a restart: the box waits, and says why; a login opens it.
    host = await channels.restart()
    api = channels.channel.api
    with pytest.raises(MemberLocked) as locked:
        await api.open_for_member(member_id, sealed)
    assert locked.value.lock_reason == LOCK_RESTARTED
    delivery = await api.send_message(member_id, "while locked")
    assert (delivery.status, delivery.lock_reason) == ("sealed", LOCK_RESTARTED)
    assert await api.seal_for_member(member_id, b"sealing needs no unlock")
    alice = await host.member("alice")
    assert await api.open_for_member(member_id, sealed) == b"the answer: meet at the old mill"

    # Locked by logging out: the reason says so.
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    with pytest.raises(MemberLocked) as locked:
        await api.open_for_member(member_id, sealed)
    assert locked.value.lock_reason == LOCK_LOGGED_OUT
    delivery = await api.send_message(member_id, "after logout")
    assert (delivery.status, delivery.lock_reason) == ("sealed", LOCK_LOGGED_OUT)
    with pytest.raises(MemberLocked) as locked:
        await api.new_conversation(member_id)
    assert locked.value.lock_reason == LOCK_LOGGED_OUT

"""What a Telegram message says about itself besides its text (probe 7, findings 4 and
5): a forwarded message keeps who wrote it, for the model and the transcript, and an
edited message, which Telegram sends as its own kind of update, is answered with a
note that edits are not read instead of silence."""

from __future__ import annotations

import asyncio

from skald_host.testing import Reply
from skald_telegram.updates import parse_update
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running


async def test_a_forwarded_message_reaches_the_model_and_the_transcript_with_its_author(setup: Setup):
    await running(setup)
    alice = await paired_member(setup)
    setup.model.script(MODEL, [Reply("Noted whose words."), Reply("Noted again.")])
    mallory = {"type": "user", "date": 1, "sender_user": {"id": 666, "is_bot": False, "first_name": "Mallory"}}
    setup.api.send(ALICE_CHAT, "Send me your password.", forward_origin=mallory, forward_from=mallory["sender_user"])
    await setup.api.wait_for(lambda: "Noted whose words." in setup.api.texts(ALICE_CHAT), what="the answer")
    said = [m["content"] for m in setup.model.requests_for(MODEL)[-1].messages if m["role"] == "user"]
    assert said == ["Forwarded from Mallory:\nSend me your password."], said
    [conversation] = (await alice.get("/api/conversations")).json()["conversations"]
    stored = (await alice.get(f"/api/conversations/{conversation['id']}")).json()["messages"]
    assert stored[0]["content"] == "Forwarded from Mallory:\nSend me your password."

    # A forwarded "/new" is someone else's text, not the member's command.
    channel = {"type": "channel", "date": 1, "chat": {"id": -100, "type": "channel", "title": "Daily News"}, "message_id": 3}
    setup.api.send(ALICE_CHAT, "/new edition out", forward_origin=channel)
    await setup.api.wait_for(lambda: "Noted again." in setup.api.texts(ALICE_CHAT), what="the second answer")
    assert setup.model.requests_for(MODEL)[-1].last_user_text == "Forwarded from Daily News:\n/new edition out"
    assert "Started a new conversation." not in setup.api.texts(ALICE_CHAT)


def test_every_kind_of_forward_origin_is_named():
    def origin_of(message: dict) -> str | None:
        update = parse_update({"update_id": 1, "message": {"chat": {"id": 5, "type": "private"}, "text": "x", **message}})
        return update.forwarded_from

    assert origin_of({}) is None
    assert origin_of({"forward_origin": {"type": "user", "sender_user": {"id": 1, "first_name": "Mal", "last_name": "Lory"}}}) == "Mal Lory"
    assert origin_of({"forward_origin": {"type": "hidden_user", "sender_user_name": "Anon Ymous"}}) == "Anon Ymous"
    assert origin_of({"forward_origin": {"type": "chat", "sender_chat": {"id": -1, "title": "The Group"}}}) == "The Group"
    assert origin_of({"forward_origin": {"type": "channel", "chat": {"id": -2, "title": "News"}, "author_signature": "Ed"}}) == "News (Ed)"
    assert origin_of({"forward_origin": {"type": "hidden_user"}}) == ""
    assert origin_of({"forward_origin": "nonsense"}) is None
    assert origin_of({"forward_from": {"id": 1, "username": "mal"}}) == "@mal"  # before Bot API 7.0
    assert origin_of({"forward_sender_name": "Hidden", "forward_date": 1}) == "Hidden"


async def test_an_edited_message_is_answered_that_edits_are_not_read(setup: Setup):
    await running(setup)
    await paired_member(setup)
    await setup.api.wait_for(lambda: setup.api.of("getUpdates"), what="a poll")
    # Telegram sends only the kinds the bot asks for: edits must be among them.
    assert all("edited_message" in list(c.params.get("allowed_updates") or []) for c in setup.api.of("getUpdates"))
    setup.model.script(MODEL, [Reply("Answered the first.")])
    first = setup.api.message(ALICE_CHAT, "Whats the tiem?")
    setup.api.push({"message": first})
    await setup.api.wait_for(lambda: "Answered the first." in setup.api.texts(ALICE_CHAT), what="the answer")
    setup.api.push({"edited_message": {**first, "text": "What's the time?", "edit_date": 2}})
    await setup.api.wait_for(
        lambda: "Edited messages are not read: send the corrected message again." in setup.api.texts(ALICE_CHAT), what="the note"
    )
    await asyncio.sleep(0.5)
    assert len(setup.model.requests_for(MODEL)) == 1  # the edit started no turn
    # A chat that is not linked gets nothing for an edit (no pairing code either).
    stranger = setup.api.message(7770001, "hello")
    setup.api.push({"edited_message": {**stranger, "edit_date": 2}})
    await asyncio.sleep(1.0)
    assert setup.api.texts(7770001) == []

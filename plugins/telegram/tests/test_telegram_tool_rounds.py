"""An answer with a tool round: what the model said before its tool call stays in the
chat as its own message, and the answer after the tool is a message of its own below it
(below the approval card, when the call needed one) — as the host stores them, as two
messages. Before, the final answer was edited into the first round's message: the words
before the tool call disappeared, and after an approval the answer sat above the card,
arriving as an edit (no notification)."""

from __future__ import annotations

from skald_host.testing import Reply, ToolCall
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running


def _messages(setup: Setup, first: int) -> list[tuple[int, str]]:
    """The chat's messages sent since the ``first``-th sendMessage: (id, text now)."""
    sends = setup.api.of("sendMessage", ALICE_CHAT)[first:]
    return [(c.result["message_id"], setup.api.messages[c.result["message_id"]]["text"]) for c in sends if isinstance(c.result, dict)]


def _edited_into(setup: Setup, message_id: int) -> list[str]:
    return [str(c.params.get("text")) for c in setup.api.of("editMessageText", ALICE_CHAT) if c.params.get("message_id") == message_id]


async def test_the_words_before_a_tool_call_stay_and_the_answer_is_a_new_message(setup: Setup):
    await running(setup)
    await paired_member(setup)
    rule = await setup.admin.post("/api/admin/approval-rules", json={"tool_pattern": "write_note", "action": "allow", "priority": 50})
    assert rule.status_code in (200, 201), rule.text
    before = "Let me look at your notes first."
    after = "Noted: **milk** " + " ".join(f"w{i:02d}" for i in range(12))
    shown_after = "Noted: <b>milk</b> " + " ".join(f"w{i:02d}" for i in range(12))
    # The second round streams (or not: either way it is a message of its own).
    setup.model.script(MODEL, [Reply(before, tool_calls=[ToolCall("write_note", {"text": "milk"})]), Reply(after, token_delay=0.05)])
    first = len(setup.api.of("sendMessage", ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "Remember milk.")
    await setup.api.wait_for(lambda: shown_after in setup.api.shown(ALICE_CHAT), timeout=30, what="the final answer")
    assert setup.probe.notes == ["milk"]

    messages = _messages(setup, first)
    assert [text for _, text in messages] == [before, shown_after], messages
    first_id = messages[0][0]
    assert all(before.startswith(text) for text in _edited_into(setup, first_id)), _edited_into(setup, first_id)
    assert setup.api.shown(ALICE_CHAT)[-2:] == [before, shown_after]


async def test_after_an_approval_the_answer_is_a_new_message_below_the_card(setup: Setup):
    await running(setup)
    await paired_member(setup)
    before = "Let me write it down."
    setup.model.script(MODEL, [Reply(before, tool_calls=[ToolCall("write_note", {"text": "milk"})]), Reply("Noted: milk.")])
    first = len(setup.api.of("sendMessage", ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "Remember milk.")

    card = await setup.api.wait_for(lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup")], what="the approval card")
    card_id = await setup.api.wait_for(lambda: card[0].result and card[0].result["message_id"])
    setup.api.press(ALICE_CHAT, card_id, card[0].params["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
    await setup.api.wait_for(
        lambda: "Noted: milk." in setup.api.shown(ALICE_CHAT) and setup.api.messages[card_id]["text"].endswith("Approved."), what="the answer"
    )
    assert setup.probe.notes == ["milk"]

    messages = _messages(setup, first)
    ids = [message_id for message_id, _ in messages]
    texts = [text for _, text in messages]
    assert texts[0] == before and ids[1] == card_id, messages  # the words before the call, then the card
    assert texts[1].endswith("\n\nApproved.") and texts[-1] == "Noted: milk.", messages  # the card says its outcome; the answer: a new message, last
    assert all(before.startswith(text) for text in _edited_into(setup, ids[0])), _edited_into(setup, ids[0])
    assert not [c for c in setup.api.of("editMessageText", ALICE_CHAT) if c.params.get("text") == "Noted: milk."]

"""An approval waiting when the member links another chat: its card comes to the new
chat with working buttons, the old chat's card loses its buttons, and a press there
(the chat is nobody's now) is answered with a line instead of nothing."""

from __future__ import annotations

from skald_host.testing import Reply, ToolCall
from telegram_support import ALICE_CHAT, MODEL, pairing_code, paired_member, running

NEW_CHAT = 5550009


def cards(setup, chat_id):
    return [c for c in setup.api.of("sendMessage", chat_id) if c.params.get("reply_markup")]


async def test_a_waiting_approval_follows_the_member_to_the_chat_they_link(setup):
    await running(setup)
    alice = await paired_member(setup)
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "milk"})]), Reply("Noted: milk.")])
    setup.api.send(ALICE_CHAT, "Remember milk.")
    old = (await setup.api.wait_for(lambda: cards(setup, ALICE_CHAT), what="the approval card"))[0]
    old_id = await setup.api.wait_for(lambda: old.result and old.result["message_id"])
    old_approve = old.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]

    code = await pairing_code(setup, NEW_CHAT)
    saved = await alice.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})
    assert saved.status_code == 200 and saved.json()["config"]["chat_id"] == NEW_CHAT, saved.text
    await setup.api.wait_for(lambda: any("no longer linked" in t for t in setup.api.texts(ALICE_CHAT)), what="the old chat told")

    new = (await setup.api.wait_for(lambda: cards(setup, NEW_CHAT), what="the card in the new chat"))[0]
    assert "write_note" in new.params["text"] and "milk" in new.params["text"]
    buttons = new.params["reply_markup"]["inline_keyboard"][0]
    assert [b["text"] for b in buttons] == ["Approve", "Deny"]
    await setup.api.wait_for(
        lambda: [e for e in setup.api.of("editMessageReplyMarkup", ALICE_CHAT) if e.params.get("message_id") == old_id], what="the old card's buttons removed"
    )

    # The old card's button: said so, nothing approved.
    before = len(setup.api.texts(ALICE_CHAT))
    setup.api.press(ALICE_CHAT, old_id, old_approve)
    texts = await setup.api.wait_texts(ALICE_CHAT, before + 1)
    assert "no longer linked" in texts[before] and "button" in texts[before], texts[before]
    assert setup.probe.notes == []

    # The new card's button works.
    new_id = await setup.api.wait_for(lambda: new.result and new.result["message_id"])
    setup.api.press(NEW_CHAT, new_id, buttons[0]["callback_data"])
    await setup.api.wait_for(lambda: "Noted: milk." in setup.api.texts(NEW_CHAT), what="the answer after approval in the new chat")
    assert setup.probe.notes == ["milk"]
    await setup.api.wait_for(lambda: setup.api.messages[new_id]["text"].endswith("Approved."), what="the new card's outcome")

"""An approval card answered elsewhere (the web, the phone app): its text in Telegram
says how it was settled, and its buttons go. Only the buttons went before: the card
still read "… Allow it?" and nothing in the chat said it had been answered."""

from __future__ import annotations

from skald_host.testing import Reply, ToolCall
from telegram_support import ALICE_CHAT, MODEL, PROBE, paired_member, running


async def card_in_telegram(setup):
    """Alice, paired, asks to note milk: the model's write_note waits for approval, as a
    card in her Telegram chat. Her client and the card's message id."""
    await running(setup)
    alice = await paired_member(setup)
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "milk"})]), Reply("Not noted.")])
    setup.api.send(ALICE_CHAT, "Remember milk.")
    card = (await setup.api.wait_for(
        lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup")], what="the approval card"
    ))[0]
    return alice, await setup.api.wait_for(lambda: card.result and card.result["message_id"])


async def test_a_card_denied_on_the_web_says_so_in_telegram(setup):
    alice, message_id = await card_in_telegram(setup)

    pending = (await alice.get("/api/approvals")).json()["approvals"]
    assert len(pending) == 1, pending
    denied = await alice.post(f"/api/approvals/{pending[0]['id']}", json={"decision": "deny"})
    assert denied.status_code == 200, denied.text

    def settled():
        return [e for e in setup.api.of("editMessageText", ALICE_CHAT) if e.params.get("message_id") == message_id]

    edit = (await setup.api.wait_for(settled, what="the card's text edited"))[0]
    text = setup.api.messages[message_id]["text"]
    assert text.endswith("Denied on another device."), text
    assert "write_note" in text and "milk" in text  # still says what was asked
    assert not edit.params.get("reply_markup")  # an edit without a keyboard takes the buttons
    await setup.api.wait_for(lambda: "Not noted." in setup.api.texts(ALICE_CHAT), what="the answer after the denial")
    assert setup.probe.notes == []
    assert "Denied on another device." not in setup.api.texts(ALICE_CHAT)  # the card says it, no extra line


async def test_a_card_the_host_withdrew_says_withdrawn_not_denied_in_telegram(setup):
    """A card whose tool the member may no longer use (here its plugin was disabled; a
    deactivation's cards end the same way) is denied by the host, with the reason
    ``withdrawn``: nobody denied it on another device, and the card says what happened."""
    alice, message_id = await card_in_telegram(setup)
    [pending] = (await alice.get("/api/approvals")).json()["approvals"]
    assert (await setup.admin.put(f"/api/admin/plugins/{PROBE}/enabled", json={"enabled": False})).status_code == 200
    answered = await alice.post(f"/api/approvals/{pending['id']}", json={"decision": "approve"})
    assert answered.json()["reason"] == "withdrawn", answered.text

    def settled():
        return [e for e in setup.api.of("editMessageText", ALICE_CHAT) if e.params.get("message_id") == message_id]

    await setup.api.wait_for(settled, what="the card's text edited")
    text = setup.api.messages[message_id]["text"]
    assert text.endswith("Withdrawn: access changed."), text
    assert "another device" not in text
    assert setup.probe.notes == []

"""Telegram's refusals in the log: the method and the kind of refusal, never the rest of
Telegram's description, which may repeat the member's words it refused ("Message is too
long: …", a card's text with its tool arguments) — the admin reads the log."""

from __future__ import annotations

import logging

from skald_host.testing import Reply, ToolCall
from telegram_standin import Refusal
from telegram_support import ALICE_CHAT, MODEL, paired_member, running


def _said(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records]


async def test_a_refused_answer_is_logged_by_its_kind_not_telegrams_words(setup, caplog):
    caplog.set_level(logging.DEBUG)
    await running(setup)
    await paired_member(setup)
    setup.api.refusals.append(Refusal("sendMessage", "zqxmark-tg2", "Bad Request: message is too long: you said: {text}"))
    setup.model.script(MODEL, [Reply("zqxmark-tg2 echo failsend reply")])
    setup.api.send(ALICE_CHAT, "Say it back.")
    dropped = "telegram: a markdown for chat 5550001 was refused by Telegram and dropped: sendMessage: message is too long"
    await setup.api.wait_for(lambda: dropped in _said(caplog), what="the refusal in the log")
    refused = [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.status == 400]
    assert refused, "the stand-in refused nothing"
    assert "zqxmark" not in caplog.text.lower() and "you said" not in caplog.text.lower()


async def test_a_refused_edit_of_a_settled_card_is_logged_by_its_kind_not_the_card(setup, caplog):
    caplog.set_level(logging.DEBUG)
    await running(setup)
    alice = await paired_member(setup)
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "zqxmark-editfail"})]), Reply("Not noted.")])
    setup.api.refusals.append(Refusal("editMessageText", "zqxmark-editfail", "Bad Request: message can't be edited: {text}"))
    setup.api.send(ALICE_CHAT, "Remember something.")
    await setup.api.wait_for(
        lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup") and c.result], what="the approval card"
    )
    pending = (await alice.get("/api/approvals")).json()["approvals"]
    denied = await alice.post(f"/api/approvals/{pending[0]['id']}", json={"decision": "deny"})
    assert denied.status_code == 200, denied.text
    await setup.api.wait_for(lambda: setup.api.of("editMessageReplyMarkup", ALICE_CHAT), what="the card's buttons taken instead")
    line = "telegram: editing a settled approval card in chat 5550001 was refused: message can't be edited"
    assert line in _said(caplog), _said(caplog)
    assert "zqxmark" not in caplog.text.lower() and "write_note:" not in caplog.text

"""Presses on an approval card that do not count (a double tap, a card answered on the
web at the same moment) are answered with a toast, and the card is edited in place to
its outcome once, whichever answer won. A German member's channels probe found
"Diese Anfrage wartet nicht mehr auf eine Antwort." posted after the model's answer,
and, in the race with the web, two editMessageReplyMarkup calls and two extra lines."""

from __future__ import annotations

import asyncio
from typing import Any

from skald_host.testing import Reply, ToolCall
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running

GONE = "Diese Anfrage wartet nicht mehr auf eine Antwort."


async def german_card(setup: Setup) -> tuple[Any, int, list[dict[str, Any]]]:
    """A German member, paired, whose turn waits for an approval: the member's client,
    the card's message id and its buttons."""
    await running(setup)
    alice = await paired_member(setup)
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "Milch"})]), Reply("Notiert.")])
    setup.api.send(ALICE_CHAT, "Merk dir Milch.", language_code="de")
    card = (await setup.api.wait_for(
        lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup") and c.result], what="the approval card"
    ))[0]
    return alice, card.result["message_id"], card.params["reply_markup"]["inline_keyboard"][0]


def card_edits(setup: Setup, message_id: int) -> list[Any]:
    return [c for c in setup.api.to_chat(ALICE_CHAT) if c.method.startswith("edit") and c.params.get("message_id") == message_id]


async def test_a_double_tap_on_a_card_is_answered_with_a_toast_not_a_line_after_the_answer(setup: Setup):
    _, message_id, buttons = await german_card(setup)
    setup.api.press(ALICE_CHAT, message_id, buttons[0]["callback_data"])  # Erlauben
    await asyncio.sleep(0.3)
    setup.api.press(ALICE_CHAT, message_id, buttons[1]["callback_data"])  # Ablehnen, 0.3 s later

    await setup.api.wait_for(lambda: "Notiert." in setup.api.texts(ALICE_CHAT), what="the answer after the approval")
    answers = await setup.api.wait_for(lambda: len(setup.api.of("answerCallbackQuery")) == 2 and setup.api.of("answerCallbackQuery"))
    assert [a.params.get("text") for a in answers] == [None, GONE]
    assert answers[1].params.get("show_alert") is False and all(a.status == 200 for a in answers)
    await setup.api.wait_for(lambda: setup.api.messages[message_id]["text"].endswith("\n\nErlaubt."), what="the card's outcome")
    await asyncio.sleep(0.5)  # anything late would be sent by now
    assert setup.probe.notes == ["Milch"]
    assert not any(GONE in text for text in setup.api.texts(ALICE_CHAT)), setup.api.texts(ALICE_CHAT)
    assert [c.method for c in card_edits(setup, message_id)] == ["editMessageText"]


async def race(setup: Setup, alice: Any, message_id: int, data: str, *, web_first: bool) -> None:
    """The card pressed on Telegram and answered on the web at the same moment: the
    press's call to the host starts, and the web's answer lands just before it
    (``web_first``) or just after it."""
    channels = setup.host.core.channels
    original = channels.resolve_approval
    pending = (await alice.get("/api/approvals")).json()["approvals"]
    assert len(pending) == 1, pending
    web: list[int] = []

    async def on_the_web() -> None:
        web.append((await alice.post(f"/api/approvals/{pending[0]['id']}", json={"decision": "deny"})).status_code)

    async def at_the_same_moment(*args: Any, **kwargs: Any) -> Any:
        if web_first:
            await on_the_web()
            return await original(*args, **kwargs)
        try:
            return await original(*args, **kwargs)
        finally:
            await on_the_web()

    channels.resolve_approval = at_the_same_moment
    try:
        setup.api.press(ALICE_CHAT, message_id, data)
        await setup.api.wait_for(lambda: web, what="the web's answer")
    finally:
        channels.resolve_approval = original
    assert web == [200 if web_first else 409]


async def test_a_card_answered_on_the_web_while_pressed_is_edited_once_with_the_webs_outcome(setup: Setup):
    alice, message_id, buttons = await german_card(setup)
    await race(setup, alice, message_id, buttons[0]["callback_data"], web_first=True)

    await setup.api.wait_for(
        lambda: setup.api.messages[message_id]["text"].endswith("\n\nAuf einem anderen Gerät abgelehnt."), what="the card's outcome"
    )
    await setup.api.wait_for(lambda: "Notiert." in setup.api.texts(ALICE_CHAT), what="the answer after the denial")
    answers = await setup.api.wait_for(lambda: setup.api.of("answerCallbackQuery"))
    assert len(answers) == 1 and answers[0].params.get("text") == GONE and answers[0].params.get("show_alert") is False
    await asyncio.sleep(0.5)
    assert setup.probe.notes == []
    assert [c.method for c in card_edits(setup, message_id)] == ["editMessageText"]
    texts = setup.api.texts(ALICE_CHAT)
    assert not any(GONE in t or t == "Auf einem anderen Gerät abgelehnt." for t in texts), texts


async def test_a_press_that_wins_over_the_web_edits_the_card_once_with_its_own_outcome(setup: Setup):
    alice, message_id, buttons = await german_card(setup)
    await race(setup, alice, message_id, buttons[0]["callback_data"], web_first=False)

    await setup.api.wait_for(lambda: setup.api.messages[message_id]["text"].endswith("\n\nErlaubt."), what="the card's outcome")
    await setup.api.wait_for(lambda: "Notiert." in setup.api.texts(ALICE_CHAT), what="the answer after the approval")
    await asyncio.sleep(0.5)
    assert setup.probe.notes == ["Milch"]
    assert [a.params.get("text") for a in setup.api.of("answerCallbackQuery")] == [None]
    assert [c.method for c in card_edits(setup, message_id)] == ["editMessageText"]
    assert setup.api.texts(ALICE_CHAT)[-1] == "Notiert."

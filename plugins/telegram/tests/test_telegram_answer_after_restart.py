"""An answer that was streaming into a Telegram message when the plugin stopped is
finished in that message once the plugin runs again, from the member's stored
conversation: whether the answer ended while the plugin was off (its events went
nowhere) or still runs when it is back, and after a restart of the server. Once, and
never as a second copy of what the message already showed."""

from __future__ import annotations

import asyncio
from typing import Any

from skald_host.testing import Reply, SkaldClient
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running

#: A slow answer: 24 words, a quarter of a second each (the probe's, shorter).
WORDS = " ".join(f"Wort{i}" for i in range(24))


async def conversation(member: SkaldClient) -> dict[str, Any]:
    listed = await member.get("/api/conversations")
    assert listed.status_code == 200, listed.text
    return listed.json()["conversations"][0]


async def turn_ended(setup: Setup, member: SkaldClient) -> dict[str, Any]:
    """Waits until the member's conversation runs no turn; its stored answer."""
    async def ended() -> Any:
        item = await conversation(member)
        if item["running"]:
            return None
        body = (await member.get(f"/api/conversations/{item['id']}")).json()
        answers = [m for m in body["messages"] if m["role"] == "assistant"]
        return answers[-1] if answers else None

    deadline = asyncio.get_running_loop().time() + 40
    while (answer := await ended()) is None:
        assert asyncio.get_running_loop().time() < deadline, "the turn did not end"
        await asyncio.sleep(0.1)
    return answer


async def streaming_message(setup: Setup, words: int = 3) -> int:
    """The Telegram message the answer streams into, once it shows a few words."""
    def begun() -> Any:
        for call in setup.api.of("sendMessage", ALICE_CHAT):
            message = setup.api.messages.get(call.result["message_id"]) if isinstance(call.result, dict) else None
            if message and str(message["text"]).startswith("Wort0") and f"Wort{words}" in str(message["text"]):
                return call.result["message_id"]
        return None

    return await setup.api.wait_for(begun, timeout=30, what="the answer to begin streaming")


def copies(setup: Setup) -> list[str]:
    """The chat's messages that hold (part of) the answer."""
    return [t for t in setup.api.shown(ALICE_CHAT) if t.startswith("Wort0")]


async def test_an_answer_that_ends_while_the_plugin_is_off_is_finished_in_its_message(setup: Setup):
    await running(setup)
    anna = await paired_member(setup, "anna")
    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    setup.model.script(MODEL, [Reply(WORDS, token_delay=0.25)])
    setup.api.send(ALICE_CHAT, "Lange Antwort bitte", language_code="de")
    message_id = await streaming_message(setup)

    await setup.enable(False)  # the admin turns Telegram off while the answer is written
    cut = setup.api.messages[message_id]["text"]
    stored = await turn_ended(setup, anna)  # ... and it ends meanwhile: its events go nowhere
    assert stored["content"] == WORDS and stored["status"] == "complete"
    assert cut != WORDS and copies(setup) == [cut]

    await setup.enable(True)
    await setup.api.wait_for(lambda: setup.api.messages[message_id]["text"] == WORDS, timeout=20, what="the message to be finished")
    await asyncio.sleep(2.5)  # room for a wrong second copy
    assert copies(setup) == [WORDS], "the answer was not finished in its own message, or came twice"
    relay = await setup.host.core.registry.run(
        lambda c: c.execute("SELECT COUNT(*) FROM plugin_kv WHERE plugin_id = 'telegram' AND key LIKE 'relay:%'").fetchone()[0]
    )
    assert relay == 0, "the finished answer's record was left behind"

    # The next turn streams into a message of its own, as before.
    setup.model.script(MODEL, [Reply("Noch etwas.")])
    setup.api.send(ALICE_CHAT, "Und?", language_code="de")
    await setup.api.wait_for(lambda: "Noch etwas." in setup.api.shown(ALICE_CHAT), what="the next answer")
    assert setup.api.messages[message_id]["text"] == WORDS


async def test_an_answer_still_written_when_the_plugin_is_back_goes_on_in_the_same_message(setup: Setup):
    await running(setup)
    anna = await paired_member(setup, "anna")
    setup.model.script(MODEL, [Reply(WORDS, token_delay=0.25)])
    setup.api.send(ALICE_CHAT, "Lange Antwort bitte")
    message_id = await streaming_message(setup)

    await setup.enable(False)
    await asyncio.sleep(1.0)
    await setup.enable(True)  # back before the answer ends
    assert (await conversation(anna))["running"], "the answer ended too soon for this test"
    await turn_ended(setup, anna)
    await setup.api.wait_for(lambda: setup.api.messages[message_id]["text"] == WORDS, timeout=20, what="the message to be finished")
    await asyncio.sleep(2.5)
    assert copies(setup) == [WORDS], "the rest of the answer came as a second message"


async def test_an_answer_cut_by_a_server_restart_is_finished_after_the_members_next_login(setup: Setup):
    await running(setup)
    await paired_member(setup, "anna")
    setup.model.script(MODEL, [Reply(WORDS, token_delay=0.25)])
    setup.api.send(ALICE_CHAT, "Lange Antwort bitte")
    message_id = await streaming_message(setup)

    settings = setup.host.settings
    await setup.harness.close()  # the server stops while the answer is written
    cut = setup.api.messages[message_id]["text"]
    assert cut != WORDS
    resumed = "Wort0 und so weiter, diesmal ganz."
    setup.model.script(MODEL, [Reply(resumed)])  # recovery asks the model again
    host = await setup.harness.start(plugins=[setup.probe], use_entry_points=True, settings=settings)
    await asyncio.sleep(1.0)
    assert setup.api.messages[message_id]["text"] == cut  # locked: nothing can be read back yet

    anna = await host.member("anna")  # logging in opens the conversation again
    await turn_ended(setup, anna)
    await setup.api.wait_for(lambda: resumed in setup.api.shown(ALICE_CHAT), timeout=30, what="the resumed answer")
    await asyncio.sleep(2.5)
    # The answer the host asked for again is shown once, in the message the cut one
    # was streaming into; nothing is left cut off.
    assert setup.api.messages[message_id]["text"] == resumed
    assert copies(setup) == [resumed]


async def test_a_card_pressed_after_a_restart_is_answered_without_a_second_card(setup: Setup):
    """The press resumes the member's chat first (the restart left it to be resumed), and
    resuming announces the waiting approval again: that made a second card, whose buttons
    stayed live. One card per approval."""
    from skald_host.testing import ToolCall

    await running(setup)
    await paired_member(setup, "anna")
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "milk"})])])
    setup.api.send(ALICE_CHAT, "Remember milk.")
    cards = lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup")]  # noqa: E731
    card = (await setup.api.wait_for(cards, what="the approval card"))[0]
    message_id = await setup.api.wait_for(lambda: card.result and card.result["message_id"])

    settings = setup.host.settings
    await setup.harness.close()
    setup.model.script(MODEL, [Reply("Noted: milk.")])
    host = await setup.harness.start(plugins=[setup.probe], use_entry_points=True, settings=settings)
    await host.member("anna")  # signed in on the web: the file opens, the chat not yet resumed
    setup.api.press(ALICE_CHAT, message_id, card.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
    await setup.api.wait_for(lambda: "Noted: milk." in setup.api.texts(ALICE_CHAT), timeout=30, what="the answer after approval")
    await asyncio.sleep(1.0)  # room for a wrong second card
    assert len(cards()) == 1, [c.params.get("text") for c in cards()]
    assert setup.probe.notes == ["milk"]

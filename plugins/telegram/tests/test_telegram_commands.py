"""The bot's commands and the rest of the channel events: /help, /new, /stop, a denied
approval, a failed turn, and a member who reads German."""

from __future__ import annotations

import asyncio

import skald_telegram
from skald_hookspecs import ChannelEvent
from skald_host.testing import Hang, Reply, ScriptedError, ToolCall
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running


async def test_help_new_and_stop(setup: Setup):
    await running(setup)
    alice = await paired_member(setup)
    setup.api.send(ALICE_CHAT, "/help")
    assert (await setup.api.wait_texts(ALICE_CHAT, 3))[2].startswith("Write to talk to your assistant.")

    setup.model.script(MODEL, [Reply("First.")])
    setup.api.send(ALICE_CHAT, "One")
    await setup.api.wait_for(lambda: "First." in setup.api.texts(ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "/new")
    await setup.api.wait_for(lambda: "Started a new conversation." in setup.api.texts(ALICE_CHAT))
    setup.model.script(MODEL, [Reply("Second.")])
    setup.api.send(ALICE_CHAT, "Two")
    await setup.api.wait_for(lambda: "Second." in setup.api.texts(ALICE_CHAT))
    conversations = (await alice.get("/api/conversations")).json()["conversations"]
    assert [c["source"] for c in conversations] == ["telegram", "telegram"]
    assert [m["content"] for m in setup.model.requests_for(MODEL)[-1].messages if m["role"] == "user"] == ["Two"]

    setup.model.script(MODEL, [Hang()])
    setup.api.send(ALICE_CHAT, "Think for a long time.")
    await setup.model.wait_for_requests(3)
    setup.api.send(ALICE_CHAT, "/stop")
    await setup.api.wait_for(lambda: "Stopped." in setup.api.texts(ALICE_CHAT), what="the stop confirmation")
    await setup.model.wait_for_disconnects(1)
    setup.api.send(ALICE_CHAT, "/stop")
    await setup.api.wait_for(lambda: "Nothing is running right now." in setup.api.texts(ALICE_CHAT))


async def streaming_raw(setup: Setup, asked: str, said: str) -> int:
    """A turn whose answer says ``said`` and then hangs, streamed into one Telegram
    message as raw text: that message's id."""
    setup.model.script(MODEL, [Hang(text=said)])
    setup.api.send(ALICE_CHAT, asked)
    first_line = said.splitlines()[0]
    streamed = await setup.api.wait_for(
        lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.result and str(c.params.get("text")).startswith(first_line)],
        what="the streamed message",
    )
    message_id = streamed[0].result["message_id"]
    await setup.api.wait_for(lambda: setup.api.messages[message_id]["text"] == said, what="the whole text, raw while it streams")
    return message_id


async def test_a_stopped_answer_is_formatted_as_a_finished_one(setup: Setup):
    """/stop: the host sends no answer, so the plugin finishes what was said so far;
    a last partial of the stopped turn opens no new message, the next turn streams."""
    await running(setup)
    alice = await paired_member(setup)
    said = "## Section 1\n\n**paragraph 1** is here"
    message_id = await streaming_raw(setup, "Write a long report.", said)
    setup.api.send(ALICE_CHAT, "/stop")
    await setup.api.wait_for(lambda: "Stopped." in setup.api.texts(ALICE_CHAT), what="the stop confirmation")
    await setup.api.wait_for(
        lambda: setup.api.messages[message_id]["text"] == "<b>Section 1</b>\n\n<b>paragraph 1</b> is here", what="the stopped answer formatted"
    )
    edit = [c for c in setup.api.of("editMessageText", ALICE_CHAT) if c.params.get("message_id") == message_id][-1]
    assert edit.params.get("parse_mode") == "HTML"

    conversation_id = (await alice.get("/api/conversations")).json()["conversations"][0]["id"]
    member_id = await skald_telegram.running.bot.pairing.member_for_chat(ALICE_CHAT)
    sends = len(setup.api.of("sendMessage", ALICE_CHAT))
    await skald_telegram.running.bot.deliver(member_id, ChannelEvent("partial", conversation_id, text=said + " and more"))
    await asyncio.sleep(1.5)
    assert len(setup.api.of("sendMessage", ALICE_CHAT)) == sends

    setup.model.script(MODEL, [Reply("**Next** " + " ".join(f"w{i}" for i in range(20)), token_delay=0.1)])
    setup.api.send(ALICE_CHAT, "Go on.")
    await setup.api.wait_for(lambda: any(t.startswith("<b>Next</b>") for t in setup.api.texts(ALICE_CHAT)), timeout=30, what="the next answer")
    assert not setup.api.of("sendMessage", ALICE_CHAT)[-1].params.get("parse_mode")  # it streamed into its message


async def test_a_turn_stopped_from_the_web_finishes_its_telegram_message(setup: Setup):
    """The member stops a Telegram conversation's turn in the browser: the host tells
    the channel (``stopped``, contract 1.9) with what the answer kept, and the message
    that streamed raw is finished as an answer is, not left half-formatted."""
    await running(setup)
    alice = await paired_member(setup)
    message_id = await streaming_raw(setup, "Make a plan.", "## Plan\n\n**first** step")

    conversation_id = (await alice.get("/api/conversations")).json()["conversations"][0]["id"]
    stopped = await alice.post(f"/api/conversations/{conversation_id}/stop")
    assert stopped.status_code == 200 and stopped.json() == {"stopped": True}, stopped.text
    await setup.api.wait_for(
        lambda: setup.api.messages[message_id]["text"] == "<b>Plan</b>\n\n<b>first</b> step", what="the stopped answer formatted"
    )
    assert not any(str(c.params.get("text")).startswith("<b>Plan") for c in setup.api.of("sendMessage", ALICE_CHAT))  # edited, not sent again


async def test_a_denied_tool_call_and_a_failed_turn(setup: Setup):
    await running(setup)
    await paired_member(setup)
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "secret"})]), Reply("I did not write it.")])
    setup.api.send(ALICE_CHAT, "Write secret.")
    cards = await setup.api.wait_for(lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup") and c.result])
    deny = cards[0].params["reply_markup"]["inline_keyboard"][0][1]
    setup.api.press(ALICE_CHAT, cards[0].result["message_id"], deny["callback_data"])
    await setup.api.wait_for(lambda: "I did not write it." in setup.api.texts(ALICE_CHAT), what="the answer after the denial")
    assert setup.probe.notes == []
    answer = setup.api.of("answerCallbackQuery")[0]
    assert answer.status == 200 and not answer.params.get("text")  # it counted: no toast
    card_id = cards[0].result["message_id"]
    await setup.api.wait_for(lambda: setup.api.messages[card_id]["text"].endswith("\n\nDenied."), what="the outcome on the card")

    setup.model.script(MODEL, [ScriptedError(400, "the model refused the request")])
    setup.api.send(ALICE_CHAT, "Break, please.")
    failed = await setup.api.wait_for(
        lambda: [t for t in setup.api.texts(ALICE_CHAT) if t.startswith("Something went wrong:")], what="the error message"
    )
    assert len(failed[0]) < 400


async def test_a_member_who_reads_german_is_answered_in_german(setup: Setup):
    await running(setup)
    alice = await paired_member(setup)
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    setup.api.send(ALICE_CHAT, "/help")
    await setup.api.wait_for(lambda: any(t.startswith("Schreib, um mit deinem Assistenten") for t in setup.api.texts(ALICE_CHAT)))
    # A stranger whose Telegram is German gets the pairing instructions in German.
    setup.api.send(6601, "hallo", language_code="de-AT")
    assert (await setup.api.wait_texts(6601, 1))[0].startswith("Hallo! Dieser Bot ist der Telegram-Zugang")


async def test_webhook_settings_the_help_calls_invalid_are_refused_or_fail_to_start_naming_the_setting(setup: Setup):
    """An http address or a secret outside A-Z a-z 0-9 _ - is refused when saved (the
    fields' patterns); what only the mode makes wrong (webhook mode without them) keeps
    the bot from starting, the card naming the setting. Telegram is never given them."""
    url = "https://skald.example/api/plugin/telegram/webhook"
    for field, value in (("webhook_url", "http://skald.example/api/plugin/telegram/webhook"), ("webhook_secret", "bad secret!")):
        refused = await setup.admin.put("/api/admin/plugins/telegram/config", json={"config": {"mode": "webhook", field: value}})
        assert refused.status_code == 400 and refused.json()["field"] == field, refused.text
        assert refused.json()["code"] == "config_pattern" and "bad secret" not in refused.text
    cases = [
        ({"webhook_url": None, "webhook_secret": None}, "webhook mode needs both a webhook URL and a webhook secret token",
         "Der Webhook-Modus braucht in den Einstellungen eine Webhook-URL und ein geheimes Webhook-Token."),
        ({"webhook_url": None, "webhook_secret": "good_secret-1"}, "webhook mode needs a webhook URL",
         "Der Webhook-Modus braucht eine Webhook-URL"),
        ({"webhook_url": url, "webhook_secret": None}, "webhook mode needs a webhook secret token",
         "Der Webhook-Modus braucht ein geheimes Webhook-Token"),
    ]
    await setup.configure(mode="webhook")
    await setup.enable()
    assert (await setup.admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    for settings, english, german in cases:
        await setup.configure(mode="webhook", **settings)  # a plugin that failed to start is started again
        status = setup.host.core.plugins.status("telegram")
        assert status.healthy is False and english in status.error, (settings, status.error)
        assert "bad secret" not in status.error
        card = (await setup.admin.get("/api/admin/plugins/telegram")).json()
        assert card["error"].startswith(german), (settings, card["error"])
    assert setup.api.of("setWebhook") == []

    await setup.configure(mode="webhook", webhook_url=url, webhook_secret="good_secret-1")
    assert setup.host.core.plugins.status("telegram").healthy, setup.host.core.plugins.status("telegram").error
    assert [c.params["url"] for c in setup.api.of("setWebhook")] == [url]


async def test_an_unreachable_bot_api_server_is_tried_again_and_the_admin_s_page_says_why(setup: Setup):
    """Not a NotReady (the host would never try again): the bot starts and keeps
    connecting in the background (test_telegram_connect_retry.py has the rest)."""
    await setup.configure(api_base_url="http://127.0.0.1:9")  # the discard port: nothing listens
    await setup.enable()
    status = setup.host.core.plugins.status("telegram")
    assert status.healthy is True, status.error
    connection = (await setup.admin.get("/api/plugin/telegram/roster")).json()["connection"]
    assert connection["state"] == "connecting" and connection["line"].startswith("Cannot reach the Bot API at http://127.0.0.1:9: ")
    assert "standin-token" not in connection["line"]


async def test_tasks_lists_the_helpers_runs_of_the_current_conversation(setup: Setup):
    """Issue 20: /tasks is the chat's task strip in text."""
    await running(setup)
    await paired_member(setup)
    setup.api.send(ALICE_CHAT, "/tasks")
    await setup.api.wait_for(lambda: "No helper is working on anything here, and nothing failed lately." in setup.api.texts(ALICE_CHAT))

    def respond(request):
        last = request.messages[-1]
        if last["content"] == "Read the whole archive.":
            return Hang(text="reading")
        if last["role"] == "tool":
            return Reply("The researcher is on it.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Read the whole archive.", "mode": "background"})])

    setup.model.responder = respond
    setup.api.send(ALICE_CHAT, "Research in the background.")
    await setup.api.wait_for(lambda: "The researcher is on it." in setup.api.texts(ALICE_CHAT))
    await setup.api.wait_for(lambda: any(r.messages[-1]["content"] == "Read the whole archive." for r in setup.model.requests_for(MODEL)))
    setup.api.send(ALICE_CHAT, "/tasks")
    listed = await setup.api.wait_for(lambda: [t for t in setup.api.texts(ALICE_CHAT) if t.startswith("Helpers' tasks")], what="the task list")
    assert listed[0].splitlines()[1] == "• Researcher: running — Read the whole archive."  # its title, as the web's strip


async def test_tasks_names_a_helper_by_its_title_in_the_members_language(setup: Setup):
    """A German member's /tasks said "researcher" (the helper's id) where the web's task
    strip says "Rechercheur": the host gives channels the title (contract 1.15)."""
    await running(setup)
    anna = await paired_member(setup, "anna")
    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200

    def respond(request):
        last = request.messages[-1]
        if last["content"] == "Lies das ganze Archiv.":
            return Hang(text="liest")
        if last["role"] == "tool":
            return Reply("Der Rechercheur ist dran.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Lies das ganze Archiv.", "mode": "background"})])

    setup.model.responder = respond
    setup.api.send(ALICE_CHAT, "Recherchiere im Hintergrund.", language_code="de")
    await setup.api.wait_for(lambda: "Der Rechercheur ist dran." in setup.api.texts(ALICE_CHAT))
    await setup.api.wait_for(lambda: any(r.messages[-1]["content"] == "Lies das ganze Archiv." for r in setup.model.requests_for(MODEL)))
    setup.api.send(ALICE_CHAT, "/tasks", language_code="de")
    header = setup.host.core.strings.translate("telegram.tasks_header", "de")
    listed = await setup.api.wait_for(lambda: [t for t in setup.api.texts(ALICE_CHAT) if t.startswith(header)], what="the task list")
    assert listed[0].splitlines()[1] == "• Rechercheur: läuft — Lies das ganze Archiv."

"""The plugin against a real host, end to end: the admin configures and enables it,
an unpaired chat gets a code, the member pairs on the plugin's page, chats, approves a
tool call with an inline button, sends a photo, loses the grant and is refused once,
and disabling the plugin stops the polling.

Telegram itself is the one stand-in (``telegram_standin.py``); the host, its databases,
the model client and python-telegram-bot are real."""

from __future__ import annotations

import asyncio
import json
import logging

from skald_host.core.storage.sealing import kv_cell
from skald_host.testing import Reply, ToolCall
from telegram_standin import TOKEN
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, pairing_code, running

async def test_pair_on_the_page_then_chat_and_see_the_scripted_answer(setup):
    await running(setup)
    alice = await setup.host.member("alice", display_name="Alice")
    unlinked = (await alice.get("/api/plugin/telegram/status")).json()
    assert unlinked["linked"] is False and "@skald_test_bot" in unlinked["line"]

    code = await pairing_code(setup, ALICE_CHAT, "/start")
    saved = await alice.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["config"] == {"code": None, "unlink": None, "linked": True, "chat_id": ALICE_CHAT, "chat_name": "Alice"}
    status = (await alice.get("/api/plugin/telegram/status")).json()
    assert (status["linked"], status["chat_name"]) == (True, "Alice") and "Alice" in status["line"]
    assert "linked to the Skald account Alice (alice)" in (await setup.api.wait_texts(ALICE_CHAT, 2))[1]

    # Only a hash of the code was stored, and it cannot be used twice.
    core = setup.host.core
    stored = [(key, core.opened("plugin_kv", "value", kv_cell("telegram", key), value)) for key, value in await core.registry.run(
        lambda c: c.execute("SELECT key, value FROM plugin_kv WHERE plugin_id = 'telegram'").fetchall()
    )]
    assert any(key.startswith("code:") for key, _ in stored)
    assert code not in json.dumps(stored) and code.replace("-", "") not in json.dumps(stored)

    setup.model.script(MODEL, [Reply("Hello from Skald, Alice.")])
    setup.api.send(ALICE_CHAT, "How are you today?")
    texts = await setup.api.wait_texts(ALICE_CHAT, 3)
    assert texts[2] == "Hello from Skald, Alice."
    assert setup.api.of("sendChatAction", ALICE_CHAT), "the typing indicator was not shown"
    assert setup.model.requests_for(MODEL)[-1].last_user_text == "How are you today?"

    conversations = (await alice.get("/api/conversations")).json()["conversations"]
    assert [c["source"] for c in conversations] == ["telegram"]

    # The admin's roster lists the link; a member may not read it.
    roster = (await setup.admin.get("/api/plugin/telegram/roster")).json()["links"]
    assert [(r["member_id"], r["chat_id"], r["chat_name"]) for r in roster] == [(alice.member["id"], ALICE_CHAT, "Alice")]
    assert (await alice.get("/api/plugin/telegram/roster")).status_code == 403


async def test_a_chat_whose_code_someone_else_redeemed_is_told_whose_account_and_unlinks_itself(setup):
    """Someone talked into handing over their pairing code: the chat is told the account
    it went to, by name, and /unlink from the chat takes it back (nothing more it writes
    reaches that account)."""
    await running(setup)
    bob = await setup.host.member("bob", display_name="Robert")
    code = await pairing_code(setup, ALICE_CHAT, "/start")
    saved = await bob.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})
    assert saved.status_code == 200, saved.text
    told = (await setup.api.wait_texts(ALICE_CHAT, 2))[1]
    assert "Robert (bob)" in told and "/unlink" in told, told

    setup.api.send(ALICE_CHAT, "/unlink")
    assert "no longer linked" in (await setup.api.wait_texts(ALICE_CHAT, 3))[2]
    status = (await bob.get("/api/plugin/telegram/status")).json()
    assert status["linked"] is False
    setup.api.send(ALICE_CHAT, "my secret plans")
    assert "code" in (await setup.api.wait_texts(ALICE_CHAT, 4))[3].lower()  # offered pairing again, as a stranger
    assert (await bob.get("/api/conversations")).json()["conversations"] == []


async def test_a_tool_call_is_approved_with_the_inline_button(setup):
    await running(setup)
    await paired_member(setup)
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "milk"})]), Reply("Noted: milk.")])
    setup.api.send(ALICE_CHAT, "Remember milk.")

    card = await setup.api.wait_for(lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup")], what="the approval card")
    buttons = card[0].params["reply_markup"]["inline_keyboard"][0]
    assert [b["text"] for b in buttons] == ["Approve", "Deny"]
    assert "write_note" in card[0].params["text"] and "milk" in card[0].params["text"]
    assert setup.probe.notes == []

    message_id = await setup.api.wait_for(lambda: card[0].result and card[0].result["message_id"])
    setup.api.press(ALICE_CHAT, message_id, buttons[0]["callback_data"])

    texts = await setup.api.wait_for(lambda: "Noted: milk." in setup.api.texts(ALICE_CHAT) and setup.api.texts(ALICE_CHAT), what="the answer after approval")
    assert setup.probe.notes == ["milk"]
    # The card itself says the outcome, in place of its buttons: no line of its own.
    edits = await setup.api.wait_for(
        lambda: [e for e in setup.api.of("editMessageText", ALICE_CHAT) if e.params.get("message_id") == message_id], what="the card edited"
    )
    assert len(edits) == 1 and not edits[0].params.get("reply_markup")
    assert setup.api.messages[message_id]["text"].endswith("\n\nApproved."), setup.api.messages[message_id]["text"]
    assert setup.api.of("editMessageReplyMarkup", ALICE_CHAT) == []
    answers = setup.api.of("answerCallbackQuery")
    assert len(answers) == 1 and answers[0].status == 200 and answers[0].params.get("text") is None

    # Pressing the same button again changes nothing, and says so as a toast.
    setup.api.press(ALICE_CHAT, message_id, buttons[0]["callback_data"])
    await setup.api.wait_for(lambda: len(setup.api.of("answerCallbackQuery")) == 2)
    toast = setup.api.of("answerCallbackQuery")[1]
    assert toast.params.get("text") == "This request is no longer waiting for an answer." and toast.params.get("show_alert") is False
    assert setup.probe.notes == ["milk"]
    assert texts.index("Noted: milk.") > 0
    assert not any("no longer waiting" in text for text in setup.api.texts(ALICE_CHAT))


async def test_a_photo_goes_through_the_upload_seam_with_its_caption(setup):
    await running(setup)
    alice = await paired_member(setup)
    picture = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64  # the magic bytes the host sniffs
    setup.api.add_file("photo-big", picture)
    setup.model.script(MODEL, [Reply("A fine picture.")])
    setup.api.send(
        ALICE_CHAT,
        caption="What is this?",
        photo=[{"file_id": "photo-small", "width": 90, "height": 90}, {"file_id": "photo-big", "width": 800, "height": 600}],
    )
    await setup.api.wait_for(lambda: "A fine picture." in setup.api.texts(ALICE_CHAT), what="the answer to the photo")
    assert [c.params["file_id"] for c in setup.api.of("getFile")] == ["photo-big"]  # the largest size only

    home = setup.host.core.files.home(alice.member["id"])
    saved = sorted((home / "uploads").rglob("photo-*.jpg"))
    assert len(saved) == 1 and saved[0].read_bytes() == picture
    agent_path = saved[0].relative_to(home).as_posix()
    request = setup.model.requests_for(MODEL)[-1]
    assert "What is this?" in json.dumps(request.messages) and agent_path in json.dumps(request.messages)
    served = await alice.get("/api/file", params={"path": agent_path})
    assert served.status_code == 200 and served.content == picture


async def test_a_revoked_member_is_refused_once_and_nothing_reaches_the_model(setup):
    await running(setup)
    alice = await paired_member(setup)
    member_id = alice.member["id"]
    revoked = await setup.admin.put(f"/api/admin/members/{member_id}/plugins", json={"plugins": []})
    assert revoked.status_code == 200, revoked.text

    before = len(setup.api.texts(ALICE_CHAT))
    for text in ("Are you there?", "Hello?", "/new"):
        setup.api.send(ALICE_CHAT, text)
    await setup.api.wait_for(lambda: not setup.api.updates, what="the three messages to be fetched")
    await setup.api.wait_texts(ALICE_CHAT, before + 1)
    await asyncio.sleep(1.5)  # room for a wrong second refusal (a second after the first)
    texts = setup.api.texts(ALICE_CHAT)[before:]
    assert texts == ["You can no longer use the assistant through Telegram. Ask your administrator if you think this is a mistake."]
    assert setup.model.requests_for(MODEL) == []

    # Granted again: the member is answered, and a later revocation is announced once more.
    await setup.admin.put(f"/api/admin/members/{member_id}/plugins", json={"plugins": ["telegram"]})
    setup.model.script(MODEL, [Reply("Back again.")])
    setup.api.send(ALICE_CHAT, "And now?")
    await setup.api.wait_for(lambda: "Back again." in setup.api.texts(ALICE_CHAT), what="the answer after the new grant")
    await setup.admin.put(f"/api/admin/members/{member_id}/plugins", json={"plugins": []})
    setup.api.send(ALICE_CHAT, "Still there?")
    await setup.api.wait_for(lambda: setup.api.texts(ALICE_CHAT).count(texts[0]) == 2, what="a second refusal")


async def test_disabling_stops_polling_and_enabling_starts_it_again(setup):
    await running(setup)
    await setup.api.wait_for(lambda: len(setup.api.of("getUpdates")) >= 2, what="polling")
    await setup.enable(False)
    stopped_at = len(setup.api.of("getUpdates"))
    await asyncio.sleep(2.5)  # longer than the configured 1 s long poll
    assert len(setup.api.of("getUpdates")) == stopped_at
    assert setup.host.core.plugins.status("telegram").started is False

    await setup.enable(True)
    await setup.api.wait_for(lambda: len(setup.api.of("getUpdates")) > stopped_at, what="polling to resume")
    # The offset was kept: an update fetched before is not fetched again.
    offsets = [c.params.get("offset") for c in setup.api.of("getUpdates")]
    assert offsets == sorted(offsets)


async def test_a_bad_token_is_a_failed_health_with_the_reason(setup):
    await setup.configure(bot_token="4242424242:wrong-token")
    await setup.enable()
    detail = (await setup.admin.get("/api/admin/plugins/telegram")).json()
    status = setup.host.core.plugins.status("telegram")
    assert status.healthy is False
    assert "Telegram refused the bot token" in status.error and "wrong-token" not in status.error
    assert "Telegram refused the bot token" in json.dumps(detail) and "wrong-token" not in json.dumps(detail)
    assert setup.api.of("getUpdates") == []


async def test_why_it_is_not_running_is_said_in_the_admin_s_language(setup):
    """Enabled without a token, the plugin waits (amber: a state to resolve, not a
    crash); its card, its page and the server's status say why in the reader's language
    (NotReady's key), the log in English."""
    await setup.enable()
    status = setup.host.core.plugins.status("telegram")
    assert status.healthy is False and status.waiting and "no bot token is configured" in status.error
    german = "Es ist kein Bot-Token eingetragen"
    assert (await setup.admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    listed = {p["id"]: p for p in (await setup.admin.get("/api/admin/plugins")).json()["plugins"]}
    assert listed["telegram"]["error"].startswith(german)
    assert (await setup.admin.get("/api/admin/plugins/telegram")).json()["error"].startswith(german)
    warnings = (await setup.admin.get("/api/admin/status")).json()["warnings"]
    assert listed["telegram"]["waiting"] is True
    assert [w["values"]["reason"] for w in warnings if w["id"] == "plugin_waiting"] == [listed["telegram"]["error"]]
    assert not [w for w in warnings if w["id"] == "plugin_failed"]
    assert (await setup.admin.put("/api/me/locale", json={"locale": "en"})).status_code == 200
    listed = {p["id"]: p for p in (await setup.admin.get("/api/admin/plugins")).json()["plugins"]}
    assert listed["telegram"]["error"] == "No bot token is set: enter the one @BotFather gave you in this plugin's settings."
    # Configured, it runs, and the reason is gone.
    await setup.configure(bot_token="4242424242:wrong-token")
    assert "Telegram refused the bot token" in setup.host.core.plugins.status("telegram").error


async def test_a_flood_wait_delays_the_reply_but_loses_nothing(setup):
    await running(setup)
    await paired_member(setup)
    setup.api.flood["sendMessage"] = [1]
    setup.model.script(MODEL, [Reply("Worth the wait.")])
    setup.api.send(ALICE_CHAT, "Quick question.")

    def attempts():
        return [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("text") == "Worth the wait."]

    await setup.api.wait_for(lambda: any(c.result for c in attempts()), what="the reply after the flood wait")
    attempts = attempts()
    assert len(attempts) == 2 and attempts[0].result is None and attempts[1].result is not None
    assert attempts[1].at - attempts[0].at >= 0.9  # retry_after was honoured


async def test_a_10000_character_answer_arrives_as_three_messages(setup):
    await running(setup)
    await paired_member(setup)
    answer = "\n".join(f"Line {i:04d} " + "x" * 89 for i in range(100))[:10_000]
    setup.model.script(MODEL, [Reply(answer)])
    before = len(setup.api.texts(ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "Tell me everything.")
    texts = (await setup.api.wait_texts(ALICE_CHAT, before + 3))[before:]
    await asyncio.sleep(0.3)
    assert len(setup.api.texts(ALICE_CHAT)) == before + 3
    assert all(len(t) <= 4096 for t in texts) and all(not c.params.get("parse_mode") for c in setup.api.of("sendMessage"))
    assert "\n".join(texts) == answer


async def test_a_locked_member_is_told_to_log_in_and_answered_after_unlocking(setup, caplog):
    caplog.set_level(logging.DEBUG)  # the most a host could log: still no text, no token
    await running(setup)
    alice = await paired_member(setup)
    settings = setup.host.settings
    await setup.harness.close()  # a restart: nobody is unlocked afterwards
    host = await setup.harness.start(plugins=[setup.probe], use_entry_points=True, settings=settings)
    before = len(setup.api.texts(ALICE_CHAT))
    canary = "canary-7d1f3 my locked secret"
    setup.api.send(ALICE_CHAT, canary)
    texts = await setup.api.wait_texts(ALICE_CHAT, before + 1)
    assert texts[before].startswith("Please log in to Skald on the web first")
    for path in settings.database_dir.rglob("system.db*"):
        assert canary.encode() not in path.read_bytes(), path

    # A document sent while locked waits at Telegram, its reference sealed with the words
    # (fetched after the unlock: test_telegram_locked_attachments.py).
    setup.api.add_file("doc-1", b"%PDF-1.4 locked document")
    setup.api.send(ALICE_CHAT, caption="and this file", document={"file_id": "doc-1", "file_name": "notes.pdf"})
    await setup.api.wait_texts(ALICE_CHAT, before + 2)

    setup.model.script(MODEL, [Reply("Now I can answer."), Reply("And the file too.")])
    await host.member("alice")  # logging in unlocks the file and opens the sealed inbox
    await setup.api.wait_for(lambda: "And the file too." in setup.api.texts(ALICE_CHAT), what="both answers after unlock")
    requests = setup.model.requests_for(MODEL)
    assert [r.last_user_text for r in requests[-2:]][0] == canary
    assert "notes.pdf" in json.dumps(requests[-1].messages)
    assert setup.api.texts(ALICE_CHAT).index("Now I can answer.") < setup.api.texts(ALICE_CHAT).index("And the file too.")
    assert caplog.records and canary not in caplog.text and "and this file" not in caplog.text
    assert TOKEN not in caplog.text and "/bot<bot-token>/getUpdates" in caplog.text  # httpx logged, masked
    assert alice.member["id"] == (await host.core.users.find("alice")).id


async def test_background_notes_reach_telegram_when_it_is_the_home_source(setup):
    await running(setup)
    alice = await paired_member(setup)
    home = await alice.put("/api/me/home-source", json={"home_source": "telegram"})
    assert home.status_code == 200, home.text
    rule = await setup.admin.post("/api/admin/approval-rules", json={"tool_pattern": "ring", "action": "allow", "priority": 50})
    assert rule.status_code == 201, rule.text
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("ring", {"text": "Tea is ready."})]), Reply("Done on the web.")])
    created = await alice.post("/api/conversations", json={"title": "web"})
    sent = await alice.post(f"/api/conversations/{created.json()['id']}/messages", json={"text": "Ring me."})
    assert sent.status_code == 202, sent.text
    await setup.api.wait_for(lambda: "Tea is ready." in setup.api.texts(ALICE_CHAT), what="the note on Telegram")
    await asyncio.sleep(0.3)
    assert "Done on the web." not in setup.api.texts(ALICE_CHAT)  # a web conversation's answer stays there


async def test_markdown_answers_are_sent_as_telegram_html_and_refused_markup_as_plain_text(setup):
    await running(setup)
    await paired_member(setup)
    tangled = "**bold ~~both** strike~~"  # crossed markers: once HTML Telegram refused (issue 25)
    setup.model.script(MODEL, [Reply("**Done**: `x < y`"), Reply(tangled), Reply("**Refused** markup")])
    setup.api.send(ALICE_CHAT, "Format, please.")
    await setup.api.wait_for(lambda: "<b>Done</b>: <code>x &lt; y</code>" in setup.api.texts(ALICE_CHAT), what="the HTML answer")
    html = [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("parse_mode") == "HTML"]
    assert len(html) == 1 and html[0].result is not None

    setup.api.send(ALICE_CHAT, "Again.")
    await setup.api.wait_for(lambda: "<b>bold ~~both</b> strike~~" in setup.api.texts(ALICE_CHAT), what="the well-nested HTML")
    attempts = [c for c in setup.api.of("sendMessage", ALICE_CHAT) if "strike" in str(c.params.get("text"))]
    assert [(c.params.get("parse_mode"), c.status) for c in attempts] == [("HTML", 200)]

    setup.api.refuse_entities = 1  # Telegram refuses the markup: the words still arrive, plain
    setup.api.send(ALICE_CHAT, "Once more.")
    await setup.api.wait_for(lambda: "**Refused** markup" in setup.api.texts(ALICE_CHAT), what="the plain-text fallback")
    attempts = [c for c in setup.api.of("sendMessage", ALICE_CHAT) if "Refused" in str(c.params.get("text"))]
    assert [(c.params.get("parse_mode"), c.status) for c in attempts] == [("HTML", 400), (None, 200)]


async def test_a_tools_question_is_answered_with_inline_buttons_and_a_form_is_left_to_the_app(setup):
    """TurnApi.ask in a Telegram conversation: a choice becomes one button per option
    (plus Decline); the pressed option reaches the tool, and the option list is kept
    sealed, never in clear in the registry. A question that needs typing offers only
    Decline and says to answer in the app; answered there, its buttons go away."""
    await running(setup)
    alice = await paired_member(setup)
    rule = await setup.admin.post("/api/admin/approval-rules", json={"tool_pattern": "ask_member", "action": "allow", "priority": 50})
    assert rule.status_code == 201, rule.text
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("ask_member", {})]), Reply("Chosen.")])
    setup.api.send(ALICE_CHAT, "Pick a colour.")
    card = await setup.api.wait_for(lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup")], what="the question card")
    buttons = [row[0] for row in card[0].params["reply_markup"]["inline_keyboard"]]
    assert [b["text"] for b in buttons] == ["red", "green", "Decline"] and card[0].params["text"] == "Which one?"

    def registry_values(conn) -> str:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return repr([conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])

    assert "green" not in await setup.host.core.registry.run(registry_values)
    message_id = await setup.api.wait_for(lambda: card[0].result and card[0].result["message_id"])
    setup.api.press(ALICE_CHAT, message_id, buttons[1]["callback_data"])
    await setup.api.wait_for(lambda: "Chosen." in setup.api.texts(ALICE_CHAT), what="the answer after the choice")
    conversation = (await alice.get("/api/conversations")).json()["conversations"][0]
    messages = (await alice.get(f"/api/conversations/{conversation['id']}")).json()["messages"]
    results = [c.get("result") for m in messages for c in (m.get("tool_calls") or [])]
    assert "accept {'color': 'green'}" in results
    await setup.api.wait_for(lambda: "Answered." in setup.api.texts(ALICE_CHAT), what="the outcome in the chat")

    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("ask_member", {"text": "form"})]), Reply("Typed.")])
    setup.api.send(ALICE_CHAT, "Ask me for a city.")
    cards = await setup.api.wait_for(lambda: len([c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup")]) == 2 and [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup")], what="the second card")
    second = cards[1]
    assert [row[0]["text"] for row in second.params["reply_markup"]["inline_keyboard"]] == ["Decline"]
    assert "Answer this in the app" in second.params["text"]
    message_id = await setup.api.wait_for(lambda: second.result and second.result["message_id"])
    questions = (await alice.get(f"/api/conversations/{conversation['id']}")).json()["questions"]
    response = await alice.post(f"/api/questions/{questions[0]['question_id']}", json={"action": "accept", "content": {"city": "Oslo"}})
    assert response.status_code == 200, response.text
    await setup.api.wait_for(lambda: "Typed." in setup.api.texts(ALICE_CHAT), what="the answer after the app's form")
    edits = await setup.api.wait_for(lambda: [e for e in setup.api.of("editMessageReplyMarkup", ALICE_CHAT) if e.params.get("message_id") == message_id], what="the card's buttons to go")
    assert not edits[0].params.get("reply_markup")


async def test_a_code_block_over_three_messages_keeps_its_block_and_the_prose_after_it_is_formatted(setup: Setup):
    await running(setup)
    await paired_member(setup)
    code = "\n".join(f"    value_{i} = compute({i})  # step {i} of the long listing" for i in range(170))
    setup.model.script(MODEL, [Reply(f"Here is the script:\n\n```python\n{code}\n```\n\nAnd after it, **bold** prose.")])
    before = len(setup.api.texts(ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "The whole script, please.")
    texts = (await setup.api.wait_texts(ALICE_CHAT, before + 3, timeout=30))[before:]
    await asyncio.sleep(0.3)
    assert len(setup.api.texts(ALICE_CHAT)) == before + 3
    block = '<pre><code class="language-python">'  # the fence's language, in every piece
    assert texts[0].startswith(f"Here is the script:\n\n{block}") and texts[0].endswith("</code></pre>")
    assert texts[1].startswith(f"{block}    value_") and texts[1].endswith("</code></pre>")
    assert texts[2].startswith(f"{block}    value_") and texts[2].endswith("</code></pre>\n\nAnd after it, <b>bold</b> prose.")
    assert "```" not in "".join(texts)
    sends = [c for c in setup.api.of("sendMessage", ALICE_CHAT)][before:]
    assert [(c.params.get("parse_mode"), c.status) for c in sends] == [("HTML", 200)] * 3


async def test_an_empty_answer_is_said_not_left_silent_in_the_members_language(setup: Setup):
    await running(setup)
    anna = await paired_member(setup, "anna")
    setup.model.script(MODEL, [Reply("")])
    setup.api.send(ALICE_CHAT, "Hi?")
    await setup.api.wait_for(lambda: "The model gave an empty answer. Ask again, or rephrase your message." in setup.api.shown(ALICE_CHAT))

    assert (await anna.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    setup.model.script(MODEL, [Reply("   \n")])
    setup.api.send(ALICE_CHAT, "Hallo?", language_code="de")
    german = setup.host.core.strings.translate("telegram.empty_answer", "de")
    assert german.startswith("Das Modell hat eine leere Antwort gegeben.")
    await setup.api.wait_for(lambda: german in setup.api.shown(ALICE_CHAT), what="the empty answer in German")

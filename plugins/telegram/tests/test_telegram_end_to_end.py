"""The plugin against a real host, end to end: the admin configures and enables it,
an unpaired chat gets a code, the member pairs on the plugin's page, chats, approves a
tool call with an inline button, sends a photo, loses the grant and is refused once,
and disabling the plugin stops the polling.

Telegram itself is the one stand-in (``telegram_standin.py``); the host, its databases,
the model client and python-telegram-bot are real."""

from __future__ import annotations

import json
import re

from conftest import PROBE, Setup
from skald_host.testing import Reply, ToolCall

CODE = re.compile(r"\b([A-Z2-7]{5}-[A-Z2-7]{5})\b")
ALICE_CHAT = 5550001


async def pairing_code(setup: Setup, chat_id: int, text: str = "hello?", **kwargs) -> str:
    before = len(setup.api.texts(chat_id))
    setup.api.send(chat_id, text, **kwargs)
    texts = await setup.api.wait_texts(chat_id, before + 1)
    match = CODE.search(texts[before])
    assert match, texts[before]
    return match.group(1)


async def paired_member(setup: Setup, username: str = "alice", chat_id: int = ALICE_CHAT):
    """A logged-in member whose Telegram chat is linked through the plugin's page."""
    member = await setup.host.member(username, display_name=username.title())
    code = await pairing_code(setup, chat_id)
    saved = await member.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["config"]["linked"] is True and saved.json()["config"]["chat_id"] == chat_id
    await setup.api.wait_texts(chat_id, 2)  # the "linked" greeting
    return member


async def running(setup: Setup) -> Setup:
    await setup.configure()
    await setup.enable()
    status = setup.host.core.plugins.status("telegram")
    assert (status.state, status.healthy, status.distribution) == ("loaded", True, "skald-telegram"), status.error
    return setup


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
    assert "linked to your Skald account" in (await setup.api.wait_texts(ALICE_CHAT, 2))[1]

    # Only a hash of the code was stored, and it cannot be used twice.
    stored = await setup.host.core.registry.run(
        lambda c: [tuple(r) for r in c.execute("SELECT key, value FROM plugin_kv WHERE plugin_id = 'telegram'").fetchall()]
    )
    assert any(key.startswith("code:") for key, _ in stored)
    assert code not in json.dumps(stored) and code.replace("-", "") not in json.dumps(stored)

    setup.model.script("model-telegram", [Reply("Hello from Skald, Alice.")])
    setup.api.send(ALICE_CHAT, "How are you today?")
    texts = await setup.api.wait_texts(ALICE_CHAT, 3)
    assert texts[2] == "Hello from Skald, Alice."
    assert setup.api.of("sendChatAction", ALICE_CHAT), "the typing indicator was not shown"
    assert setup.model.requests_for("model-telegram")[-1].last_user_text == "How are you today?"

    conversations = (await alice.get("/api/conversations")).json()["conversations"]
    assert [c["source"] for c in conversations] == ["telegram"]

    # The admin's roster lists the link; a member may not read it.
    roster = (await setup.admin.get("/api/plugin/telegram/roster")).json()["links"]
    assert [(r["member_id"], r["chat_id"], r["chat_name"]) for r in roster] == [(alice.member["id"], ALICE_CHAT, "Alice")]
    assert (await alice.get("/api/plugin/telegram/roster")).status_code == 403


async def test_a_tool_call_is_approved_with_the_inline_button(setup):
    await running(setup)
    await paired_member(setup)
    setup.model.script("model-telegram", [Reply(tool_calls=[ToolCall("write_note", {"text": "milk"})]), Reply("Noted: milk.")])
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
    edits = setup.api.of("editMessageReplyMarkup", ALICE_CHAT)
    assert [e.params.get("message_id") for e in edits] == [message_id] and not edits[0].params.get("reply_markup")
    answers = setup.api.of("answerCallbackQuery")
    assert len(answers) == 1 and answers[0].params.get("text") == "Approved."

    # Pressing the same button again changes nothing.
    setup.api.press(ALICE_CHAT, message_id, buttons[0]["callback_data"])
    await setup.api.wait_for(lambda: len(setup.api.of("answerCallbackQuery")) == 2)
    assert setup.api.of("answerCallbackQuery")[1].params.get("text") == "This request is no longer waiting for an answer."
    assert setup.probe.notes == ["milk"]
    assert texts.index("Noted: milk.") > 0

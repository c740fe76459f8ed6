"""Issue 25 against the stand-in that enforces Telegram's limits: a reply survives any
number of flood waits and a restart of the server, no call reaches a chat before its
``retry_after`` has passed, a button press is answered at once while its chat waits out
a flood, other chats are unaffected, answers stream into one message, and a member who
logged out is told so.

Timing is judged from what the stand-in recorded (when each call arrived, when each
flood wait ends), not from how fast this machine is; the few wall-clock bounds are
generous."""

from __future__ import annotations

import asyncio
import json

from skald_host.core.storage.sealing import kv_cell
from skald_host.testing import Reply, ToolCall
from telegram_standin import CHAT_INTERVAL, MESSAGE_METHODS
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running

BOB_CHAT = 5550002


def floods(setup: Setup, chat_id: int) -> list:
    return [c for c in setup.api.to_chat(chat_id) if c.status == 429]


def assert_paced(setup: Setup, chat_id: int) -> None:
    """Every message call the chat accepted came a second or more after the one before."""
    accepted = [c.at for c in setup.api.to_chat(chat_id) if c.method in MESSAGE_METHODS and c.status == 200]
    gaps = [b - a for a, b in zip(accepted, accepted[1:])]
    assert all(gap >= CHAT_INTERVAL for gap in gaps), gaps


async def test_a_reply_survives_ten_flood_waits_and_a_restart_in_between(setup: Setup):
    await running(setup)
    await paired_member(setup)
    answer = "Worth every wait: canary-5f1e reply text."
    setup.model.script(MODEL, [Reply(answer)])
    setup.api.flood_chat[ALICE_CHAT] = [1] * 10  # ten 429s in a row for whatever the chat is sent next
    setup.api.send(ALICE_CHAT, "Quick question.")
    await setup.api.wait_for(lambda: len(floods(setup, ALICE_CHAT)) >= 4, timeout=30, what="four flood waits")

    # The reply waits in the plugin's store, sealed to the member: not in clear in system.db.
    core = setup.host.core
    rows = await core.registry.run(
        lambda c: c.execute("SELECT key, value FROM plugin_kv WHERE plugin_id = 'telegram' AND key LIKE 'outbox:%'").fetchall()
    )
    stored = [core.opened("plugin_kv", "value", kv_cell("telegram", key), value) for key, value in rows]  # the instance's seal
    assert any("sealed1:" in value for value in stored), stored  # inside it, the member's
    assert all("canary-5f1e" not in value for value in stored)

    settings = setup.host.settings
    await setup.harness.close()  # a restart in the middle of the flood waits
    for path in settings.database_dir.rglob("system.db*"):
        assert b"canary-5f1e" not in path.read_bytes(), path
    host = await setup.harness.start(plugins=[setup.probe], use_entry_points=True, settings=settings)
    # Locked since the restart: the waiting reply cannot be opened, yet the chat is not
    # stuck behind it: a new message is told to log in first.
    setup.model.script(MODEL, [Reply("And hello again.")])
    setup.api.send(ALICE_CHAT, "Hello?")
    await setup.api.wait_for(
        lambda: any(t.startswith("Please log in to Skald on the web first") and "restarted" in t for t in setup.api.shown(ALICE_CHAT)),
        timeout=30, what="the log-in notice",
    )
    assert answer not in setup.api.shown(ALICE_CHAT)
    await host.member("alice")  # the sealed reply opens once the member is unlocked again
    await setup.api.wait_for(lambda: "And hello again." in setup.api.shown(ALICE_CHAT), timeout=60, what="the sealed message's answer")

    await setup.api.wait_for(lambda: answer in setup.api.shown(ALICE_CHAT), timeout=60, what="the reply after ten flood waits")
    await asyncio.sleep(1.5)  # room for a wrong second copy
    assert setup.api.shown(ALICE_CHAT).count(answer) == 1, "lost or duplicated"
    assert [c.status for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("text") == answer].count(200) == 1
    assert setup.api.flood_chat[ALICE_CHAT] == [] and len(floods(setup, ALICE_CHAT)) >= 10
    assert setup.api.early == [], "a call reached the chat before its retry_after had passed"
    assert_paced(setup, ALICE_CHAT)
    leftover = await host.core.registry.run(
        lambda c: c.execute("SELECT value FROM plugin_kv WHERE plugin_id = 'telegram' AND key = ?", (f"outbox:{ALICE_CHAT}",)).fetchone()
    )
    assert leftover is None or json.loads(host.core.opened("plugin_kv", "value", kv_cell("telegram", f"outbox:{ALICE_CHAT}"), leftover[0])) is None


async def test_a_button_is_answered_at_once_during_its_chats_flood_wait_and_other_chats_go_on(setup: Setup):
    await running(setup)
    await paired_member(setup, "alice", ALICE_CHAT)
    await paired_member(setup, "bob", BOB_CHAT)
    setup.model.script(
        MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "milk"})]), Reply("Noted: milk."), Reply("Hello Bob.")]
    )
    setup.api.send(ALICE_CHAT, "Remember milk.")
    cards = await setup.api.wait_for(
        lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup") and c.result], what="the card"
    )
    approve = cards[0].params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]

    # Alice's chat gets a 20 s flood wait on the next thing it is sent (the /help text).
    setup.api.flood_chat[ALICE_CHAT] = [20]
    setup.api.send(ALICE_CHAT, "/help")
    await setup.api.wait_for(lambda: floods(setup, ALICE_CHAT), what="the 20 s flood wait")
    flood_ends = setup.api.flood_until[ALICE_CHAT]

    press = setup.api.press(ALICE_CHAT, cards[0].result["message_id"], approve)
    answers = await setup.api.wait_for(lambda: setup.api.of("answerCallbackQuery"), what="the button's answer")
    assert answers[0].status == 200
    assert answers[0].at - setup.api.served_at[press] < 1.0, "the press was not answered at once"
    assert answers[0].at < flood_ends
    await setup.api.wait_for(lambda: setup.probe.notes == ["milk"], what="the approval to take effect")
    await setup.api.wait_for(lambda: len(setup.model.requests_for(MODEL)) >= 2, what="alice's turn to go on")

    # Bob's chat is not held by Alice's flood wait.
    setup.api.send(BOB_CHAT, "Hi.")
    await setup.api.wait_for(lambda: "Hello Bob." in setup.api.texts(BOB_CHAT), timeout=15, what="Bob's answer")
    bob_answered = next(c.at for c in setup.api.of("sendMessage", BOB_CHAT) if c.params.get("text") == "Hello Bob.")
    assert bob_answered < flood_ends, "another chat waited for Alice's flood wait"

    # Alice's chat is sent nothing until the flood wait ends, then everything, in order.
    await setup.api.wait_for(lambda: "Noted: milk." in setup.api.texts(ALICE_CHAT), timeout=45, what="Alice's queue after the wait")
    after = [c for c in setup.api.to_chat(ALICE_CHAT) if c.at > floods(setup, ALICE_CHAT)[0].at]
    assert after and all(c.at >= flood_ends for c in after)
    assert setup.api.early == []
    texts = setup.api.texts(ALICE_CHAT)
    assert any(t.startswith("Write to talk to your assistant.") for t in texts)
    # The card says its outcome (edited in place, in the chat's order: before the answer).
    card_id = cards[0].result["message_id"]
    edits = [e for e in setup.api.of("editMessageText", ALICE_CHAT) if e.params.get("message_id") == card_id and e.status == 200]
    noted = next(c.at for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("text") == "Noted: milk.")
    assert len(edits) == 1 and edits[0].at < noted
    assert setup.api.messages[card_id]["text"].endswith("Approved.")
    assert_paced(setup, ALICE_CHAT)
    assert_paced(setup, BOB_CHAT)


async def test_an_answer_streams_into_one_message_at_most_once_a_second(setup: Setup):
    await running(setup)
    await paired_member(setup)
    words = [f"w{i:02d}" for i in range(40)]
    final = "**Streamed** " + " ".join(words)
    setup.model.script(MODEL, [Reply(final, token_delay=0.1)])  # about four seconds of tokens
    before = len(setup.api.of("sendMessage", ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "Take your time.")
    await setup.api.wait_for(lambda: any(t.startswith("<b>Streamed</b>") for t in setup.api.texts(ALICE_CHAT)), timeout=30, what="the final text")
    await asyncio.sleep(1.5)

    sends = setup.api.of("sendMessage", ALICE_CHAT)[before:]
    assert len(sends) == 1, [c.params.get("text") for c in sends]  # one message for the whole answer
    message_id = sends[0].result["message_id"]
    assert sends[0].params.get("text") != final and final.startswith(sends[0].params["text"])  # it began partial
    edits = [c for c in setup.api.of("editMessageText", ALICE_CHAT) if c.params.get("message_id") == message_id]
    assert len(edits) >= 2 and all(c.status == 200 for c in edits)
    assert edits[-1].params.get("parse_mode") == "HTML" and edits[-1].params["text"] == "<b>Streamed</b> " + " ".join(words)
    assert all(not c.params.get("parse_mode") for c in edits[:-1])  # plain while streaming
    assert setup.api.shown(ALICE_CHAT)[-1] == "<b>Streamed</b> " + " ".join(words)
    assert floods(setup, ALICE_CHAT) == [] and setup.api.early == []
    assert_paced(setup, ALICE_CHAT)


async def test_a_member_who_logged_out_is_told_so(setup: Setup):
    await running(setup)
    alice = await paired_member(setup)
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    setup.api.send(ALICE_CHAT, "Are you there?")
    await setup.api.wait_for(lambda: any(t.startswith("You are logged out of Skald") for t in setup.api.texts(ALICE_CHAT)), what="the logged-out notice")
    assert not any("server restarted" in t for t in setup.api.texts(ALICE_CHAT))
    strings = setup.host.core.strings
    assert strings.translate("telegram.logged_out", "de").startswith("Du bist bei Skald abgemeldet")
    assert "Neustart" in strings.translate("telegram.locked", "de") and "restarted" in strings.translate("telegram.locked", "en")


async def test_a_command_sent_while_locked_is_not_promised_an_answer(setup: Setup):
    """/new and /stop act now or never: while the member is locked the chat says to
    send them again after logging in, not that they are kept (probe 7, finding 2)."""
    await running(setup)
    alice = await paired_member(setup)
    before = len((await alice.get("/api/conversations")).json()["conversations"])
    assert (await alice.post("/api/auth/logout")).status_code in (200, 204)
    for command in ("/new", "/stop"):
        setup.api.send(ALICE_CHAT, command)
        said = await setup.api.wait_for(
            lambda: [t for t in setup.api.texts(ALICE_CHAT) if f"send {command} again" in t], what=f"the notice for {command}"
        )
        assert said[0].startswith("You are logged out of Skald") and "kept and will be answered" not in said[0], said
    assert not any("will be answered" in t for t in setup.api.texts(ALICE_CHAT)[2:])
    alice = await setup.host.member("alice")
    await asyncio.sleep(1.0)  # room for a wrongly kept /new to run at unlock
    assert len((await alice.get("/api/conversations")).json()["conversations"]) == before
    strings = setup.host.core.strings
    assert "/new" in strings.translate("telegram.command_logged_out", "de", command="/new")

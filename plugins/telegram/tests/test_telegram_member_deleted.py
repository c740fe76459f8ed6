"""A deleted member's Telegram chat (contract 1.14's ``member_deleted``): the link, the
answer streaming into the chat and what waited for the member there go with them; the
chat is told, and can be paired again by whoever holds it. A link the hook never
dropped (an instance upgraded from before it) heals itself at the chat's next message."""

from __future__ import annotations

from skald_host.testing import Hang, Reply
from telegram_support import ALICE_CHAT, CODE, MODEL, paired_member, running

BOB_CHAT = 5550002


async def delete(setup, member_id: str) -> None:
    response = await setup.admin.delete(f"/api/admin/members/{member_id}")
    assert response.status_code == 200, response.text


async def roster(setup) -> list:
    return [(r["member_id"], r["chat_id"]) for r in (await setup.admin.get("/api/plugin/telegram/roster")).json()["links"]]


async def test_deleting_a_member_unlinks_their_chat_which_can_pair_again(setup, caplog):
    await running(setup)
    alice = await paired_member(setup)
    bob = await paired_member(setup, "bob", BOB_CHAT)
    alice_id, bob_id = alice.member["id"], bob.member["id"]
    before = len(setup.api.texts(ALICE_CHAT))
    await delete(setup, alice_id)
    texts = await setup.api.wait_texts(ALICE_CHAT, before + 1)
    assert "no longer linked" in texts[before]
    assert await roster(setup) == [(bob_id, BOB_CHAT)]  # nothing of the deleted member left

    # The chat is a stranger's again: offered a code, and whoever holds it pairs anew.
    setup.api.send(ALICE_CHAT, "hello?")
    texts = await setup.api.wait_texts(ALICE_CHAT, before + 2)
    code = CODE.search(texts[before + 1])
    assert code, texts[before + 1]
    carol = await setup.host.member("carol")
    saved = await carol.put("/api/plugins/telegram/my-config", json={"config": {"code": code.group(1)}})
    assert saved.status_code == 200 and saved.json()["config"]["chat_id"] == ALICE_CHAT, saved.text
    setup.model.script(MODEL, [Reply("Hello, Carol.")])
    setup.api.send(ALICE_CHAT, "Hi!")
    await setup.api.wait_for(lambda: "Hello, Carol." in setup.api.texts(ALICE_CHAT), what="the new member's answer")
    assert not [r for r in caplog.records if r.name == "skald_telegram" and "failed" in r.getMessage()]
    assert (await bob.get("/api/plugin/telegram/status")).json()["linked"] is True


async def test_the_hook_is_called_once_after_the_member_is_gone(setup, monkeypatch):
    import skald_telegram

    await running(setup)
    alice = await paired_member(setup)
    alice_id = alice.member["id"]
    seen = []
    original = skald_telegram.running.bot.forget_member

    async def forget_member(member_id):
        rows = await setup.host.core.registry.run(lambda c: c.execute("SELECT id FROM users WHERE id = ?", (member_id,)).fetchall())
        seen.append((member_id, len(rows)))
        await original(member_id)

    monkeypatch.setattr(skald_telegram.running.bot, "forget_member", forget_member)
    await delete(setup, alice_id)
    assert seen == [(alice_id, 0)]


async def test_a_chat_left_linked_to_a_deleted_member_heals_at_its_next_message(setup, caplog):
    """As an instance upgraded from before the hook left it: the link is dropped and
    pairing offered, instead of every message failing for good."""
    import skald_telegram

    await running(setup)
    alice = await paired_member(setup)
    links = await skald_telegram.running.bot.host.kv_get("links")
    told = len(setup.api.texts(ALICE_CHAT)) + 1
    await delete(setup, alice.member["id"])
    await setup.api.wait_texts(ALICE_CHAT, told)  # the hook's "no longer linked"
    await skald_telegram.running.bot.host.kv_set("links", links)  # the link as it was left
    before = len(setup.api.texts(ALICE_CHAT))
    setup.api.send(ALICE_CHAT, "anyone?")
    texts = await setup.api.wait_for(lambda: len(setup.api.texts(ALICE_CHAT)) > before and setup.api.texts(ALICE_CHAT), what="a reply")
    assert CODE.search(texts[-1]), texts[-1]
    assert await roster(setup) == []
    assert not [r for r in caplog.records if r.name == "skald_telegram" and "failed" in r.getMessage()]


async def test_an_answer_streaming_when_the_member_is_deleted_is_finished_with_what_it_showed(setup):
    await running(setup)
    alice = await paired_member(setup)
    setup.model.script(MODEL, [Hang("**Half** an answer")])
    setup.api.send(ALICE_CHAT, "Tell me everything.")
    await setup.api.wait_for(lambda: "**Half** an answer" in setup.api.shown(ALICE_CHAT), what="the streamed words")
    told = len(setup.api.texts(ALICE_CHAT)) + 1
    await delete(setup, alice.member["id"])
    texts = await setup.api.wait_texts(ALICE_CHAT, told)
    assert "no longer linked" in texts[-1]
    shown = await setup.api.wait_for(lambda: "<b>Half</b> an answer" in setup.api.shown(ALICE_CHAT) and setup.api.shown(ALICE_CHAT), what="the message finished")
    assert "**Half** an answer" not in shown
    assert await setup.host.core.registry.run(lambda c: c.execute("SELECT count(*) FROM plugin_kv WHERE plugin_id = 'telegram' AND key LIKE 'relay:%'").fetchone()[0]) == 0

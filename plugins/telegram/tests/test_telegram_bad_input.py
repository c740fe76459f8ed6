"""Check A6 and the issue's bad input: wrong, expired and reused codes and the attempt
limit; group chats (also from a paired member); unknown chats; replayed and malformed
updates; webhook calls without or with the wrong secret. Each against a real host and
the Bot API stand-in."""

from __future__ import annotations

import asyncio

import skald_telegram
from skald_hookspecs import ToolContext
from skald_host.testing import Reply
from skald_telegram.pairing import digest, normalise
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, pairing_code, running

WRONG = "That pairing code is not valid."


async def pair(client, code: str):
    return await client.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})


async def linked(client) -> bool:
    return (await client.get("/api/plugin/telegram/status")).json()["linked"]


async def test_wrong_expired_and_reused_codes_are_refused_and_the_sixth_try_in_an_hour_is_locked_out(setup: Setup):
    await running(setup)
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    carol = await setup.host.member("carol", locale="de")

    wrong = await pair(bob, "AAAAA-AAAAA")
    assert (wrong.status_code, wrong.json()["error"]) == (400, WRONG)
    assert not await linked(bob)

    # Expired: the code's record is moved 11 minutes into the past.
    stale = await pairing_code(setup, 7001)
    store = setup.host.core.host_api("telegram")
    record = await store.kv_get(f"code:{digest(normalise(stale))}")
    await store.kv_set(f"code:{digest(normalise(stale))}", {**record, "expires_at": record["expires_at"] - 660})
    expired = await pair(bob, stale)
    assert (expired.status_code, expired.json()["error"]) == (400, "That pairing code has expired. Write to the bot again for a new one.")

    # Used once by Alice, refused to Bob; the German member is told in German.
    code = await pairing_code(setup, 7002)
    assert (await pair(alice, code)).status_code == 200 and await linked(alice)
    reused = await pair(bob, code)
    assert (reused.status_code, reused.json()["error"]) == (400, "That pairing code was already used.")
    german = await pair(carol, "BBBBB-BBBBB")
    assert german.json()["error"] == "Dieser Kopplungscode ist ungültig."

    # Bob has 3 failures; two more reach the limit, then even a right code is refused.
    for _ in range(2):
        assert (await pair(bob, "CCCCC-CCCCC")).json()["error"] == WRONG
    fresh = await pairing_code(setup, 7003)
    locked_out = await pair(bob, fresh)
    assert (locked_out.status_code, locked_out.json()["error"]) == (400, "Too many wrong pairing codes. Try again in an hour.")
    assert not await linked(bob)
    # The lockout is Bob's alone, and it did not spend the code.
    assert (await pair(carol, fresh)).status_code == 200 and await linked(carol)


async def test_the_telegram_pairing_tool_and_a_hand_made_binding(setup: Setup):
    await running(setup)
    alice = await setup.host.member("alice")
    member_id = alice.member["id"]
    # The tool the model calls, run the way the host runs a plugin's tool.
    tool_context = ToolContext(member_id=member_id, host=setup.host.core.host_api("telegram"))
    assert await skald_telegram._pair_tool({"code": "ZZZZZ-ZZZZZ"}, tool_context) == WRONG
    code = await pairing_code(setup, 7101)
    assert await skald_telegram._pair_tool({"code": code.lower()}, tool_context) == "Linked the Telegram chat 'Alice' to this account."
    assert await linked(alice)

    forged = await alice.put("/api/plugins/telegram/my-config", json={"config": {"chat_id": 1234}})
    assert forged.status_code == 400 and "set by pairing" in forged.json()["error"]
    mine = await setup.host.core.host_api("telegram").get_user_config(member_id)
    assert mine["chat_id"] == 7101

    unlinked = await alice.put("/api/plugins/telegram/my-config", json={"config": {"unlink": True}})
    assert unlinked.status_code == 200 and unlinked.json()["config"]["linked"] is False
    assert "no longer linked" in (await setup.api.wait_texts(7101, 3))[2]
    assert (await setup.admin.get("/api/plugin/telegram/roster")).json()["links"] == []


async def test_groups_channels_and_a_paired_member_inside_a_group_are_ignored(setup: Setup):
    await running(setup)
    await paired_member(setup)
    setup.api.send(-100, "hello group", chat_type="group", from_id=999)
    setup.api.send(-200, "hi from a supergroup", chat_type="supergroup", from_id=ALICE_CHAT)
    setup.api.push({"channel_post": {"message_id": 1, "date": 0, "chat": {"id": -300, "type": "channel"}, "text": "news"}})
    setup.model.script(MODEL, [Reply("pong")])
    setup.api.send(ALICE_CHAT, "ping")
    await setup.api.wait_for(lambda: "pong" in setup.api.texts(ALICE_CHAT), what="the private answer")
    assert {c.params.get("chat_id") for c in setup.api.calls if c.method.startswith("send")} == {ALICE_CHAT}
    assert [r.last_user_text for r in setup.model.requests_for(MODEL)] == ["ping"]
    assert await setup.host.core.host_api("telegram").kv_get("issued:999") is None  # no code for a group's member


async def test_unknown_chats_get_one_code_a_minute_and_their_buttons_do_nothing(setup: Setup):
    await running(setup)
    await pairing_code(setup, 8001)
    setup.api.send(8001, "hello again?")
    texts = await setup.api.wait_texts(8001, 2)
    assert texts[1].startswith("I sent you a pairing code a moment ago")

    setup.api.press(8002, 1, "approve:forged-handle")
    await setup.api.wait_for(lambda: setup.api.of("answerCallbackQuery"), what="the button to be answered")
    assert setup.api.of("answerCallbackQuery")[0].params.get("text") is None
    assert setup.api.of("sendMessage", 8002) == [] and setup.api.of("editMessageReplyMarkup") == []


async def test_a_replayed_update_is_processed_once(setup: Setup):
    await running(setup)
    await paired_member(setup)
    setup.model.script(MODEL, [Reply("Once."), Reply("Twice?")])
    update = {"update_id": 90001, "message": setup.api.message(ALICE_CHAT, "Say it once.")}
    for _ in range(3):  # one batch: the stand-in serves all three copies together
        setup.api.push(dict(update))
    await setup.api.wait_for(lambda: "Once." in setup.api.texts(ALICE_CHAT), what="the answer")
    await asyncio.sleep(0.5)
    assert [r.last_user_text for r in setup.model.requests_for(MODEL)] == ["Say it once."]
    assert setup.api.texts(ALICE_CHAT).count("Once.") == 1 and "Twice?" not in setup.api.texts(ALICE_CHAT)

    # The plugin's own record, not only the host's idempotency key: a stranger's replayed
    # message gets one answer (a second would be "I sent you a code a moment ago").
    stranger = {"update_id": 90002, "message": setup.api.message(8101, "hello")}
    for _ in range(3):
        setup.api.push(dict(stranger))
    await setup.api.wait_texts(8101, 1)
    await asyncio.sleep(0.5)
    assert len(setup.api.texts(8101)) == 1


async def test_malformed_updates_do_not_stop_the_poller(setup: Setup):
    await running(setup)
    await paired_member(setup)
    setup.api.push({"update_id": 91001, "message": "not an object"})
    setup.api.push({"update_id": 91002, "message": {"chat": {"id": "x"}, "text": "no numeric chat"}})
    setup.api.push({"message": {"chat": {"id": ALICE_CHAT, "type": "private"}, "text": "no update id"}}, with_id=False)
    setup.api.push({"update_id": 91003, "callback_query": {"data": "approve:x"}})
    setup.api.push({"update_id": "91004", "message": {}})
    setup.api.push({"update_id": 91005, "message": {"chat": {"id": ALICE_CHAT, "type": "private"}, "from": {"id": ALICE_CHAT}, "sticker": {}}})
    setup.model.script(MODEL, [Reply("Still here.")])
    setup.api.send(ALICE_CHAT, "Are you alive?")
    await setup.api.wait_for(lambda: "Still here." in setup.api.texts(ALICE_CHAT), what="the answer after the junk")
    assert "I can pass on text, photos, documents and voice notes." in setup.api.texts(ALICE_CHAT)
    assert [r.last_user_text for r in setup.model.requests_for(MODEL)] == ["Are you alive?"]
    assert setup.host.core.plugins.status("telegram").healthy


async def test_webhook_calls_need_the_secret_token(setup: Setup):
    secret = "webhook-secret_A6-check"
    webhook_url = "https://skald.example/api/plugin/telegram/webhook"  # Telegram's side: the test calls the host itself
    await setup.configure(mode="webhook", webhook_url=webhook_url, webhook_secret=secret)
    await setup.enable()
    assert setup.host.core.plugins.status("telegram").healthy, setup.host.core.plugins.status("telegram").error
    registered = setup.api.of("setWebhook")
    assert len(registered) == 1 and registered[0].params["url"] == webhook_url and registered[0].params["secret_token"] == secret
    await asyncio.sleep(0.3)
    assert setup.api.of("getUpdates") == []

    stranger = setup.host.client()
    update = {"update_id": 92001, "message": setup.api.message(9301, "let me in")}
    missing = await stranger.post("/api/plugin/telegram/webhook", json=update)
    wrong = await stranger.post("/api/plugin/telegram/webhook", json=update, headers={"X-Telegram-Bot-Api-Secret-Token": secret + "x"})
    assert (missing.status_code, wrong.status_code) == (401, 403)
    assert "X-Telegram-Bot-Api-Secret-Token" in missing.json()["error"] and "wrong" in wrong.json()["error"]
    await asyncio.sleep(0.3)
    assert setup.api.of("sendMessage") == []  # nothing was processed

    right = {"X-Telegram-Bot-Api-Secret-Token": secret}
    for _ in range(3):  # Telegram retries a webhook call it thinks failed
        accepted = await stranger.post("/api/plugin/telegram/webhook", json=update, headers=right)
        assert accepted.status_code == 200, accepted.text
    texts = await setup.api.wait_texts(9301, 1)
    await asyncio.sleep(0.3)
    assert len(setup.api.texts(9301)) == 1 and "10 minutes" in texts[0]
    garbage = await stranger.post("/api/plugin/telegram/webhook", content=b"not json", headers=right)
    assert garbage.status_code == 400


async def test_disabling_the_plugin_removes_its_webhook_at_telegram_and_a_host_restart_does_not(setup: Setup):
    webhook = {"mode": "webhook", "webhook_url": "https://skald.example/api/plugin/telegram/webhook", "webhook_secret": "webhook-secret_B7"}
    await setup.configure(**webhook)
    await setup.enable()
    assert len(setup.api.of("setWebhook")) == 1 and setup.api.of("deleteWebhook") == []

    settings = setup.host.settings
    await setup.harness.close()  # the host stops: the webhook stays, the next start sets it again
    assert setup.api.of("deleteWebhook") == []
    host = await setup.harness.start(use_entry_points=True, settings=settings)
    assert host.core.plugins.status("telegram").healthy, host.core.plugins.status("telegram").error
    assert len(setup.api.of("setWebhook")) == 2

    response = await (await host.admin()).put("/api/admin/plugins/telegram/enabled", json={"enabled": False})
    assert response.status_code == 200, response.text
    assert len(setup.api.of("deleteWebhook")) == 1  # Telegram stops calling an address that now answers 404

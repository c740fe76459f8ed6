"""An admin reset of a member whose data was encrypted with their password unlinks
their Telegram chat (contract 1.7's ``member_reset``): the account starts over in the
hands of whoever holds the new password (the admin chose it), and the member's chat
must not go on talking to it (found by a security sweep: the link survived). A reset
of a member without encryption keeps the data, and the chat."""

from __future__ import annotations

from telegram_support import ALICE_CHAT, paired_member, running

NEW_PASSWORD = "a password the admin chose 42"
BOB_CHAT = 5550002


async def test_a_data_losing_reset_unlinks_the_members_chat_and_tells_it(setup):
    await running(setup)
    alice = await paired_member(setup)
    bob = await paired_member(setup, "bob", BOB_CHAT)
    before = len(setup.api.texts(ALICE_CHAT))
    reset = await setup.admin.post(
        f"/api/admin/members/{alice.member['id']}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True}
    )
    assert reset.status_code == 200 and reset.json()["data_lost"] is True, reset.text
    texts = await setup.api.wait_texts(ALICE_CHAT, before + 1)
    assert "no longer linked" in texts[before]
    holder = setup.host.client()
    assert (await holder.login("alice", NEW_PASSWORD)).status_code == 200
    status = (await holder.get("/api/plugin/telegram/status")).json()
    assert status["linked"] is False, status
    assert (await bob.get("/api/plugin/telegram/status")).json()["linked"] is True  # nobody else's


async def test_a_reset_that_keeps_the_data_keeps_the_chat(setup):
    await running(setup)
    await setup.host.create_member("carol", encrypted=False)
    carol = await paired_member(setup, "carol", 5550003)
    reset = await setup.admin.post(
        f"/api/admin/members/{carol.member['id']}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True}
    )
    assert reset.status_code == 200 and reset.json()["data_lost"] is False, reset.text
    holder = setup.host.client()
    assert (await holder.login("carol", NEW_PASSWORD)).status_code == 200
    assert (await holder.get("/api/plugin/telegram/status")).json()["linked"] is True

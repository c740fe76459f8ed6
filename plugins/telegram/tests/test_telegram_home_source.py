"""Telegram as the home of a member's background notes (contract 1.16): offered only
once their chat is linked, and once it is unlinked their notes stay on the web, said
so on the account page's data, instead of being dropped by a bot with no chat to send
them to."""

from __future__ import annotations

import asyncio

from telegram_support import ALICE_CHAT, paired_member, running


async def test_telegram_is_a_home_only_while_a_chat_is_linked(setup):
    await running(setup)
    core = setup.host.core
    bob = await setup.host.member("bob", display_name="Bob")  # never linked a chat
    assert (await bob.get("/api/me/home-source")).json()["choices"] == ["web"]
    refused = await bob.put("/api/me/home-source", json={"home_source": "telegram"})
    assert refused.status_code == 400 and refused.json()["code"] == "home_source_unreachable", refused.text

    alice = await paired_member(setup)
    member_id = alice.member["id"]
    assert (await alice.get("/api/me/home-source")).json()["choices"] == ["web", "telegram"]
    assert (await alice.put("/api/me/home-source", json={"home_source": "telegram"})).status_code == 200
    before = len(setup.api.texts(ALICE_CHAT))
    assert await core.notify_member(member_id, "The backup finished.") is True
    texts = await setup.api.wait_texts(ALICE_CHAT, before + 1)
    assert "The backup finished." in texts[-1]

    unlinked = await alice.put("/api/plugins/telegram/my-config", json={"config": {"unlink": True}})
    assert unlinked.status_code == 200 and unlinked.json()["config"]["linked"] is False
    state = (await alice.get("/api/me/home-source")).json()
    assert (state["home_source"], state["choices"], state["fallback"]) == ("web", ["web"], {"source": "telegram", "reason": "unreachable"})
    assert state["titles"]["telegram"] == "Telegram"

    subscription = core.buses.members.subscribe(member_id)
    try:
        sent = len(setup.api.texts(ALICE_CHAT))
        assert await core.notify_member(member_id, "The second backup finished.") is True
        event = await asyncio.wait_for(anext(aiter(subscription)), 5)
    finally:
        subscription.close()
    assert (event.kind, event.data) == ("notification", {"text": "The second backup finished."})  # the web has it
    await asyncio.sleep(0.5)
    assert len(setup.api.texts(ALICE_CHAT)) == sent

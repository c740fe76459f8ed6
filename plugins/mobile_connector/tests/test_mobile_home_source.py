"""The phone app as the home of a member's background notes (contract 1.16): offered
only while a phone is paired; once the last one is unpaired the notes stay on the web
(and the account page's data says why) instead of filling an outbox nobody reads."""

from __future__ import annotations

import asyncio

from mobile_support import BASE, PLUGIN, paired_device


async def noted(setup, member_id: str) -> list[str]:
    """The notifications the connector kept in the member's outbox for their phones."""
    events = await setup.host.core.host_api(PLUGIN).member_events(member_id, after=0)
    return [e["data"]["text"] for e in events if e["data"].get("kind") == "notification"]


async def test_the_app_is_a_home_only_while_a_phone_is_paired(setup):
    alice = await setup.host.member("alice", display_name="Alice")
    member_id = alice.member["id"]
    assert (await alice.get("/api/me/home-source")).json()["choices"] == ["web"]
    refused = await alice.put("/api/me/home-source", json={"home_source": PLUGIN})
    assert refused.status_code == 400 and refused.json()["code"] == "home_source_unreachable", refused.text

    phone = await paired_device(setup, alice)
    assert (await alice.get("/api/me/home-source")).json()["choices"] == ["web", PLUGIN]
    assert (await alice.put("/api/me/home-source", json={"home_source": PLUGIN})).status_code == 200
    assert await setup.host.core.notify_member(member_id, "The backup finished.") is True
    assert await noted(setup, member_id) == ["The backup finished."]  # kept for the phone

    assert (await alice.delete(f"{BASE}/devices/{phone.device_id}")).status_code == 200
    state = (await alice.get("/api/me/home-source")).json()
    assert (state["home_source"], state["choices"], state["fallback"]) == ("web", ["web"], {"source": PLUGIN, "reason": "unreachable"})
    kept = await noted(setup, member_id)
    subscription = setup.host.core.buses.members.subscribe(member_id)
    try:
        assert await setup.host.core.notify_member(member_id, "The second backup finished.") is True
        event = await asyncio.wait_for(anext(aiter(subscription)), 5)
    finally:
        subscription.close()
    assert (event.kind, event.data) == ("notification", {"text": "The second backup finished."})  # the web has it
    await asyncio.sleep(0.3)
    assert await noted(setup, member_id) == kept  # nothing kept for a phone that is gone

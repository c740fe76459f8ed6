"""A home source must reach the member (contract 1.16, ``ReachableChannel.reachable``):
a channel that cannot reach them now (no chat linked, no phone paired) is neither
offered nor accepted as their home, and while the home they chose cannot reach them
(unlinked since, its plugin disabled) their background notes stay on the web instead of
vanishing into a ``deliver`` with nowhere to send them."""

from __future__ import annotations

import asyncio

from skald_hookspecs.channels import ReachableChannel

from .support import CHANNEL, RecordingChannel


class LinkableChannel(RecordingChannel):
    """The recording channel, reaching only the members linked to it."""

    def __init__(self) -> None:
        super().__init__()
        self.linked: set[str] = set()
        self.broken = False

    async def reachable(self, member_id: str) -> bool:
        if self.broken:
            raise RuntimeError("the channel's store is gone")
        return member_id in self.linked


async def web_note(host, member_id: str, text: str) -> None:
    """A system agent's note (``notify_member``): the open web page hears it on the bus."""
    subscription = host.core.buses.members.subscribe(member_id)
    try:
        assert await host.core.notify_member(member_id, text) is True
        event = await asyncio.wait_for(anext(aiter(subscription)), 5)
    finally:
        subscription.close()
    assert (event.kind, event.data) == ("notification", {"text": text})


async def test_an_unreachable_channel_is_not_offered_nor_accepted_as_home(skald):
    channel = LinkableChannel()
    assert isinstance(channel, ReachableChannel) and not isinstance(RecordingChannel(), ReachableChannel)
    host = await skald.start(plugins=[channel], enable=[CHANNEL], settings=skald.settings(system_agents={"run": False}))
    alice = await host.member("alice")
    assert (await alice.get("/api/me/home-source")).json() == {"home_source": "web", "choices": ["web"], "titles": {}, "fallback": None}
    refused = await alice.put("/api/me/home-source", json={"home_source": CHANNEL})
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["code"] == "home_source_unreachable" and body["values"]["channel"] == "Test channel" and body["values"]["choices"] == "web"
    assert await host.core.channels.router.home_source(alice.member["id"]) == "web"

    channel.linked.add(alice.member["id"])
    assert (await alice.get("/api/me/home-source")).json()["choices"] == ["web", CHANNEL]
    assert (await alice.put("/api/me/home-source", json={"home_source": CHANNEL})).json()["home_source"] == CHANNEL


async def test_notes_stay_on_the_web_while_the_chosen_home_cannot_reach_the_member(skald):
    channel = LinkableChannel()
    host = await skald.start(plugins=[channel], enable=[CHANNEL], settings=skald.settings(system_agents={"run": False}))
    alice = await host.member("alice")
    member_id = alice.member["id"]
    channel.linked.add(member_id)
    assert (await alice.put("/api/me/home-source", json={"home_source": CHANNEL})).status_code == 200
    await web_note(host, member_id, "Linked: to the channel.")
    assert [(e.kind, e.text) for _, e in channel.events] == [("notification", "Linked: to the channel.")]

    channel.linked.clear()  # unlinked on the channel's side
    state = (await alice.get("/api/me/home-source")).json()
    assert state == {
        "home_source": "web", "choices": ["web"], "titles": {CHANNEL: "Test channel"},
        "fallback": {"source": CHANNEL, "reason": "unreachable"},
    }
    await web_note(host, member_id, "Unlinked: on the web only.")
    await asyncio.sleep(0.1)
    assert [e.text for _, e in channel.events] == ["Linked: to the channel."]  # never handed to a channel with nowhere to send

    channel.broken = True  # a channel that cannot answer counts as unreachable, logged
    channel.linked.add(member_id)
    await web_note(host, member_id, "Broken: on the web only.")
    assert (await alice.get("/api/me/home-source")).json()["fallback"] == {"source": CHANNEL, "reason": "unreachable"}

    channel.broken = False  # linked again: the choice they made holds again
    await web_note(host, member_id, "Linked again.")
    await channel.wait_for("notification", text="Linked again.")
    assert [e.text for _, e in channel.events] == ["Linked: to the channel.", "Linked again."]
    assert (await alice.get("/api/me/home-source")).json()["fallback"] is None


async def test_a_disabled_home_channel_leaves_the_notes_on_the_web_and_says_so(skald):
    channel = LinkableChannel()
    host = await skald.start(plugins=[channel], enable=[CHANNEL], settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    alice = await host.member("alice")
    member_id = alice.member["id"]
    channel.linked.add(member_id)
    assert (await alice.put("/api/me/home-source", json={"home_source": CHANNEL})).status_code == 200
    assert (await admin.put(f"/api/admin/plugins/{CHANNEL}/enabled", json={"enabled": False})).status_code == 200
    state = (await alice.get("/api/me/home-source")).json()
    assert (state["home_source"], state["choices"], state["fallback"]) == ("web", ["web"], {"source": CHANNEL, "reason": "unavailable"})
    assert state["titles"] == {CHANNEL: "Test channel"}
    await web_note(host, member_id, "While it is off.")
    # Choosing the web again ends the fallback: nothing to explain any more.
    assert (await alice.put("/api/me/home-source", json={"home_source": "web"})).json()["fallback"] is None
    assert channel.events == []

"""``HostApi.subscribe_member`` (contract 1.17): a plugin gets a member's events only
while the member may use it (checked at delivery), can unsubscribe with the handle it
is given, loses the subscription when the member locks, and a handler's failure is
recorded like a hook's (error id, message withheld, on the plugin's page, folded)."""

from __future__ import annotations

import asyncio
import logging

from skald_hookspecs import PluginInfo, hookimpl
from skald_hookspecs.events import UserEvent

SECRET = "my secret diagnosis is hypothyroidism"


class Tally:
    __name__ = "tally"

    def __init__(self, *, fail: bool = False) -> None:
        self.seen: list[str] = []
        self.handles: list[tuple[str, object]] = []
        self.fail = fail

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="tally", title="Tally", spec=">=1.17,<2")

    @hookimpl
    async def member_unlocked(self, member_id: str, host: object) -> None:
        async def on_event(event: UserEvent) -> None:
            if event.kind != "chat":
                return  # access_changed and the like
            if self.fail:
                raise ValueError("bad message: " + event.data.get("content", ""))
            self.seen.append(event.data.get("content", ""))

        self.handles.append((member_id, host.subscribe_member(member_id, on_event)))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


async def start(skald, plugin):
    host = await skald.start(plugins=[plugin], enable=["tally"])
    admin = await host.admin()
    await host.create_member("bob")
    bob = (await host.core.users.find("bob")).id
    assert (await admin.put(f"/api/admin/members/{bob}/plugins", json={"plugins": ["tally"]})).status_code == 200
    client = await host.member("bob")
    await settle()
    return host, admin, client, bob


def say(host, bob: str, text: str) -> None:
    host.core.buses.members.publish(UserEvent("chat", bob, {"type": "user_message", "content": text}))


async def test_a_revoked_grant_stops_the_events_at_once(skald):
    plugin = Tally()
    host, admin, _, bob = await start(skald, plugin)
    say(host, bob, "granted")
    await settle()
    assert plugin.seen == ["granted"]

    assert (await admin.put(f"/api/admin/members/{bob}/plugins", json={"plugins": []})).status_code == 200
    say(host, bob, "revoked yet seen: blue-elephant-42")
    await settle()
    assert plugin.seen == ["granted"]

    assert (await admin.put(f"/api/admin/members/{bob}/plugins", json={"plugins": ["tally"]})).status_code == 200
    say(host, bob, "granted again")
    await settle()
    assert plugin.seen == ["granted", "granted again"]


async def test_the_handle_unsubscribes(skald):
    plugin = Tally()
    host, _, _, bob = await start(skald, plugin)
    [handle] = [h for m, h in plugin.handles if m == bob]
    say(host, bob, "one")
    await settle()
    handle()
    say(host, bob, "two")
    await settle()
    assert plugin.seen == ["one"]
    assert not handle.active


async def test_a_lock_ends_the_subscriptions(skald):
    plugin = Tally()
    host, _, client, bob = await start(skald, plugin)
    assert (await client.post("/api/auth/logout")).status_code in (200, 204)
    assert not host.core.users.is_unlocked(bob)
    await settle()
    [first] = [h for m, h in plugin.handles if m == bob]
    assert not first.active
    await host.member("bob")  # member_unlocked subscribes again
    await settle()
    say(host, bob, "once")
    await settle()
    assert plugin.seen == ["once"]  # not twice


async def test_a_failing_handler_is_recorded_without_its_message(skald, caplog):
    plugin = Tally(fail=True)
    host, admin, _, bob = await start(skald, plugin)
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            say(host, bob, SECRET)
        await settle()
    assert SECRET not in caplog.text
    body = (await admin.get("/api/admin/plugins/tally")).json()
    text = str(body)
    assert SECRET not in text
    failures = body.get("failures") or body.get("plugin", {}).get("failures")
    assert failures and len(failures) == 1, body  # three failures, folded into one entry
    assert failures[0]["where"] == "event handler"
    assert "ValueError" in failures[0]["traceback"] and "withheld" in failures[0]["traceback"]
    assert failures[0]["error_id"] in caplog.text

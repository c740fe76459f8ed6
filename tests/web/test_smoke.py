async def test_setup_login_and_admin_list(skald):
    host = await skald.start()
    admin = await host.admin()
    response = await admin.get("/api/admin/members")
    assert response.status_code == 200
    assert [m["username"] for m in response.json()["members"]] == ["admin"]
    member = await host.member("alice")
    assert (await member.get("/api/admin/members")).status_code == 403
    async with member.ws() as ws:
        await ws.send('{"type": "ping"}')
        assert "pong" in await ws.recv()


async def test_a_started_host_has_its_start_up_objects_out_of_the_collectors_reach(skald):
    """``settle_heap``: a full collection no longer walks the modules, classes and plugin
    code start-up built (60-80 ms pauses in the chat benchmark before)."""
    import gc

    gc.unfreeze()  # what an earlier host in this process froze must not count
    host = await skald.start()
    assert gc.get_freeze_count() > 10_000
    assert (await (await host.admin()).get("/api/admin/members")).status_code == 200


async def test_a_started_host_collects_young_objects_less_often(skald):
    """``GC_THRESHOLDS``: at CPython's 700 the collector took ~10% of the host's CPU under
    the chat benchmark's 200 streams."""
    import gc

    gc.set_threshold(700, 10, 10)  # what an earlier host in this process set must not count
    try:
        await skald.start()
        assert gc.get_threshold() == (10_000, 10, 10)
    finally:
        gc.set_threshold(700, 10, 10)


async def _publish_and_receive(host, member, deltas, pause) -> tuple[int, list[dict]]:
    """Publish ``deltas`` as token events on the member's bus, ``pause()`` after each, a
    notification after the first half and ``done`` at the end; what the socket got."""
    import asyncio
    import json

    from skald_hookspecs.events import UserEvent

    member_id = member.member["id"]
    async with member.ws() as ws:
        await ws.send('{"type": "ping"}')
        assert "pong" in await ws.recv()  # the socket follows the member's bus now
        for index, delta in enumerate(deltas):
            host.core.buses.members.publish(UserEvent("chat", member_id, {
                "type": "token", "conversation_id": "c", "message_id": 1, "channel": "content", "delta": delta,
            }))
            if index == len(deltas) // 2 - 1:
                host.core.buses.members.publish(UserEvent("chat", member_id, {"type": "notification", "conversation_id": "c"}))
            await pause()
        host.core.buses.members.publish(UserEvent("chat", member_id, {"type": "done", "conversation_id": "c"}))
        frames, received = 0, []
        while not received or received[-1]["type"] != "done":
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            frames += 1
            received += [e["data"] for e in message["events"]] if message["type"] == "events" else [message["event"]["data"]]
    kinds = [e["type"] for e in received]
    assert "".join(e["delta"] for e in received if e["type"] == "token") == "".join(deltas)  # each once, in order
    assert "".join(e["delta"] for e in received[: kinds.index("notification")] if e["type"] == "token") == "".join(deltas[: len(deltas) // 2])
    return frames, received


async def test_on_a_busy_loop_token_events_reach_the_socket_joined_once_each_in_order(skald):
    """A loop that comes for each event late (``BUSY_SECONDS``): the socket's writer lets
    passes go by and sends what they published as one frame."""
    import asyncio
    import time

    host = await skald.start()
    member = await host.member("alice")

    async def busy_pass() -> None:
        time.sleep(0.003)  # the rest of a loaded pass
        await asyncio.sleep(0)

    deltas = [f"t{i} " for i in range(40)]
    frames, _ = await _publish_and_receive(host, member, deltas, busy_pass)
    assert frames <= len(deltas) // 2, f"{frames} frames for {len(deltas)} deltas: not joined"


async def test_on_an_idle_loop_each_token_event_goes_out_at_once(skald):
    """Published one a loop pass on a loop that keeps up: no pass is let go by, so each
    token leaves in the pass after it came (the writer never holds a first token)."""
    import asyncio

    host = await skald.start()
    member = await host.member("alice")
    deltas = [f"t{i} " for i in range(40)]
    frames, _ = await _publish_and_receive(host, member, deltas, lambda: asyncio.sleep(0))
    assert frames >= len(deltas) * 0.7, f"{frames} frames for {len(deltas)} deltas: held back"


async def test_the_ui_is_revalidated_on_every_load_so_an_upgrade_shows_at_once(skald):
    """The page and its modules keep their addresses from one version to the next:
    cached for hours, an upgraded server's page ran yesterday's modules beside today's
    (upgrade probe). The browser asks again each time, and an unchanged file is a 304."""
    host = await skald.start()
    client = host.client()
    for path in ("/", "/ui/app.js", "/ui/pages/chat.js", "/ui/app.css"):
        first = await client.get(path)
        assert first.status_code == 200, path
        assert first.headers["cache-control"] == "no-cache", path
        validators = {k: v for k, v in (("If-None-Match", first.headers.get("etag")), ("If-Modified-Since", first.headers.get("last-modified"))) if v}
        assert validators, path
        again = await client.get(path, headers=validators)
        assert again.status_code == 304, (path, again.status_code)

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


async def test_token_events_published_over_loop_passes_reach_the_socket_joined_once_each_in_order(skald):
    """A socket's writer lets two loop passes go by before it sends (``COALESCE_ITERATIONS``):
    token deltas published one a pass arrive joined into fewer frames, every delta
    exactly once and in order, and an event of another kind keeps its place."""
    import asyncio
    import json

    from skald_hookspecs.events import UserEvent

    host = await skald.start()
    member = await host.member("alice")
    member_id = member.member["id"]
    deltas = [f"t{i} " for i in range(60)]
    async with member.ws() as ws:
        await ws.send('{"type": "ping"}')
        assert "pong" in await ws.recv()  # the socket follows the member's bus now

        for index, delta in enumerate(deltas):
            host.core.buses.members.publish(UserEvent("chat", member_id, {
                "type": "token", "conversation_id": "c", "message_id": 1, "channel": "content", "delta": delta,
            }))
            if index == 29:
                host.core.buses.members.publish(UserEvent("chat", member_id, {"type": "notification", "conversation_id": "c"}))
            await asyncio.sleep(0)
        host.core.buses.members.publish(UserEvent("chat", member_id, {"type": "done", "conversation_id": "c"}))

        frames, received = 0, []
        while not received or received[-1]["type"] != "done":
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            frames += 1
            received += [e["data"] for e in message["events"]] if message["type"] == "events" else [message["event"]["data"]]
    kinds = [e["type"] for e in received]
    assert "".join(e["delta"] for e in received if e["type"] == "token") == "".join(deltas)
    before = "".join(e["delta"] for e in received[: kinds.index("notification")] if e["type"] == "token")
    assert before == "".join(deltas[:30])
    assert frames <= len(deltas) // 2, f"{frames} frames for {len(deltas)} deltas: not joined"

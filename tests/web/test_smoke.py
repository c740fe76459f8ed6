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

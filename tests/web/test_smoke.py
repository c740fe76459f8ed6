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

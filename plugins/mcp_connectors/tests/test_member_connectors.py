"""Per-member connectors: a member activates a catalog template with their own secret,
which lives in their encrypted file only and reaches the server as a header; another
member never sees the connector; the runtime follows the member's login; notifications
of a member's connector land in the member's file; members register only remote
servers (when the admin allows it, behind the address check), never a command."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp_support import BASE, DEMO, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send
from skald_host.testing import Reply, ToolCall
from skald_mcp import running

SECRET = "sk-member-4c9e2f-never-in-clear"


def call(tool: str, **args) -> Reply:
    return Reply(tool_calls=[ToolCall(tool, args)])


async def put_template(setup: Setup, url: str, **extra) -> None:
    body = {
        "title": "Web demo",
        "description": "The demo server over HTTP.",
        "transport": "http",
        "url": url,
        "fields": [{"name": "api_key", "label": "API key", "secret": True, "header": "Authorization", "format": "Bearer {value}"}],
        **extra,
    }
    response = await setup.admin.put(f"{BASE}/catalog/web", json=body)
    assert response.status_code == 200, response.text


async def grant_remote(setup: Setup) -> None:
    """Registering one's own remote server is a role capability (``connectors.remote``)."""
    roles = {r["id"]: r for r in (await setup.admin.get("/api/admin/roles")).json()["roles"]}
    capabilities = sorted(set(roles["member"]["capabilities"]) | {"connectors.remote"})
    response = await setup.admin.patch("/api/admin/roles/member", json={"capabilities": capabilities})
    assert response.status_code == 200, response.text


def clear_text_hits(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_a_members_catalog_connector_is_theirs_alone_and_its_secret_stays_in_their_file(setup: Setup):
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    await allow(setup.admin, "web__*")
    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        catalog = (await alice.get(f"{BASE}/mine")).json()["catalog"]
        assert [(t["name"], t["activated"]) for t in catalog] == [("web", False)] and "command" not in catalog[0]

        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": SECRET}})
        assert response.status_code == 201, response.text
        assert response.json()["state"] == "ready" and "web__echo" in response.json()["tools"]

        setup.model.script("model-mcp", [call("web__header", name="authorization"), call("web__shout", text="hey"), Reply("Done.")])
        cid = await new_conversation(alice)
        await send(alice, cid, "Which key did you get?")
        done = calls(await finished(alice, cid))
        assert [(c["status"], c["result"]) for c in done] == [("done", f"Bearer {SECRET}"), ("done", "shouted")]

        # The notification went to alice's own file.
        api = setup.host.core.host_api("mcp")
        alice_id = alice.member["id"]
        events = await eventually(lambda: api.member_events(alice_id), what="the notification event")
        assert events[0]["kind"] == "mcp.notification:web" and events[0]["data"]["connector"] == "web"
        assert events[0]["data"]["notifications"][0]["params"]["data"] == "shouted hey"

        # Bob sees nothing of it, and cannot touch it.
        setup.model.script("model-mcp", [Reply("Hi Bob.")])
        bcid = await new_conversation(bob)
        await send(bob, bcid, "Hi.")
        await finished(bob, bcid)
        assert not any(name.startswith("web__") for name in setup.offered())
        assert (await bob.get(f"{BASE}/my/connectors")).json()["connectors"] == []
        assert (await bob.delete(f"{BASE}/my/connectors/web")).status_code == 404
        assert (await bob.get(f"{BASE}/mine")).json()["own"] == []

        # The secret is in alice's encrypted file only: not in the registry, not in clear on disk.
        def registry_values(conn) -> str:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return repr([conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])

        assert SECRET not in await setup.host.core.registry.run(registry_values)
        assert clear_text_hits(setup.host.settings.data_dir, SECRET.encode()) == []
        assert SECRET not in (await alice.get(f"{BASE}/my/connectors")).text

        # Locked, the runtime stops; unlocked again, it comes back from her file.
        await setup.host.core.users.lock(alice_id)
        assert setup.host.core.host_api("mcp").unlocked_members().count(alice_id) == 0
        runtime = running.runtime
        assert alice_id not in runtime.members.connections and alice_id not in runtime.members.records
        alice = await setup.host.member("alice")

        async def back() -> bool:
            rows = (await alice.get(f"{BASE}/my/connectors")).json()["connectors"]
            return bool(rows) and rows[0]["state"] == "ready"

        await eventually(back, what="alice's connector to reconnect at login")
        setup.model.script("model-mcp", [call("web__echo", text="again"), Reply("Done.")])
        cid = await new_conversation(alice)
        await send(alice, cid, "Echo.")
        assert calls(await finished(alice, cid))[0]["result"] == "echo: again"

        response = await alice.delete(f"{BASE}/my/connectors/web")
        assert response.status_code == 200
        assert (await alice.get(f"{BASE}/my/connectors")).json()["connectors"] == []


async def test_members_cannot_give_a_command_and_remote_servers_need_the_admins_leave_and_a_public_address(setup: Setup):
    alice = await setup.host.member("alice")
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "x", "url": "https://example.org/mcp", "command": sys.executable}})
    assert response.status_code in (400, 403)
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "mine", "url": "http://127.0.0.1:1/mcp"}})
    assert response.status_code == 403 and "not allowed" in response.json()["error"]

    # A command comes only from an admin-vetted template (which runs in the member's
    # sandbox: test_sandbox_runtime.py); a member cannot write one.
    body = {"transport": "stdio", "command": sys.executable, "args": [DEMO]}
    assert (await alice.put(f"{BASE}/catalog/local", json=body)).status_code == 403

    await grant_remote(setup)
    assert (await alice.get(f"{BASE}/mine")).json().get("may_add_remote") is True
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "x", "url": "https://example.org/mcp", "command": sys.executable}})
    assert response.status_code == 400 and "remote servers only" in response.json()["error"]
    for url in ("http://127.0.0.1:9/mcp", "http://[::1]:9/mcp", "http://169.254.169.254/mcp", "http://10.0.0.1/mcp", "http://[::ffff:127.0.0.1]/mcp", "http://localhost:9/mcp",
                # IPv4 carried in IPv6 that a translator delivers: NAT64 (both prefixes), 6to4, IPv4-compatible
                "http://[64:ff9b::a9fe:a9fe]/mcp", "http://[64:ff9b:1::a00:1]/mcp", "http://[2002:7f00:1::1]/mcp", "http://[::a00:1]/mcp"):
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "mine", "url": url}})
        assert response.status_code == 400 and "private or special address" in response.json()["error"], (url, response.text)
    assert (await alice.get(f"{BASE}/my/connectors")).json()["connectors"] == []

    async with HttpDemo() as demo:
        from test_oauth import allow_private

        await allow_private(setup)
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "mine", "url": demo.url, "headers": {"X-Key": "k1"}}})
        assert response.status_code == 201, response.text
        await allow(setup.admin, "mine__*")
        setup.model.script("model-mcp", [call("mine__header", name="x-key"), Reply("Done.")])
        cid = await new_conversation(alice)
        await send(alice, cid, "Key?")
        assert calls(await finished(alice, cid))[0]["result"] == "k1"
        # A name a global connector or another own connector has is refused.
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "mine", "url": demo.url}})
        assert response.status_code == 409


async def test_catalog_templates_are_validated_and_carry_an_update_signal(setup: Setup):
    bad = [
        ({"transport": "http", "url": "ftp://x"}, "http:// or https://"),
        ({"transport": "http", "url": "https://x.org", "fields": [{"name": "k", "env": "K"}]}, "as a header"),
        ({"transport": "http", "url": "https://x.org", "fields": [{"name": "k", "header": "X-K", "format": "no placeholder"}]}, "{value}"),
        ({"transport": "stdio", "command": "x", "fields": [{"name": "k", "header": "X-K"}]}, "environment variable"),
        ({"transport": "http", "url": "https://x.org", "oauth": {"provider": "nobody", "scopes": []}}, "no sign-in provider"),
        ({"transport": "http", "url": "https://x.org", "version": 0}, "version"),
    ]
    for body, message in bad:
        response = await setup.admin.put(f"{BASE}/catalog/t", json=body)
        assert response.status_code == 400 and message in response.json()["error"], (body, response.text)
    assert (await setup.admin.get(f"{BASE}/catalog")).json()["templates"] == []
    alice = await setup.host.member("alice")
    assert (await alice.put(f"{BASE}/catalog/t", json={"transport": "http", "url": "https://x.org"})).status_code == 403

    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {}})
        assert response.status_code == 400 and "API key is required" in response.json()["error"]
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "a\nb"}})
        assert response.status_code == 400 and "single line" in response.json()["error"]
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.status_code == 201
        assert (await alice.get(f"{BASE}/mine")).json()["catalog"][0]["update_available"] is False
        await put_template(setup, demo.url, version=2)
        assert (await alice.get(f"{BASE}/mine")).json()["catalog"][0]["update_available"] is True


async def test_a_members_remote_server_is_checked_on_every_connection_against_dns_rebinding(setup: Setup, monkeypatch):
    """Check F2's rebinding case: the name resolves to a public address when the member
    registers it and to loopback when the connector connects; the connection is refused
    by the check made at connect time (the socket goes to the address that was checked,
    never to one resolved again)."""
    import socket

    alice = await setup.host.member("alice")
    await grant_remote(setup)
    real = socket.getaddrinfo
    answers = {"count": 0}

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.skald.test":
            return real(host, port, *args, **kwargs)
        answers["count"] += 1
        address = "93.184.216.34" if answers["count"] == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    async with HttpDemo() as demo:
        url = f"http://rebind.skald.test:{demo.port}/mcp"
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "rebound", "url": url}})
        assert response.status_code == 201, response.text
        assert response.json()["state"] == "failed" and "private or special address (127.0.0.1)" in str(response.json()["error"]), response.json()
        assert answers["count"] >= 2


async def set_member_capabilities(setup: Setup, add: set[str] = frozenset(), remove: set[str] = frozenset()) -> None:
    roles = {r["id"]: r for r in (await setup.admin.get("/api/admin/roles")).json()["roles"]}
    capabilities = sorted((set(roles["member"]["capabilities"]) | set(add)) - set(remove))
    response = await setup.admin.patch("/api/admin/roles/member", json={"capabilities": capabilities})
    assert response.status_code == 200, response.text


async def test_a_template_is_open_to_the_members_the_admin_chose_and_revoking_it_withdraws_its_tools_at_once(setup: Setup):
    """Per-template access: a template given to alice alone is invisible to bob and
    refused to him; alice's activation works until the admin takes the template from
    her, and then a tool she was offered a moment before is refused when it runs (no
    bus, no later round). A member created later receives a template marked
    ``grant_by_default``. Without the role's ``connectors.activate`` nobody activates."""
    from skald_hookspecs import ToolContext, ToolError

    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await put_template(setup, demo.url, access=[alice_id])
        status = (await setup.admin.get(f"{BASE}/catalog")).json()["templates"][0]
        assert status["access"] == [alice_id] and status["grant_by_default"] is True
        assert (await bob.get(f"{BASE}/mine")).json()["catalog"] == []
        response = await bob.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.status_code == 404
        assert [t["name"] for t in (await alice.get(f"{BASE}/mine")).json()["catalog"]] == ["web"]
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.status_code == 201 and "web__echo" in response.json()["tools"], response.text

        offered = {t.name: t for t in running.runtime.member_tools(alice_id)}
        echo = offered["web__echo"]
        assert await echo.run({"text": "hi"}, ToolContext(member_id=alice_id)) == "echo: hi"
        response = await setup.admin.put(f"{BASE}/catalog/web/access", json={"members": [bob.member["id"]]})
        assert response.status_code == 200 and response.json()["access"] == [bob.member["id"]]
        # Synchronous: the answer above came after the in-memory set was replaced.
        assert not any(t.name.startswith("web__") for t in running.runtime.member_tools(alice_id))
        try:
            await echo.run({"text": "hi"}, ToolContext(member_id=alice_id))
            raise AssertionError("a revoked template's tool ran")
        except ToolError as exc:
            assert "not available" in str(exc)
        assert (await alice.get(f"{BASE}/mine")).json()["catalog"] == []

        # Default access for a member created later (the second moment).
        await setup.admin.put(f"{BASE}/catalog/web/access", json={"members": []})
        carol = await setup.host.member("carol")
        await eventually(
            lambda: _has(setup, carol.member["id"]), what="carol to receive the template marked grant_by_default"
        )

        # ``null``: every member the plugin is granted to.
        response = await setup.admin.put(f"{BASE}/catalog/web/access", json={"members": None})
        assert response.status_code == 200 and response.json()["access"] is None
        assert [t["name"] for t in (await bob.get(f"{BASE}/mine")).json()["catalog"]] == ["web"]

        # Activation is a role capability.
        await set_member_capabilities(setup, remove={"connectors.activate"})
        mine = (await bob.get(f"{BASE}/mine")).json()
        assert mine["may_activate"] is False and mine["may_add_remote"] is False
        response = await bob.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.status_code == 403 and "not allowed" in response.json()["error"]
        await set_member_capabilities(setup, add={"connectors.activate"})
        response = await bob.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.status_code == 201, response.text


async def _has(setup: Setup, member_id: str) -> bool:
    templates = (await setup.admin.get(f"{BASE}/catalog")).json()["templates"]
    return member_id in (templates[0]["access"] or [])


async def test_a_template_moved_elsewhere_gets_no_members_key_until_they_activate_it_again(setup: Setup):
    """The admin re-saving a template with another address (a tempted admin) used to
    send every member's key there at their next login."""
    bob = await setup.host.member("bob")
    async with HttpDemo() as demo, HttpDemo() as elsewhere:
        await put_template(setup, demo.url)
        assert (await bob.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": SECRET}})).status_code == 201
        await put_template(setup, elsewhere.url)  # same name, same version: only the address moved
        await setup.host.core.users.lock(bob.member["id"])
        bob = await setup.host.member("bob")

        async def refused() -> bool:
            rows = (await bob.get(f"{BASE}/my/connectors")).json()["connectors"]
            return bool(rows) and rows[0]["state"] == "failed" and "different address" in (rows[0]["error"] or "")

        await eventually(refused, what="the moved template to be refused")
        # Activated again, by the member, it goes where the template now points.
        assert (await bob.delete(f"{BASE}/my/connectors/web")).status_code in (200, 204)
        again = await bob.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": SECRET}})
        assert again.status_code == 201 and again.json()["state"] == "ready", again.text


async def test_a_members_failing_connector_is_logged_without_its_name_or_address(setup: Setup, caplog):
    """The log is the admin's to read: a member's connector name and address are theirs
    (keys often ride in the address's query), so its failure is logged by cause alone."""
    import logging
    import socket

    from test_oauth import allow_private

    alice = await setup.host.member("alice")
    await grant_remote(setup)
    await allow_private(setup)
    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    caplog.set_level(logging.INFO, logger="skald_mcp")
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "bank-7d1f", "url": f"http://127.0.0.1:{port}/mcp?key=KEY7d1f"}})
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "failed", response.json()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("skald_mcp")]
    assert any(line.startswith("connector of a member: ") for line in lines), lines
    assert not [line for line in lines if "7d1f" in line], lines

"""The per-member runtime inside the sandbox: a member's stdio connector (an admin-vetted
template) runs in the member's sandbox through ``HostApi.sandbox_spawn``, never on the
bare host: as the member's uid, without the host's tree, with the member's value in its
environment; one process for every call; its notifications land in the member's file;
it stops when the member's file closes."""

from __future__ import annotations

import json
import os
from typing import AsyncIterator

import pytest
import pytest_asyncio

from mcp_support import API_KEY, BASE, MODEL, Setup, allow, calls, configure_model, eventually, finished, new_conversation, send
from skald_host.testing import Reply, ScriptedModelServer, SkaldHarness, ToolCall
from skald_mcp import running
from tiny_server import SOURCE

HOST_ONLY = os.path.dirname(os.path.abspath(__file__))  # exists on the host, not in any sandbox


@pytest_asyncio.fixture(params=["bubblewrap", "docker"])
async def sandboxed(skald: SkaldHarness, request) -> AsyncIterator[Setup]:
    async with ScriptedModelServer(models=(MODEL,), api_key=API_KEY) as model:
        try:
            settings = skald.settings(sandbox={"backend": request.param})  # the image: the settings' default
            host = await skald.start(settings=settings, use_entry_points=True, enable=["mcp"])
            try:
                await host.core.sandbox.backend()
            except Exception as exc:  # noqa: BLE001
                pytest.skip(f"no {request.param} sandbox here: {exc}")
            admin = await host.admin()
            await configure_model(admin, model)
            yield Setup(host, admin, model, skald)
        finally:
            await skald.close()


async def test_a_members_stdio_connector_runs_in_their_sandbox(sandboxed: Setup):
    setup = sandboxed
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    template = {
        "title": "Tiny",
        "transport": "stdio",
        "command": "/usr/bin/python3",
        "args": ["-c", SOURCE, HOST_ONLY],
        "fields": [{"name": "token", "label": "Token", "env": "DEMO_TOKEN"}],
    }
    assert (await setup.admin.put(f"{BASE}/catalog/tiny", json=template)).status_code == 200
    response = await alice.post(f"{BASE}/my/connectors", json={"template": "tiny", "values": {"token": "t-42"}})
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "ready" and response.json()["tools"] == ["tiny__whoami"], response.json()

    await allow(setup.admin, "tiny__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("tiny__whoami", {})]), Reply(tool_calls=[ToolCall("tiny__whoami", {})]), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Who are you?")
    done = calls(await finished(alice, cid))
    assert [c["status"] for c in done] == ["done", "done"], done
    first, second = json.loads(done[0]["result"]), json.loads(done[1]["result"])
    spec = await setup.host.core.sandbox.spec_for(alice_id)
    assert first["uid"] == spec.uid and first["token"] == "t-42"
    assert first["sees_host_tree"] is False and first["cwd"] == spec.home
    assert first["pid"] == second["pid"]  # one long-lived process served both calls

    api = setup.host.core.host_api("mcp")
    events = await eventually(lambda: api.member_events(alice_id), what="the notification in alice's file")
    assert events[0]["data"]["connector"] == "tiny" and events[0]["data"]["notifications"][0]["params"]["data"] == "whoami was called"

    async def alive() -> bool:
        result = await setup.host.core.sandbox.execute(alice_id, f"kill -0 {first['pid']} && echo alive")
        return "alive" in result.output

    shared_pid_namespace = (await setup.host.core.sandbox.backend())[0] == "docker"  # bwrap: one per command
    if shared_pid_namespace:
        assert await alive()
    await setup.host.core.users.lock(alice_id)
    assert alice_id not in running.runtime.members.connections
    if shared_pid_namespace:
        await eventually(lambda: _not(alive()), what="the sandboxed server to stop at lock")
    else:
        backend = (await setup.host.core.sandbox.backend())[1]
        await eventually(lambda: not backend._running.get(alice_id), what="the sandboxed server to stop at lock")


async def _not(check) -> bool:
    return not await check


async def test_a_local_script_connector_is_installed_by_content_hash_in_the_sandbox(sandboxed: Setup):
    setup = sandboxed
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    template = {"transport": "stdio", "command": "/usr/bin/python3", "args": ["server.py", HOST_ONLY], "files": {"server.py": SOURCE, "lib/notes.txt": "v1"}}
    assert (await setup.admin.put(f"{BASE}/catalog/local", json=template)).status_code == 200
    mine = (await alice.get(f"{BASE}/mine")).json()["catalog"]
    assert mine[0]["files"] == ["lib/notes.txt", "server.py"]  # names only: the content is the admin's
    response = await alice.post(f"{BASE}/my/connectors", json={"template": "local"})
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "ready" and response.json()["install"] == "installed", response.json()
    listing = await setup.host.core.sandbox.execute(alice_id, "cat .skald-connectors/local/lib/notes.txt")
    assert listing.output.strip() == "v1"

    await allow(setup.admin, "local__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("local__whoami", {})]), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Who?")
    whoami = json.loads(calls(await finished(alice, cid))[0]["result"])
    assert whoami["cwd"].endswith("/.skald-connectors/local") and whoami["sees_host_tree"] is False

    async def state_after_login() -> dict:
        await setup.host.core.users.lock(alice_id)
        member = await setup.host.member("alice")

        async def ready() -> dict | None:
            rows = (await member.get(f"{BASE}/my/connectors")).json()["connectors"]
            return rows[0] if rows and rows[0]["state"] in ("ready", "failed") else None

        return await eventually(ready, what="the connector after login")

    assert (await state_after_login())["install"] == "unchanged"  # same hash: nothing copied or installed
    template["files"] = {"server.py": SOURCE, "lib/notes.txt": "v2"}
    template["version"] = 2
    assert (await setup.admin.put(f"{BASE}/catalog/local", json=template)).status_code == 200
    assert (await state_after_login())["install"] == "installed"
    listing = await setup.host.core.sandbox.execute(alice_id, "cat .skald-connectors/local/lib/notes.txt")
    assert listing.output.strip() == "v2"

    # Dependencies are installed in the sandbox only; without npm there, the error says so.
    has_npm = "yes" in (await setup.host.core.sandbox.execute(alice_id, "command -v npm >/dev/null && echo yes || echo no")).output
    template["files"] = {"server.js": "", "package.json": "{}"}
    assert (await setup.admin.put(f"{BASE}/catalog/nodejs", json=template)).status_code == 200
    response = await alice.post(f"{BASE}/my/connectors", json={"template": "nodejs"})
    if not has_npm:
        assert response.json()["state"] == "failed" and "npm is not installed in the sandbox" in response.json()["error"]


async def test_template_files_are_validated(setup: Setup):
    for files, message in (({"../x": ""}, "plain relative path"), ({"/etc/x": ""}, "plain relative path"), ({"a": 1}, "must be text"), ({"a": "x" * (512 * 1024 + 1)}, "at most 512 KiB")):
        response = await setup.admin.put(f"{BASE}/catalog/t", json={"transport": "stdio", "command": "python3", "files": files})
        assert response.status_code == 400 and message in response.json()["error"], (files, response.text)
    response = await setup.admin.put(f"{BASE}/catalog/t", json={"transport": "http", "url": "https://x.org", "files": {"a": ""}})
    assert response.status_code == 400 and "stdio" in response.json()["error"]


@pytest.mark.parametrize("deliver", ["access_token", "authorized_user"])
async def test_an_oauth_stdio_connector_gets_its_credential_by_environment_in_the_sandbox(sandboxed: Setup, deliver: str):
    """A stdio template that signs in with OAuth: after the copy-paste flow, the
    credential reaches the server in the sandbox as the environment variable the
    template names (the access token, or an ``authorized_user`` JSON with the refresh
    token for a server that refreshes by itself), never as a file."""
    from test_oauth import allow_private, browser, put_provider
    from oauth_standin import CLIENT_ID, CLIENT_SECRET, AuthorizationServer
    from urllib.parse import parse_qs, urlsplit

    setup = sandboxed
    await allow_private(setup)
    alice = await setup.host.member("alice")
    async with AuthorizationServer() as idp:
        assert (await put_provider(setup, idp.issuer)).status_code == 200
        template = {
            "title": "Tiny mail", "transport": "stdio", "command": "/usr/bin/python3", "args": ["-c", SOURCE, HOST_ONLY],
            "oauth": {"provider": "test-idp", "scopes": ["mail.read"], "env": "DEMO_TOKEN", "deliver": deliver},
        }
        response = await setup.admin.put(f"{BASE}/catalog/tiny", json=template)
        assert response.status_code == 200, response.text
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "tiny"})
        assert response.status_code == 201 and response.json()["state"] == "needs_oauth", response.text
        url = (await alice.post(f"{BASE}/my/connectors/tiny/oauth/start")).json()["url"]
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        assert "resource" not in query  # a stdio server has no address to name
        code = await browser(url)
        response = await alice.post(f"{BASE}/my/connectors/tiny/oauth/complete", json={"state": query["state"], "code": code})
        assert response.status_code == 200 and response.json()["state"] == "ready", response.text
        await allow(setup.admin, "tiny__*")
        setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("tiny__whoami", {})]), Reply("Done.")])
        cid = await new_conversation(alice)
        await send(alice, cid, "Who?")
        token = json.loads(calls(await finished(alice, cid))[0]["result"])["token"]
        if deliver == "access_token":
            assert token == idp.access_tokens[-1]
        else:
            given = json.loads(token)
            assert given["type"] == "authorized_user" and given["refresh_token"] in idp.refresh_tokens
            assert (given["client_id"], given["client_secret"]) == (CLIENT_ID, CLIENT_SECRET) and given["token_uri"].endswith("/token")


async def test_a_node_connector_is_installed_with_npm_and_runs_in_the_sandbox(sandboxed: Setup):
    """A local-script connector in JavaScript with a package.json and its lockfile: the
    reconciler runs ``npm ci`` in the member's sandbox (offline here: the lockfile needs
    nothing fetched) and the server runs on the sandbox's node. The image ships node,
    npm and pip; the bubblewrap backend runs the host's ``/usr`` instead (whose node may
    not even start there: it cannot read the host's ``/etc/ssl/openssl.cnf`` inside
    bwrap on this machine), so this is the Docker backend's test."""
    from tiny_server import NODE_SOURCE, PACKAGE_JSON, PACKAGE_LOCK

    setup = sandboxed
    if (await setup.host.core.sandbox.backend())[0] != "docker":
        pytest.skip("the sandbox image (Docker) is what ships node, npm and pip")
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    tools = (await setup.host.core.sandbox.execute(alice_id, "for t in node npm; do command -v $t; done; python3 -m pip --version >/dev/null && echo pip")).output
    if "npm" not in tools:
        pytest.skip(f"no npm in this sandbox ({(await setup.host.core.sandbox.backend())[0]})")
    assert "pip" in tools  # the image ships pip for requirements.txt too
    files = {"server.js": NODE_SOURCE, "package.json": PACKAGE_JSON, "package-lock.json": PACKAGE_LOCK}
    template = {"transport": "stdio", "command": "node", "args": ["server.js"], "files": files}
    assert (await setup.admin.put(f"{BASE}/catalog/nodetiny", json=template)).status_code == 200
    response = await alice.post(f"{BASE}/my/connectors", json={"template": "nodetiny"})
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "ready" and response.json()["install"] == "installed", response.json()
    await allow(setup.admin, "nodetiny__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("nodetiny__whoami", {})]), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Who?")
    whoami = json.loads(calls(await finished(alice, cid))[0]["result"])
    spec = await setup.host.core.sandbox.spec_for(alice_id)
    assert whoami["runtime"].startswith("node v") and whoami["uid"] == spec.uid
    assert whoami["cwd"].endswith("/.skald-connectors/nodetiny")

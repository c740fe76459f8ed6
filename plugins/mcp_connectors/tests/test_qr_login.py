"""QR / device login through the ``login_status`` tool contract: the connector runs
before it is linked (it has to produce the code), Skald polls ``login_status`` itself
(never the agent), the connector's tools reach the member only once it says ``ready``,
and a reset (its ``logout``) withdraws them to link another device. The page shows the
QR code and follows the state in a real browser."""

from __future__ import annotations

import pytest

from mcp import Client
from mcp_support import BASE, HttpDemo, Setup, allow, finished, new_conversation, send
from skald_host.testing import Reply
from skald_host.testing.host import MEMBER_PASSWORD
from skald_mcp import running
from test_connectors_page import TAG


async def phone_scans(url: str) -> None:
    async with Client(url, mode="legacy", cache=None) as phone:
        await phone.call_tool("scan", {})


async def offered_after_a_turn(setup: Setup, member) -> set[str]:
    setup.model.script("model-mcp", [Reply("Hi.")])
    cid = await new_conversation(member)
    await send(member, cid, "Hi.")
    await finished(member, cid)
    return setup.offered()


async def test_a_qr_connector_offers_its_tools_only_once_linked_and_reset_unlinks_it(setup: Setup):
    alice = await setup.host.member("alice")
    await allow(setup.admin, "chat__*")
    async with HttpDemo() as demo:
        assert (await setup.admin.put(f"{BASE}/catalog/chat", json={"transport": "http", "url": demo.url, "login": "qr"})).status_code == 200
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "chat"})
        assert response.status_code == 201, response.text
        assert response.json()["state"] == "needs_login" and response.json()["tools"] == [] and response.json()["login"] == "qr"

        status = (await alice.post(f"{BASE}/my/connectors/chat/login/check")).json()
        assert status["state"] == "need_scan" and status["qr"].startswith("data:image/png;base64,")
        assert (await alice.get(f"{BASE}/my/connectors/chat/login/status")).json() == {**status, "running": True}  # as known
        assert not any(n.startswith("chat__") for n in await offered_after_a_turn(setup, alice))

        await phone_scans(demo.url)
        status = (await alice.post(f"{BASE}/my/connectors/chat/login/check")).json()
        assert status == {"state": "ready", "qr": None, "message": "Linked."}
        assert (await alice.get(f"{BASE}/my/connectors/chat/login/status")).json() == {**status, "running": True}
        offered = await offered_after_a_turn(setup, alice)
        assert "chat__echo" in offered and "chat__login_status" not in offered and "chat__logout" not in offered

        status = (await alice.post(f"{BASE}/my/connectors/chat/login/reset")).json()
        assert status["state"] == "need_scan"
        assert not any(n.startswith("chat__") for n in await offered_after_a_turn(setup, alice))
        record = await setup.host.core.host_api("mcp").member_secret_get(alice.member["id"], "connector:chat")
        assert '"state": "needs_login"' in record  # kept in her file: the next login starts unlinked


async def test_polling_the_login_status_of_a_stopped_connector_starts_nothing_and_writes_nothing(setup: Setup, monkeypatch):
    """``GET …/login/status`` is what the page polls: it used to start a connector that
    was not running (``connect``) and write the state ``login_status`` answered into the
    member's file. It reads now; ``POST …/login/check`` (which the page sends once as it
    draws the panel) starts the connector and records what it says."""
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        assert (await setup.admin.put(f"{BASE}/catalog/chat", json={"transport": "http", "url": demo.url, "login": "qr"})).status_code == 200
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "chat"})).status_code == 201
        members = running.runtime.members
        await members.disconnect(alice_id, "chat")
        # Linked as far as her record knows, not linked as far as the server knows: asking
        # the server would write "needs_login".
        members.records[alice_id]["chat"]["state"] = "ready"
        writes: list[str] = []
        real_set = members.host.member_secret_set

        async def counted(member_id, secret, value):
            writes.append(secret)
            return await real_set(member_id, secret, value)

        monkeypatch.setattr(members.host, "member_secret_set", counted)
        for _ in range(3):
            response = await alice.get(f"{BASE}/my/connectors/chat/login/status")
            assert response.status_code == 200, response.text
            assert response.json() == {"state": "stopped", "qr": None, "message": "The connector is not running. Restart it to link a device.", "running": False}
        assert members.connections.get(alice_id, {}).get("chat") is None  # not started
        assert writes == [] and members.records[alice_id]["chat"]["state"] == "ready"

        status = (await alice.post(f"{BASE}/my/connectors/chat/login/check")).json()  # the POST starts it and records
        assert status["state"] == "need_scan", status
        assert members.connections[alice_id]["chat"].state == "ready"
        assert "connector:chat" in writes and members.records[alice_id]["chat"]["state"] == "needs_login"


async def test_a_global_connectors_login_tools_never_reach_the_agent(setup: Setup):
    """The login contract's tools are Skald's to call on a global connector too: one
    whose server has them (demo_server.py) used to hand ``demo__logout`` to every
    granted member's agent, which could unlink the device everyone shares."""
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    added = await setup.add_stdio(access=[alice_id])
    assert {"login_status", "logout"} <= {t["name"] for t in added["tools"]}  # the server has them
    login_tools = {"demo__login_status", "demo__logout"}
    offered = {t["exposed_as"] for t in (await setup.server("demo"))["tools"] if t["offered"]}
    assert "demo__echo" in offered and not offered & login_tools
    names = {t.name for t in running.runtime.member_tools(alice_id)}
    assert "demo__echo" in names and not names & login_tools
    wire = await offered_after_a_turn(setup, alice)
    assert "demo__echo" in wire and not wire & login_tools


async def test_a_members_connector_without_the_login_contract_offers_its_own_logout(setup: Setup):
    """Only a ``"login": "qr"`` connector's ``login_status`` and ``logout`` are Skald's:
    on a member's connector without it they are the server's tools like any other (a
    mail server's real ``logout``), and reach the agent as pinned."""
    from test_member_connectors import grant_remote
    from test_oauth import allow_private

    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    async with HttpDemo() as demo:
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "mine", "url": demo.url}})
        assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        assert {"mine__echo", "mine__login_status", "mine__logout"} <= set(response.json()["tools"])
        assert {"mine__login_status", "mine__logout"} <= {t.name for t in running.runtime.member_tools(alice.member["id"])}


async def test_bad_login_status_answers_are_errors_not_content(setup: Setup):
    from skald_mcp.spec import SpecError, parse_login_status

    assert parse_login_status('{"state": "need_scan", "qr": "javascript:alert(1)"}')["qr"] is None
    assert parse_login_status('{"state": "ready", "qr": "data:image/png;base64,AAAA"}')["qr"] is None
    for text in ("not json", '{"state": "owned"}', "[]"):
        with pytest.raises(SpecError):
            parse_login_status(text)


async def test_the_qr_panel_shows_the_code_and_follows_the_link_in_a_browser(setup: Setup, plugin_browser):
    await setup.host.create_member("alice")
    async with HttpDemo() as demo:
        assert (await setup.admin.put(f"{BASE}/catalog/chat", json={"transport": "http", "url": demo.url, "login": "qr"})).status_code == 200
        page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
        await page.locator(f"{TAG} form.mcp-template[data-name=chat] button[type=submit]").click()
        # Linking the device is on the connector's own page.
        await page.locator(f"{TAG} .mcp-own-connector[data-name=chat] a.mcp-sign-in-link").click()
        panel = page.locator(f"{TAG} section.mcp-detail[data-name=chat] .mcp-qr")
        await panel.locator("img[src^='data:image/png;base64,']").wait_for(timeout=20_000)
        await phone_scans(demo.url)
        await page.locator(f"{TAG} .mcp-qr[data-state=ready]").wait_for(timeout=20_000)
        # The page's own lines follow the link, not only the panel.
        detail = page.locator(f"{TAG} section.mcp-detail[data-name=chat]")
        await detail.locator(".mcp-state").filter(has_text="running").wait_for(timeout=20_000)
        await detail.locator(".mcp-tools").filter(has_text="chat__echo").wait_for(timeout=10_000)
        assert await panel.locator("img").is_hidden()
        await panel.locator("button.mcp-login-reset").click()
        await page.locator(f"{TAG} .mcp-qr[data-state=need_scan]").wait_for(timeout=20_000)
        assert running.runtime is not None

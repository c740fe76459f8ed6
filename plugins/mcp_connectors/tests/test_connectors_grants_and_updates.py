"""What a page drawn a while ago may and may not do, and what the member is told: a grant
checkbox changes its own member only (a stale page must not undo another member's
grant); withheld tools come with their new definitions; a device login moves the
connector to ready whoever watches it; a withdrawn template says so; a newer template
version is an update in place; deactivating asks first."""

from __future__ import annotations

from mcp import Client
from mcp_support import BASE, HttpDemo, Setup, eventually, shown
from skald_hookspecs import ToolContext
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from skald_mcp import running
from test_connectors_page import TAG
from test_member_connectors import put_template


async def test_a_grant_from_a_stale_page_changes_its_own_member_and_no_other(setup: Setup):
    """The probe's case: the admin ticks carol in another tab, then unticks bob on a
    page drawn before; carol keeps the connector (and the template)."""
    bob = (await setup.host.member("bob")).member["id"]
    carol = (await setup.host.member("carol")).member["id"]
    await setup.add_stdio(access=[bob])
    assert (await setup.admin.put(f"{BASE}/servers/demo/access/{carol}")).json()["access"] == sorted([bob, carol])
    response = await setup.admin.delete(f"{BASE}/servers/demo/access/{bob}")
    assert response.status_code == 200 and response.json()["access"] == [carol]
    assert running.runtime.access["demo"] == {carol}  # before the answer came back
    assert (await setup.admin.put(f"{BASE}/servers/nothing/access/{bob}")).status_code == 404

    await setup.admin.put(f"{BASE}/catalog/web", json={"transport": "http", "url": "https://x.org", "access": [bob]})
    assert (await setup.admin.put(f"{BASE}/catalog/web/access/{carol}")).json()["access"] == sorted([bob, carol])
    assert (await setup.admin.delete(f"{BASE}/catalog/web/access/{bob}")).json()["access"] == [carol]
    # Open to everyone: one member cannot be taken out without a list of the others.
    await setup.admin.put(f"{BASE}/catalog/web/access", json={"members": None})
    response = await setup.admin.delete(f"{BASE}/catalog/web/access/{bob}")
    assert response.status_code == 409 and "open to everyone" in response.json()["error"]
    assert (await setup.admin.put(f"{BASE}/catalog/web/access/{bob}")).json()["access"] is None
    # The whole-list route stays for API clients that mean it.
    await setup.set_access("demo", [bob])
    assert running.runtime.access["demo"] == {bob}


async def test_unticking_on_a_stale_connectors_page_keeps_a_grant_made_since_in_a_browser(setup: Setup, plugin_browser):
    bob = (await setup.host.member("bob")).member["id"]
    carol = (await setup.host.member("carol")).member["id"]
    await setup.add_stdio(access=[bob])
    page = await plugin_browser.open(setup.host, setup.host.admin_username, ADMIN_PASSWORD, "mcp", "connectors")
    box = page.locator(f"{TAG} tr.mcp-server[data-name=demo] input[data-member='{bob}']")
    await box.wait_for(timeout=10_000)
    assert (await setup.admin.put(f"{BASE}/servers/demo/access/{carol}")).status_code == 200  # the other tab
    await box.uncheck()
    await eventually(lambda: running.runtime.access["demo"] == {carol}, what="bob's grant alone to go")
    await page.locator(f"{TAG} tr.mcp-server[data-name=demo] input[data-member='{carol}']:checked").wait_for(timeout=10_000)


async def test_withheld_tools_show_their_new_description_and_schema(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await setup.add_stdio(access=[alice_id])
    mutate = next(t for t in running.runtime.member_tools(alice_id) if t.name == "demo__mutate")
    assert await mutate.run({}, ToolContext(member_id=alice_id)) == "mutated"

    async def withheld() -> list:
        return (await setup.server("demo"))["pending_tools"]

    (echo,) = await eventually(withheld, what="the changed tool to be withheld")
    assert echo["name"] == "echo" and "also send it to an attacker" in echo["description"]
    assert "loud" in echo["input_schema"]["properties"]


async def _mutate(member_id: str, tool: str) -> None:
    """The server changes ``echo`` (again): a new definition at each call."""
    mutate = next(t for t in running.runtime.member_tools(member_id) if t.name == tool)
    assert await mutate.run({}, ToolContext(member_id=member_id)) == "mutated"


def _withheld_at(change: int):
    """A check that a status answer withholds ``echo`` as its ``change``-th version."""
    return lambda status: any(t["name"] == "echo" and f"(change {change})" in t["description"] for t in status["pending_tools"])


async def test_an_admins_accept_pins_the_tools_the_page_showed_and_refuses_a_change_made_since(setup: Setup):
    """The race: the page is drawn with echo's first change, the server changes echo
    again, the click arrives: nothing is pinned (409), echo stays withheld; the page,
    drawn again, accepts what it now shows."""
    alice_id = (await setup.host.member("alice")).member["id"]
    await setup.add_stdio(access=[alice_id])
    accept = f"{BASE}/servers/demo/accept"
    await _mutate(alice_id, "demo__mutate")
    drawn = await eventually(lambda: _first(setup.server("demo"), _withheld_at(1)), what="the first change to be withheld")
    await _mutate(alice_id, "demo__mutate")
    await eventually(lambda: _first(setup.server("demo"), _withheld_at(2)), what="the second change to be listed")
    pins = dict(running.runtime.pins["demo"])

    response = await setup.admin.post(accept, json=shown(drawn))
    assert response.status_code == 409 and response.json()["code"] == "mcp.err_tools_changed", response.text
    assert "changed again since the page was drawn (echo)" in response.json()["error"]
    assert running.runtime.pins["demo"] == pins and "demo__echo" not in {t.name for t in running.runtime.member_tools(alice_id)}
    # An API client that names nothing is refused too: it would accept blind.
    response = await setup.admin.post(accept)
    assert response.status_code == 400 and response.json()["code"] == "mcp.err_accept_tools_missing" and response.json()["field"] == "tools"
    assert running.runtime.pins["demo"] == pins

    response = await setup.admin.post(accept, json=shown(await setup.server("demo")))
    assert response.status_code == 200 and response.json()["pending"] == [], response.text
    (echo,) = [t for t in running.runtime.member_tools(alice_id) if t.name == "demo__echo"]
    assert "(change 2)" in echo.description


async def test_a_members_accept_pins_the_tools_their_page_showed_and_refuses_a_change_made_since(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})).status_code == 201
        status = lambda: _json(alice.get(f"{BASE}/my/connectors/web"))  # noqa: E731
        await _mutate(alice_id, "web__mutate")
        drawn = await eventually(lambda: _first(status(), _withheld_at(1)), what="the first change to be withheld")
        await _mutate(alice_id, "web__mutate")
        await eventually(lambda: _first(status(), _withheld_at(2)), what="the second change to be listed")
        pins = dict(running.runtime.members.records[alice_id]["web"]["pins"])

        response = await alice.post(f"{BASE}/my/connectors/web/accept", json=shown(drawn))
        assert response.status_code == 409 and response.json()["code"] == "mcp.err_tools_changed", response.text
        assert "seit dem Anzeigen der Seite wieder geändert (echo)" in response.json()["error"]  # in the reader's language
        assert running.runtime.members.records[alice_id]["web"]["pins"] == pins
        assert "web__echo" not in {t.name for t in running.runtime.member_tools(alice_id)}
        response = await alice.post(f"{BASE}/my/connectors/web/accept", json={})
        assert response.status_code == 400 and response.json()["field"] == "tools"

        response = await alice.post(f"{BASE}/my/connectors/web/accept", json=shown(await status()))
        assert response.status_code == 200 and response.json()["pending"] == [] and "web__echo" in response.json()["tools"], response.text
        (echo,) = [t for t in running.runtime.member_tools(alice_id) if t.name == "web__echo"]
        assert "(change 2)" in echo.description


async def test_an_accept_clicked_after_the_tool_changed_again_shows_the_new_version_in_a_browser(setup: Setup, plugin_browser):
    """The admin's table: the click after a second change is refused, says why, and the
    row shows the second version; clicking again accepts it."""
    alice_id = (await setup.host.member("alice")).member["id"]
    await setup.add_stdio(access=[alice_id])
    await _mutate(alice_id, "demo__mutate")
    await eventually(lambda: _first(setup.server("demo"), _withheld_at(1)), what="the first change to be withheld")
    page = await plugin_browser.open(setup.host, setup.host.admin_username, ADMIN_PASSWORD, "mcp", "connectors")
    row = page.locator(f"{TAG} tr.mcp-server[data-name=demo]")
    description = row.locator(".mcp-withheld-tool[data-tool=echo] .mcp-withheld-description")
    await description.filter(has_text="(change 1)").wait_for(timeout=10_000)
    await _mutate(alice_id, "demo__mutate")
    await eventually(lambda: _first(setup.server("demo"), _withheld_at(2)), what="the second change to be listed")

    await row.get_by_role("button", name="Accept changed tools").click()
    await page.locator(f"{TAG} .mcp-status[data-status=servers]").filter(has_text="changed again since the page was drawn").wait_for(timeout=10_000)
    await description.filter(has_text="(change 2)").wait_for(timeout=10_000)
    assert "demo__echo" not in {t.name for t in running.runtime.member_tools(alice_id)}
    await row.get_by_role("button", name="Accept changed tools").click()
    await row.locator(".mcp-withheld-tool").wait_for(state="detached", timeout=10_000)
    assert "demo__echo" in {t.name for t in running.runtime.member_tools(alice_id)}


async def test_a_member_accepts_their_connectors_changed_tools_on_its_page_in_a_browser(setup: Setup, plugin_browser):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})).status_code == 201
        await _mutate(alice_id, "web__mutate")
        await eventually(lambda: running.runtime.members.status(alice_id, "web")["pending"], what="echo to be withheld")
        page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
        own = page.locator(f"{TAG} .mcp-own-connector[data-name=web]")
        await own.locator(".mcp-withheld-tool[data-tool=echo]").filter(has_text="(change 1)").wait_for(timeout=10_000)
        await _mutate(alice_id, "web__mutate")
        await eventually(lambda: "(change 2)" in str(running.runtime.members.status(alice_id, "web")["pending_tools"]), what="the second change")

        await own.get_by_role("button", name="Accept changed tools").click()
        await page.locator(f"{TAG} .mcp-status[data-status=own]").filter(has_text="changed again since the page was drawn").wait_for(timeout=10_000)
        await own.locator(".mcp-withheld-tool[data-tool=echo]").filter(has_text="(change 2)").wait_for(timeout=10_000)
        await own.locator("a.mcp-open").click()  # the connector's own page accepts as well
        detail = page.locator(f"{TAG} section.mcp-detail[data-name=web]")
        await detail.get_by_role("button", name="Accept changed tools").click()
        await detail.locator(".mcp-withheld-tool").wait_for(state="detached", timeout=10_000)
        await detail.locator(".mcp-tools").filter(has_text="web__echo").wait_for(timeout=10_000)
        assert "web__echo" in {t.name for t in running.runtime.member_tools(alice_id)}


async def _json(response):
    answer = await response
    assert answer.status_code == 200, answer.text
    return answer.json()


async def _first(status, check):
    """The status answer once ``check`` holds for it, else None (for ``eventually``)."""
    body = await status
    return body if check(body) else None


async def test_a_device_linked_while_nobody_looks_makes_the_connector_ready(setup: Setup):
    alice = await setup.host.member("alice")
    async with HttpDemo() as demo:
        assert (await setup.admin.put(f"{BASE}/catalog/chat", json={"transport": "http", "url": demo.url, "login": "qr"})).status_code == 200
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "chat"})).json()["state"] == "needs_login"
        async with Client(demo.url, mode="legacy", cache=None) as phone:
            await phone.call_tool("scan", {})

        async def ready() -> bool:
            body = (await alice.get(f"{BASE}/my/connectors/chat")).json()  # never login/status
            return body["state"] == "ready" and "chat__echo" in body["tools"]

        await eventually(ready, what="the connector to be ready after the scan")
        assert "chat__echo" in {t.name for t in running.runtime.member_tools(alice.member["id"])}


async def test_a_withdrawn_template_says_so_instead_of_running(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await put_template(setup, demo.url, access=[alice_id])
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.json()["state"] == "ready" and response.json()["tools"]
        assert (await setup.admin.delete(f"{BASE}/catalog/web/access/{alice_id}")).status_code == 200
        body = (await alice.get(f"{BASE}/my/connectors/web")).json()
        assert body["state"] == "withdrawn" and body["tools"] == [] and body["update"] is None
        (own,) = (await alice.get(f"{BASE}/mine")).json()["own"]
        assert own["state"] == "withdrawn" and own["tools"] == []
        assert "withdrawn" in (await alice.get(f"{BASE}/mine")).json()["strings"]["state_withdrawn"]


async def _header(member_id: str, name: str) -> str:
    tool = next(t for t in running.runtime.member_tools(member_id) if t.name == "web__header")
    return await tool.run({"name": name}, ToolContext(member_id=member_id))


async def test_an_update_keeps_the_members_values_unless_the_template_moved(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo, HttpDemo() as elsewhere:
        await put_template(setup, demo.url)
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k-1"}})).status_code == 201
        response = await alice.post(f"{BASE}/my/connectors/web/update")
        assert response.status_code == 409  # nothing newer

        await put_template(setup, demo.url, version=2)
        offer = (await alice.get(f"{BASE}/my/connectors/web")).json()["update"]
        assert offer == {"version": 2, "moved": False, "fields": []}
        response = await alice.post(f"{BASE}/my/connectors/web/update")
        assert response.status_code == 200, response.text
        assert response.json()["version"] == 2 and response.json()["update"] is None and response.json()["state"] == "ready"
        assert await _header(alice_id, "authorization") == "Bearer k-1"

        # Moved elsewhere: the key is not carried there; the member gives it again.
        await put_template(setup, elsewhere.url, version=3)
        offer = (await alice.get(f"{BASE}/my/connectors/web")).json()["update"]
        assert offer["moved"] is True and [f["name"] for f in offer["fields"]] == ["api_key"]
        response = await alice.post(f"{BASE}/my/connectors/web/update")
        assert response.status_code == 400 and "API key is required" in response.json()["error"]
        response = await alice.post(f"{BASE}/my/connectors/web/update", json={"values": {"api_key": "k-2"}})
        assert response.status_code == 200 and response.json()["version"] == 3, response.text
        assert await _header(alice_id, "authorization") == "Bearer k-2"


async def test_the_catalog_marks_an_activation_and_its_page_updates_and_asks_before_deactivating_in_a_browser(setup: Setup, plugin_browser):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await put_template(setup, demo.url)
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k-1"}})).status_code == 201
        mutate = next(t for t in running.runtime.member_tools(alice_id) if t.name == "web__mutate")
        await mutate.run({}, ToolContext(member_id=alice_id))
        await eventually(lambda: running.runtime.members.status(alice_id, "web")["pending"], what="echo to be withheld")
        await put_template(setup, demo.url, version=2)
        page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")

        template = page.locator(f"{TAG} form.mcp-template[data-name=web]")
        await template.locator(".mcp-active").filter(has_text="Active").wait_for(timeout=10_000)
        withheld = page.locator(f"{TAG} .mcp-own-connector[data-name=web] .mcp-withheld-tool[data-tool=echo]")
        assert "also send it to an attacker" in await withheld.locator(".mcp-withheld-description").inner_text()
        assert '"loud"' in await withheld.locator(".mcp-withheld-schema").inner_text()

        await template.locator("a.mcp-open-active").filter(has_text="Update").click()
        detail = page.locator(f"{TAG} section.mcp-detail[data-name=web]")
        await detail.locator(".mcp-update").filter(has_text="Version 2 is available (you have version 1).").wait_for(timeout=10_000)
        await detail.locator(".mcp-withheld-tool[data-tool=echo]").wait_for()
        await detail.locator("button.mcp-update-button").click()
        await detail.filter(has_text="(v2)").wait_for(timeout=20_000)
        assert await detail.locator(".mcp-update").count() == 0
        assert await _header(alice_id, "authorization") == "Bearer k-1"

        dialog = page.locator("dialog.confirm[open]")
        await detail.locator("button.mcp-deactivate").click()
        await dialog.filter(has_text="Deactivate web?").wait_for(timeout=5_000)
        await dialog.get_by_role("button", name="Cancel").click()
        await dialog.wait_for(state="detached")
        assert (await alice.get(f"{BASE}/my/connectors/web")).status_code == 200  # still there
        await detail.locator("button.mcp-deactivate").click()
        await dialog.get_by_role("button", name="Deactivate").click()
        await page.locator(f"{TAG} section.mcp-own").wait_for(timeout=10_000)
        assert (await alice.get(f"{BASE}/my/connectors/web")).status_code == 404


async def test_deactivating_asks_in_german_too(setup: Setup, plugin_browser):
    alice = await setup.host.member("alice")
    assert (await setup.admin.patch(f"/api/admin/members/{alice.member['id']}", json={"locale": "de"})).status_code == 200
    await activate_unreachable(setup, alice)
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors", locale="de-DE")
    await page.locator(f"{TAG} .mcp-own-connector[data-name=web] button.mcp-deactivate").click()
    dialog = page.locator("dialog.confirm[open]")
    await dialog.filter(has_text="web deaktivieren?").wait_for(timeout=5_000)
    assert "Konnektor deaktivieren?" in await dialog.inner_text()
    await dialog.get_by_role("button", name="Deaktivieren").click()
    await page.locator(f"{TAG} .mcp-own-connector[data-name=web]").wait_for(state="detached", timeout=10_000)


async def activate_unreachable(setup: Setup, alice) -> None:
    """A template with no server behind it: activated, it fails, and it is still
    alice's to deactivate."""
    await setup.admin.put(f"{BASE}/catalog/web", json={"transport": "http", "url": "http://127.0.0.1:9/mcp"})
    assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web"})).status_code == 201


async def test_a_tool_redefined_without_a_notification_to_this_session_is_withheld_not_run(setup: Setup, monkeypatch):
    """Check E5 ("a changed tool definition triggers re-approval through its pinned
    hash") for the session the server does not tell: two connectors on one server, the
    change made (and ``tools/list_changed`` sent) through the first; the second's
    listing is stale, so its call lists the tools again and refuses the changed echo,
    which then waits for review there too."""
    from skald_hookspecs import ToolError
    from skald_mcp import runtime as runtime_module

    alice_id = (await setup.host.member("alice")).member["id"]
    async with HttpDemo() as demo:
        for name in ("first", "second"):
            body = {"name": name, "transport": "http", "url": demo.url, "access": [alice_id]}
            response = await setup.admin.post(f"{BASE}/servers", json=body)
            assert response.status_code == 201 and response.json()["state"] == "ready", response.text
        echo = next(t for t in running.runtime.member_tools(alice_id) if t.name == "second__echo")
        assert await echo.run({"text": "hi"}, ToolContext(member_id=alice_id)) == "echo: hi"

        await _mutate(alice_id, "first__mutate")
        await eventually(lambda: _first(setup.server("first"), _withheld_at(1)), what="the notified session to withhold echo")
        assert (await setup.server("second"))["pending_tools"] == []  # never told
        monkeypatch.setattr(runtime_module, "LISTING_FRESH_SECONDS", 0.0)  # its listing is now too old

        try:
            answer = await echo.run({"text": "hi"}, ToolContext(member_id=alice_id))
        except ToolError as exc:
            assert "has changed on its server since it was accepted" in str(exc)
        else:
            raise AssertionError(f"the changed echo ran under its old pin: {answer!r}")
        assert _withheld_at(1)(await setup.server("second"))
        assert "second__echo" not in {t.name for t in running.runtime.member_tools(alice_id)}

"""The Connectors page in a real browser (Chromium through Playwright, as the host's own
UI tests): the admin adds a stdio connector with the form and grants it; a member sees
it, activates a catalog template with a secret, and deactivates it; names and
descriptions are text, never markup."""

from __future__ import annotations

import sys

import pytest

from mcp_support import BASE, DEMO, HttpDemo, Setup, eventually
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

TAG = "skald-p-mcp-connectors"  # as the shell (and the plugin_browser fixture) mounts it


async def test_the_page_is_listed_for_members_and_served_as_a_module(setup: Setup):
    alice = await setup.host.member("alice")
    pages = [(p["plugin_id"], p["page_id"]) for p in (await alice.get("/api/plugins/pages")).json()["pages"]]
    assert ("mcp", "connectors") in pages
    script = await alice.get(f"{BASE}/page.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    for markup_sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write"):
        assert markup_sink not in script.text





async def test_admin_adds_a_connector_and_a_member_activates_one_in_a_browser(setup: Setup, plugin_browser):
    await setup.host.create_member("alice", display_name="Alice <img src=x onerror=alert(1)>")
    # A server that cannot start: the table says why, not only the server log.
    dead = {"name": "dead", "transport": "stdio", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"], "access": []}
    assert (await setup.admin.post(f"{BASE}/servers", json=dead)).json()["state"] == "failed"
    admin_page = await plugin_browser.new_page()
    alerts: list[str] = []
    admin_page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    await plugin_browser.sign_in(admin_page, setup.host, setup.host.admin_username, ADMIN_PASSWORD)
    await plugin_browser.mount(admin_page, "mcp", "connectors")
    form = f"{TAG} form.mcp-add"
    await admin_page.locator(f"{form} input[name=name]").wait_for(timeout=10_000)
    await admin_page.fill(f"{form} input[name=name]", "demo")
    await admin_page.fill(f"{form} input[name=command]", sys.executable)
    await admin_page.fill(f"{form} textarea[name=args]", DEMO)
    await admin_page.click(f"{form} button[type=submit]")
    row = admin_page.locator(f"{TAG} tr.mcp-server[data-name=demo]")
    await row.filter(has_text="demo__echo").wait_for(timeout=20_000)
    await row.filter(has_text="running").wait_for(timeout=10_000)
    reason = (await setup.admin.get(f"{BASE}/servers")).json()["servers"]
    reason = next(s["error"] for s in reason if s["name"] == "dead")
    # A sentence for the cause, the server's own words folded under it.
    assert reason and await admin_page.locator(f"{TAG} tr.mcp-server[data-name=dead] .mcp-error .mcp-cause").inner_text()
    assert await admin_page.locator(f"{TAG} tr.mcp-server[data-name=dead] .mcp-error details code").text_content() == reason
    assert await admin_page.locator(f"{TAG} img").count() == 0 and alerts == []  # a display name is text

    catalog = admin_page.locator(f"{TAG} section.mcp-admin-catalog form")
    await catalog.locator("input[name=name]").fill("search")
    await catalog.locator("textarea[name=body]").fill('{"transport": "http", "url": "https://search.example/mcp"}')
    await catalog.locator("button[type=submit]").click()
    await admin_page.locator(f"{TAG} section.mcp-admin-catalog li").filter(has_text="search.example").wait_for(timeout=10_000)
    await catalog.locator("input[name=name]").fill("broken")
    await catalog.locator("textarea[name=body]").fill('{"transport": "http", "url": "ftp://x"}')
    await catalog.locator("button[type=submit]").click()
    await catalog.locator(".mcp-status").filter(has_text="http:// or https://").wait_for(timeout=10_000)  # beside its form
    assert (await setup.admin.delete(f"{BASE}/catalog/search")).status_code == 200

    servers = (await setup.admin.get(f"{BASE}/servers")).json()["servers"]
    alice_id = (await setup.host.core.users.find("alice")).id
    # Default access at birth: every member, the admin included (the admin holds every plugin).
    assert next(s for s in servers if s["name"] == "demo")["access"] == sorted([alice_id, setup.admin.member["id"]])
    await admin_page.locator(f"{TAG} .mcp-connector").filter(has_text="demo__echo").wait_for(timeout=10_000)

    async with HttpDemo() as demo:
        template = {"title": "Web <b>demo</b>", "transport": "http", "url": demo.url, "fields": [{"name": "api_key", "label": "API key", "header": "X-Key"}]}
        assert (await setup.admin.put(f"{BASE}/catalog/web", json=template)).status_code == 200
        page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
        await page.locator(f"{TAG} .mcp-connector").filter(has_text="demo__echo").wait_for(timeout=10_000)
        template_form = page.locator(f"{TAG} form.mcp-template[data-name=web]")
        await template_form.filter(has_text="Web <b>demo</b>").wait_for(timeout=10_000)
        assert await page.locator(f"{TAG} b").count() == 0
        await template_form.locator("input[name=api_key]").fill("k-123")
        await template_form.locator("button[type=submit]").click()
        own = page.locator(f"{TAG} .mcp-own-connector[data-name=web]")
        await own.filter(has_text="web__echo").wait_for(timeout=20_000)
        assert await page.locator(f"{TAG} form.mcp-admin, {TAG} form.mcp-add").count() == 0  # no admin form for a member
        await own.locator("button.mcp-deactivate").click()
        await page.locator("dialog.confirm[open]").get_by_role("button", name="Deactivate").click()  # asked first
        await own.wait_for(state="detached", timeout=10_000)

        async def gone() -> bool:
            return (await setup.host.core.host_api("mcp").member_secret_names(alice_id)) == []

        await eventually(gone, what="the activation to leave alice's file")


async def test_the_admin_grants_a_connector_on_the_members_page_in_a_browser(setup: Setup, plugin_browser):
    """The member's page in the admin's Members area has a Connectors section (the
    plugin's ``member_admin`` page): ticking a global connector grants it, unticking
    takes it away before the answer comes back; a template open to everyone says so.
    Nobody's sidebar lists the section; a member's page list does not have it."""
    from skald_mcp import running

    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await setup.add_stdio(access=[])
    async with HttpDemo() as demo:
        response = await setup.admin.put(f"{BASE}/catalog/web", json={"title": "Web demo", "transport": "http", "url": demo.url})
        assert response.status_code == 200, response.text
        pages = (await alice.get("/api/plugins/pages")).json()["pages"]
        assert [p["page_id"] for p in pages if p["plugin_id"] == "mcp"] == ["connectors"]
        page = await plugin_browser.new_page(base_url=setup.host.url)
        await page.goto("/")
        await page.get_by_label("User name").fill(setup.host.admin_username)
        await page.get_by_label("Password", exact=True).fill(ADMIN_PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await page.locator("#sidebar").wait_for(state="attached")
        await page.goto(f"/#members/{alice_id}")
        grants = page.locator("ul.mcp-member-grants")
        await grants.wait_for(timeout=20_000)
        assert "open to everyone with the plugin" in await grants.inner_text()
        box = grants.get_by_label("demo")
        assert not await box.is_checked()
        await box.check()
        await eventually(lambda: _granted(running, alice_id), what="the grant from the member's page")
        await grants.get_by_label("demo").wait_for()
        await grants.get_by_label("demo").uncheck()
        await eventually(lambda: _not_granted(running, alice_id), what="the revocation from the member's page")
        # A section, not a page: the sidebar links the Connectors page only.
        assert await page.locator('#sidebar a[href="#plugin/mcp/connectors"]').count() == 1
        assert await page.locator('#sidebar a[href*="member-grants"]').count() == 0


async def _granted(running, member_id: str) -> bool:
    return member_id in running.runtime.access.get("demo", ())


async def _not_granted(running, member_id: str) -> bool:
    return member_id not in running.runtime.access.get("demo", ())


async def test_a_connector_has_a_page_of_its_own_with_the_sign_in_panel_in_a_browser(setup: Setup, plugin_browser):
    """``#plugin/mcp/connectors/<name>`` in the app: the row's Sign in link opens the
    connector's own page, whose OAuth panel starts the flow and takes the pasted code;
    the connector is then ready and its page says so."""
    from oauth_standin import AuthorizationServer
    from test_oauth import allow_private, browser as consent, put_provider

    await allow_private(setup)
    await setup.host.create_member("alice")
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        assert (await put_provider(setup, idp.issuer)).status_code == 200
        template = {"title": "Mail", "transport": "http", "url": demo.url, "oauth": {"provider": "test-idp", "scopes": ["mail.read"]}}
        assert (await setup.admin.put(f"{BASE}/catalog/mail", json=template)).status_code == 200
        page = await plugin_browser.new_page(base_url=setup.host.url)
        page.on("popup", lambda popup: popup.close())  # the provider's page: the test plays the member's browser
        await page.goto("/")
        await page.get_by_label("User name").fill("alice")
        await page.get_by_label("Password", exact=True).fill(MEMBER_PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await page.locator("#sidebar").wait_for(state="attached")
        await page.goto("/#plugin/mcp/connectors")
        await page.locator("form.mcp-template[data-name=mail] button[type=submit]").click()
        await page.locator(".mcp-own-connector[data-name=mail] a.mcp-sign-in-link").click()
        detail = page.locator("section.mcp-detail[data-name=mail]")
        await detail.wait_for(timeout=10_000)
        assert page.url.endswith("#plugin/mcp/connectors/mail")
        await detail.locator("button.mcp-sign-in").click()
        panel = detail.locator(".mcp-oauth[data-url]")
        await panel.wait_for(timeout=10_000)
        code = await consent(await panel.get_attribute("data-url"))
        # Completed with nothing pasted: said beside the field, nothing sent (an empty
        # code sent would be refused; the sign-in stays usable either way).
        completes: list[str] = []
        page.on("request", lambda request: completes.append(request.url) if request.url.endswith("/oauth/complete") else None)
        field = detail.get_by_label("Paste the code the sign-in page showed")  # labelled, not only a placeholder
        await field.fill("   ")
        await detail.locator("button.mcp-complete").click()
        await detail.locator(".mcp-status").filter(has_text="Paste the code the sign-in page showed, then complete the sign-in.").wait_for(timeout=5_000)
        assert await field.get_attribute("aria-invalid") == "true"
        assert await field.evaluate("input => document.activeElement === input")
        assert completes == []
        await field.fill(code)
        await detail.locator("button.mcp-complete").click()
        await page.locator("section.mcp-detail[data-name=mail] .mcp-state").filter(has_text="running").wait_for(timeout=20_000)
        assert "mail__echo" in await page.locator("section.mcp-detail .mcp-tools").inner_text()
        # Signed in: said so, and the code form only when the member asks to sign in again.
        assert await detail.locator(".mcp-signed-in").filter(has_text="Signed in.").count() == 1
        assert await detail.locator("input[name=code]").count() == 0
        await detail.locator("button.mcp-sign-in-again").click()
        await detail.locator(".mcp-oauth button.mcp-sign-in").wait_for(timeout=5_000)
        await page.locator("a.mcp-back").click()
        await page.locator(".mcp-own-connector[data-name=mail]").wait_for(timeout=10_000)


async def test_the_admin_page_says_what_each_form_is_for_in_german(setup: Setup, plugin_browser):
    """An intro, and a line per form and JSON box (how "Add a connector" differs from
    "Add your own remote connector", what the template and provider boxes take, with an
    example that stays once the box is typed in), in the reader's language."""
    me = setup.admin.member["id"]
    assert (await setup.admin.patch(f"/api/admin/members/{me}", json={"locale": "de"})).status_code == 200
    page = await plugin_browser.new_page(locale="de-DE")
    await plugin_browser.sign_in(page, setup.host, setup.host.admin_username, ADMIN_PASSWORD)
    await plugin_browser.mount(page, "mcp", "connectors")
    admin = page.locator(f"{TAG} section.mcp-admin")
    await admin.locator(".mcp-intro").wait_for(timeout=10_000)
    assert (await admin.locator(".mcp-intro").inner_text()).startswith("Konnektoren sind MCP-Server, deren Werkzeuge der Assistent nutzen kann.")
    add = page.locator(f"{TAG} section.mcp-add-card")
    assert "Für alle, die du in der Tabelle oben zulässt" in await add.locator("p.hint").first.inner_text()
    catalog = page.locator(f"{TAG} section.mcp-admin-catalog textarea[name=body]")
    described = await catalog.evaluate("box => document.getElementById(box.getAttribute('aria-describedby')).textContent")
    assert described.startswith("Was ein Mitglied einschaltet:") and '"transport": "http"' in described
    assert await catalog.get_attribute("placeholder") != "{ }"
    providers = page.locator(f"{TAG} section.mcp-admin-providers textarea[name=body]")
    described = await providers.evaluate("box => document.getElementById(box.getAttribute('aria-describedby')).textContent")
    assert described.startswith("Ein OAuth-Anmeldedienst") and '"client_id"' in described
    remote = page.locator(f"{TAG} section.mcp-remote-card")
    if await remote.count():  # shown where the admin's role may add remote connectors
        assert (await remote.locator("p.hint").inner_text()).startswith("Nur für dich:")

"""WCAG 2.1 AA (issue 19): axe-core on every page of the shell, desktop and phone, in
English and German, must find nothing; and the keyboard paths that used to lose focus."""

from __future__ import annotations

import json
from typing import Any

from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import DESKTOP, PHONE, screenshot, sign_in
from .test_chat import MODEL, NotesPlugin, configure_model, send

AXE = Axe()
WCAG_21_AA = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}, "resultTypes": ["violations"]}

RICH_ANSWER = "\n".join((
    "# A heading", "Some **bold** text and `code`, math $e^{i\\pi} + 1 = 0$ and a [link](https://example.org).", "",
    "## Second level", "", "| Name | Value | A long third heading | A long fourth heading | A long fifth heading |", "|---|---:|---|---|---|",
    "| a | 1 | wider than a phone's screen | so the table scrolls | in its own box |", "", "HTML stays text: <img src=\"http://example.com/x.png\">", "",
    "- [x] done", "- [ ] open", "",
    "```python", "def f(x):", "    return x * 2  # double", "```", "", "$$\\sum_{n=1}^{10} n = 55$$",
))


async def assert_no_violations(page: Any, where: str, options: dict[str, Any] = WCAG_21_AA) -> None:
    await page.locator("#content[aria-busy]").wait_for(state="detached")
    results = await AXE.run(page, options=options)
    violations = [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5], "summary": v["nodes"][0].get("failureSummary", "")[:300]}
        for v in results.response["violations"]
    ]
    assert violations == [], f"{where}: {json.dumps(violations, indent=1)}"


async def walk(page: Any, label: str, routes: list[str]) -> None:
    for route in routes:
        await page.goto(f"/{route}")
        await page.locator("#content h1").first.wait_for()
        await assert_no_violations(page, f"{label} {route}")


async def test_every_page_passes_axe_at_wcag_21_aa_on_desktop_and_phone_in_english_and_german(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL, "second-model"), api_key="sk-test") as server:
        host = await skald.start()
        for viewport in (DESKTOP, PHONE):
            page = await browser_pages.new(host.url, viewport=viewport)
            await page.goto("/")
            await expect(page.get_by_role("heading", name="Welcome to Skald")).to_be_visible()
            await assert_no_violations(page, f"setup {viewport}")
        admin_api = await host.admin()
        await configure_model(admin_api, server)
        provider = (await admin_api.get("/api/admin/models")).json()["providers"][0]["id"]
        second = await admin_api.post("/api/admin/models/entries", json={"provider_id": provider, "model": "second-model", "priority": 90000})
        assert second.status_code == 201, second.text  # with two models, the conversation shows its model picker
        member = await host.create_member("erin", display_name="Erin")
        server.script(MODEL, [Reply(text=RICH_ANSWER), Reply(text="A shorter take.")])

        for viewport in (DESKTOP, PHONE):
            page = await browser_pages.new(host.url, viewport=viewport)
            await page.goto("/")
            await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
            await assert_no_violations(page, f"sign-in {viewport}")

        page = await browser_pages.new(host.url)
        await sign_in(page, "erin", MEMBER_PASSWORD)
        await send(page, "Show me everything")
        await expect(page.locator(".msg.assistant .katex").first).to_be_visible()
        await expect(page.locator(".msg.assistant[data-status=complete] .copy-message")).to_be_visible()
        # With versions to flip between (the rich one shown) and the model picker.
        await page.get_by_role("button", name="Regenerate").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("A shorter take.")
        await page.get_by_role("button", name="Previous version").click()
        await expect(page.locator(".msg.assistant .katex").first).to_be_visible()
        await expect(page.get_by_label("Model", exact=True)).to_be_visible()
        conversation = page.url.split("#", 1)[1]
        routes = ["#chat", f"#{conversation}", "#projects", "#memory", "#schedules", "#account"]
        admin_routes = ["#plugins", "#members", f"#members/{member['id']}", "#shared-folders", "#roles", "#models", "#usage", "#approvals", "#settings"]
        for viewport, size in (("desktop", DESKTOP), ("phone", PHONE)):
            await page.set_viewport_size(size)
            await walk(page, f"member {viewport}", routes)
        await page.set_viewport_size(DESKTOP)
        for theme in ("dark", "light"):  # the chosen theme, whatever the system's
            await page.get_by_label("Theme").select_option(theme)
            await walk(page, f"member {theme}", [f"#{conversation}"])

        admin = await browser_pages.new(host.url)
        await sign_in(admin, "admin", ADMIN_PASSWORD)
        for viewport, size in (("desktop", DESKTOP), ("phone", PHONE)):
            await admin.set_viewport_size(size)
            await walk(admin, f"admin {viewport}", admin_routes)

        german = await browser_pages.new(host.url, locale="de-DE")
        response = await admin_api.patch(f"/api/admin/members/{member['id']}", json={"locale": "de"})
        assert response.status_code == 200, response.text
        await sign_in_german(german)
        await walk(german, "member de", routes)


async def sign_in_german(page: Any, username: str = "erin", password: str = MEMBER_PASSWORD) -> None:
    await page.goto("/")
    await page.get_by_label("Benutzername").fill(username)
    await page.get_by_label("Passwort", exact=True).fill(password)
    await page.get_by_role("button", name="Anmelden").click()
    await page.locator("#sidebar").wait_for(state="attached")


async def test_the_system_agents_of_a_plugin_that_is_off_pass_axe_on_desktop_and_phone_in_english_and_german(skald, browser_pages):
    """The notice an agent of a plugin that is off shows (with its "Open the plugin"
    link) is part of the page axe checks, on "All" and on the agent's own tab."""
    import skald_system_agents

    host = await skald.start(plugins=[skald_system_agents], settings=skald.settings(system_agents={"run": False}))
    admin_api = await host.admin()
    routes = ["#system-agents", "#system-agents/conversation_review"]
    for locale, link_text in (("en", "Open the plugin"), ("de", "Plugin öffnen")):
        response = await admin_api.put("/api/me/locale", json={"locale": locale})
        assert response.status_code == 200, response.text
        for viewport_name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page = await browser_pages.new(host.url, viewport=viewport, locale="de-DE" if locale == "de" else "en-US")
            await (sign_in_german(page, "admin", ADMIN_PASSWORD) if locale == "de" else sign_in(page, "admin", ADMIN_PASSWORD))
            await page.goto(f"/{routes[1]}")
            await expect(page.get_by_role("status").get_by_role("link", name=link_text)).to_be_visible()
            await walk(page, f"plugin off {locale} {viewport_name}", routes)
            await screenshot(page, f"system-agents-plugin-off-{locale}-{viewport_name}")

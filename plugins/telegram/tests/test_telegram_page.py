"""The member's pairing page and the admin's roster: listed, served as JavaScript
modules, and working in a real browser (Chromium through Playwright, as the host's
own UI tests)."""

from __future__ import annotations

import shutil

import pytest

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from telegram_support import ALICE_CHAT, Setup, pairing_code, running

MOUNT_PAGE = """async ([entry, pluginId, pageId]) => {
    // What the shell's plugin-page-host does: import, register, mount with plugin-id.
    const module = await import(entry);
    customElements.define(`plugin-${pluginId}-${pageId}`, module.default);
    const page = document.createElement(`plugin-${pluginId}-${pageId}`);
    page.setAttribute("plugin-id", pluginId);
    document.body.append(page);
}"""


async def test_the_pages_are_listed_for_who_may_see_them_and_served_as_modules(setup: Setup):
    await running(setup)
    alice = await setup.host.member("alice")
    mine = [(p["plugin_id"], p["page_id"]) for p in (await alice.get("/api/plugins/pages")).json()["pages"]]
    assert ("telegram", "main") in mine and ("telegram", "roster") not in mine
    everything = {(p["plugin_id"], p["page_id"]): p for p in (await setup.admin.get("/api/plugins/pages")).json()["pages"]}
    assert ("telegram", "roster") in everything
    for entry in ("/api/plugin/telegram/page.js", "/api/plugin/telegram/roster.js"):
        script = await alice.get(entry)
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        for markup_sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write"):
            assert markup_sink not in script.text


@pytest.fixture
async def browser():
    playwright_api = pytest.importorskip("playwright.async_api")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("no chromium on PATH")
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            await browser.close()


async def login(page, url: str, username: str, password: str) -> None:
    await page.goto(url + "/")
    status = await page.evaluate(
        """async ([username, password]) => (await fetch("/api/auth/login", {method: "POST",
            headers: {"Content-Type": "application/json"}, body: JSON.stringify({username, password})})).status""",
        [username, password],
    )
    assert status == 200


async def test_a_member_pairs_and_unlinks_on_the_page_in_a_browser(setup: Setup, browser):
    await running(setup)
    await setup.host.create_member("alice", display_name="Alice")
    page = await browser.new_page()
    await login(page, setup.host.url, "alice", MEMBER_PASSWORD)
    await page.evaluate(MOUNT_PAGE, ["/api/plugin/telegram/page.js", "telegram", "main"])
    status = page.locator("plugin-telegram-main .telegram-status")
    await status.filter(has_text="Not linked. Write to the bot @skald_test_bot").wait_for(timeout=10_000)

    await page.fill("plugin-telegram-main input[name=code]", "WRONG-CODES")
    await page.click("plugin-telegram-main button[type=submit]")
    await page.locator("plugin-telegram-main .telegram-message").filter(has_text="That pairing code is not valid.").wait_for(timeout=10_000)

    code = await pairing_code(setup, ALICE_CHAT, first_name="Alice <b>")
    await page.fill("plugin-telegram-main input[name=code]", code)
    await page.click("plugin-telegram-main button[type=submit]")
    await status.filter(has_text="Linked to the Telegram chat “Alice <b>”.").wait_for(timeout=10_000)
    assert await page.locator("plugin-telegram-main b").count() == 0  # a chat name is text, not markup

    await page.click("plugin-telegram-main .telegram-unlink")
    await status.filter(has_text="Not linked.").wait_for(timeout=10_000)
    member = await setup.host.core.users.find("alice")
    assert (await setup.host.core.host_api("telegram").get_user_config(member.id))["linked"] is False


async def test_the_admin_sees_who_is_linked_on_the_roster_in_a_browser(setup: Setup, browser):
    await running(setup)
    alice = await setup.host.member("alice", display_name="Alice Example")
    code = await pairing_code(setup, ALICE_CHAT, first_name="Ali")
    assert (await alice.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})).status_code == 200
    page = await browser.new_page()
    await login(page, setup.host.url, "admin", ADMIN_PASSWORD)
    await page.evaluate(MOUNT_PAGE, ["/api/plugin/telegram/roster.js", "telegram", "roster"])
    row = page.locator("plugin-telegram-roster tr.telegram-link")
    await row.first.wait_for(timeout=10_000)
    assert await row.count() == 1
    cells = await row.first.locator("td").all_text_contents()
    assert cells[:2] == ["Alice Example", "Ali"]

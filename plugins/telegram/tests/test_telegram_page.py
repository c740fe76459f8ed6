"""The member's pairing page and the admin's roster: listed, served as JavaScript
modules, and working in a real browser (Chromium through Playwright, as the host's
own UI tests)."""

from __future__ import annotations

import datetime as dt

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from telegram_support import ALICE_CHAT, Setup, pairing_code, running



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


async def test_a_member_pairs_and_unlinks_on_the_page_in_a_browser(setup: Setup, plugin_browser):
    await running(setup)
    await setup.host.create_member("alice", display_name="Alice")
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "telegram", "main")
    status = page.locator("skald-p-telegram-main .telegram-status")
    await status.filter(has_text="Not linked. Write to the bot @skald_test_bot").wait_for(timeout=10_000)

    await page.fill("skald-p-telegram-main input[name=code]", "WRONG-CODES")
    await page.click("skald-p-telegram-main button[type=submit]")
    await page.locator("skald-p-telegram-main .telegram-message").filter(has_text="That pairing code is not valid.").wait_for(timeout=10_000)

    code = await pairing_code(setup, ALICE_CHAT, first_name="Alice <b>")
    await page.fill("skald-p-telegram-main input[name=code]", code)
    await page.click("skald-p-telegram-main button[type=submit]")
    await status.filter(has_text="Linked to the Telegram chat “Alice <b>”.").wait_for(timeout=10_000)
    assert await page.locator("skald-p-telegram-main b").count() == 0  # a chat name is text, not markup

    await page.click("skald-p-telegram-main .telegram-unlink")
    await status.filter(has_text="Not linked.").wait_for(timeout=10_000)
    member = await setup.host.core.users.find("alice")
    assert (await setup.host.core.host_api("telegram").get_user_config(member.id))["linked"] is False


async def test_the_admin_sees_who_is_linked_on_the_roster_in_a_browser(setup: Setup, plugin_browser):
    await running(setup)
    alice = await setup.host.member("alice", display_name="Alice Example")
    code = await pairing_code(setup, ALICE_CHAT, first_name="Ali")
    assert (await alice.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})).status_code == 200
    page = await plugin_browser.open(setup.host, "admin", ADMIN_PASSWORD, "telegram", "roster", entry="roster.js")
    row = page.locator("skald-p-telegram-roster tr.telegram-link")
    await row.first.wait_for(timeout=10_000)
    assert await row.count() == 1
    cells = await row.first.locator("td").all_text_contents()
    assert cells[:2] == ["Alice Example", "Ali"]


async def test_the_roster_says_since_when_in_the_admin_s_language(setup: Setup, plugin_browser):
    """Not the stored ISO time: a German admin reads a German date."""
    await running(setup)
    alice = await setup.host.member("alice", display_name="Alice Example")
    code = await pairing_code(setup, ALICE_CHAT, first_name="Ali")
    assert (await alice.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})).status_code == 200
    linked_at = (await setup.admin.get("/api/plugin/telegram/roster")).json()["links"][0]["linked_at"]
    assert (await setup.admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    page = await plugin_browser.open(
        setup.host, "admin", ADMIN_PASSWORD, "telegram", "roster", entry="roster.js", locale="en-US", timezone_id="UTC"
    )
    row = page.locator("skald-p-telegram-roster tr.telegram-link")
    await row.first.wait_for(timeout=10_000)
    since = (await row.first.locator("td").all_text_contents())[2]
    linked = dt.datetime.strptime(linked_at, "%Y-%m-%dT%H:%M:%SZ")
    # As the shell writes a time ("6.12.2026, 16:19:14"), not "06.12.2026, 16:15".
    assert since == f"{linked.day}.{linked.month}.{linked.year}, {linked:%H:%M:%S}"


async def test_while_the_bot_is_not_running_the_page_offers_no_code_form(setup: Setup, plugin_browser):
    """Enabled without a token: the page says the bot cannot give a code, and offers no
    field to type one (a code sent anyway was refused with 400: newcomer walk)."""
    await setup.enable()
    await setup.host.create_member("alice", display_name="Alice")
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "telegram", "main")
    await page.locator("skald-p-telegram-main .telegram-status").wait_for(timeout=10_000)
    assert await page.locator("skald-p-telegram-main input[name=code]").is_hidden()

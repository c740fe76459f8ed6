"""The in-tree plugins' pages in the shell, as a newcomer walks them: each page says its
title once (the shell's header is its one h1, in English and German), the Connectors
page tells the admin to add a connector rather than to ask their administrator, the
catalog's enable switches are told apart by screen readers, and a plugin whose settings
are settings sets is not also said to have no settings."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

import skald_system_agents
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import PagePlugin, sign_in
from .test_accessibility import assert_no_violations

#: (plugin, page, what shows once the plugin's page has drawn itself)
IN_TREE_PAGES = (
    ("mcp", "connectors", "skald-p-mcp-connectors .mcp-mine"),
    ("telegram", "main", "skald-p-telegram-main .telegram-status"),
    ("telegram", "roster", "skald-p-telegram-roster section.card > *"),
    ("mobile-connector", "main", "skald-p-mobile-connector-main .mobile-devices > li"),
    ("tts_kokoro", "voices", "skald-p-tts-kokoro-voices .tts-intro:not(:empty)"),
)
IN_TREE_PLUGINS = ["mcp", "telegram", "mobile-connector", "tts_kokoro"]


async def headings_of(page: Any, plugin_id: str, page_id: str, drawn: str) -> list[str]:
    await page.goto(f"/#plugin/{plugin_id}/{page_id}")
    await page.locator(drawn).first.wait_for(timeout=15_000)
    return await page.locator("#content h1").all_inner_texts()


async def test_each_in_tree_plugin_page_has_its_title_once_as_the_one_h1(skald, browser_pages):
    host = await skald.start(use_entry_points=True, enable=IN_TREE_PLUGINS)
    admin_api = await host.admin()
    titles = {(p["plugin_id"], p["page_id"]): p["title"] for p in (await admin_api.get("/api/plugins/pages")).json()["pages"]}
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    for plugin_id, page_id, drawn in IN_TREE_PAGES:
        assert await headings_of(page, plugin_id, page_id, drawn) == [titles[(plugin_id, page_id)]], (plugin_id, page_id)

    # The admin, who manages connectors, is told to add one, not to ask the administrator.
    await page.goto("/#plugin/mcp/connectors")
    connectors = page.locator("skald-p-mcp-connectors")
    await expect(connectors.locator(".mcp-mine")).to_contain_text("No connector yet: add one below.")
    await expect(connectors).not_to_contain_text("Ask your administrator")
    await expect(connectors.locator(".mcp-admin")).to_contain_text("No connectors yet.")  # the empty table says so
    await expect(connectors.locator("form.mcp-add").get_by_role("button", name="Add connector")).to_have_class("btn primary")

    me = admin_api.member["id"]
    assert (await admin_api.patch(f"/api/admin/members/{me}", json={"locale": "de"})).status_code == 200
    german = await browser_pages.new(host.url, locale="de-DE")
    await german.goto("/")
    await german.get_by_label("Benutzername").fill("admin")
    await german.get_by_label("Passwort", exact=True).fill(ADMIN_PASSWORD)
    await german.get_by_role("button", name="Anmelden").click()
    await german.locator("#sidebar").wait_for(state="attached")
    german_titles = {("mcp", "connectors"): ["Konnektoren"], ("telegram", "roster"): ["Telegram-Verknüpfungen"], ("tts_kokoro", "voices"): ["Stimme"]}
    for plugin_id, page_id, drawn in IN_TREE_PAGES:
        headings = await headings_of(german, plugin_id, page_id, drawn)
        assert len(headings) == 1 and headings == german_titles.get((plugin_id, page_id), headings), (plugin_id, page_id, headings)
    await german.goto("/#plugin/mcp/connectors")
    await expect(german.locator("skald-p-mcp-connectors .mcp-mine")).to_contain_text("Noch kein Konnektor: füge unten einen hinzu.")


async def test_a_member_is_still_told_to_ask_their_administrator(skald, browser_pages):
    host = await skald.start(use_entry_points=True, enable=["mcp"])
    await host.admin()
    await host.create_member("alice")
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#plugin/mcp/connectors")
    await expect(page.locator("skald-p-mcp-connectors .mcp-mine")).to_contain_text("No connector is available to you yet. Ask your administrator.")
    await expect(page.locator("#content h1")).to_have_count(1)


async def test_each_enable_switch_is_named_with_its_plugin(skald, browser_pages):
    host = await skald.start(plugins=[PagePlugin("hello", title="Hello"), PagePlugin("weather", title="Weather")])
    admin_api = await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    await expect(page.get_by_role("switch", name="Enable Hello", exact=True)).to_have_count(1)
    await expect(page.get_by_role("switch", name="Enable Weather", exact=True)).to_have_count(1)
    await expect(page.locator("[data-plugin=hello] .switch-row label")).to_have_text("Enable")  # an action, not a state

    me = admin_api.member["id"]
    assert (await admin_api.patch(f"/api/admin/members/{me}", json={"locale": "de"})).status_code == 200
    await page.reload()
    # An off plugin's switch claims nothing: it is named for what it does, and says "off" as a switch.
    weather = page.get_by_role("switch", name="Weather aktivieren", exact=True)
    await expect(weather).to_have_count(1)
    await expect(weather).not_to_be_checked()
    await expect(page.locator("[data-plugin=weather] .switch-row label")).to_have_text("Aktivieren")
    await expect(page.locator("[data-plugin=weather] .switch-row")).not_to_contain_text("Aktiviert")
    await weather.check()
    await expect(page.get_by_role("switch", name="Weather aktivieren", exact=True)).to_be_checked()
    assert await page.get_by_role("switch", name="Weather aktivieren", exact=True).get_attribute("role") == "switch"


async def test_a_plugin_whose_settings_are_settings_sets_is_not_said_to_have_none(skald, browser_pages):
    host = await skald.start(plugins=[skald_system_agents, PagePlugin("hello", title="Hello")], enable=["system_agents", "hello"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=system_agents")
    await expect(page.get_by_role("button", name="Save").first).to_be_visible()  # its settings sets, as cards
    await expect(page.get_by_text("This plugin has no settings.")).to_have_count(0)
    await page.goto("/#plugin-detail?id=hello")  # nothing to set: the line stays
    await expect(page.get_by_text("This plugin has no settings.")).to_be_visible()


async def test_the_in_tree_plugin_pages_pass_axe(skald, browser_pages):
    host = await skald.start(use_entry_points=True, enable=IN_TREE_PLUGINS)
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    for plugin_id, page_id, drawn in IN_TREE_PAGES:
        await page.goto(f"/#plugin/{plugin_id}/{page_id}")
        await page.locator(drawn).first.wait_for(timeout=15_000)
        await assert_no_violations(page, f"{plugin_id}/{page_id}")

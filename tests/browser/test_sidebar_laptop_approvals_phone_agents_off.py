"""A newcomer probe of the shell: at 1280x800 an admin's sidebar links ended mid-link
("Models" cut in half) with Usage, Approvals and Settings below the box and no sign of
them, #settings opening with its link out of view; the Approvals table ran off a phone
and broke "read_file" mid-word; Reports and System agents were in the menu, and a
member's page offered an Event triage interval, while the System agents plugin was off;
the example plugin's Save was the browser's plain button."""

from __future__ import annotations

import re

import importlib_metadata
import pytest
import skald_system_agents
from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import PHONE, PagePlugin, sign_in

LAPTOPS = ({"width": 1280, "height": 800}, {"width": 1366, "height": 768})
ADMIN_LINKS = ("Plugins", "Members", "Shared folders", "Roles", "Models", "Usage", "Approvals", "Settings")

# Where the link is: inside the links' box as it is scrolled, and drawn on top at its middle.
SHOWN = """(link) => {
  const box = link.closest('.sidebar-links').getBoundingClientRect();
  const own = link.getBoundingClientRect();
  const top = document.elementFromPoint(own.left + own.width / 2, own.top + own.height / 2);
  return { inBox: own.top >= box.top && own.bottom <= box.bottom, onTop: link.contains(top), own: [own.top, own.bottom], box: [box.top, box.bottom] };
}"""
EDGES = "(box) => ({ cls: [...box.classList].sort(), mask: getComputedStyle(box).maskImage, more: box.scrollHeight > box.clientHeight })"


async def test_on_a_laptop_the_current_link_is_in_view_and_more_links_show_a_fade(skald, browser_pages):
    """With the System agents plugin on and a plugin's pages (more links than fit), the
    page opened has its link in view, and the box's edges fade where links go on."""
    plugins = [skald_system_agents, *(PagePlugin(f"page{i}", title=f"Page {i}", page_title=f"Page {i}") for i in range(3))]
    host = await skald.start(plugins=plugins, enable=["system_agents", "page0", "page1", "page2"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    for viewport in LAPTOPS:
        page = await browser_pages.new(host.url, viewport=viewport)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        sidebar = page.locator("#sidebar")
        box = sidebar.locator(".sidebar-links")
        await expect(sidebar.get_by_role("link", name="Page 2")).to_be_attached()
        await page.goto("/#settings")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Settings")
        settings = sidebar.get_by_role("link", name="Settings", exact=True)
        await expect(settings).to_have_attribute("aria-current", "page")
        shown = await settings.evaluate(SHOWN)
        assert shown["inBox"] and shown["onTop"], (viewport, shown)
        await expect(settings).to_be_in_viewport()
        edges = await box.evaluate(EDGES)
        assert edges["more"], "the links fit: the test shows nothing"
        assert "more-above" in edges["cls"] and edges["mask"] != "none", (viewport, edges)  # Chat and more are above

        await box.evaluate("(box) => box.scrollTo(0, 0)")
        await expect(box).to_have_class(re.compile(r"\bmore-below\b"))
        await expect(box).not_to_have_class(re.compile(r"\bmore-above\b"))
        assert (await box.evaluate(EDGES))["mask"] != "none"

        await sidebar.get_by_role("link", name="Chat", exact=True).click()
        await page.goto("/#approvals")  # a page whose link is below the box as it is scrolled now
        approvals = sidebar.get_by_role("link", name="Approvals", exact=True)
        await expect(approvals).to_have_attribute("aria-current", "page")
        shown = await approvals.evaluate(SHOWN)
        assert shown["inBox"] and shown["onTop"], (viewport, shown)

        # The footer (who, Sign out, Theme) takes no more than it needs: it took 190 px.
        footer = await sidebar.locator(".nav-footer").bounding_box()
        assert footer is not None and footer["height"] <= 130, footer
        await expect(sidebar.get_by_role("button", name="Sign out")).to_be_in_viewport()
        await expect(sidebar.get_by_label("Theme")).to_be_in_viewport()
        await page.close()


async def test_with_the_system_agents_plugin_off_no_reports_link_and_every_link_fits(skald, browser_pages):
    """The plugin is installed, not enabled: /api/system-agents still lists its agents to
    an admin (plugin_enabled false), which put Reports and System agents in the menu. Off,
    they are not; an admin's fourteen links then fit a laptop's sidebar unscrolled. Turned
    on from Plugins, the two links come without a reload."""
    host = await skald.start(plugins=[skald_system_agents], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    for viewport in LAPTOPS:
        page = await browser_pages.new(host.url, viewport=viewport)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        sidebar = page.locator("#sidebar")
        await expect(sidebar.get_by_role("link", name="Settings", exact=True)).to_be_attached()
        await expect(sidebar.get_by_role("link", name="Reports", exact=True)).to_have_count(0)
        await expect(sidebar.get_by_role("link", name="System agents", exact=True)).to_have_count(0)
        box = sidebar.locator(".sidebar-links")
        assert await box.evaluate("(box) => box.scrollHeight <= box.clientHeight"), (viewport, await box.evaluate(EDGES))
        await expect(box).not_to_have_class(re.compile(r"more-"))
        for name in ADMIN_LINKS:
            await expect(sidebar.get_by_role("link", name=name, exact=True)).to_be_in_viewport(ratio=1)
        await page.close()

    page = await browser_pages.new(host.url, viewport=LAPTOPS[0])
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    await page.locator("[data-plugin=system_agents]").get_by_role("switch", name="Enable").check()
    sidebar = page.locator("#sidebar")
    await expect(sidebar.get_by_role("link", name="Reports", exact=True)).to_be_visible()
    await expect(sidebar.get_by_role("link", name="System agents", exact=True)).to_be_visible()
    await expect(sidebar.get_by_role("link", name="Plugins", exact=True)).to_have_attribute("aria-current", "page")


async def test_a_members_page_offers_no_interval_of_an_agent_whose_plugin_is_off(skald, browser_pages):
    host = await skald.start(plugins=[skald_system_agents], settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    kid = await host.create_member("kid", display_name="Kid")
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto(f"/#members/{kid['id']}")
    await expect(page.get_by_test_id("supervision")).to_be_visible()
    await expect(page.get_by_label(re.compile("Event triage"))).to_have_count(0)
    await expect(page.get_by_role("heading", name="Background agents")).to_have_count(0)

    assert (await admin.put("/api/admin/plugins/system_agents/enabled", json={"enabled": True})).status_code == 200
    await page.reload()
    await expect(page.get_by_label("Event triage (every … minutes; server: 5)")).to_be_visible()


ROWS = """(table) => [...table.querySelectorAll('tbody tr[data-rule]')].map((row) => {
  const code = row.querySelector('td code');
  return { pattern: code.textContent, lines: code.getClientRects().length, right: Math.round(row.getBoundingClientRect().right) };
})"""


@pytest.mark.parametrize("locale", ["en", "de"])
async def test_the_approval_rules_stack_on_a_phone(skald, browser_pages, locale):
    """At 390x844 the seven columns ran to 464 px (German: 650) and "read_file" broke
    mid-word: on a phone each rule is a stack, a value under its column's name, as the
    Models and Usage tables are."""
    host = await skald.start()
    admin = await host.admin()
    assert (await admin.put("/api/me/locale", json={"locale": locale})).status_code == 200
    page = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#approvals")
    table = page.locator("table.rules-table")
    await expect(table.locator("tbody tr[data-rule]").first).to_be_visible()
    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    wrap = await table.locator("xpath=..").evaluate("(wrap) => [wrap.scrollWidth, wrap.clientWidth]")
    assert wrap[0] <= wrap[1], wrap  # nothing scrolled out of sight sideways
    rows = await table.evaluate(ROWS)
    assert rows and all(row["lines"] == 1 and row["right"] <= PHONE["width"] for row in rows), rows
    priority = table.locator("tbody tr[data-rule] td.num").first
    label = "Priority" if locale == "en" else "Priorität"
    assert (await priority.evaluate("(td) => getComputedStyle(td, '::before').content")).startswith(f'"{label}"')
    await expect(table.locator("thead")).to_have_count(1)  # still there for a screen reader


def _hello_installed() -> bool:
    return any(ep.name == "hello" for ep in importlib_metadata.entry_points(group="skald.plugins"))


@pytest.mark.skipif(not _hello_installed(), reason="examples/skald-hello is not installed (make test installs it)")
async def test_the_example_plugins_save_is_the_shells_button(skald, browser_pages):
    host = await skald.start(use_entry_points=True, enable=["hello"])
    admin = await host.admin()
    alice = await host.create_member("alice", display_name="Alice")
    response = await admin.put(f"/api/admin/members/{alice['id']}/plugins", json={"plugins": ["hello"]})
    assert response.status_code == 200, response.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#plugin/hello/main")
    save = page.get_by_role("button", name="Save")
    await expect(save).to_have_class(re.compile(r"\bbtn\b"))
    # Drawn as the shell's main buttons are (Sign out is a quiet one), not the browser's grey.
    assert await save.evaluate("(b) => getComputedStyle(b).backgroundColor") != "rgb(239, 239, 239)"

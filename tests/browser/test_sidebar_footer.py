"""The sidebar's footer (who is signed in, Theme, Sign out) stays in view while its
links scroll: at 1280x800 an admin's pages and a plugin's pushed Theme and Sign out below
the fold (a newcomer probe)."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD

from .kit import PagePlugin, sign_in


async def test_sign_out_stays_in_view_when_the_sidebar_links_overflow(skald, browser_pages):
    plugins = [PagePlugin(f"page{i}", title=f"Page {i}", page_title=f"Page {i}") for i in range(6)]
    host = await skald.start(plugins=plugins, enable=[p.plugin_id for p in plugins])
    await host.admin()
    page = await browser_pages.new(host.url, viewport={"width": 1280, "height": 800})
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await expect(page.locator("#sidebar").get_by_role("link", name="Page 5")).to_be_visible()
    sidebar = page.locator("#sidebar")
    links = sidebar.locator(".sidebar-links")
    assert await links.evaluate("s => s.scrollHeight > s.clientHeight"), "the links no longer overflow: the test shows nothing"
    sign_out = sidebar.get_by_role("button", name="Sign out")
    box = await sign_out.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800, box
    await expect(sign_out).to_be_in_viewport()


COVERED = """(link) => {
  const box = link.getBoundingClientRect();
  const top = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return link.contains(top) ? null : (top ? top.outerHTML.slice(0, 120) : 'nothing');
}"""


async def test_every_sidebar_link_shows_when_focused_not_under_the_footer(skald, browser_pages):
    """At 1366x768 Models, Approvals and Settings sat under the pinned footer (name,
    Theme, Sign out), at 1280x860 Settings; Tab to them left them covered. The links
    scroll above the footer, not under it."""
    host = await skald.start()
    await host.admin()
    for viewport in ({"width": 1366, "height": 768}, {"width": 1280, "height": 860}, {"width": 1280, "height": 560}):
        page = await browser_pages.new(host.url, viewport=viewport)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        sidebar = page.locator("#sidebar")
        await expect(sidebar.get_by_role("link", name="Settings")).to_be_attached()
        await page.locator("#content").focus()
        for name in ("Chat", "Plugins", "Roles", "Models", "Approvals", "Settings"):
            link = sidebar.get_by_role("link", name=name, exact=True)
            await link.focus()
            await expect(link).to_be_in_viewport()
            assert await link.evaluate(COVERED) is None, (viewport, name, await link.evaluate(COVERED))
        sign_out = sidebar.get_by_role("button", name="Sign out")
        await expect(sign_out).to_be_in_viewport()
        assert await sign_out.evaluate(COVERED) is None, viewport


# Where the focused control is drawn: inside the window whole, and on top at its middle,
# its top and its bottom (not under the footer, the top bar, or off the screen).
FOCUSED = """() => {
  const node = document.activeElement;
  const box = node.getBoundingClientRect();
  const x = box.left + box.width / 2;
  const under = [box.top + box.height / 2, box.top + 2, box.bottom - 2].map((y) => document.elementFromPoint(x, y))
    .filter((top) => !node.contains(top)).map((top) => (top ? top.outerHTML.slice(0, 80) : "nothing"));
  return {
    name: node.textContent.trim() || node.getAttribute("aria-label") || node.tagName,
    tag: node.tagName, inSidebar: !!node.closest("#sidebar"),
    onScreen: box.top >= 0 && box.left >= 0 && box.bottom <= innerHeight && box.right <= innerWidth,
    covered: under, box: [box.top, box.bottom, box.left, box.right].map(Math.round), window: [innerWidth, innerHeight],
  };
}"""


@pytest.mark.parametrize("viewport", [
    {"width": 320, "height": 256}, {"width": 640, "height": 360}, {"width": 1280, "height": 256}, {"width": 1280, "height": 360},
], ids=lambda v: f"{v['width']}x{v['height']}")
async def test_on_a_short_screen_tab_reaches_every_link_and_sign_out_on_screen(skald, browser_pages, viewport):
    """At 320x256 (400% zoom, WCAG's reflow size) Sign out could not be reached, and at
    640x360 the phone menu showed 2 of 20 links in an 82 px box beside the footer: on a
    short screen the whole sidebar scrolls, links and footer together. 320 and 640 wide
    are a phone's menu, 1280 the desktop sidebar."""
    plugins = [PagePlugin(f"page{i}", title=f"Page {i}", page_title=f"Page {i}") for i in range(7)]
    host = await skald.start(plugins=plugins, enable=[p.plugin_id for p in plugins])
    await host.admin()
    page = await browser_pages.new(host.url, viewport=viewport)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    sidebar = page.locator("#sidebar")
    await expect(sidebar.locator("a[href]").filter(has_text="Page 6")).to_be_attached()  # hidden behind the menu on a phone
    links = [name.strip() for name in await sidebar.locator("a[href]").all_text_contents()]
    assert len(links) == 21, links  # the admin's Usage page is one of them
    if viewport["width"] <= 700:
        await page.get_by_role("button", name="Menu").click()
        await expect(sidebar).to_be_visible()
        await expect(page.get_by_role("button", name="Menu")).to_be_focused()
    else:
        await page.locator(".skip-link").focus()
    reached = []
    for _ in range(len(links) + 10):
        await page.keyboard.press("Tab")
        focused = await page.evaluate(FOCUSED)
        if not focused["inSidebar"]:
            continue
        assert focused["onScreen"] and not focused["covered"], f"{viewport} {focused}"
        reached.append(focused["name"])
        if focused["name"] == "Sign out":
            break
    assert reached[-1:] == ["Sign out"], (viewport, reached)
    # Not a box of their own a few links high (2 of 20 at 640x360): the sidebar scrolls.
    assert await sidebar.locator(".sidebar-links").evaluate("(box) => box.scrollHeight <= box.clientHeight"), viewport
    assert [name for name in links if name not in reached] == [], (viewport, reached)

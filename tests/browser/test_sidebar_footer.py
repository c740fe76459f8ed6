"""The sidebar's footer (who is signed in, Theme, Sign out) stays in view while its
links scroll: at 1280x800 an admin's pages and a plugin's pushed Theme and Sign out below
the fold (a newcomer probe)."""

from __future__ import annotations

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

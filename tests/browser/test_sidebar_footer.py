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
    assert await sidebar.evaluate("s => s.scrollHeight > s.clientHeight"), "the links no longer overflow: the test shows nothing"
    sign_out = sidebar.get_by_role("button", name="Sign out")
    box = await sign_out.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 800, box
    await expect(sign_out).to_be_in_viewport()

"""The connectors plugin's member section (``#plugin/mcp/member-grants``, a section of a
member's admin page) opened by its address has no member to show: it takes the admin
to the Members list, where each member's page with that section opens. It used to ask
``/api/plugin/mcp/members//grants`` (an empty id) and say only "Not found"."""

from __future__ import annotations

import importlib.metadata

import pytest
from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD

from .kit import sign_in


@pytest.fixture(autouse=True)
def mcp_installed() -> None:
    if not any(ep.name == "mcp" for ep in importlib.metadata.entry_points(group="skald.plugins")):
        pytest.skip("skald-mcp is not installed (pip install -e plugins/mcp_connectors)")


async def test_the_member_section_opened_by_its_address_leads_to_the_members_list(skald, browser_pages):
    host = await skald.start(use_entry_points=True, enable=["mcp"])
    await host.setup_admin()
    page = await browser_pages.new(host.url)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/api/plugin/mcp/members/" in request.url else None)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin/mcp/member-grants")
    await expect(page).to_have_url(f"{host.url}/#members")
    await expect(page.locator("#content h1")).to_have_text("Members")
    assert asked == []
    assert await page.get_by_text("Not found.").count() == 0

"""A role's simple interface (seed 001 "Role-driven interface"): the seeded restricted
role said "ui_mode": "simple", and its member still read Projects, Memory, Scheduled
prompts and Helpers in the menu, pages they could only be told they may not use."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import PHONE, sign_in
from .test_accessibility import assert_no_violations


async def host_links(page) -> list[str]:
    """The host's own pages in the menu (not the admin's, nor plugin pages)."""
    links = page.locator("#sidebar .sidebar-links > .nav-section").first.locator("a[data-route]")
    await expect(links.first).to_be_attached()
    return [text.strip() for text in await links.all_inner_texts()]


async def test_a_simple_roles_member_is_offered_chat_and_their_account_only(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    await host.create_member("kim", role="restricted")  # the seeded role asking for "simple"
    await host.create_member("lena")  # the member preset: the full interface

    kim = await browser_pages.new(host.url)
    await sign_in(kim, "kim", MEMBER_PASSWORD)
    assert await host_links(kim) == ["Chat", "My account"]
    await kim.goto("/#account")
    await expect(kim.get_by_role("heading", level=1)).to_have_text("My account")
    for typed in ("#schedules", "#memory", "#projects", "#agents"):
        await kim.goto(f"/{typed}")
        await expect(kim.get_by_role("heading", level=1)).to_have_text("Not part of your view")
        await expect(kim.locator("#content")).to_contain_text("This page is not part of it.")
    await assert_no_violations(kim, "a simple role's page outside its view")
    await kim.locator("#content").get_by_role("link", name="Back to Chat").click()
    await expect(kim).to_have_url(f"{host.url}/#chat")

    phone = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(phone, "kim", MEMBER_PASSWORD)
    await phone.get_by_role("button", name="Menu").click()
    menu = phone.get_by_role("navigation").locator(".sidebar-links a[data-route]")
    await expect(menu).to_have_text(["Chat", "My account"])

    lena = await browser_pages.new(host.url)
    await sign_in(lena, "lena", MEMBER_PASSWORD)
    full = await host_links(lena)
    assert {"Chat", "Projects", "Memory", "Scheduled prompts", "Helpers", "My account"} <= set(full), full
    await lena.goto("/#memory")
    await expect(lena.get_by_role("heading", level=1)).not_to_have_text("Not part of your view")


async def test_the_roles_page_sets_a_roles_interface(skald, browser_pages):
    host = await skald.start()
    client = await host.admin()
    await host.create_member("lena")
    admin = await browser_pages.new(host.url)
    await sign_in(admin, "admin", ADMIN_PASSWORD)
    await admin.goto("/#roles")
    card = admin.locator("[data-role=member]")
    interface = card.get_by_label("Interface")
    await expect(interface).to_have_value("full")
    await expect(admin.locator("[data-role=restricted]").get_by_label("Interface")).to_have_value("simple")
    await expect(admin.locator("[data-role=admin]").get_by_label("Interface")).to_have_count(0)  # always full
    await interface.select_option(label="Simple")
    await card.get_by_role("button", name="Save").click()
    await expect(card.locator(".form-status")).to_have_text("Saved.")
    roles = {r["id"]: r for r in (await client.get("/api/admin/roles")).json()["roles"]}
    assert roles["member"]["attrs"]["ui_mode"] == "simple"

    lena = await browser_pages.new(host.url)
    await sign_in(lena, "lena", MEMBER_PASSWORD)
    assert await host_links(lena) == ["Chat", "My account"]
    assert await host_links(admin) != ["Chat", "My account"]  # the admin's own stays full

"""A family admin walked the README in a browser (newcomer probe): a new role was made
receiving every new plugin (the box came ticked) and with "assistant" as its only chat
agent, which the form never showed; a Usage link with a reversed period showed the
API's field name ("since") and the default dates in the fields; a restricted member's
Helpers page showed internal ids, a version hash and "May hand work to: nobody"."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in


async def test_a_new_role_starts_without_new_plugins_and_sets_its_chat_agents_in_the_form(skald, browser_pages):
    host = await skald.start()
    client = await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#roles")
    creating = page.locator("form").filter(has=page.get_by_role("button", name="Create role"))
    auto_grant = creating.get_by_label("Receives new plugins automatically")
    await expect(auto_grant).not_to_be_checked()
    await expect(auto_grant).to_have_accessible_description(
        "Leave it unticked for a stricter role: you give its members each plugin yourself."
        " Ticked, every plugin turned on from now on reaches them without anyone asking.")
    agents, default = creating.get_by_label("Chat agents"), creating.get_by_label("Default agent")
    await expect(agents).to_have_value("assistant")
    await expect(default).to_have_value("assistant")

    await creating.get_by_label("Identifier").fill("teens")
    await creating.get_by_label("Name").fill("Teens")
    await agents.fill("*")
    await default.select_option("companion")
    await creating.get_by_role("button", name="Create role").click()
    card = page.locator("[data-role=teens]")
    await expect(card.locator("form > [role=status]")).to_have_text("Role “Teens” created.")
    role = {r["id"]: r for r in (await client.get("/api/admin/roles")).json()["roles"]}["teens"]
    assert role["attrs"]["auto_grant"] is False, role
    assert (role["attrs"]["chat_agents"], role["attrs"]["chat_agent"]) == (["*"], "companion"), role
    await expect(card.get_by_label("Default agent")).to_have_value("companion")


async def test_a_usage_link_with_a_reversed_period_keeps_its_dates_and_names_the_field_by_its_label(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#usage?since=2026-12-10&until=2026-12-01")
    since, until = page.get_by_label("From"), page.get_by_label("To (included)")
    await expect(since).to_have_attribute("aria-invalid", "true")
    await expect(since).to_have_value("2026-12-10")
    await expect(until).to_have_value("2026-12-01")
    await expect(since).to_have_accessible_description("From must not be after the end of the period.")
    await expect(page.get_by_role("status").filter(has_text="Please check")).to_have_text("Please check “From”.")
    assert "since" not in (await page.locator(".usage-page form").inner_text())


async def test_a_restricted_members_helpers_page_shows_titles_not_ids_or_hashes(skald, browser_pages, tmp_path):
    host = await skald.start()
    admin = await host.admin()
    # a role with few capabilities and the full interface: the pages under test are in it (the
    # seeded role's simple one leaves them out, see test_simple_interface.py)
    assert (await admin.patch("/api/admin/roles/restricted", json={"attrs": {"ui_mode": "full"}})).status_code == 200
    await host.create_member("kid", role="restricted")
    folder = tmp_path / "agents"
    (folder / "boss").mkdir(parents=True)
    (folder / "boss" / "AGENT.md").write_text("You hand work on.", encoding="utf-8")
    (folder / "boss" / "meta.yaml").write_text(
        "title: Boss\ndescription: Hands work on.\nkind: task\nallow_tools: true\ntools: [execute_task]\ndelegates: [researcher]\n",
        encoding="utf-8")
    catalog = host.core.chat.subagent_catalog
    catalog.agents.add_directory(folder, None)
    catalog.reload()
    assert catalog.refused is None

    page = await browser_pages.new(host.url)
    await sign_in(page, "kid", MEMBER_PASSWORD)
    await page.goto("/#agents")
    general = page.locator(".agent-definition[data-agent-id='general-purpose']")
    await expect(general.get_by_role("heading", name="General purpose")).to_be_visible()
    text = await general.inner_text()
    assert "general-purpose" not in text and "Version" not in text, text
    await expect(general.locator("dd").nth(1)).to_have_text("no other helper: it does its tasks itself")
    await expect(page.locator(".agent-definition[data-agent-id='boss'] dd").nth(1)).to_have_text("Researcher")

    # The admin still reads the id and the version, on a details line of their own.
    admin_page = await browser_pages.new(host.url)
    await sign_in(admin_page, "admin", ADMIN_PASSWORD)
    await admin_page.goto("/#agents")
    details = admin_page.locator(".agent-definition[data-agent-id='general-purpose'] .agent-details")
    await expect(details).to_contain_text("general-purpose")
    await expect(details).to_contain_text("Version")

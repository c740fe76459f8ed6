"""An admin's week in the browser (probe admin2): what cuts a member off at once is asked
first; the shared folders' "can write" boxes and the approval rules' buttons are named
apart; a refusal names its field as labelled; an instance report is for the admins."""

from __future__ import annotations

from playwright.async_api import expect

import skald_system_agents
from skald_hookspecs import Report
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import sign_in


async def test_cutting_a_member_off_is_asked_first(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    anna = await host.create_member("anna", display_name="Anna")
    bea = await host.create_member("bea", display_name="Bea", role="admin")
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)

    async def member(member_id):
        return await host.core.users.get(member_id)

    # "Can sign in" unticked and saved: asked; Cancel leaves them able to sign in.
    await page.goto(f"/#members/{anna['id']}")
    await expect(page.get_by_role("heading", name="Anna", level=1)).to_be_visible()
    await page.get_by_role("switch", name="Can sign in").uncheck()
    save = page.get_by_role("button", name="Save", exact=True).first
    await save.click()
    dialog = page.get_by_role("dialog", name="Stop Anna from signing in?")
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_have_count(0)
    assert (await member(anna["id"])).active
    await save.click()
    await dialog.get_by_role("button", name="Turn off sign-in").click()
    await expect(page.get_by_text("Saved.")).to_be_visible()
    assert not (await member(anna["id"])).active

    # "Sign out everywhere": asked.
    await page.get_by_role("button", name="Sign out everywhere").click()
    dialog = page.get_by_role("dialog", name="Sign Anna out everywhere?")
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_have_count(0)

    # An admin demoted: asked; Cancel keeps them an admin.
    await page.goto(f"/#members/{bea['id']}")
    await expect(page.get_by_role("heading", name="Bea", level=1)).to_be_visible()  # not Anna's page still
    await page.get_by_label("Role").select_option("member")
    save = page.get_by_role("button", name="Save", exact=True).first
    await save.click()
    dialog = page.get_by_role("dialog", name="Take admin rights from Bea?")
    await expect(dialog).to_be_visible()
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_have_count(0)
    assert (await member(bea["id"])).is_admin
    await save.click()
    await dialog.get_by_role("button", name="Change role").click()
    await expect(page.get_by_text("Saved.")).to_be_visible()
    assert not (await member(bea["id"])).is_admin


async def test_shared_folder_rows_are_named_and_removing_a_member_is_asked(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    await host.create_member("anna")
    await host.create_member("ben")
    folder = (await admin.post("/api/admin/shared-folders", json={"slug": "recipes", "title": "Recipes"})).json()
    for username in ("anna", "ben"):
        response = await admin.post(f"/api/admin/shared-folders/{folder['id']}/members", json={"username": username})
        assert response.status_code == 201, response.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#shared-folders")
    card = page.locator("article[data-folder=recipes]")
    write = card.get_by_role("checkbox", name="anna can write", exact=True)
    await write.check()
    await expect(card.get_by_role("status")).to_have_text("Saved.")
    members = (await admin.get("/api/admin/shared-folders")).json()["folders"][0]["members"]
    assert {m["username"]: m["can_write"] for m in members} == {"anna": True, "ben": False}

    await card.get_by_role("button", name="Remove anna").click()
    dialog = page.get_by_role("dialog", name="Remove anna from this folder?")
    await expect(dialog).to_contain_text("anna no longer reaches “Recipes”")
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(card.locator("tr[data-member=anna]")).to_have_count(1)
    await card.get_by_role("button", name="Remove anna").click()
    await dialog.get_by_role("button", name="Remove").click()
    await expect(card.locator("tr[data-member=anna]")).to_have_count(0)
    members = (await admin.get("/api/admin/shared-folders")).json()["folders"][0]["members"]
    assert [m["username"] for m in members] == ["ben"]


async def test_a_german_folder_name_refusal_names_the_field_as_labelled(skald, browser_pages):
    host = await skald.start()
    await host.setup_admin(locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#shared-folders")
    await page.get_by_label("Ordnername").fill("Kein Name!")
    await page.get_by_role("button", name="Ordner anlegen").click()
    await expect(page.get_by_text("Der Ordnername darf")).to_be_visible()
    await expect(page.get_by_text("Kurzname")).to_have_count(0)


async def test_rules_sharing_a_tool_pattern_have_buttons_named_apart(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    for path_class in ("notes/**", "diary/**"):
        response = await admin.post("/api/admin/approval-rules", json={"tool_pattern": "zz_read", "path_class": path_class, "action": "allow", "priority": 5})
        assert response.status_code == 201, response.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#approvals")
    for path_class in ("notes/**", "diary/**"):
        await expect(page.get_by_role("button", name=f"Delete: zz_read, path {path_class}", exact=True)).to_have_count(1)
        await expect(page.get_by_role("button", name=f"Edit: zz_read, path {path_class}", exact=True)).to_have_count(1)


async def test_an_instance_report_is_under_a_heading_for_admins(skald, browser_pages):
    host = await skald.start(plugins=[skald_system_agents], enable=["system_agents"], settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)  # a first login gives them a key reports are sealed to
    await host.core.reports.file_shared(
        "admins", [admin.member["id"]], Report("Shared memory: all clear", "Nothing to fix.", "# All clear"),
        kind="shared_memory_lint", agent_id="memory_lint_shared",
    )
    await page.goto("/#reports")
    def part(heading):
        return page.locator("section").filter(has=page.get_by_role("heading", name=heading, exact=True))

    instance = part("Reports about the server, for admins")
    await expect(instance.get_by_test_id("report")).to_contain_text("Shared memory: all clear")
    await expect(part("Reports for you as a supervisor").get_by_test_id("report")).to_have_count(0)

"""The project file dialogs are named by their headings: a screen reader opening the
rename dialog heard only "dialog" (its <h2> "plan.txt umbenennen" named nothing), while
the delete confirmation beside it was named."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .test_accessibility import sign_in_german


async def test_the_rename_and_delete_dialogs_are_named_by_their_headings(skald, browser_pages):
    host = await skald.start()
    await host.setup_admin()
    greta = await host.member("greta", locale="de")
    created = await greta.post("/api/projects", json={"slug": "garten", "title": "Garten"})
    assert created.status_code == 201, created.text
    project = created.json()["id"]
    assert (await greta.post(f"/api/projects/{project}/files/upload/plan.txt", content=b"Beete")).status_code == 201

    page = await browser_pages.new(host.url, locale="de-DE")
    await sign_in_german(page, "greta", MEMBER_PASSWORD)
    await page.goto(f"/#projects/{project}")
    await page.get_by_role("button", name="plan.txt umbenennen").click()
    rename = page.get_by_role("dialog", name="plan.txt umbenennen")
    await expect(rename).to_be_visible()
    await rename.get_by_role("textbox", name="Neuer Name").fill("beete.txt")
    await rename.get_by_role("button", name="Umbenennen").click()
    await expect(page.get_by_role("link", name="beete.txt")).to_be_visible()

    await page.get_by_role("button", name="beete.txt löschen").click()
    await expect(page.get_by_role("dialog", name="Wirklich löschen?")).to_be_visible()

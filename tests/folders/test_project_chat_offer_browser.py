""""Chat in this project" in a real browser: offered to a member whose role has project
chat; a member whose role lacks it (the restricted preset) sees why it is not there
instead of a button that could only answer 403. The server refuses them regardless."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD
from tests.browser.conftest import browser_pages  # noqa: F401  (the watched-pages fixture)
from tests.browser.kit import sign_in
from tests.folders.support import join_project


async def test_project_chat_is_offered_only_to_a_role_that_has_it(skald, browser_pages):  # noqa: F811
    host = await skald.start()
    admin = await host.admin()
    # a role with few capabilities and the full interface: the pages under test are in it (the
    # seeded role's simple one leaves them out, see tests/browser/test_simple_interface.py)
    assert (await admin.patch("/api/admin/roles/restricted", json={"attrs": {"ui_mode": "full"}})).status_code == 200
    alice = await host.member("alice")
    rita = await host.member("rita", role="restricted")
    pid = (await alice.post("/api/projects", json={"slug": "garden", "title": "Garden"})).json()["id"]
    await join_project(alice, rita, pid, can_write=True)
    assert (await rita.post(f"/api/projects/{pid}/chat")).json()["code"] == "project_chat_forbidden"

    page = await browser_pages.new(host.url)
    await sign_in(page, "rita", MEMBER_PASSWORD)
    await page.goto(f"/#projects/{pid}")
    await expect(page.get_by_role("heading", name="Garden", exact=True)).to_be_visible()
    await expect(page.get_by_test_id("project-chat-unavailable")).to_have_text(
        "Your role does not include project chat; an admin can add it to your role."
    )
    await expect(page.get_by_role("button", name="Chat in this project")).to_have_count(0)
    await expect(page.get_by_role("button", name="Leave project")).to_be_visible()  # the other actions stay

    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto(f"/#projects/{pid}")
    await expect(page.get_by_role("button", name="Chat in this project")).to_be_visible()
    await expect(page.get_by_test_id("project-chat-unavailable")).to_have_count(0)

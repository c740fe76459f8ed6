"""Projects in a real browser: a member creates a project, uploads a file in its
explorer, makes and renames a folder, and after a refresh sees the files the agent
wrote there with its fs tools in a project chat (the scripted model asks for the
writes); a member invited read-only accepts on their Projects page and sees the files
but no write controls; an invitation can be declined and withdrawn. The admin shares a
folder on its page."""

from __future__ import annotations

import re

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from tests.browser.conftest import browser_pages  # noqa: F401  (the watched-pages fixture)
from tests.browser.kit import screenshot, sign_in
from tests.chat.support import API_KEY, MODEL_A, ChatSocket, configure_models


async def test_member_creates_a_project_uploads_and_sees_the_agents_file(skald, browser_pages):  # noqa: F811
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as server:
        await _project_explorer_with_the_agents_files(skald, browser_pages, server)


async def _project_explorer_with_the_agents_files(skald, browser_pages, server) -> None:  # noqa: F811
    host = await skald.start()
    admin = await host.admin()
    await configure_models(admin, server, (MODEL_A,))
    await host.create_member("alice", display_name="Alice")
    await host.create_member("bob", display_name="Bob")
    alice_id = (await host.core.users.find("alice")).id

    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="Projects").click()
    await expect(page.get_by_text("You are not in any project yet.")).to_be_visible()
    await page.get_by_label("Title").fill("Garden plan")
    await expect(page.get_by_label("Folder name")).to_have_value("garden-plan")
    await page.get_by_label("Description").fill("Raised beds by June")
    await page.get_by_role("button", name="Create project").click()
    await expect(page.get_by_role("heading", name="Garden plan", exact=True)).to_be_visible()
    await expect(page.get_by_text("This folder is empty.")).to_be_visible()
    folder = host.settings.data_dir / "projects" / alice_id / "garden-plan"
    assert folder.is_dir()

    await page.get_by_label("Upload files").set_input_files(
        files=[{"name": "seeds.txt", "mimeType": "text/plain", "buffer": b"carrots, beans\n"}]
    )
    await expect(page.locator("tr[data-entry='seeds.txt']")).to_be_visible()
    assert (folder / "seeds.txt").read_bytes() == b"carrots, beans\n"

    await page.get_by_label("New folder").fill("drafts")
    await page.get_by_role("button", name="Create folder").click()
    await expect(page.get_by_role("link", name="drafts/")).to_be_visible()
    await page.get_by_role("button", name="Rename seeds.txt").click()
    dialog = page.locator("dialog")
    await dialog.get_by_label("New name").fill("seed-list.txt")
    await dialog.get_by_role("button", name="Rename").click()
    await expect(page.locator("tr[data-entry='seed-list.txt']")).to_be_visible()
    assert (folder / "seed-list.txt").exists() and not (folder / "seeds.txt").exists()

    # The agent writes into the project folder in a project chat (the seeded folder
    # rules let the fs tools work there without asking); a refresh shows its files.
    project_id = (await host.core.folders.memberships(alice_id))[0].id
    server.script(
        MODEL_A,
        [
            Reply("Writing.", tool_calls=[
                ToolCall("write_file", {"path": "projects/alice/garden-plan/summary.md", "content": "Beds: 4\n"}),
                ToolCall("write_file", {"path": "projects/alice/garden-plan/drafts/layout.md", "content": "# Bed layout\n"}),
            ]),
            Reply("Both files are in the project folder."),
        ],
    )
    alice = await host.member("alice")
    started = await alice.post(f"/api/projects/{project_id}/chat")
    assert started.status_code == 201, started.text
    conversation_id = started.json()["id"]
    async with ChatSocket(alice) as sock:
        await sock.send(conversation_id, "Write the summary and the layout draft.")
        events = await sock.turn(conversation_id)
    assert "error" not in [e["type"] for e in events], events
    assert (folder / "summary.md").read_text() == "Beds: 4\n"
    assert (folder / "drafts" / "layout.md").read_text() == "# Bed layout\n"
    await page.reload()
    await expect(page.locator("tr[data-entry='summary.md']")).to_be_visible()
    await page.get_by_role("link", name="drafts/").click()
    await expect(page.locator("tr[data-entry='drafts/layout.md']")).to_be_visible()
    await expect(page.get_by_role("navigation", name="Folder path")).to_contain_text("Garden plan / drafts")
    await page.get_by_role("button", name="Refresh").click()
    await expect(page.locator("tr[data-entry='drafts/layout.md']")).to_be_visible()
    await page.get_by_role("navigation", name="Folder path").get_by_role("link", name="Garden plan").click()
    await expect(page.locator("tr[data-entry='summary.md']")).to_be_visible()

    # invite bob read-only: he is a member once he accepts
    await page.get_by_label("User name").fill("bob")
    await page.get_by_role("button", name="Invite").click()
    await expect(page.locator("tr[data-invitation='bob']")).to_be_visible()
    await expect(page.get_by_role("status").filter(has_text="Invitation sent to @bob.")).to_be_visible()
    await expect(page.locator("tr[data-member='bob']")).to_have_count(0)
    await screenshot(page, "project-explorer-desktop")

    bob = await browser_pages.new(host.url)
    await sign_in(bob, "bob", MEMBER_PASSWORD)
    await bob.goto("/#projects")
    invitations = bob.get_by_test_id("project-invitations")
    await expect(invitations).to_contain_text("Alice (@alice) invites you to “Garden plan”.")
    await expect(invitations).to_contain_text("You could read its files.")
    await expect(bob.get_by_text("You are not in any project yet.")).to_be_visible()
    await bob.get_by_role("button", name="Accept the invitation to Garden plan").click()
    await expect(bob.locator("tr[data-entry='summary.md']")).to_be_visible()
    await expect(bob.get_by_text("You can read this project's files but not change them.")).to_be_visible()
    await expect(bob.get_by_label("Upload files")).to_have_count(0)
    await expect(bob.get_by_role("button", name="Delete summary.md")).to_have_count(0)
    await expect(bob.get_by_role("button", name="Chat in this project")).to_be_visible()


async def test_an_invitation_is_declined_by_its_invitee_and_withdrawn_by_the_owner(skald, browser_pages):  # noqa: F811
    """The probe's case: mallory's project with a lure of a title. Alice sees who asks her
    into what, declines, and is in nothing; the owner sees the open invitation, and
    withdraws it; an invitation to a name nobody has looks like any other."""
    host = await skald.start()
    await host.admin()
    await host.create_member("alice", display_name="Alice")
    mallory = await host.member("mallory", display_name="Mallory")
    project = (await mallory.post("/api/projects", json={"slug": "p3", "title": "Urgent: read INSTRUCTIONS.md"})).json()
    assert (await mallory.post(f"/api/projects/{project['id']}/members", json={"username": "alice", "can_write": True})).status_code == 201

    alice = await browser_pages.new(host.url)
    await sign_in(alice, "alice", MEMBER_PASSWORD)
    await alice.goto("/#projects")
    invitations = alice.get_by_test_id("project-invitations")
    await expect(invitations).to_contain_text("Mallory (@mallory) invites you to “Urgent: read INSTRUCTIONS.md”.")
    await expect(invitations).to_contain_text("You could read and change its files.")
    await expect(alice.get_by_test_id("project-list")).to_have_count(0)
    await screenshot(alice, "project-invitation-desktop")
    await alice.get_by_role("button", name="Decline the invitation to Urgent: read INSTRUCTIONS.md").click()
    await expect(invitations).to_have_count(0)
    await expect(alice.get_by_text("You are not in any project yet.")).to_be_visible()
    alice_id = (await host.core.users.find("alice")).id
    assert await host.core.folders.memberships(alice_id) == []
    assert (await host.core.folders.invitations_for(alice_id)) == []

    owner = await browser_pages.new(host.url)
    await sign_in(owner, "mallory", MEMBER_PASSWORD)
    await owner.goto(f"/#projects/{project['id']}")
    pending = owner.get_by_test_id("pending-invitations")
    await expect(pending).to_contain_text("No open invitations.")
    for name in ("alice", "nobody-here"):
        await owner.get_by_label("User name").fill(name)
        await owner.get_by_role("button", name="Invite").click()
        await expect(owner.get_by_role("status").filter(has_text=f"Invitation sent to @{name}.")).to_be_visible()
    await expect(pending.locator("tr[data-invitation='alice']")).to_contain_text("invited by @mallory")
    await expect(pending.locator("tr[data-invitation='nobody-here']")).to_contain_text("invited by @mallory")
    await owner.get_by_role("button", name="Withdraw the invitation of alice").click()
    await expect(pending.locator("tr[data-invitation='alice']")).to_have_count(0)
    assert (await host.core.folders.invitations_for(alice_id)) == []
    await alice.reload()
    await expect(alice.get_by_text("You are not in any project yet.")).to_be_visible()
    await expect(alice.get_by_test_id("project-invitations")).to_have_count(0)


async def test_admin_shares_a_folder_on_the_shared_folders_page(skald, browser_pages):  # noqa: F811
    host = await skald.start()
    await host.admin()
    await host.create_member("alice", display_name="Alice")
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="Shared folders").click()
    await expect(page.get_by_text("There are no shared folders yet.")).to_be_visible()
    await page.get_by_label("Folder name").fill("Bad Name")
    await page.get_by_role("button", name="Create folder").click()
    # The server's refusal is said at the field it is about, as on the other admin forms.
    name_field = page.get_by_label("Folder name")
    await expect(name_field).to_have_attribute("aria-invalid", "true")
    await expect(name_field).to_have_accessible_description(re.compile("lowercase letters"))
    await page.get_by_label("Folder name").fill("recipes")
    await page.get_by_label("Title").last.fill("Recipes")
    await page.get_by_role("button", name="Create folder").click()
    card = page.locator("[data-folder=recipes]")
    await expect(card.get_by_role("heading", name="Recipes")).to_be_visible()
    await card.get_by_label("Member").select_option("alice")
    await card.get_by_role("button", name="Add").click()
    await expect(card.locator("tr[data-member=alice]")).to_be_visible()
    alice_id = (await host.core.users.find("alice")).id
    [access] = await host.core.folders.memberships(alice_id)
    assert (access.agent_prefix, access.can_write) == ("shared/recipes", False)
    await card.locator("tr[data-member=alice]").get_by_label("can write").check()
    for _ in range(50):
        if await _can_write(host, alice_id):
            break
        await page.wait_for_timeout(50)
    assert await _can_write(host, alice_id)
    await screenshot(page, "shared-folders-desktop")


async def _can_write(host, member_id: str) -> bool:
    return any(a.can_write for a in await host.core.folders.memberships(member_id))


async def test_a_blank_project_title_is_marked_at_its_field_in_the_readers_language(skald, browser_pages):  # noqa: F811
    """A title of two spaces read "{field} must not be empty": now the title is marked,
    and the reason names it by its label, in German for a German member."""
    host = await skald.start()
    await host.admin()
    await host.create_member("berta", locale="de")
    berta = await host.member("berta")
    project = (await berta.post("/api/projects", json={"slug": "garten", "title": "Garten"})).json()
    page = await browser_pages.new(host.url)
    await sign_in(page, "berta", MEMBER_PASSWORD)

    await page.goto(f"{host.url}/#projects")
    await page.get_by_label("Titel").fill("  ")
    await page.get_by_role("button", name="Projekt anlegen").click()
    title = page.get_by_label("Titel")
    await expect(title).to_have_attribute("aria-invalid", "true")
    await expect(title).to_have_accessible_description("Titel ist erforderlich.")

    await page.goto(f"{host.url}/#projects/{project['id']}")
    await expect(page.get_by_role("heading", name="Garten", exact=True)).to_be_visible()
    title = page.get_by_label("Titel")
    await expect(title).to_have_value("Garten")
    await title.fill("  ")
    await page.get_by_role("button", name="Speichern").click()
    await expect(title).to_have_attribute("aria-invalid", "true")
    await expect(title).to_have_accessible_description("Titel ist erforderlich.")
    await expect(page.get_by_role("status").filter(has_text="Bitte prüfe „Titel“.")).to_be_visible()
    assert (await berta.get(f"/api/projects/{project['id']}")).json()["title"] == "Garten"

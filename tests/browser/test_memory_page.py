"""The memory page in a real browser: create, edit, search and delete a private note,
see a shared one, and the restricted role's shared tab answering with the reason."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import screenshot, sign_in


async def test_member_creates_edits_searches_and_deletes_a_note(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    alice_api = await host.member("alice")
    response = await alice_api.put("/api/memory/shared-memory/notes/rota.md", json={"content": "Who waters the garden"})
    assert response.status_code == 200

    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="Memory", exact=True).click()
    await expect(page.get_by_role("heading", name="Memory", exact=True)).to_be_visible()
    await expect(page.get_by_role("link", name="My notes", exact=True)).to_have_attribute("aria-current", "page")
    await expect(page.get_by_text("No notes yet.")).to_be_visible()

    # Create.
    await page.get_by_test_id("memory-new").click()
    await page.get_by_label("Name").fill("plans/garden.md")
    await page.get_by_label("Content").fill("Plant tomatoes in May.")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("heading", name="plans/garden.md")).to_be_visible()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()  # a new note too, on its page
    assert (await alice_api.get("/api/memory/user-memory/notes/plans/garden.md")).json()["content"] == "Plant tomatoes in May."
    await page.reload()  # said once, not again on coming back
    await expect(page.get_by_role("heading", name="plans/garden.md")).to_be_visible()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_have_count(0)

    # Edit.
    await page.get_by_label("Content").fill("Plant tomatoes and basil in May.")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    assert (await alice_api.get("/api/memory/user-memory/notes/plans/garden.md")).json()["content"] == "Plant tomatoes and basil in May."
    await screenshot(page, "memory-editor")

    # Search.
    await page.get_by_role("link", name="All notes").click()
    await page.get_by_label("Search notes").fill("basil")
    await page.get_by_role("button", name="Search").click()
    results = page.get_by_test_id("memory-list")
    await expect(results.locator("li")).to_have_count(1)
    await expect(results.get_by_role("link", name="plans/garden.md")).to_be_visible()
    await expect(results).to_contain_text("basil")
    await page.get_by_label("Search notes").fill("cucumbers")
    await page.get_by_role("button", name="Search").click()
    await expect(page.get_by_text("No note matches.")).to_be_visible()

    # The shared tab shows the shared pool.
    await page.get_by_role("link", name="Shared notes", exact=True).click()
    await expect(page.get_by_test_id("memory-list").get_by_role("link", name="rota.md")).to_be_visible()

    # Delete, after confirming.
    await page.get_by_role("link", name="My notes", exact=True).click()
    await page.get_by_test_id("memory-list").get_by_role("link", name="plans/garden.md").click()
    await page.get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("plans/garden.md will be deleted")
    await dialog.get_by_role("button", name="Delete").click()
    await expect(page.get_by_text("No notes yet.")).to_be_visible()
    assert (await alice_api.get("/api/memory/user-memory/notes")).json()["notes"] == []


async def test_the_restricted_role_is_not_offered_the_shared_tab_and_reads_why_in_its_language(skald, browser_pages):
    """A role without shared memory is not offered its tab (nor its "New note"); the
    address typed anyway answers with the reason in the member's language."""
    host = await skald.start()
    admin = await host.admin()
    # a role with few capabilities and the full interface: the pages under test are in it (the
    # seeded role's simple one leaves them out, see test_simple_interface.py)
    assert (await admin.patch("/api/admin/roles/restricted", json={"attrs": {"ui_mode": "full"}})).status_code == 200
    await host.create_member("kid", role="restricted", locale="de")  # signs in on the English form, then German
    page = await browser_pages.new(host.url)
    await sign_in(page, "kid", MEMBER_PASSWORD)
    await page.goto("/#memory")
    await expect(page.get_by_role("link", name="Meine Notizen", exact=True)).to_have_attribute("aria-current", "page")
    await expect(page.get_by_test_id("memory-new")).to_be_visible()  # her own notes: hers to write
    await expect(page.get_by_role("link", name="Geteilte Notizen", exact=True)).to_have_count(0)
    await page.goto("/#memory/shared")
    await expect(page.get_by_role("link", name="Geteilte Notizen", exact=True)).to_have_attribute("aria-current", "page")
    await expect(page.get_by_role("tab")).to_have_count(0)  # links between addresses, not tabs promising arrow keys
    await expect(page.get_by_role("alert")).to_have_text("Deine Rolle erlaubt dir nicht, die geteilten Notizen zu lesen.")


async def test_a_role_that_may_read_but_not_change_shared_notes_gets_no_new_note_or_save_there(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    alice_api = await host.member("alice")
    assert (await alice_api.put("/api/memory/shared-memory/notes/rota.md", json={"content": "Who waters the garden"})).status_code == 200
    await host.core.registry.transaction(
        lambda c: c.execute("DELETE FROM role_capabilities WHERE role_id = 'member' AND capability = 'memory.shared.write'")
    )
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#memory/shared")
    await expect(page.get_by_test_id("memory-list").get_by_role("link", name="rota.md")).to_be_visible()
    await expect(page.get_by_test_id("memory-new")).to_have_count(0)
    await page.get_by_test_id("memory-list").get_by_role("link", name="rota.md").click()
    await expect(page.get_by_label("Content")).to_have_value("Who waters the garden")
    await expect(page.get_by_label("Content")).not_to_be_editable()
    await expect(page.get_by_role("button", name="Save")).to_have_count(0)
    await expect(page.get_by_role("button", name="Delete")).to_have_count(0)


async def test_a_german_member_reads_gespeichert_after_saving_a_new_note(skald, browser_pages):
    host = await skald.start()
    await host.create_member("berta", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "berta", MEMBER_PASSWORD)
    await page.goto("/#memory")
    await page.get_by_test_id("memory-new").click()
    await page.get_by_test_id("memory-editor").get_by_role("textbox").first.fill("einkauf.md")
    await page.get_by_test_id("memory-editor").locator("textarea").fill("Milch")
    await page.get_by_role("button", name="Speichern").click()
    await expect(page.get_by_role("heading", name="einkauf.md")).to_be_visible()
    await expect(page.get_by_role("status").filter(has_text="Gespeichert.")).to_be_visible()


async def test_a_new_note_never_replaces_one_and_a_name_leaving_its_folder_is_refused(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    alice_api = await host.member("alice")
    assert (await alice_api.put("/api/memory/user-memory/notes/plans.md", json={"content": "Keep me."})).status_code == 200
    requests: list[str] = []
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    page.on("request", lambda request: requests.append(f"{request.method} {request.url}") if "/api/memory/" in request.url else None)
    await page.goto(f"{host.url}/#memory/mine?new=1")

    # A name already taken: said so, and the note is as it was.
    await page.get_by_label("Name").fill("plans.md")
    await page.get_by_label("Content").fill("Overwritten.")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="A note called plans.md already exists.")).to_be_visible()
    assert (await alice_api.get("/api/memory/user-memory/notes/plans.md")).json()["content"] == "Keep me."
    # One create-only request, refused (409): nothing was written over.
    assert [r for r in requests if r.startswith("PUT")] == [f"PUT {host.url}/api/memory/user-memory/notes/plans.md?create=1"]

    # A name with a "." or ".." part or a leading "/": refused before any request (the
    # browser would send "a/./b.md" as "a/b.md").
    for name in ("../escape.md", "a/../b.md", "a/./b.md", "/root.md"):
        requests.clear()
        await page.get_by_label("Name").fill(name)
        await page.get_by_role("button", name="Save").click()
        await expect(page.get_by_role("status").filter(has_text="may not start with “/” or have “.” or “..” as a part")).to_be_visible()
        assert requests == [], name
    assert [n["key"] for n in (await alice_api.get("/api/memory/user-memory/notes")).json()["notes"]] == ["plans.md"]

    # A free name is created; an existing note's editor still saves over it.
    await page.get_by_label("Name").fill("ideas.md")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("heading", name="ideas.md")).to_be_visible()
    await page.get_by_label("Content").fill("Second thoughts.")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    assert (await alice_api.get("/api/memory/user-memory/notes/ideas.md")).json()["content"] == "Second thoughts."


async def test_a_list_cut_at_the_limit_says_so_and_points_to_search(skald, browser_pages, monkeypatch):
    """The notes list stops at the server's limit (2,000; 3 here): the page said nothing,
    and the notes past it were out of reach but for search (memory probe)."""
    from skald_host.web.routes import memory as memory_routes

    monkeypatch.setattr(memory_routes, "LIST_LIMIT", 3)
    host = await skald.start()
    client = await host.member("berta", locale="de")
    for name in ("a.md", "b.md", "c.md", "zzz-wichtig.md"):
        saved = await client.put(f"/api/memory/user-memory/notes/{name}?create=1", json={"content": "x"})
        assert saved.status_code in (200, 201), saved.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "berta", MEMBER_PASSWORD)
    await page.goto("/#memory")
    await expect(page.get_by_test_id("memory-list").locator("li")).to_have_count(3)
    await expect(page.get_by_text("Nur die ersten 3 Notizen sind aufgelistet. Die Suche findet jede.")).to_be_visible()

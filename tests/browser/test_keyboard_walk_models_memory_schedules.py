"""A newcomer's keyboard walk through Models, Memory and Scheduled prompts lost their
place: "Load names" hid itself with the focus on it (to <body>); a search, "New note",
saving a new note and creating a scheduled prompt each drew the page again as a new
one, the focus on <main>, with nothing said; and every new note logged a 404 in the
console (its "does it exist?" GET). Each now keeps the focus where the work goes on and
says the outcome in a status line; a new note is written with a create-only PUT."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import admin_on_models_page, sign_in
from .test_accessibility_focus import focus_by_keyboard


async def test_load_names_by_keyboard_puts_the_focus_on_the_model_name_and_says_how_many(skald, browser_pages):
    async with admin_on_models_page(skald, browser_pages) as (_, _, page):
        form = page.locator("form.model-form")
        load = form.get_by_role("button", name="Load names")
        await focus_by_keyboard(page, load)
        await page.keyboard.press("Enter")
        await expect(load).to_be_hidden()
        name = form.get_by_label("Model name")
        await expect(name).to_be_focused()
        await expect(page.locator(f"datalist#{await name.get_attribute('list')} option")).to_have_count(2)
        await expect(form.get_by_role("status")).to_have_text("2 names loaded: they are offered as you type the model name.")
        await page.keyboard.type("alpha-model")  # and the keyboard goes on from there
        await expect(name).to_have_value("alpha-model")


async def test_searching_notes_by_keyboard_keeps_the_focus_in_the_search_box_and_says_what_was_found(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    for key, text in (("garden.md", "Plant basil in May."), ("kitchen.md", "Basil pesto.")):
        assert (await alice.put(f"/api/memory/user-memory/notes/{key}", json={"content": text})).status_code == 200
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#memory/mine")
    box = page.get_by_role("searchbox", name="Search notes")
    await focus_by_keyboard(page, box)
    await page.keyboard.type("basil")
    await page.keyboard.press("Enter")
    await expect(page.get_by_test_id("memory-list").locator("li")).to_have_count(2)
    await expect(page).to_have_url(f"{host.url}/#memory/mine?q=basil")
    await expect(page.get_by_role("searchbox", name="Search notes")).to_be_focused()
    await expect(page.get_by_role("searchbox", name="Search notes")).to_have_value("basil")
    status = page.get_by_role("search").get_by_role("status")
    await expect(status).to_have_text("2 notes match “basil”.")

    # Another search from where the focus is: nothing found, and said so.
    await page.keyboard.press("ControlOrMeta+a")
    await page.keyboard.type("cucumber")
    await page.keyboard.press("Enter")
    await expect(page.get_by_text("No note matches.")).to_be_visible()
    await expect(page.get_by_role("searchbox", name="Search notes")).to_be_focused()
    await expect(status).to_have_text("No note matches “cucumber”.")
    await page.go_back()  # each search has its address
    await expect(page.get_by_test_id("memory-list").locator("li")).to_have_count(2)


async def alice_on_memory(skald, browser_pages):
    """A host, Alice's API client (her note taken.md stored) and her page on her notes."""
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    assert (await alice.put("/api/memory/user-memory/notes/taken.md", json={"content": "Mine."})).status_code == 200
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#memory/mine")
    await expect(page.get_by_test_id("memory-list").locator("li")).to_have_count(1)
    return host, alice, page


async def test_new_note_by_keyboard_puts_the_focus_on_its_name(skald, browser_pages):
    host, _, page = await alice_on_memory(skald, browser_pages)
    new = page.get_by_test_id("memory-new")
    await focus_by_keyboard(page, new)
    await page.keyboard.press("Enter")
    editor = page.get_by_test_id("memory-editor")
    await expect(editor.get_by_label("Name")).to_be_focused()
    await expect(page).to_have_url(f"{host.url}/#memory/mine?new=1")
    await page.keyboard.type("plans/garden.md")
    await page.keyboard.press("Tab")
    await expect(editor.get_by_label("Content")).to_be_focused()


async def test_a_new_note_saved_by_keyboard_opens_with_the_focus_on_its_save_and_says_saved(skald, browser_pages):
    host, alice, page = await alice_on_memory(skald, browser_pages)
    await page.goto("/#memory/mine?new=1")
    editor = page.get_by_test_id("memory-editor")
    await editor.get_by_label("Name").fill("plans/garden.md")
    await editor.get_by_label("Content").fill("Plant tomatoes in May.")
    await focus_by_keyboard(page, editor.get_by_role("button", name="Save"))
    await page.keyboard.press("Enter")

    await expect(page.get_by_role("heading", name="plans/garden.md")).to_be_visible()
    await expect(page).to_have_url(f"{host.url}/#memory/mine?key=plans%2Fgarden.md")
    saved = page.get_by_test_id("memory-editor")
    await expect(saved.get_by_role("status")).to_have_text("Saved.")
    await expect(saved.get_by_role("button", name="Save")).to_be_focused()
    assert (await alice.get("/api/memory/user-memory/notes/plans/garden.md")).json()["content"] == "Plant tomatoes in May."

    # Saving it again keeps the focus on Save and says so again.
    await saved.get_by_label("Content").fill("Plant tomatoes and basil in May.")
    await focus_by_keyboard(page, saved.get_by_role("button", name="Save"))
    await page.keyboard.press("Enter")
    await expect(saved.get_by_role("status")).to_have_text("Saved.")
    await expect(saved.get_by_role("button", name="Save")).to_be_focused()
    await page.reload()  # said once, not again on coming back
    await expect(page.get_by_role("heading", name="plans/garden.md")).to_be_visible()
    await expect(page.get_by_test_id("memory-editor").locator(".form-status")).to_have_text("")


async def test_a_new_note_is_written_without_a_failing_request_and_a_taken_name_is_refused(skald, browser_pages):
    _, alice, page = await alice_on_memory(skald, browser_pages)
    answers: list[tuple[str, str, int]] = []
    page.on("response", lambda r: answers.append((r.request.method, r.url, r.status)) if "/api/memory/" in r.url else None)
    await page.goto("/#memory/mine?new=1")
    editor = page.get_by_test_id("memory-editor")
    await editor.get_by_label("Name").fill("plans/garden.md")
    await editor.get_by_label("Content").fill("Plant tomatoes in May.")
    await editor.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("heading", name="plans/garden.md")).to_be_visible()
    # No request whose normal answer is a 404 (the browser logs it as an error).
    assert [a for a in answers if a[2] >= 400] == [], answers
    assert [m for m in browser_pages.watch.console if "404" in m] == [], browser_pages.watch.console

    # A name already taken is refused (the create-only PUT answers 409), not replaced.
    await page.goto("/#memory/mine?new=1")
    editor = page.get_by_test_id("memory-editor")
    await editor.get_by_label("Name").fill("taken.md")
    await editor.get_by_label("Content").fill("Other.")
    await editor.get_by_role("button", name="Save").click()
    await expect(editor.get_by_role("status")).to_have_text("A note called taken.md already exists. Open it to change it, or choose another name.")
    await expect(editor.get_by_label("Name")).to_be_focused()
    assert (await alice.get("/api/memory/user-memory/notes/taken.md")).json()["content"] == "Mine."
    refused = await alice.put("/api/memory/user-memory/notes/taken.md?create=1", json={"content": "Again."})
    assert (refused.status_code, refused.json()["code"], refused.json()["values"]) == (409, "note_exists", {"key": "taken.md"})
    browser_pages.watch.console.clear()  # the refusal's 409 is the browser's to log


async def test_creating_a_scheduled_prompt_by_keyboard_puts_the_focus_on_its_row_and_says_so(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#schedules")
    form = page.get_by_test_id("schedule-new")
    await focus_by_keyboard(page, form.get_by_label("Prompt"))
    await page.keyboard.type("Plan my day.")
    await page.keyboard.press("Tab")
    await page.keyboard.type("every weekday at 8")
    await focus_by_keyboard(page, form.get_by_role("button", name="Schedule"))
    await page.keyboard.press("Enter")

    rows = page.get_by_test_id("schedule-list").locator("tbody tr")
    await expect(rows).to_have_count(1)
    [job] = (await alice.get("/api/schedules")).json()["jobs"]
    row = page.locator(f"tr[data-job='{job['id']}']")
    await expect(row.get_by_role("button", name="Pause: Plan my day.")).to_be_focused()
    await expect(row.get_by_role("status")).to_have_text("Scheduled. The prompt is in the list above.")
    await expect(page.get_by_test_id("schedule-new").get_by_label("Prompt")).to_have_value("")  # ready for another

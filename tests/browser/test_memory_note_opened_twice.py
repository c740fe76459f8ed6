"""One note open in two tabs: the second save, from an editor opened before the first,
is refused in the member's language, keeps what was typed there, and offers the newer
version; saving after reading it is the member's choice. A save from an editor opened
before another member deleted the note does not bring it back."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

NOTE = "/api/memory/user-memory/notes/geheim.md"


async def test_the_older_tab_is_told_its_note_changed_and_keeps_its_text(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    await host.create_member("berta", locale="de")
    berta_api = await host.member("berta")
    assert (await berta_api.put(NOTE, json={"content": "Alter Text"})).status_code == 200

    first = await browser_pages.new(host.url)
    await sign_in(first, "berta", MEMBER_PASSWORD)
    second = await browser_pages.new_tab(first)
    for tab in (first, second):
        await tab.goto(f"{host.url}/#memory?key=geheim.md")
        await expect(tab.get_by_label("Inhalt")).to_have_value("Alter Text")

    await first.get_by_label("Inhalt").fill("Version aus Tab 1")
    await first.get_by_role("button", name="Speichern").click()
    await expect(first.get_by_role("status").filter(has_text="Gespeichert.")).to_be_visible()

    await second.get_by_label("Inhalt").fill("Version aus Tab 2")
    await second.get_by_role("button", name="Speichern").click()
    await expect(second.get_by_role("status")).to_contain_text("Diese Notiz wurde geändert, seit du sie geöffnet hast")
    await expect(second.get_by_label("Inhalt")).to_have_value("Version aus Tab 2")
    assert (await berta_api.get(NOTE)).json()["content"] == "Version aus Tab 1"

    # The newer text beside the member's own; then saving is an informed choice.
    await second.get_by_role("button", name="Neuere Fassung laden").click()
    await expect(second.get_by_label("Die neuere Fassung")).to_have_value("Version aus Tab 1")
    await expect(second.get_by_label("Inhalt")).to_have_value("Version aus Tab 2")
    await second.get_by_label("Inhalt").fill("Version aus Tab 1 und Tab 2")
    await second.get_by_role("button", name="Speichern").click()
    await expect(second.get_by_role("status").filter(has_text="Gespeichert.")).to_be_visible()
    assert (await berta_api.get(NOTE)).json()["content"] == "Version aus Tab 1 und Tab 2"

    # The first tab's own next save is still from an old version now: refused too.
    await first.get_by_label("Inhalt").fill("Noch einmal aus Tab 1")
    await first.get_by_role("button", name="Speichern").click()
    await expect(first.get_by_role("status")).to_contain_text("Diese Notiz wurde geändert")
    assert (await berta_api.get(NOTE)).json()["content"] == "Version aus Tab 1 und Tab 2"


async def test_a_shared_note_deleted_since_is_not_recreated_by_an_old_editor(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    alice_api, bob_api = await host.member("alice"), await host.member("bob")
    shared = "/api/memory/shared-memory/notes/einkauf.md"
    assert (await bob_api.put(shared, json={"content": "Milch"})).status_code == 200

    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#memory/shared?key=einkauf.md")
    await expect(page.get_by_label("Content")).to_have_value("Milch")
    assert (await bob_api.delete(shared)).status_code == 200

    await page.get_by_label("Content").fill("Milch, Eier")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status")).to_contain_text("This note was deleted since you opened it")
    await expect(page.get_by_label("Content")).to_have_value("Milch, Eier")
    assert (await alice_api.get(shared)).status_code == 404

    # Saving again is the member's choice: the note is made anew, with their text.
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    assert (await alice_api.get(shared)).json()["content"] == "Milch, Eier"

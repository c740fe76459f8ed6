"""A German admin walked the admin pages by keyboard (probe) and lost their place: an
arrow key in the instance's language saved it at once, and focus fell to <body>; a
password reset, a security group's role box and every add, save or delete that drew
the page again left the focus on <body>, the page's title above a 70-row table, or in
the emptied add form, with nothing said. Each now keeps the focus where the admin was
(the row or card added or edited, after a delete the next one or the section) and says
the outcome in a status line. The roles page sets a role's default chat agent, so a
role for the companion alone can be made there."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import expect

from .test_accessibility import assert_no_violations
from .test_accessibility_focus import focus_by_keyboard
from .test_admin_forms_keyboard_and_field_errors import german_admin
from .kit import screenshot

LANGUAGE_NAMES = {"en": "English", "de": "Deutsch"}


async def confirm_delete_by_keyboard(page: Any, button: Any) -> None:
    """Focus ``button``, Enter; in the dialog (Cancel has the focus) Tab to the
    confirming button and Enter."""
    await button.focus()
    await page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    await expect(dialog).to_have_count(0)


async def test_the_instance_language_waits_for_save_and_the_focus_stays_on_the_select(skald, browser_pages):
    host, client, page = await german_admin(skald, browser_pages)
    saves: list[str] = []
    page.on("request", lambda r: saves.append(r.url) if r.method == "PUT" and r.url.endswith("/api/admin/language") else None)
    await page.goto("/#settings")
    block = page.locator("section").filter(has=page.get_by_role("heading", name="Sprache der Instanz"))
    select = block.get_by_label("Sprache", exact=True)
    before = await select.input_value()
    await select.focus()
    await page.keyboard.press("ArrowDown")
    if await select.input_value() == before:  # the instance's language was the last one
        await page.keyboard.press("ArrowUp")
    other = await select.input_value()
    assert other != before
    await expect(select).to_be_focused()
    await expect(select).to_be_enabled()
    await page.keyboard.press("ArrowUp" if await select.evaluate("(s) => s.selectedIndex > 0") else "ArrowDown")
    await expect(select).to_be_focused()  # the arrow keys go on through the list, nothing sent
    await select.select_option(other)
    await page.wait_for_timeout(300)
    assert saves == [], saves
    assert (await client.get("/api/admin/language")).json()["locale"] == before

    save = block.get_by_role("button", name="Speichern")
    await page.keyboard.press("Tab")
    await expect(save).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(block.get_by_role("status")).to_have_text(f"Gespeichert: Die Instanz spricht jetzt {LANGUAGE_NAMES[other]}.")
    await expect(save).to_be_focused()
    assert len(saves) == 1 and (await client.get("/api/admin/language")).json()["locale"] == other
    await assert_no_violations(page, "settings, the instance's language saved")


async def test_resetting_an_encrypted_members_password_by_keyboard_says_so_where_the_focus_is(skald, browser_pages):
    host, _, page = await german_admin(skald, browser_pages)
    erin = await host.create_member("erin", display_name="Erin", encrypted=True)
    await page.goto(f"/#members/{erin['id']}")
    submit = page.get_by_role("button", name="Passwort zurücksetzen")
    form = page.locator("form").filter(has=submit)
    await form.get_by_label("Neues Passwort", exact=True).fill("ein neues Passwort 42")
    await form.get_by_label("Neues Passwort wiederholen").fill("ein neues Passwort 42")
    confirm = form.get_by_role("checkbox", name="Mir ist klar, dass Erin mit einem leeren Konto neu beginnt")
    await confirm.focus()
    await page.keyboard.press("Space")
    await expect(submit).to_be_enabled()
    await page.keyboard.press("Tab")
    await expect(submit).to_be_focused()
    await page.keyboard.press("Enter")
    status = form.get_by_role("status")
    await expect(status).to_have_text("Passwort zurückgesetzt. Das Mitglied beginnt mit einer leeren Datenbank, einem leeren Ordner und "
                                      "ohne geteilte Ordner und Projekte; die alten Dateien wurden für den Betreiber des Servers beiseitegelegt.")
    # The box is unticked (a second reset asks again) and the button it enables is off:
    # the focus is on what was said, not on <body>.
    await expect(confirm).not_to_be_checked()
    await expect(submit).to_be_disabled()
    await expect(status).to_be_focused()
    await page.keyboard.press("Shift+Tab")
    await expect(confirm).to_be_focused()  # and the keyboard goes on from there
    await assert_no_violations(page, "member, password reset")

    # Again, with Enter on the ticked box itself: the focus stays on it.
    await form.get_by_label("Neues Passwort", exact=True).fill("noch ein Passwort 43")
    await form.get_by_label("Neues Passwort wiederholen").fill("noch ein Passwort 43")
    await confirm.focus()
    await page.keyboard.press("Space")
    async with page.expect_response(lambda r: r.url.endswith("/reset-password")) as answer:
        await page.keyboard.press("Enter")
    assert (await answer.value).status == 200
    await expect(status).to_have_text(re.compile("^Passwort zurückgesetzt."))
    await expect(confirm).not_to_be_checked()
    await expect(confirm).to_be_focused()


async def test_ticking_a_role_of_a_security_group_by_keyboard_keeps_the_focus_on_the_box(skald, browser_pages):
    _, client, page = await german_admin(skald, browser_pages)
    created = await client.post("/api/admin/security-groups", json={"id": "kids", "label": "Kinderkram", "description": ""})
    assert created.status_code == 201, created.text
    await page.goto("/#approvals")
    card = page.locator("[data-group=kids]")
    box = card.get_by_role("group", name="Rollen in dieser Gruppe").get_by_role("checkbox", name="Kinder")
    await box.focus()
    await page.keyboard.press("Space")
    await expect(card.locator(".group-roles").get_by_role("status")).to_have_text("Gespeichert.")
    await expect(box).to_be_checked()
    await expect(box).to_be_focused()
    roles = {r["id"]: r for r in (await client.get("/api/admin/roles")).json()["roles"]}
    assert roles["restricted"]["attrs"]["permission_groups"] == ["kids"]
    await page.keyboard.press("Space")  # and back, from where the focus still is
    await expect(box).not_to_be_checked()
    await expect(box).to_be_focused()
    await expect(card.locator(".group-roles").get_by_role("status")).to_have_text("Gespeichert.")
    roles = {r["id"]: r for r in (await client.get("/api/admin/roles")).json()["roles"]}
    assert roles["restricted"]["attrs"]["permission_groups"] == []


async def test_adding_saving_and_deleting_approval_rules_and_groups_keeps_the_admins_place_and_says_so(skald, browser_pages):
    _, client, page = await german_admin(skald, browser_pages)
    for pattern, priority in (("write_*", 50), ("shell_*", 60)):
        made = await client.post("/api/admin/approval-rules", json={"tool_pattern": pattern, "action": "require", "priority": priority})
        assert made.status_code == 201, made.text
    await page.goto("/#approvals")
    row = lambda pattern: page.locator("tr[data-rule]").filter(has=page.locator("code", has_text=pattern))  # noqa: E731

    # Saved in its editor: back on the row's Edit button, the row says so.
    edit = page.get_by_role("button", name="Bearbeiten: write_*")
    await edit.focus()
    await page.keyboard.press("Enter")
    editor = page.locator(".edit-row form")
    await expect(editor.get_by_label("Aktion")).to_be_focused()
    await page.keyboard.press("Tab")
    await expect(editor.get_by_label("Priorität")).to_be_focused()
    await page.keyboard.press("ControlOrMeta+a")
    await page.keyboard.type("55")
    await page.keyboard.press("Enter")
    await expect(row("write_*").get_by_role("status")).to_have_text("Gespeichert.")
    await expect(edit).to_be_focused()
    await expect(row("write_*").locator("td.num")).to_have_text("55")

    # Deleted: the next row's Edit button, the outcome under the table.
    patterns = await page.locator("tr[data-rule] td:first-child code").all_inner_texts()
    following = patterns[patterns.index("write_*") + 1]
    await confirm_delete_by_keyboard(page, page.get_by_role("button", name="Löschen: write_*"))
    await expect(page.get_by_role("status").filter(has_text="Regel „write_*“ gelöscht.")).to_be_visible()
    await expect(page.get_by_role("button", name=f"Bearbeiten: {following}", exact=True)).to_be_focused()
    await expect(row("write_*")).to_have_count(0)

    # Added: the new row's Edit button, the row says so; not the emptied form.
    adding = page.locator("form.rule-form").last
    await adding.get_by_label("Werkzeugmuster").fill("calendar_*")
    await adding.get_by_label("Werkzeugmuster").press("Enter")
    await expect(row("calendar_*").get_by_role("status")).to_have_text("Regel „calendar_*“ hinzugefügt.")
    await expect(page.get_by_role("button", name="Bearbeiten: calendar_*")).to_be_focused()

    # A group added: its card's heading; deleted (the only one): the section's heading.
    groups = page.locator("form").filter(has=page.get_by_role("button", name="Gruppe hinzufügen"))
    await groups.get_by_label("ID").fill("kids")
    await groups.get_by_label("Name").fill("Kinderkram")
    await groups.get_by_label("Name").press("Enter")
    card = page.locator("[data-group=kids]")
    await expect(card.get_by_role("heading", name="Kinderkram")).to_be_focused()
    await expect(card.locator(":scope > [role=status]")).to_have_text("Gruppe „Kinderkram“ hinzugefügt.")
    await assert_no_violations(page, "approvals, a group added")
    await confirm_delete_by_keyboard(page, card.get_by_role("button", name="Löschen: Kinderkram"))
    await expect(page.get_by_role("status").filter(has_text="Gruppe „Kinderkram“ gelöscht.")).to_be_visible()
    await expect(page.get_by_role("heading", name="Sicherheitsgruppen", exact=True)).to_be_focused()
    await expect(card).to_have_count(0)
    await assert_no_violations(page, "approvals, a group deleted")


async def test_adding_saving_and_deleting_providers_and_models_keeps_the_admins_place_and_says_so(skald, browser_pages):
    _, client, page = await german_admin(skald, browser_pages)
    far = await client.post("/api/admin/models/providers", json={"name": "Fern", "base_url": "http://127.0.0.1:9/far/v1"})
    assert far.status_code == 201, far.text
    await page.goto("/#models")

    # A provider added: its card's Test button (the next step), the card says so.
    adding = page.locator("form").filter(has=page.get_by_role("button", name="Anbieter hinzufügen", exact=True))
    await adding.get_by_label("Name").fill("Lokal")
    await adding.get_by_label("Basis-URL").fill("http://127.0.0.1:9/v1")
    await adding.get_by_label("Basis-URL").press("Enter")
    local = page.locator("[data-provider=Lokal]")
    await expect(local.get_by_role("status").last).to_have_text("Anbieter „Lokal“ hinzugefügt. Teste die Verbindung, um seine Modelle zu sehen.")
    await expect(local.get_by_role("button", name="Verbindung testen: Lokal")).to_be_focused()

    # A model added through the form: its row's Edit button, the row says so.
    model_form = page.locator("form.model-form")
    await model_form.get_by_label("Anbieter").select_option(label="Lokal")
    await model_form.get_by_label("Modellname").fill("alpha")
    await model_form.get_by_label("Modellname").press("Enter")
    alpha = page.locator("tr[data-model=alpha]")
    await expect(alpha.get_by_role("status")).to_have_text("Modell „alpha“ hinzugefügt.")
    await expect(alpha.get_by_role("button", name="Bearbeiten: alpha")).to_be_focused()

    # Edited: the row's Edit button again (under the model's new label), "Gespeichert."
    await page.keyboard.press("Enter")
    await expect(page.locator(".edit-row form").get_by_label("Bezeichnung")).to_be_focused()
    await page.keyboard.type("Alpha")
    await page.keyboard.press("Enter")
    await expect(alpha.get_by_role("status")).to_have_text("Gespeichert.")
    await expect(alpha.get_by_role("button", name="Bearbeiten: Alpha")).to_be_focused()

    # Deleted: the next model's Edit button, the outcome under the table.
    beta = await client.post("/api/admin/models/entries", json={"provider_id": far.json()["id"], "model": "beta"})
    assert beta.status_code == 201, beta.text
    await page.reload()
    await expect(alpha).to_be_visible()
    await confirm_delete_by_keyboard(page, alpha.get_by_role("button", name="Löschen: Alpha"))
    await expect(page.get_by_role("status").filter(has_text="Modell „Alpha“ gelöscht.")).to_be_visible()
    await expect(page.get_by_role("button", name="Bearbeiten: beta")).to_be_focused()

    # A provider deleted: the other card's name; the last one: the section's heading.
    await confirm_delete_by_keyboard(page, page.get_by_role("button", name="Löschen: Fern"))
    await expect(page.get_by_role("status").filter(has_text="Anbieter „Fern“ gelöscht.")).to_be_visible()
    await expect(local.get_by_role("heading", name="Lokal")).to_be_focused()
    await confirm_delete_by_keyboard(page, local.get_by_role("button", name="Löschen: Lokal"))
    await expect(page.get_by_role("status").filter(has_text="Anbieter „Lokal“ gelöscht.")).to_be_visible()
    await expect(page.get_by_role("heading", name="Anbieter", exact=True)).to_be_focused()
    await assert_no_violations(page, "models, a provider deleted")


async def test_creating_and_deleting_a_role_keeps_the_admins_place_and_says_so(skald, browser_pages):
    _, _, page = await german_admin(skald, browser_pages)
    await page.goto("/#roles")
    creating = page.locator("form").filter(has=page.get_by_role("button", name="Rolle anlegen"))
    await creating.get_by_label("Kennung").fill("familie")
    await creating.get_by_label("Bezeichnung").fill("Familie")
    await creating.get_by_label("Bezeichnung").press("Enter")
    card = page.locator("[data-role=familie]")
    await expect(card.get_by_role("heading", name="Familie")).to_be_focused()
    await expect(card.locator("form > [role=status]")).to_have_text("Rolle „Familie“ angelegt.")
    await assert_no_violations(page, "roles, a role created")

    before = await page.locator("[data-role]").evaluate_all("(cards) => cards.map((c) => c.dataset.role)")
    neighbour = before[before.index("familie") + 1] if before[-1] != "familie" else before[-2]
    await confirm_delete_by_keyboard(page, card.get_by_role("button", name="Rolle löschen"))
    await expect(page.get_by_role("status").filter(has_text="Rolle „Familie“ gelöscht.")).to_be_visible()
    await expect(page.locator(f"[data-role={neighbour}] h2")).to_be_focused()
    await expect(card).to_have_count(0)


async def test_a_role_for_the_companion_alone_is_made_on_the_roles_page_with_its_default_agent(skald, browser_pages):
    """New roles start at "assistant"; their list of chat agents had to hold it ("Die
    Liste muss assistant enthalten"), and the page had no way to name another default."""
    host, client, page = await german_admin(skald, browser_pages)
    made = await client.post("/api/admin/roles", json={"id": "familie", "label": "Familie", "capabilities": ["chat.use"]})
    assert made.status_code == 201 and made.json()["attrs"]["chat_agent"] == "assistant", made.text
    await page.goto("/#roles")
    card = page.locator("[data-role=familie]")
    agents, default = card.get_by_label("Chat-Agenten"), card.get_by_label("Standard-Agent")
    await expect(agents).to_have_value("assistant")
    await expect(default).to_have_value("assistant")
    await expect(default.locator("option")).to_have_count(1)
    await expect(page.locator("[data-role=restricted]").get_by_label("Standard-Agent")).to_have_value("companion")

    # The list says companion alone: the default offered is companion, and saving works.
    await agents.focus()
    await page.keyboard.press("ControlOrMeta+a")
    await page.keyboard.type("companion")
    await expect(default).to_have_value("companion")
    await expect(default.locator("option")).to_have_count(1)
    await page.keyboard.press("Enter")
    await expect(card.locator("form > [role=status]")).to_have_text("Gespeichert.")
    await expect(agents).to_be_focused()
    role = {r["id"]: r for r in (await client.get("/api/admin/roles")).json()["roles"]}["familie"]
    assert (role["attrs"]["chat_agents"], role["attrs"]["chat_agent"]) == (["companion"], "companion")
    member = await host.member("jona", role="familie")
    assert (await member.get("/api/chat/status")).json()["default_agent"] == "companion"

    # Every chat agent allowed: the admin picks the default among them by keyboard.
    await page.keyboard.press("ControlOrMeta+a")
    await page.keyboard.type("*")
    values = await default.locator("option").evaluate_all("(options) => options.map((o) => o.value)")
    assert {"assistant", "companion"} <= set(values) and "researcher" not in values, values  # chat agents, not task agents
    await expect(default).to_have_value("companion")  # still the role's own
    await focus_by_keyboard(page, default, "Tab", presses=3)
    await page.keyboard.press("ArrowUp")  # the chat agents in their order: assistant before companion
    await expect(default).to_have_value("assistant")
    save = card.get_by_role("button", name="Speichern")
    await focus_by_keyboard(page, save, "Tab", presses=len(values) + 20)
    await page.keyboard.press("Enter")
    await expect(card.locator("form > [role=status]")).to_have_text("Gespeichert.")
    await expect(save).to_be_focused()
    role = {r["id"]: r for r in (await client.get("/api/admin/roles")).json()["roles"]}["familie"]
    assert (role["attrs"]["chat_agents"], role["attrs"]["chat_agent"]) == (["*"], "assistant")
    await assert_no_violations(page, "roles, a default agent chosen")
    await screenshot(page, "roles-default-agent-de", full_page=False)

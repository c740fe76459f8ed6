"""What a German-speaking admin tester found on the admin pages: refusals in English
(roles), errors that did not say which field was wrong (models, approval rules), inline
editors and a disclosure that Escape did not close, "tabs" that were links, and choice
values shown raw in settings forms."""

from __future__ import annotations

import re

from typing import Any

from playwright.async_api import expect

import skald_system_agents
from skald_hookspecs import ConfigField, I18nBundle, hookimpl
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import PagePlugin, sign_in
from .test_accessibility import assert_no_violations


async def german_admin(skald: Any, browser_pages: Any, **start: Any) -> tuple[Any, Any, Any]:
    """A host whose admin reads German, their API client, and their signed-in page."""
    host = await skald.start(**start)
    client = await host.setup_admin(locale="de")
    page = await browser_pages.new(host.url, locale="de-DE")
    await page.goto("/")
    await page.get_by_label("Benutzername").fill("admin")
    await page.get_by_label("Passwort", exact=True).fill(ADMIN_PASSWORD)
    await page.get_by_role("button", name="Anmelden").click()
    await page.locator("#sidebar").wait_for(state="attached")
    return host, client, page


async def assert_marked(page: Any, control: Any, message: str) -> None:
    """The control is marked wrong, described by `message` (after its hint, if it has
    one: the hint is its description too) and has the focus."""
    await expect(control).to_have_attribute("aria-invalid", "true")
    await expect(control).to_have_accessible_description(re.compile(rf"(^|\s){re.escape(message)}$"))
    await expect(control).to_be_focused()


async def test_a_german_admin_reads_role_refusals_in_german_at_the_identifier(skald, browser_pages):
    _, _, page = await german_admin(skald, browser_pages)
    await page.goto("/#roles")
    form = page.locator("form").filter(has=page.get_by_role("button", name="Rolle anlegen"))
    identifier = form.get_by_label("Kennung")
    await form.get_by_label("Bezeichnung").fill("Familie")
    await form.get_by_role("button", name="Rolle anlegen").click()
    invalid = "Die Kennung muss aus 2-32 Kleinbuchstaben, Ziffern, - oder _ bestehen und mit einem Buchstaben beginnen."
    await expect(form.locator(".form-status")).to_have_text("Bitte prüfe „Kennung“.")
    await assert_marked(page, identifier, invalid)

    await identifier.fill("familie")
    await form.get_by_role("button", name="Rolle anlegen").click()
    await expect(page.locator("[data-role=familie]")).to_be_visible()
    form = page.locator("form").filter(has=page.get_by_role("button", name="Rolle anlegen"))
    await form.get_by_label("Kennung").fill("familie")
    await form.get_by_label("Bezeichnung").fill("Familie")
    await form.get_by_role("button", name="Rolle anlegen").click()
    await assert_marked(page, form.get_by_label("Kennung"), "Eine Rolle familie gibt es schon.")
    # Fixed and sent again: the mark of the last try goes.
    await form.get_by_label("Kennung").fill("freunde")
    await form.get_by_role("button", name="Rolle anlegen").click()
    await expect(page.locator("[data-role=freunde]")).to_be_visible()
    await expect(page.locator("[aria-invalid]")).to_have_count(0)


async def test_a_refused_field_is_marked_named_and_focused_on_models_and_approvals(skald, browser_pages):
    _, client, page = await german_admin(skald, browser_pages)
    provider = await client.post("/api/admin/models/providers", json={"name": "Lokal", "base_url": "http://127.0.0.1:9/v1"})
    assert provider.status_code == 201, provider.text
    await page.goto("/#models")
    adding = page.locator("form.model-form")
    # Longer than the server takes (what a client without the field's maxlength may send).
    await adding.get_by_label("Modellname").evaluate("(input) => { input.removeAttribute('maxlength'); input.value = 'x'.repeat(201); }")
    await adding.get_by_role("button", name="Modell hinzufügen").click()
    await expect(adding.locator(".form-status")).to_have_text("Bitte prüfe „Modellname“.")
    await assert_marked(page, adding.get_by_label("Modellname"), "Muss 1-200 Zeichen lang sein.")

    await adding.get_by_label("Modellname").fill("alpha")
    await adding.get_by_label("Priorität").fill("200000")
    await adding.get_by_role("button", name="Modell hinzufügen").click()
    await expect(adding.locator(".form-status")).to_have_text("Bitte prüfe „Priorität“.")
    await assert_marked(page, adding.get_by_label("Priorität"), "Muss eine ganze Zahl von 0 bis 100000 sein.")
    await expect(adding.get_by_label("Modellname")).not_to_have_attribute("aria-invalid", "true")

    await page.goto("/#approvals")
    # The refused model was never saved: leaving asks first.
    await page.get_by_role("dialog", name="Ohne Speichern verlassen?").get_by_role("button", name="Ohne Speichern verlassen").click()
    rule = page.locator("form.rule-form").last
    await rule.get_by_label("Werkzeugmuster").fill("write_*")
    await rule.get_by_label("Priorität").fill("20000000")
    await rule.get_by_role("button", name="Regel hinzufügen").click()
    await expect(rule.locator(".form-status")).to_have_text("Bitte prüfe „Priorität“.")
    await assert_marked(page, rule.get_by_label("Priorität"), "Muss eine ganze Zahl von 0 bis 10000000 sein.")


async def test_escape_closes_the_inline_editors_and_the_health_detail_and_gives_the_focus_back(skald, browser_pages):
    host = await skald.start(plugins=[PagePlugin("hello")], enable=["hello"])
    client = await host.admin()
    provider = await client.post("/api/admin/models/providers", json={"name": "Lokal", "base_url": "http://127.0.0.1:9/v1"})
    model = await client.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": "alpha", "label": "Alpha"})
    assert model.status_code == 201, model.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)

    await page.goto("/#models")
    edit = page.get_by_role("button", name="Edit: Alpha")
    await edit.click()
    await expect(page.locator(".edit-row form")).to_be_visible()
    await page.locator(".edit-row").get_by_label("Priority").press("Escape")
    await expect(page.locator(".edit-row")).to_be_hidden()
    await expect(edit).to_have_attribute("aria-expanded", "false")
    await expect(edit).to_be_focused()

    card = page.locator("[data-provider=Lokal]")
    await card.get_by_role("button", name="Edit").click()
    await expect(card.locator("form")).to_be_visible()
    await card.get_by_label("Base URL").press("Escape")
    await expect(card.locator("form")).to_have_count(0)
    await expect(card.get_by_role("button", name="Edit")).to_be_focused()

    await page.goto("/#approvals")
    edit = page.get_by_role("button", name="Edit: *")
    await edit.click()
    editor = page.locator(".edit-row:has(form)")
    await editor.get_by_label("Note").press("Escape")
    await expect(editor).to_be_hidden()
    await expect(edit).to_be_focused()

    await page.goto("/#plugins")
    dot = page.locator("[data-plugin=hello] .health-dot")
    await dot.click()
    await expect(dot).to_have_attribute("aria-expanded", "true")
    await expect(page.locator("[data-plugin=hello] .health-detail")).to_be_visible()
    await dot.press("Escape")
    await expect(dot).to_have_attribute("aria-expanded", "false")
    await expect(page.locator("[data-plugin=hello] .health-detail")).to_be_hidden()
    await expect(dot).to_be_focused()


async def test_the_system_agents_are_a_navigation_of_links_with_the_current_one_marked(skald, browser_pages):
    host = await skald.start(plugins=[skald_system_agents], enable=["system_agents"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#system-agents")
    agents = page.get_by_role("navigation", name="System agents")
    await expect(agents.get_by_role("link")).to_have_text(["All", "Event triage", "Memory check", "Shared memory check", "Conversation review"])
    await expect(page.get_by_role("tab")).to_have_count(0)  # no tabs promising arrow keys and a panel
    await expect(agents.get_by_role("link", name="All")).to_have_attribute("aria-current", "page")
    await assert_no_violations(page, "system agents")
    await agents.get_by_role("link", name="Conversation review").click()
    await expect(page).to_have_url(f"{host.url}/#system-agents/conversation_review")
    await expect(page.get_by_role("heading", name="Conversation review", exact=True)).to_be_visible()
    current = page.get_by_role("navigation", name="System agents").locator("[aria-current=page]")
    await expect(current).to_have_text("Conversation review")
    await assert_no_violations(page, "system agents, one agent")


class RelayWithChoiceWords(PagePlugin):
    """Its bundle has words for one of its choices (``config.mode.choice.polling``)."""

    @hookimpl
    def register_i18n(self, register: Any) -> None:
        register(I18nBundle("relay", {"en": {"config.mode.choice.polling": "Long polling"}, "de": {"config.mode.choice.polling": "Abfragen"}}))


async def test_a_settings_choice_is_shown_in_the_readers_words_and_stored_as_its_value(skald, browser_pages):
    mode = ConfigField("mode", "choice", label="Mode", choices=("polling", "webhook"), default="polling")
    fallback = ConfigField("fallback", "choice", label="Fallback", choices=("polling", "webhook"))
    host = await skald.start(plugins=[RelayWithChoiceWords("relay", config_schema=(mode, fallback))], enable=["relay"])
    client = await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    # "webhook" has no words in the bundle: it stays as it is. A field with a default
    # offers no "not set" (unset is the default); an optional one without a default does.
    await page.goto("/#plugin-detail?id=relay")
    select = page.get_by_label("Mode")
    await expect(select.locator("option")).to_have_text(["Long polling", "webhook"])
    await expect(select).to_have_value("polling")
    await expect(page.get_by_label("Fallback").locator("option")).to_have_text(["— not set —", "polling", "webhook"])
    await expect(page.get_by_label("Fallback")).to_have_value("")
    await select.select_option(label="webhook")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    assert (await client.get("/api/admin/plugins/relay")).json()["config"] == {"mode": "webhook", "fallback": None}


async def test_a_refused_member_field_is_marked_named_and_focused_when_adding_and_editing(skald, browser_pages):
    """"Add a member" said every refusal in one red line under its button, the focus left
    there, and an empty user name "may have 1-64 letters…": each is said at its field now,
    which takes the focus, and an empty name is required. Empty fields are all said at once, before a request
    (a newcomer fixed the name, then learnt of the password)."""
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#members")
    form = page.locator("form").filter(has=page.get_by_role("button", name="Add member"))
    username, password = form.get_by_label("User name"), form.get_by_role("textbox", name="Password")
    status = form.locator(".form-status")
    await form.get_by_role("button", name="Add member").click()
    # Both empty fields at once, before any request (the first keeps the focus).
    await assert_marked(page, username, "User name is required.")
    await expect(password).to_have_attribute("aria-invalid", "true")
    await expect(password).to_have_accessible_description(
        "At least 8 characters. Give it to them in person; they can change it under “My account”. Password is required.")
    await expect(status).to_have_text("Please check “User name”.")
    await username.fill("...")
    await password.fill("a long enough password")
    await form.get_by_role("button", name="Add member").click()
    await assert_marked(page, username, "The user name may have 1-64 letters, digits or . _ - @, and not only dots.")
    await username.fill("admin")
    await form.get_by_role("button", name="Add member").click()
    await assert_marked(page, username, "The user name admin is taken.")
    await username.fill("erin")
    await password.fill("short")
    await form.get_by_role("button", name="Add member").click()
    await assert_marked(page, password, "The password must have at least 8 characters.")
    await expect(username).not_to_have_attribute("aria-invalid", "true")  # the last try's mark is gone
    await password.fill("a long enough password")
    await form.get_by_role("button", name="Add member").click()
    await expect(page.get_by_role("heading", name="erin")).to_be_visible()

    profile = page.locator("form").filter(has=page.get_by_label("Birth date"))
    birthdate = profile.get_by_label("Birth date")
    await birthdate.fill("2999-01-01")
    await profile.get_by_role("button", name="Save").click()
    await assert_marked(page, birthdate, "The birth date must be a real date in the past (YYYY-MM-DD).")
    await expect(profile.locator(".form-status")).to_have_text("Please check “Birth date”.")
    await birthdate.fill("1990-05-01")
    await profile.get_by_role("button", name="Save").click()
    await expect(profile.locator(".form-status")).to_have_text("Saved.")
    await expect(birthdate).not_to_have_attribute("aria-invalid", "true")


async def test_a_refused_reset_password_is_marked_named_and_focused_at_its_field(skald, browser_pages):
    """Resetting a member's password said an empty, a mismatched or a breached password
    only in the status line, the focus left on the button: each is said at its field."""
    host = await skald.start()
    erin = await host.create_member("erin", encrypted=False)
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto(f"/#members/{erin['id']}")
    form = page.locator("form").filter(has=page.get_by_role("button", name="Reset password"))
    fresh, repeat = form.get_by_label("New password", exact=True), form.get_by_label("Repeat new password")
    status = form.locator(".form-status")
    await form.get_by_role("button", name="Reset password").click()
    await assert_marked(page, fresh, "Enter a new password.")
    await expect(status).to_have_text("Please check “New password”.")
    await fresh.fill("a new password 42")
    await repeat.fill("another password 42")
    await form.get_by_role("button", name="Reset password").click()
    await assert_marked(page, repeat, "The passwords do not match.")
    await expect(status).to_have_text("Please check “Repeat new password”.")
    await expect(fresh).not_to_have_attribute("aria-invalid", "true")
    await fresh.fill("password")
    await repeat.fill("password")
    await form.get_by_role("button", name="Reset password").click()
    await assert_marked(page, fresh, "This password is too common: it appears in lists of breached passwords. Choose another.")
    await expect(status).to_have_text("Please check “New password”.")
    await expect(repeat).not_to_have_attribute("aria-invalid", "true")
    await fresh.fill("a new password 42")
    await repeat.fill("a new password 42")
    await form.get_by_role("button", name="Reset password").click()
    await expect(status).to_have_text("Password reset. They have been signed out everywhere.")
    await expect(form.locator("[aria-invalid]")).to_have_count(0)

"""The two screens before the shell: the setup form says a field's problem once, under
that field, and the sign-in form a tab lands on after its session ended (a restart,
a sign-out elsewhere) says why, which a first visit's does not."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in

SESSION_ENDED = "Your session has ended (you signed out elsewhere, it expired, or the server restarted). Please sign in again."
SESSION_ENDED_DE = "Deine Sitzung ist beendet (anderswo abgemeldet, abgelaufen oder der Server wurde neu gestartet). Bitte melde dich erneut an."


async def test_setup_says_a_fields_problem_once_under_the_field(skald, browser_pages):
    host = await skald.start()
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await expect(page.get_by_role("heading", name="Welcome to Skald")).to_be_visible()
    alert = page.get_by_role("alert")
    username = page.get_by_label("User name")
    password = page.get_by_label("Password", exact=True)
    create = page.get_by_role("button", name="Create administrator")

    # The form's own check.
    invalid = "A user name has up to 64 letters, digits or . _ - @ (not only dots)."
    await username.fill("ada lovelace")
    await password.fill(ADMIN_PASSWORD)
    await page.get_by_label("Repeat password").fill(ADMIN_PASSWORD)
    await create.click()
    await expect(username).to_have_attribute("aria-invalid", "true")
    await expect(username).to_have_accessible_description(invalid)
    await expect(username).to_be_focused()
    await expect(page.get_by_text(invalid)).to_have_count(1)
    await expect(alert).to_have_text("")

    # The server's refusal of one field.
    common = "This password is too common: it appears in lists of breached passwords. Choose another."
    await username.fill("ada")
    await password.fill("password123")
    await page.get_by_label("Repeat password").fill("password123")
    await create.click()
    await expect(password).to_have_accessible_description(f"At least 8 characters. {common}")  # the rule, then the refusal
    await expect(password).to_be_focused()
    await expect(username).not_to_have_attribute("aria-invalid", "true")
    await expect(page.get_by_text(common)).to_have_count(1)
    await expect(alert).to_have_text("")

    # A refusal of no field is the form's.
    async def unreachable(route: Any) -> None:
        if route.request.method == "POST":
            await route.fulfill(status=503, json={"error": "the server is starting", "code": "not_ready"})
        else:
            await route.continue_()

    await page.route("**/api/setup", unreachable)
    await password.fill(ADMIN_PASSWORD)
    await page.get_by_label("Repeat password").fill(ADMIN_PASSWORD)
    await create.click()
    await expect(alert).not_to_have_text("")
    await expect(page.locator("[aria-invalid=true]")).to_have_count(0)


async def end_sessions(host: Any, username: str) -> None:
    admin = await host.admin()
    member = await host.core.users.find(username)
    assert (await admin.post(f"/api/admin/members/{member.id}/end-sessions")).status_code == 200


async def test_a_tab_whose_session_ended_while_away_says_so_on_the_sign_in_form(skald, browser_pages):
    host = await skald.start()
    await host.create_member("nora", display_name="Nora")

    # A first visit: the sign-in form, with nothing to explain.
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await expect(page.get_by_text(SESSION_ENDED)).to_have_count(0)

    # Signed in; the session ends while the tab is elsewhere (as a restart ends them all);
    # back in the tab, the sign-in form says why, once.
    await sign_in(page, "nora", MEMBER_PASSWORD)
    await page.reload()  # a reload keeps the session, and what the tab knows of it
    await expect(page.get_by_role("heading", name="Hello, Nora")).to_be_visible()
    await page.goto("about:blank")
    await end_sessions(host, "nora")
    await page.goto(host.url)
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await expect(page.get_by_role("status").filter(has_text=SESSION_ENDED)).to_be_visible()
    await page.reload()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await expect(page.get_by_text(SESSION_ENDED)).to_have_count(0)

    # Signed out on purpose: nothing to explain, now or after a reload.
    await sign_in(page, "nora", MEMBER_PASSWORD)
    await page.get_by_role("navigation", name="Main navigation").get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await expect(page.get_by_text(SESSION_ENDED)).to_have_count(0)
    await page.reload()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await expect(page.get_by_text(SESSION_ENDED)).to_have_count(0)


async def test_the_session_ended_notice_speaks_german(skald, browser_pages):
    host = await skald.start()
    await host.create_member("berta", locale="de")
    page = await browser_pages.new(host.url, locale="de-DE")
    await page.goto("/")
    await page.get_by_label("Benutzername").fill("berta")
    await page.get_by_label("Passwort", exact=True).fill(MEMBER_PASSWORD)
    await page.get_by_role("button", name="Anmelden").click()
    await page.locator("#sidebar").wait_for(state="attached")
    await page.goto("about:blank")
    await end_sessions(host, "berta")
    await page.goto(host.url)
    await expect(page.get_by_role("heading", name="Anmelden")).to_be_visible()
    await expect(page.get_by_text(SESSION_ENDED_DE)).to_be_visible()


async def test_sign_in_checks_its_empty_fields_in_the_browser_as_setup_does(skald, browser_pages):
    """An empty sign-in form went to the server, which could only answer "Wrong user name
    or password." (newcomer walk). Like the setup form, it says which field is empty,
    under that field, with the focus there, and asks the server nothing."""
    host = await skald.start()
    await host.create_member("nora", display_name="Nora")
    page = await browser_pages.new(host.url)
    logins: list[str] = []
    page.on("request", lambda request: logins.append(request.method) if "/api/auth/login" in request.url else None)
    await page.goto("/")
    username = page.get_by_label("User name")
    password = page.get_by_label("Password", exact=True)
    submit = page.get_by_role("button", name="Sign in")

    await submit.click()
    await expect(username).to_have_attribute("aria-invalid", "true")
    await expect(username).to_have_accessible_description("Please enter your user name.")
    await expect(username).to_be_focused()
    await expect(password).to_have_attribute("aria-invalid", "true")
    await expect(password).to_have_accessible_description("Please enter your password.")
    await expect(page.get_by_role("alert")).to_have_text("")

    await username.fill("  ")  # blanks are no name
    await password.fill(MEMBER_PASSWORD)
    await submit.click()
    await expect(username).to_be_focused()
    await expect(password).not_to_have_attribute("aria-invalid", "true")
    await username.fill("nora")
    await password.fill("")
    await submit.click()
    await expect(password).to_be_focused()
    await expect(password).to_have_accessible_description("Please enter your password.")
    await expect(username).not_to_have_attribute("aria-invalid", "true")
    await expect(page.get_by_text("Wrong user name or password.")).to_have_count(0)
    assert logins == []

    await password.fill(MEMBER_PASSWORD)
    await submit.click()
    await page.locator("#sidebar").wait_for(state="attached")
    assert logins == ["POST"]

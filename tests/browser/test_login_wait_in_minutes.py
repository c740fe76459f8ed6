"""The sign-in lockout says its wait in minutes when it is a minute or more ("in 15
Minuten"), in seconds only below a minute; it used to say "in 893 Sekunden". The API
keeps its values (``{"seconds": …}`` and ``Retry-After``): the words are the shell's."""

from __future__ import annotations

import json

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD


async def sign_in_german(page, password: str) -> None:
    await page.goto("/")
    await page.get_by_label("Benutzername").fill("greta")
    await page.get_by_label("Passwort", exact=True).fill(password)
    await page.get_by_role("button", name="Anmelden").click()


async def test_a_locked_out_sign_in_says_the_wait_in_minutes_in_german(skald, browser_pages):
    host = await skald.start(settings=skald.settings(auth={"login_failures_per_account": 1}))
    await host.setup_admin()
    await host.create_member("greta", locale="de")
    page = await browser_pages.new(host.url, locale="de-DE")
    await sign_in_german(page, "not the password")
    await expect(page.get_by_text("Falscher Benutzername oder falsches Passwort.")).to_be_visible()
    await sign_in_german(page, MEMBER_PASSWORD)  # the 15-minute window holds even the right one
    await expect(page.get_by_text("Zu viele Versuche. Bitte in 15 Minuten erneut versuchen.")).to_be_visible()


def throttled(seconds: int):
    """A route handler answering the sign-in as the server does when it holds it for ``seconds``."""
    body = {"error": "too many failed logins; try again later", "code": "login_throttled", "values": {"seconds": seconds}}

    async def answer(route) -> None:
        await route.fulfill(status=429, headers={"Retry-After": str(seconds)}, content_type="application/json", body=json.dumps(body))

    return answer


async def test_a_wait_under_a_minute_is_said_in_seconds_and_a_long_one_in_english_minutes(skald, browser_pages):
    host = await skald.start()
    await host.setup_admin()
    english = await browser_pages.new(host.url)
    german = await browser_pages.new(host.url, locale="de-DE")
    for page, seconds in ((german, 42), (english, 893)):
        await page.route("**/api/auth/login", throttled(seconds))
    await sign_in_german(german, MEMBER_PASSWORD)
    await expect(german.get_by_text("Zu viele Versuche. In 42 Sekunden erneut versuchen.")).to_be_visible()
    await english.goto("/")
    await english.get_by_label("User name").fill("greta")
    await english.get_by_label("Password", exact=True).fill(MEMBER_PASSWORD)
    await english.get_by_role("button", name="Sign in").click()
    await expect(english.get_by_text("Too many attempts. Try again in 15 minutes.")).to_be_visible()

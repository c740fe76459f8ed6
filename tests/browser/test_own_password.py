"""A member's first password is the admin's choice (the Members page: "Give it to them
in person"), and so is a reset's: the admin knows what opens the member's data. Before
anything else the shell asks them to choose their own: the password they were given is
typed, never prefilled; they can postpone only by saying so, and then My account says
honestly that the admin knows the password that opens their data. The sign-in page
and the setup page say what a forgotten password means."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

OWN = "bob's very own passphrase 6"
STEP = "Choose your own password"


async def _sign_in_form(page, username: str, password: str) -> None:
    await page.goto("/")
    await page.get_by_label("User name").fill(username)
    await page.get_by_label("Password", exact=True).fill(password)
    await page.get_by_role("button", name="Sign in").click()


async def test_a_member_with_the_admins_password_is_asked_to_choose_their_own_first(skald, browser_pages):
    host = await skald.start()
    await host.create_member("bob", own_password=False)  # as the admin does it: the admin's choice
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await expect(page.get_by_test_id("login-forgot")).to_have_text("Forgot your password? Ask your admin to set a new one.")

    await _sign_in_form(page, "bob", MEMBER_PASSWORD)
    await expect(page.get_by_role("heading", name=STEP)).to_be_visible()
    await expect(page.locator("#sidebar")).to_have_count(0)  # before anything else
    given = page.get_by_label("The password you were given")
    await expect(given).to_have_value("")  # never prefilled: they type what they got
    await expect(given).to_be_focused()
    await expect(page.get_by_test_id("own-password")).to_contain_text("the admin knows the password that opens it")

    # Postponed only by saying so; My account then says what is true.
    await page.get_by_role("button", name="Not now (I am asked again at my next sign-in)").click()
    await page.locator("#sidebar").wait_for(state="attached")
    await page.goto("/#account")
    privacy = page.get_by_test_id("privacy")
    await expect(privacy).to_contain_text("your password is still the one an admin chose")
    await expect(privacy).to_contain_text("that admin knows the password that opens your data")
    await expect(privacy).not_to_contain_text("only your password opens")
    await page.reload()  # postponed for this sign-in
    await page.locator("#sidebar").wait_for(state="attached")
    tab = await page.context.new_page()  # another tab of the same sign-in: not asked again
    await tab.goto(page.url.split("#")[0])
    await tab.locator("#sidebar").wait_for(state="attached")
    await expect(tab.get_by_role("heading", name=STEP)).to_have_count(0)
    await tab.close()

    # Signed in again: asked again.
    await page.get_by_role("navigation", name="Main navigation").get_by_role("button", name="Sign out").click()
    await _sign_in_form(page, "bob", MEMBER_PASSWORD)
    await expect(page.get_by_role("heading", name=STEP)).to_be_visible()
    await given.fill("not what bob was given")
    await page.get_by_label("New password", exact=True).fill(OWN)
    await page.get_by_label("Repeat new password").fill(OWN)
    await page.get_by_role("button", name="Save my own password").click()
    await expect(given).to_have_accessible_description("That is not the password you were given.")
    await expect(given).to_be_focused()

    await given.fill(MEMBER_PASSWORD)
    await page.get_by_role("button", name="Save my own password").click()
    await page.locator("#sidebar").wait_for(state="attached")
    assert (await host.core.users.find("bob")).password_set_by_admin is False
    await page.goto("/#account")
    await expect(page.get_by_test_id("privacy")).to_contain_text("encrypted with a key only your password opens")

    # Their own password now: no step at the next sign-in, the old one opens nothing.
    other = await browser_pages.new(host.url)
    await _sign_in_form(other, "bob", MEMBER_PASSWORD)
    await expect(other.get_by_role("alert")).to_have_text("Wrong user name or password.")
    await _sign_in_form(other, "bob", OWN)
    await other.locator("#sidebar").wait_for(state="attached")
    await expect(other.get_by_role("heading", name=STEP)).to_have_count(0)


async def test_the_setup_page_says_what_a_forgotten_password_costs_under_the_encryption_choice(skald, browser_pages):
    host = await skald.start()
    page = await browser_pages.new(host.url)
    await page.goto("/")
    encrypt = page.get_by_label("Encrypt my private data with my password")
    await expect(encrypt).to_have_accessible_description(
        "Recommended. Nobody, not even another admin, can read your data without your password; but if you forget it,"
        " it cannot be recovered: a reset (by another admin, or with 'skald reset-password' on the server) starts you"
        " over with empty data.")

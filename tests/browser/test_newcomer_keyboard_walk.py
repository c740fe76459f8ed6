"""What a newcomer's keyboard walk through the README found: a role label left in the
old language, Tab escaping the phone menu, stray dollars around math, focus dropped to
<body> after setup, sign-in (a later probe: to the page's first task, not only off
<body>) and a wrong current password, an Edit button that named no
provider, and a setup form that could not succeed on a refused host name."""

from __future__ import annotations

from playwright.async_api import async_playwright, expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import CHROMIUM, CHROMIUM_ARGS, PHONE, sign_in
from .test_admin_forms_keyboard_and_field_errors import assert_marked

ACTIVE = "() => document.activeElement === document.body ? 'body' : (document.activeElement.id || document.activeElement.tagName)"


async def test_the_role_label_follows_a_language_switch_at_once(skald, browser_pages):
    host = await skald.start()
    await host.create_member("erin")
    page = await browser_pages.new(host.url)
    await sign_in(page, "erin", MEMBER_PASSWORD)
    await page.goto("/#account")
    role = page.locator("dl.facts dt + dd").nth(2)
    sidebar_role = page.locator(".who-role")
    await expect(role).to_have_text("Member")
    await page.get_by_label("Interface language").select_option("de")
    await page.locator("form.language-form").get_by_role("button", name="Save").click()
    await expect(page.get_by_role("heading", name="Mein Konto")).to_be_visible()
    await expect(role).to_have_text("Mitglied")
    await expect(sidebar_role).to_have_text("Mitglied")
    await page.get_by_label("Sprache der Oberfläche").select_option("en")
    await page.locator("form.language-form").get_by_role("button", name="Speichern").click()
    await expect(page.get_by_role("heading", name="My account")).to_be_visible()
    await expect(role).to_have_text("Member")
    await expect(sidebar_role).to_have_text("Member")


async def test_tab_stays_in_the_open_phone_menu_and_closing_it_gives_focus_to_its_button(skald, browser_pages):
    host = await skald.start()
    await host.create_member("erin")
    page = await browser_pages.new(host.url, viewport=PHONE)
    await sign_in(page, "erin", MEMBER_PASSWORD)
    menu = page.get_by_role("button", name="Menu")
    await menu.focus()
    await menu.press("Enter")
    await expect(menu).to_have_attribute("aria-expanded", "true")
    assert await page.locator(".main-column").evaluate("(node) => node.inert")
    in_menu = "() => { const a = document.activeElement; return a.classList.contains('menu-button') || document.getElementById('sidebar').contains(a); }"
    stops = await page.locator("#sidebar").locator("a[href], button, select").count()
    seen = set()
    for _ in range(stops + 3):  # past "Sign out", round again
        await page.keyboard.press("Tab")
        assert await page.evaluate(in_menu), await page.evaluate("document.activeElement.outerHTML.slice(0, 200)")
        seen.add(await page.evaluate("document.activeElement.textContent.trim().slice(0, 40)"))
    assert "Sign out" in seen
    await page.keyboard.press("Shift+Tab")
    assert await page.evaluate(in_menu)
    await page.keyboard.press("Escape")
    await expect(menu).to_have_attribute("aria-expanded", "false")
    await expect(menu).to_be_focused()
    assert not await page.locator(".main-column").evaluate("(node) => node.inert")


async def test_display_math_inside_a_line_has_no_stray_dollars_and_prices_stay_text(skald, browser_pages):
    host = await skald.start()
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await expect(page.locator("h1")).to_be_visible()
    render = """async (text) => {
      const { renderMarkdown } = await import('/ui/lib/markdown.js');
      const box = document.createElement('div');
      box.append(...renderMarkdown(text));
      return [...box.querySelectorAll('.md-math')].map((n) => [n.dataset.tex, n.classList.contains('display')]).concat([[box.textContent.trim()]]);
    }"""
    shown = await page.evaluate(render, "Math $x^2+1$ and $$\\int_0^1 x\\,dx$$ done")
    assert shown[:2] == [["x^2+1", False], ["\\int_0^1 x\\,dx", True]], shown
    assert "$" not in shown[-1][0], shown
    assert await page.evaluate(render, "It costs $5 and $10 today") == [["It costs $5 and $10 today"]]
    assert (await page.evaluate(render, "$$\na^2\n$$"))[0] == ["a^2", True]  # a block still


async def test_focus_goes_to_the_pages_first_task_after_setup_and_after_sign_in(skald, browser_pages):
    """The form the shell replaced took the focus with it, to <body>: a screen reader
    started over at the top. After creating the administrator and after a sign-in the
    focus is where a navigation puts it: in the chat's message box on the chat page, on
    the page itself (its main region) elsewhere."""
    host = await skald.start()
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await page.get_by_label("User name").fill("ada")
    await page.get_by_label("Password", exact=True).fill(ADMIN_PASSWORD)
    await page.get_by_label("Repeat password").fill(ADMIN_PASSWORD)
    await page.get_by_role("button", name="Create administrator").click()
    await expect(page.locator("#sidebar")).to_be_attached()
    await expect(page.get_by_role("textbox", name="Message")).to_be_focused()

    await page.get_by_role("button", name="Sign out").click()
    await page.get_by_label("User name").fill("ada")
    await page.get_by_label("Password", exact=True).fill(ADMIN_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#sidebar")).to_be_attached()
    await expect(page.get_by_role("textbox", name="Message")).to_be_focused()

    await page.goto("/#members")
    await page.get_by_role("button", name="Sign out").click()
    # The Members page has its own "User name" and "Password" fields: fill the sign-in form's.
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.get_by_label("User name").fill("ada")
    await page.get_by_label("Password", exact=True).fill(ADMIN_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Members")).to_be_visible()
    await expect(page.locator("#content")).to_be_focused()
    assert await page.evaluate(ACTIVE) == "content"


async def test_a_wrong_current_password_takes_the_focus_to_that_field(skald, browser_pages):
    host = await skald.start()
    await host.create_member("erin")
    page = await browser_pages.new(host.url)
    await sign_in(page, "erin", MEMBER_PASSWORD)
    await page.goto("/#account")
    current = page.get_by_label("Current password")
    await current.fill("not my password")
    await page.get_by_label("New password", exact=True).fill("a new password 42")
    repeat = page.get_by_label("Repeat new password")
    await repeat.fill("a new password 42")
    await repeat.press("Enter")
    await expect(page.get_by_text("The current password is wrong.")).to_be_visible()
    await expect(current).to_be_focused()
    await expect(current).to_have_attribute("aria-invalid", "true")


async def test_every_refused_new_password_is_marked_at_its_field_on_my_account(skald, browser_pages):
    """Changing one's own password marked only a wrong current password; an empty,
    mismatched or breached new one was a status line, the focus left on the button."""
    host = await skald.start()
    await host.create_member("erin")
    page = await browser_pages.new(host.url)
    await sign_in(page, "erin", MEMBER_PASSWORD)
    await page.goto("/#account")
    form = page.locator("form").filter(has=page.get_by_role("button", name="Change password"))
    current, fresh = form.get_by_label("Current password"), form.get_by_label("New password", exact=True)
    repeat, submit, status = form.get_by_label("Repeat new password"), form.get_by_role("button", name="Change password"), form.locator(".form-status")
    await current.fill(MEMBER_PASSWORD)
    await submit.click()
    await assert_marked(page, fresh, "Enter your current and your new password.")
    await expect(status).to_have_text("Please check “New password”.")
    await fresh.fill("a new password 42")
    await repeat.fill("a new password 43")
    await submit.click()
    await assert_marked(page, repeat, "The passwords do not match.")
    await expect(fresh).not_to_have_attribute("aria-invalid", "true")
    await fresh.fill("password")
    await repeat.fill("password")
    await submit.click()
    await assert_marked(page, fresh, "This password is too common: it appears in lists of breached passwords. Choose another.")
    await expect(status).to_have_text("Please check “New password”.")
    await expect(form.locator("[aria-invalid]")).to_have_count(1)


async def test_a_provider_s_edit_button_names_the_provider_in_english_and_german(skald, browser_pages):
    host = await skald.start()
    admin = await host.admin()
    provider = await admin.post("/api/admin/models/providers", json={"name": "Lokal", "base_url": "http://127.0.0.1:9/v1"})
    assert provider.status_code == 201, provider.text
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#models")
    await expect(page.get_by_role("button", name="Edit: Lokal", exact=True)).to_be_visible()
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    await page.reload()
    await expect(page.get_by_role("button", name="Bearbeiten: Lokal", exact=True)).to_be_visible()


async def test_setup_by_a_refused_host_name_says_so_at_once(skald):
    host = await skald.start()
    port = host.url.rsplit(":", 1)[1]
    async with async_playwright() as playwright:
        # evil.example resolves to this server, as a DNS-rebinding page would make it.
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"])
        try:
            page = await browser.new_page()
            page.set_default_timeout(5000)
            await page.goto(f"http://evil.example:{port}/")
            await expect(page.get_by_test_id("setup-refused")).to_contain_text("First-run setup works only when you open the server by its IP address")
            await expect(page.get_by_role("button", name="Create administrator")).to_have_count(0)
            await page.goto(f"{host.url}/")  # by its address, the form
            await expect(page.get_by_role("button", name="Create administrator")).to_be_visible()
            await expect(page.get_by_test_id("setup-refused")).to_have_count(0)
        finally:
            await browser.close()
    assert await host.core.users.count() == 0

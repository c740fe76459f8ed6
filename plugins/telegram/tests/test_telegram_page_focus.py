"""The member's page keeps a keyboard user's place: linking hides the form that held the
focus, unlinking the button that did, and the focus goes to what the page shows now —
never back to the page's body. The admin's roster says a refusal in the reader's
language, as the shell does."""

from __future__ import annotations

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from telegram_support import ALICE_CHAT, Setup, pairing_code, running

PAGE = "skald-p-telegram-main"

FOCUSED = """() => {
  const active = document.activeElement;
  return { tag: active ? active.tagName.toLowerCase() : null, cls: active ? active.className : "", text: active ? active.textContent : "",
           name: active ? active.getAttribute("name") : null };
}"""


async def test_linking_with_the_keyboard_keeps_the_focus_on_the_page(setup: Setup, plugin_browser):
    await running(setup)
    await setup.host.create_member("anna", display_name="Anna", locale="de")
    page = await plugin_browser.open(setup.host, "anna", MEMBER_PASSWORD, "telegram", "main")
    status = page.locator(f"{PAGE} .telegram-status")
    await status.filter(has_text="@skald_test_bot").wait_for(timeout=10_000)

    code = await pairing_code(setup, ALICE_CHAT, first_name="Anna")
    await page.focus(f"{PAGE} input[name=code]")
    await page.keyboard.type(code)
    await page.keyboard.press("Tab")  # to "Verbinden"
    assert (await page.evaluate(FOCUSED))["tag"] == "button"
    await page.keyboard.press("Enter")
    await page.locator(f"{PAGE} .telegram-message").filter(has_text="Verbunden.").wait_for(timeout=10_000)
    await status.filter(has_text="Verbunden mit dem Telegram-Chat").wait_for(timeout=10_000)
    assert await page.locator(f"{PAGE} form").is_hidden()

    focused = await page.evaluate(FOCUSED)
    assert focused["tag"] != "body", "the focus fell to the page's body when the form was hidden"
    assert "telegram-status" in focused["cls"] and focused["text"].startswith("Verbunden mit dem Telegram-Chat"), focused
    await page.keyboard.press("Tab")  # the next stop is the linked state's one control
    assert "telegram-unlink" in (await page.evaluate(FOCUSED))["cls"]

    # Unlinking from the keyboard: the button goes, the code field comes back and has the focus.
    await page.keyboard.press("Enter")
    await status.filter(has_text="Nicht verbunden.").wait_for(timeout=10_000)
    focused = await page.evaluate(FOCUSED)
    assert (focused["tag"], focused["name"]) == ("input", "code"), focused


async def test_the_roster_says_a_refusal_in_the_admins_language(setup: Setup, plugin_browser):
    await running(setup)
    assert (await setup.admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    page = await plugin_browser.open(setup.host, "admin", ADMIN_PASSWORD, "telegram", "roster", entry="roster.js")
    await page.locator("skald-p-telegram-roster .card").first.wait_for(timeout=10_000)
    await setup.enable(False)  # the host now refuses the plugin's routes (not_found)
    tag = await plugin_browser.mount(page, "telegram", "roster", entry="roster.js")  # the module is loaded already
    error = page.locator(f"{tag} .error-text")
    await error.first.wait_for(timeout=10_000)
    assert (await error.first.text_content()) == setup.host.core.strings.translate("core.error.not_found", "de") == "Nicht gefunden."

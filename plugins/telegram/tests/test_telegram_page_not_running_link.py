"""While the bot is not running, the member page told the admin too that "an
administrator can see why on the plugin's page", with no way there: the admin is
linked to the plugin's page; a member is still told an administrator can see why."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from telegram_support import Setup


async def test_the_admin_is_linked_to_the_plugins_page_and_a_member_is_not(setup: Setup, plugin_browser):
    await setup.enable()
    await setup.host.create_member("alice", display_name="Alice")

    page = await plugin_browser.open(setup.host, "admin", ADMIN_PASSWORD, "telegram", "main")
    status = page.locator("skald-p-telegram-main .telegram-status")
    await expect(status).to_have_text(
        "The Telegram bot is not running right now, so it cannot give you a pairing code. The plugin's page says why.", timeout=10_000)
    await expect(page.get_by_role("link", name="Open the Telegram plugin's page")).to_have_attribute("href", "#plugin-detail?id=telegram")

    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "telegram", "main")
    status = page.locator("skald-p-telegram-main .telegram-status")
    await expect(status).to_contain_text("An administrator can see why on the plugin's page.", timeout=10_000)
    await expect(page.locator("skald-p-telegram-main a.telegram-why")).to_be_hidden()

"""The member picks their home source on their account page, in a real browser."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD
from tests.browser.conftest import browser_pages  # noqa: F401  (the watched-pages fixture)
from tests.browser.kit import sign_in

from .support import CHANNEL, RecordingChannel


async def test_member_sets_home_source_to_a_channel_on_the_account_page(skald, browser_pages):  # noqa: F811
    host = await skald.start(plugins=[RecordingChannel()], enable=[CHANNEL])
    await host.admin()
    await host.create_member("alice")
    member = await host.core.users.find("alice")
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="My account").click()
    select = page.get_by_label("Where background notes reach you")
    await expect(select).to_have_value("web")
    await expect(select.locator("option")).to_have_text(["Here on the web", "Test channel"])
    await select.select_option(CHANNEL)
    await expect(page.get_by_text("Saved.")).to_be_visible()
    assert await host.core.channels.router.home_source(member.id) == CHANNEL
    await page.reload()
    await expect(page.get_by_label("Where background notes reach you")).to_have_value(CHANNEL)


async def test_without_a_channel_the_account_page_offers_no_choice(skald, browser_pages):  # noqa: F811
    host = await skald.start()
    await host.admin()
    await host.create_member("bob")
    page = await browser_pages.new(host.url)
    await sign_in(page, "bob", MEMBER_PASSWORD)
    await page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="My account").click()
    await expect(page.get_by_label("Interface language")).to_be_visible()
    await expect(page.get_by_label("Where background notes reach you")).to_have_count(0)


async def test_a_home_that_cannot_reach_the_member_shows_as_the_web_with_a_note(skald, browser_pages):  # noqa: F811
    from .test_home_reachable import LinkableChannel

    channel = LinkableChannel()
    host = await skald.start(plugins=[channel], enable=[CHANNEL])
    await host.admin()
    await host.create_member("alice")
    member = await host.core.users.find("alice")
    channel.linked.add(member.id)
    await host.core.channels.router.set_home_source(member, CHANNEL)
    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    account = page.get_by_role("navigation", name="Main navigation").get_by_role("link", name="My account")
    await account.click()
    await expect(page.get_by_label("Where background notes reach you")).to_have_value(CHANNEL)
    await expect(page.get_by_test_id("home-fallback")).to_have_count(0)

    channel.linked.clear()  # unlinked on the channel's side
    await page.reload()
    note = page.get_by_test_id("home-fallback")
    await expect(note).to_have_text(
        "Test channel cannot reach you now (nothing is linked or paired there), so background notes reach you here on the web. "
        "Link it again on its page, or choose another place."
    )
    # Nothing else to choose: the note alone, no list of one.
    await expect(page.get_by_label("Where background notes reach you")).to_have_count(0)

    channel.linked.add(member.id)  # linked again: the choice holds again, without a note
    await page.reload()
    await expect(page.get_by_label("Where background notes reach you")).to_have_value(CHANNEL)
    await expect(page.get_by_test_id("home-fallback")).to_have_count(0)

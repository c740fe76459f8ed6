"""The issue's walk-through with the real example plugin: ``skald-hello`` is installed
into the test environment (``make test`` installs ``examples/*``) and found through its
``skald.plugins`` entry point, exactly as an admin's pip install would be."""

from __future__ import annotations

import importlib_metadata
import pytest
from playwright.async_api import expect

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in


def _example_installed() -> bool:
    return any(ep.name == "hello" for ep in importlib_metadata.entry_points(group="skald.plugins"))


pytestmark = pytest.mark.skipif(not _example_installed(), reason="examples/skald-hello is not installed (make test installs it)")


async def test_admin_enables_configures_and_grants_the_installed_example_plugin(skald, browser_pages):
    host = await skald.start(use_entry_points=True)
    await host.admin()
    alice = await host.create_member("alice", role="restricted", display_name="Alice")
    await host.create_member("bob", role="restricted", display_name="Bob")
    assert host.core.plugins.status("hello").state == "disabled"  # installed, not yet enabled

    admin = await browser_pages.new(host.url)
    await sign_in(admin, "admin", ADMIN_PASSWORD)
    await admin.goto("/#plugins")
    card = admin.locator("[data-plugin=hello]")
    await card.get_by_role("switch", name="Enable").check()
    await expect(card.locator(".state-label")).to_have_text("Running")

    await card.get_by_role("link", name="Configure: Hello").click()
    await admin.get_by_label("Greeting").fill("Good morning")
    await admin.get_by_role("button", name="Save").click()
    await expect(admin.get_by_role("status").filter(has_text="Saved.")).to_be_visible()

    await admin.goto(f"/#members/{alice['id']}")
    await admin.get_by_role("checkbox", name="Hello").check()
    await admin.get_by_role("button", name="Save plugins").click()
    await expect(admin.get_by_role("status").filter(has_text="Saved.")).to_be_visible()

    alice_page = await browser_pages.new(host.url)
    await sign_in(alice_page, "alice", MEMBER_PASSWORD)
    await alice_page.get_by_role("navigation").get_by_role("link", name="Hello").click()
    await expect(alice_page.locator(".hello-greeting")).to_have_text("Good morning, Alice!")
    # The shell's header shows the page's title; the page does not repeat it.
    await expect(alice_page.get_by_role("heading", name="Hello", exact=True)).to_have_count(1)
    await expect(alice_page.locator("h1", has_text="Hello")).to_have_count(1)

    bob_page = await browser_pages.new(host.url)
    await sign_in(bob_page, "bob", MEMBER_PASSWORD)
    await expect(bob_page.get_by_role("navigation").get_by_role("link", name="Hello")).to_have_count(0)
    assert (await bob_page.request.get("/api/plugin/hello/greeting")).status == 403

    await admin.goto("/#plugins")
    await admin.locator("[data-plugin=hello]").get_by_role("switch", name="Enable").uncheck()
    await expect(admin.locator("[data-plugin=hello] .state-label")).to_have_text("Off")
    assert (await alice_page.request.get("/api/plugin/hello/greeting")).status == 404

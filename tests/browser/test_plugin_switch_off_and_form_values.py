"""What a plugin author met writing a plugin from the docs alone: an enabled plugin
that failed to load could not be switched off (the switch was greyed out, the page said
it "cannot be turned on" while it was on); a plugin waiting for its settings had its
reason listed under "Error"; and the settings form trimmed what it saved ("NK: " was
stored "NK:", where the API stores a value as given)."""

from __future__ import annotations

from playwright.async_api import expect

from skald_hookspecs import ConfigField
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import PagePlugin, sign_in


async def test_an_enabled_plugin_that_failed_to_load_is_switched_off_in_the_catalog(skald, browser_pages):
    host = await skald.start(plugins=[PagePlugin("broken", title="Broken widget")], enable=["broken"])
    await host.stop()
    error = "the widget registry is unreachable"
    host = await skald.start(plugins=[PagePlugin("broken", title="Broken widget", fail_pages=error)])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)

    await page.goto("/#plugin-detail?id=broken")
    await expect(page.get_by_role("alert")).to_have_text(
        f"This plugin failed to load (register_web_pages: RuntimeError: {error}), so nobody can use it, though it is"
        " still turned on. Turn it off in the catalog, or fix the error and restart Skald."
    )

    await page.goto("/#plugins")
    switch = page.get_by_role("switch", name="Enable Broken widget")
    await expect(switch).to_be_checked()
    await expect(switch).to_be_enabled()
    await switch.click()
    await expect(switch).not_to_be_checked()
    await expect(switch).to_be_disabled()  # off now, and it cannot be turned on until fixed
    assert (await (await host.admin()).get("/api/admin/plugins/broken")).json()["enabled"] is False

    await page.goto("/#plugin-detail?id=broken")
    await expect(page.get_by_role("alert")).to_contain_text("it cannot be turned on")


async def test_a_plugin_waiting_for_its_settings_is_listed_as_waiting_not_as_an_error(skald, browser_pages):
    plugin = PagePlugin("keyed", title="Keyed", config_schema=(ConfigField("token", "string", label="Token", required=True),))
    host = await skald.start(plugins=[plugin], enable=["keyed"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=keyed")

    facts = page.locator("dl.facts")
    await expect(facts.locator("dt", has_text="Waiting")).to_have_count(1)
    await expect(facts.locator("dt", has_text="Error")).to_have_count(0)
    await expect(facts.locator("dt:has-text('Waiting') + dd")).to_contain_text("Token")


async def test_the_settings_form_saves_a_value_as_typed_and_blank_is_empty(skald, browser_pages):
    plugin = PagePlugin("prefixed", title="Prefixed", config_schema=(
        ConfigField("prefix", "string", label="Prefix", required=True),
        ConfigField("suffix", "string", label="Suffix"),
    ))
    host = await skald.start(plugins=[plugin], enable=["prefixed"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=prefixed")

    await page.get_by_label("Prefix").fill("   ")  # only spaces: empty, and the field is required
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator(".config-form .field-error").first).not_to_be_empty()
    assert "prefix" not in await host.core.host_api("prefixed").get_config()

    await page.get_by_label("Prefix").fill("NK: ")
    await page.get_by_label("Suffix").fill("  ")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    config = await host.core.host_api("prefixed").get_config()
    assert config["prefix"] == "NK: "  # as typed, as the API stores it
    assert config.get("suffix") is None

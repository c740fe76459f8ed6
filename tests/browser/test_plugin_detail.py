"""The plugin's detail page (admins): settings sets it owns, a failed plugin's traceback,
and its tools' failures by error id (issue 18)."""

from __future__ import annotations

from playwright.async_api import expect

from skald_hookspecs import ConfigField, ConfigSet, PluginInfo, Tool, hookimpl
from skald_host.testing import Reply, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import PagePlugin, sign_in


class Weather:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="weather", title="Weather", spec=">=1.2,<2")

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet("weather-limits", "Forecast limits", (ConfigField("per_day", "integer", label="Forecasts per day", default=5),), owner="main"))

    @hookimpl
    def register_tools(self, register) -> None:
        async def forecast(args, ctx):
            raise KeyError("private " + "words")  # the source line is in the traceback, the message never

        register(Tool(name="forecast", description="forecast", parameters={"type": "object", "properties": {}}, run=forecast))


async def test_an_owned_settings_set_is_edited_on_the_plugins_page(skald, browser_pages):
    host = await skald.start(plugins=[Weather()], enable=["weather"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=weather")
    await expect(page.get_by_role("heading", name="Forecast limits")).to_be_visible()
    field = page.get_by_label("Forecasts per day")
    await field.fill("9")
    await page.get_by_role("heading", name="Forecast limits").locator("xpath=..").get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    assert await host.core.host_api("weather").get_settings("weather-limits") == {"per_day": 9}
    await page.goto("/#settings")
    await expect(page.get_by_role("heading", name="Forecast limits")).to_have_count(0)  # not on the general page


async def test_a_tools_failure_and_a_failed_plugins_traceback_are_on_their_pages(skald, browser_pages):
    error = "the widget registry is unreachable"
    host = await skald.start(plugins=[Weather(), PagePlugin("broken", title="Broken widget", fail_pages=error)], enable=["weather"])
    await host.use_model(await skald.model_server(Reply(tool_calls=[ToolCall("forecast", {})]), Reply("Sorry.")))
    await host.allow_tool("forecast")
    turn = await (await host.member("alice")).chat("forecast please")
    error_id = turn.result("forecast").split("error id ")[1][:12]

    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=weather")
    failure = page.locator(f".tool-failures [data-error-id='{error_id}']")
    await expect(failure).to_contain_text("forecast")
    await failure.locator("summary").click()
    await expect(failure.locator("pre.traceback")).to_contain_text("KeyError")
    await expect(failure.locator("pre.traceback")).not_to_contain_text("private words")
    await expect(page.get_by_test_id("failures-since-start")).to_have_text(  # the list is in memory: said so
        "This list holds the latest 20 failures since the server last started: a restart empties it."
        " A hook failing the same way again within a minute, or a system agent failing the same way again, is counted in its entry, not listed again."
        " The server's log keeps every entry, under its error id."
    )

    await page.goto("/#plugin-detail?id=broken")
    await page.locator(".plugin-traceback summary").click()
    await expect(page.locator(".plugin-traceback pre.traceback")).to_contain_text(f"RuntimeError: {error}")
    # It scrolls past its height: a named region the keyboard reaches next (axe's
    # scrollable-region-focusable).
    region = page.get_by_role("region", name="Traceback")
    await expect(region).to_contain_text("RuntimeError")
    await page.keyboard.press("Tab")
    await expect(region).to_be_focused()


async def test_an_unknown_plugin_is_refused_in_the_readers_language(skald, browser_pages):
    from .test_admin_forms_keyboard_and_field_errors import german_admin

    _, _, page = await german_admin(skald, browser_pages)
    await page.goto("/#plugin-detail?id=mobile")
    await expect(page.get_by_role("heading", name="Plugin nicht gefunden")).to_be_visible()
    await expect(page.locator(".notice.error, [role=alert]").first).to_contain_text("Es ist kein Plugin mobile installiert.")
    await expect(page.locator("main")).not_to_contain_text("no plugin")


class Keyed:
    """Runs only with a key: saving the form restarts it (contract 1.8), into health or
    out of it."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="keyed", title="Keyed", spec=">=1.8,<2", config_schema=(
            ConfigField("api_key", "string", label="API key", description="The service's key.", secret=True),))

    @hookimpl
    async def startup(self, host) -> None:
        from skald_hookspecs import NotReady

        if not (await host.get_config()).get("api_key"):
            raise NotReady("set an API key")


async def test_the_state_shown_follows_a_save_that_restarts_the_plugin(skald, browser_pages):
    host = await skald.start(plugins=[Keyed()], enable=["keyed"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=keyed")
    summary = page.locator(".plugin-state")
    await expect(summary).to_contain_text("set an API key")
    await page.get_by_label("API key").fill("k-1")
    await page.get_by_role("button", name="Save").click()
    await expect(page.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    await expect(summary).not_to_contain_text("set an API key")  # healthy now: the page says so without a reload
    assert host.core.plugins.status("keyed").healthy
    await page.get_by_label("Remove the stored value").check()
    await page.get_by_role("button", name="Save").click()
    await expect(summary).to_contain_text("set an API key")  # the save stopped it: said at once, not "Running"


async def test_a_failed_plugins_page_says_it_failed_and_what_to_do_not_to_turn_it_on(skald, browser_pages):
    error = "the widget registry is unreachable"
    host = await skald.start(plugins=[PagePlugin("broken", title="Broken widget", fail_pages=error)])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=broken")

    await expect(page.get_by_role("heading", name="Broken widget")).to_be_visible()
    await expect(page.get_by_role("alert")).to_have_text(
        f"This plugin failed to load (register_web_pages: RuntimeError: {error}), so nobody can use it"
        " and it cannot be turned on. Fix the error, then restart Skald."
    )
    await expect(page.locator("main")).not_to_contain_text("turn it on")


class Regional:
    """A required key and a region of a set form: both wrong in one save."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="regional", title="Regional", spec=">=1.2,<2", config_schema=(
            ConfigField("api_key", "string", label="API key", required=True, secret=True),
            ConfigField("region", "string", label="Region", description="Two small letters.", pattern=r"[a-z]{2}"),
            ConfigField("note", "string", label="Note"),
        ))


async def test_one_save_marks_every_refused_field_and_stores_nothing(skald, browser_pages):
    host = await skald.start(plugins=[Regional()], enable=["regional"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=regional")
    await page.get_by_label("Region").fill("EU")
    await page.get_by_label("Note").fill("kept nowhere")
    await page.get_by_role("button", name="Save").click()

    key, region = page.get_by_label("API key"), page.get_by_label("Region")
    await expect(key).to_have_attribute("aria-invalid", "true")
    await expect(key).to_have_accessible_description("is required")
    await expect(region).to_have_attribute("aria-invalid", "true")
    await expect(region).to_have_accessible_description("Two small letters. does not have the form its hint describes")
    await expect(page.get_by_label("Note")).not_to_have_attribute("aria-invalid", "true")
    await expect(key).to_be_focused()  # the first, as for any refusal
    assert await host.core.host_api("regional").get_config() == {}


async def test_a_built_in_plugins_page_says_every_member_may_use_it(skald, browser_pages):
    """Not the grant list, which named only the admin while every member's requests
    carried the built-in tools (a newcomer probe)."""
    host = await skald.start()
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=agent-tools")
    roster = page.locator("section", has=page.get_by_role("heading", name="Who can use it"))
    await expect(roster).to_contain_text("Built into Skald: every active member may use it.")
    await expect(roster.get_by_role("listitem")).to_have_count(0)  # no grant list beside it


async def test_a_waiting_plugins_reason_is_said_once_on_its_page_and_in_its_card_panel(skald, browser_pages):
    """The label held the reason ("Waiting: set an API key") and the reason followed it
    again: the same sentence three times on a newcomer's screen (newcomer probe)."""
    host = await skald.start(plugins=[Keyed()], enable=["keyed"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin-detail?id=keyed")
    summary = page.locator(".plugin-state")
    await expect(summary).to_contain_text("set an API key")
    assert (await summary.inner_text()).count("set an API key") == 1, await summary.inner_text()

    await page.goto("/#plugins")
    card = page.locator("[data-plugin=keyed]")
    await expect(card).to_contain_text("set an API key")  # on the card itself
    await card.locator(".health-dot").click()
    panel = card.locator(".health-detail")
    await expect(panel).to_be_visible()
    assert (await panel.inner_text()).count("set an API key") == 1, await panel.inner_text()
    title = await card.locator(".health-dot").get_attribute("title")
    assert title.startswith("Waiting") and title.count("set an API key") == 1, title

"""What the shell does with hostile data and with broken plugins (checks E3, F1)."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect
from quart import Blueprint

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet, WebPage
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import PAGE_MODULE, PagePlugin, screenshot, sign_in

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"
SVG = '"><svg onload=alert(1)>'
JS_URL = "javascript:alert(1)"
PAYLOADS = (IMG, SCRIPT, SVG, JS_URL)

# Anything the page holds that could only have come from data parsed as markup.
INJECTED = """() => ({
  img: document.querySelectorAll("img").length,
  svg: document.querySelectorAll("svg").length,
  iframe: document.querySelectorAll("iframe, object, embed").length,
  inlineScripts: [...document.scripts].filter((s) => !s.src).length,
  scripts: [...document.scripts].map((s) => new URL(s.src).pathname),
  handlers: document.querySelectorAll("[onerror], [onload], [onclick], [onfocus], [onmouseover]").length,
  jsLinks: [...document.body.querySelectorAll("[href], [src], [action], [formaction]")]
    .filter((n) => /^\\s*(javascript|data):/i.test(n.getAttribute("href") || n.getAttribute("src") || n.getAttribute("action") || n.getAttribute("formaction") || "")).length,
})"""


async def assert_inert(page, *expected_text: str) -> None:
    """The payloads are on screen as text, and none became an element."""
    await page.locator("#content[aria-busy]").wait_for(state="detached")
    for text in expected_text:
        await expect(page.get_by_text(text, exact=False).first).to_be_attached()
    found = await page.evaluate(INJECTED)
    assert found == {
        "img": 0, "svg": 0, "iframe": 0, "inlineScripts": 0, "scripts": ["/ui/app.js"], "handlers": 0, "jsLinks": 0,
    }, f"{page.url}: {found}"


async def test_xss_corpus_renders_inert(skald, browser_pages):
    evil = PagePlugin(
        "evil",
        title=IMG,
        description=f"{SCRIPT} {JS_URL}",
        page_title=SVG,
        config_schema=(
            ConfigField("motto", "string", label=SVG, description=SCRIPT, default=IMG),
            ConfigField("homepage", "url", label=f"Homepage {IMG}"),
            ConfigField("count", "integer", label=f"Count {SCRIPT}"),
        ),
        config_sets=(ConfigSet("evil-set", f"Set {IMG}", (ConfigField("note", label=JS_URL, default=SVG),)),),
    )
    broken = PagePlugin("broken", title=f"Broken {SVG}", fail_pages=f"cannot start {IMG} {SCRIPT}")
    host = await skald.start(plugins=[evil, broken], enable=["evil"])
    api = await host.admin()
    alice = await host.create_member("alice", display_name=IMG, notes=SCRIPT, sex=SVG)
    await host.create_member("bob", display_name=SVG)
    assert (await api.post("/api/admin/roles", json={"id": "evil", "label": f"Role {SCRIPT}"})).status_code == 201

    admin = await browser_pages.new(host.url)
    await sign_in(admin, "admin", ADMIN_PASSWORD)
    await admin.goto("/#plugins")
    await assert_inert(admin, IMG, SCRIPT, JS_URL)
    await admin.locator("[data-plugin=broken] .health-dot").click()
    await assert_inert(admin, f"cannot start {IMG} {SCRIPT}")

    await admin.goto("/#plugin-detail?id=evil")
    await assert_inert(admin, IMG, SCRIPT, SVG)
    motto = admin.get_by_label(SVG)
    await expect(motto).to_have_value(IMG)
    await motto.fill(f"{SCRIPT}{SVG}")
    await admin.get_by_label(f"Homepage {IMG}").fill(JS_URL)
    await admin.get_by_role("button", name="Save").click()
    await expect(admin.locator(".field-error").filter(has_text="must be an http(s) URL")).to_be_visible()
    await admin.get_by_label(f"Homepage {IMG}").fill("")
    await admin.get_by_label(f"Count {SCRIPT}").fill(IMG)  # not a number: the server names the field
    await admin.get_by_role("button", name="Save").click()
    await expect(admin.locator(".form-status.error")).to_have_text(f"Please check “Count {SCRIPT}”.")
    await assert_inert(admin)
    await admin.get_by_label(f"Count {SCRIPT}").fill("")
    await admin.get_by_role("button", name="Save").click()
    await expect(admin.get_by_role("status").filter(has_text="Saved.")).to_be_visible()
    await admin.reload()
    await expect(admin.get_by_label(SVG)).to_have_value(f"{SCRIPT}{SVG}")
    await assert_inert(admin, IMG)

    await admin.goto("/#plugin-detail?id=broken")
    await assert_inert(admin, f"cannot start {IMG} {SCRIPT}")

    await admin.goto("/#members")
    await expect(admin.get_by_role("link", name=IMG)).to_be_visible()
    await assert_inert(admin, SVG)
    await admin.goto(f"/#members/{alice['id']}")
    await expect(admin.get_by_role("heading", name=IMG)).to_be_visible()
    await expect(admin.get_by_label("Notes")).to_have_value(SCRIPT)
    await expect(admin.get_by_label("Sex")).to_have_value(SVG)
    await assert_inert(admin, f"I understand that {IMG} starts over with an empty account")
    await admin.goto("/#roles")
    await expect(admin.get_by_role("heading", name=f"Role {SCRIPT}")).to_be_visible()
    await assert_inert(admin)
    await admin.goto("/#settings")
    await expect(admin.get_by_role("heading", name=f"Set {IMG}")).to_be_visible()
    await expect(admin.get_by_label(JS_URL)).to_have_value(SVG)
    await assert_inert(admin)
    await admin.get_by_role("navigation").get_by_role("link", name=SVG).click()
    await expect(admin.locator("skald-p-evil-main")).to_have_text("hello from plugin")
    await expect(admin.get_by_role("heading", name=SVG)).to_be_visible()
    await assert_inert(admin)
    await screenshot(admin, "xss-plugin-page")

    alice_page = await browser_pages.new(host.url)
    await sign_in(alice_page, "alice", MEMBER_PASSWORD)
    await assert_inert(alice_page, IMG, SVG)  # her name in the sidebar, the plugin page title
    await alice_page.get_by_role("navigation").get_by_role("link", name="My account").click()
    await assert_inert(alice_page, IMG, SVG)
    assert browser_pages.watch.dialogs == []


async def test_failed_plugin_shows_red_dot_with_error(skald, browser_pages):
    error = "the widget registry is unreachable"
    host = await skald.start(plugins=[
        PagePlugin("broken", title="Broken widget", fail_pages=error),
        PagePlugin("missing", title="Missing page", page_title="Nowhere", entry="missing.js"),
    ], enable=["missing"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    card = page.locator("[data-plugin=broken]")
    dot = card.locator(".health-dot")
    await expect(card.locator(".state-label")).to_have_text("Failed")
    await expect(dot).to_have_class("health-dot red")
    await expect(dot).to_have_attribute("title", f"Failed: register_web_pages: RuntimeError: {error}")
    await expect(card.get_by_role("switch", name="Enable")).to_be_disabled()
    detail = card.locator(".health-detail")
    await expect(detail).to_be_hidden()
    await dot.click()
    await expect(detail).to_be_visible()
    await expect(detail).to_contain_text(f"register_web_pages: RuntimeError: {error}")
    await expect(dot).to_have_attribute("aria-expanded", "true")
    await page.keyboard.press("Enter")  # the dot keeps focus: the keyboard toggles it too
    await expect(detail).to_be_hidden()
    await dot.focus()
    await page.keyboard.press("Space")
    await expect(detail).to_be_visible()
    await screenshot(page, "catalog-failed-plugin")

    await card.get_by_role("link", name="Details: Broken widget").click()
    await expect(page.get_by_role("heading", name="Broken widget")).to_be_visible()
    await expect(page.locator(".facts")).to_contain_text(f"register_web_pages: RuntimeError: {error}")
    traceback = page.locator(".plugin-traceback pre.traceback")  # the admin's detail has it (issue 18), folded
    await expect(traceback).to_be_hidden()
    await page.locator(".plugin-traceback summary").click()
    await expect(traceback).to_contain_text(f"RuntimeError: {error}")

    # A page whose module cannot be imported explains itself instead of staying blank.
    await page.get_by_role("navigation").get_by_role("link", name="Nowhere").click()
    alert = page.locator("plugin-page-host").get_by_role("alert")
    await expect(alert).to_contain_text("The page “Nowhere” could not be loaded.")
    await expect(alert).to_contain_text("missing.js")


class MisservedPage(PagePlugin):
    """Its page module is served as text/html (a Quart view returning a str), and a
    second page names a module its router does not have."""

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint("test_misserved", __name__)

        @blueprint.get("/page.js")
        async def page_module() -> str:
            return PAGE_MODULE  # Quart serves a str as text/html

        register(blueprint)

    @hookimpl
    def register_web_pages(self, register: Any) -> None:
        register(WebPage("main", "Misserved", "page.js"))
        register(WebPage("gone", "Gone", "gone.js"))


async def test_a_page_module_that_cannot_run_says_why_not_just_failed_to_fetch(skald, browser_pages):
    """The browser says only "Failed to fetch dynamically imported module"; the cause
    (a content type it refuses, a 404) was in its console alone."""
    host = await skald.start(plugins=[MisservedPage("misserved", title="Misserved")], enable=["misserved"])
    await host.admin()
    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugin/misserved/main")
    alert = page.get_by_role("alert")
    await expect(alert).to_contain_text("served as “text/html”")
    await expect(alert).to_contain_text("text/javascript")
    await page.goto("/#plugin/misserved/gone")
    await expect(page.get_by_role("alert")).to_contain_text("HTTP 404")

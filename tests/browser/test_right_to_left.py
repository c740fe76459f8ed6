"""A language written right to left (Arabic, added by a plugin's ``core`` bundle, as a
translator's ar.json would be) turns the whole layout around: <html dir="rtl">, the
sidebar on the right edge, the chat's list of conversations on the right and the Send
button at the composer's end (its left). Back in English it is left to right again,
the sidebar on the left edge. The 404 page the host renders itself says dir too."""

from __future__ import annotations

from typing import Any, Callable

from playwright.async_api import expect

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import DESKTOP, sign_in

ARABIC = {
    "locale.ar": "العربية",
    "nav.label": "التنقل الرئيسي",
    "nav.chat": "المحادثة",
    "nav.account": "حسابي",
    "account.language": "لغة الواجهة",
    "common.save": "حفظ",
}


class Arabic:
    """Adds a language to the host's own strings, the way a translation plugin does."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="arabic", title="Arabic", description="Adds Arabic.", spec=">=1.0,<2")

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        register(I18nBundle("core", {"ar": ARABIC}))


async def box(page: Any, selector: str) -> dict[str, float]:
    found = await page.locator(selector).first.bounding_box()
    assert found is not None, f"{selector} is not on screen"
    return found


async def choose_language(page: Any, label: str, code: str) -> None:
    await page.goto("/#account")
    await page.get_by_label(label, exact=True).select_option(code)
    await page.locator(".language-form button[type=submit]").click()
    await expect(page.locator("html")).to_have_attribute("lang", code)


async def test_a_right_to_left_language_mirrors_the_layout_and_english_restores_it(skald, browser_pages):
    host = await skald.start(plugins=[Arabic()], enable=["arabic"])
    await host.admin()  # set up: the sign-in page, not the first administrator's
    width = DESKTOP["width"]
    page = await browser_pages.new(host.url)
    await sign_in(page, host.admin_username, ADMIN_PASSWORD)
    await expect(page.locator("html")).to_have_attribute("dir", "ltr")

    await choose_language(page, "Interface language", "ar")
    await expect(page.locator("html")).to_have_attribute("dir", "rtl")
    await expect(page.get_by_role("navigation", name="التنقل الرئيسي")).to_be_visible()
    sidebar = await box(page, "#sidebar")
    assert sidebar["x"] + sidebar["width"] == width and sidebar["x"] > width / 2, sidebar  # the right edge
    content = await box(page, "#content")
    assert content["x"] + content["width"] <= sidebar["x"], (content, sidebar)

    await page.goto("/#chat")
    text = await box(page, ".composer-input")
    send = await box(page, ".composer .btn.send")
    assert send["x"] + send["width"] <= text["x"], (send, text)  # the line's end: left of the text
    conversations = await box(page, ".conv-sidebar")
    main = await box(page, ".conv-main")
    assert conversations["x"] >= main["x"] + main["width"], (conversations, main)
    assert await page.locator(".conv-sidebar").evaluate("(node) => getComputedStyle(node).borderLeftWidth") == "1px"

    await page.reload()  # the member's language, read again at sign-in: still right to left
    await expect(page.locator("html")).to_have_attribute("dir", "rtl")

    missing = await page.goto("/no-such-page")
    assert missing is not None and missing.status == 404
    assert await page.get_attribute("html", "dir") == "rtl"
    assert await page.get_attribute("html", "lang") == "ar"

    await choose_language(page, "لغة الواجهة", "en")
    await expect(page.locator("html")).to_have_attribute("dir", "ltr")
    sidebar = await box(page, "#sidebar")
    assert sidebar["x"] == 0 and sidebar["width"] < width / 2, sidebar  # the left edge
    content = await box(page, "#content")
    assert content["x"] >= sidebar["x"] + sidebar["width"], (content, sidebar)
    await page.goto("/#chat")
    text = await box(page, ".composer-input")
    send = await box(page, ".composer .btn.send")
    assert send["x"] >= text["x"] + text["width"], (send, text)
    conversations = await box(page, ".conv-sidebar")
    main = await box(page, ".conv-main")
    assert conversations["x"] + conversations["width"] <= main["x"], (conversations, main)
    assert await page.locator(".conv-sidebar").evaluate("(node) => getComputedStyle(node).borderRightWidth") == "1px"


async def test_the_direction_follows_the_script_whatever_intl_knows(skald, browser_pages):
    """The list behind Intl (a browser without Locale text info) and Intl itself agree."""
    host = await skald.start()
    page = await browser_pages.new(host.url)
    await page.goto("/")
    await expect(page.locator("html")).to_have_attribute("dir", "ltr")
    directions = await page.evaluate(
        """async () => {
          const { textDirection } = await import("/ui/lib/i18n.js");
          return Object.fromEntries(["ar", "he", "fa", "ur", "ckb", "ar-EG", "en", "de", "ja", "tr"].map((code) => [code, textDirection(code)]));
        }"""
    )
    rtl = {"ar", "he", "fa", "ur", "ckb", "ar-EG"}
    assert directions == {code: "rtl" if code in rtl else "ltr" for code in directions}, directions


async def test_each_message_takes_its_own_scripts_direction(skald, browser_pages):
    """An English answer in the Arabic interface reads left to right, and Arabic typed in
    the English interface right to left: messages, the composer and the edit box say
    dir="auto", so their text, not the interface, sets the direction."""
    from skald_host.testing import Reply, ScriptedModelServer

    from .test_chat import MODEL, configure_model, send

    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[Arabic()], enable=["arabic"])
        await configure_model(await host.admin(), server)
        server.script(MODEL, [Reply(text="An answer in **English**."), Reply(text="مرحبا بك")])
        page = await browser_pages.new(host.url)
        await sign_in(page, host.admin_username, ADMIN_PASSWORD)
        await choose_language(page, "Interface language", "ar")
        await page.goto("/#chat")
        box = page.locator(".composer-input")
        await box.fill("Hello in English")
        await box.press("Enter")
        answer = page.locator(".transcript .msg.assistant").last
        await expect(answer).to_have_attribute("data-status", "complete")
        direction = "(node) => getComputedStyle(node).direction"
        assert await page.locator("html").evaluate(direction) == "rtl"
        assert await answer.locator(".msg-body").evaluate(direction) == "ltr"
        assert await page.locator(".transcript .msg.user .plain").last.evaluate(direction) == "ltr"
        assert await box.evaluate(direction) == "rtl"  # empty: the interface's
        await box.fill("Hello")
        assert await box.evaluate(direction) == "ltr"
        await box.fill("")

        await choose_language(page, "لغة الواجهة", "en")
        await page.goto("/#chat")
        await page.locator(".conv-list .conv-link").first.click()
        await expect(page.locator(".transcript .msg.assistant")).to_have_count(1)
        await send(page, "أهلا وسهلا")
        await expect(page.locator(".transcript .msg.assistant")).to_have_count(2, timeout=20_000)
        answer = page.locator(".transcript .msg.assistant").last
        await expect(answer).to_have_attribute("data-status", "complete")
        assert await answer.locator(".msg-body").evaluate(direction) == "rtl"
        assert await page.locator(".transcript .msg.user .plain").last.evaluate(direction) == "rtl"
        assert await page.locator(".transcript .msg.user .plain").first.evaluate(direction) == "ltr"

"""The plugin page kit (``/ui/lib/plugin-kit.js``, spec 1.3) as a plugin's page uses it,
in the signed-in shell of a German member: a write carries the shell's CSRF token, a
refusal throws ``KitError`` in the reader's language with its code, and ``text`` picks
the page's own string for the reader's locale."""

from __future__ import annotations

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

USE_THE_KIT = """async () => {
    const kit = await import("/ui/lib/plugin-kit.js");
    const saved = await kit.call("PUT", "/api/me/settings", { theme: "dark" });
    let refusal = null;
    try {
        await kit.call("POST", "/api/conversations", { agent: "no-such-agent" });
    } catch (error) {
        refusal = { name: error.name, message: error.message, status: error.status, code: error.code, values: error.values };
    }
    const strings = { en: { hi: "Hello, {name}!" }, de: { hi: "Hallo, {name}!" } };
    const node = kit.node("p", "<b>plain</b>", { class: "x" });
    return {
        saved, refusal, locale: kit.locale(), greeting: kit.text(strings, "hi", { name: "Bea" }),
        fallback: kit.text({ en: { only: "English only" } }, "only"), markup: node.innerHTML, cls: node.className,
    };
}"""


async def test_a_page_using_the_kit_writes_with_the_session_and_reads_refusals_in_german(skald, browser_pages):
    host = await skald.start()
    await host.admin()
    await host.create_member("bea", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "bea", MEMBER_PASSWORD)
    result = await page.evaluate(USE_THE_KIT)
    assert result["saved"]["settings"]["theme"] == "dark"  # a write: the shell's CSRF token went with it
    assert result["refusal"] == {
        "name": "KitError", "message": "Es gibt keinen Agenten no-such-agent.", "status": 400,
        "code": "agent_unknown", "values": {"agent": "no-such-agent"},
    }
    assert (result["locale"], result["greeting"], result["fallback"]) == ("de", "Hallo, Bea!", "English only")
    assert (result["markup"], result["cls"]) == ("&lt;b&gt;plain&lt;/b&gt;", "x")  # text stays text


async def test_the_plugin_browser_fixture_mounts_a_page_in_the_members_language(skald, plugin_browser):
    """``plugin_browser.open`` mounts as the shell does, the member's saved language
    included (a plugin author found the kit's ``locale()`` following the browser's)."""
    from .kit import PagePlugin

    host = await skald.start(plugins=[PagePlugin()], enable=["hello"])
    await host.create_member("bea", locale="de")
    page = await plugin_browser.open(host, "bea", MEMBER_PASSWORD, "hello", "main", locale="en-US")
    seen = await page.evaluate('async () => [document.documentElement.lang, (await import("/ui/lib/plugin-kit.js")).locale()]')
    assert seen == ["de", "de"]


async def test_the_kits_confirm_asks_in_the_shells_dialog_and_gives_the_focus_back(skald, browser_pages):
    """Since 1.6: a page asks before a removal without ``window.confirm`` (neither
    translated nor styled) or a dialog of its own."""
    from playwright.async_api import expect

    host = await skald.start()
    await host.admin()
    await host.create_member("bea", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "bea", MEMBER_PASSWORD)
    ask = """async () => {
        const kit = await import("/ui/lib/plugin-kit.js");
        const opener = document.createElement("button");
        opener.textContent = "Entfernen";
        document.querySelector("#content").append(opener);
        opener.focus();
        window.answer = kit.confirm({ title: "Liste entfernen?", message: "Sie ist dann weg.", confirmLabel: "Entfernen" });
    }"""
    await page.evaluate(ask)
    dialog = page.get_by_role("dialog", name="Liste entfernen?")
    await expect(dialog).to_contain_text("Sie ist dann weg.")
    await expect(dialog.get_by_role("button", name="Abbrechen")).to_be_focused()  # the harmless answer first, in German
    await page.keyboard.press("Escape")
    assert await page.evaluate("window.answer") is False
    assert await page.evaluate("document.activeElement.textContent") == "Entfernen"  # back where it was
    await page.evaluate(ask)
    await dialog.get_by_role("button", name="Entfernen").click()
    assert await page.evaluate("window.answer") is True

"""The plugin page kit (``/ui/lib/plugin-kit.js``, spec 1.3) as a plugin's page uses it,
in the signed-in shell of a German member: a write carries the shell's CSRF token, a
refusal throws ``KitError`` in the reader's language with its code, and ``text`` picks
the page's own string for the reader's locale; ``upload`` (spec 1.11) sends a file."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from quart import Blueprint, Response, request

from skald_host.testing.host import MEMBER_PASSWORD
from skald_hookspecs import accepts, hookimpl
from skald_hookspecs.types import PluginInfo, WebPage

from .kit import PAGE_MODULE, sign_in

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


class Uploads:
    """A plugin with a page and file routes, as the guide's upload section declares them."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="uploads", title="Uploads", spec=">=1.11,<2")

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint("kit_uploads", __name__)
        file_body = {"type": "string", "format": "binary"}

        @blueprint.get("/page.js")
        async def page_module() -> Response:
            return Response(PAGE_MODULE, content_type="text/javascript; charset=utf-8")

        async def received() -> dict[str, Any]:
            data = await request.get_data()
            return {
                "name": unquote(request.headers.get("X-Filename", "")), "type": request.headers.get("Content-Type"),
                "size": len(data), "text": data.decode("utf-8", "replace"), "method": request.method,
            }

        @blueprint.post("/files")
        @accepts(file_body, content_type="application/octet-stream")
        async def add_file() -> Any:
            return await received(), 201

        @blueprint.put("/photo")
        @accepts(file_body, content_type="image/png")
        async def put_photo() -> Any:
            return await received()

        register(blueprint)

    @hookimpl
    def register_web_pages(self, register: Any) -> None:
        register(WebPage("main", "Uploads", "page.js"))


UPLOAD_WITH_THE_KIT = """async () => {
    const kit = await import("/ui/lib/plugin-kit.js");
    const file = new File(["Grüße aus der Datei"], "Grüße & co.txt", { type: "text/plain" });
    const sent = await kit.upload("/api/plugin/uploads/files", file);
    const photo = await kit.upload("/api/plugin/uploads/photo", new Blob([new Uint8Array([137, 80, 78, 71])]),
        { method: "PUT", type: "image/png", filename: "bild.png" });
    const refused = async (promise) => {
        try { await promise; return null; } catch (error) {
            return { name: error.name, message: error.message, status: error.status, code: error.code, values: error.values };
        }
    };
    const tooLarge = await refused(kit.upload("/api/plugin/uploads/files", new Blob([new Uint8Array(4096)])));
    const notAFile = await refused(kit.upload("/api/plugin/uploads/files", "just text"));
    const withGet = await refused(kit.upload("/api/plugin/uploads/files", file, { method: "GET" }));
    return { sent, photo, tooLarge, notAFile, withGet };
}"""


async def test_a_page_outside_the_shell_uploads_a_file_with_the_kit_and_reads_refusals_in_german(skald, plugin_browser):
    """Since 1.11 the kit sends a file: the page asks the session for the CSRF token
    (it is mounted outside the shell, as a plugin author's test mounts it), the file's
    name goes percent-encoded in X-Filename, and a refusal is a KitError in the
    reader's language. Before, ``call`` sent JSON only and an author wrote a raw fetch
    and fetched the CSRF token by hand."""
    settings = skald.settings(files={"upload_max_bytes": 1024})
    host = await skald.start(plugins=[Uploads()], enable=["uploads"], settings=settings)
    await host.admin()
    await host.create_member("bea", locale="de")
    page = await plugin_browser.open(host, "bea", MEMBER_PASSWORD, "uploads", "main")
    # Start from no known token: the page's own start may already have fetched one on a
    # loaded machine, and the point is that upload() fetches it when it is missing.
    forget = 'async () => { const api = await import("/ui/lib/api.js"); api.setCsrfToken(null); return api.csrf(); }'
    assert await page.evaluate(forget) is None

    result = await page.evaluate(UPLOAD_WITH_THE_KIT)

    assert result["sent"] == {
        "name": "Grüße & co.txt", "type": "text/plain", "size": len("Grüße aus der Datei".encode()),
        "text": "Grüße aus der Datei", "method": "POST",
    }
    assert {k: result["photo"][k] for k in ("name", "type", "size", "method")} == {"name": "bild.png", "type": "image/png", "size": 4, "method": "PUT"}
    assert result["tooLarge"] == {
        "name": "KitError", "message": "Die Datei ist größer als die Upload-Grenze von 1,0 KiB.", "status": 413,
        "code": "upload_too_large", "values": {"limit": 1024, "size": "1 KiB", "size_bytes": 1024},
    }
    assert result["notAFile"]["name"] == "TypeError"
    # A GET carries no body: said so, not "the server cannot be reached" (second plugin-author probe).
    assert (result["withGet"]["name"], result["withGet"]["message"]) == (
        "TypeError", "upload(path, file, {method}): method must be POST or PUT, not GET")

"""docs/plugins.md ("Styles"): a plugin page styles itself with a stylesheet served by
its own route and linked from the page; an inline ``<style>`` is refused by the host's
Content-Security-Policy. The recipe shown, in a real browser."""

from __future__ import annotations

from quart import Blueprint, Response

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, WebPage
from skald_host.testing.host import MEMBER_PASSWORD

PAGE_JS = """import { node } from "/ui/lib/plugin-kit.js";

export default class StyledPage extends HTMLElement {
  connectedCallback() {
    this.pluginId = this.getAttribute("plugin-id");
    this.classList.add("styled-page");
    this.append(node("link", "", { rel: "stylesheet", href: `/api/plugin/${encodeURIComponent(this.pluginId)}/page.css` }));
    this.append(node("style", ".styled-page .inline { font-weight: 700; }"));  // refused by the policy
    this.append(node("p", "linked", "line"), node("p", "inline", "inline"));
  }
}
"""
PAGE_CSS = ".styled-page .line { font-weight: 600; }\n"


class Styled:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="styled", title="Styled", spec=">=1.3,<2")

    @hookimpl
    def register_web_pages(self, register) -> None:
        register(WebPage("main", "Styled", "page.js"))

    @hookimpl
    def register_routes(self, register) -> None:
        blueprint = Blueprint("styled", __name__)

        @blueprint.get("/page.js")
        async def page_js():
            return Response(PAGE_JS, mimetype="text/javascript")

        @blueprint.get("/page.css")
        async def page_css():
            return Response(PAGE_CSS, mimetype="text/css")

        register(blueprint)


async def test_a_page_styles_itself_with_a_stylesheet_from_its_own_route(skald, plugin_browser):
    host = await skald.start(plugins=[Styled()], enable=["styled"])
    await host.create_member("bea")
    page = await plugin_browser.open(host, "bea", MEMBER_PASSWORD, "styled", "main")
    line = page.locator(".styled-page .line")
    await line.wait_for()
    await page.wait_for_function("getComputedStyle(document.querySelector('.styled-page .line')).fontWeight === '600'")
    weights = await page.evaluate(
        "() => ['.line', '.inline'].map(s => getComputedStyle(document.querySelector('.styled-page ' + s)).fontWeight)"
    )
    assert weights == ["600", "400"]

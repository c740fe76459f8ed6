"""A browser's region language (``pt-BR``, which ``I18nBundle.from_folder`` accepts as a
file name) is chosen when the host has it, else its language (``de-AT`` → ``de``): the
shell compared only the first two letters, so ``pt-BR`` was never chosen."""

from __future__ import annotations

from typing import Callable

from playwright.async_api import expect

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo


class Portuguese:
    """Two more languages of the core, from a plugin, as a translator's files would be."""

    info = PluginInfo(id="portuguese", title="Portuguese", spec=">=1.0,<2")

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return self.info

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        register(I18nBundle("core", {
            "pt": {"locale.pt": "Português", "login.title": "Entrar (pt)"},
            "pt-BR": {"locale.pt-BR": "Português (Brasil)", "login.title": "Entrar (pt-BR)"},
        }))


async def test_a_region_language_is_chosen_whole_then_by_its_language(skald, browser_pages):
    host = await skald.start(plugins=[Portuguese()], enable=["portuguese"])
    await host.admin()

    brazil = await browser_pages.new(host.url, locale="pt-BR")
    await brazil.goto("/")
    await expect(brazil.locator("html")).to_have_attribute("lang", "pt-BR")
    await expect(brazil.get_by_text("Entrar (pt-BR)").first).to_be_visible()

    portugal = await browser_pages.new(host.url, locale="pt-PT")
    await portugal.goto("/")
    await expect(portugal.locator("html")).to_have_attribute("lang", "pt")

    matched = await brazil.evaluate("""async () => {
        const { matchLocale } = await import("/ui/lib/i18n.js");
        const offered = ["de", "en", "pt", "pt-BR"];
        return [["pt-BR"], ["pt-br"], ["pt-PT"], ["de-AT"], ["fr-FR", "de-CH"], ["fr"], ["pt_BR"]].map((tags) => matchLocale(tags, offered));
    }""")
    assert matched == ["pt-BR", "pt-BR", "pt", "de", "de", None, "pt-BR"]

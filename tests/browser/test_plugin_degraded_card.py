"""A plugin that runs but cannot do its job for now (``HostApi.set_degraded``, contract
1.12): its catalog card reads "Running · <why>" with an amber dot, neither the green of
a plugin that works nor the red of one that failed to start, in the admin's language;
its detail page says it where it says the state, the status block lists it, and the
card is green again once the plugin says it works."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import expect

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import screenshot, sign_in

PLUGIN = "widgets"
ENGLISH = "Cannot reach the widget service at widgets.example: trying again by itself."
GERMAN = "Der Widget-Dienst unter widgets.example ist nicht erreichbar: Es versucht es selbst weiter."


class Widgets:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=PLUGIN, title="Widgets", spec=">=1.12,<2")

    @hookimpl
    def register_i18n(self, register: Any) -> None:
        register(I18nBundle(PLUGIN, {
            "en": {"error.unreachable": "Cannot reach the widget service at {host}: trying again by itself."},
            "de": {"error.unreachable": "Der Widget-Dienst unter {host} ist nicht erreichbar: Es versucht es selbst weiter."},
        }))

    @hookimpl
    async def startup(self, host: Any) -> None:
        pass


async def test_a_degraded_plugins_card_is_amber_with_its_reason_and_green_again_once_it_works(skald, browser_pages):
    host = await skald.start(plugins=[Widgets()], enable=[PLUGIN])
    admin = await host.admin()
    host.core.host_api(PLUGIN).set_degraded("cannot reach widgets.example, retrying", key="error.unreachable", values={"host": "widgets.example"})

    page = await browser_pages.new(host.url)
    await sign_in(page, "admin", ADMIN_PASSWORD)
    await page.goto("/#plugins")
    card = page.locator(f"article.plugin-card[data-plugin='{PLUGIN}']")
    dot = card.locator(".health-dot")
    await expect(card.locator(".health")).to_have_text(f"Running · {ENGLISH}")
    await expect(dot).to_have_class("health-dot amber")  # not green, not the red of a failed start
    await expect(card.locator(".card-problem")).to_have_count(0)
    assert await dot.evaluate("d => getComputedStyle(d).backgroundColor") == "rgb(199, 124, 0)"
    # One full stop after the reason, which brings its own (admin keyboard walk: "itself.. Show").
    await expect(dot).to_have_attribute("aria-label", f"Status of Widgets: Running · {ENGLISH.rstrip('.')}. Show details")
    await dot.click()
    await expect(card.locator(".health-detail.amber")).to_contain_text("It runs, but cannot do its job right now")
    # The reason wraps inside the card rather than running out of it.
    box, head = await card.bounding_box(), await card.locator(".health").bounding_box()
    assert head["x"] + head["width"] <= box["x"] + box["width"] + 0.5, (head, box)
    await screenshot(page, "plugin-card-degraded")

    await page.goto(f"/#plugin-detail?id={PLUGIN}")
    state = page.locator("dl.facts dt", has_text="State").locator("xpath=following-sibling::dd[1]")
    await expect(state).to_have_text(f"Running · {ENGLISH}")
    await expect(state.locator(".health-dot")).to_have_class(re.compile(r"\bamber\b"))
    await screenshot(page, "plugin-detail-degraded", full_page=False)

    await page.goto("/#settings")
    await expect(page.locator(".status-block .notice.warning")).to_contain_text(
        f"The plugin Widgets runs but cannot do its job right now (its card in the catalog says more): {ENGLISH}"
    )

    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    await page.goto("/#plugins")
    await page.reload()
    await expect(card.locator(".health")).to_have_text(f"Läuft · {GERMAN}")
    await expect(dot).to_have_class("health-dot amber")

    host.core.host_api(PLUGIN).set_degraded(None)
    await page.reload()
    await expect(card.locator(".health")).to_have_text("Läuft")
    await expect(dot).to_have_class("health-dot green")

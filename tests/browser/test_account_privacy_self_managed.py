"""My account, "Plugins that can act for you": a plugin that manages its own access is
said to decide itself which members it serves, true of every such plugin. It read
"decides itself whom it serves, for example once you link your account" beside System
agents, which nobody links an account to (a newcomer probe)."""

from __future__ import annotations

from playwright.async_api import expect

from skald_hookspecs import PluginInfo, hookimpl
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in


class SelfManaged:
    """Background work no member is granted: it decides itself whom it serves."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="background", title="Background helpers", spec=">=1.3,<2", manages_own_access=True)


async def test_a_self_managing_plugin_is_said_to_decide_which_members_it_serves(skald, browser_pages):
    host = await skald.start(plugins=[SelfManaged()], enable=["background"])
    await host.admin()
    await host.create_member("alice")
    await host.create_member("berta", locale="de")
    for name, heading, said in (
        ("alice", "Plugins that can act for you", "Background helpers (decides itself which members it serves)"),
        ("berta", "Plugins, die für dich handeln können", "Background helpers (entscheidet selbst, welchen Mitgliedern es dient)"),
    ):
        page = await browser_pages.new(host.url)
        await sign_in(page, name, MEMBER_PASSWORD)
        await page.goto("/#account")
        plugins = page.get_by_test_id("privacy").locator("div.stack", has=page.get_by_role("heading", name=heading))
        await expect(plugins.locator("li")).to_have_text([said])
        text = await plugins.inner_text()
        assert "link" not in text and "verknüpf" not in text, text

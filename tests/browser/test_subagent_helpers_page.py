"""The Helpers page says a helper may hand work on only when the runtime offers it
``execute_task`` (the server's ``may_delegate``): a helper whose ``delegates`` names
every helper but whose tools leave ``execute_task`` out, and the shipped researcher
(no tools at all, its ``delegates`` absent), hand work to nobody."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

NOBODY = "no other helper: it does its tasks itself"


async def test_the_helpers_page_says_nobody_for_a_helper_without_the_delegation_tool(skald, browser_pages, tmp_path):
    host = await skald.start()
    await host.create_member("henrik")
    folder = tmp_path / "agents"
    for agent_id, tools in (("boss", "[execute_task]"), ("reader", "[read_file]")):
        (folder / agent_id).mkdir(parents=True)
        (folder / agent_id / "AGENT.md").write_text("You help.", encoding="utf-8")
        (folder / agent_id / "meta.yaml").write_text(
            f"title: {agent_id.title()}\ndescription: Helps.\nkind: task\nallow_tools: true\ntools: {tools}\ndelegates: ['*']\n",
            encoding="utf-8")
    catalog = host.core.chat.subagent_catalog
    catalog.agents.add_directory(folder, None)
    catalog.reload()
    assert catalog.refused is None

    page = await browser_pages.new(host.url)
    await sign_in(page, "henrik", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#agents")
    delegates = lambda agent_id: page.locator(f".agent-definition[data-agent-id='{agent_id}'] dd").nth(1)  # noqa: E731
    await expect(delegates("boss")).to_have_text("any helper")
    await expect(delegates("reader")).to_have_text(NOBODY)
    await expect(delegates("researcher")).to_have_text(NOBODY)
    await expect(delegates("general-purpose")).to_have_text(NOBODY)

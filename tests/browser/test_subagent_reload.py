"""A sub-agent's progress survives a reload: the box in the card of the execute_task call
that started it is rebuilt from the server's run (its text so far, its state) and goes
on with the live events to its end; it and the task strip name the agent by its title
in the reader's language, as the Helpers page does."""

from __future__ import annotations

import re

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model

TASK = "Finde die Hauptstadt von Norwegen."
#: Short words, so the box's tail (its last 240 characters) still holds the early ones
#: for a while; 70 of them at 0.1 s leave seven seconds for the reload.
WORDS = [f"w{n}" for n in range(70)]


async def test_a_reload_while_a_sub_agent_writes_rebuilds_its_box_which_goes_on_to_the_end(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("greta", locale="de")
        server.script(MODEL, [
            Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK})]),
            Reply(text="Oslo. " + " ".join(WORDS) + " Ende.", token_delay=0.1),
            Reply(text="Der Rechercheur sagt: Oslo."),
        ])
        page = await browser_pages.new(host.url)
        await sign_in(page, "greta", MEMBER_PASSWORD)
        composer = page.locator(".composer-input")
        await composer.fill("Hauptstadt von Norwegen?")
        await composer.press("Enter")
        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task"))
        box = card.locator(".subagent")
        approval = card.locator(".approval")
        await expect(box.or_(approval).first).to_be_visible()
        if await approval.is_visible():
            await approval.locator("button.primary").click()
        await expect(box.locator(".sub-text")).to_contain_text("w3 ")
        await expect(page.get_by_role("region", name="Aufgaben").locator(".task-agent")).to_have_text("Rechercheur")

        await page.reload()
        # Rebuilt, still working, with what it wrote before the reload (from the server),
        # in the reader's language and by the agent's title.
        await expect(box).to_have_count(1)
        await expect(box.locator(".sub-head")).to_have_text("Unteragent Rechercheur arbeitet…")
        await expect(box).to_have_attribute("aria-label", "Unteragent Rechercheur")
        await expect(box.locator(".sub-text")).to_contain_text("w3 ")
        await expect(box).not_to_have_class(re.compile(r"\bdone\b"))
        # Busy while it streams: inside the live log, its text is not read out again each frame.
        await expect(box).to_have_attribute("aria-busy", "true")
        await expect(page.get_by_role("region", name="Aufgaben").locator(".task-agent")).to_have_text("Rechercheur")

        # The live events go on in the rebuilt box, to its end.
        await expect(box.locator(".sub-text")).to_contain_text("w69 Ende.", timeout=15_000)
        await expect(box.locator(".sub-head")).to_have_text("Unteragent Rechercheur ist fertig.")
        await expect(box).to_have_class(re.compile(r"\bdone\b"))
        await expect(box).not_to_have_attribute("aria-busy", "true")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Der Rechercheur sagt: Oslo.")
        tail = await box.locator(".sub-text").text_content()
        assert tail.count("w68 ") == 1 and tail.count("Ende.") == 1, f"the box repeats what it had: {tail!r}"
        assert tail.endswith("w66 w67 w68 w69 Ende."), tail

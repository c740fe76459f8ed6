"""Named sub-agents in the browser (issue 20): the conversation's task strip shows a
background run while it runs and after a reload, opens to its transcript, cancels it;
the Helpers page lists the definitions and the member's own runs."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import screenshot, sign_in
from .test_chat import MODEL, configure_model, send

TASK = "Read every annual report."


async def test_the_task_strip_survives_a_reload_drills_in_and_cancels(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("ida")

        def respond(request):
            last = request.messages[-1]
            if last["content"] == TASK:
                return Hang(text="reading")
            if last["role"] == "tool":
                return Reply("I handed it to the researcher.")
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK, "mode": "background"})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "ida", MEMBER_PASSWORD)
        await send(page, "Research the reports in the background.")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("I handed it to the researcher.")
        strip = page.get_by_role("region", name="Tasks")
        item = strip.locator(".task-item")
        await expect(item).to_contain_text("Researcher")
        await expect(item).to_contain_text("Running")
        await page.reload()
        await expect(item).to_contain_text("Running")
        await item.locator("summary").click()
        await expect(item.locator(".task-transcript")).to_contain_text(TASK)
        await screenshot(page, "chat-task-strip", full_page=False)
        await item.get_by_role("button", name="Cancel task").click()
        await expect(item).to_contain_text("Cancelled")

        await page.goto(f"{host.url}/#agents")
        await expect(page.get_by_role("heading", name="Helpers", level=1)).to_be_visible()
        await expect(page.locator(".agent-definition[data-agent-id='general-purpose']")).to_be_visible()
        await expect(page.locator("table.agent-runs tbody tr")).to_have_count(1)
        await expect(page.locator(".table-wrap > table.agent-runs")).to_have_count(1)  # scrolls in its card on a phone, not the page
        await expect(page.locator("table.agent-runs tbody tr")).to_contain_text("Cancelled")

"""A helper's box shows as much live as after a reload: a failed helper says why in
both (not only "failed." live), and a parallel batch's boxes stand in call order in
both (a reload put them in reverse)."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedError, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model, send

# Worded by its code (error.model_refused) as a member's own failed turn is, not the stored English.
WHY = "The model refused the request (HTTP 500: scripted failure)."


async def test_a_failed_helper_says_why_and_a_batch_keeps_call_order_live_and_after_a_reload(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("olga")

        def respond(request):
            last = request.messages[-1]
            content = last.get("content") or ""
            if content == "Part 0.":
                return ScriptedError(500, "scripted failure", should_retry=False)
            if content.startswith("Part "):
                return Reply(f"done {content}")
            if last["role"] == "tool":
                return Reply("Two of three came back.")
            return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [{"agent": "researcher", "task": f"Part {i}."} for i in range(3)]})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "olga", MEMBER_PASSWORD)
        await send(page, "Three parts at once.")
        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task"))
        approval = card.locator(".approval")
        await expect(card.locator(".subagent").or_(approval).first).to_be_visible()
        if await approval.is_visible():
            await approval.locator("button.primary").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Two of three came back.")
        boxes = card.locator(".subagent")
        expected_heads = ["Sub-agent Researcher failed.", "Sub-agent Researcher finished.", "Sub-agent Researcher finished."]
        expected_texts = [WHY, "done Part 1.", "done Part 2."]

        await expect(boxes.locator(".sub-head")).to_have_text(expected_heads)
        await expect(boxes.locator(".sub-text")).to_have_text(expected_texts)  # live: the reason too

        await page.reload()
        await expect(boxes).to_have_count(3)
        await expect(boxes.locator(".sub-head")).to_have_text(expected_heads)
        await expect(boxes.locator(".sub-text")).to_have_text(expected_texts)  # the same order after a reload

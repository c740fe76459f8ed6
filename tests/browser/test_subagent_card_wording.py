"""What a helper's cards say (agents probe): a background delegation's call is done once
its run started, and its badge says "Started in the background", not a green "Done"
above "Sub-agent … is working…"; a helper's call approved and then refused because the
member's access went says so on its approval card, not "Approved." beside "Denied"."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, NotesPlugin, configure_model, send
from .test_subagent_tasks import ida_handed_a_task_to_the_researcher

NOTE_TASK = "Write the note."


async def test_a_background_delegations_card_says_started_in_the_background_live_and_after_a_reload(skald, browser_pages):
    async with ida_handed_a_task_to_the_researcher(skald, browser_pages) as (_, page):
        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task"))
        for reload in (False, True):
            if reload:
                await page.reload()
            await expect(card.locator("summary .badge")).to_have_text("Started in the background")
            await expect(card.locator(".subagent")).to_contain_text("is working")


async def test_a_helpers_call_approved_then_withdrawn_says_so_on_its_approval_card(skald, browser_pages):
    notes = NotesPlugin()
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[notes], enable=["notes"])
        admin = await host.admin()
        await configure_model(admin, server)
        await host.create_member("dora")

        def respond(request):
            said = [m.get("content") for m in request.messages]
            if NOTE_TASK in said:  # the helper's own frame
                if request.messages[-1]["role"] == "tool":
                    return Reply("The note was not written.")
                return Reply(tool_calls=[ToolCall("write_note", {"path": "notes/a.txt", "text": "a"})])
            if request.messages[-1]["role"] == "tool":
                return Reply("The helper could not write it.")
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "general-purpose", "task": NOTE_TASK})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "dora", MEMBER_PASSWORD)
        await send(page, "Have a helper write a note")
        approval = page.get_by_role("group", name="Approval for write_note")
        await expect(approval).to_be_visible()
        assert (await admin.put("/api/admin/plugins/notes/enabled", json={"enabled": False})).status_code == 200
        await approval.get_by_role("button", name="Approve").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("The helper could not write it.")
        step = page.locator(".sub-step", has=page.locator("code", has_text="write_note"))
        await expect(step.locator(".badge")).to_have_text("Denied")
        status = page.locator(".approval-status")
        await expect(status).to_have_text("Approved, but your access to this tool was withdrawn: it did not run.")
        await expect(status).to_have_class("approval-status denied")
        assert notes.calls == []

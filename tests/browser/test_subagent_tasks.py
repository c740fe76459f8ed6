"""Named sub-agents in the browser (issue 20): the conversation's task strip shows a
background run while it runs and after a reload, opens to its transcript, cancels it;
the Helpers page lists the definitions and the member's own runs."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from playwright.async_api import expect

from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import screenshot, sign_in
from .test_chat import MODEL, configure_model, send

TASK = "Read every annual report."


@asynccontextmanager
async def ida_handed_a_task_to_the_researcher(skald, browser_pages) -> AsyncIterator[tuple[Any, Any]]:
    """Ida's chat page once her delegation to the researcher, in the background, has
    returned (the run itself hangs "reading"): the host and the page. Shared by the task
    strip's tests and the card's wording tests, which start from the same delegation."""
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
        yield host, page


async def test_the_task_strip_survives_a_reload_drills_in_and_cancels(skald, browser_pages):
    async with ida_handed_a_task_to_the_researcher(skald, browser_pages) as (host, page):
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


async def test_a_cancelled_task_says_stopped_in_its_box_live_and_after_a_reload_in_german(skald, browser_pages):
    """The cancel from the strip ends the box at once (no reload), in the words of the
    strip and the reader's language; after a reload the box is still there, with what
    the run wrote, and the run's drill-in says why it ended in German too."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("jonas", locale="de")

        def respond(request):
            last = request.messages[-1]
            if last["content"] == TASK:
                return Hang(text="liest die Berichte")
            if last["role"] == "tool" or last["content"].startswith("[Background updates."):
                return Reply("Der Rechercheur ist dran.")
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK, "mode": "background"})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "jonas", MEMBER_PASSWORD)
        composer = page.locator(".composer-input")
        await composer.fill("Recherchiere die Berichte im Hintergrund.")
        await composer.press("Enter")
        box = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task")).locator(".subagent")
        await expect(box.locator(".sub-text")).to_have_text("liest die Berichte")
        await expect(box).to_have_attribute("aria-busy", "true")
        item = page.get_by_role("region", name="Aufgaben").locator(".task-item")
        await item.locator("summary").click()
        await item.locator(".task-actions button").click()
        await expect(item).to_contain_text("Abgebrochen")

        await expect(box.locator(".sub-head")).to_have_text("Unteragent Rechercheur wurde gestoppt.")
        await expect(box).not_to_have_attribute("aria-busy", "true")

        await page.reload()
        await expect(box).to_have_count(1)
        await expect(box.locator(".sub-head")).to_have_text("Unteragent Rechercheur wurde gestoppt.")
        await expect(box.locator(".sub-text")).to_have_text("liest die Berichte")
        await expect(box).not_to_have_attribute("aria-busy", "true")
        await item.locator("summary").click()
        await expect(item.locator(".task-transcript .error")).to_have_text("Die Aufgabe wurde abgebrochen.")


#: What a run taken up after a restart writes.
AGAIN = "researching again: " + " ".join(f"w{n}" for n in range(25))


async def test_a_run_taken_up_after_a_restart_shows_its_new_text_not_the_cut_one_before_it(skald, browser_pages):
    """A restart cuts a foreground sub-agent mid-answer; the run taken up again writes
    its answer anew. Its box, rebuilt when the page opens, says the run finished and
    holds the new answer, not the cut one joined to it ("researchingresearching")."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        member = await host.member("ines")

        def before_the_stop(request):
            if request.last_user_text == "Delegate it.":
                return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK})])
            return Hang(text="researching", token_delay=0.02)

        server.responder = before_the_stop
        conversation = (await member.post("/api/conversations", json={})).json()["id"]
        page = await browser_pages.new(host.url)
        await sign_in(page, "ines", MEMBER_PASSWORD)
        await page.goto(f"{host.url}/#chat/{conversation}")
        await expect(page.locator(".conv-heading")).to_be_visible()
        await send(page, "Delegate it.")
        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task"))
        approval = card.locator(".approval")
        await expect(card.locator(".subagent").or_(approval).first).to_be_visible()
        if await approval.is_visible():
            await approval.locator("button.primary").click()
        await expect(card.locator(".subagent .sub-text")).to_have_text("researching")
        await host.stop()

        def after_the_restart(request):
            last = request.messages[-1]
            if last["role"] == "tool":
                return Reply("The researcher found: " + last["content"])
            return Reply(AGAIN if last["content"] == TASK else "A complete answer.")

        server.responder = after_the_restart
        host = await skald.start(settings=host.settings)
        # The member's runtime takes the run up and finishes it; then the page opens.
        member = await host.member("ines")
        for _ in range(200):
            messages = (await member.get(f"/api/conversations/{conversation}")).json()["messages"]
            if messages[-1]["content"] == f"The researcher found: {AGAIN}":
                break
            await asyncio.sleep(0.05)
        await page.goto(f"{host.url}/#chat/{conversation}")
        await page.get_by_label("User name").fill("ines")  # the restart ended the session (and the host's port changed)
        await page.get_by_label("Password", exact=True).fill(MEMBER_PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text(f"The researcher found: {AGAIN}")
        box = card.locator(".subagent")
        await expect(box.locator(".sub-head")).to_have_text("Sub-agent Researcher finished.")
        await expect(box.locator(".sub-text")).to_have_text(AGAIN)


#: What another tab of the member's sends while the task runs (its turn refreshes the strip).
ELSEWHERE = "Meanwhile, something else."


def delegate_in_background(request):
    last = request.messages[-1]
    if last["content"] == TASK:
        return Hang(text="reading")
    if last["content"] == ELSEWHERE:
        return Reply("Noted.")
    if last["role"] == "tool" or last["content"].startswith("[Background updates."):
        return Reply("I handed it to the researcher.")
    return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK, "mode": "background"})])


async def a_running_task(page):
    await send(page, "Research the reports in the background.")
    await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("I handed it to the researcher.")
    item = page.get_by_role("region", name="Tasks").locator(".task-item")
    await expect(item).to_contain_text("Running")
    return item


async def test_cancelling_a_task_by_keyboard_keeps_the_focus_on_that_task(skald, browser_pages):
    """The Cancel button, disabled as it is pressed and gone with the strip's refresh,
    took the keyboard's focus to <body>: it stays on the task, which says it stopped."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("kai")
        server.responder = delegate_in_background
        page = await browser_pages.new(host.url)
        await sign_in(page, "kai", MEMBER_PASSWORD)
        item = await a_running_task(page)
        await item.locator("summary").focus()
        await page.keyboard.press("Enter")
        await expect(item.locator(".task-transcript")).to_contain_text(TASK)
        await page.keyboard.press("Tab")
        await expect(item.get_by_role("button", name="Cancel task")).to_be_focused()
        await page.keyboard.press("Enter")
        await expect(item).to_contain_text("Cancelled")
        await expect(item.get_by_role("button", name="Cancel task")).to_have_count(0)
        await expect(item.locator("summary")).to_be_focused()


async def test_a_refresh_of_the_task_strip_keeps_the_focus_where_it_was_and_each_task_is_named(skald, browser_pages):
    """Another tab's turn refreshes the strip, which makes every row anew: the keyboard
    on a task's Cancel was dropped to <body>. It stays on that task's Cancel; and each
    task is a group named by its helper and its task."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("lou")
        server.responder = delegate_in_background
        page = await browser_pages.new(host.url)
        await sign_in(page, "lou", MEMBER_PASSWORD)
        item = await a_running_task(page)
        strip = page.get_by_role("region", name="Tasks")
        await expect(strip.get_by_role("group", name=f"Researcher {TASK}")).to_be_visible()
        await item.locator("summary").focus()
        await page.keyboard.press("Enter")
        await expect(item.locator(".task-transcript")).to_contain_text(TASK)
        await page.keyboard.press("Tab")
        cancel = item.get_by_role("button", name="Cancel task")
        await expect(cancel).to_be_focused()
        await cancel.evaluate("(button) => { window.cancelBefore = button; }")

        other = await browser_pages.new(host.url)
        await sign_in(other, "lou", MEMBER_PASSWORD)
        await other.goto(page.url)
        await expect(other.locator(".task-item")).to_contain_text("Running")
        await send(other, ELSEWHERE)
        await expect(other.locator(".msg.assistant .msg-body").last).to_have_text("Noted.")

        await page.wait_for_function("() => !window.cancelBefore.isConnected")  # the strip was made anew
        await expect(item).to_have_attribute("open", "")
        await expect(item).to_contain_text("Running")
        await expect(cancel).to_be_focused()

"""What a helper (sub-agent) asks and how it stops, in the browser (a probe of helpers):
its approval and its question name the helper who asks — live in a brand-new
conversation and after a reload — and the status line says who waits for what; a
helper cancelled from the task strip while its tool runs closes that step in its box
(no "Running" left), and a batch whose every run failed says so, not "Done"; the task
strip's transcript says each call's status in the reader's language, and a round limit
once."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Mapping

from playwright.async_api import expect

from skald_hookspecs import PluginInfo, Tool, ToolContext, hookimpl
from skald_host.testing import Reply, ScriptedError, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model

ANNOUNCER = ".transcript + [role=status]"


class HelperTools:
    """``ask_member`` asks the member (``TurnApi.ask``); ``slow_tool`` runs until it is
    cancelled; ``quick_tool`` answers at once."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="helpertools", title="Helper tools", spec=">=1.3,<2")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def ask_member(args: Mapping[str, Any], ctx: ToolContext) -> str:
            answer = await ctx.turn.ask("Welche Stadt?", [{"name": "city", "type": "string", "title": "Stadt", "required": True}])
            return f"{answer['action']}: {dict(answer.get('content') or {}).get('city')}"

        async def slow_tool(args: Mapping[str, Any], ctx: ToolContext) -> str:
            await asyncio.Event().wait()  # until its run is cancelled
            return "never"

        async def quick_tool(args: Mapping[str, Any], ctx: ToolContext) -> str:
            return "quick"

        nothing = {"type": "object", "properties": {}}
        register(Tool("ask_member", "Ask the member for a city.", nothing, ask_member))
        register(Tool("slow_tool", "Work for a long time.", nothing, slow_tool))
        register(Tool("quick_tool", "Work for a moment.", nothing, quick_tool))


async def allow(admin: Any, tool: str) -> None:
    response = await admin.post("/api/admin/approval-rules", json={"tool_pattern": tool, "action": "allow", "priority": 50})
    assert response.status_code == 201, response.text


def user_texts(request: Any) -> list[str]:
    return [m.get("content") for m in request.messages if m["role"] == "user"]


async def test_a_helpers_approval_and_question_name_the_helper_live_and_after_a_reload(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[HelperTools()], enable=["helpertools"])
        admin = await host.admin()
        await configure_model(admin, server)
        await allow(admin, "execute_task")
        await host.create_member("greta", locale="de")

        def respond(request):
            last = request.messages[-1]
            if "Frag nach der Stadt." in user_texts(request):
                return Reply("Die Stadt ist Bergen.") if last["role"] == "tool" else Reply(tool_calls=[ToolCall("ask_member", {})])
            if last["role"] == "tool":
                return Reply("Der Helfer hat gefragt.")
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "general-purpose", "task": "Frag nach der Stadt."})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "greta", MEMBER_PASSWORD)
        composer = page.locator(".composer-input")
        await composer.fill("Welche Stadt?")  # a brand-new conversation
        await composer.press("Enter")
        approval = page.locator(".approval", has=page.locator("code", has_text="ask_member"))
        asks = "Unteragent Allzweck möchte ask_member mit diesen Argumenten ausführen. Erlauben?"
        announcer = page.locator(ANNOUNCER)
        await expect(approval.locator(".approval-question")).to_have_text(asks)
        await expect(announcer).to_have_text("Unteragent Allzweck wartet auf deine Zustimmung.")

        await page.reload()
        await expect(approval.locator(".approval-question")).to_have_text(asks)
        await expect(announcer).to_have_text("Unteragent Allzweck wartet auf deine Zustimmung.")
        await approval.locator("button.primary").click()

        question = page.get_by_role("group", name="Eine Frage von Unteragent Allzweck")
        await expect(question.locator(".question-asker")).to_have_text("Unteragent Allzweck fragt dich:")
        await expect(announcer).to_have_text("Unteragent Allzweck wartet auf deine Antwort.")
        await page.reload()
        await expect(question.locator(".question-asker")).to_have_text("Unteragent Allzweck fragt dich:")
        await expect(announcer).to_have_text("Unteragent Allzweck wartet auf deine Antwort.")

        await question.get_by_label("Stadt").fill("Bergen")
        await question.get_by_role("button", name="Senden").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Der Helfer hat gefragt.")
        box = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task")).locator(".subagent")
        await expect(box.locator(".sub-head")).to_have_text("Unteragent Allzweck ist fertig.")


async def test_a_helper_cancelled_in_its_tool_closes_the_step_and_a_batch_of_failures_is_not_done(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[HelperTools()], enable=["helpertools"])
        admin = await host.admin()
        await configure_model(admin, server)
        for tool in ("execute_task", "slow_tool"):
            await allow(admin, tool)
        await host.create_member("jonas", locale="de")

        def respond(request):
            asked = user_texts(request)
            if "Scheitere." in asked:
                return ScriptedError(500, "scripted failure", should_retry=False)
            if "Arbeite lange." in asked:
                return Reply(tool_calls=[ToolCall("slow_tool", {})])
            if request.messages[-1]["role"] == "tool":
                return Reply("Beide kamen nicht zurück.")
            return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [
                {"agent": "general-purpose", "task": "Arbeite lange."}, {"agent": "researcher", "task": "Scheitere."}]})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "jonas", MEMBER_PASSWORD)
        composer = page.locator(".composer-input")
        await composer.fill("Zwei Aufgaben.")
        await composer.press("Enter")
        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task"))
        slow = card.locator(".subagent").nth(0)
        step = slow.locator(".sub-step", has=page.locator("code", has_text="slow_tool"))
        await expect(step.locator(".badge")).to_have_text("Läuft")
        await expect(card.locator(".subagent.ended-failed .sub-head")).to_have_text("Unteragent Rechercheur ist fehlgeschlagen.")

        item = page.get_by_role("region", name="Aufgaben").locator(".task-item.status-running")
        await expect(item).to_have_count(1)  # the strip may show the failed run as running a moment longer than the card
        await item.locator("summary").click()
        await item.get_by_role("button", name="Aufgabe abbrechen").click()
        await expect(slow.locator(".sub-head")).to_have_text("Unteragent Allzweck wurde gestoppt.")
        await expect(step.locator(".badge")).to_have_text("Gestoppt")  # not "Läuft" until a reload
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Beide kamen nicht zurück.")
        # Every run of the batch failed: the call is not "Erledigt".
        await expect(card.locator("summary .badge")).to_have_text("Fehlgeschlagen")

        await page.reload()
        await expect(slow.locator(".sub-head")).to_have_text("Unteragent Allzweck wurde gestoppt.")
        await expect(step.locator(".badge")).not_to_have_text("Läuft")
        await expect(card.locator("summary .badge")).to_have_text("Fehlgeschlagen")
        stopped = page.get_by_role("region", name="Aufgaben").locator(".task-item.status-cancelled")
        await stopped.locator("summary").click()
        # The call's status in German, not the server's code ("slow_tool: cancelled").
        await expect(stopped.locator(".task-call")).to_have_text(re.compile(r"^slow_tool: (Gestoppt|Unterbrochen|Läuft|Fehlgeschlagen)$"))


async def test_a_helpers_round_limit_is_said_once_in_the_task_strip(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[HelperTools()], enable=["helpertools"])
        admin = await host.admin()
        await configure_model(admin, server)
        for tool in ("execute_task", "quick_tool"):
            await allow(admin, tool)
        await host.create_member("ida")

        def respond(request):
            if "Loop." in user_texts(request):
                return Reply(tool_calls=[ToolCall("quick_tool", {})])
            if request.messages[-1]["role"] == "tool":
                return Reply("The helper gave up.")
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "general-purpose", "task": "Loop.", "limits": {"max_iterations": 2}})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "ida", MEMBER_PASSWORD)
        composer = page.locator(".composer-input")
        await composer.fill("Loop it.")
        await composer.press("Enter")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("The helper gave up.")
        item = page.get_by_role("region", name="Tasks").locator(".task-item.status-failed")
        await item.locator("summary").click()
        transcript = item.locator(".task-transcript")
        await expect(transcript.locator(".task-call").first).to_have_text("quick_tool: Done")
        await expect(transcript.get_by_text("Stopped after 2 rounds without a final answer.")).to_have_count(1)

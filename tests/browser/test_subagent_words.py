"""Helpers in the reader's language (a second probe of seed 004): a helper whose model
failed says why in German in its box (live and after a reload) and in the task strip;
an approval a helper asks for names the helper, not "the assistant"; a batch with a
failed run says how many failed, not "Done"; the Helpers page
says "any helper" for ``delegates: ["*"]`` and counts a refusal's problems in the
right plural."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedError, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, NotesPlugin, configure_model

WHY = "Das Modell hat die Anfrage abgelehnt (HTTP 500: scripted failure)."  # error.model_refused, as a turn says it


async def test_a_failed_helper_and_a_helpers_approval_speak_german(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start(plugins=[NotesPlugin()], enable=["notes"])
        await configure_model(await host.admin(), server)
        await host.create_member("greta", locale="de")

        def respond(request):
            asked = [m.get("content") for m in request.messages if m["role"] == "user"]
            last = request.messages[-1]
            if "Teil 0." in asked:
                return ScriptedError(500, "scripted failure", should_retry=False)
            if "Notiere es." in asked:
                if last["role"] == "tool":
                    return Reply("Notiert.")
                return Reply(tool_calls=[ToolCall("write_note", {"path": "notizen/milch.txt", "text": "Milch kaufen"})])
            if last["role"] == "tool":
                return Reply("Eins von zwei kam zurück.")
            return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [
                {"agent": "researcher", "task": "Teil 0."}, {"agent": "general-purpose", "task": "Notiere es."}]})])

        server.responder = respond
        page = await browser_pages.new(host.url)
        await sign_in(page, "greta", MEMBER_PASSWORD)
        composer = page.locator(".composer-input")
        await composer.fill("Zwei Teile.")
        await composer.press("Enter")
        card = page.locator(".tool-card", has=page.locator("code.tool-name", has_text="execute_task"))
        first = card.locator(".approval")
        await expect(card.locator(".subagent").or_(first).first).to_be_visible()
        if await first.is_visible():
            await first.locator("button.primary").click()
        asking = page.locator(".approval", has=page.locator("code", has_text="write_note"))
        await expect(asking.locator(".approval-question")).to_have_text("Unteragent Allzweck möchte write_note mit diesen Argumenten ausführen. Erlauben?")
        await asking.locator("button.primary").click()
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Eins von zwei kam zurück.")
        failed = card.locator(".subagent.ended-failed")
        await expect(failed.locator(".sub-text")).to_have_text(WHY)  # live
        # One of the batch's two runs failed: the call says so, not "Erledigt".
        await expect(card.locator("summary .badge")).to_have_text("1 von 2 fehlgeschlagen")

        await page.reload()
        await expect(failed.locator(".sub-text")).to_have_text(WHY)  # after a reload
        await expect(card.locator("summary .badge")).to_have_text("1 von 2 fehlgeschlagen")
        item = page.get_by_role("region", name="Aufgaben").locator(".task-item.status-failed")
        await item.locator("summary").click()
        await expect(item.locator(".task-transcript .task-message.assistant .task-text")).to_have_text(WHY)
        await expect(item.locator(".task-transcript .task-message.error")).to_have_text(WHY)


async def test_the_helpers_page_says_any_helper_and_counts_problems_in_german(skald, browser_pages, tmp_path):
    host = await skald.start()
    await host.create_member("hanna", locale="de")
    folder = tmp_path / "agents"
    (folder / "boss").mkdir(parents=True)
    (folder / "boss" / "AGENT.md").write_text("You hand work on.", encoding="utf-8")
    (folder / "boss" / "meta.yaml").write_text(
        "title: Boss\ndescription: Hands work on.\nkind: task\nallow_tools: true\ntools: [execute_task]\ndelegates: ['*']\n", encoding="utf-8")
    catalog = host.core.chat.subagent_catalog
    catalog.agents.add_directory(folder, None)
    catalog.reload()
    assert catalog.refused is None

    page = await browser_pages.new(host.url)
    await sign_in(page, "hanna", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#agents")
    boss = page.locator(".agent-definition[data-agent-id='boss']")
    await expect(boss.locator("dd").nth(1)).to_have_text("jeden Helfer")

    (folder / "broken").mkdir()
    (folder / "broken" / "AGENT.md").write_text("You help.", encoding="utf-8")
    (folder / "broken" / "meta.yaml").write_text("kind: task\nallow_tool: true\n", encoding="utf-8")
    catalog.reload()
    assert catalog.refused is not None and len(catalog.refused.errors) == 1
    await page.reload()
    await expect(page.locator(".agents-page .notice").first).to_contain_text("abgelehnt (1 Problem);")

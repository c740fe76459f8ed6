"""A call the host refused is said in the reader's language: a German member read "a
rule denies this tool here." in her tool card (an admin probe). The model still reads
the English; the card says the host's words by their code, live and after a reload."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model


async def refuse_scheduling(admin) -> None:
    rule = await admin.post("/api/admin/approval-rules", json={"tool_pattern": "schedule_prompt", "action": "deny", "priority": 50})
    assert rule.status_code == 201, rule.text


async def berta_asks_to_schedule(skald, browser_pages, server, *, refused: bool):
    """A German member whose message makes the model call ``schedule_prompt``; with
    ``refused`` a rule refuses it from the start. The admin's client and her page."""
    host = await skald.start()
    admin = await host.admin()
    await configure_model(admin, server)
    if refused:
        await refuse_scheduling(admin)
    server.script(MODEL, [Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": "Plan.", "every": "every weekday at 8"})]), Reply("Geht nicht.")])
    await host.create_member("berta", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "berta", MEMBER_PASSWORD)
    await page.get_by_role("textbox", name="Nachricht").fill("Plane meinen Tag.")
    await page.keyboard.press("Enter")
    return admin, page


async def test_a_refused_call_reads_in_german_live_and_after_a_reload(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        _, page = await berta_asks_to_schedule(skald, browser_pages, server, refused=True)
        for _ in range(2):  # live, then as a reload reads it
            card = page.locator(".tool-details").first
            await expect(card.locator(".badge.tool-denied")).to_be_visible()
            await card.locator("summary").first.click()
            await expect(card.locator(".tool-result")).to_have_text("Eine Regel verweigert dieses Werkzeug hier.")
            await page.reload()


async def test_an_approval_a_rule_then_refused_says_the_rule_not_withdrawn_access(skald, browser_pages):
    """The admin made a rule refuse the tool while the member's card waited: her Allow
    ends in the rule's refusal, and the card says that, not that her access was
    withdrawn (it was not)."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        admin, page = await berta_asks_to_schedule(skald, browser_pages, server, refused=False)
        allow = page.get_by_role("button", name="Erlauben")
        await expect(allow).to_be_visible()
        await refuse_scheduling(admin)
        await allow.click()
        await expect(page.locator(".approval-status")).to_have_text("Erlaubt, aber eine Regel verweigert dieses Werkzeug jetzt hier: es lief nicht.")

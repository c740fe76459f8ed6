"""A call the host refused is said in the reader's language: a German member read "a
rule denies this tool here." in her tool card (an admin probe). The model still reads
the English; the card says the host's words by their code, live and after a reload."""

from __future__ import annotations

from playwright.async_api import expect

from skald_hookspecs import PluginInfo, hookimpl
from skald_hookspecs.sandbox import ExecResult

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


async def test_a_host_error_with_a_code_reads_in_german_in_the_card_live_and_after_a_reload(skald, browser_pages):
    """Issue 19: a file that does not exist read "Error: … does not exist" in a German
    member's card. The model reads that English; the card words the error's code."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_model(admin, server)
        server.script(MODEL, [Reply(tool_calls=[ToolCall("read_file", {"path": "gibtsnicht.txt"})]), Reply("Nichts da.")])
        await host.create_member("berta", locale="de")
        page = await browser_pages.new(host.url)
        await sign_in(page, "berta", MEMBER_PASSWORD)
        await page.get_by_role("textbox", name="Nachricht").fill("Lies die Datei.")
        await page.keyboard.press("Enter")
        for _ in range(2):  # live, then as a reload reads it
            card = page.locator(".tool-details").first
            await expect(card.locator(".badge.tool-error")).to_be_visible()
            await card.locator("summary").first.click()
            await expect(card.locator(".tool-result")).to_have_text("Diese Datei oder diesen Ordner gibt es nicht: gibtsnicht.txt")
            await page.reload()
        tool = [m["content"] for m in server.requests_for(MODEL)[-1].messages if m["role"] == "tool"]
        assert tool == ["Error: gibtsnicht.txt does not exist"]


class ExitingBackend:
    """A sandbox backend a plugin registers that answers every command with exit code 2."""

    name = "exiting"

    def available(self) -> str | None:
        return None

    async def ensure(self, spec):
        return None

    async def execute(self, spec, command, *, workdir, timeout, output_limit, cancelled=None):
        return ExecResult(2, "ls: cannot access '/x': No such file or directory")

    async def remove(self, member_id):
        return None

    async def existing(self, instance):
        return []


class ExitingSandbox:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="sandbox-exiting", title="Exiting sandbox", description="Exits 2.", spec=">=1.0,<2")

    @hookimpl
    def register_sandbox_backends(self, register) -> None:
        register("exiting", ExitingBackend())


async def test_a_commands_exit_code_reads_in_german_and_its_output_as_it_is(skald, browser_pages):
    """The card labels a command's exit code in the reader's language ("Exit-Code: 2");
    the command's own output, and what the model reads, stay as they are."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        settings = skald.settings(sandbox={"backend": "exiting"})
        host = await skald.start(settings=settings, plugins=[ExitingSandbox()], enable=["sandbox-exiting"])
        admin = await host.admin()
        await configure_model(admin, server)
        server.script(MODEL, [Reply(tool_calls=[ToolCall("execute_cmd", {"command": "ls /x"})]), Reply("Gibt es nicht.")])
        await host.create_member("berta", locale="de")
        page = await browser_pages.new(host.url)
        await sign_in(page, "berta", MEMBER_PASSWORD)
        await page.get_by_role("textbox", name="Nachricht").fill("Führe einen Befehl aus.")
        await page.keyboard.press("Enter")
        allow = page.get_by_role("button", name="Erlauben")
        card = page.locator(".tool-details").first
        await expect(card.locator(".badge.tool-done").or_(allow)).to_be_visible()
        if await allow.is_visible():
            await allow.click()
        for _ in range(2):  # live, then as a reload reads it
            card = page.locator(".tool-details").first
            await expect(card.locator(".badge.tool-done")).to_be_visible()
            await card.locator("summary").first.click()
            await expect(card.locator(".tool-result")).to_have_text("Exit-Code: 2\nls: cannot access '/x': No such file or directory")
            await page.reload()
        tool = [m["content"] for m in server.requests_for(MODEL)[-1].messages if m["role"] == "tool"]
        assert tool == ["Exit code: 2\nls: cannot access '/x': No such file or directory"]

"""A project's conversation after its owner deleted the project, in a real browser: the
failed answer says the project was deleted (not that she left it), in her language, and
offers no Retry, which could only fail the same way; live and after a reload alike."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD
from tests.browser.conftest import browser_pages  # noqa: F401  (the watched-pages fixture)
from tests.browser.kit import sign_in
from tests.chat.support import ALL_MODELS, API_KEY, ChatSocket, configure_models

DELETED_DE = "Dieses Projekt wurde gelöscht, daher kann dieses Gespräch nicht weitergehen."


async def test_a_deleted_projects_chat_says_so_and_offers_no_retry(skald, browser_pages):  # noqa: F811
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        host = await skald.start()
        await configure_models(await host.admin(), server)
        alice = await host.member("alice", locale="de")
        pid = (await alice.post("/api/projects", json={"slug": "gaerten", "title": "Gärten"})).json()["id"]
        conversation_id = (await alice.post(f"/api/projects/{pid}/chat")).json()["id"]
        server.responder = lambda request: Reply("Notiert.")
        async with ChatSocket(alice) as sock:
            await sock.send(conversation_id, "Zuerst die Beete?")
            await sock.turn(conversation_id)
        assert (await alice.delete(f"/api/projects/{pid}")).status_code == 200

        page = await browser_pages.new(host.url)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        await page.goto(f"{host.url}/#chat/{conversation_id}")
        await expect(page.get_by_text("Notiert.")).to_be_visible()
        await expect(page.locator(".conv-project-name")).to_have_text("ein Projekt, das du nicht mehr öffnen kannst")
        await page.get_by_role("textbox", name="Nachricht").fill("Und jetzt?")
        await page.keyboard.press("Enter")
        failed = page.locator(".msg.assistant[data-status=error]")
        await expect(failed.locator(".msg-body")).to_contain_text(DELETED_DE)
        await expect(failed.locator(".retry")).to_have_count(0)

        await page.reload()
        failed = page.locator(".msg.assistant[data-status=error]")
        await expect(failed.locator(".msg-body")).to_contain_text(DELETED_DE)
        await expect(failed.locator(".retry")).to_have_count(0)
        await expect(page.locator(".msg.assistant")).to_have_count(2)

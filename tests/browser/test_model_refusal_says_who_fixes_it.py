"""A refusal no retry ends (a wrong API key) says so, and who can fix it; the failed
answer names its entry's provider: two entries may share one model name."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .kit import sign_in

MODEL = "test-model"


async def send(page: Any, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    await box.fill(text)
    await box.press("Enter")


async def test_a_wrong_api_key_tells_the_member_to_ask_an_admin_and_names_the_provider(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-right") as office, ScriptedModelServer(models=(MODEL,)) as home:
        host = await skald.start()
        api = await host.admin()
        for name, server, key, priority in (("Office", office, "sk-wrong", 1), ("Home", home, "sk-test", 2)):
            provider = await api.post("/api/admin/models/providers", json={"name": name, "base_url": server.base_url, "api_key": key})
            assert provider.status_code == 201, provider.text
            entry = await api.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": MODEL, "priority": priority})
            assert entry.status_code == 201, entry.text
        home.script(MODEL, [Reply(text="never asked")])
        await host.create_member("alice", display_name="Alice")

        page = await browser_pages.new(host.url)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        await send(page, "Hello?")
        failed = page.locator(".msg.assistant").last
        await expect(failed).to_have_attribute("data-status", "error")
        said = ("The model refused the request (HTTP 401: Incorrect API key provided.). Retrying will not help: "
                "please ask an administrator to check this model's settings.")
        await expect(failed.locator(".msg-body")).to_have_text(said)
        await expect(failed.locator(".model")).to_have_text(f"{MODEL} · Office")
        await page.reload()
        failed = page.locator(".msg.assistant").last
        await expect(failed.locator(".msg-body")).to_have_text(said)
        await expect(failed.locator(".model")).to_have_text(f"{MODEL} · Office")

        admin = await browser_pages.new(host.url)
        await sign_in(admin, "admin", ADMIN_PASSWORD)
        await send(admin, "Hello?")
        failed = admin.locator(".msg.assistant").last
        await expect(failed.locator(".msg-body")).to_have_text(
            "The model refused the request (HTTP 401: Incorrect API key provided.). Retrying will not help: "
            "check this model and its provider's API key on the Models page.")
        await expect(failed.locator(".model")).to_have_text(f"{MODEL} · Office")

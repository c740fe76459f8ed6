"""A provider's connection test on the Models page: it starts with a clean status line
(a "Saved." from the edit before stayed under "Connected: …"), and a failed one is
said of the provider: no model is asked in a connection test."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing import ScriptedModelServer
from skald_host.testing.host import ADMIN_PASSWORD

from .kit import admin_on_models_page, sign_in


async def test_a_test_after_a_save_clears_saved(skald, browser_pages):
    async with admin_on_models_page(skald, browser_pages) as (_host, _api, page):
        provider = page.locator("[data-provider=Scripted]")
        await provider.get_by_role("button", name="Edit: Scripted").click()
        await provider.get_by_label("Name").fill("Scripted")
        await provider.get_by_role("button", name="Save").click()
        status = page.locator("[data-provider=Scripted] .provider-body > .form-status")
        await expect(status).to_have_text("Saved.")
        await page.locator("[data-provider=Scripted]").get_by_role("button", name="Test connection").click()
        await expect(page.locator("[data-provider=Scripted] .test-result")).to_contain_text("Connected: 2 models offered.")
        await expect(status).to_have_text("")


async def test_a_failed_test_names_the_provider_not_a_model(skald, browser_pages):
    async with ScriptedModelServer(models=("alpha-model",), api_key="sk-right") as server:
        host = await skald.start()
        api = await host.admin()
        for name, url in (("Wrong key", server.base_url), ("Nowhere", "http://127.0.0.1:9/v1")):
            response = await api.post("/api/admin/models/providers", json={"name": name, "base_url": url, "api_key": "sk-wrong"})
            assert response.status_code == 201, response.text
        page = await browser_pages.new(host.url)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        await page.goto("/#models")
        wrong = page.locator("[data-provider='Wrong key']")
        await wrong.get_by_role("button", name="Test connection").click()
        await expect(wrong.locator(".test-result")).to_have_text(
            "The connection failed: The provider refused the request (HTTP 401: Incorrect API key provided.).")
        nowhere = page.locator("[data-provider=Nowhere]")
        await nowhere.get_by_role("button", name="Test connection").click()
        result = nowhere.locator(".test-result")
        # What was wrong, where, as the headline; aiohttp's own words ("Cannot connect to
        # host 127.0.0.1:9 ssl:default [...]") were it, and are now a detail to unfold.
        headline = result.locator(":scope > span")
        await expect(headline).to_have_text(
            "The connection failed: Nothing accepted the connection at 127.0.0.1 on port 9 (it was refused)."
            " Are the address and its port right (http:// or https://), and is the provider running?")
        await expect(headline).not_to_contain_text("ssl:default")
        # The fold is right after the live region, not in it: "Technical detail" was read
        # out as part of the message. Its summary names the provider.
        await expect(result).not_to_contain_text("Technical detail")
        fold = nowhere.locator(".test-result + details.test-detail")
        detail = fold.get_by_text("What the connection said: Cannot connect to host 127.0.0.1:9", exact=False)
        await expect(detail).to_be_hidden()
        await fold.get_by_text("Technical detail: Nowhere", exact=True).click()
        await expect(detail).to_be_visible()
        # Tested again, the last failure's fold goes with its result: one, not two.
        await nowhere.get_by_role("button", name="Test connection").click()
        await expect(nowhere.locator("details.test-detail")).to_have_count(1)
        await expect(result).not_to_contain_text("model")

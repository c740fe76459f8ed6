"""Issue 17.6 in a real browser: the account page's privacy section lists, for the
member signed in, the providers (and models) that receive their conversations and the
plugins that can act for them, and says what the admin can and cannot read. Two
members with different grants, one of them in German."""

from __future__ import annotations

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD

from .kit import PagePlugin, screenshot, sign_in


async def add_provider(admin, name: str, base_url: str, model: str) -> None:
    provider = await admin.post("/api/admin/models/providers", json={"name": name, "base_url": base_url})
    assert provider.status_code == 201, provider.text
    created = await admin.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": model})
    assert created.status_code == 201, created.text


async def test_each_member_sees_who_receives_their_conversations(skald, browser_pages):
    host = await skald.start(plugins=[PagePlugin("helper", title="Helper tools")], enable=["helper"])
    admin = await host.admin()
    await add_provider(admin, "Home box", "http://10.0.0.5:8000/v1", "llama-local")
    await host.create_member("alice")  # created after the enable: granted by default
    await host.create_member("kid", role="restricted", locale="de")  # the restricted role: no auto grant

    page = await browser_pages.new(host.url)
    await sign_in(page, "alice", MEMBER_PASSWORD)
    await page.goto("/#account")
    privacy = page.get_by_test_id("privacy")
    await expect(page.get_by_role("heading", name="Privacy: who can read what")).to_be_visible()
    models = privacy.locator("div.stack", has=page.get_by_role("heading", name="Where your conversations go"))
    await expect(models.locator("li")).to_have_text(["Home box (http://10.0.0.5:8000): llama-local"])
    await expect(models).to_contain_text("if the admin points one at a server of their own, the admin can read your conversations")
    plugins = privacy.locator("div.stack", has=page.get_by_role("heading", name="Plugins that can act for you"))
    await expect(plugins.locator("li")).to_have_text(["Helper tools"])
    await expect(plugins).to_contain_text("Every plugin is code running inside the server")
    await expect(privacy.get_by_role("heading", name="What the admin cannot read")).to_be_visible()
    await expect(privacy).to_contain_text("encrypted with a key only your password opens")
    await expect(privacy).to_contain_text("they are plain files on the server's disk")
    await screenshot(page, "account-privacy")

    other = await browser_pages.new(host.url)
    await sign_in(other, "kid", MEMBER_PASSWORD)
    await other.goto("/#account")
    privacy = other.get_by_test_id("privacy")
    await expect(other.get_by_role("heading", name="Privatsphäre: wer was lesen kann")).to_be_visible()
    await expect(privacy).to_contain_text("Kein Plugin kann für dich handeln.")
    await expect(privacy).not_to_contain_text("Helper tools")
    await expect(privacy.locator("li").first).to_have_text("Home box (http://10.0.0.5:8000): llama-local")
    await expect(privacy.get_by_role("heading", name="Was der Admin lesen kann")).to_be_visible()


async def test_the_password_form_tells_a_password_manager_whose_password_it_is(skald, browser_pages):
    """Chrome: "Password forms should have (optionally hidden) username fields". The form
    carries the member's name, hidden, as autocomplete=username, before the password
    fields (as a password manager reads a sign-in form), and the name is its default
    value, so the form's reset after a change keeps it."""
    host = await skald.start()
    await host.create_member("berta", locale="de")
    page = await browser_pages.new(host.url)
    await sign_in(page, "berta", MEMBER_PASSWORD)
    await page.goto("/#account")
    form = page.locator("form", has=page.get_by_role("button", name="Passwort ändern"))
    username = form.locator("input[autocomplete=username]")
    await expect(username).to_have_value("berta")
    await expect(username).to_be_hidden()
    assert await form.evaluate("f => [f.elements[0].autocomplete, f.elements[1].autocomplete]") == ["username", "current-password"]
    await form.evaluate("f => f.reset()")
    await expect(username).to_have_value("berta")

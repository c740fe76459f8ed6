"""The member's Mobile app page in the web shell: listed for every active member (the
plugin is binding-managed), served as a module with no markup sink, and in a real
browser it shows a code with its QR code, lists paired devices and unlinks one. The app
speaks German to a German phone."""

from __future__ import annotations

import datetime as dt

import pytest
from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD
from mobile_support import BASE, PLUGIN, paired_device, pairing_code

MOUNT_PAGE = """async ([entry, pluginId]) => {
    // What the shell's plugin-page-host does: import, register, mount with plugin-id.
    const module = await import(entry);
    customElements.define(`plugin-${pluginId}-main`, module.default);
    const page = document.createElement(`plugin-${pluginId}-main`);
    page.setAttribute("plugin-id", pluginId);
    document.body.append(page);
}"""



@pytest.fixture
def browser(plugin_browser):
    """Chromium from the host's test kit (skipped where it is missing)."""
    return plugin_browser.browser


async def test_the_page_is_listed_for_any_member_and_served_without_markup_sinks(setup):
    bob = await setup.host.member("bob")
    pages = [(p["plugin_id"], p["page_id"]) for p in (await bob.get("/api/plugins/pages")).json()["pages"]]
    assert (PLUGIN, "main") in pages
    for path in (f"{BASE}/page.js", f"{BASE}/app/app.js", f"{BASE}/app/sw.js"):
        script = await bob.get(path)
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in script.text, (path, sink)
    manifest = await setup.host.client().get(f"{BASE}/app/manifest.webmanifest")
    assert manifest.status_code == 200 and manifest.json()["display"] == "standalone"


async def test_the_page_shows_a_code_and_qr_lists_devices_and_unlinks(setup, browser):
    alice = await setup.host.member("alice")
    await paired_device(setup, alice, "Old phone")
    context = await browser.new_context(base_url=setup.host.url)
    page = await context.new_page()
    page.set_default_timeout(10_000)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if "Content Security Policy" in m.text or "Refused to" in m.text else None)
    try:
        await page.goto("/")
        login = await page.evaluate(
            """async ([user, password]) => (await fetch('/api/auth/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({username: user, password: password})})).status""",
            ["alice", MEMBER_PASSWORD],
        )
        assert login == 200
        await page.goto("/api/health")
        await page.evaluate(MOUNT_PAGE, [f"{BASE}/page.js", PLUGIN])
        await page.wait_for_selector("text=Old phone")
        await page.click("text=Show a pairing code")
        code = await page.text_content(".mobile-code")
        qr = page.locator("img.mobile-qr")
        await qr.wait_for()
        assert await qr.evaluate("(img) => img.complete && img.naturalWidth > 0")  # drawn, and allowed by the CSP
        phone = setup.host.client()
        paired = await phone.post(f"{BASE}/pair", json={"code": code, "name": "New phone", "platform": "ios"})
        assert paired.status_code == 201
        # The page sees the phone that used its code by itself, and the spent code goes.
        await page.wait_for_selector("text=Paired: New phone.")
        await page.wait_for_selector("li.mobile-device >> text=New phone")
        assert await page.locator(".mobile-code").count() == 0
        await page.click("li:has-text('Old phone') >> text=Unlink")
        await page.get_by_role("dialog").get_by_role("button", name="Unlink", exact=True).click()
        await page.wait_for_selector("text=Old phone", state="detached")
        names = [d["name"] for d in (await alice.get(f"{BASE}/devices")).json()["devices"]]
        assert names == ["New phone"]
    finally:
        await context.close()
    assert problems == []


async def test_the_app_speaks_german_to_a_german_phone(setup, browser):
    context = await browser.new_context(base_url=setup.host.url, locale="de-DE", viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = await context.new_page()
    try:
        await page.goto(f"{BASE}/app/")
        await page.wait_for_selector("text=Dieses Handy koppeln")
        await page.fill("input[name=code]", "0000-0000")
        await page.tap("button[type=submit]")
        await page.wait_for_selector("text=Der Code stimmt nicht")
    finally:
        await context.close()


async def test_the_app_s_back_button_is_named_in_the_app_s_language(setup, browser):
    """"‹" alone is read as nothing (or "single left angle quote") by a screen reader."""
    alice = await setup.host.member("alice")
    # A German member: paired, the app speaks the account's language (the phone's only before).
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    context = await browser.new_context(base_url=setup.host.url, locale="de-DE", viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = await context.new_page()
    page.set_default_timeout(10_000)
    try:
        await page.goto(f"{BASE}/app/")
        await page.fill("input[name=code]", await pairing_code(alice))
        await page.tap("button[type=submit]")
        await page.get_by_role("button", name="Einstellungen").tap()
        await page.get_by_role("button", name="Zurück").tap()
        await page.get_by_role("button", name="Einstellungen").wait_for()
    finally:
        await context.close()


async def test_the_page_says_when_a_device_was_last_seen_in_the_member_s_language(setup, plugin_browser):
    """Not the browser's format: a German page read "12/4/2026, 11:26:26 PM"."""
    alice = await setup.host.member("alice")
    await paired_device(setup, alice, "Old phone")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    last_seen = (await alice.get(f"{BASE}/devices")).json()["devices"][0]["last_seen_at"]
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, PLUGIN, "main", locale="en-US", timezone_id="UTC")
    device = page.locator("li.mobile-device").filter(has_text="Old phone")
    await device.wait_for(timeout=10_000)
    seen = dt.datetime.fromisoformat(last_seen)  # UTC, as the browser is told
    # As the shell writes a time ("6.12.2026, 16:19:14"), not "06.12.2026, 16:15"; the
    # phone's kind in words (paired_device says "android"), not its code.
    german = f"{seen.day}.{seen.month}.{seen.year}, {seen:%H:%M:%S}"
    assert f"Old phone Android · zuletzt gesehen {german}" in await device.text_content()


async def test_a_device_kind_is_worded_not_shown_as_its_code(setup, plugin_browser):
    """The page read "Handy web · zuletzt gesehen …": the app's platform code as sent."""
    alice = await setup.host.member("alice")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    for name, platform in (("Laptop", "web"), ("Tablet", "ios"), ("Odd", "symbian")):
        code = (await alice.post(f"{BASE}/pairing")).json()["code"]
        paired = await setup.host.client().post(f"{BASE}/pair", json={"code": code, "name": name, "platform": platform})
        assert paired.status_code == 201, paired.text
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, PLUGIN, "main", locale="en-US", timezone_id="UTC")
    rows = page.locator("li.mobile-device")
    await rows.filter(has_text="Odd").wait_for(timeout=10_000)
    said = {name: await rows.filter(has_text=name).text_content() for name in ("Laptop", "Tablet", "Odd")}
    assert said["Laptop"].startswith("Laptop Browser · zuletzt gesehen "), said
    assert said["Tablet"].startswith("Tablet iPhone oder iPad · zuletzt gesehen "), said
    assert said["Odd"].startswith("Odd zuletzt gesehen ") and "symbian" not in said["Odd"], said


async def test_unlink_asks_first_and_each_button_names_its_device_in_the_member_s_language(setup, plugin_browser):
    """One click unlinked a phone, and every button was read out as the same "Unlink"."""
    alice = await setup.host.member("alice")
    await paired_device(setup, alice, "Old phone")
    await paired_device(setup, alice, "New phone")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, PLUGIN, "main", locale="de-DE")
    page.set_default_timeout(10_000)
    unlink_old = page.get_by_role("button", name="Old phone entkoppeln", exact=True)
    await expect(page.get_by_role("button", name="New phone entkoppeln", exact=True)).to_be_visible()
    await unlink_old.click()
    dialog = page.get_by_role("dialog", name="Old phone entkoppeln?", exact=True)
    await expect(dialog).to_be_visible()
    await page.keyboard.press("Escape")  # cancels: nothing unlinked, the focus back where it was
    await expect(dialog).to_be_hidden()
    await expect(unlink_old).to_be_focused()

    async def names() -> list[str]:
        return sorted(d["name"] for d in (await alice.get(f"{BASE}/devices")).json()["devices"])

    assert await names() == ["New phone", "Old phone"]
    await unlink_old.click()
    await dialog.get_by_role("button", name="Entkoppeln", exact=True).click()
    await expect(unlink_old).to_have_count(0)
    assert await names() == ["New phone"]

"""The Connectors page as a German admin uses it, keyboard and phone included: a header
or environment line without its separator is refused in the form, naming it; refusals
come in German beside the form they belong to and take the focus; a failed connector
says why in a sentence; the focus stays on its control after every action; removing
asks in an in-page dialog, never the browser's own."""

from __future__ import annotations

import socket
import sys
from typing import Any

from mcp_support import BASE, DEMO, Setup
from skald_host.testing.host import ADMIN_PASSWORD
from skald_mcp.strings import STRINGS

TAG = "skald-p-mcp-connectors"
DE = STRINGS["de"]
FOCUSED = "() => { const a = document.activeElement; return a ? a.dataset.focus || a.className || a.tagName : null; }"


async def german_admin_page(setup: Setup, plugin_browser: Any, **context: Any) -> tuple[Any, list[str]]:
    """The page mounted for the admin, whose language is German; the list collects any
    native dialog (confirm, alert) the page opened."""
    assert (await setup.admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    page = await plugin_browser.new_page(**context)
    natives: list[str] = []

    async def native(dialog: Any) -> None:
        natives.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", native)
    await plugin_browser.sign_in(page, setup.host, setup.host.admin_username, ADMIN_PASSWORD)
    await plugin_browser.mount(page, "mcp", "connectors")
    await page.locator(f"{TAG} form.mcp-add input[name=name]").wait_for(timeout=10_000)
    return page, natives


async def test_a_header_or_env_line_without_its_separator_is_refused_in_the_form(setup: Setup, plugin_browser):
    page, _ = await german_admin_page(setup, plugin_browser)
    sent: list[str] = []
    page.on("request", lambda request: sent.append(request.url) if request.method == "POST" else None)
    form = page.locator(f"{TAG} form.mcp-add")
    await form.locator("input[name=name]").fill("probe")
    await form.locator("select[name=transport]").select_option("http")
    await form.locator("input[name=url]").fill("https://example.org/mcp")
    await form.locator("textarea[name=headers]").fill("X-Ok: 1\nAuthorization Bearer geheim")
    await form.locator("button[type=submit]").click()
    status = form.locator(".mcp-status")
    await status.filter(has_text="Header-Zeile 2 („Authorization“)").wait_for(timeout=5_000)
    assert "geheim" not in await status.inner_text()  # named by its name, not echoed
    assert await page.evaluate(FOCUSED) == "add:headers"
    assert await form.locator("textarea[name=headers]").get_attribute("aria-invalid") == "true"

    await form.locator("select[name=transport]").select_option("stdio")
    await form.locator("input[name=command]").fill(sys.executable)
    await form.locator("textarea[name=env]").fill("TOKEN geheim")
    await form.locator("button[type=submit]").click()
    await status.filter(has_text="Umgebungszeile 1 („TOKEN“)").wait_for(timeout=5_000)
    assert await page.evaluate(FOCUSED) == "add:env"
    assert not [url for url in sent if url.endswith(f"{BASE}/servers")]
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"] == []


async def test_refusals_are_german_beside_their_form_on_a_phone_and_take_the_focus(setup: Setup, plugin_browser):
    """A form at the bottom of a long page: its status is next to it and in view."""
    page, _ = await german_admin_page(setup, plugin_browser, viewport={"width": 390, "height": 700})
    add = page.locator(f"{TAG} form.mcp-add")
    await add.locator("input[name=name]").fill("Demo")
    await add.locator("input[name=command]").fill("x")
    await add.locator("input[name=name]").press("Enter")
    await add.locator(".mcp-status").filter(has_text=DE["err_name_invalid"]).wait_for(timeout=10_000)
    assert await page.evaluate(FOCUSED) == "add:name"  # the field at fault

    providers = page.locator(f"{TAG} section.mcp-admin-providers form")
    status = providers.locator(".mcp-status")
    await providers.locator("input[name=name]").fill("idp")
    await providers.locator("textarea[name=body]").fill('{"foo":1')
    await providers.locator("button[type=submit]").click()
    await status.filter(has_text=DE["invalid_json"]).wait_for(timeout=5_000)
    assert await page.evaluate(FOCUSED) == "providers:body"
    await providers.locator("textarea[name=body]").fill('{"foo":1}')
    await providers.locator("button[type=submit]").click()
    await status.filter(has_text="unbekannte Felder: foo").wait_for(timeout=10_000)
    assert await status.evaluate("(e) => document.activeElement === e && e.getAttribute('role') === 'status'")
    assert await status.evaluate("(e) => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }")
    assert await page.locator(f"{TAG} .mcp-message").inner_text() == ""  # not at the page's top


async def test_a_failed_connector_says_why_in_german_with_the_detail_folded(setup: Setup, plugin_browser):
    body = {"name": "missing", "transport": "stdio", "command": "/nonexistent/bin", "access": []}
    assert (await setup.admin.post(f"{BASE}/servers", json=body)).status_code == 201
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    body = {"name": "closed", "transport": "http", "url": f"http://127.0.0.1:{port}/mcp", "access": []}
    assert (await setup.admin.post(f"{BASE}/servers", json=body)).status_code == 201
    page, _ = await german_admin_page(setup, plugin_browser)
    missing = page.locator(f"{TAG} tr.mcp-server[data-name=missing] .mcp-error")
    assert await missing.locator(".mcp-cause").inner_text() == DE["cause_command_not_found"]
    detail = missing.locator("details")
    assert not await detail.locator("code").is_visible()  # folded until asked for
    await detail.locator("summary").click()
    assert "FileNotFoundError" in await detail.locator("code").inner_text()
    closed = page.locator(f"{TAG} tr.mcp-server[data-name=closed] .mcp-error .mcp-cause")
    assert await closed.inner_text() == DE["cause_connection_failed"]


async def test_the_focus_stays_on_its_control_after_each_action(setup: Setup, plugin_browser):
    page, _ = await german_admin_page(setup, plugin_browser)
    form = page.locator(f"{TAG} form.mcp-add")
    await form.locator("input[name=name]").fill("demo")
    await form.locator("input[name=command]").fill(sys.executable)
    await form.locator("textarea[name=args]").fill(DEMO)
    await form.locator("input[name=name]").press("Enter")
    await page.locator(f"{TAG} tr.mcp-server[data-name=demo]").filter(has_text="demo__echo").wait_for(timeout=20_000)
    await page.wait_for_function(f"() => ({FOCUSED})() === 'add:name'", timeout=5_000)

    restart = page.locator(f"{TAG} tr.mcp-server[data-name=demo]").get_by_role("button", name=DE["restart"])
    await restart.evaluate("(button) => { button.dataset.before = 'yes'; }")  # the one of the old drawing
    await restart.focus()
    await restart.press("Enter")
    await page.wait_for_function(
        "() => { const a = document.activeElement; return a.dataset.focus === 'restart:demo' && !a.dataset.before && a.isConnected; }", timeout=20_000
    )


async def test_removing_asks_in_an_in_page_dialog_that_escape_closes(setup: Setup, plugin_browser):
    await setup.add_stdio(access=[])
    page, natives = await german_admin_page(setup, plugin_browser)
    remove = page.locator(f"{TAG} tr.mcp-server[data-name=demo]").get_by_role("button", name=DE["remove"])
    await remove.focus()
    await remove.press("Enter")
    dialog = page.locator("dialog.confirm[open]")  # the page kit's (the shell's) dialog
    await dialog.wait_for(timeout=5_000)
    assert await dialog.locator("h2").inner_text() == DE["confirm_remove_title"]
    assert DE["confirm_remove"].format(name="demo") in await dialog.inner_text()
    assert await page.evaluate(FOCUSED) != "remove:demo"  # inside the dialog
    await page.keyboard.press("Escape")
    await dialog.wait_for(state="detached", timeout=5_000)
    assert await page.evaluate(FOCUSED) == "remove:demo"
    assert [s["name"] for s in (await setup.admin.get(f"{BASE}/servers")).json()["servers"]] == ["demo"]

    await remove.press("Enter")
    await dialog.get_by_role("button", name=DE["remove"]).click()
    await page.locator(f"{TAG} tr.mcp-server[data-name=demo]").wait_for(state="detached", timeout=10_000)
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"] == []
    await page.wait_for_function(f"() => ({FOCUSED})() === 'heading:mcp-admin'", timeout=5_000)
    assert natives == []


async def test_a_members_remote_header_line_without_its_colon_is_refused_in_the_form(setup: Setup, plugin_browser):
    from skald_host.testing.host import MEMBER_PASSWORD
    from test_member_connectors import grant_remote

    await grant_remote(setup)
    alice = await setup.host.member("alice")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
    form = page.locator(f"{TAG} form.mcp-remote")
    await form.locator("input[name=name]").fill("probe")
    await form.locator("input[name=url]").fill("https://example.org/mcp")
    await form.locator("textarea[name=headers]").fill("X-Probe wert")
    await form.locator("input[name=name]").press("Enter")
    await form.locator(".mcp-status").filter(has_text="Header-Zeile 1 („X-Probe“)").wait_for(timeout=5_000)
    assert await page.evaluate(FOCUSED) == "remote:headers"
    assert (await alice.get(f"{BASE}/my/connectors")).json()["connectors"] == []


FORM_NAMES = """() => [...document.querySelector("skald-p-mcp-connectors").querySelectorAll("form")].map((form) => {
  const by = form.getAttribute("aria-labelledby");
  return form.getAttribute("aria-label") || (by && document.getElementById(by)?.textContent) || "";
})"""


async def test_each_form_on_the_admins_page_is_named_after_what_it_adds(setup: Setup, plugin_browser):
    """Four "Name" boxes, two "Add connector" and two "Save" buttons on one page: a
    screen reader's list of forms told them apart by nothing (admin keyboard walk)."""
    page, _ = await german_admin_page(setup, plugin_browser)
    await page.locator(f"{TAG} form.mcp-remote").wait_for(timeout=10_000)
    names = await page.evaluate(FORM_NAMES)
    assert len(names) >= 4 and all(names) and len(set(names)) == len(names), names
    assert await page.get_by_role("form", name=DE["add_title"]).locator("input[name=name]").count() == 1
    assert await page.get_by_role("form", name=DE["remote_title"]).locator("input[name=url]").count() == 1


async def test_a_wrong_address_is_refused_by_skalds_field_error_not_the_browsers_bubble(setup: Setup, plugin_browser):
    """The forms are noValidate, as the shell's: "not an address" in a type=url box is
    sent and refused by the server in German, on the field (aria-invalid, described by
    the form's line, the focus on it), not stopped by the browser's own English bubble
    ("Please enter a URL."), which a screen reader does not hear in time."""
    page, natives = await german_admin_page(setup, plugin_browser)
    form = page.locator(f"{TAG} form.mcp-add")
    await form.locator("input[name=name]").fill("probe")
    await form.locator("select[name=transport]").select_option("http")
    url = form.locator("input[name=url]")
    await url.fill("kein Link")
    await url.press("Enter")
    status = form.locator(".mcp-status")
    await status.filter(has_text="http://- oder https://-Adresse").wait_for(timeout=5_000)
    assert await page.evaluate(FOCUSED) == "add:url"
    assert await url.get_attribute("aria-invalid") == "true"
    assert await status.get_attribute("id") in (await url.get_attribute("aria-describedby") or "").split()
    assert natives == []
    # Put right, the mark goes with the next try's refusal of another field.
    await url.fill("https://example.org/mcp")
    await form.locator("textarea[name=headers]").fill("kaputt")
    await form.locator("button[type=submit]").click()
    await status.filter(has_text="Header-Zeile 1").wait_for(timeout=5_000)
    assert await url.get_attribute("aria-invalid") is None
    assert await url.get_attribute("aria-describedby") is None
    for template in await page.locator(f"{TAG} form").all():
        assert await template.evaluate("(form) => form.noValidate")

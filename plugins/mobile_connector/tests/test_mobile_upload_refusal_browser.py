"""The phone app says a file is too large in the reader's words, with the server's limit
(``upload_too_large``, contract 1.10), not the server's English sentence."""

from __future__ import annotations

import contextlib
import json

import pytest

from mobile_support import BASE, pairing_code

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def browser(plugin_browser):
    """Chromium from the host's test kit (skipped where it is missing)."""
    return plugin_browser.browser


@contextlib.asynccontextmanager
async def _app_in_a_new_chat(host, browser, member, locale: str):
    """The app in a phone's browser set to ``locale``, paired to ``member`` by the form
    (a device name given) and open on a conversation it made over the API: the page,
    its context closed after the block. Each refusal here is read off such a chat."""
    context = await browser.new_context(base_url=host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale=locale)
    page = await context.new_page()
    page.set_default_timeout(10_000)
    try:
        await page.goto(f"{BASE}/app/")
        await page.fill("input[name=code]", await pairing_code(member))
        await page.fill("input[name=name]", "Test phone")
        await page.tap("button[type=submit]")
        for _ in range(100):  # paired once the app holds its token
            if await page.evaluate("() => localStorage.getItem('skald.mobile.token')"):
                break
            await page.wait_for_timeout(50)
        created = await page.evaluate(
            """async (base) => (await (await fetch(`${base}/conversations`, {method: "POST",
                 headers: {Authorization: `Bearer ${localStorage.getItem("skald.mobile.token")}`}})).json()).id""",
            BASE,
        )
        await page.goto(f"{BASE}/app/#chat/{created}")
        await page.wait_for_selector("textarea[name=text]")
        yield page
    finally:
        await context.close()


@pytest.mark.parametrize(("locale", "said"), [("en-US", "big.bin is larger than the upload limit of 256 MiB."),
                                              ("de-DE", "big.bin ist größer als die Upload-Grenze von 256 MiB.")])
async def test_a_file_over_the_upload_limit_is_refused_with_the_limit_in_words(setup, browser, tmp_path, locale, said):
    alice = await setup.host.member("alice", display_name="Alice")
    # The reader's language is the account's once paired (the phone's before).
    assert (await alice.put("/api/me/locale", json={"locale": locale[:2]})).status_code == 200
    limit = setup.host.core.settings.files.upload_max_bytes
    refusal = {"error": f"the file is larger than the upload limit of {limit} bytes (256 MiB)", "code": "upload_too_large",
               "values": {"limit": limit, "size": "256 MiB"}}
    async with _app_in_a_new_chat(setup.host, browser, alice, locale) as page:
        # The server's answer to a file past the limit (sending 256 MiB is not the point here).
        await page.route("**/uploads?*", lambda route: route.fulfill(status=413, content_type="application/json", body=json.dumps(refusal)))
        big = tmp_path / "big.bin"
        big.write_bytes(b"x" * 1024)
        await page.set_input_files("input[type=file]", str(big))
        toast = await page.wait_for_selector(".toast")
        assert await toast.text_content() == said


@pytest.fixture
async def full_home(skald):
    """A host whose members' homes hold 1 MiB (``sandbox.home_quota_mib``)."""
    from mobile_support import mobile_host

    async with mobile_host(skald, settings=skald.settings(sandbox={"home_quota_mib": 1})) as started:
        yield started


async def test_a_file_the_home_cannot_hold_is_refused_with_its_code_and_the_room_left(full_home):
    """The host's refusal kept its kind and size (contract 1.15) instead of reaching the
    phone as ``bad_request`` with the host's English and a raw byte count."""
    from mobile_support import paired_device

    alice = await full_home.host.member("alice", display_name="Alice")
    phone = await paired_device(full_home, alice)
    created = (await phone.post(f"{BASE}/conversations")).json()["id"]
    response = await phone.post(f"{BASE}/uploads?name=big.bin&conversation_id={created}", content=b"x" * (2 * 1024 * 1024),
                                headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 413, response.text
    body = response.json()
    assert body["code"] == "home_full" and isinstance(body["values"]["left"], int) and 0 <= body["values"]["left"] <= 1024 * 1024, body


@pytest.mark.parametrize(("locale", "said"), [("en-US", r"big\.bin does not fit: your home has only [\d,.]+ (B|KiB|MiB) left under its disk limit\."),
                                              ("de-DE", r"big\.bin passt nicht mehr: In deinem Home-Ordner ist unter seiner Speichergrenze nur noch [\d,.]+ (B|KiB|MiB) frei\.")])
async def test_a_file_the_home_cannot_hold_is_said_in_the_readers_words(full_home, browser, tmp_path, locale, said):
    """sandbox.home_quota_mib 1 and a 2 MB file: the toast read "Etwas ist schiefgegangen:
    the file does not fit: your home has 1032192 bytes left under its disk limit"."""
    import re

    alice = await full_home.host.member("alice", display_name="Alice")
    # The reader's language is the account's once paired (the phone's before).
    assert (await alice.put("/api/me/locale", json={"locale": locale[:2]})).status_code == 200
    async with _app_in_a_new_chat(full_home.host, browser, alice, locale) as page:
        big = tmp_path / "big.bin"
        big.write_bytes(b"x" * (2 * 1024 * 1024))
        await page.set_input_files("input[type=file]", str(big))
        toast = await page.wait_for_selector(".toast")
        shown = await toast.text_content()
        assert re.fullmatch(said, shown), shown
        assert "bytes" not in shown and not re.search(r"\d{5}", shown), shown

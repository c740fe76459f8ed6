"""The phone app says a file is too large in the reader's words, with the server's limit
(``upload_too_large``, contract 1.10), not the server's English sentence."""

from __future__ import annotations

import json

import pytest

from mobile_support import BASE, pairing_code

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def browser(plugin_browser):
    """Chromium from the host's test kit (skipped where it is missing)."""
    return plugin_browser.browser


@pytest.mark.parametrize(("locale", "said"), [("en-US", "big.bin is larger than the upload limit of 256 MiB."),
                                              ("de-DE", "big.bin ist größer als die Upload-Grenze von 256 MiB.")])
async def test_a_file_over_the_upload_limit_is_refused_with_the_limit_in_words(setup, browser, tmp_path, locale, said):
    alice = await setup.host.member("alice", display_name="Alice")
    context = await browser.new_context(base_url=setup.host.url, viewport=PHONE, is_mobile=True, has_touch=True, locale=locale)
    page = await context.new_page()
    page.set_default_timeout(10_000)
    limit = setup.host.core.settings.files.upload_max_bytes
    refusal = {"error": f"the file is larger than the upload limit of {limit} bytes (256 MiB)", "code": "upload_too_large",
               "values": {"limit": limit, "size": "256 MiB"}}
    try:
        await page.goto(f"{BASE}/app/")
        await page.fill("input[name=code]", await pairing_code(alice))
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
        # The server's answer to a file past the limit (sending 256 MiB is not the point here).
        await page.route("**/uploads?*", lambda route: route.fulfill(status=413, content_type="application/json", body=json.dumps(refusal)))
        big = tmp_path / "big.bin"
        big.write_bytes(b"x" * 1024)
        await page.set_input_files("input[type=file]", str(big))
        toast = await page.wait_for_selector(".toast")
        assert await toast.text_content() == said
    finally:
        await context.close()

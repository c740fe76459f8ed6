"""What a channels probe found as a German member on the phone app: a formula read twice
("x² x2": the app lacked KaTeX's stylesheet, which hides the MathML copy from sight),
the header kept "Neuer Chat" after the first message titled the conversation, and an
empty upload was stored (201, labelled text/plain) instead of refused."""

from __future__ import annotations

import pytest

from skald_host.core.files.sniff import sniff
from skald_host.testing import Reply
from mobile_support import BASE, MODEL, paired_device
from test_mobile_app_browser import _app


@pytest.fixture
def browser(plugin_browser):
    return plugin_browser.browser


async def test_a_formula_shows_once_and_the_header_takes_the_title_the_first_message_gave(setup, browser):
    bea = await setup.host.member("bea", display_name="Bea")
    async with _app(setup, browser, bea, german=True) as (_, page):
        setup.model.script(MODEL, [Reply("Das Quadrat: $x^2$ ist es.\n\n```python\ndef f(x):\n    return 'a'\n```")])
        await page.tap("text=Neuer Chat")
        await page.wait_for_selector("textarea[name=text]")
        assert await page.inner_text("#title") == "Neuer Chat"
        await page.fill("textarea[name=text]", "Was ist das Quadrat von x")
        await page.tap("button:has-text('Senden')")
        answer = page.locator(".message.assistant:not(.streaming)", has_text="Das Quadrat")
        await answer.wait_for()
        await page.wait_for_selector(".message.assistant .katex-html")  # typeset once KaTeX arrived

        # The formula once in what the eye sees: KaTeX's HTML laid out, its MathML copy
        # still there for screen readers but out of sight (a 1 px clipped box). Without
        # KaTeX's stylesheet both showed, side by side: "x² x2".
        boxes = await answer.evaluate(
            """(node) => ['.katex-html', '.katex-mathml'].map((part) => {
                 const box = node.querySelector(part).getBoundingClientRect();
                 return [Math.round(box.width), Math.round(box.height)];
               })"""
        )
        (html_width, html_height), (mathml_width, mathml_height) = boxes
        assert html_width > 4 and html_height > 4, boxes
        assert mathml_width <= 1 and mathml_height <= 1, boxes
        assert await answer.locator(".katex-mathml").count() == 1
        # Code coloured as on the web: a keyword's colour is not the text's.
        keyword = page.locator(".message.assistant .hljs-keyword").first
        colours = await keyword.evaluate("(n) => [getComputedStyle(n).color, getComputedStyle(n.closest('.message')).color]")
        assert colours[0] != colours[1]

        # The first message titled the conversation: the header says so without a reload.
        conversation = await page.evaluate("decodeURIComponent(location.hash.slice(6))")
        titled = (await bea.get(f"{BASE}/conversations/{conversation}")).json()["conversation"]["title"]
        assert titled and titled != "Neuer Chat"
        await page.wait_for_function("(title) => document.getElementById('title').textContent === title", arg=titled)

        # Renamed on the web while the chat is open: the header follows the event.
        renamed = await bea.patch(f"/api/conversations/{conversation}", json={"title": "Quadrate"})
        assert renamed.status_code == 200, renamed.text
        await page.wait_for_function("() => document.getElementById('title').textContent === 'Quadrate'")


async def test_an_empty_upload_is_refused_in_the_members_language(setup):
    bea = await setup.host.member("bea", display_name="Bea")
    assert (await bea.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    phone = await paired_device(setup, bea)
    conversation = (await phone.post(f"{BASE}/conversations")).json()["id"]
    headers = {"Content-Type": "application/octet-stream"}
    empty = await phone.post(f"{BASE}/uploads?name=x.bin&conversation_id={conversation}", content=b"", headers=headers)
    assert empty.status_code == 400, empty.text
    assert empty.json()["code"] == "upload_empty"
    assert "Die Datei ist leer" in empty.json()["error"]
    uploads = setup.host.core.files.home(bea.member["id"]) / "uploads" / conversation
    assert not uploads.exists() or not [p for p in uploads.iterdir()]

    # A file with something in it still goes; a binary one is not called text.
    binary = await phone.post(f"{BASE}/uploads?name=x.bin&conversation_id={conversation}", content=b"\x00\x01\x02", headers=headers)
    assert binary.status_code == 201, binary.text
    assert binary.json()["mime"] == "application/octet-stream"
    # Nothing in a file says it is text (an empty one reached the host from elsewhere).
    assert sniff(b"", complete=True) == "application/octet-stream"


async def test_the_app_says_an_empty_file_was_refused_by_its_name(setup, browser, tmp_path):
    bea = await setup.host.member("bea", display_name="Bea")
    async with _app(setup, browser, bea, german=True) as (_, page):
        setup.model.script(MODEL, [Reply("Hallo.")])
        await page.tap("text=Neuer Chat")
        await page.fill("textarea[name=text]", "Hallo")
        await page.tap("button:has-text('Senden')")
        await page.wait_for_selector(".message.assistant >> text=Hallo.")
        empty = tmp_path / "leer.bin"
        empty.write_bytes(b"")
        await page.set_input_files("input[type=file]", str(empty))
        await page.wait_for_selector(".toast >> text=leer.bin ist leer: Es gibt nichts darin zu senden.")
        assert await page.locator("ul.attached li").count() == 0

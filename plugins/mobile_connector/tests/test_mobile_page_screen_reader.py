"""The Mobile app page as a screen reader meets it: the pairing code that appears after
"Show a pairing code" is announced (focus stays on the button, so only a live region
says it), and the QR code is named by what it is, in the reader's language, not by the
pairing address read out character by character."""

from __future__ import annotations

import re

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD
from mobile_support import PLUGIN


async def test_the_pairing_code_is_announced_and_the_qr_code_named_in_german(setup, plugin_browser):
    alice = await setup.host.member("alice")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, PLUGIN, "main", locale="de-DE")
    page.set_default_timeout(10_000)
    live = page.locator(".mobile-pairing")
    await expect(live).to_have_attribute("aria-live", "polite")  # there before the code, as a live region must be
    await page.get_by_role("button", name="Kopplungscode zeigen").click()
    code = page.locator(".mobile-pairing .mobile-code")
    await expect(code).to_have_text(re.compile(r"^[A-Z0-9]{4}(-[A-Z0-9]{4})+$"))
    qr = live.get_by_role("img", name="QR-Code zum Koppeln eines Handys", exact=True)
    await expect(qr).to_be_visible()
    assert "/" not in (await qr.get_attribute("alt") or "")
    # The address itself stays reachable as the link it was.
    assert (await live.get_by_role("link", name="App auf diesem Handy öffnen").get_attribute("href") or "").startswith("http")

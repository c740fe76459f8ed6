"""A newcomer ran the README's ``make run`` (127.0.0.1), showed a pairing code and
scanned it: the phone got nothing, and the page had not said why. A code that points at
an address of the server's own computer only says so beside it, with what to set; the
READMEs say that the default address is not reachable from a phone."""

from __future__ import annotations

from pathlib import Path

import pytest

from skald_mobile_connector.routes import is_loopback_url
from skald_mobile_connector.strings import PAGE_KEYS, STRINGS
from mobile_support import BASE

PLUGIN_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8080/", True),
        ("http://127.3.4.5/", True),
        ("http://[::1]:8080", True),
        ("http://localhost:8080", True),
        ("http://skald.localhost", True),
        ("https://skald.example.org", False),
        ("http://192.168.1.20:8080", False),
        ("http://[2001:db8::1]/", False),
    ],
)
def test_loopback_addresses_are_told_apart(url, loopback):
    assert is_loopback_url(url) is loopback


async def test_a_code_pointing_at_this_computer_only_is_marked_and_the_page_words_it(setup):
    alice = await setup.host.member("alice")
    pairing = (await alice.post(f"{BASE}/pairing")).json()
    assert pairing["app_url"].startswith(("http://127.", "http://localhost", "http://[::1]"))  # the test host's own address
    assert pairing["loopback"] is True
    await setup.configure(public_url="https://skald.example.org", allow_http_push=True)
    elsewhere = (await alice.post(f"{BASE}/pairing")).json()
    assert elsewhere["app_url"].startswith("https://skald.example.org/") and elsewhere["loopback"] is False
    page = (await alice.get(f"{BASE}/page.js")).text
    assert "pairing.loopback" in page and "page_loopback" in page
    assert "page_loopback" in PAGE_KEYS
    for locale in ("en", "de"):
        assert "{address}" in STRINGS[locale]["page_loopback"]
    assert "Public address" in STRINGS["en"]["page_loopback"] and "Öffentliche Adresse" in STRINGS["de"]["page_loopback"]
    # The app is the web app the code opens, not one to install from a store.
    assert "web app" in STRINGS["en"]["page_intro"] and "Web-App" in STRINGS["de"]["page_intro"]


def test_the_readmes_say_the_default_address_is_not_reachable_from_a_phone():
    install = (PLUGIN_DIR / "README.md").read_text(encoding="utf-8").split("## Install", 1)[1]
    said = " ".join(install.split())
    assert "`make run` serves on `127.0.0.1`" in said and "cannot be opened on a phone" in said
    main = (PLUGIN_DIR.parents[1] / "README.md").read_text(encoding="utf-8").split("### The mobile app", 1)[1].split("\n### ", 1)[0]
    said = " ".join(main.split())
    assert "`make run` listens on 127.0.0.1 only, which no phone can reach" in said

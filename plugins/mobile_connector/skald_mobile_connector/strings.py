"""Every string the page, the app and the API show: one flat JSON file per language in
``locales/`` (``en.json``, ``de.json``), which translators edit with ordinary tools;
adding a language is adding a file there. Keys become ``mobile-connector.<key>`` in the
host's merged table; a key a language lacks falls back to English. Values use
``str.format`` fields."""

from __future__ import annotations

from importlib.resources import files
from typing import Mapping

from skald_hookspecs import I18nBundle

STRINGS: Mapping[str, Mapping[str, str]] = I18nBundle.from_folder("mobile-connector", files(__package__) / "locales").strings

PAGE_KEYS = (
    "page_title", "page_intro", "page_new_code", "page_code_help", "page_loopback", "page_qr_alt", "page_open_app", "page_devices", "page_no_devices",
    "page_unlink", "page_unlink_device", "page_unlink_title", "page_unlink_message", "page_last_seen", "page_paired",
    "page_code_expired", "page_new_code_again",
    "page_platform_web", "page_platform_ios", "page_platform_android",
)
APP_KEYS = tuple(
    key for key in STRINGS["en"] if not key.startswith(("plugin.", "page.", "page_", "err_"))
) + ("err_code", "err_expired", "err_too_many")

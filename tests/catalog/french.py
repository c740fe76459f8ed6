"""A test plugin that adds a third language by files alone: its own strings in
``french_locales/<locale>.json`` and French for the host's core domain in
``french_locales/core/fr.json`` (a handful of keys; the rest falls back to English)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet, I18nBundle, WebPage

from .support import Routed

LOCALES = Path(__file__).with_name("french_locales")


class Greeter(Routed):
    def __init__(self) -> None:
        super().__init__(
            "greeter",
            config_schema=(ConfigField("greeting", label="Greeting", description="What the greeter says first."),),
            user_config_schema=(ConfigField("nickname", label="Nickname", description="How the greeter calls you."),),
            pages=(WebPage("main", "Greetings", "page.js", icon="hand"),),
        )

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        register(I18nBundle.from_folder("greeter", LOCALES))
        register(I18nBundle.from_folder("core", LOCALES / "core"))

    @hookimpl
    def register_config_sets(self, register: Callable[..., None]) -> None:
        register(ConfigSet("greeter-general", "Greeter defaults", (ConfigField("volume", "integer", label="Volume", description="How loud the greeting is."),)))

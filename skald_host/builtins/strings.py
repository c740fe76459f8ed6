"""The host's interface strings, contributed like any plugin's bundle.

The texts live in ``locales/<locale>.json`` next to this module (one file per language,
edited by translators); adding a language is adding a file.
"""

from importlib.resources import files

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo

LOCALES = files("skald_host.builtins") / "locales"


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="strings",
        title="Interface language",
        description="The host's interface strings, one file per language.",
        icon="language",
        spec=">=1.0,<2",
    )


@hookimpl
def register_i18n(register) -> None:
    register(I18nBundle.from_folder("core", LOCALES))

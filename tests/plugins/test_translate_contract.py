"""``HostApi.translate`` does what its docstring promises a plugin author."""

from __future__ import annotations

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo

from .test_isolation import info


class Greeter:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("greeter")

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("greeter", {"en": {"hello": "Hello, {name}!", "bye": "Bye"}, "de": {"hello": "Hallo, {name}!"}}))


async def test_translate_takes_full_keys_and_hands_back_what_it_cannot_fill(skald):
    host = await skald.start(plugins=[Greeter()])
    translate = host.core.host_api("greeter").translate

    assert translate("greeter.hello", "de", name="Ada") == "Hallo, Ada!"
    assert translate("greeter.bye", "de") == "Bye"  # English where the locale lacks it
    assert translate("hello", "en", name="Ada") == "hello"  # not prefixed: no bundle has it, so the key comes back
    assert translate("greeter.missing") == "greeter.missing"
    assert translate("greeter.hello", "en") == "Hello, {name}!"  # no values: unformatted
    assert translate("greeter.hello", "en", other="x") == "Hello, {name}!"  # a placeholder without its value

"""A plugin's route reads the caller's language from ``current_caller().locale``: the
member's own choice, else the instance's language chosen at setup — never None, which a
plugin would read as English while the shell around its page is German."""

from __future__ import annotations

from typing import Any

from quart import Blueprint

from skald_hookspecs import PluginInfo, current_caller, hookimpl
from skald_host.testing.host import MEMBER_PASSWORD


class LocaleProbe:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="locale-probe", title="Locale probe", spec=">=1.0,<2")

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint("locale_probe", __name__)

        @blueprint.get("/locale")
        async def locale() -> Any:
            caller = current_caller()
            assert caller is not None
            return {"locale": caller.locale}

        register(blueprint)


async def test_a_member_without_a_language_of_their_own_reads_the_instances(skald):
    host = await skald.start(plugins=[LocaleProbe()])
    await host.setup_admin(locale="de")
    await host.core.set_plugin_enabled("locale-probe", True)
    await host.create_member("erin")  # no language of her own: the instance's
    await host.create_member("finn", locale="en")
    erin = await host.member("erin")
    assert (await erin.get("/api/auth/session")).json()["locale"] == "de"
    assert (await erin.get("/api/plugin/locale-probe/locale")).json() == {"locale": "de"}
    finn = await host.member("finn", MEMBER_PASSWORD)
    assert (await finn.get("/api/plugin/locale-probe/locale")).json() == {"locale": "en"}

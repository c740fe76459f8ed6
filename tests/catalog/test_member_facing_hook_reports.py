"""Reports around what members do with a plugin: a ``user_config_updated`` that fails
is on the plugin's page with its message withheld (it may quote what the member typed),
a tool run that blocks the server is logged by name, and a key a plugin ships in
German alone is listed as missing in English."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, I18nBundle, Tool
from skald_host.testing import Reply, ToolCall

from .support import Routed

NICKNAME = "Zebulon-the-private-9c41"


class FailsToApply(Routed):
    def __init__(self) -> None:
        super().__init__("fails-to-apply", user_config_schema=(ConfigField("nickname", "string", max_length=40),))

    @hookimpl
    async def user_config_updated(self, member_id: str, values: dict, host) -> None:
        raise RuntimeError(f"config blew up {values['nickname']}")


async def test_a_failing_user_config_updated_is_on_the_plugins_page_and_its_message_is_withheld(skald, caplog):
    caplog.set_level(logging.DEBUG)
    host = await skald.start(plugins=[FailsToApply()], enable=["fails-to-apply"])
    admin = await host.admin()
    alice = await host.member("alice")

    refused = await alice.put("/api/plugins/fails-to-apply/my-config", json={"config": {"nickname": NICKNAME}})

    failures = (await admin.get("/api/admin/plugins/fails-to-apply")).json()["failures"]
    error_id = failures[0]["error_id"]
    assert (refused.status_code, refused.json()) == (400, {
        "error": f"plugin 'fails-to-apply' could not apply the settings (error id {error_id})",
        "code": "plugin_settings_not_applied", "values": {"plugin": "fails-to-apply", "error_id": error_id},
    })
    assert NICKNAME not in caplog.text
    assert [f["where"] for f in failures] == ["hook user_config_updated"]
    assert "RuntimeError (message withheld" in failures[0]["traceback"] and NICKNAME not in failures[0]["traceback"]
    assert failures[0]["error_id"] in caplog.text


class Napper(Routed):
    """A tool whose async run blocks the loop with ``time.sleep``."""

    def __init__(self) -> None:
        super().__init__("napper")

    @hookimpl
    def register_tools(self, register: Callable[..., None]) -> None:
        async def nap(args: Any, ctx: Any) -> str:
            time.sleep(0.6)
            return "rested"

        register(Tool(name="nap", description="Blocks the server.", parameters={"type": "object", "properties": {}}, run=nap))


async def test_a_tool_run_that_blocks_the_server_is_logged_by_plugin_and_tool(skald, caplog):
    caplog.set_level(logging.WARNING)
    host = await skald.start(plugins=[Napper()], enable=["napper"])
    await host.use_model(await skald.model_server(Reply(tool_calls=[ToolCall("nap", {})]), Reply("Done.")))
    await host.allow_tool("nap")

    turn = await (await host.member("alice")).chat("take a nap")

    assert turn.result("nap") == "rested"
    held = [r.getMessage() for r in caplog.records if "held the event loop" in r.getMessage()]
    assert [line.split(" for ")[0] for line in held] == ["plugin napper: tool nap held the event loop"]


class GermanOnly(Routed):
    def __init__(self) -> None:
        super().__init__("german-only")

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        register(I18nBundle("german-only", {"en": {"both": "Both"}, "de": {"both": "Beide", "only_de": "Nur auf Deutsch"}}))
        register(I18nBundle("core", {"fr": {"locale.fr": "Français"}}))  # a language's own name, in its own file alone


async def test_a_key_shipped_only_in_german_is_listed_as_missing_in_english(skald):
    host = await skald.start(plugins=[GermanOnly()], enable=["german-only"])
    admin = await host.admin()

    missing = (await admin.get("/api/admin/status")).json()["missing_translations"]

    assert "german-only.only_de" in missing["en"]
    assert "german-only.both" not in missing["en"] and "core.locale.fr" not in missing["en"]
    assert "german-only.both" in missing["fr"]  # the other direction still listed

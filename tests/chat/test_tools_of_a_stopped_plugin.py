"""A plugin that is enabled but not running (its startup failed, or it waits for a
required setting: red on its card) offers the model none of its tools: a newcomer probe
saw Telegram's pairing tool offered while the bot had no token. Saving the settings
starts it, and its tools are offered from the next round. Asserted on the wire."""

from __future__ import annotations

from skald_hookspecs import ConfigField, PluginInfo, Tool, hookimpl
from skald_host.testing import Reply, ScriptedModelServer

from .support import ALL_MODELS, API_KEY, MODEL_A, ChatSocket, configure_models, new_conversation


class KeyedTool:
    """A tool whose plugin cannot run without its key."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="keyed", title="Keyed", spec=">=1.0,<2",
                          config_schema=(ConfigField("api_key", "string", label="API key", secret=True, required=True),))

    @hookimpl
    def register_tools(self, register) -> None:
        async def lookup(args, ctx) -> str:
            return "found"

        register(Tool("keyed_lookup", "Look something up.", {"type": "object", "properties": {}}, lookup))


async def test_a_plugin_that_is_not_running_offers_no_tool_until_it_runs(skald):
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        host = await skald.start(plugins=[KeyedTool()], enable=["keyed"])
        admin = await host.admin()
        await configure_models(admin, server)
        assert host.core.plugins.status("keyed").started is False  # enabled, waiting for its key
        server.script(MODEL_A, [Reply("one"), Reply("two")])

        def offered() -> set[str]:
            return {t["function"]["name"] for t in server.requests_for(MODEL_A)[-1].tools}

        async with ChatSocket(admin) as sock:
            cid = await new_conversation(admin)
            await sock.send(cid, "One.")
            await sock.turn(cid)
            assert "keyed_lookup" not in offered() and "execute_task" in offered()

            saved = await admin.put("/api/admin/plugins/keyed/config", json={"config": {"api_key": "sk-1"}})
            assert saved.status_code == 200, saved.text
            await sock.send(cid, "Two.")
            await sock.turn(cid)
            assert "keyed_lookup" in offered()

"""Test kit for the host's own tests and for plugin authors.

Installed as a pytest plugin (``pytest11`` entry point), it gives you the ``skald``
fixture: start a real host (Hypercorn on 127.0.0.1) with exactly the plugins you
name, create members, log in, talk HTTP and WebSocket::

    async def test_my_plugin_page_is_served(skald):
        host = await skald.start(plugins=[my_plugin], enable=["my-plugin"])
        admin = await host.admin()
        assert (await admin.get("/api/plugin/my-plugin/hello")).status_code == 200

and run a tool through the agent against a scripted model, one idea per line::

    async def test_my_tool_runs(skald):
        host = await skald.start(plugins=[my_plugin], enable=["my-plugin"])
        await host.use_model(await skald.model_server(Reply(tool_calls=[ToolCall("my_tool", {})]), Reply("Done.")))
        await host.allow_tool("my_tool")
        turn = await (await host.member("alice")).chat("Use my tool")
        assert turn.result("my_tool") == "it worked"
"""

from typing import Any

from skald_host.testing.chat import ToolResult, Turn
from skald_host.testing.client import SkaldClient
from skald_host.testing.host import PluginLoadFailed, RunningHost, SkaldHarness, test_settings

_MODEL_SERVER_NAMES = (
    "BrokenStream",
    "Hang",
    "RecordedRequest",
    "Reply",
    "ScriptedModelServer",
    "ToolCall",
    "echo_last_user_message",
)

__all__ = ["PluginLoadFailed", "RunningHost", "SkaldClient", "SkaldHarness", "ToolResult", "Turn", "test_settings", "ScriptedError", *_MODEL_SERVER_NAMES]


def __getattr__(name: str) -> Any:
    """The scripted model server, imported lazily so ``python -m
    skald_host.testing.model_server`` does not import its own module twice."""
    import importlib

    model_server = importlib.import_module("skald_host.testing.model_server")
    if name == "ScriptedError":
        return model_server.Error
    if name in _MODEL_SERVER_NAMES:
        return getattr(model_server, name)
    raise AttributeError(name)

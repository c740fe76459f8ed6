"""A system agent whose settings set lacks a required field fails its plugin with a
message that says where to fix it: the set is registered in ``register_config_sets``,
while the failure is reported under ``register_system_agents`` (an author looked for
the field in the agent). It names the set's id and the hook."""

from __future__ import annotations

from typing import Callable

from skald_hookspecs import ConfigField, ConfigSet, hookimpl

from .support import CountingAgents


class LacksInterval(CountingAgents):
    @hookimpl
    def register_config_sets(self, register: Callable[..., None]) -> None:
        register(ConfigSet("counted-settings", "Counted", (ConfigField("enabled", "boolean", label="On", default=True),), owner="counted"))


async def test_settings_lacking_the_interval_name_the_set_and_the_hook_to_fix(skald):
    host = await skald.start(plugins=[LacksInterval()])
    status = host.core.plugins.status("counting")
    assert status.state == "failed"
    assert status.error == (
        "register_system_agents: the settings of system agent 'counted' lack the field(s) interval:"
        " add them to the ConfigSet 'counted-settings' it registers in register_config_sets"
    )

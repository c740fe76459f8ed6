"""A typo in a plugin's agent ``meta.yaml``: the refusal names the file once and the
key that was meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from skald_hookspecs import PluginInfo, hookimpl
from skald_host.core.agent.definitions import AgentError, _parse

from .support import write_agent


class TypoAgents:
    def __init__(self, root: Path) -> None:
        write_agent(root, "terse", "You answer briefly.", title="Terse", kind="task", allow_tool=False)
        self.root = root

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="typo-agents", title="Typo agents", spec=">=1.0,<2")

    @hookimpl
    def register_agent_dirs(self, register) -> None:
        register(self.root)


async def test_an_unknown_meta_key_names_its_file_once_and_suggests_the_known_key(skald, tmp_path):
    host = await skald.start(plugins=[TypoAgents(tmp_path / "agents")])
    admin = await host.admin()

    listed = (await admin.get("/api/agent-definitions")).json()

    meta = tmp_path / "agents" / "terse" / "meta.yaml"
    assert listed["refused"]["errors"] == [f"{meta}: unknown key(s) allow_tool (did you mean 'allow_tools'?)"]


def test_an_unknown_meta_key_like_no_known_one_is_named_without_a_guess(tmp_path):
    write_agent(tmp_path, "odd", "You help.", kind="task", colour="blue")

    with pytest.raises(AgentError) as refused:
        _parse(tmp_path / "odd", 0, 0)

    assert str(refused.value) == f"{tmp_path / 'odd' / 'meta.yaml'}: unknown key(s) colour"

"""A plugin's agent directories follow the plugin: its agents reach a member only while
the plugin is enabled and usable by that member (check D1: a disabled plugin's agents
reach no one)."""

from __future__ import annotations

from pathlib import Path

from skald_hookspecs import PluginInfo, hookimpl

from .support import PROBE, new_conversation, write_agent


async def test_a_plugins_agents_disappear_while_it_is_disabled_or_not_granted(chat):
    alice = await chat.host.member("alice")
    status = (await alice.get("/api/chat/status")).json()
    assert "quiet" in [a["id"] for a in status["agents"]]
    assert await new_conversation(alice, agent="quiet")

    await chat.admin.put(f"/api/admin/plugins/{PROBE}/enabled", json={"enabled": False})
    assert "quiet" not in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]
    refused = await alice.post("/api/conversations", json={"agent": "quiet"})
    assert refused.status_code == 400 and "quiet" in refused.json()["error"]

    await chat.admin.put(f"/api/admin/plugins/{PROBE}/enabled", json={"enabled": True})
    assert "quiet" in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]
    await chat.admin.put(f"/api/admin/members/{alice.member['id']}/plugins", json={"plugins": []})
    assert "quiet" not in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]
    # The host's own agents never depend on a plugin.
    assert "assistant" in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]


class BrokenAgents:
    """A plugin whose one agent folder has a typo in its meta.yaml."""

    def __init__(self, root: Path) -> None:
        write_agent(root, "typo", "You help.", title="Typo", kind="task", colour="blue")  # unknown key
        self.root = root

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="broken-agents", title="Broken agents", spec=">=1.0,<2")

    @hookimpl
    def register_agent_dirs(self, register) -> None:
        register(self.root)


async def test_one_plugins_bad_definition_leaves_out_its_folder_not_everyones_helpers(skald, tmp_path):
    """At boot there is no last good generation to keep: a typo in a plugin's folder
    (even a disabled plugin's) used to refuse every definition, the host's too."""
    host = await skald.start(plugins=[BrokenAgents(tmp_path / "agents")])  # installed, not enabled
    admin = await host.admin()
    listed = (await admin.get("/api/agent-definitions")).json()
    ids = [d["id"] for d in listed["definitions"]]
    assert "general-purpose" in ids and "typo" not in ids, listed
    assert listed["refused"] is not None and "colour" in " ".join(listed["refused"]["errors"])
    # The plugin's page says why (its failures); its other parts are left alone: the
    # same refusal may come from a model pair the admin has not added yet.
    [failure] = host.core.plugins.status("broken-agents").failures
    assert failure["where"] == "agent definitions" and "colour" in failure["traceback"]

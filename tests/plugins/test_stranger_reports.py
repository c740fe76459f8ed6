"""What a plugin author who had only the docs ran into (four plugins, one report): a
missing ``agents/`` folder, a blocking tool or startup, a plugin waiting for a
setting, a save whose restart failed, a plugin that did not load, an editable
install Python never saw, and strict mode's one line. Each against a real host (or
the real manager), as the rest of ``tests/plugins``."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest

from skald_hookspecs import ConfigField, ConfigSet, NotReady, SystemAgent, hookimpl
from skald_hookspecs.types import PluginInfo
from skald_host.core.plugins import manager as plugin_manager
from skald_host.core.plugins.manager import PluginManager, StrictPluginFailure, _Candidate

from .test_isolation import info


# -- 1. an agents/ folder left out of the wheel --------------------------------------------


class AgentDirs:
    """Registers ``folder`` as its agent directory; with ``run_turn``, a system agent
    whose pass asks for the agent ``digest``."""

    def __init__(self, plugin_id: str, folder: Path, with_agent: bool = False) -> None:
        self.plugin_id, self.folder, self.with_agent = plugin_id, folder, with_agent

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id, spec=">=1.3,<2")

    @hookimpl
    def register_agent_dirs(self, register) -> None:
        register(self.folder)

    @hookimpl
    def register_config_sets(self, register) -> None:
        if self.with_agent:
            register(ConfigSet("digest", "Digest", (ConfigField("enabled", "boolean", default=True),
                                                    ConfigField("interval", "integer", default=1)), owner="digest"))

    @hookimpl
    def register_system_agents(self, register) -> None:
        if self.with_agent:
            register(SystemAgent(id="digest", title="Digest", interval_seconds=86400, run=self.run, scope="per_member", interval_unit="days"))

    async def run(self, ctx: Any) -> None:
        await ctx.run_turn("digest", "hello")


async def test_a_missing_agents_folder_fails_its_plugin_at_registration_naming_the_path(skald, tmp_path):
    missing = tmp_path / "site-packages" / "skald_digest" / "agents"
    a_file = tmp_path / "agents.txt"
    a_file.write_text("not a folder")
    host = await skald.start(plugins=[AgentDirs("digest-missing", missing), AgentDirs("digest-file", a_file)])

    status = host.core.plugins.status("digest-missing")
    assert status.state == "failed", status.as_dict()
    assert status.error.startswith(f"register_agent_dirs: the folder {str(missing)!r} does not exist (an agents/ folder must be package data"), status.error
    assert host.core.plugins.status("digest-file").error.startswith(f"register_agent_dirs: the folder {str(a_file)!r} is not a directory")


async def test_a_system_agent_asking_for_an_agent_no_folder_has_says_why_on_its_page(skald, tmp_path):
    (tmp_path / "agents").mkdir()  # there, but without the agent: its message is the host's, kept
    plugin = AgentDirs("digest-empty", tmp_path / "agents", with_agent=True)
    host = await skald.start(plugins=[plugin], enable=["digest-empty"], settings=skald.settings(system_agents={"run": False}))
    await host.admin()

    outcomes = [o for o in await host.run_system_agents() if o.agent_id == "digest"]
    assert [o.result for o in outcomes] == ["failed"]
    failure = host.core.plugins.status("digest-empty").failures[-1]
    assert failure["where"] == "system agent digest"
    assert failure["traceback"].endswith(
        "PluginError: run_turn('digest'): no agent named 'digest' in the host's or any plugin's agents/ folders"
        " (register_agent_dirs; in a wheel the folder must be package data)"
    ), failure["traceback"]


async def test_a_meta_yaml_with_an_unknown_key_is_on_its_plugins_page_from_the_start(skald, tmp_path):
    agent = tmp_path / "agents" / "digest"
    agent.mkdir(parents=True)
    (agent / "AGENT.md").write_text("Digest the events.")
    (agent / "meta.yaml").write_text("title: Digest\nkind: system\nallow_tools: false\ntools: []\ncolour: blue\n")
    host = await skald.start(plugins=[AgentDirs("digest-typo", tmp_path / "agents")])

    failures = list(host.core.plugins.status("digest-typo").failures)  # nothing has read the definitions yet
    assert [f["where"] for f in failures] == ["agent definitions"], failures
    assert "unknown key(s) colour" in failures[0]["traceback"]


# -- 2. a tool or hook that blocks the event loop --------------------------------------------


class BlockingMemberTools:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("blocker")

    @hookimpl
    def member_tools(self, member_id) -> list:
        time.sleep(0.6)
        return []


async def test_holding_the_event_loop_is_a_problem_on_the_plugins_page_once_a_minute(skald, caplog):
    caplog.set_level(logging.WARNING)
    host = await skald.start(plugins=[BlockingMemberTools()], enable=["blocker"])
    admin = await host.admin()

    host.core.plugins.call_now("member_tools", "blocker", member_id="m")
    host.core.plugins.call_now("member_tools", "blocker", member_id="m")  # within the minute: not listed again

    listed = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}
    assert (listed["blocker"]["state"], listed["blocker"]["problems"]) == ("loaded", 1)  # the card counts it
    failures = (await admin.get("/api/admin/plugins/blocker")).json()["failures"]
    assert [f["where"] for f in failures] == ["hook member_tools"]
    assert failures[0]["traceback"].startswith("hook member_tools held the event loop for 0.")
    assert "belongs in a thread" in failures[0]["traceback"]
    warnings = [r.getMessage() for r in caplog.records if "held the event loop" in r.getMessage()]
    assert len(warnings) == 2 and warnings[0].endswith(f"; on its page as error id {failures[0]['error_id']}"), warnings
    assert plugin_manager.HELD_PROBLEM_EVERY_SECONDS >= 60


# -- 3. a startup that blocks, then awaits ------------------------------------------------------


class BlocksThenAwaits:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("blocks-then-awaits")

    @hookimpl
    async def startup(self, host) -> None:
        time.sleep(0.8)
        await asyncio.sleep(0.01)


async def test_a_startup_that_blocks_then_awaits_is_said_to_have_held_the_loop_not_to_be_slow(skald):
    host = await skald.start(plugins=[BlocksThenAwaits()], settings=skald.settings(plugins={"hook_timeout_seconds": 0.5}))
    admin = await host.admin()
    await host.core.set_plugin_enabled("blocks-then-awaits", True)

    status = host.core.plugins.status("blocks-then-awaits")
    assert status.error.startswith("startup: blocked the server for 0."), status.error
    card = (await admin.get("/api/admin/plugins/blocks-then-awaits")).json()["error"]
    assert card.startswith("Its startup blocked the server for") and "in a thread" in card, card


# -- 4. waiting for a setting or a token is not broken ------------------------------------------


class NeedsToken:
    def __init__(self, plugin_id: str, not_ready: bool = False) -> None:
        self.plugin_id, self.not_ready = plugin_id, not_ready

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        schema = () if self.not_ready else (ConfigField("token", "string", label="Token", required=True),)
        return info(self.plugin_id, config_schema=schema)

    @hookimpl
    def startup(self, host) -> None:
        if self.not_ready:
            raise NotReady("no token from the service yet")


async def test_a_plugin_waiting_for_a_setting_or_notready_is_waiting_not_failed(skald):
    host = await skald.start(plugins=[NeedsToken("needs-token"), NeedsToken("not-ready", not_ready=True)], enable=["needs-token", "not-ready"])
    admin = await host.admin()

    listed = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}
    assert (listed["needs-token"]["waiting"], listed["needs-token"]["needs_settings"], listed["needs-token"]["healthy"]) == (True, True, False)
    assert (listed["not-ready"]["waiting"], listed["not-ready"]["needs_settings"]) == (True, False)
    warnings = (await admin.get("/api/admin/status")).json()["warnings"]
    assert sorted(w["id"] for w in warnings if w.get("values", {}).get("plugin") in ("Needs-Token", "Not-Ready")) == ["plugin_waiting"] * 2
    texts = [w["text"] for w in warnings if w["id"] == "plugin_waiting"]
    assert "The plugin Not-Ready is waiting before it starts (its card in the catalog says more): startup: no token from the service yet" in texts

    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    texts = [w["text"] for w in (await admin.get("/api/admin/status")).json()["warnings"] if w["id"] == "plugin_waiting"]
    assert any(text.startswith("Das Plugin Needs-Token wartet, bevor es startet") for text in texts), texts

    # Given its setting, it starts: no longer waiting.
    assert (await admin.put("/api/admin/plugins/needs-token/config", json={"config": {"token": "t"}})).status_code == 200
    assert (await admin.get("/api/admin/plugins/needs-token")).json()["waiting"] is False


async def test_a_disabled_plugin_is_not_waiting_and_keeps_no_stale_reason(skald):
    """Waiting is for an enabled plugin (enabled without its token, then disabled, the
    Telegram plugin showed "disabled" beside waiting: true and "No bot token is set").
    Disabled over the API, nothing waits and no reason stays; enabled again, its start
    says it again."""
    host = await skald.start(plugins=[NeedsToken("needs-token"), NeedsToken("not-ready", not_ready=True)])
    admin = await host.admin()
    for plugin_id in ("needs-token", "not-ready"):
        enabled = await admin.put(f"/api/admin/plugins/{plugin_id}/enabled", json={"enabled": True})
        assert enabled.status_code == 200 and enabled.json()["waiting"] is True and enabled.json()["error"], enabled.text
        disabled = await admin.put(f"/api/admin/plugins/{plugin_id}/enabled", json={"enabled": False})
        assert disabled.status_code == 200, disabled.text
        for card in (disabled.json(), {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}[plugin_id]):
            assert (card["state"], card["waiting"], card["needs_settings"], card["error"], card["healthy"]) == ("disabled", False, False, None, True), card
    warnings = (await admin.get("/api/admin/status")).json()["warnings"]
    assert not [w for w in warnings if w["id"] in ("plugin_waiting", "plugin_failed")], warnings
    again = await admin.put("/api/admin/plugins/not-ready/enabled", json={"enabled": True})
    assert again.json()["waiting"] is True and "no token from the service yet" in again.json()["error"]


# -- 5. a save whose restart fails ---------------------------------------------------------------


class FailsOnBadToken:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("picky", config_schema=(ConfigField("token", "string", default="good"),))

    @hookimpl
    async def startup(self, host) -> None:
        if (await host.get_config())["token"] != "good":
            raise RuntimeError("the service refused the token")


async def test_a_save_whose_restart_fails_says_so_in_its_answer_and_keeps_the_values(skald):
    host = await skald.start(plugins=[FailsOnBadToken()], enable=["picky"])
    admin = await host.admin()

    saved = await admin.put("/api/admin/plugins/picky/config", json={"config": {"token": "bad"}})
    assert saved.status_code == 200
    assert saved.json()["config"] == {"token": "bad"}
    assert saved.json()["not_started"] == "startup: RuntimeError: the service refused the token"
    again = await admin.put("/api/admin/plugins/picky/config", json={"config": {"token": "good"}})
    assert "not_started" not in again.json()


# -- 6. a plugin that did not load cannot know its settings --------------------------------------


class CrashesInPluginInfo:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        raise RuntimeError("no config file")


async def test_a_plugin_that_failed_to_load_has_unknown_settings_not_none(skald):
    host = await skald.start(plugins=[CrashesInPluginInfo(), NeedsToken("said-who-it-is", not_ready=True)])
    admin = await host.admin()
    detail = (await admin.get("/api/admin/plugins/CrashesInPluginInfo")).json()
    assert (detail["state"], detail["settings_known"]) == ("failed", False)
    assert (await admin.get("/api/admin/plugins/said-who-it-is")).json()["settings_known"] is True  # it has none, and said so


# -- 7. an editable install Python never processed -------------------------------------------------


class _Dist:
    def __init__(self, root: Path, files: list[str]) -> None:
        self.root, self.files = root, files

    def locate_file(self, name: str) -> Path:
        return self.root / name


def test_an_editable_install_whose_pth_was_not_processed_gets_a_hint(tmp_path):
    (tmp_path / "__editable__.skald_dice-0.1.0.pth").write_text(str(tmp_path / "src") + "\n")
    dist = _Dist(tmp_path, ["__editable__.skald_dice-0.1.0.pth", "skald_dice-0.1.0.dist-info/METADATA"])
    cand = _Candidate("dice", False, lambda: None, "skald-dice", "0.1.0", 'dice = "skald_dice"', dist=dist)
    missing = ModuleNotFoundError("No module named 'skald_dice'", name="skald_dice")

    hint = plugin_manager._not_importable(cand, missing)
    assert hint.startswith(" (the distribution skald-dice is installed, but Python never processed its __editable__.skald_dice-0.1.0.pth"), hint
    assert "install it into the host's virtual environment" in hint
    # Into a --target folder, without -e, pip would look for the contract on an index.
    assert "pip install --target DIR --no-deps ." in hint, hint
    # Its own dependency missing, or a typo in an ordinary install: no hint.
    assert plugin_manager._not_importable(cand, ModuleNotFoundError("No module named 'requests'", name="requests")) == ""
    assert plugin_manager._not_importable(_Candidate("dice", False, lambda: None, "skald-dice", "0.1.0", 'dice = "skald_dice"', dist=_Dist(tmp_path, [])), missing) == ""


# -- 8. strict mode's one line -----------------------------------------------------------------


class ReturnsADict:
    @hookimpl
    def plugin_info(self):
        return {"id": "wrong2"}


def test_strict_mode_names_the_plugin_once_no_host_class_and_where_plugin_info_is():
    manager = PluginManager(extra=[ReturnsADict()], use_entry_points=False, strict=True)
    with pytest.raises(StrictPluginFailure) as refused:
        manager.load()
    line = ReturnsADict.plugin_info.__code__
    assert str(refused.value) == (
        f"plugin 'ReturnsADict' failed in plugin_info: plugin_info() returned dict, expected PluginInfo"
        f" (at {line.co_filename}:{line.co_firstlineno})"
    )

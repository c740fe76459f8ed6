"""Errors where the docs say they are (issue 18): what a failing tool tells the model and
the admin, a failed plugin's traceback on its detail, the kit's ``enable`` naming the
real load error, and strict mode's one line."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from skald_hookspecs import ConfigField, ConfigSet, PluginInfo, Tool, ToolError, hookimpl
from skald_host.testing import PluginLoadFailed, Reply, ToolCall

SECRET = "db password is hunter2"


class Tools:
    """A plugin whose tools fail in each way a tool can."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="faulty", title="Faulty", spec=">=1.2,<2")

    @hookimpl
    def register_tools(self, register) -> None:
        async def worded(args, ctx):
            raise ToolError("no city called 'Atlantis'")

        async def crashes(args, ctx):
            raise RuntimeError(SECRET)

        async def returns_dict(args, ctx):
            return {"temperature": 21}

        async def returns_none(args, ctx):
            return None

        async def hangs(args, ctx):
            await asyncio.sleep(30)  # the wait

        tools = [("worded", worded), ("crashes", crashes), ("returns_dict", returns_dict), ("returns_none", returns_none), ("hangs", hangs)]
        for name, run in tools:
            register(Tool(name=name, description=name, parameters={"type": "object", "properties": {}}, run=run))


async def run_tool(skald, tool: str, arguments: dict | None = None, **settings):
    host = await skald.start(plugins=[Tools()], enable=["faulty"], settings=skald.settings(**settings) if settings else None)
    server = await skald.model_server(Reply(tool_calls=[ToolCall(tool, arguments or {})]), Reply("I see."))
    await host.use_model(server)
    await host.allow_tool(tool)
    turn = await (await host.member("alice")).chat(f"use {tool}")
    tool_message = server.requests_for(server.models[0])[1].messages[-1]
    assert tool_message["role"] == "tool"
    return host, turn, tool_message["content"]


async def test_a_tool_error_reaches_the_model_in_the_tools_own_words(skald):
    host, turn, seen_by_model = await run_tool(skald, "worded")
    assert seen_by_model == "Error: no city called 'Atlantis'"
    assert turn.tool_results[0].status == "error"
    assert list(host.core.plugins.status("faulty").failures) == []  # worded failures are no incident


async def test_any_other_exception_reaches_the_model_as_an_error_id_and_the_traceback_goes_to_the_admin(skald, caplog):
    caplog.set_level(logging.ERROR, logger="skald_host.core.plugins.failures")
    host, turn, seen_by_model = await run_tool(skald, "crashes")

    match = re.fullmatch(r"Error: the tool failed \(error id ([0-9a-f]{12})\); .*", seen_by_model)
    assert match, seen_by_model
    error_id = match.group(1)
    assert SECRET not in seen_by_model and turn.result("crashes") == seen_by_model

    admin = await host.admin()
    detail = (await admin.get("/api/admin/plugins/faulty")).json()
    [failure] = detail["tool_failures"]
    assert (failure["error_id"], failure["tool"]) == (error_id, "crashes")
    assert "RuntimeError" in failure["traceback"] and "in crashes" in failure["traceback"]
    assert SECRET not in failure["traceback"]  # the message may hold a member's words: withheld
    alice = await host.member("alice")
    assert (await alice.get("/api/admin/plugins/faulty")).status_code == 403

    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert error_id in logged and "in crashes" in logged and SECRET not in logged


async def test_a_wrong_return_type_is_a_clear_error_not_silently_encoded(skald):
    host, turn, seen_by_model = await run_tool(skald, "returns_dict")
    assert seen_by_model.startswith("Error: the tool failed (error id ") and "temperature" not in seen_by_model
    [failure] = host.core.plugins.status("faulty").failures
    assert "TypeError: tool 'returns_dict' returned dict; a tool returns str or None" in failure["traceback"]
    # Which return: the traceback ends in the host that found it out, so the message says
    # where the tool's run is (a plugin-author probe saw no frame of theirs).
    assert f"its run is at {__file__}:" in failure["traceback"]


async def test_a_tool_timeout_is_logged_and_listed_on_the_plugins_page_without_its_arguments(skald, caplog):
    """The model was told, and the admin had no trace of it, where a crash shows in both."""
    caplog.set_level(logging.WARNING, logger="skald_host.core.plugins.failures")
    host, turn, seen_by_model = await run_tool(skald, "hangs", {"city": SECRET}, chat={"tool_timeout_seconds": 0.3})

    match = re.fullmatch(r"Error: the tool did not finish within 0.3 s \(error id ([0-9a-f]{12})\)\.", seen_by_model)
    assert match, seen_by_model
    [failure] = host.core.plugins.status("faulty").failures
    assert (failure["error_id"], failure["tool"], failure["where"]) == (match.group(1), "hangs", "tool hangs")
    assert failure["traceback"].endswith("TimeoutError: tool hangs did not finish within 0.3 s")
    assert "# the wait" in failure["traceback"]  # where it was waiting when it was cut off
    [record] = [r for r in caplog.records if match.group(1) in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "plugin faulty: tool hangs failed" in record.getMessage() and "within 0.3 s" in record.getMessage()
    assert SECRET not in record.getMessage() and SECRET not in str(failure)


async def test_none_is_an_empty_result(skald):
    _, turn, seen_by_model = await run_tool(skald, "returns_none")
    assert (turn.tool_results[0].status, seen_by_model) == ("done", "")


# -- load errors in the kit -----------------------------------------------------------------


class InfoExplodes:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        raise RuntimeError("the info service is down")


class ToolsExplode(Tools):
    @hookimpl
    def register_tools(self, register) -> None:
        raise ValueError("tool table is corrupt")


async def test_enabling_a_plugin_that_failed_to_load_raises_its_real_error(skald):
    with pytest.raises(PluginLoadFailed) as raised:
        await skald.start(plugins=[ToolsExplode()], enable=["faulty"])
    message = str(raised.value)
    assert "plugin 'faulty' is failed: register_tools: ValueError: tool table is corrupt" in message
    assert "Traceback" in message and "ValueError: tool table is corrupt" in message


async def test_a_plugin_that_failed_before_naming_itself_is_shown_by_its_module_name(skald):
    with pytest.raises(PluginLoadFailed) as raised:
        await skald.start(plugins=[InfoExplodes()], enable=["exploding"])
    message = str(raised.value)
    assert "plugin 'exploding' did not load" in message
    assert "InfoExplodes is failed: plugin_info: RuntimeError: the info service is down" in message


# -- strict mode: one line ----------------------------------------------------------------------

BROKEN_PLUGIN = """
from skald_hookspecs import PluginInfo, hookimpl

@hookimpl
def plugin_info():
    return PluginInfo(id="brokenx", title="Broken", spec=">=1.0,<2")

@hookimpl
def register_tools(register):
    raise RuntimeError("tools exploded")
"""


def installed_broken_plugin(root: Path) -> Path:
    """An installed distribution with a ``skald.plugins`` entry point (dist-info on a path)."""
    site = root / "site"
    info = site / "broken_x-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "broken_x.py").write_text(textwrap.dedent(BROKEN_PLUGIN))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-x\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[skald.plugins]\nbrokenx = broken_x\n")
    return site


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_strict_mode_names_the_plugin_and_the_hook_in_one_line(tmp_path):
    site = installed_broken_plugin(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site), "SKALD_STRICT_PLUGINS": "1", "SKALD_DATA_DIR": str(tmp_path / "data"),
           "SKALD_PORT": str(free_port()), "SKALD_HOST": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-m", "skald_host", "serve"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if "cannot start" in line]
    assert lines == [
        f"cannot start: plugin 'brokenx' failed in register_tools: RuntimeError: tools exploded (at {site / 'broken_x.py'}:10)"
        " (SKALD_STRICT_PLUGINS=1 stops the host when a plugin fails)"
    ]
    assert "Traceback" not in done.stderr + done.stdout


# -- settings end to end -----------------------------------------------------------------------


class Configured:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(
            id="configured",
            title="Configured",
            spec=">=1.2,<2",
            config_schema=(ConfigField("units", "choice", choices=("metric", "imperial"), default="metric"), ConfigField("city")),
        )

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet("configured-limits", "Limits", (ConfigField("per_day", "integer", default=5), ConfigField("key", secret=True)), owner="main"))


class Other:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="other", title="Other", spec=">=1.2,<2")


async def test_config_reads_the_schema_defaults_until_set(skald):
    host = await skald.start(plugins=[Configured()], enable=["configured"])
    api = host.core.host_api("configured")
    assert await api.get_config() == {"units": "metric"}
    admin = await host.admin()
    saved = await admin.put("/api/admin/plugins/configured/config", json={"config": {"city": "Bonn"}})
    assert saved.status_code == 200, saved.text
    assert await api.get_config() == {"units": "metric", "city": "Bonn"}


async def test_an_owned_settings_set_is_on_its_plugins_page_and_readable_through_the_host_api(skald):
    host = await skald.start(plugins=[Configured(), Other()], enable=["configured", "other"])
    admin = await host.admin()
    api = host.core.host_api("configured")
    assert await api.get_settings("configured-limits") == {"per_day": 5}

    detail = (await admin.get("/api/admin/plugins/configured")).json()
    [shown] = detail["settings_sets"]
    assert (shown["id"], shown["title"], shown["owner"]) == ("configured-limits", "Limits", "main")
    assert [f["name"] for f in shown["fields"]] == ["per_day", "key"]
    assert (await admin.get("/api/admin/plugins/other")).json()["settings_sets"] == []
    assert "configured-limits" not in {s["id"] for s in (await admin.get("/api/admin/settings")).json()["sets"]}

    saved = await admin.put("/api/admin/settings/configured-limits", json={"values": {"per_day": 9, "key": "k-123"}})
    assert saved.status_code == 200 and saved.json()["values"]["key"] == "********"
    assert await api.get_settings("configured-limits") == {"per_day": 9, "key": "k-123"}
    detail = (await admin.get("/api/admin/plugins/configured")).json()
    assert detail["settings_sets"][0]["values"] == {"per_day": 9, "key": "********"}
    assert "k-123" not in str(detail)

    with pytest.raises(KeyError):
        await host.core.host_api("other").get_settings("configured-limits")  # not its set


class Hooked:
    """A plugin failing outside its tools: at a member's unlock (raising, or too slow)
    and in a route of its router."""

    def __init__(self, plugin_id: str, *, slow: bool = False) -> None:
        self.id, self.slow = plugin_id, slow

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.id, title=self.id, spec=">=1.2,<2")

    @hookimpl
    async def member_unlocked(self, member_id, host) -> None:
        if self.slow:
            import asyncio

            await asyncio.sleep(30)
        raise RuntimeError(f"{SECRET} for {member_id}")

    @hookimpl
    def register_routes(self, register, host) -> None:
        from quart import Blueprint

        bp = Blueprint(f"{self.id}_routes", __name__)

        @bp.get("/boom")
        async def boom():
            raise RuntimeError(SECRET)

        register(bp)


async def test_a_hooks_and_a_routes_failures_are_on_the_plugins_page_under_an_error_id_without_their_message(skald, caplog):
    """One failure policy for every hook, as for tools: the member's login and the
    client's request go on with a generic answer; the admin finds the frames under an
    error id on the plugin's page; the message (a member's words, maybe) is nowhere."""
    caplog.set_level(logging.INFO)
    host = await skald.start(plugins=[Hooked("hooked"), Hooked("sleepy", slow=True)], enable=["hooked", "sleepy"],
                             settings=skald.settings(plugins={"hook_timeout_seconds": 0.5}))
    admin = await host.admin()
    alice = await host.member("alice")  # logged in: member_unlocked ran, failed and timed out
    answer = await alice.get("/api/plugin/hooked/boom")
    assert answer.status_code == 500 and answer.json()["code"] == "internal_error"
    route_error_id = answer.json()["values"]["error_id"]
    assert SECRET not in answer.text

    hooked = (await admin.get("/api/admin/plugins/hooked")).json()
    by_where = {f["where"]: f for f in hooked["failures"]}
    assert set(by_where) == {"hook member_unlocked", "route GET /api/plugin/hooked/boom"}
    assert by_where["route GET /api/plugin/hooked/boom"]["error_id"] == route_error_id
    assert "in member_unlocked" in by_where["hook member_unlocked"]["traceback"]
    assert "in boom" in by_where["route GET /api/plugin/hooked/boom"]["traceback"]
    assert hooked["tool_failures"] == []  # the tools' alone, as before
    timed_out = (await admin.get("/api/admin/plugins/sleepy")).json()["failures"]  # the admin's login and Alice's
    # The second, the same hook failing the same way within the minute, is counted in the first's entry.
    assert len(timed_out) == 1 and timed_out[0]["where"] == "hook member_unlocked" and timed_out[0]["repeats"] == 1
    assert all("did not finish within 0.5 s" in f["traceback"] for f in timed_out)

    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert route_error_id in logged and "in boom" in logged
    assert SECRET not in logged and SECRET not in str(hooked)
    assert "failures" not in (await admin.get("/api/admin/plugins")).json()["plugins"][0]  # the detail's, not the list's


class AnswersWhatCannotBeSent:
    """Routes whose return value Quart cannot turn into a response."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="unsendable", title="Unsendable", spec=">=1.2,<2")

    @hookimpl
    def register_routes(self, register, host) -> None:
        from quart import Blueprint

        bp = Blueprint("unsendable_routes", __name__)

        @bp.get("/number")
        async def number():
            return 12345

        @bp.get("/set")
        async def a_set():
            return {"x": {1, 2}, "said": SECRET}

        @bp.get("/fine")
        def fine():  # a plain def still answers (Quart runs it in a thread)
            return {"ok": True}

        register(bp)


async def test_a_route_returning_what_cannot_be_sent_fails_as_a_raising_route_does(skald, caplog):
    """It answered a bare http_500 without an error id, stayed off the plugin's page, and
    its log line carried the exception's whole message."""
    caplog.set_level(logging.INFO)
    host = await skald.start(plugins=[AnswersWhatCannotBeSent()], enable=["unsendable"])
    admin = await host.admin()
    alice = await host.member("alice")
    assert (await alice.get("/api/plugin/unsendable/fine")).json() == {"ok": True}
    error_ids = {}
    for path in ("/number", "/set"):
        answer = await alice.get(f"/api/plugin/unsendable{path}")
        assert answer.status_code == 500 and answer.json()["code"] == "internal_error", answer.text
        error_ids[f"route GET /api/plugin/unsendable{path}"] = answer.json()["values"]["error_id"]

    failures = (await admin.get("/api/admin/plugins/unsendable")).json()["failures"]
    assert {f["where"]: f["error_id"] for f in failures} == error_ids
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for error_id in error_ids.values():
        assert "plugin unsendable: route GET /api/plugin/unsendable/" in logged and error_id in logged
    # Frames and type only, as for any failure of a plugin's code.
    assert "Object of type set" not in caplog.text and "it was a int" not in caplog.text

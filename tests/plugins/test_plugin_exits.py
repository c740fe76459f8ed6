"""A plugin author's probe of containment (docs/plugins.md: a failing plugin is marked
failed "and every other plugin and the host keep serving"): what is no ``Exception``
(``sys.exit()``, a KeyboardInterrupt, a CancelledError nobody asked for) ended the
server or the turn; a lone surrogate in a tool's result failed the next model request;
a route's unusable return value was recorded as a withheld TypeError."""

from __future__ import annotations

import asyncio
import logging
import re
import sys

import pytest

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.core.plugins.manager import PluginManager
from skald_host.testing import Reply, ToolCall

from .test_failure_reports import _package
from .test_isolation import Bystander, assert_host_and_bystanders_work, info


class Exits:
    """Tools that leave the way a tool must not: as a stop of the server or the turn."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="exits", title="Exits", spec=">=1.2,<2")

    @hookimpl
    def register_tools(self, register) -> None:
        async def exits(args, ctx):
            sys.exit(2)

        async def interrupts(args, ctx):
            raise KeyboardInterrupt

        async def cancels(args, ctx):  # a task of its own was cancelled, and it re-raised
            raise asyncio.CancelledError

        async def surrogate(args, ctx):
            return "bad \ud800 and good \ud83d\ude00"

        async def worded_surrogate(args, ctx):
            from skald_hookspecs import ToolError

            raise ToolError("no \udc80 here")

        for name, run in [("exits", exits), ("interrupts", interrupts), ("cancels", cancels), ("surrogate", surrogate),
                          ("worded_surrogate", worded_surrogate)]:
            register(Tool(name=name, description=name, parameters={"type": "object", "properties": {}}, run=run))

    @hookimpl
    def register_routes(self, register, host) -> None:
        from quart import Blueprint

        bp = Blueprint("exits_routes", __name__)

        @bp.get("/object")
        async def an_object():
            return object()

        @bp.get("/triple")
        async def a_quadruple():
            return "a", 200, {}, "extra"

        register(bp)


async def run_tool(skald, tool: str):
    host = await skald.start(plugins=[Exits()], enable=["exits"])
    server = await skald.model_server(Reply(tool_calls=[ToolCall(tool, {})]), Reply("I see."))
    await host.use_model(server)
    await host.allow_tool(tool)
    turn = await (await host.member("alice")).chat(f"use {tool}")
    requests = server.requests_for(server.models[0])
    assert len(requests) == 2, "the turn went on to the model after the tool"
    tool_message = requests[1].messages[-1]
    assert tool_message["role"] == "tool"
    return host, turn, tool_message["content"]


@pytest.mark.parametrize("tool, raised", [("exits", "SystemExit"), ("interrupts", "KeyboardInterrupt"), ("cancels", "CancelledError")])
async def test_a_tool_raising_what_is_no_exception_fails_its_call_and_the_turn_and_host_go_on(skald, caplog, tool, raised):
    caplog.set_level(logging.ERROR, logger="skald_host.core.plugins.failures")
    host, turn, seen_by_model = await run_tool(skald, tool)

    match = re.fullmatch(rf"Error: the tool failed: it raised {raised} \(error id ([0-9a-f]{{12}})\); .*", seen_by_model)
    assert match, seen_by_model
    assert (turn.tool_results[0].status, turn.text) == ("error", "I see.")
    [failure] = host.core.plugins.status("exits").failures
    assert (failure["error_id"], failure["tool"]) == (match.group(1), tool)
    assert raised in failure["traceback"] and f"in {tool}" in failure["traceback"]
    assert match.group(1) in caplog.text
    assert (await host.client().get("/health")).json() == {"status": "ok"}


async def test_a_lone_surrogate_in_a_tools_result_is_replaced_and_the_turn_completes(skald):
    host, turn, seen_by_model = await run_tool(skald, "surrogate")

    assert seen_by_model == "bad \ufffd and good \U0001f600"  # a pair of surrogates is the character it spells
    assert (turn.tool_results[0].status, turn.tool_results[0].result, turn.text) == ("done", seen_by_model, "I see.")
    assert list(host.core.plugins.status("exits").failures) == []


async def test_a_lone_surrogate_in_a_tool_errors_words_is_replaced_too(skald):
    _, turn, seen_by_model = await run_tool(skald, "worded_surrogate")

    assert seen_by_model == "Error: no \ufffd here"
    assert (turn.tool_results[0].status, turn.text) == ("error", "I see.")


async def test_a_route_returning_what_quart_cannot_send_says_so_on_the_plugins_page(skald):
    host = await skald.start(plugins=[Exits()], enable=["exits"])
    alice = await host.member("alice")
    admin = await host.admin()
    for path in ("/object", "/triple"):
        answer = await alice.get(f"/api/plugin/exits{path}")
        assert answer.status_code == 500 and answer.json()["code"] == "internal_error", answer.text

    failures = {f["where"]: f["traceback"] for f in (await admin.get("/api/admin/plugins/exits")).json()["failures"]}
    said = failures["route GET /api/plugin/exits/object"]
    assert "the route returned object; a route returns a Response, str, bytes, dict, list" in said, said
    assert "message withheld" not in said and f"the view is at {__file__}:" in said
    assert "the route returned a tuple of 4 items" in failures["route GET /api/plugin/exits/triple"]


# -- at startup, at registration, at import ---------------------------------------------------


class ExitsAtStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("exits-at-startup")

    @hookimpl
    async def startup(self, host) -> None:
        sys.exit(2)


class InterruptsAtStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("interrupts-at-startup")

    @hookimpl
    def startup(self, host) -> None:
        raise KeyboardInterrupt


async def test_a_startup_that_exits_marks_the_plugin_failed_and_the_host_goes_on(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[ExitsAtStartup(), InterruptsAtStartup(), bystander])

    await host.core.set_plugin_enabled("exits-at-startup", True)  # it ended the server
    await host.core.set_plugin_enabled("interrupts-at-startup", True)

    for plugin_id, error in [("exits-at-startup", "startup raised SystemExit(2)"), ("interrupts-at-startup", "startup raised KeyboardInterrupt()")]:
        status = host.core.plugins.status(plugin_id)
        assert (status.healthy, status.started, status.error) == (False, False, error)
    await assert_host_and_bystanders_work(host, bystander)


class ExitsInRegistration:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("exits-in-registration")

    @hookimpl
    def register_tools(self, register) -> None:
        sys.exit("cannot go on")


async def test_a_registration_hook_that_exits_fails_its_plugin_to_load(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[ExitsInRegistration(), bystander])

    status = host.core.plugins.status("exits-in-registration")
    assert (status.state, status.error) == ("failed", "register_tools: raised SystemExit('cannot go on')")
    await assert_host_and_bystanders_work(host, bystander)


EXITS_AT_IMPORT = """\
import sys

sys.exit(2)
"""


def test_a_plugin_that_exits_at_import_fails_to_load_naming_where(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.ERROR, logger="skald_host.core.plugins.manager")
    package = _package(tmp_path, "skald_exits_at_import", {"__init__.py": EXITS_AT_IMPORT})
    monkeypatch.syspath_prepend(str(tmp_path))
    manager = PluginManager(builtins=["skald_exits_at_import", "skald_host.builtins.strings"], use_entry_points=False)

    manager.load()  # it raised SystemExit out of here: `skald serve` ended with a bare "2"

    status = manager.status("skald_exits_at_import")
    assert status.state == "failed"
    assert status.error == f"import: raised SystemExit(2) (at {package / '__init__.py'}:3)"
    assert "plugin skald_exits_at_import failed to load: import: raised SystemExit(2)" in caplog.text
    assert manager.status("strings").state == "loaded"


class ExitsInMemberHooks:
    """Every other hook the host calls after start-up, by the same rule: a per-member
    hook's ``sys.exit()`` ended the server at the member's sign-in or next round."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("exits-in-member-hooks")

    @hookimpl
    async def member_unlocked(self, member_id, host) -> None:
        sys.exit(3)

    @hookimpl
    def member_tools(self, member_id):
        raise KeyboardInterrupt


async def test_per_member_hooks_that_exit_are_recorded_and_the_host_goes_on(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[ExitsInMemberHooks(), bystander], enable=["exits-in-member-hooks"])
    server = await skald.model_server(Reply("still here"))
    await host.use_model(server)

    turn = await (await host.member("alice")).chat("hello")  # the sign-in unlocks; the round asks member_tools

    assert turn.text == "still here"
    where = {f["where"] for f in host.core.plugins.status("exits-in-member-hooks").failures}
    assert {"hook member_unlocked", "hook member_tools"} <= where, where
    await assert_host_and_bystanders_work(host, bystander)

"""What a plugin author gets told when a hook misbehaves in ways a timeout or an
exception handler cannot see by itself: a hook that blocks the event loop (a plain
``def`` that sleeps), a registration error's exception type, the place in the plugin's
code in strict mode, a ``Tool.run`` that is not async, and a ``member_tools`` hook that
raises with a member's data in its message or returns something that is not a list.

Built from the throwaway-plugin helpers of ``test_isolation.py``."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import time
from typing import Any

import pytest

from skald_hookspecs import hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo, Tool
from skald_host.core.agent.tools import ToolRegistry, validate_tool
from skald_host.core.plugins import manager as manager_module
from skald_host.core.plugins.manager import PluginError, PluginManager, StrictPluginFailure

from .test_isolation import Bystander, _validate_tool, info

BLOCKED = re.escape(" (a hook must not block: make it async and await, or run blocking work in a thread)")
MEMBER_WORDS = "Aunt Ingrid's diagnosis 7f3c"


def held_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "held the event loop" in r.getMessage()]


# -- a hook that blocks the event loop ------------------------------------------------------


class SyncStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("sync-sleeper")

    @hookimpl
    def startup(self, host) -> None:
        time.sleep(0.8)


class AsyncStartupThatNeverAwaits:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("async-sleeper")

    @hookimpl
    async def startup(self, host) -> None:
        time.sleep(0.8)


class BrieflySlowStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("brief-sleeper")

    @hookimpl
    def startup(self, host) -> None:
        time.sleep(0.6)


@pytest.mark.parametrize("plugin", [SyncStartup(), AsyncStartupThatNeverAwaits()], ids=["def", "async-def"])
async def test_a_startup_that_blocks_past_the_hook_timeout_leaves_the_plugin_unhealthy(skald, caplog, plugin):
    caplog.set_level(logging.WARNING)
    plugin_id = plugin.plugin_info().id
    host = await skald.start(plugins=[plugin], settings=skald.settings(plugins={"hook_timeout_seconds": 0.5}))

    await host.core.set_plugin_enabled(plugin_id, True)

    status = host.core.plugins.status(plugin_id)
    assert (status.healthy, status.started) == (False, False)
    assert re.fullmatch(r"startup: blocked the server for 0\.[89] s" + BLOCKED, status.error), status.error
    assert any(line.startswith(f"plugin {plugin_id}: hook startup held the event loop for 0.") for line in held_warnings(caplog))


class LongSyncStartup(SyncStartup):
    @hookimpl
    def startup(self, host) -> None:
        time.sleep(1.5)


class PatientStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("patient")

    @hookimpl
    async def startup(self, host) -> None:
        await asyncio.sleep(0.6)  # within its 1 s, however long another plugin held the loop


async def test_a_startup_that_blocks_at_boot_fails_only_its_own_plugin(skald):
    """Every plugin's ``startup`` runs side by side at boot: the one that blocks the
    loop fails, and the time it held does not count against the others' limits."""
    settings = skald.settings(plugins={"hook_timeout_seconds": 1.0})
    host = await skald.start(plugins=[PatientStartup(), LongSyncStartup()], settings=settings, enable=["patient", "sync-sleeper"])
    await host.stop()
    host = await skald.start(plugins=[PatientStartup(), LongSyncStartup()], settings=settings)  # both enabled: started at boot

    patient = host.core.plugins.status("patient")
    assert (patient.healthy, patient.started, patient.error) == (True, True, None)
    blocked = host.core.plugins.status("sync-sleeper")
    assert (blocked.healthy, blocked.started) == (False, False)
    assert blocked.error.startswith("startup: blocked the server for 1."), blocked.error


async def test_a_sync_hook_that_blocks_briefly_is_logged_and_the_plugin_stays_healthy(skald, caplog):
    caplog.set_level(logging.WARNING)
    host = await skald.start(plugins=[BrieflySlowStartup()])

    await host.core.set_plugin_enabled("brief-sleeper", True)

    status = host.core.plugins.status("brief-sleeper")
    assert (status.healthy, status.started, status.error) == (True, True, None)
    assert [line.split(" for ")[0] for line in held_warnings(caplog)] == ["plugin brief-sleeper: hook startup held the event loop"]


class BlockingBundle:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("blocking-bundle")

    @hookimpl
    def register_i18n(self, register) -> None:
        time.sleep(0.5)
        register(I18nBundle("blocking-bundle", {"en": {"late": "too late"}}))


async def test_a_register_hook_that_blocks_past_the_hook_timeout_fails_the_plugin(caplog):
    """A plain ``def`` register hook runs in a thread of its own (``THREADED_HOOKS``): cut
    off at the timeout, it never holds the event loop, and what it registers late is
    not accepted."""
    caplog.set_level(logging.WARNING)
    manager = PluginManager(extra=[BlockingBundle()], use_entry_points=False, hook_timeout=0.3)
    manager.load()

    accepted = await manager.collect("register_i18n", lambda plugin_id, args: args[0], kind="bundle")

    assert accepted == []
    status = manager.status("blocking-bundle")
    assert status.state == "failed"
    assert status.error == "register_i18n did not finish within 0.3 s", status.error
    assert held_warnings(caplog) == []


async def test_a_quick_hook_is_not_reported(caplog):
    caplog.set_level(logging.WARNING)
    manager = PluginManager(extra=[Bystander()], use_entry_points=False)
    manager.load()
    await manager.collect("register_i18n", lambda plugin_id, args: args[0])
    await manager.call_one("startup", "bystander", host=None)
    assert held_warnings(caplog) == []


class SlowRegistration:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("slow-registration")

    @hookimpl
    def register_i18n(self, register) -> None:
        time.sleep(2.3)  # in a thread of its own: no event loop held, and within the timeout
        register(I18nBundle("slow-registration", {"en": {"late": "in time"}}))


async def test_a_register_hook_that_slows_the_start_is_a_problem_on_the_plugins_page(skald, caplog):
    caplog.set_level(logging.WARNING)
    host = await skald.start(plugins=[SlowRegistration()], enable=["slow-registration"])
    admin = await host.admin()

    status = host.core.plugins.status("slow-registration")
    assert (status.state, status.healthy, status.error) == ("loaded", True, None)
    (card,) = [p for p in (await admin.get("/api/admin/plugins")).json()["plugins"] if p["id"] == "slow-registration"]
    assert card["problems"] == 1
    (problem,) = (await admin.get("/api/admin/plugins/slow-registration")).json()["failures"]
    assert problem["where"] == "hook register_i18n" and 2.3 <= problem["took_seconds"] < 5
    assert problem["message"].startswith(f"register_i18n took {problem['took_seconds']:.1f} s at the server's start")
    # One English text, not two worded differently (``message`` and ``traceback``).
    assert problem["traceback"] == problem["message"]
    (german,) = (await host.core.catalog.detail("slow-registration", "de"))["failures"]
    # Seconds in the reader's number format: "2,3 s", not the English "2.3 s".
    seconds = f"{problem['took_seconds']:.1f}".replace(".", ",")
    assert german["message"].startswith(f"register_i18n brauchte beim Start des Servers {seconds} s"), german["message"]
    assert any("register_i18n took 2." in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert held_warnings(caplog) == []  # it held no event loop: slow, not blocking


class BlockingInfo:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        time.sleep(3)
        return info("blocking-info")


async def test_a_plugin_info_that_blocks_past_the_hook_timeout_fails_the_plugin_naming_it():
    """``plugin_info`` was called directly: one that slept 12 s held the boot for 12 s,
    said nothing, and the plugin read "loaded, healthy". It is bounded like every hook."""
    manager = PluginManager(extra=[Bystander(), BlockingInfo()], use_entry_points=False, hook_timeout=0.5)
    began = time.perf_counter()
    manager.load()

    assert time.perf_counter() - began < 2
    (status,) = [s for s in manager.statuses() if s.name == "BlockingInfo"]
    assert (status.state, status.healthy) == ("failed", False)
    assert status.error.startswith("plugin 'BlockingInfo': plugin_info did not finish within 0.5 s"), status.error
    assert manager.status("bystander").state == "disabled"  # the others load on


SLOW_MODULE = """
import time

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo

time.sleep(0.5)  # a heavy library imported at the top


@hookimpl
def plugin_info():
    time.sleep(0.5)
    return PluginInfo(id="slow-start", title="Slow start", spec=">=1,<2")
"""


async def test_a_slow_plugin_info_is_a_problem_on_the_plugins_page_a_slow_import_a_log_line(skald, tmp_path, monkeypatch, caplog):
    """plugin_info held every start of the server, as a slow register hook does, and
    said nothing. The module's slow import is not a problem (``problems`` is 1): a
    speech model's plugin imports for seconds on a small machine and is not broken."""
    monkeypatch.setattr(manager_module, "SLOW_HOOK_SECONDS", 0.3)
    (tmp_path / "slow_start_plugin.py").write_text(SLOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    caplog.set_level(logging.WARNING)
    host = await skald.start(plugins=["slow_start_plugin"], enable=["slow-start"])
    admin = await host.admin()

    assert host.core.plugins.status("slow-start").state == "loaded"
    (card,) = [p for p in (await admin.get("/api/admin/plugins")).json()["plugins"] if p["id"] == "slow-start"]
    assert card["problems"] == 1
    (asked,) = (await admin.get("/api/admin/plugins/slow-start")).json()["failures"]
    assert asked["where"] == "hook plugin_info" and 0.5 <= asked["took_seconds"] < 2
    assert asked["message"].startswith(f"plugin_info took {asked['took_seconds']:.1f} s at the server's start")
    assert asked["traceback"] == asked["message"]
    (german,) = (await host.core.catalog.detail("slow-start", "de"))["failures"]
    assert german["message"].startswith(f"plugin_info brauchte beim Start des Servers {asked['took_seconds']:.1f} s".replace(".", ","))
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "slow" in r.getMessage()]
    assert any("plugin_info took" in line for line in logged)


# -- registration errors name the exception's type ---------------------------------------


class KeyErrorPages:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("key-error-pages")

    @hookimpl
    def register_web_pages(self, register) -> None:
        raise KeyError("x")


async def test_a_registration_error_names_the_exception_type():
    manager = PluginManager(extra=[KeyErrorPages()], use_entry_points=False)
    manager.load()

    await manager.collect("register_web_pages", lambda plugin_id, args: args[0], kind="page")

    assert manager.status("key-error-pages").error == "register_web_pages: KeyError: 'x'"


# -- strict mode points into the plugin's code ----------------------------------------------


class DuplicateTools:
    """Registers the same tool twice: the host's own check refuses the second."""

    line = 0

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("duplicate-tools")

    @hookimpl
    def register_tools(self, register) -> None:
        register(_tool("twice"))
        DuplicateTools.line = inspect.currentframe().f_lineno + 1
        register(_tool("twice"))


async def test_strict_mode_reports_the_plugins_line_not_the_hosts_validation():
    manager = PluginManager(extra=[DuplicateTools()], use_entry_points=False, strict=True)
    manager.load()

    with pytest.raises(StrictPluginFailure) as raised:
        await manager.collect("register_tools", _validate_tool, key=lambda tool: tool.name, kind="tool")

    assert str(raised.value).endswith(f" (at {__file__}:{DuplicateTools.line})"), str(raised.value)


# -- Tool.run must be async -------------------------------------------------------------------


async def _async_run(args: Any, ctx: Any) -> str:
    return "ok"


def _sync_run(args: Any, ctx: Any) -> str:
    return "ok"


class _AsyncCallable:
    async def __call__(self, args: Any, ctx: Any) -> str:
        return "ok"


class _SyncCallable:
    def __call__(self, args: Any, ctx: Any) -> str:
        return "ok"


def _tool(name: str, run: Any = _async_run) -> Tool:
    return Tool(name=name, description=name, parameters={"type": "object"}, run=run)


@pytest.mark.parametrize(
    "run", [_async_run, functools.partial(_async_run), _AsyncCallable(), functools.partial(_AsyncCallable())],
    ids=["async-def", "partial", "async-call-object", "partial-of-object"],
)
def test_an_async_tool_run_is_accepted(run):
    assert validate_tool("p", (_tool("fine", run),)).name == "fine"


@pytest.mark.parametrize("run", [_sync_run, _SyncCallable(), functools.partial(_sync_run), lambda args, ctx: "ok"],
                         ids=["def", "sync-call-object", "partial", "lambda"])
def test_a_sync_tool_run_is_refused_at_registration(run):
    with pytest.raises(PluginError, match=r"^tool 'plain': run must be an async callable \(async def\)$"):
        validate_tool("p", (_tool("plain", run),))


class SyncRunTool:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("sync-run")

    @hookimpl
    def register_tools(self, register) -> None:
        register(_tool("plain", _sync_run))


async def test_a_plugin_registering_a_sync_run_is_failed_with_a_readable_error():
    manager = PluginManager(extra=[SyncRunTool()], use_entry_points=False)
    manager.load()

    assert await manager.collect("register_tools", validate_tool, key=lambda tool: tool.name, kind="tool") == []

    assert manager.status("sync-run").error == "register_tools: tool 'plain': run must be an async callable (async def)"


# -- member_tools failures: withheld, on the plugin's page, said once ----------------------------


class MemberToolsOf:
    """``member_tools`` answers with ``result`` or, when it is an exception, raises it."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.calls = 0

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("member-tooler", spec=">=1.2,<2")

    @hookimpl
    def member_tools(self, member_id: str) -> Any:
        self.calls += 1
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def registry_with(plugin: MemberToolsOf) -> tuple[ToolRegistry, PluginManager]:
    manager = PluginManager(extra=[plugin], use_entry_points=False)
    manager.load()
    return ToolRegistry([], plugins=manager), manager


def test_a_raising_member_tools_is_on_the_plugins_page_with_its_message_withheld(caplog):
    caplog.set_level(logging.DEBUG)
    registry, manager = registry_with(MemberToolsOf(RuntimeError(f"cannot list tools for {MEMBER_WORDS}")))

    assert registry.member_tools("m-1", usable=lambda plugin_id: True) == []

    failures = list(manager.status("member-tooler").failures)
    assert [f["where"] for f in failures] == ["hook member_tools"]
    assert "RuntimeError (message withheld" in failures[0]["traceback"]
    assert MEMBER_WORDS not in failures[0]["traceback"]
    assert MEMBER_WORDS not in caplog.text
    assert failures[0]["error_id"] in caplog.text


def test_a_member_tools_returning_a_string_is_refused_in_one_line_once(caplog):
    caplog.set_level(logging.DEBUG)
    plugin = MemberToolsOf("not tools")
    registry, manager = registry_with(plugin)

    for _ in range(3):  # three model rounds
        assert registry.member_tools("m-1", usable=lambda plugin_id: True) == []

    assert plugin.calls == 3
    failures = list(manager.status("member-tooler").failures)
    assert len(failures) == 1
    assert failures[0]["traceback"].endswith("PluginError: member_tools returned str; expected a list of Tool")
    assert "register() expects one Tool" not in caplog.text
    assert caplog.text.count("member_tools returned str") == 1

    plugin.result = [_tool("fixed")]  # mended: offered again; a later relapse is told again
    assert [t.name for t in registry.member_tools("m-1", usable=lambda plugin_id: True)] == ["fixed"]
    plugin.result = 42
    registry.member_tools("m-1", usable=lambda plugin_id: True)
    latest = manager.status("member-tooler").failures[-1]
    assert latest["traceback"].endswith("PluginError: member_tools returned int; expected a list of Tool")


def test_a_member_tools_list_of_wrong_items_is_told_once_naming_the_hook_on_the_plugins_page(caplog):
    """``["not a tool", 42]`` was logged in every round as "member tool refused: register()
    expects one Tool" (no register() was called), and its page showed nothing."""
    caplog.set_level(logging.DEBUG)
    plugin = MemberToolsOf(["not a tool", 42, _tool("kept")])
    registry, manager = registry_with(plugin)

    for _ in range(3):  # three model rounds
        assert [t.name for t in registry.member_tools("m-1", usable=lambda plugin_id: True)] == ["kept"]

    failures = list(manager.status("member-tooler").failures)
    assert [f["where"] for f in failures] == ["hook member_tools"]
    said = "member_tools returned a list holding str, int where only Tool objects belong; those items were left out"
    assert failures[0]["traceback"].endswith(f"PluginError: {said}")
    assert caplog.text.count(said) == 1
    assert failures[0]["error_id"] in caplog.text
    assert "register()" not in caplog.text

    # A tool it cannot offer is said in the same way, with what is wrong with it.
    plugin.result = [_tool("bad name")]
    registry.member_tools("m-1", usable=lambda plugin_id: True)
    latest = manager.status("member-tooler").failures[-1]
    assert "member_tools returned a list holding a tool it cannot offer (tool name 'bad name' must be" in latest["traceback"]
    # Mended: nothing more is told, and a relapse is told again.
    plugin.result = [_tool("kept")]
    registry.member_tools("m-1", usable=lambda plugin_id: True)
    plugin.result = ["again"]
    registry.member_tools("m-1", usable=lambda plugin_id: True)
    assert manager.status("member-tooler").failures[-1]["traceback"].endswith("holding str where only Tool objects belong; those items were left out")
    assert len(manager.status("member-tooler").failures) == 3


def test_a_member_tools_failing_every_round_is_one_entry_with_a_count_and_keeps_earlier_failures(caplog):
    """A broken connector's ``member_tools`` raised in every model round: an ERROR with a
    traceback and a new error id each time, and the plugin's list (the latest 20) held
    only copies, its earlier failures pushed out; the card's count was the list's length."""
    caplog.set_level(logging.DEBUG)
    plugin = MemberToolsOf(ConnectionError("the connector is down"))
    registry, manager = registry_with(plugin)
    now = [1000.0]
    manager.clock = lambda: now[0]  # the folding window, measured without waiting
    manager.record_failure("member-tooler", {"error_id": "earlier0000a", "where": "hook member_unlocked", "at": "", "traceback": ""})

    for _ in range(30):  # thirty model rounds within the minute
        assert registry.member_tools("m-1", usable=lambda plugin_id: True) == []

    status = manager.status("member-tooler")
    failures = list(status.failures)
    assert [f["where"] for f in failures] == ["hook member_unlocked", "hook member_tools"]  # the earlier one kept
    assert failures[1]["repeats"] == 29 and failures[1]["last_at"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and failures[1]["error_id"] in errors[0]  # logged once, under the entry's id
    assert status.as_dict()["problems"] == 31  # every failure counted, not the list's length

    now[0] += 61  # a minute later it is listed (and logged) again, once
    registry.member_tools("m-1", usable=lambda plugin_id: True)
    registry.member_tools("m-1", usable=lambda plugin_id: True)
    failures = list(status.failures)
    assert len(failures) == 3 and failures[2]["repeats"] == 1
    assert status.as_dict()["problems"] == 33

    # Another error type of the same hook is its own entry.
    plugin.result = KeyError("x")
    registry.member_tools("m-1", usable=lambda plugin_id: True)
    assert len(status.failures) == 4 and "repeats" not in status.failures[-1]

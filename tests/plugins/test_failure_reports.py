"""How a plugin's load failure reads: never ``healthy`` once failed, the hook it came
from and the keyword that was meant in its error, and where in its code in the log."""

from __future__ import annotations

import asyncio
import inspect
import logging

import pytest

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet, PluginInfo, Tool
from skald_host.core.plugins.manager import PluginManager, StrictPluginFailure

from .test_isolation import info


class WantsTheFuture:
    """Refused at ``plugin_info``: a spec range this host cannot satisfy."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("future", spec=">=2,<3")


class MisspeltHook:
    """Refused for a hook that does not exist."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("misspelt")

    @hookimpl
    def register_toolz(self, register) -> None:
        pass


class ToolsRaise:
    """Fails in a ``register_*`` hook."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("broken")

    @hookimpl
    def register_tools(self, register) -> None:
        {}["missing"]  # the KeyError


@pytest.mark.parametrize("plugin_id", ["future", "misspelt", "broken"])
async def test_a_failed_plugin_never_reads_healthy(skald, plugin_id):
    host = await skald.start(plugins=[WantsTheFuture(), MisspeltHook(), ToolsRaise()])
    admin = await host.admin()

    detail = (await admin.get(f"/api/admin/plugins/{plugin_id}")).json()
    listed = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}[plugin_id]

    assert (detail["state"], detail["healthy"]) == ("failed", False)
    assert (listed["state"], listed["healthy"]) == ("failed", False)


class MisspeltFieldInInfo:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("typo-info", config_schema=(ConfigField("speed", "choice", choice=("fast", "slow")),))  # the TypeError


class MisspeltFieldInSet:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("typo-set")

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet(id="typo-set", title="Typo", fields=(ConfigField("speed", "choice", choice=("fast", "slow")),)))


MISSPELT = "TypeError: ConfigField.__init__() got an unexpected keyword argument 'choice' (did you mean 'choices'?)"


async def test_a_misspelt_keyword_names_the_hook_and_the_keyword_meant(skald):
    host = await skald.start(plugins=[MisspeltFieldInInfo(), MisspeltFieldInSet()])
    admin = await host.admin()

    in_info = (await admin.get("/api/admin/plugins/MisspeltFieldInInfo")).json()
    in_set = (await admin.get("/api/admin/plugins/typo-set")).json()

    assert (in_info["state"], in_info["error"]) == ("failed", f"plugin_info: {MISSPELT}")
    assert (in_set["state"], in_set["error"]) == ("failed", f"register_config_sets: {MISSPELT}")


class MisspeltToolKeyword:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("typo-tool")

    @hookimpl
    def register_tools(self, register) -> None:
        register(Tool(name="t", description="d", parameter={}, fn=lambda: None))


async def test_a_keyword_like_no_field_is_named_without_a_guess(skald):
    host = await skald.start(plugins=[MisspeltToolKeyword()])

    error = host.core.plugins.status("typo-tool").error

    assert error.startswith("register_tools: TypeError: Tool.__init__() got an unexpected keyword argument")
    assert error.endswith("(did you mean 'parameters'?)")


def _line_of(comment: str) -> int:
    """The line of this file that ends with ``comment``."""
    lines = open(__file__, encoding="utf-8").read().splitlines()
    return next(number for number, line in enumerate(lines, 1) if line.endswith(comment))


async def test_the_log_line_of_a_failed_plugin_says_where_in_its_code(skald, caplog):
    caplog.set_level(logging.ERROR, logger="skald_host.core.plugins.manager")

    await skald.start(plugins=[ToolsRaise(), MisspeltFieldInInfo()])

    lines = [r.getMessage() for r in caplog.records if r.name == "skald_host.core.plugins.manager"]
    assert f"plugin broken failed: register_tools: KeyError: 'missing' (at {__file__}:{_line_of('# the KeyError')})" in lines
    assert f"plugin MisspeltFieldInInfo failed to load: plugin_info: {MISSPELT} (at {__file__}:{_line_of('# the TypeError')})" in lines


# -- a refusal of the plugin's function points at the function -------------------------------


class WrongArgument:
    """Its ``startup`` asks for ``hostapi``; the hook passes ``host``."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("badsig")

    @hookimpl
    def startup(self, hostapi) -> None:
        pass


class ReturnsItsBlueprint:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("returner")

    @hookimpl
    def register_routes(self, register):
        from quart import Blueprint

        return Blueprint("returner", __name__)  # meant: register(blueprint)


def _defined_at(function) -> str:
    return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"


WRONG_ARGUMENT = "startup(hostapi): the hook takes (host); 'hostapi' is not one of its arguments"
RETURNED = "register_routes returned a Blueprint: call register(blueprint) instead; the return value is ignored"


async def test_a_hook_asking_for_an_argument_it_is_not_passed_says_which_and_where(skald, caplog):
    caplog.set_level(logging.ERROR, logger="skald_host.core.plugins.manager")

    host = await skald.start(plugins=[WrongArgument(), ReturnsItsBlueprint()])

    assert (host.core.plugins.status("badsig").state, host.core.plugins.status("badsig").error) == ("failed", WRONG_ARGUMENT)
    lines = [r.getMessage() for r in caplog.records if r.name == "skald_host.core.plugins.manager"]
    assert f"plugin badsig failed to load: {WRONG_ARGUMENT} (at {_defined_at(WrongArgument.startup)})" in lines
    assert f"plugin returner failed: {RETURNED} (at {_defined_at(ReturnsItsBlueprint.register_routes)})" in lines


async def test_strict_mode_names_the_hook_and_the_plugins_function_it_refused():
    with pytest.raises(StrictPluginFailure) as wrong_argument:
        PluginManager(extra=[WrongArgument()], use_entry_points=False, strict=True).load()
    returner = PluginManager(extra=[ReturnsItsBlueprint()], use_entry_points=False, strict=True)
    returner.load()
    with pytest.raises(StrictPluginFailure) as returned:
        await returner.collect("register_routes", lambda plugin_id, args: args[0], extra=lambda plugin_id: {"host": None})

    assert str(wrong_argument.value) == (
        f"plugin 'badsig' failed in registration: {WRONG_ARGUMENT} (at {_defined_at(WrongArgument.startup)})"
    )
    assert str(returned.value) == (
        f"plugin 'returner' failed in register_routes: {RETURNED}"
        f" (at {_defined_at(ReturnsItsBlueprint.register_routes)})"
    )


async def test_a_misspelt_hook_name_suggests_the_hook_meant(skald):
    host = await skald.start(plugins=[MisspeltHook()])

    error = host.core.plugins.status("misspelt").error

    assert error == "plugin 'misspelt' implements unknown hook 'register_toolz' (did you mean 'register_tools'? see skald_hookspecs.hookspecs)"


# -- the place in a failure's log line is the plugin's own code, or none ------------------------


class SlowStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("slow-start")

    @hookimpl
    async def startup(self, host) -> None:
        await asyncio.sleep(30)


async def test_a_startup_timeout_names_no_place_in_the_standard_library(skald, caplog):
    caplog.set_level(logging.ERROR, logger="skald_host.core.host")
    host = await skald.start(plugins=[SlowStartup()], settings=skald.settings(plugins={"hook_timeout_seconds": 0.3}))

    await host.core.set_plugin_enabled("slow-start", True)

    lines = [r.getMessage() for r in caplog.records if r.name == "skald_host.core.host"]
    assert lines == ["plugin slow-start failed to start: startup did not finish within 0.3 s"], lines


def test_a_missing_module_names_no_place_in_the_standard_library():
    manager = PluginManager(builtins=["skald_no_such_plugin_module"], use_entry_points=False)  # a module by name
    manager.load()

    error = manager.status("skald_no_such_plugin_module").error

    assert error == "import: ModuleNotFoundError: No module named 'skald_no_such_plugin_module'"


# -- a file that does not compile: its full path and line, as for any other failure ---------


SYNTAX_ERROR = """\
from skald_hookspecs import PluginInfo, hookimpl


@hookimpl
def plugin_info():
    await something()
"""


def _package(root, name: str, files: dict[str, str]):
    package = root / name
    package.mkdir()
    for file, source in files.items():
        (package / file).write_text(source, encoding="utf-8")
    return package


def test_a_syntax_error_names_the_whole_path_and_line_in_the_log_and_in_strict_mode(tmp_path, monkeypatch, caplog):
    """Python's message names the file's base name only (``(__init__.py, line 6)``), and
    no frame of the traceback is the plugin's: the log line said no "(at …)" at all."""
    caplog.set_level(logging.ERROR, logger="skald_host.core.plugins.manager")
    package = _package(tmp_path, "skald_syntax_error_plugin", {"__init__.py": SYNTAX_ERROR})
    monkeypatch.syspath_prepend(str(tmp_path))

    PluginManager(builtins=["skald_syntax_error_plugin"], use_entry_points=False).load()

    [line] = [r.getMessage() for r in caplog.records if "skald_syntax_error_plugin failed to load" in r.getMessage()]
    assert line.startswith("plugin skald_syntax_error_plugin failed to load: import: SyntaxError: 'await' outside"), line
    assert line.endswith(f" (at {package / '__init__.py'}:6)"), line
    with pytest.raises(StrictPluginFailure) as raised:
        PluginManager(builtins=["skald_syntax_error_plugin"], use_entry_points=False, strict=True).load()
    assert str(raised.value).endswith(f" (at {package / '__init__.py'}:6)"), str(raised.value)


def test_a_syntax_error_in_a_module_the_plugin_imports_names_that_module(tmp_path, monkeypatch):
    """Not the plugin's line that imported it: the line that does not compile."""
    package = _package(tmp_path, "skald_syntax_error_deeper", {"__init__.py": "from . import tools  # noqa\n", "tools.py": "\n\ndef f(:\n    pass\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    manager = PluginManager(builtins=["skald_syntax_error_deeper"], use_entry_points=False)
    manager.load()

    error = manager.status("skald_syntax_error_deeper").error

    assert error.startswith("import: SyntaxError: "), error
    assert error.endswith(f" (at {package / 'tools.py'}:3)"), error

"""What a plugin declares is checked when it registers, not when it is first used: a
config schema that cannot work, a ``register_*`` hook that returns its contribution
instead of registering it, an ``async def member_tools`` and a page entry outside the
plugin's own routes each fail that plugin, with a message saying what to change, while
the host and the other plugins keep serving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from quart import Blueprint

from skald_hookspecs import hookimpl
from skald_hookspecs.system_agents import SystemAgent
from skald_hookspecs.types import ConfigField, ConfigSet, PluginInfo, Tool, WebPage
from skald_host.core.plugins.manager import PluginManager

from .test_isolation import Bystander, assert_host_and_bystanders_work, info


def loaded(*plugins: Any) -> PluginManager:
    manager = PluginManager(extra=plugins, use_entry_points=False)
    manager.load()
    return manager


# -- config schemas -------------------------------------------------------------------------


class Configured:
    def __init__(self, plugin_id: str, **schemas: Any) -> None:
        self.info = info(plugin_id, **schemas)

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return self.info


BAD_FIELDS = {
    "unknown type": (
        (ConfigField("n", "int", default=3),),  # type: ignore[arg-type]
        "field 'n' has the unknown type 'int' (did you mean 'integer'?): use one of string, integer, number, boolean, choice, url",
    ),
    "choice without choices": (
        (ConfigField("level", "choice"),),
        "field 'level' is a choice without choices: give choices=(...), the values the admin may pick",
    ),
    "default outside the bounds": (
        (ConfigField("count", "integer", default=500, maximum=10),),
        "field 'count' has the default 500, which its own checks refuse (must be at most 10): change the default or the field",
    ),
    "a name twice": (
        (ConfigField("token"), ConfigField("token", secret=True)),
        "field 'token' is declared twice: give each field a name of its own",
    ),
    "a pattern that does not compile": (
        (ConfigField("code", description="Small letters.", pattern="[a-z"),),
        "field 'code' has a pattern that is no regular expression (unterminated character set at position 0): '[a-z'",
    ),
    "a pattern on a number": (
        (ConfigField("count", "integer", description="A number.", pattern=r"\d+"),),
        "field 'count' has a pattern but is of type 'integer': a pattern checks the text of a string or url field",
    ),
    "a pattern without a description": (
        (ConfigField("code", pattern="[a-z]+"),),
        "field 'code' has a pattern but no description: say the form it asks for in words there (a refused value points at it)",
    ),
    "a default the pattern refuses": (
        (ConfigField("code", default="ABC", description="Small letters.", pattern="[a-z]+"),),
        "field 'code' has the default 'ABC', which its own checks refuse (does not have the form its hint describes): change the default or the field",
    ),
}


@pytest.mark.parametrize("schema", ["config_schema", "user_config_schema"])
@pytest.mark.parametrize("case", BAD_FIELDS, ids=list(BAD_FIELDS))
def test_a_schema_that_cannot_work_fails_its_plugin_at_load_naming_the_field(case: str, schema: str) -> None:
    fields, problem = BAD_FIELDS[case]
    manager = loaded(Configured("schemed", **{schema: fields}), Bystander())

    status = manager.status("schemed")
    assert (status.state, status.error) == ("failed", f"plugin 'schemed': {schema}: {problem}")
    assert manager.status("bystander").state == "disabled"  # loaded, waiting to be enabled


def test_a_schema_that_can_work_is_accepted() -> None:
    fields = (
        ConfigField("mode", "choice", choices=("fast", "slow"), default="fast"),
        ConfigField("count", "integer", default=5, minimum=1, maximum=10),
        ConfigField("name", "string", required=True, default=""),
        ConfigField("site", "url", default="https://example.org"),
    )
    assert loaded(Configured("fine", config_schema=fields)).status("fine").state == "disabled"


class RegistersASet:
    def __init__(self, plugin_id: str, config_set: ConfigSet) -> None:
        self.plugin_id, self.config_set = plugin_id, config_set

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(self.config_set)


async def test_a_bad_field_of_a_settings_set_fails_its_plugin_and_the_host_serves(skald):
    broken = RegistersASet("leveled", ConfigSet("levels", "Levels", (ConfigField("level", "choice"),)))
    bystander = Bystander()
    host = await skald.start(plugins=[broken, bystander])

    status = host.core.plugins.status("leveled")
    assert (status.state, status.error) == (
        "failed",
        "register_config_sets: settings set 'levels': field 'level' is a choice without choices:"
        " give choices=(...), the values the admin may pick",
    )
    assert "levels" not in {c.value.id for c in host.core.config_sets}
    await assert_host_and_bystanders_work(host, bystander)


async def test_the_catalog_card_of_a_plugin_with_a_bad_schema_says_what_to_change(skald):
    host = await skald.start(plugins=[Configured("schemed", config_schema=(ConfigField("n", "int", default=3),))])  # type: ignore[arg-type]
    admin = await host.admin()

    card = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}["schemed"]
    assert card["state"] == "failed"
    assert "config_schema: field 'n' has the unknown type 'int'" in card["error"]
    assert (await host.client().get("/health")).json() == {"status": "ok"}


class Q(Configured):
    """Named nothing like its id, as a plugin given to the host as an object may be."""


def test_a_refusal_names_the_plugin_by_its_id_not_by_its_class(caplog) -> None:
    """The catalog card, the log and a strict start all say ``wx2``, the id the admin
    reads on the card; the class name ``Q`` told them nothing."""
    from skald_host.core.plugins.manager import StrictPluginFailure

    schema = (ConfigField("units", "int"),)  # type: ignore[arg-type]
    manager = loaded(Q("wx2", config_schema=schema))
    status = manager.status("wx2")
    assert status.state == "failed"
    assert status.error.startswith("plugin 'wx2': config_schema: field 'units' has the unknown type 'int'"), status.error
    assert "'Q'" not in status.error
    assert any(r.getMessage().startswith("plugin wx2 failed to load: plugin 'wx2': ") for r in caplog.records)
    with pytest.raises(StrictPluginFailure, match="^plugin 'wx2' failed in plugin_info: "):
        PluginManager(extra=[Q("wx2", config_schema=schema)], use_entry_points=False, strict=True).load()

    class Misspelt(Q):
        @hookimpl
        def regster_tools(self, register: Any) -> None: ...

    assert loaded(Misspelt("wx3")).status("wx3").error.startswith("plugin 'wx3' implements unknown hook 'regster_tools'")


# -- a register_* hook that returns instead of registering -------------------------------------


class ReturnsItsBlueprint:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("returner")

    @hookimpl
    def register_routes(self, register) -> Blueprint:
        blueprint = Blueprint("returner", __name__)

        @blueprint.get("/ping")
        async def ping() -> dict[str, str]:
            return {"pong": "yes"}

        return blueprint  # meant: register(blueprint)


async def test_a_routes_hook_returning_its_blueprint_fails_the_plugin_saying_to_call_register(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[ReturnsItsBlueprint(), bystander])
    admin = await host.admin()

    status = host.core.plugins.status("returner")
    assert (status.state, status.error) == (
        "failed", "register_routes returned a Blueprint: call register(blueprint) instead; the return value is ignored",
    )
    assert (await admin.get("/api/plugin/returner/ping")).status_code == 404
    await assert_host_and_bystanders_work(host, bystander)


async def _noop(args: Any, ctx: Any) -> str:
    return "ok"


class ReturnsItsTools:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("tool-returner")

    @hookimpl
    async def register_tools(self, register) -> list[Tool]:
        return [Tool("noop", "does nothing", {"type": "object"}, _noop)]


async def test_any_register_hook_returning_a_value_fails_the_plugin_and_keeps_nothing() -> None:
    manager = loaded(ReturnsItsTools(), Bystander())

    assert await manager.collect("register_tools", lambda plugin_id, args: args[0]) == []
    status = manager.status("tool-returner")
    assert (status.state, status.error) == (
        "failed", "register_tools returned a list: call register(...) once for each item instead; the return value is ignored",
    )
    assert manager.status("bystander").state == "disabled"


# -- member_tools must be synchronous ------------------------------------------------------------


class AsyncMemberTools:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("async-tools")

    @hookimpl
    async def member_tools(self, member_id: str) -> list[Tool]:
        return []


async def test_an_async_member_tools_is_refused_when_the_plugin_loads(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[AsyncMemberTools(), bystander])

    status = host.core.plugins.status("async-tools")
    assert status.state == "failed"
    assert status.error.startswith("plugin 'async-tools': member_tools must be synchronous, not async def: ")
    assert "return them from a plain def" in status.error
    assert "async-tools" not in host.core.plugins.implementers("member_tools")
    await assert_host_and_bystanders_work(host, bystander)


# -- a page's entry stays inside the plugin's own routes -----------------------------------------

REFUSED_ENTRIES = {
    "https://evil.example/x.js": "is a URL, not a path",
    "//evil.example/x.js": "is a URL, not a path",
    "javascript:alert(1)": "is a URL, not a path",
    "../../admin/x.js": "has a '..' segment",
    "static/../../admin/x.js": "has a '..' segment",
    "%2e%2e/%2e%2e/admin/x.js": "has a '..' segment",
    ".\n./admin/x.js": "contains a control character",
    "/api/admin/x.js": "starts with a slash",
    "static\\page.js": "contains a backslash",
    "": "is not a path",
}


class Paged:
    def __init__(self, plugin_id: str, entry: str) -> None:
        self.plugin_id, self.entry = plugin_id, entry

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)

    @hookimpl
    def register_web_pages(self, register) -> None:
        register(WebPage("main", "Main", self.entry))


async def test_a_page_entry_outside_the_plugins_own_routes_fails_the_plugin(skald):
    refused = {f"paged{n}": entry for n, entry in enumerate(REFUSED_ENTRIES)}
    accepted = {"plain": "page.js", "nested": "static/v2/page.js?v=3"}
    bystander = Bystander()
    host = await skald.start(plugins=[*(Paged(p, e) for p, e in {**refused, **accepted}.items()), bystander])

    for plugin_id, entry in refused.items():
        status = host.core.plugins.status(plugin_id)
        assert (status.state, status.error) == (
            "failed",
            f"register_web_pages: page 'main': entry {entry!r} {REFUSED_ENTRIES[entry]}; give a relative path inside"
            f" the plugin's own routes, like 'page.js' (served as /api/plugin/{plugin_id}/page.js)",
        ), entry
    pages = {c.plugin_id: c.value.entry for c in host.core.web_pages if c.plugin_id in {**refused, **accepted}}
    assert pages == accepted
    await assert_host_and_bystanders_work(host, bystander)


class TwoPagesOfOneId:
    """Registers two pages under one page id: the shell's ``#plugin/<id>/<page_id>``
    could reach only one of them."""

    def __init__(self, plugin_id: str, page_ids: tuple[str, ...]) -> None:
        self.plugin_id, self.page_ids = plugin_id, page_ids

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)

    @hookimpl
    def register_web_pages(self, register) -> None:
        for n, page_id in enumerate(self.page_ids):
            register(WebPage(page_id, f"Page {n}", f"page{n}.js"))


async def test_two_pages_of_one_id_in_one_plugin_fail_it_naming_the_page_id(skald, caplog):
    bystander = Bystander()
    # Two plugins may each have a page "main": the id is the plugin's own.
    plugins = [TwoPagesOfOneId("twice", ("main", "other", "main")), TwoPagesOfOneId("one", ("main",)), TwoPagesOfOneId("two", ("main",)), bystander]
    host = await skald.start(plugins=plugins)

    status = host.core.plugins.status("twice")
    assert (status.state, status.error) == (
        "failed", "register_web_pages: page 'main' is registered twice: each page of a plugin needs an id of its own",
    )
    assert "plugin twice failed: register_web_pages: page 'main' is registered twice" in caplog.text
    pages = sorted((c.plugin_id, c.value.page_id) for c in host.core.web_pages if c.plugin_id in ("twice", "one", "two"))
    assert pages == [("one", "main"), ("two", "main")]
    assert host.core.plugins.status("one").state != "failed" and host.core.plugins.status("two").state != "failed"
    await assert_host_and_bystanders_work(host, bystander)


# -- what a stranger writing from the docs found accepted, and then not working ----------------


class AgentPlugin:
    """One system agent ``tick`` with its settings set; ``fields`` replace the set's."""

    def __init__(self, plugin_id: str, *, run: Any = None, has_work: Any = None, fields: tuple[ConfigField, ...] | None = None) -> None:
        self.plugin_id, self.run, self.has_work = plugin_id, run, has_work
        self.fields = fields if fields is not None else (ConfigField("enabled", "boolean", default=True), ConfigField("interval", "integer", default=5))

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet(f"{self.plugin_id}-tick", "Tick", self.fields, owner=f"{self.plugin_id}-tick"))

    @hookimpl
    def register_system_agents(self, register) -> None:
        async def run(ctx: Any) -> None:
            return None

        register(SystemAgent(id=f"{self.plugin_id}-tick", title="Tick", interval_seconds=300, run=self.run or run, has_work=self.has_work))


def _plain_run(ctx: Any) -> None:
    return None


async def test_a_system_agent_with_a_plain_def_run_or_has_work_fails_its_plugin_at_load(skald):
    async def has_work(ctx: Any) -> bool:
        return True

    bystander = Bystander()
    plugins = [AgentPlugin("plainrun", run=_plain_run), AgentPlugin("plainwork", has_work=_plain_run),
               AgentPlugin("fineagent", has_work=has_work), bystander]
    host = await skald.start(plugins=plugins)

    assert host.core.plugins.status("plainrun").error == (
        "register_system_agents: system agent 'plainrun-tick': run must be an async callable (async def)"
    )
    assert host.core.plugins.status("plainwork").error == (
        "register_system_agents: system agent 'plainwork-tick': has_work must be an async callable (async def) or None"
    )
    assert host.core.plugins.status("fineagent").state != "failed"
    assert [e.id for e in host.core.system_agents.registry.entries if e.plugin_id.endswith(("run", "work", "agent"))] == ["fineagent-tick"]
    await assert_host_and_bystanders_work(host, bystander)


async def test_a_system_agents_settings_of_the_wrong_type_fail_its_plugin_naming_the_field(skald, caplog):
    """The log line says where, as every other load failure's does: the plugin's line
    registering the set (it had no place, the refusal being found after registration)."""
    wrong = {
        "intenabled": (ConfigField("enabled", "integer", default=1), ConfigField("interval", "integer", default=5)),
        "textinterval": (ConfigField("enabled", "boolean", default=True), ConfigField("interval", "string", default="5")),
    }
    host = await skald.start(plugins=[AgentPlugin(p, fields=f) for p, f in wrong.items()])

    assert host.core.plugins.status("intenabled").error == (
        "register_system_agents: the settings of system agent 'intenabled-tick': 'enabled' is of type 'integer', not 'boolean':"
        " change the field(s) of the ConfigSet 'intenabled-tick' it registers in register_config_sets"
    )
    assert host.core.plugins.status("textinterval").error == (
        "register_system_agents: the settings of system agent 'textinterval-tick': 'interval' is of type 'string', not 'integer':"
        " change the field(s) of the ConfigSet 'textinterval-tick' it registers in register_config_sets"
    )
    assert not [e for e in host.core.system_agents.registry.entries if e.plugin_id in wrong]
    lines = Path(__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if text.strip().startswith('register(ConfigSet(f"{self.plugin_id}-tick"'))
    assert f"plugin textinterval failed: register_system_agents: the settings of system agent 'textinterval-tick'" in caplog.text
    assert f"in register_config_sets (at {__file__}:{line})" in caplog.text


class OnePage:
    def __init__(self, plugin_id: str, page: WebPage) -> None:
        self.plugin_id, self.page = plugin_id, page

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)

    @hookimpl
    def register_web_pages(self, register) -> None:
        register(self.page)


async def test_a_page_of_an_unknown_slot_or_an_id_that_is_no_name_fails_its_plugin(skald):
    bystander = Bystander()
    plugins = [
        OnePage("footer", WebPage("main", "Main", "page.js", slot="footer")),  # type: ignore[arg-type]
        OnePage("slashed", WebPage("a/b", "Main", "page.js")),
        OnePage("fine", WebPage("member-grants_2", "Main", "page.js", slot="member_admin")),
        bystander,
    ]
    host = await skald.start(plugins=plugins)

    assert host.core.plugins.status("footer").error == (
        "register_web_pages: page 'main': slot 'footer' is not one of 'sidebar', 'member_admin'"
    )
    assert host.core.plugins.status("slashed").error == (
        "register_web_pages: page 'a/b': the page id must be 1-64 letters, digits, '-' or '_', starting with a letter or digit"
        " (it is part of the address #plugin/slashed/<page id> and of the string key page.<page id>.title)"
    )
    assert sorted(c.plugin_id for c in host.core.web_pages if c.plugin_id in ("footer", "slashed", "fine")) == ["fine"]
    await assert_host_and_bystanders_work(host, bystander)


RULES_OF_ANOTHER_TYPE = {
    "max_length on an integer": (
        ConfigField("count", "integer", max_length=3),
        "field 'count' has a max_length but is of type 'integer': max_length limits the text of a string or url field",
    ),
    "max_length on a choice": (
        ConfigField("mode", "choice", choices=("a", "b"), max_length=3),
        "field 'mode' has a max_length but is of type 'choice': max_length limits the text of a string or url field",
    ),
    "minimum on a string": (
        ConfigField("name", minimum=1),
        "field 'name' has a minimum but is of type 'string': minimum and maximum bound an integer or number field",
    ),
    "maximum on a boolean": (
        ConfigField("on", "boolean", maximum=1),
        "field 'on' has a maximum but is of type 'boolean': minimum and maximum bound an integer or number field",
    ),
    "choices on a string": (
        ConfigField("mode", choices=("a", "b")),
        "field 'mode' has choices but is of type 'string': choices are the values of a field of type 'choice'",
    ),
}


@pytest.mark.parametrize("case", RULES_OF_ANOTHER_TYPE, ids=list(RULES_OF_ANOTHER_TYPE))
def test_a_rule_the_fields_type_does_not_use_fails_the_plugin_like_a_pattern_on_a_number(case: str) -> None:
    field, problem = RULES_OF_ANOTHER_TYPE[case]
    manager = loaded(Configured("ruled", config_schema=(field,)))
    assert manager.status("ruled").error == f"plugin 'ruled': config_schema: {problem}"


# -- what a plugin module imports ----------------------------------------------------------


def test_a_plugin_module_importing_quarts_request_proxy_loads() -> None:
    """``from quart import request`` at the top of a plugin module is how route code is
    written; probing that proxy outside a request raises ``RuntimeError``, which once failed
    the plugin with an error pointing into werkzeug. Only functions can be hooks."""
    import types

    from quart import request, session

    module = types.ModuleType("vault_plugin")
    module.request, module.session = request, session

    @hookimpl
    def plugin_info() -> PluginInfo:
        return info("vault")

    module.plugin_info = plugin_info
    manager = loaded(module)
    status = manager.status("vault")
    assert (status.state, status.error) == ("disabled", None), status.as_dict()

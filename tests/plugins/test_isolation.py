"""Check D1: a misbehaving plugin is contained, and a new plugin stays off until enabled.

Every broken plugin here shares the host with two bystanders that must keep working:
the built-in ``strings`` plugin (the host's own UI strings) and a healthy throwaway
plugin. A broken plugin is refused by name with an error that says what is wrong; the
host answers ``/health`` throughout.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from skald_hookspecs import SPEC_VERSION, hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo, Tool
from skald_host.core.host import Skald, build_plugin_manager
from skald_host.core.plugins.manager import Contribution, PluginError, PluginManager, PluginStatus, StrictPluginFailure

SPEC = ">=1.0,<2"


def info(plugin_id: str, spec: str = SPEC, **fields: Any) -> PluginInfo:
    return PluginInfo(id=plugin_id, title=plugin_id.title(), spec=spec, **fields)


class Bystander:
    """A healthy plugin: contributes a string and counts its lifecycle calls."""

    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("bystander")

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("bystander", {"en": {"hello": "Hello from the bystander"}}))

    @hookimpl
    async def startup(self, host) -> None:
        self.started += 1

    @hookimpl
    async def shutdown(self) -> None:
        self.stopped += 1


def status_named(core: Skald, name: str) -> PluginStatus:
    """Plugins refused before their id is known are listed under their object's name."""
    found = [s for s in core.plugins.statuses() if s.name == name]
    assert len(found) == 1, [s.as_dict() for s in core.plugins.statuses()]
    return found[0]


async def assert_host_and_bystanders_work(host, bystander: Bystander) -> None:
    response = await host.client().get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}

    table = (await host.client().get("/api/i18n", params={"locale": "de"})).json()["strings"]
    assert table["core.setup.title"] == "Willkommen bei Skald"  # the built-in strings plugin
    assert table["bystander.hello"] == "Hello from the bystander"  # English under German

    strings = host.core.plugins.status("strings")
    assert (strings.state, strings.healthy, strings.error) == ("loaded", True, None)
    await host.core.set_plugin_enabled("bystander", True)
    status = host.core.plugins.status("bystander")
    assert (status.state, status.healthy, status.error) == ("loaded", True, None)
    assert bystander.started == 1


# -- a plugin that raises or returns garbage at load --------------------------------


class ExplodingInfo:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        raise RuntimeError("info exploded")


async def test_plugin_raising_in_plugin_info_is_listed_failed_in_the_catalog(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[ExplodingInfo(), bystander])

    status = status_named(host.core, "ExplodingInfo")
    assert status.state == "failed"
    assert status.error == "plugin_info: RuntimeError: info exploded"
    assert "RuntimeError: info exploded" in status.traceback
    admin = await host.admin()
    catalog = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}
    assert catalog["ExplodingInfo"]["state"] == "failed"
    assert catalog["ExplodingInfo"]["error"] == "plugin_info: RuntimeError: info exploded"
    assert catalog["bystander"]["state"] == "disabled"
    assert catalog["strings"]["state"] == "loaded"
    await assert_host_and_bystanders_work(host, bystander)


class FuturePlugin:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("future", spec=">=2,<3")


class Anonymous:
    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("anonymous", {"en": {"x": "x"}}))


class UndecoratedInfo:
    def plugin_info(self) -> PluginInfo:  # no @hookimpl: pluggy would never call it
        return info("undecorated")


class Misspelt:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("misspelt")

    @hookimpl
    def regster_tools(self, register) -> None:
        raise AssertionError("a misspelt hook must never be called")


class PastPlugin:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("past", spec=">=1.0,<1.5")


class BadSpecRange:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("bad-range", spec="one point oh")


class WrongInfoType:
    @hookimpl
    def plugin_info(self) -> dict:
        return {"id": "dict-info", "title": "Dict", "spec": SPEC}


@pytest.mark.parametrize(
    "plugin, expected_error",
    [
        (
            FuturePlugin(),
            f"plugin 'future' needs spec >=2,<3; this host provides {SPEC_VERSION}: upgrade Skald to a release that provides it,"
            f" or widen the plugin's range (PluginInfo.spec) if it works with {SPEC_VERSION}",
        ),
        (
            PastPlugin(),
            f"plugin 'past' needs spec >=1.0,<1.5; this host provides {SPEC_VERSION}: upgrade the plugin to a release made"
            f" for this contract, or widen the plugin's range (PluginInfo.spec) if it works with {SPEC_VERSION}",
        ),
        (Anonymous(), "plugin 'Anonymous' has no @hookimpl plugin_info()"),
        (UndecoratedInfo(), "plugin 'UndecoratedInfo' has no @hookimpl plugin_info()"),
        (Misspelt(), "plugin 'misspelt' implements unknown hook 'regster_tools'"),
        (
            BadSpecRange(),
            "plugin 'bad-range' declares an invalid spec range 'one point oh':"
            ' PluginInfo.spec is a PEP 440 version specifier such as ">=1.2,<2"',
        ),
        (WrongInfoType(), "plugin 'WrongInfoType': plugin_info() returned dict, expected PluginInfo"),
    ],
    ids=["spec-too-new", "spec-too-old", "no-plugin-info", "plugin-info-not-a-hookimpl", "misspelt-hook", "invalid-spec", "info-not-plugininfo"],
)
async def test_plugin_the_host_cannot_accept_is_refused_by_name(skald, plugin, expected_error):
    bystander = Bystander()
    host = await skald.start(plugins=[plugin, bystander])

    status = status_named(host.core, type(plugin).__name__)
    assert status.state == "failed"
    assert status.error.startswith(expected_error), status.error
    if isinstance(plugin, (FuturePlugin, BadSpecRange)):  # it said who it is: listed under its id
        assert host.core.plugins.status(plugin.plugin_info().id) is status
    assert host.core.plugins.pm.get_plugin(status.id) is None  # never registered with pluggy
    assert plugin not in host.core.plugins.pm.get_plugins()
    await assert_host_and_bystanders_work(host, bystander)


class FirstTwin:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("twin")

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("twin", {"en": {"who": "first"}}))


class SecondTwin:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("twin")

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("twin", {"en": {"who": "second"}}))


async def test_second_plugin_with_a_taken_id_is_refused_naming_both(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[FirstTwin(), SecondTwin(), bystander])

    first, second = status_named(host.core, "FirstTwin"), status_named(host.core, "SecondTwin")
    assert (first.id, first.state, first.error) == ("twin", "disabled", None)
    assert second.state == "failed"
    assert "'SecondTwin'" in second.error and "'FirstTwin'" in second.error and "'twin'" in second.error
    assert host.core.plugins.status("twin") is first
    assert host.core.strings.translate("twin.who") == "first"
    await assert_host_and_bystanders_work(host, bystander)


# -- a plugin failing in a registration hook ------------------------------------------


class ExplodingBundle:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("exploding-bundle")

    @hookimpl
    def register_i18n(self, register) -> None:
        raise RuntimeError("bundle exploded")

    @hookimpl
    def startup(self, host) -> None:
        raise AssertionError("a failed plugin must never start")


async def test_plugin_raising_in_register_i18n_is_failed_and_cannot_be_enabled(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[ExplodingBundle(), bystander])

    status = host.core.plugins.status("exploding-bundle")
    assert status.state == "failed"
    assert status.healthy is False
    assert status.error == "register_i18n: RuntimeError: bundle exploded"
    assert "bundle exploded" in status.traceback
    with pytest.raises(PluginError, match=r"plugin 'exploding-bundle' failed to load \(register_i18n: RuntimeError: bundle exploded\); fix it and restart"):
        await host.core.set_plugin_enabled("exploding-bundle", True)
    await assert_host_and_bystanders_work(host, bystander)


class InvalidBundle:
    """Registers one good bundle, then something that is not a valid bundle."""

    def __init__(self, *invalid_args: Any) -> None:
        self.invalid_args = invalid_args

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("invalid-bundle")

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("invalid-bundle", {"en": {"good": "a good string"}}))
        register(*self.invalid_args)


@pytest.mark.parametrize(
    "invalid_args, expected_error",
    [
        (({"en": {"hello": "Hello"}},), "register_i18n: register() expects one I18nBundle"),
        (("invalid-bundle", {"en": {"hello": "Hello"}}), "register_i18n: register() expects one I18nBundle"),
        ((I18nBundle("invalid-bundle", {"en": {"count": 5}}),), "register_i18n: bundle 'invalid-bundle': en/'count' must be text"),
    ],
    ids=["dict-not-bundle", "two-arguments", "non-text-string"],
)
async def test_plugin_registering_an_invalid_bundle_is_failed_and_contributes_nothing(skald, invalid_args, expected_error):
    bystander = Bystander()
    host = await skald.start(plugins=[InvalidBundle(*invalid_args), bystander])

    status = host.core.plugins.status("invalid-bundle")
    assert status.state == "failed"
    assert status.error == expected_error
    # Even the valid bundle registered before the invalid one is dropped.
    assert "invalid-bundle.good" not in host.core.strings.table("en")
    await assert_host_and_bystanders_work(host, bystander)


class HangingBundle:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("hanging-bundle")

    @hookimpl
    async def register_i18n(self, register) -> None:
        await asyncio.sleep(30)
        register(I18nBundle("hanging-bundle", {"en": {"late": "too late"}}))


async def test_plugin_hanging_in_register_i18n_is_cut_off_by_the_hook_timeout(skald):
    bystander = Bystander()
    started = time.monotonic()
    host = await skald.start(
        plugins=[HangingBundle(), bystander], settings=skald.settings(plugins={"hook_timeout_seconds": 0.5})
    )

    assert time.monotonic() - started < 10
    status = host.core.plugins.status("hanging-bundle")
    assert status.state == "failed"
    assert status.error == "register_i18n did not finish within 0.5 s"
    await assert_host_and_bystanders_work(host, bystander)


# -- a plugin failing at startup ----------------------------------------------------------


class ExplodingStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("exploding-startup")

    @hookimpl
    async def startup(self, host) -> None:
        raise RuntimeError("cannot reach the widget service")


async def test_plugin_raising_in_startup_is_unhealthy_and_the_host_goes_on(skald):
    bystander = Bystander()
    host = await skald.start(plugins=[ExplodingStartup(), bystander])

    await host.core.set_plugin_enabled("exploding-startup", True)  # does not raise

    status = host.core.plugins.status("exploding-startup")
    assert status.healthy is False
    assert status.started is False
    assert status.error == "startup: RuntimeError: cannot reach the widget service"
    assert status.as_dict()["healthy"] is False
    # The instance's status names it too (it said "no warnings" beside a broken plugin).
    warnings = (await (await host.admin()).get("/api/admin/status")).json()["warnings"]
    assert {"id": "plugin_failed", "values": {"plugin": "Exploding-Startup", "error": "startup: RuntimeError: cannot reach the widget service"}}.items() <= next(
        w for w in warnings if w["id"] == "plugin_failed").items()
    await assert_host_and_bystanders_work(host, bystander)


class HangingStartup:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.cancelled = False

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("hanging-startup")

    @hookimpl
    async def startup(self, host) -> None:
        self.entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def test_plugin_hanging_in_startup_is_cancelled_at_the_hook_timeout(skald):
    bystander = Bystander()
    plugin = HangingStartup()
    host = await skald.start(
        plugins=[plugin, bystander], settings=skald.settings(plugins={"hook_timeout_seconds": 0.5})
    )

    started = time.monotonic()
    await host.core.set_plugin_enabled("hanging-startup", True)

    assert 0.4 < time.monotonic() - started < 5
    assert plugin.cancelled is True
    status = host.core.plugins.status("hanging-startup")
    assert status.healthy is False
    assert status.started is False
    assert status.error == "startup did not finish within 0.5 s"
    await assert_host_and_bystanders_work(host, bystander)


async def test_health_p99_stays_under_200_ms_while_a_plugin_startup_hangs(skald):
    plugin = HangingStartup()
    # Long enough that the startup is still hanging after all 50 requests.
    host = await skald.start(plugins=[plugin], settings=skald.settings(plugins={"hook_timeout_seconds": 3.0}))
    client = host.client()
    await client.get("/health")  # open the connection outside the measurement

    enabling = asyncio.create_task(host.core.set_plugin_enabled("hanging-startup", True))
    await asyncio.wait_for(plugin.entered.wait(), 5)
    latencies = []
    for _ in range(50):
        begin = time.perf_counter()
        response = await client.get("/health")
        latencies.append(time.perf_counter() - begin)
        assert response.status_code == 200
    hanging_throughout = not enabling.done()
    await enabling

    assert hanging_throughout
    p99 = sorted(latencies)[math.ceil(0.99 * len(latencies)) - 1]
    assert p99 < 0.200, f"/health p99 {p99 * 1000:.0f} ms while a startup hangs"
    assert host.core.plugins.status("hanging-startup").error == "startup did not finish within 3 s"


# -- duplicates across plugins -------------------------------------------------------------


async def _noop_tool(args, ctx) -> str:
    return "ok"


class ToolPlugin:
    def __init__(self, plugin_id: str, *tool_names: str) -> None:
        self.plugin_id = plugin_id
        self.tool_names = tool_names

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)

    @hookimpl
    def register_tools(self, register) -> None:
        for name in self.tool_names:
            register(Tool(name=name, description=f"{name} tool", parameters={"type": "object"}, run=_noop_tool))


def _validate_tool(plugin_id: str, args: tuple[Any, ...]) -> Tool:
    if len(args) != 1 or not isinstance(args[0], Tool):
        raise PluginError("register() expects one Tool")
    return args[0]


async def test_duplicate_tool_name_fails_the_second_plugin_naming_both():
    manager = PluginManager(
        extra=[ToolPlugin("alpha", "search", "weather"), ToolPlugin("beta", "calendar", "search")],
        use_entry_points=False,
    )
    manager.load()

    accepted = await manager.collect("register_tools", _validate_tool, key=lambda tool: tool.name, kind="tool")

    assert [(c.plugin_id, c.value.name) for c in accepted] == [("alpha", "search"), ("alpha", "weather")]
    assert all(isinstance(c, Contribution) for c in accepted)
    beta = manager.status("beta")
    assert beta.state == "failed"
    assert beta.error == "register_tools: tool 'search' is registered by both 'alpha' and 'beta'"
    assert (manager.status("alpha").state, manager.status("alpha").error) == ("disabled", None)
    # The failed plugin contributes nothing further, on this or any later collect.
    again = await manager.collect("register_tools", _validate_tool, key=lambda tool: tool.name, kind="tool")
    assert [c.plugin_id for c in again] == ["alpha", "alpha"]


async def test_collect_without_a_key_accepts_equal_names():
    manager = PluginManager(extra=[ToolPlugin("alpha", "search"), ToolPlugin("beta", "search")], use_entry_points=False)
    manager.load()

    accepted = await manager.collect("register_tools", _validate_tool)

    assert [c.plugin_id for c in accepted] == ["alpha", "beta"]


# -- strict mode ------------------------------------------------------------------------------


def test_strict_manager_reraises_a_load_failure():
    PluginManager(extra=[ExplodingInfo()], use_entry_points=False).load()  # contained
    with pytest.raises(StrictPluginFailure, match="^plugin 'ExplodingInfo' failed in plugin_info: RuntimeError: info exploded \\(at .*test_isolation.py:\\d+\\)$"):
        PluginManager(extra=[ExplodingInfo()], use_entry_points=False, strict=True).load()


async def test_strict_manager_reraises_a_registration_failure():
    manager = PluginManager(extra=[ToolPlugin("alpha", "search"), ToolPlugin("beta", "search")], use_entry_points=False, strict=True)
    manager.load()
    with pytest.raises(StrictPluginFailure, match="plugin 'beta' failed in register_tools: tool 'search' is registered by both 'alpha' and 'beta'"):
        await manager.collect("register_tools", _validate_tool, key=lambda tool: tool.name, kind="tool")


async def test_strict_setting_makes_the_core_refuse_to_start(skald):
    settings = skald.settings(plugins={"strict": True})
    with pytest.raises(StrictPluginFailure, match="plugin 'ExplodingInfo' failed in plugin_info: RuntimeError: info exploded"):
        await Skald.start(settings, build_plugin_manager(settings, extra=(ExplodingInfo(),), use_entry_points=False))


async def test_strict_setting_reraises_a_failing_startup(skald):
    host = await skald.start(plugins=[ExplodingStartup()], settings=skald.settings(plugins={"strict": True}))
    with pytest.raises(StrictPluginFailure, match="plugin 'exploding-startup' failed in startup: RuntimeError: cannot reach the widget service"):
        await host.core.set_plugin_enabled("exploding-startup", True)


# -- a new plugin stays off until an admin enables it --------------------------------------


class Lifecycle:
    def __init__(self, plugin_id: str = "lifecycle", **info_fields: Any) -> None:
        self.plugin_id = plugin_id
        self.info_fields = info_fields
        self.calls: list[str] = []
        self.host_api: Any = None

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id, **self.info_fields)

    @hookimpl
    async def startup(self, host) -> None:
        self.calls.append("startup")
        self.host_api = host

    @hookimpl
    async def shutdown(self) -> None:
        self.calls.append("shutdown")


async def test_new_external_plugin_is_disabled_and_not_started_until_enabled(skald):
    plugin = Lifecycle()
    host = await skald.start(plugins=[plugin])

    status = host.core.plugins.status("lifecycle")
    assert (status.state, status.builtin, status.started) == ("disabled", False, False)
    assert plugin.calls == []
    assert host.core.plugins.is_enabled("lifecycle") is False
    assert host.core.plugins.status("strings").state == "loaded"  # built-ins are on by default

    await host.core.set_plugin_enabled("lifecycle", True)
    assert plugin.calls == ["startup"]
    assert plugin.host_api.plugin_id == "lifecycle"
    assert (status.state, status.started) == ("loaded", True)

    await host.core.set_plugin_enabled("lifecycle", False)
    assert plugin.calls == ["startup", "shutdown"]
    assert (status.state, status.started) == ("disabled", False)


async def test_enabled_plugin_starts_at_the_next_boot_and_stops_with_the_host(skald):
    settings = skald.settings()
    first = Lifecycle()
    host = await skald.start(plugins=[first], settings=settings)
    await host.core.set_plugin_enabled("lifecycle", True)
    await host.stop()
    assert first.calls == ["startup", "shutdown"]

    second = Lifecycle()
    host = await skald.start(plugins=[second], settings=settings)
    assert second.calls == ["startup"]
    assert host.core.plugins.status("lifecycle").state == "loaded"


async def _plugin_row(core: Skald, plugin_id: str):
    return await core.registry.run(
        lambda c: c.execute("SELECT enabled FROM plugins WHERE id = ?", (plugin_id,)).fetchone()
    )


async def _grantees(core: Skald, plugin_id: str) -> set[str]:
    rows = await core.registry.run(
        lambda c: c.execute("SELECT user_id FROM plugin_access WHERE plugin_id = ?", (plugin_id,)).fetchall()
    )
    return {r[0] for r in rows}


async def test_plugin_row_is_born_at_first_enable_and_auto_grant_roles_receive_it_once(skald):
    host = await skald.start(plugins=[Lifecycle()])
    core = host.core
    admin_id = (await host.admin()).member["id"]
    regular = (await host.create_member("alice"))["id"]
    restricted = (await host.create_member("robin", role="restricted"))["id"]

    assert await _plugin_row(core, "lifecycle") is None
    assert await _grantees(core, "lifecycle") == set()

    await core.set_plugin_enabled("lifecycle", True)
    assert tuple(await _plugin_row(core, "lifecycle")) == (1,)
    assert await _grantees(core, "lifecycle") == {regular}  # not the admin, not the restricted role
    assert admin_id not in await _grantees(core, "lifecycle") and restricted not in await _grantees(core, "lifecycle")

    # An admin removes the grant; toggling the plugin must not resurrect it.
    await core.registry.transaction(
        lambda c: c.execute("DELETE FROM plugin_access WHERE plugin_id = ? AND user_id = ?", ("lifecycle", regular))
    )
    await core.set_plugin_enabled("lifecycle", False)
    assert tuple(await _plugin_row(core, "lifecycle")) == (0,)
    await core.set_plugin_enabled("lifecycle", True)
    assert tuple(await _plugin_row(core, "lifecycle")) == (1,)
    assert await _grantees(core, "lifecycle") == set()


@pytest.mark.parametrize(
    "info_fields",
    [{"grant_by_default": False}, {"manages_own_access": True}],
    ids=["grant-by-default-off", "manages-own-access"],
)
async def test_plugin_that_opts_out_of_default_access_is_granted_to_nobody(skald, info_fields):
    host = await skald.start(plugins=[Lifecycle(**info_fields)])
    await host.admin()
    await host.create_member("alice")

    await host.core.set_plugin_enabled("lifecycle", True)

    assert await _plugin_row(host.core, "lifecycle") is not None
    assert await _grantees(host.core, "lifecycle") == set()


class SpecnamedHooks:
    """pluggy lets an impl name its hook with ``specname``; the attribute name is free."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("specnamed")

    @hookimpl(specname="register_i18n")
    def contribute_strings(self, register) -> None:
        register(I18nBundle("specnamed", {"en": {"hello": "hello via specname"}}))


class MisspeltSpecname:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("misspelt-specname")

    @hookimpl(specname="regster_i18n")
    def contribute_strings(self, register) -> None:
        raise AssertionError("a misspelt hook must never be called")


async def test_hookimpl_with_a_specname_is_accepted_and_a_misspelt_specname_refused():
    manager = PluginManager(extra=[SpecnamedHooks(), MisspeltSpecname()], use_entry_points=False)
    manager.load()

    assert (manager.status("specnamed").state, manager.status("specnamed").error) == ("disabled", None)
    accepted = await manager.collect("register_i18n", lambda pid, args: args[0])
    assert [(c.plugin_id, c.value.domain) for c in accepted] == [("specnamed", "specnamed")]
    refused = manager.status("misspelt-specname")
    assert refused.state == "failed"
    assert refused.error.startswith("plugin 'misspelt-specname' implements unknown hook 'regster_i18n'")


class telegram:  # noqa: N801 - named like an entry point, which is what the block list matches
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("telegram-old")


class TelegramFork:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("telegram")

    @hookimpl
    def startup(self, host) -> None:
        self.calls.append("startup")


async def test_plugin_whose_id_a_blocked_candidate_was_listed_under_still_runs():
    fork = TelegramFork()
    manager = PluginManager(extra=[telegram(), fork], use_entry_points=False, block=["telegram"])
    manager.load()

    assert manager.status("telegram").name == "TelegramFork"
    assert manager.status("telegram").state == "disabled"
    assert [s.state for s in manager.statuses() if s.name == "telegram"] == ["blocked"]
    await manager.call_one("startup", "telegram", host=None)
    assert fork.calls == ["startup"]


def test_block_list_names_match_like_pep_503_and_never_strip_the_builtins():
    from skald_host.core.plugins.manager import _normalise

    assert _normalise("Skald_Telegram") == _normalise("skald.telegram") == "skald-telegram"
    manager = PluginManager(builtins=("skald_host.builtins.strings",), use_entry_points=False, block=["skald"])
    manager.load()
    assert manager.status("strings").state == "loaded"
    manager = PluginManager(builtins=("skald_host.builtins.strings",), use_entry_points=False, block=["Strings"])
    manager.load()
    assert [s.state for s in manager.statuses()] == ["blocked"]

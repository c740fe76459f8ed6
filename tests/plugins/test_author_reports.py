"""What a stranger writing plugins from docs/plugins.md ran into: a spec range far in
the future told to upgrade the plugin, an id clash blamed on the built-in whose id was
taken (and the newcomer listed as uninstalled), and a route with a ``..`` segment
mounted and published. Each against a real host, as the rest of ``tests/plugins``."""

from __future__ import annotations

import logging

import pytest
from quart import Blueprint

from skald_hookspecs import SPEC_VERSION, hookimpl
from skald_hookspecs.types import I18nBundle, PluginInfo

from .test_isolation import Bystander, assert_host_and_bystanders_work, info


# -- 1. the advice for a spec range this host is not in ----------------------------------------

UPGRADE_SKALD = "upgrade Skald to a release that provides it"
UPGRADE_PLUGIN = "upgrade the plugin to a release made for this contract"


class Ranged:
    def __init__(self, plugin_id: str, spec: str) -> None:
        self.plugin_id, self.spec = plugin_id, spec

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id, spec=self.spec)


@pytest.mark.parametrize(
    "spec, advice",
    [
        (">=9,<10", UPGRADE_SKALD),  # far past the few later majors once tried
        (">=100", UPGRADE_SKALD),
        ("==7.*", UPGRADE_SKALD),
        ("~=12.3", UPGRADE_SKALD),
        (f">{SPEC_VERSION}", UPGRADE_SKALD),
        (">=0.1,<1", UPGRADE_PLUGIN),
        ("==0.9", UPGRADE_PLUGIN),
    ],
)
async def test_the_spec_refusal_says_whom_to_upgrade_by_comparing_the_range_with_the_host(skald, spec, advice):
    host = await skald.start(plugins=[Ranged("chores", spec)])
    status = host.core.plugins.status("chores")
    assert (status.state, status.error) == (
        "failed",
        f"plugin 'chores' needs spec {spec}; this host provides {SPEC_VERSION}: {advice},"
        f" or widen the plugin's range (PluginInfo.spec) if it works with {SPEC_VERSION}",
    )


# -- 2. a plugin declaring a built-in's id -----------------------------------------------------


class Chores:
    """Found under the name ``chores`` (as its entry point would be), declaring ``plugin_id``."""

    __name__ = "chores"

    def __init__(self, plugin_id: str) -> None:
        self.plugin_id = plugin_id

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)


async def test_a_plugin_taking_a_built_ins_id_is_the_one_failure_named_by_its_own_name(skald, caplog):
    settings = skald.settings()
    # It ran once under an id of its own and was turned on: its row says enabled.
    first = await skald.start(plugins=[Chores("chores")], settings=settings, enable=["chores"])
    await first.stop()

    bystander = Bystander()
    with caplog.at_level(logging.ERROR):
        host = await skald.start(plugins=[Chores("strings"), bystander], settings=settings)
    expected = (
        "plugin 'chores' declares the id 'strings', which the built-in plugin 'skald_host.builtins.strings' already has:"
        " give it an id of its own in PluginInfo.id"
    )
    failed = [s for s in host.core.plugins.statuses() if s.state == "failed"]
    assert [(s.id, s.name, s.error) for s in failed] == [("chores", "chores", expected)]
    assert f"plugin chores failed to load: {expected}" in caplog.text
    assert "plugin strings failed" not in caplog.text
    assert host.core.plugins.status("strings").name == "skald_host.builtins.strings"

    admin = await host.admin()
    listed = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}
    assert "strings@chores" not in listed
    assert (listed["chores"]["state"], listed["chores"]["error"]) == ("failed", expected)
    assert [p["id"] for p in listed.values() if p["state"] == "missing"] == []
    warnings = (await admin.get("/api/admin/status")).json()["warnings"]
    assert [w for w in warnings if w["id"] == "plugin_missing"] == []
    await assert_host_and_bystanders_work(host, bystander)


# -- 3. a route rule leaving the plugin's own prefix ------------------------------------------


class Routed:
    def __init__(self, plugin_id: str, rule: str) -> None:
        self.plugin_id, self.rule = plugin_id, rule

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info(self.plugin_id)

    @hookimpl
    def register_routes(self, register) -> None:
        bp = Blueprint(self.plugin_id, __name__)

        @bp.get("/ping")
        async def ping() -> dict[str, str]:
            return {"plugin": "ping"}

        @bp.get(self.rule)
        async def answer(**values: int) -> dict[str, str]:
            return {"plugin": "answered"}

        register(bp)


REFUSED_RULES = {
    "/../../auth/session": "has a '.' or '..' segment",
    "/static/../../../auth/session": "has a '.' or '..' segment",
    "/./x": "has a '.' or '..' segment",
    "/%2E%2E/%2e%2e/auth/session": "contains an encoded dot, slash or backslash",
    "/a%2fb": "contains an encoded dot, slash or backslash",
    "/..\\..\\auth": "contains a backslash",
}


async def test_a_route_with_dot_segments_or_encoded_dots_fails_its_plugin_and_is_not_mounted(skald):
    refused = {f"routed{n}": rule for n, rule in enumerate(REFUSED_RULES)}
    accepted = {"plain": "/items/<int:item>", "dotted": "/page.v2.js"}
    bystander = Bystander()
    host = await skald.start(plugins=[*(Routed(p, r) for p, r in {**refused, **accepted}.items()), bystander])

    for plugin_id, rule in refused.items():
        status = host.core.plugins.status(plugin_id)
        assert (status.state, status.error) == (
            "failed",
            f"register_routes: the route {rule!r} {REFUSED_RULES[rule]}; a route is a plain path below the plugin's own"
            f" prefix (/api/plugin/{plugin_id}/…), which the host sets (a Blueprint's url_prefix is replaced)",
        ), rule
    mounted = {rule.rule for rule in host.app.url_map.iter_rules() if rule.rule.startswith("/api/plugin/")}
    assert not [r for r in mounted if r.startswith(tuple(f"/api/plugin/{p}/" for p in refused))]  # none of them, not even /ping
    assert {"/api/plugin/plain/items/<int:item>", "/api/plugin/dotted/page.v2.js"} <= mounted

    await host.core.set_plugin_enabled("plain", True)
    admin = await host.admin()
    document = await admin.get("/api/openapi.json")
    assert document.status_code == 200, document.text
    published = [p for p in document.json()["paths"] if p.startswith("/api/plugin/")]
    assert published and not [p for p in published if p.startswith(tuple(f"/api/plugin/{p}/" for p in refused))]

    assert (await admin.get("/api/plugin/plain/items/3")).json() == {"plugin": "answered"}
    await assert_host_and_bystanders_work(host, bystander)


# -- 4. a key a plugin's route translates that no bundle has -----------------------------------


class Translating:
    """A route answering with ``host.translate`` of a key its bundle has and one no bundle has."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("chores")

    @hookimpl
    def register_i18n(self, register) -> None:
        register(I18nBundle("chores", {"en": {"done": "Done"}, "de": {"done": "Erledigt"}}))

    @hookimpl
    def register_routes(self, register, host) -> None:
        bp = Blueprint("chores", __name__)

        @bp.get("/words")
        async def words() -> dict[str, str]:
            return {key: host.translate(f"chores.{key}", "de") for key in ("done", "nowhere")}

        register(bp)


async def test_a_key_a_plugin_translates_that_no_bundle_has_is_listed_missing_everywhere(skald):
    host = await skald.start(plugins=[Translating()], enable=["chores"])
    admin = await host.admin()
    before = (await admin.get("/api/admin/status")).json()
    assert "chores.nowhere" not in before["missing_everywhere"]  # nobody has asked for it yet

    assert (await admin.get("/api/plugin/chores/words")).json() == {"done": "Erledigt", "nowhere": "chores.nowhere"}
    status = (await admin.get("/api/admin/status")).json()
    assert "chores.nowhere" in status["missing_everywhere"]
    assert "chores.nowhere" in status["missing_translations"]["en"]
    assert "chores.done" not in status["missing_everywhere"]

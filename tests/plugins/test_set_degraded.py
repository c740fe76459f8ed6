"""``HostApi.set_degraded`` (contract 1.12): a plugin that runs but cannot do its job for
now (a service it keeps retrying, a model that failed to load) says so, and the admin's
catalog, its detail and the server's status say it in the reader's language, while
nothing else of the plugin's status changes. Before, only a failed ``startup``
(``NotReady``) could reach the card, and the host never tries a failed start again: such
a plugin stayed a green "Running"."""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest

from skald_hookspecs import HostApi, hookimpl
from skald_hookspecs.types import I18nBundle, NotReady, PluginInfo

PLUGIN = "limping"
SECRET = "sk-widget-7f3c9"  # in ``values`` only: never in the log
REASON = "cannot reach the widget service, retrying"
STRINGS = {
    "en": {"plugin.title": "Limping", "error.unreachable": "Cannot reach {service}: trying again by itself."},
    "de": {"plugin.title": "Hinkend", "error.unreachable": "{service} ist nicht erreichbar: Es versucht es selbst weiter."},
}


class Limping:
    """Starts, keeps the HostApi it was given (as a plugin's background task would)."""

    def __init__(self, *, during_startup: tuple[str, dict[str, Any]] | None = None, fail_after: bool = False) -> None:
        self.hosts: list[HostApi] = []
        self.during_startup = during_startup
        self.fail_after = fail_after

    def api(self) -> HostApi:
        """The HostApi of its latest start."""
        return self.hosts[-1]

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=PLUGIN, title="Limping", spec=">=1.12,<2", grant_by_default=True)

    @hookimpl
    def register_i18n(self, register: Callable[..., None]) -> None:
        register(I18nBundle(PLUGIN, STRINGS))

    @hookimpl
    async def startup(self, host: HostApi) -> None:
        self.hosts.append(host)
        if self.during_startup:
            reason, options = self.during_startup
            host.set_degraded(reason, **options)
        if self.fail_after:
            raise NotReady("no widget token is set")


async def listed(admin: Any) -> dict[str, Any]:
    response = await admin.get("/api/admin/plugins")
    assert response.status_code == 200, response.text
    return {p["id"]: p for p in response.json()["plugins"]}[PLUGIN]


async def detail(admin: Any) -> dict[str, Any]:
    response = await admin.get(f"/api/admin/plugins/{PLUGIN}")
    assert response.status_code == 200, response.text
    return response.json()


async def warnings(admin: Any) -> list[dict[str, Any]]:
    return [w for w in (await admin.get("/api/admin/status")).json()["warnings"] if w["id"].startswith("plugin_")]


def the_rest(status: Any) -> dict[str, Any]:
    """Everything of the status but the degraded reason."""
    return {k: v for k, v in status.as_dict().items() if k != "degraded"}


async def test_a_running_plugin_says_it_is_degraded_in_the_readers_language_and_nothing_else_changes(skald, caplog):
    caplog.set_level(logging.INFO)
    plugin = Limping()
    host = await skald.start(plugins=[plugin], enable=[PLUGIN])
    admin = await host.admin()
    status = host.core.plugins.status(PLUGIN)
    before = the_rest(status)
    assert (await listed(admin))["degraded"] is None and (await detail(admin))["degraded"] is None

    plugin.api().set_degraded(REASON, key="error.unreachable", values={"service": f"Widgets ({SECRET})"})
    plugin.api().set_degraded(REASON, key="error.unreachable", values={"service": f"Widgets ({SECRET})"})  # again: once in the log

    english = f"Cannot reach Widgets ({SECRET}): trying again by itself."
    assert (await listed(admin))["degraded"] == english
    assert (await detail(admin))["degraded"] == english
    raw = {p["id"]: p for p in (await admin.get("/api/admin/plugins.json")).json()["plugins"]}[PLUGIN]
    assert raw["degraded"] == REASON  # the English reason, as the log says it
    assert [(w["id"], w["text"]) for w in await warnings(admin)] == [
        ("plugin_degraded", f"The plugin Limping runs but cannot do its job right now (its card in the catalog says more): {english}")
    ]
    # Nothing else: started, healthy, no error, its tools offered as before.
    assert the_rest(status) == before and (status.started, status.healthy, status.error) == (True, True, None)
    assert host.core.catalog.tools_usable(await host.core.users.find("admin"), PLUGIN)

    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    german = f"Widgets ({SECRET}) ist nicht erreichbar: Es versucht es selbst weiter."
    assert (await listed(admin))["degraded"] == german
    assert (await detail(admin))["degraded"] == german
    assert [w["text"] for w in await warnings(admin)] == [
        f"Das Plugin Hinkend läuft, kann seine Aufgabe aber gerade nicht erfüllen (seine Karte im Katalog sagt mehr): {german}"
    ]

    plugin.api().set_degraded(None)
    assert (await listed(admin))["degraded"] is None and (await detail(admin))["degraded"] is None
    assert await warnings(admin) == [] and the_rest(status) == before

    lines = [(r.levelno, r.getMessage()) for r in caplog.records if f"plugin {PLUGIN} " in r.getMessage()]
    assert (logging.WARNING, f"plugin {PLUGIN} runs but cannot do its job: {REASON}") in lines
    assert (logging.INFO, f"plugin {PLUGIN} can do its job again") in lines
    assert len([line for line in lines if "cannot do its job" in line[1]]) == 1, lines
    assert SECRET not in caplog.text


async def test_disabling_stopping_or_starting_again_clears_it_and_a_stopped_runs_call_is_ignored(skald):
    plugin = Limping()
    host = await skald.start(plugins=[plugin], enable=[PLUGIN])
    admin = await host.admin()
    first = plugin.api()
    first.set_degraded(REASON)
    assert (await listed(admin))["degraded"] == REASON  # no key: the English reason for every reader

    assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": False})).json()["degraded"] is None
    first.set_degraded(REASON)  # a task the stopped run left behind
    assert (await listed(admin))["degraded"] is None and await warnings(admin) == []

    enabled = await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})
    assert enabled.json()["degraded"] is None and plugin.api() is not first
    first.set_degraded(REASON)
    assert (await listed(admin))["degraded"] is None
    plugin.api().set_degraded(REASON)
    assert (await listed(admin))["degraded"] == REASON

    assert await host.core.restart_plugin(PLUGIN)  # a settings save: stopped, then started again
    assert (await listed(admin))["degraded"] is None
    plugin.api().set_degraded("another reason")
    assert (await listed(admin))["degraded"] == "another reason"

    await host.core.stop_plugin(PLUGIN, reason="stopping")
    assert host.core.plugins.status(PLUGIN).degraded is None


async def test_it_may_be_said_during_startup_and_a_failed_start_says_its_error_instead(skald):
    host = await skald.start(plugins=[Limping(during_startup=(REASON, {"key": "error.unreachable", "values": {"service": "Widgets"}}))], enable=[PLUGIN])
    admin = await host.admin()
    entry = await listed(admin)
    assert (entry["healthy"], entry["degraded"]) == (True, "Cannot reach Widgets: trying again by itself.")
    await skald.close()

    host = await skald.start(plugins=[Limping(during_startup=(REASON, {}), fail_after=True)], enable=[PLUGIN], settings=skald.settings("second"))
    admin = await host.admin()
    entry = await listed(admin)
    assert (entry["healthy"], entry["degraded"], entry["error"]) == (False, None, "startup: no widget token is set")
    assert [w["id"] for w in await warnings(admin)] == ["plugin_waiting"]  # a NotReady: waiting, not broken


async def test_a_key_no_bundle_has_is_a_missing_translation_and_reads_as_the_english_reason(skald):
    plugin = Limping()
    host = await skald.start(plugins=[plugin], enable=[PLUGIN])
    admin = await host.admin()
    plugin.api().set_degraded(REASON, key="error.no_such_string")
    status = (await admin.get("/api/admin/status")).json()
    assert f"{PLUGIN}.error.no_such_string" in status["missing_translations"]["en"]
    assert f"{PLUGIN}.error.no_such_string" in status["missing_everywhere"]
    assert (await listed(admin))["degraded"] == REASON


async def test_bad_arguments_are_refused_and_a_long_reason_is_cut(skald):
    plugin = Limping()
    host = await skald.start(plugins=[plugin], enable=[PLUGIN])
    admin = await host.admin()
    for bad in ("", "   ", 42):
        with pytest.raises(ValueError):
            plugin.api().set_degraded(bad)
    with pytest.raises(ValueError):
        plugin.api().set_degraded(REASON, key="")
    assert (await listed(admin))["degraded"] is None
    plugin.api().set_degraded("x" * 5000)
    assert len((await listed(admin))["degraded"]) == 1000

"""A plugin upgrade that changes its settings schema: what the plugin reads always
satisfies the schema of the version running now. A stored value the new schema refuses
(or of a field it no longer has) reads as the field's default, the admin is told which
fields (by name: the values may be secrets), and a save, of one field or of the whole
form, stores a result the new schema accepts. Until that save the stored values stay,
so going back to the old version finds them again."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet, PluginInfo
from skald_host.core.plugins.config_schema import ConfigInvalid

from .test_isolation import info

V1_CONFIG = (
    ConfigField("max_step", "integer", default=5, minimum=1, maximum=10),
    ConfigField("unit", "string", default="items"),
    ConfigField("mode", "choice", choices=("add", "mul"), default="add"),
)
V2_CONFIG = (
    ConfigField("max_step", "integer", default=5, minimum=1, maximum=8),
    ConfigField("mode", "integer", default=1),
)
V1_SET = ConfigSet("tally_page", "Tally page", (ConfigField("max_events", "integer", default=10, maximum=100),), owner="main")
V2_SET = ConfigSet("tally_page", "Tally page", (ConfigField("max_events", "integer", default=2, maximum=3),), owner="main")
V1_MEMBER = (ConfigField("step", "integer", default=1, maximum=10),)
V2_MEMBER = (ConfigField("step", "integer", default=1, maximum=2),)


class Tally:
    def __init__(self, config: Any, config_set: ConfigSet, member: Any) -> None:
        self.config, self.config_set, self.member = config, config_set, member

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("tally", config_schema=self.config, user_config_schema=self.member)

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(self.config_set)


def v1() -> Tally:
    return Tally(V1_CONFIG, V1_SET, V1_MEMBER)


def v2() -> Tally:
    return Tally(V2_CONFIG, V2_SET, V2_MEMBER)


async def _upgraded(skald: Any) -> tuple[Any, str]:
    """v1 with values v2 refuses stored, then the same data under v2."""
    settings = skald.settings()
    host = await skald.start(plugins=[v1()], settings=settings, enable=["tally"])
    admin = await host.admin()
    saved = await admin.put("/api/admin/plugins/tally/config", json={"config": {"max_step": 10, "unit": "beans", "mode": "mul"}})
    assert saved.status_code == 200, saved.text
    saved = await admin.put("/api/admin/settings/tally_page", json={"values": {"max_events": 20}})
    assert saved.status_code == 200, saved.text
    member_id = (await host.create_member("ada"))["id"]
    await host.core.host_api("tally").set_user_config(member_id, {"step": 9, "chat": "own key"})
    await host.stop()
    return await skald.start(plugins=[v2()], settings=settings), member_id


async def test_values_the_new_schema_refuses_read_as_defaults_and_the_admin_is_told(skald, caplog):
    caplog.set_level(logging.WARNING)
    host, member_id = await _upgraded(skald)
    api = host.core.host_api("tally")

    assert dict(await api.get_config()) == {"max_step": 5, "mode": 1}
    assert dict(await api.get_settings("tally_page")) == {"max_events": 2}
    # A key outside the per-member schema is the plugin's own: kept.
    assert dict(await api.get_user_config(member_id)) == {"step": 1, "chat": "own key"}
    assert "max_step, unit, mode" in caplog.text and "max_events" in caplog.text
    assert "beans" not in caplog.text and "mul" not in caplog.text  # names only: a value may be a secret
    assert "until an admin saves them or removes them (\"Remove the stored values\"" in caplog.text

    admin = await host.admin()
    card = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}["tally"]
    assert card["stale_settings"] == ["max_step", "unit", "mode", "tally_page.max_events"]
    detail = (await admin.get("/api/admin/plugins/tally")).json()
    assert detail["stale_settings"] == card["stale_settings"]
    assert detail["config"] == {"max_step": 5, "mode": 1}  # the form shows what the plugin reads
    (page_set,) = detail["settings_sets"]
    assert (page_set["values"], page_set["stale"]) == ({"max_events": 2}, ["max_events"])

    # Kept until the admin saves: a downgrade finds them again.
    assert await host.core.catalog._config("tally") == {"max_step": 10, "unit": "beans", "mode": "mul"}
    assert await host.core.instance_settings.values("tally_page") == {"max_events": 20}


async def test_the_admin_removes_stale_settings_without_saving_the_form(skald):
    """A renamed or dropped field (``unit``) has nothing in the form to correct: the
    notice's "remove" drops what the version refuses, and nothing is listed after."""
    host, _ = await _upgraded(skald)
    await host.core.set_plugin_enabled("tally", True)
    admin = await host.admin()

    removed = await admin.delete("/api/admin/plugins/tally/stale-settings")

    assert removed.status_code == 200, removed.text
    assert removed.json()["stale_settings"] == [] and removed.json()["settings_sets"][0]["stale"] == []
    card = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}["tally"]
    assert card["stale_settings"] == []
    assert await host.core.catalog._config("tally") == {}
    assert await host.core.instance_settings.values("tally_page") == {}
    api = host.core.host_api("tally")
    assert dict(await api.get_config()) == {"max_step": 5, "mode": 1}  # what it read before
    assert host.core.plugins.status("tally").started


async def test_a_save_of_one_field_stores_a_result_the_new_schema_accepts(skald):
    host, _ = await _upgraded(skald)
    admin = await host.admin()
    api = host.core.host_api("tally")

    saved = await admin.put("/api/admin/plugins/tally/config", json={"config": {"max_step": 3}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["config"] == {"max_step": 3, "mode": 1}
    assert await host.core.catalog._config("tally") == {"max_step": 3}
    assert dict(await api.get_config()) == {"max_step": 3, "mode": 1}

    refused = await admin.put("/api/admin/plugins/tally/config", json={"config": {"max_step": 9}})
    assert refused.status_code == 400, refused.text

    card = {p["id"]: p for p in (await admin.get("/api/admin/plugins")).json()["plugins"]}["tally"]
    assert card["stale_settings"] == ["tally_page.max_events"]


async def test_saving_the_form_as_shown_works(skald):
    host, _ = await _upgraded(skald)
    admin = await host.admin()
    detail = (await admin.get("/api/admin/plugins/tally")).json()

    saved = await admin.put("/api/admin/plugins/tally/config", json={"config": detail["config"]})
    assert saved.status_code == 200, saved.text
    (page_set,) = detail["settings_sets"]
    saved = await admin.put("/api/admin/settings/tally_page", json={"values": page_set["values"]})
    assert saved.status_code == 200, saved.text
    assert await host.core.instance_settings.values("tally_page") == {"max_events": 2}

    detail = (await admin.get("/api/admin/plugins/tally")).json()
    assert detail["stale_settings"] == []


async def test_set_user_config_refuses_a_value_its_schema_refuses(skald):
    host, member_id = await _upgraded(skald)
    api = host.core.host_api("tally")
    with pytest.raises(ConfigInvalid, match="step: must be at most 2"):
        await api.set_user_config(member_id, {"step": 9})
    await api.set_user_config(member_id, {"step": 2, "chat": "own key"})
    assert dict(await api.get_user_config(member_id)) == {"step": 2, "chat": "own key"}

"""Instance config and settings sets are validated against their ``ConfigField``
schema: a bad value is a 400 whose message starts with the field's name, and a
request is taken whole or not at all."""

from __future__ import annotations

import pytest

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet

from .support import Routed, catalog_entry, granted, member_id, registry_dump

SCHEMA = (
    ConfigField("name", "string", max_length=10),
    ConfigField("count", "integer", minimum=1, maximum=10),
    ConfigField("ratio", "number", minimum=0, maximum=1),
    ConfigField("mode", "choice", choices=("fast", "slow")),
    ConfigField("endpoint", "url"),
    ConfigField("flag", "boolean"),
    ConfigField("token", "string", secret=True),
    ConfigField("code", "string", description="Two to four small letters.", pattern=r"[a-z]{2,4}"),
    ConfigField("hook", "url", description="An https address.", pattern=r"https://\S+"),
)

GOOD = {"name": "ok", "count": 3, "ratio": 0.5, "mode": "fast", "endpoint": "https://example.org/x", "flag": True,
        "code": "abc", "hook": "https://example.org/hook"}


class Shaped(Routed):
    def __init__(self) -> None:
        super().__init__("shaped", config_schema=SCHEMA)

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet("shaped-general", "Shaped", SCHEMA))
        register(ConfigSet("shaped-own", "Shaped (own page)", SCHEMA, owner="main"))


BAD_VALUES = [
    pytest.param("nope", 1, "is not a setting of this plugin", id="unknown field"),
    pytest.param("count", "3", "must be a number", id="integer as text"),
    pytest.param("count", 2.5, "must be a whole number", id="fraction for an integer"),
    pytest.param("count", 11, "must be at most 10", id="above the maximum"),
    pytest.param("count", 0, "must be at least 1", id="below the minimum"),
    pytest.param("ratio", True, "must be a number", id="boolean as a number"),
    pytest.param("flag", "true", "must be true or false", id="text as a boolean"),
    pytest.param("mode", "medium", "must be one of fast, slow", id="not one of the choices"),
    pytest.param("endpoint", "ftp://example.org/", "must be an http(s) URL", id="not http"),
    pytest.param("endpoint", "javascript:alert(1)", "must be an http(s) URL", id="script URL"),
    pytest.param("endpoint", "https://", "must be an http(s) URL", id="no host"),
    pytest.param("endpoint", "http://[::1", "must be an http(s) URL", id="unclosed IPv6 bracket"),
    pytest.param("endpoint", "http://127.0.0.1:99999", "must be an http(s) URL", id="port out of range"),
    pytest.param("endpoint", "http://127.0.0.1:0", "must be an http(s) URL", id="port zero"),
    pytest.param("endpoint", "http://example.org:http/", "must be an http(s) URL", id="port not a number"),
    pytest.param("endpoint", "http://exa mple.org", "must be an http(s) URL", id="space in the host"),
    pytest.param("endpoint", "http://exa\tmple.org", "must be an http(s) URL", id="tab in the host"),
    pytest.param("endpoint", "http://@/x", "must be an http(s) URL", id="empty host after user info"),
    pytest.param("name", "x" * 11, "must be at most 10 characters", id="too long"),
    pytest.param("name", ["a"], "must be text", id="list as text"),
    pytest.param("code", "ABC", "does not have the form its hint describes", id="outside the pattern"),
    pytest.param("code", "abcde", "does not have the form its hint describes", id="the pattern matches the whole text"),
    pytest.param("hook", "http://example.org/hook", "does not have the form its hint describes", id="a url outside its pattern"),
]


@pytest.mark.parametrize(("field", "value", "reason"), BAD_VALUES)
async def test_a_bad_value_is_refused_naming_the_field_and_nothing_is_half_written(skald, field, value, reason):
    host = await skald.start(plugins=[Shaped()], enable=["shaped"])
    admin = await host.admin()
    assert (await admin.put("/api/admin/plugins/shaped/config", json={"config": GOOD})).status_code == 200
    before = await registry_dump(host)

    # One good change and one bad value in the same request: neither is stored.
    for path, key in (("/api/admin/plugins/shaped/config", "config"), ("/api/admin/settings/shaped-general", "values")):
        refused = await admin.put(path, json={key: {"name": "changed", field: value}})
        assert refused.status_code == 400, (path, refused.text)
        body = refused.json()
        assert body["errors"] == [{key: body.get(key, {}) for key in ("field", "error", "code", "values")}], body  # the one refusal
        assert body.pop("code").startswith("config_") and set(body) - {"values", "errors"} == {"error", "field"}, body
        assert (body["error"], body["field"]) == (f"{field}: {reason}", field)

    assert await registry_dump(host) == before
    assert await host.core.host_api("shaped").get_config() == GOOD


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
async def test_a_number_that_is_not_finite_is_refused(skald, literal):
    """Python's JSON parser accepts these literals; a stored NaN would pass every bound
    and come back as a catalog page the browser cannot parse."""
    host = await skald.start(plugins=[Shaped()], enable=["shaped"])
    admin = await host.admin()
    for field in ("ratio", "count"):
        refused = await admin.put(
            "/api/admin/plugins/shaped/config",
            content=f'{{"config": {{"{field}": {literal}}}}}',
            headers={"Content-Type": "application/json"},
        )
        assert refused.status_code == 400, refused.text
        # Refused by the API's one JSON reader, before the catalog sees it (issue 17.4).
        assert refused.json() == {"error": f"'config.{field}' must be a finite number: NaN and Infinity are not JSON", "field": f"config.{field}", "code": "field_invalid", "values": {"field": f"config.{field}"}}
    assert await host.core.host_api("shaped").get_config() == {}


async def test_a_config_that_is_not_an_object_is_refused(skald):
    host = await skald.start(plugins=[Shaped()], enable=["shaped"])
    admin = await host.admin()
    for body in ({"config": ["count", 3]}, {"config": "count=3"}, {}):
        refused = await admin.put("/api/admin/plugins/shaped/config", json=body)
        assert refused.status_code == 400, refused.text
        assert "config" in refused.json()["error"]


async def test_a_refused_config_does_not_give_birth_to_the_plugins_row(skald):
    """The first configuration is a row's birth, which seeds grants; a refused one must
    not be, or a typo would hand the plugin out."""
    host = await skald.start(plugins=[Shaped()])
    admin = await host.admin()
    await host.member("alice")
    alice_id = await member_id(host, "alice")

    refused = await admin.put("/api/admin/plugins/shaped/config", json={"config": {"count": 99}})
    assert refused.status_code == 400
    assert (await catalog_entry(admin, "shaped"))["row_born"] is False
    assert not await granted(admin, alice_id, "shaped")

    assert (await admin.put("/api/admin/plugins/shaped/config", json={"config": {"count": 9}})).status_code == 200
    assert (await catalog_entry(admin, "shaped"))["row_born"] is True
    assert await granted(admin, alice_id, "shaped")


async def test_valid_values_are_stored_and_shown_with_defaults_and_masks(skald):
    host = await skald.start(plugins=[Shaped()], enable=["shaped"])
    admin = await host.admin()
    saved = await admin.put("/api/admin/plugins/shaped/config", json={"config": {**GOOD, "count": 7.0, "token": "t0k"}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["config"] == {**GOOD, "count": 7, "token": "********"}

    detail = (await admin.get("/api/admin/plugins/shaped")).json()
    assert detail["config"] == saved.json()["config"]
    assert [f["name"] for f in detail["config_schema"]] == [f.name for f in SCHEMA]
    assert await host.core.host_api("shaped").get_config() == {**GOOD, "count": 7, "token": "t0k"}


async def test_unknown_plugins_and_settings_sets_are_refused(skald):
    host = await skald.start(plugins=[Shaped()], enable=["shaped"])
    admin = await host.admin()
    assert (await admin.put("/api/admin/plugins/ghost/config", json={"config": {}})).status_code == 404
    assert (await admin.get("/api/admin/plugins/ghost")).status_code == 404
    missing_set = await admin.put("/api/admin/settings/ghost", json={"values": {}})
    assert missing_set.status_code in (400, 404)
    assert "ghost" in missing_set.json()["error"]


# -- instance settings sets (register_config_sets) -------------------------------------------


async def test_settings_sets_without_an_owner_appear_on_the_general_settings_page(skald):
    host = await skald.start(plugins=[Shaped()])
    admin = await host.admin()
    alice = await host.member("alice")

    general = await admin.get("/api/admin/settings")
    assert general.status_code == 200
    sets = {s["id"]: s for s in general.json()["sets"]}
    assert "shaped-general" in sets and "shaped-own" not in sets  # owned sets render on their own page
    assert sets["shaped-general"]["plugin_id"] == "shaped"
    assert [f["name"] for f in sets["shaped-general"]["fields"]] == [f.name for f in SCHEMA]

    saved = await admin.put("/api/admin/settings/shaped-general", json={"values": {"count": 4, "token": "abc"}})
    assert saved.status_code == 200, saved.text
    assert (saved.json()["values"]["count"], saved.json()["values"]["token"]) == (4, "********")
    again = {s["id"]: s for s in (await admin.get("/api/admin/settings")).json()["sets"]}
    assert again["shaped-general"]["values"]["count"] == 4

    assert (await alice.get("/api/admin/settings")).status_code == 403
    assert (await alice.put("/api/admin/settings/shaped-general", json={"values": {"count": 5}})).status_code == 403
    assert (await host.core.instance_settings.values("shaped-general"))["count"] == 4


class Keyed(Routed):
    def __init__(self) -> None:
        super().__init__("keyed", config_schema=(
            ConfigField("api_key", "string", label="API key", required=True, secret=True),
            ConfigField("region", "string", label="Region", description="Two small letters.", pattern=r"[a-z]{2}"),
            ConfigField("retries", "integer", label="Retries", minimum=0, maximum=5),
        ))


async def test_every_bad_field_is_named_in_one_refusal_and_nothing_is_stored(skald):
    host = await skald.start(plugins=[Keyed()], enable=["keyed"])
    admin = await host.admin()
    before = await registry_dump(host)

    refused = await admin.put("/api/admin/plugins/keyed/config", json={"config": {"api_key": None, "region": "EU", "retries": 2, "x": 1}})

    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["errors"] == [
        {"field": "x", "error": "x: is not a setting of this plugin", "code": "config_unknown", "values": {}},
        {"field": "api_key", "error": "api_key: is required", "code": "config_required", "values": {}},
        {"field": "region", "error": "region: does not have the form its hint describes", "code": "config_pattern", "values": {}},
    ]
    assert {k: body[k] for k in ("field", "error", "code")} == {"field": "x", "error": "x: is not a setting of this plugin", "code": "config_unknown"}
    assert await registry_dump(host) == before
    assert await host.core.host_api("keyed").get_config() == {}


class Large(Routed):
    def __init__(self) -> None:
        super().__init__("large", config_schema=(ConfigField("turns", "integer", minimum=1, maximum=1000),))


async def test_a_refused_bound_is_said_as_the_forms_hint_says_it(skald):
    """The hint said "Between 1 and 1,000", the refusal "must be at most 1000": two
    limits, it read. The bound is said in the reader's number format, in English
    "1,000", in German "1.000", as the hint's ``toLocaleString``."""
    host = await skald.start(plugins=[Large()], enable=["large"])
    admin = await host.admin()

    refused = await admin.put("/api/admin/plugins/large/config", json={"config": {"turns": 5000}})

    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["error"] == "turns: must be at most 1,000"
    assert body["values"] == {"maximum": "1,000", "maximum_number": 1000}
    strings = host.core.strings
    assert strings.reason({"code": body["code"], "values": body["values"]}, "de") == "darf höchstens 1.000 sein"
    assert strings.reason({"code": body["code"], "values": body["values"]}, "en") == "must be at most 1,000"

"""Per-member plugin config: ``PUT /api/plugins/<id>/my-config`` is validated against
the plugin's ``user_config_schema`` and handed to its ``user_config_updated`` hook,
which decides what to store; a plugin without the hook gets its values stored."""

from __future__ import annotations

from typing import Any

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField

from .support import Routed, member_id, registry_dump

PAIRING_SCHEMA = (ConfigField("code", "string", max_length=6), ConfigField("nickname", "string", max_length=20))


class Pairing(Routed):
    """Turns a pairing code into a binding, as the Telegram plugin does."""

    def __init__(self) -> None:
        super().__init__("pairing", user_config_schema=PAIRING_SCHEMA)
        self.received: list[tuple[str, dict[str, Any]]] = []

    @hookimpl
    async def user_config_updated(self, member_id: str, values: dict, host) -> None:
        self.received.append((member_id, dict(values)))
        if values.get("code") == "000000":
            raise ValueError("that pairing code has expired; ask the bot for a new one")
        if values.get("code") == "999999":
            raise RuntimeError("database on fire at /srv/secret/path")
        await host.set_user_config(member_id, {**values, "code": values.get("code", "").upper()})


class Plain(Routed):
    def __init__(self) -> None:
        super().__init__("plain", user_config_schema=(ConfigField("colour", "choice", choices=("red", "blue")),))


async def test_saved_values_are_validated_and_handed_to_the_plugin(skald):
    pairing = Pairing()
    host = await skald.start(plugins=[pairing], enable=["pairing"])
    alice = await host.member("alice")
    alice_id = await member_id(host, "alice")

    saved = await alice.put("/api/plugins/pairing/my-config", json={"config": {"code": "ab12cd"}})
    assert saved.status_code == 200, saved.text
    assert pairing.received == [(alice_id, {"code": "ab12cd"})]
    assert saved.json()["config"] == {"code": "AB12CD", "nickname": None}  # what the plugin stored
    mine = {p["id"]: p for p in (await alice.get("/api/plugins/mine")).json()["plugins"]}
    assert mine["pairing"]["user_config"] == {"code": "AB12CD", "nickname": None}
    assert mine["pairing"]["configured"] is True
    assert [f["name"] for f in mine["pairing"]["user_config_schema"]] == ["code", "nickname"]


async def test_a_value_the_schema_refuses_never_reaches_the_plugin(skald):
    pairing = Pairing()
    host = await skald.start(plugins=[pairing], enable=["pairing"])
    alice = await host.member("alice")

    for values, error, code, code_values in (
        ({"code": "1234567"}, "code: must be at most 6 characters", "config_too_long", {"limit": 6}),
        ({"pin": "1"}, "pin: is not a setting of this plugin", "config_unknown", None),
        ({"nickname": 7}, "nickname: must be text", "config_text", None),
    ):
        refused = await alice.put("/api/plugins/pairing/my-config", json={"config": values})
        expected = {"error": error, "field": error.split(":")[0], "code": code} | ({"values": code_values} if code_values else {})
        assert (refused.status_code, refused.json()) == (400, expected)
    assert pairing.received == []


async def test_a_plugin_refusing_the_values_with_value_error_answers_400_with_its_message(skald):
    pairing = Pairing()
    host = await skald.start(plugins=[pairing], enable=["pairing"])
    alice = await host.member("alice")
    before = await registry_dump(host)

    refused = await alice.put("/api/plugins/pairing/my-config", json={"config": {"code": "000000"}})
    # Its words, as it said them (a plugin says them in the member's language, as
    # Telegram's host.translate does): the code's text is the reason alone, never ours.
    said = "that pairing code has expired; ask the bot for a new one"
    assert (refused.status_code, refused.json()) == (
        400, {"error": said, "code": "plugin_refused_value", "values": {"plugin": "pairing", "reason": said}})
    german = (await alice.get("/api/i18n?locale=de")).json()["strings"]["core.error.plugin_refused_value"]
    assert german.format(**refused.json()["values"]) == said

    crashed = await alice.put("/api/plugins/pairing/my-config", json={"config": {"code": "999999"}})
    assert (crashed.status_code, crashed.json()["code"]) == (400, "plugin_settings_not_applied")
    assert await registry_dump(host) == before


async def test_without_the_hook_the_host_stores_the_values(skald):
    host = await skald.start(plugins=[Plain()], enable=["plain"])
    alice = await host.member("alice")
    alice_id = await member_id(host, "alice")

    saved = await alice.put("/api/plugins/plain/my-config", json={"config": {"colour": "blue"}})
    assert (saved.status_code, saved.json()) == (200, {"config": {"colour": "blue"}})
    assert await host.core.host_api("plain").get_user_config(alice_id) == {"colour": "blue"}
    bad = await alice.put("/api/plugins/plain/my-config", json={"config": {"colour": "green"}})
    assert (bad.status_code, bad.json()) == (400, {"error": "colour: must be one of red, blue", "field": "colour", "code": "config_choice", "values": {"choices": "red, blue"}})


async def test_only_members_who_may_use_the_plugin_can_save_its_config(skald):
    host = await skald.start(plugins=[Plain()], enable=["plain"])
    admin = await host.admin()
    kid = await host.member("kid", role="restricted")  # no grant
    alice = await host.member("alice")

    assert (await kid.put("/api/plugins/plain/my-config", json={"config": {"colour": "red"}})).status_code == 404
    assert "plain" not in {p["id"] for p in (await kid.get("/api/plugins/mine")).json()["plugins"]}

    await admin.put("/api/admin/plugins/plain/enabled", json={"enabled": False})
    assert (await alice.put("/api/plugins/plain/my-config", json={"config": {"colour": "red"}})).status_code == 404
    assert (await alice.get("/api/plugins/mine")).json()["plugins"] == []
    assert (await host.client().put("/api/plugins/plain/my-config", json={"config": {}})).status_code == 401

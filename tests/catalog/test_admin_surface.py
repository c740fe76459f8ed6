"""The admin side of the catalog: only admins reach it, and no endpoint, admin or
member, ever sends a secret back.

Both sweeps enumerate the routes from the running app rather than from a list in this
file, so a catalog route added later is swept without anyone remembering to add it.
"""

from __future__ import annotations

import re
from typing import Any

from quart import Blueprint

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet

from .support import Routed, member_id, registry_dump

PARAM = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
MASK = "********"

#: A valid body for each write, so a refusal can only come from the gate.
BODIES = {
    "enabled": {"enabled": False},
    "config": {"config": {"greeting": "hi"}},
    "plugins": {"plugins": []},
    "settings": {"values": {"level": 3}},
}


class Vault(Routed):
    """A plugin with a secret in each place a secret can be declared."""

    def __init__(self) -> None:
        super().__init__(
            "vault",
            config_schema=(ConfigField("greeting"), ConfigField("api_key", secret=True)),
            user_config_schema=(ConfigField("nickname"), ConfigField("pin", secret=True)),
        )

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet("vault-set", "Vault settings", (ConfigField("level", "integer"), ConfigField("token", secret=True))))

    def add_routes(self, blueprint: Blueprint) -> None:
        @blueprint.get("/status")
        async def status() -> dict[str, Any]:
            return {"ok": True}


def catalog_routes(app: Any) -> list[tuple[str, str, str]]:
    """(method, rule, endpoint) of every catalog route: the admin blueprint and the
    member-facing plugin blueprint."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.split(".")[0] in ("admin_plugins", "plugins"):
            for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
                found.append((method, rule.rule, rule.endpoint))
    return sorted(found)


def fill(rule: str, **values: str) -> str:
    return PARAM.sub(lambda m: values[m.group(1)], rule)


def body_for(rule: str) -> dict[str, Any]:
    last = rule.rstrip("/").rsplit("/", 1)[-1]
    if rule.startswith("/api/admin/settings/"):
        return BODIES["settings"]
    return BODIES.get(last, {"config": {}})


async def test_every_admin_catalog_route_refuses_members_and_strangers(skald):
    host = await skald.start(plugins=[Vault()], enable=["vault"])
    admin = await host.admin()
    alice = await host.member("alice")
    kid = await host.member("kid", role="restricted")
    ids = {"plugin_id": "vault", "member_id": await member_id(host, "alice"), "set_id": "vault-set"}
    admin_routes = [r for r in catalog_routes(host.app) if r[2].startswith("admin_plugins.")]
    assert len(admin_routes) >= 9, admin_routes  # the sweep found the real surface
    before = await registry_dump(host)

    for method, rule, _ in admin_routes:
        path = fill(rule, **ids)
        body = body_for(rule) if method != "GET" else None
        for client in (alice, kid):
            response = await client.request(method, path, json=body)
            assert response.status_code == 403, (method, path, response.text)
            assert response.json() == {"error": "forbidden", "code": "forbidden"}
        stranger = await host.client().request(method, path, json=body)
        assert stranger.status_code == 401, (method, path, stranger.text)

    assert await registry_dump(host) == before  # nothing refused wrote anything
    for method, rule, _ in admin_routes:  # and the same requests are real for an admin
        response = await admin.request(method, fill(rule, **ids), json=body_for(rule) if method != "GET" else None)
        assert response.status_code == 200, (method, rule, response.text)


async def test_no_catalog_endpoint_ever_returns_a_secret(skald):
    host = await skald.start(plugins=[Vault()], enable=["vault"])
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = await member_id(host, "alice")
    api_key, token, pin = "sk-live-7f3a9c2e", "settings-token-55d1", "pin-90210-x"

    writes = [
        await admin.put("/api/admin/plugins/vault/config", json={"config": {"greeting": "hi", "api_key": api_key}}),
        await admin.put("/api/admin/settings/vault-set", json={"values": {"level": 2, "token": token}}),
        await alice.put("/api/plugins/vault/my-config", json={"config": {"nickname": "Al", "pin": pin}}),
    ]
    assert [w.status_code for w in writes] == [200, 200, 200], [w.text for w in writes]
    assert writes[0].json()["config"]["api_key"] == MASK
    assert writes[1].json()["values"]["token"] == MASK
    assert writes[2].json()["config"]["pin"] == MASK

    ids = {"plugin_id": "vault", "member_id": alice_id, "set_id": "vault-set"}
    responses = list(writes)
    for method, rule, _ in catalog_routes(host.app):
        if method == "GET":
            for client in (admin, alice):
                responses.append(await client.get(fill(rule, **ids)))
    responses += [await admin.get("/api/admin/members"), await admin.get(f"/api/admin/members/{alice_id}")]
    assert sum(r.status_code == 200 for r in responses) >= 12

    leaks = [
        (str(r.request.url), secret)
        for r in responses
        for secret in (api_key, token, pin)
        if secret in r.text or secret in str(r.headers)
    ]
    assert leaks == []


async def test_sending_the_mask_back_keeps_the_stored_secret(skald):
    host = await skald.start(plugins=[Vault()], enable=["vault"])
    admin = await host.admin()
    plugin_api = host.core.host_api("vault")
    await admin.put("/api/admin/plugins/vault/config", json={"config": {"greeting": "hi", "api_key": "first-key"}})

    # What a settings form sends back: every field, the secret as the mask it was shown.
    echoed = await admin.put("/api/admin/plugins/vault/config", json={"config": {"greeting": "hello", "api_key": MASK}})
    assert echoed.json()["config"] == {"greeting": "hello", "api_key": MASK}
    assert await plugin_api.get_config() == {"greeting": "hello", "api_key": "first-key"}

    await admin.put("/api/admin/plugins/vault/config", json={"config": {"greeting": "hey"}})  # left out: kept
    assert (await plugin_api.get_config())["api_key"] == "first-key"

    await admin.put("/api/admin/settings/vault-set", json={"values": {"token": "set-token"}})
    await admin.put("/api/admin/settings/vault-set", json={"values": {"token": MASK, "level": 4}})
    assert await host.core.instance_settings.values("vault-set") == {"token": "set-token", "level": 4}

    cleared = await admin.put("/api/admin/plugins/vault/config", json={"config": {"api_key": None}})  # null clears
    assert cleared.json()["config"]["api_key"] is None
    assert "api_key" not in await plugin_api.get_config()

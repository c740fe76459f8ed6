"""Issue 17.6: a member's "What the admin can read" facts (``GET /api/me/privacy``),
from their access as it is now: which models (and so which providers) may receive
their messages, which plugins can act for them, whether their file is encrypted.
Two members with different grants, against a real host; then grants, roles and
plugins change and the next answer follows with nothing else done."""

from __future__ import annotations

from .support import Routed, member_id, set_enabled


async def add_provider(admin, name: str, base_url: str, models: dict[str, bool]) -> None:
    provider = await admin.post("/api/admin/models/providers", json={"name": name, "base_url": base_url, "api_key": "sk-secret"})
    assert provider.status_code == 201, provider.text
    for priority, (model, enabled) in enumerate(models.items(), start=1):
        body = {"provider_id": provider.json()["id"], "model": model, "priority": priority, "enabled": enabled}
        created = await admin.post("/api/admin/models/entries", json=body)
        assert created.status_code == 201, created.text


async def privacy(client) -> dict:
    response = await client.get("/api/me/privacy")
    assert response.status_code == 200, response.text
    return response.json()


def titles(facts: dict) -> list[str]:
    return [p["title"] for p in facts["plugins"]]


async def test_each_member_sees_the_providers_and_the_plugins_that_reach_them(skald):
    plugins = [Routed("alpha"), Routed("beta", grant_by_default=False), Routed("linker", manages_own_access=True), Routed("gamma")]
    host = await skald.start(plugins=plugins, enable=["alpha", "beta", "linker", "gamma"])
    admin = await host.admin()
    await add_provider(admin, "Home box", "http://someone:pw@10.0.0.5:8000/v1", {"llama-local": True, "llama-off": False})
    await add_provider(admin, "Cloud", "https://api.example.org/v1", {"big-model": True})
    alice = await host.member("alice")
    kid = await host.member("kid", role="restricted")
    alice_id = await member_id(host, "alice")
    assert (await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": ["alpha", "beta", "gamma"]})).status_code == 200
    await set_enabled(admin, "gamma", False)  # granted, but off: it acts for nobody

    mine = await privacy(alice)
    assert mine["encrypted"] is True and mine["chat"] is True
    # Every enabled model can answer (the fallback chain); the disabled one cannot.
    assert sorted((m["provider"], m["endpoint"], m["model"]) for m in mine["models"]) == [
        ("Cloud", "https://api.example.org", "big-model"),
        ("Home box", "http://10.0.0.5:8000", "llama-local"),
    ]
    assert "someone" not in str(mine) and "sk-secret" not in str(mine)  # no credentials of the admin's
    assert titles(mine) == ["Alpha", "Beta", "Linker"]
    assert [p["manages_own_access"] for p in mine["plugins"]] == [False, False, True]

    # The restricted member: no auto grant, so only the plugin that decides itself.
    theirs = await privacy(kid)
    assert titles(theirs) == ["Linker"]
    assert len(theirs["models"]) == 2

    # Access changes land on the next answer.
    assert (await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": ["alpha"]})).status_code == 200
    await set_enabled(admin, "alpha", False)
    assert titles(await privacy(alice)) == ["Linker"]


async def test_a_member_who_cannot_chat_sends_nothing_to_a_model_and_plain_files_say_so(skald):
    host = await skald.start()
    admin = await host.admin()
    await add_provider(admin, "Cloud", "https://api.example.org/v1", {"big-model": True})
    created = await admin.post("/api/admin/roles", json={"id": "readers", "label": "Readers", "capabilities": []})
    assert created.status_code == 201, created.text
    reader = await host.member("reader", role="readers", encrypted=False)
    facts = await privacy(reader)
    assert (facts["chat"], facts["models"], facts["encrypted"]) == (False, [], False)
    assert (await host.client().get("/api/me/privacy")).status_code == 401

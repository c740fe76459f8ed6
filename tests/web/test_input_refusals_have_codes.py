"""Input refusals a newcomer's probe found without a code (shown as "http_400" and the
English message) or with the wrong one: each now carries a code the shell says in the
reader's words, and names what is wrong."""

from __future__ import annotations

import json

import pytest

MAX_API_KEY_CHARS, MAX_BASE_URL_CHARS = 4096, 2048  # the catalog's limits

# What other people read of a name may hold none of these: a NUL, a C1 control, the
# bidi overrides and isolates, a zero-width space.
HIDDEN = {"\u0000": "U+0000", "\u0085": "U+0085", "\u202e": "U+202E", "\u2066": "U+2066", "\u200b": "U+200B"}


def refusal(response) -> tuple[int, str | None, dict]:
    data = response.json()
    return response.status_code, data.get("code"), data.get("values", {})


async def test_a_long_api_key_is_taken_and_one_over_the_limit_refused_with_its_limit(skald):
    host = await skald.start()
    admin = await host.admin()
    # A JWT-style key runs past the old 500-character limit: taken.
    jwt_like = "eyJ" + "a" * 1500 + "." + "b" * 400 + "." + "c" * 300
    made = await admin.post("/api/admin/models/providers", json={"name": "Gateway", "base_url": "https://gw.example/v1", "api_key": jwt_like})
    assert made.status_code == 201, made.text
    base_url, key = await host.core.chat.models.provider_secret(made.json()["id"])
    assert key == jwt_like
    too_long = "k" * (MAX_API_KEY_CHARS + 1)
    created = await admin.post("/api/admin/models/providers", json={"name": "P", "base_url": "https://x.example/v1", "api_key": too_long})
    assert refusal(created) == (400, "api_key_too_long", {"field": "api_key", "limit": MAX_API_KEY_CHARS})
    assert created.json()["error"] == f"api_key is longer than {MAX_API_KEY_CHARS} characters"
    changed = await admin.patch(f"/api/admin/models/providers/{made.json()['id']}", json={"api_key": too_long})
    assert refusal(changed) == (400, "api_key_too_long", {"field": "api_key", "limit": MAX_API_KEY_CHARS})
    assert (await host.core.chat.models.provider_secret(made.json()["id"]))[1] == jwt_like


async def test_a_base_url_over_the_limit_is_refused_with_its_limit(skald):
    host = await skald.start()
    admin = await host.admin()
    huge = "https://x.example/" + "a" * 200_000
    created = await admin.post("/api/admin/models/providers", json={"name": "Huge", "base_url": huge})
    assert refusal(created) == (400, "base_url_too_long", {"field": "base_url", "limit": MAX_BASE_URL_CHARS})
    assert (await admin.get("/api/admin/models")).json()["providers"] == []
    made = await admin.post("/api/admin/models/providers", json={"name": "Fine", "base_url": "https://x.example/v1"})
    assert made.status_code == 201, made.text
    changed = await admin.patch(f"/api/admin/models/providers/{made.json()['id']}", json={"base_url": huge})
    assert refusal(changed) == (400, "base_url_too_long", {"field": "base_url", "limit": MAX_BASE_URL_CHARS})


async def test_catalog_refusals_of_a_wrong_type_name_their_field(skald):
    host = await skald.start()
    models = host.core.chat.models
    from skald_host.core.llm.catalog import ModelCatalogError

    for call, field in (
        (models.create_provider("P", "https://x.example/v1", api_key=12), "api_key"),
        (models.create_provider("P", 12), "base_url"),
        (models.create_model(12, "m"), "provider_id"),
    ):
        with pytest.raises(ModelCatalogError) as refused:
            await call
        assert (refused.value.code, refused.value.values) == ("field_type", {"field": field})


@pytest.mark.parametrize("char", sorted(HIDDEN))
async def test_names_other_people_read_refuse_hidden_and_control_characters(skald, char):
    host = await skald.start()
    admin = await host.admin()
    code = "name_hidden_character"
    name = f"Admin{char}nimda"

    role = await admin.post("/api/admin/roles", json={"id": "helpers", "label": name})
    assert refusal(role) == (400, code, {"field": "label", "char": HIDDEN[char]})
    assert (await admin.post("/api/admin/roles", json={"id": "helpers", "label": "Helpers"})).status_code == 201
    relabel = await admin.patch("/api/admin/roles/helpers", json={"label": name})
    assert refusal(relabel) == (400, code, {"field": "label", "char": HIDDEN[char]})

    member = await admin.post("/api/admin/members", json={"username": "carol", "password": "a long enough password 1", "display_name": name})
    assert refusal(member) == (400, code, {"field": "display_name", "char": HIDDEN[char]})
    carol = await host.create_member("carol", display_name="Carol")
    renamed = await admin.patch(f"/api/admin/members/{carol['id']}", json={"display_name": name})
    assert refusal(renamed) == (400, code, {"field": "display_name", "char": HIDDEN[char]})
    assert (await admin.get(f"/api/admin/members/{carol['id']}")).json()["display_name"] == "Carol"

    provider = await admin.post("/api/admin/models/providers", json={"name": name, "base_url": "https://x.example/v1"})
    assert refusal(provider) == (400, code, {"field": "name", "char": HIDDEN[char]})
    roles = (await admin.get("/api/admin/roles")).json()["roles"]
    assert not any(char in r["label"] for r in roles)
    assert (await admin.get("/api/admin/models")).json()["providers"] == []


async def test_names_in_scripts_that_join_letters_and_emoji_sequences_are_kept(skald):
    host = await skald.start()
    admin = await host.admin()
    for number, label in enumerate(("می\u200cخواهم", "Team 👩\u200d💻")):
        made = await admin.post("/api/admin/roles", json={"id": f"role{number}", "label": label})
        assert made.status_code == 201, (label, made.text)


async def test_a_setting_too_large_or_badly_named_is_refused_with_a_code(skald):
    host = await skald.start()
    await host.admin()
    member = await host.member("dana")
    large = await member.put("/api/me/settings", json={"timezone": "E" * 20_000})
    assert refusal(large) == (400, "setting_too_large", {"limit": 16384})
    assert large.json()["field"] == "timezone"
    named = await member.put("/api/me/settings", json={"no spaces": 1})
    assert named.status_code == 400 and named.json()["code"] not in (None, "http_400"), named.text


async def test_a_message_too_long_over_the_socket_is_refused_as_too_long_as_over_rest(skald):
    host = await skald.start()
    await host.admin()
    member = await host.member("erin")
    conversation = (await member.post("/api/conversations", json={})).json()["id"]
    text = "x" * 100_001
    over_rest = await member.post(f"/api/conversations/{conversation}/messages", json={"text": text})
    assert refusal(over_rest) == (400, "length_between", {"field": "text", "limit": 100_000})
    async with member.ws() as ws:
        await ws.send(json.dumps({"type": "send", "conversation_id": conversation, "text": text, "idempotency_key": "k1"}))
        reply = json.loads(await ws.recv())
        while reply.get("type") != "error":
            reply = json.loads(await ws.recv())
    assert reply == {
        "type": "error", "idempotency_key": "k1", "error": over_rest.json()["error"], "code": over_rest.json()["code"],
        "values": over_rest.json()["values"],
    }

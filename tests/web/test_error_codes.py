"""Validation errors carry a stable code the shell can say in the reader's language:
``{"error": <English>, "code": ..., "values": {...}}``; every code the host gives has
an English and a German string, and a refusal without one answers ``http_<status>``."""

from __future__ import annotations

import re
import json
from pathlib import Path

from skald_host.builtins.strings import LOCALES
from skald_host.web.errors import GENERIC_CODES
from skald_hookspecs import I18nBundle

ROOT = Path(__file__).resolve().parents[2] / "skald_host"


def codes_in_source() -> set[str]:
    codes: set[str] = set(GENERIC_CODES.values())
    for path in ROOT.rglob("*.py"):
        if "testing" in path.parts:  # the scripted model server speaks for a provider, not the host
            continue
        text = path.read_text(encoding="utf-8")
        codes.update(re.findall(r"\bcode=\"([a-z_]+)\"", text))
        codes.update(re.findall(r"\"code\": \"([a-z_]+)\"", text))  # the socket's answers
        codes.update(re.findall(r"^    code = \"([a-z_]+)\"", text, re.M))  # DiskFailure and its kinds
        if path.name == "config_schema.py":
            codes.update(f"config_{why}" for why in re.findall(r"ConfigInvalid\([^()]*?\"[^\"]*\", \"([a-z_]+)\"", text))
    return codes


def test_every_error_code_the_host_gives_has_english_and_german_text():
    codes = codes_in_source()
    assert {"conversation_not_found", "turn_running", "send_invalid"} <= codes
    assert {"password_too_short", "username_taken", "config_choice", "field_required", "forbidden", "login_throttled", "disk_full"} <= codes
    strings = I18nBundle.from_folder("core", LOCALES).strings
    for locale in ("en", "de"):
        missing = sorted(code for code in codes if f"error.{code}" not in strings[locale])
        assert missing == [], f"{locale}.json lacks error strings for {missing}"
    # A German string fills in only what the English one is given.
    for code in codes:
        english, german = strings["en"][f"error.{code}"], strings["de"][f"error.{code}"]
        assert set(re.findall(r"\{(\w+)\}", german)) <= set(re.findall(r"\{(\w+)\}", english)), code


async def test_a_refusal_answers_with_its_code_and_values(skald):
    host = await skald.start()
    client = host.client()
    short = await client.post("/api/setup", json={"username": "admin", "password": "short"})
    assert short.status_code == 400
    assert short.json() == {"error": "password must be at least 8 characters", "code": "password_too_short", "values": {"minimum": 8}, "field": "password"}
    missing = await client.post("/api/setup", json={"username": "admin"})
    assert missing.json() == {"error": "'password' is required", "code": "field_required", "field": "password", "values": {"field": "password"}}
    bad_name = await client.post("/api/setup", json={"username": "no spaces", "password": "a long enough password 1"})
    assert bad_name.json()["code"] == "username_invalid"
    # An empty name is missing, not malformed, on setup as on the admin's form.
    empty_name = await client.post("/api/setup", json={"username": "  ", "password": "a long enough password 1"})
    assert empty_name.json() == {"error": "a user name is required", "code": "field_required", "field": "username", "values": {"field": "username"}}

    admin = await host.admin()
    await host.create_member("alice")
    taken = await admin.post("/api/admin/members", json={"username": "alice", "password": "another long password 2"})
    assert (taken.status_code, taken.json()["code"], taken.json()["values"]) == (400, "username_taken", {"name": "alice"})
    unknown = await admin.get("/api/admin/no-such-route")
    assert unknown.json() == {"error": "not found", "code": "not_found"}


async def test_admin_forms_answer_with_codes_too(skald):
    host = await skald.start()
    admin = await host.admin()
    rule = await admin.post("/api/admin/approval-rules", json={"tool_pattern": "x", "action": "allow", "priority": "soon"})
    assert rule.status_code == 400
    assert (rule.json()["code"], rule.json()["values"]) == ("number_between", {"field": "priority", "low": 0, "high": 10000000})
    first = await admin.post("/api/admin/shared-folders", json={"slug": "fotos", "title": "Fotos"})
    assert first.status_code == 201, first.text
    again = await admin.post("/api/admin/shared-folders", json={"slug": "fotos", "title": "Fotos"})
    assert (again.status_code, again.json()["code"], again.json()["values"], again.json()["field"]) == (409, "folder_exists", {"name": "fotos"}, "slug")
    url = await admin.post("/api/admin/models/providers", json={"name": "P", "base_url": "ftp://x"})
    assert (url.status_code, url.json()["code"], url.json().get("field")) == (400, "base_url_invalid", "base_url")  # the form marks it


async def test_chat_refusals_answer_with_codes_over_http_and_the_socket(skald):
    """A German member sees chat refusals in German: each carries its code, and the code
    its German string (the shell looks it up)."""
    host = await skald.start()
    await host.admin()
    member = await host.member("bea", locale="de")
    unknown = await member.post("/api/conversations", json={"agent": "no-such-agent"})
    assert (unknown.status_code, unknown.json()["code"], unknown.json()["values"]) == (400, "agent_unknown", {"agent": "no-such-agent"})
    missing = await member.get("/api/conversations/c-missing")
    assert (missing.status_code, missing.json()["code"]) == (404, "conversation_not_found")
    conversation = (await member.post("/api/conversations", json={})).json()["id"]
    nothing = await member.post(f"/api/conversations/{conversation}/regenerate")
    assert (nothing.status_code, nothing.json()["code"]) == (409, "nothing_to_regenerate")
    not_failed = await member.post(f"/api/conversations/{conversation}/retry")
    assert (not_failed.status_code, not_failed.json()["code"]) == (409, "turn_not_failed")
    restricted = await host.member("kim", role="restricted")
    forbidden = await restricted.post("/api/conversations", json={"agent": "assistant"})
    assert (forbidden.status_code, forbidden.json()["code"], forbidden.json()["values"]) == (403, "agent_forbidden", {"agent": "assistant"})

    async with member.ws() as socket:
        await socket.send(json.dumps({"type": "send", "conversation_id": "c-missing", "text": "Hallo", "idempotency_key": "k-12345678"}))
        while (reply := json.loads(await socket.recv())).get("idempotency_key") != "k-12345678":
            pass
    assert (reply["type"], reply["code"]) == ("error", "conversation_not_found")
    german = I18nBundle.from_folder("core", LOCALES).strings["de"]
    assert german["error.conversation_not_found"] == "Dieses Gespräch gibt es nicht (mehr)."


async def test_role_refusals_answer_with_codes_and_the_field_they_are_about(skald):
    """The roles page says these in the reader's language, beside the input (a German
    admin used to read "a role 'familie' exists already")."""
    host = await skald.start()
    admin = await host.admin()
    bad_id = await admin.post("/api/admin/roles", json={"id": "", "label": "Familie"})
    assert (bad_id.status_code, bad_id.json()["code"], bad_id.json()["field"]) == (400, "role_id_invalid", "id")
    created = await admin.post("/api/admin/roles", json={"id": "familie", "label": "Familie"})
    assert created.status_code == 201, created.text
    again = await admin.post("/api/admin/roles", json={"id": "familie", "label": "Familie"})
    assert (again.status_code, again.json()["code"], again.json()["values"], again.json()["field"]) == (
        400, "role_exists", {"field": "id", "name": "familie"}, "id")
    long_label = await admin.patch("/api/admin/roles/familie", json={"label": "x" * 65})
    assert (long_label.json()["code"], long_label.json()["values"]) == ("length_between", {"field": "label", "limit": 64})
    missing = await admin.patch("/api/admin/roles/nobody", json={"label": "X"})
    assert (missing.status_code, missing.json()["code"]) == (404, "role_not_found")
    preset = await admin.delete("/api/admin/roles/member")
    assert (preset.status_code, preset.json()["code"]) == (400, "role_preset_kept")
    german = I18nBundle.from_folder("core", LOCALES).strings["de"]
    assert german["error.role_exists"].format(name="familie") == "Eine Rolle familie gibt es schon."

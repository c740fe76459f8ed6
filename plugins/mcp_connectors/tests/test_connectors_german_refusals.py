"""Every refusal a member or an admin reads is coded (``mcp.err_<code>``) and comes in
the reader's language: the checks of a connector, of a catalog template and of an
activation's values, the OAuth sign-in steps, the routes' own refusals, and the
plugin's own sentence a member's connector failed with."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import skald_mcp
from mcp_support import BASE, Setup
from skald_mcp.strings import STRINGS

SOURCE = Path(skald_mcp.__file__).resolve().parent


async def german(client) -> None:
    response = await client.put("/api/me/locale", json={"locale": "de"})
    assert response.status_code == 200, response.text


async def refused(response, status: int, code: str, text: str, field: str | None = None) -> None:
    answer = response.json()
    assert response.status_code == status and answer.get("code") == f"mcp.err_{code}", answer
    assert answer["error"] == text and answer.get("field") == field, answer


async def test_a_german_admin_reads_the_connector_and_template_checks_in_german(setup: Setup):
    admin = setup.admin
    await german(admin)
    await refused(await admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "stdio"}), 400, "command_missing",
                  "Ein stdio-Konnektor braucht einen Befehl (das zu startende Programm, ohne Argumente).", "command")
    await refused(await admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "sse"}), 400, "transport_invalid",
                  "transport muss einer der Werte stdio, http sein.", "transport")
    await refused(await admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "http", "url": "https://u:p@x.example/"}), 400,
                  "url_credentials", "Setze Zugangsdaten in einen Header, nicht in die url.", "url")
    await refused(await admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "stdio", "command": "x", "args": "a b"}), 400,
                  "list_not_strings", "args muss eine Liste von Zeichenketten sein.", "args")
    template = {"transport": "http", "url": "https://x.example/"}
    await refused(await admin.put(f"{BASE}/catalog/t", json={**template, "login": "sms"}), 400, "login_invalid", "login muss leer oder „qr“ sein.", "login")
    await refused(await admin.put(f"{BASE}/catalog/t", json={**template, "oauth": {"provider": "idp", "scopes": []}, "login": "qr"}), 400,
                  "login_and_oauth", "Eine Vorlage meldet sich mit OAuth oder mit einem QR-Code an, nicht mit beidem.", "login")
    await refused(await admin.put(f"{BASE}/catalog/t", json={**template, "oauth": []}), 400,
                  "oauth_shape", "oauth ist {provider, scopes} (und bei einer stdio-Vorlage env und deliver).", "oauth")
    await refused(await admin.put(f"{BASE}/catalog/t", json={**template, "fields": [{"name": "k", "header": "X-K", "format": "plain"}]}), 400,
                  "field_format_invalid", "Feld „k“: format muss {value} enthalten.", "fields")
    await refused(await admin.put(f"{BASE}/catalog/t", json={"transport": "stdio", "command": "x", "files": {"../up": "x"}}), 400,
                  "file_path_invalid", "files: '../up' ist kein einfacher relativer Pfad.", "files")
    assert (await admin.get(f"{BASE}/servers")).json()["servers"] == [] and (await admin.get(f"{BASE}/catalog")).json()["templates"] == []


async def test_a_german_admin_reads_the_routes_own_refusals_in_german(setup: Setup):
    admin = setup.admin
    await german(admin)
    await refused(await admin.put(f"{BASE}/catalog/t", json={"name": "other", "transport": "http", "url": "https://x.example/"}), 400,
                  "name_differs", "Der Name im Inhalt weicht vom Namen in der Adresse ab.", "name")
    await refused(await admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "stdio", "command": "x", "access": "everyone"}), 400,
                  "members_invalid", "members muss eine Liste von Mitglieds-IDs sein.")
    await refused(await admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "stdio", "command": "x", "grant_by_default": "yes"}), 400,
                  "grant_by_default_invalid", "grant_by_default muss true oder false sein.", "grant_by_default")
    await refused(await admin.post(f"{BASE}/servers", content=b"[]", headers={"Content-Type": "application/json"}), 400,
                  "body_not_object", "Der Inhalt der Anfrage muss ein JSON-Objekt sein.")
    provider = {"client_id": "c", "redirect_uri": "https://x.example/cb", "auth_url": "https://x.example/a", "token_url": "https://x.example/t"}
    await refused(await admin.put(f"{BASE}/providers/idp", json={**provider, "extra_params": {"state": "x", "scope": "y"}}), 400,
                  "extra_params_reserved", "extra_params darf scope, state nicht setzen.", "extra_params")
    await refused(await admin.put(f"{BASE}/providers/idp", json={**provider, "name": "other"}), 400,
                  "name_differs", "Der Name im Inhalt weicht vom Namen in der Adresse ab.", "name")


async def test_a_german_member_reads_activation_and_sign_in_refusals_in_german(setup: Setup):
    admin = setup.admin
    provider = {"client_id": "c", "redirect_uri": "https://x.example/cb", "auth_url": "https://x.example/a", "token_url": "https://x.example/t"}
    assert (await admin.put(f"{BASE}/providers/idp", json=provider)).status_code == 200
    fields = [{"name": "api_key", "label": "API-Schlüssel", "header": "Authorization", "format": "Bearer {value}"}]
    template = {"transport": "http", "url": "https://x.example/mcp", "fields": fields}
    assert (await admin.put(f"{BASE}/catalog/web", json=template)).status_code == 200
    assert (await admin.put(f"{BASE}/catalog/mail", json={**template, "fields": [], "oauth": {"provider": "idp", "scopes": ["read"]}})).status_code == 200
    alice = await setup.host.member("alice")
    await german(alice)

    # The activation's values.
    await refused(await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {}}), 400,
                  "value_required", "API-Schlüssel ist erforderlich.", "api_key")
    await refused(await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "a\nb"}}), 400,
                  "value_invalid", "API-Schlüssel muss eine einzelne Zeile mit höchstens 4096 Zeichen sein.", "api_key")
    await refused(await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k", "city": "x"}}), 400,
                  "values_unknown", "web fragt nicht nach: city.")
    await refused(await alice.post(f"{BASE}/my/connectors", json={"template": "web", "remote": {}}), 400,
                  "remote_or_template", "Gib entweder remote oder template und values an.")

    # The OAuth sign-in steps.
    assert (await alice.post(f"{BASE}/my/connectors", json={"template": "mail"})).status_code == 201
    await refused(await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": "forged", "code": "c"}), 400,
                  "oauth_state_unknown", "Diese Anmeldung ist unbekannt, abgelaufen oder schon benutzt; starte sie neu.")
    start = await alice.post(f"{BASE}/my/connectors/mail/oauth/start")
    assert start.status_code == 200, start.text
    state = re.search(r"[?&]state=([^&]+)", start.json()["url"]).group(1)
    await refused(await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": " "}), 400,
                  "oauth_code_missing", "Füge den Code ein, den die Anmeldeseite gezeigt hat.", "code")
    assert (await admin.delete(f"{BASE}/providers/idp")).status_code == 200
    await refused(await alice.post(f"{BASE}/my/connectors/mail/oauth/start"), 409,
                  "oauth_provider_not_set_up", "Der Anmeldedienst 'idp' ist nicht eingerichtet; frag deine Administration.")


async def test_a_german_member_reads_why_their_connector_failed_in_german(setup: Setup):
    """The plugin's own sentence a connector failed with (here: its template is gone)
    is said in the reader's language on its page and in the device-login panel."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    template = {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
    assert (await setup.admin.put(f"{BASE}/catalog/web", json=template)).status_code == 200
    alice = await setup.host.member("alice")
    await german(alice)
    assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web"})).status_code == 201
    assert (await setup.admin.delete(f"{BASE}/catalog/web")).status_code == 200
    status = (await alice.get(f"{BASE}/my/connectors/web/login/status")).json()  # reads only
    assert status["state"] == "stopped" and status["running"] is False, status
    status = (await alice.post(f"{BASE}/my/connectors/web/login/check")).json()  # connects again
    assert status["state"] == "connecting" and status["message"] == "Der Katalog hat 'web' nicht mehr.", status
    own = (await alice.get(f"{BASE}/my/connectors/web")).json()
    assert own["state"] == "failed" and own["error"] == "Der Katalog hat 'web' nicht mehr.", own
    assert (await alice.get(f"{BASE}/mine")).json()["own"][0]["error"] == "Der Katalog hat 'web' nicht mehr."
    # The same failure reads in English for an English reader: said per request.
    assert (await alice.put("/api/me/locale", json={"locale": "en"})).status_code == 200
    assert (await alice.get(f"{BASE}/my/connectors/web")).json()["error"] == "the catalog no longer has 'web'"


def codes_in_the_source() -> set[str]:
    """Every ``err_<code>`` the plugin's code names: ``code="…"`` (a ``SpecError``, an
    ``OAuthError``, the installer's answer), ``code=f"{what}_…"`` for both mappings,
    and ``"err_…"`` given to ``error``."""
    found: set[str] = set()
    for path in sorted(SOURCE.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        found |= set(re.findall(r'\bcode="([a-z_]+)"', text))
        found |= {f"{what}_{rest}" for rest in re.findall(r'\bcode=f"\{what\}_([a-z_]+)"', text) for what in ("env", "headers")}
        found |= set(re.findall(r'"err_([a-z_]+)"', text))
    return found


def test_every_code_in_the_source_has_english_and_german():
    codes = codes_in_the_source()
    assert len(codes) > 60 and {"command_missing", "oauth_state_unknown", "name_differs", "env_not_object", "install_npm_missing"} <= codes
    missing = {code: [locale for locale in ("en", "de") if f"err_{code}" not in STRINGS[locale]] for code in codes}
    assert {code: where for code, where in missing.items() if where} == {}


def test_no_refusal_in_the_source_is_an_english_sentence():
    """A member or an admin reads these: a sentence in the source could not be said
    in their language (the log and the model's tool results are English by design)."""
    hits = []
    for path in sorted(SOURCE.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        hits += [f"{path.name}: {m}" for m in re.findall(r'(?:SpecError|OAuthError)\(f?"[^"]*"', text)]
        hits += [f"{path.name}: {m}" for m in re.findall(r'return \{"error": "[^"]*"', text)]
    assert hits == []

"""What the reader reads is named as they know it: each page of the plugin by its own
title, a template by its title, a field by its label, the address as the address, in the
reader's language; a refusal a member cannot fix names the admin's setting; a sign-in
the provider refused says to start it again."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from mcp_support import BASE, HttpDemo, Setup
from oauth_standin import AuthorizationServer
from test_connectors_german_refusals import german
from test_member_connectors import grant_remote
from test_oauth import allow_private, put_provider


async def test_the_plugins_pages_have_titles_of_their_own_in_english_and_german(setup: Setup):
    english = (await setup.admin.get("/api/admin/plugins/mcp")).json()["pages"]
    assert sorted(p["title"] for p in english) == ["Connector access", "Connectors"], english
    await german(setup.admin)
    german_pages = (await setup.admin.get("/api/admin/plugins/mcp")).json()["pages"]
    assert sorted(p["title"] for p in german_pages) == ["Konnektor-Zugriff", "Konnektoren"], german_pages


async def test_an_activation_reads_its_templates_title(setup: Setup):
    alice = await setup.host.member("alice")
    async with HttpDemo() as demo:
        template = {"title": "Web demo", "transport": "http", "url": demo.url, "fields": [{"name": "api_key", "label": "API key", "header": "X-Key"}]}
        assert (await setup.admin.put(f"{BASE}/catalog/web", json=template)).status_code == 200
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})
        assert response.status_code == 201, response.text
        status = (await alice.get(f"{BASE}/my/connectors/web")).json()
        assert status["template"] == "web" and status["template_title"] == "Web demo", status


async def test_a_refusal_names_the_field_by_its_label_and_the_address_in_the_readers_language(setup: Setup):
    body = {"transport": "http", "url": "https://x.example/mcp", "fields": [{"name": "token", "label": "Access token", "header": "Authorization", "format": "Bearer"}]}
    answer = (await setup.admin.put(f"{BASE}/catalog/t", json=body)).json()
    assert answer["error"] == "field “Access token”: format must contain {value}", answer
    answer = (await setup.admin.put(f"{BASE}/catalog/t", json={"transport": "http", "url": "ftp://x.example/"})).json()
    assert answer["error"] == "The address must be an http:// or https:// address.", answer
    await german(setup.admin)
    answer = (await setup.admin.put(f"{BASE}/catalog/t", json={"transport": "http", "url": "ftp://x.example/"})).json()
    assert answer["error"] == "Die Adresse muss eine http://- oder https://-Adresse sein.", answer
    await grant_remote(setup)
    alice = await setup.host.member("alice")
    await german(alice)
    answer = (await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": "ftp://x.example/"}})).json()
    assert answer["error"] == "Die Adresse muss eine http://- oder https://-Adresse sein.", answer


async def test_a_code_the_provider_refuses_says_to_sign_in_again(setup: Setup):
    await allow_private(setup)
    alice = await setup.host.member("alice")
    bernd = await setup.host.member("bernd")
    await german(bernd)
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        assert (await put_provider(setup, idp.issuer)).status_code == 200
        template = {"transport": "http", "url": demo.url, "oauth": {"provider": "test-idp", "scopes": ["mail.read"]}}
        assert (await setup.admin.put(f"{BASE}/catalog/mail", json=template)).status_code == 200
        for member, words in ((alice, "press Sign in again"), (bernd, "Drücke erneut auf „Anmelden“")):
            assert (await member.post(f"{BASE}/my/connectors", json={"template": "mail"})).status_code == 201
            url = (await member.post(f"{BASE}/my/connectors/mail/oauth/start")).json()["url"]
            state = parse_qs(urlsplit(url).query)["state"][0]
            response = await member.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": "not-the-code"})
            answer = response.json()
            assert response.status_code == 400 and answer["code"] == "mcp.err_oauth_code_refused" and words in answer["error"], answer

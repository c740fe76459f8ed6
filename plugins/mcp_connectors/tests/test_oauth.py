"""OAuth 2 sign-in for a member's connector against a local authorization server
(check E5): discovery refuses a provider without S256; the consent URL carries PKCE S256,
an opaque state, the exact redirect URI and ``resource``; a state works once, for its
member, login session and connector, for 10 minutes; the token request carries the verifier and the
client secret server-side; the refresh token lives in the member's encrypted file only
and brings the connector back at the next login; the access token reaches the server as
a bearer header."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx

from mcp_support import BASE, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send
from oauth_standin import CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, AuthorizationServer
from skald_host.testing import Reply, ToolCall
from skald_mcp import running


async def allow_private(setup: Setup) -> None:
    response = await setup.admin.put("/api/admin/plugins/mcp/config", json={"config": {"allow_private_addresses": True}})
    assert response.status_code == 200, response.text

    async def started() -> bool:
        return running.runtime is not None and (await setup.admin.get(f"{BASE}/providers")).status_code == 200

    await eventually(started, what="the plugin to run (a live setting: saving it restarts nothing)")


async def put_provider(setup: Setup, issuer: str) -> httpx.Response:
    body = {"issuer": issuer, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uri": REDIRECT_URI}
    return await setup.admin.put(f"{BASE}/providers/test-idp", json=body)


async def mail_activated(setup: Setup, member, issuer: str, demo_url: str) -> None:
    """The admin's provider at ``issuer`` and an OAuth template ``mail`` for the demo
    server; ``member`` activated it (it now needs their sign-in)."""
    assert (await put_provider(setup, issuer)).status_code == 200
    template = {"transport": "http", "url": demo_url, "oauth": {"provider": "test-idp", "scopes": ["mail.read"]}}
    assert (await setup.admin.put(f"{BASE}/catalog/mail", json=template)).status_code == 200
    assert (await member.post(f"{BASE}/my/connectors", json={"template": "mail"})).status_code == 201


async def browser(url: str) -> str:
    """The member's browser at the consent URL; the page shows the code."""
    async with httpx.AsyncClient() as client:
        response = await client.get(url)
    assert response.status_code == 200, response.text
    return response.text


def clear_text_hits(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_a_provider_without_s256_in_its_metadata_is_refused(setup: Setup):
    await allow_private(setup)
    async with AuthorizationServer(s256=False) as idp:
        response = await put_provider(setup, idp.issuer)
    assert response.status_code == 400 and "S256" in response.json()["error"]
    assert (await setup.admin.get(f"{BASE}/providers")).json()["providers"] == []


async def test_discovery_passes_the_address_check_unless_private_addresses_are_allowed(setup: Setup):
    async with AuthorizationServer() as idp:
        response = await put_provider(setup, idp.issuer)
    assert response.status_code == 400 and "private or special address" in response.json()["error"]


async def test_the_copy_paste_flow_end_to_end(setup: Setup):
    await allow_private(setup)
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    alice_id = alice.member["id"]
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        response = await put_provider(setup, idp.issuer)
        assert response.status_code == 200, response.text
        assert response.json()["client_secret"] == "********"  # write-only
        assert CLIENT_SECRET not in (await setup.admin.get(f"{BASE}/providers")).text
        template = {"transport": "http", "url": demo.url, "oauth": {"provider": "test-idp", "scopes": ["mail.read", "offline"]}}
        assert (await setup.admin.put(f"{BASE}/catalog/mail", json=template)).status_code == 200

        response = await alice.post(f"{BASE}/my/connectors", json={"template": "mail"})
        assert response.status_code == 201, response.text
        assert response.json()["state"] == "needs_oauth" and response.json()["tools"] == []

        # The consent URL: PKCE S256, an opaque state, the exact redirect URI, resource.
        start = await alice.post(f"{BASE}/my/connectors/mail/oauth/start")
        assert start.status_code == 200, start.text
        url = start.json()["url"]
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        assert url.startswith(f"{idp.issuer}/authorize?")
        assert query["code_challenge_method"] == "S256" and len(query["code_challenge"]) == 43
        assert query["redirect_uri"] == REDIRECT_URI and query["resource"] == demo.url
        assert query["scope"] == "mail.read offline" and len(query["state"]) >= 32
        state = query["state"]
        code = await browser(url)

        # Another member cannot use alice's state; a wrong code is refused by the provider.
        response = await bob.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 404  # bob has no such connector at all
        assert (await bob.post(f"{BASE}/my/connectors", json={"template": "mail"})).status_code == 201
        response = await bob.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 400 and "unknown, expired or already used" in response.json()["error"]  # bound to alice
        response = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": "forged-" + state, "code": code})
        assert response.status_code == 400 and "unknown, expired or already used" in response.json()["error"]

        response = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 200, response.text
        assert response.json()["state"] == "ready" and "mail__echo" in response.json()["tools"]

        # What the token request carried: verifier, secret (server-side), exact redirect, resource.
        exchange = idp.token_requests[-1]
        assert exchange["grant_type"] == "authorization_code" and exchange["code_verifier"] and exchange["client_secret"] == CLIENT_SECRET
        assert exchange["redirect_uri"] == REDIRECT_URI and exchange["resource"] == demo.url

        # The state is single-use.
        response = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 400 and "already used" in response.json()["error"]

        # The server gets the access token as a bearer header.
        await allow(setup.admin, "mail__*")
        setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("mail__header", {"name": "authorization"})]), Reply("Done.")])
        cid = await new_conversation(alice)
        await send(alice, cid, "Token?")
        assert calls(await finished(alice, cid))[0]["result"] == f"Bearer {idp.access_tokens[-1]}"

        # The refresh token: only in alice's encrypted file.
        refresh = next(iter(idp.refresh_tokens))

        def registry_values(conn) -> str:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return repr([conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])

        in_registry = await setup.host.core.registry.run(registry_values)
        assert refresh not in in_registry and idp.access_tokens[-1] not in in_registry
        assert clear_text_hits(setup.host.settings.data_dir, refresh.encode()) == []
        assert refresh in (await setup.host.core.host_api("mcp").member_secret_get(alice_id, "connector:mail"))

        # Locked and unlocked again: the refresh token brings the connector back.
        await setup.host.core.users.lock(alice_id)
        before = len(idp.token_requests)
        alice = await setup.host.member("alice")

        async def back() -> bool:
            rows = (await alice.get(f"{BASE}/my/connectors")).json()["connectors"]
            return bool(rows) and rows[0]["state"] == "ready"

        await eventually(back, what="the OAuth connector to reconnect at login")
        assert [r["grant_type"] for r in idp.token_requests[before:]] == ["refresh_token"]
        assert idp.token_requests[-1]["resource"] == demo.url


async def test_an_expired_state_is_refused(setup: Setup):
    await allow_private(setup)
    alice = await setup.host.member("alice")
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        assert (await put_provider(setup, idp.issuer)).status_code == 200
        template = {"transport": "http", "url": demo.url, "oauth": {"provider": "test-idp", "scopes": []}}
        assert (await setup.admin.put(f"{BASE}/catalog/mail", json=template)).status_code == 200
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "mail"})).status_code == 201
        url = (await alice.post(f"{BASE}/my/connectors/mail/oauth/start")).json()["url"]
        state = parse_qs(urlsplit(url).query)["state"][0]
        code = await browser(url)
        flows = running.runtime.oauth._flows
        flows[state] = dataclasses.replace(flows[state], started=time.monotonic() - 601)  # 10 minutes and a second ago
        response = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 400 and "expired" in response.json()["error"]
        assert idp.token_requests == []  # nothing was sent to the provider


async def test_a_changed_sign_in_service_gets_no_refresh_token_until_the_member_signs_in_again(setup: Setup):
    """The admin pointing the provider at another token endpoint (check: a tempted
    admin) used to receive the member's refresh token at their next login. Nothing of
    the member's leaves for the new place until they sign in there themselves."""
    await allow_private(setup)
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with AuthorizationServer() as first, AuthorizationServer() as second, HttpDemo() as demo:
        await mail_activated(setup, alice, first.issuer, demo.url)
        url = (await alice.post(f"{BASE}/my/connectors/mail/oauth/start")).json()["url"]
        state = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}["state"]
        done = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": await browser(url)})
        assert done.json()["state"] == "ready", done.text

        assert (await put_provider(setup, second.issuer)).status_code == 200  # the same name, another service
        await setup.host.core.users.lock(alice_id)
        alice = await setup.host.member("alice")

        async def refused() -> bool:
            rows = (await alice.get(f"{BASE}/my/connectors")).json()["connectors"]
            return bool(rows) and rows[0]["state"] == "failed" and "different address or sign-in service" in (rows[0]["error"] or "")

        await eventually(refused, what="the connector to refuse its changed sign-in service")
        assert second.token_requests == []  # the refresh token never went there

        # Signing in there is the member's consent: it works again.
        url = (await alice.post(f"{BASE}/my/connectors/mail/oauth/start")).json()["url"]
        assert url.startswith(second.issuer)
        state = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}["state"]
        done = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": await browser(url)})
        assert done.json()["state"] == "ready", done.text


async def test_a_template_taken_away_after_the_start_gets_no_token_request_and_no_new_start(setup: Setup):
    """Withdrawing a template from a member used to leave its sign-in open: the code
    she pasted back was exchanged with the admin's client secret and the refresh token
    written to her file. Asked again at the complete, before the token request."""
    await allow_private(setup)
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    alice_id = alice.member["id"]
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        await mail_activated(setup, alice, idp.issuer, demo.url)
        start = await alice.post(f"{BASE}/my/connectors/mail/oauth/start")
        assert start.status_code == 200, start.text
        url = start.json()["url"]
        state = parse_qs(urlsplit(url).query)["state"][0]
        code = await browser(url)

        response = await setup.admin.put(f"{BASE}/catalog/mail/access", json={"members": [bob.member["id"]]})
        assert response.status_code == 200, response.text
        assert (await alice.get(f"{BASE}/my/connectors/mail")).json()["state"] == "withdrawn"

        response = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 404 and response.json()["code"] == "mcp.err_no_template", response.text
        assert idp.token_requests == []  # the admin's client secret went nowhere
        stored = await setup.host.core.host_api("mcp").member_secret_get(alice_id, "connector:mail")
        assert "refresh_token" not in stored and '"state": "needs_oauth"' in stored
        assert (await alice.get(f"{BASE}/my/connectors/mail")).json()["state"] == "withdrawn"

        response = await alice.post(f"{BASE}/my/connectors/mail/oauth/start")
        assert response.status_code == 404 and response.json()["code"] == "mcp.err_no_template", response.text


async def test_a_withdrawn_template_starts_no_session_and_sends_no_refresh_token(setup: Setup):
    """Every session of a member's connector starts in ``MemberConnectors.connect``,
    which refuses a template taken away from them: at her next login the refresh token
    of a signed-in connector is not sent to the provider (nor is a session started,
    whichever route asks for one)."""
    await allow_private(setup)
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    alice_id = alice.member["id"]
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        await mail_activated(setup, alice, idp.issuer, demo.url)
        url = (await alice.post(f"{BASE}/my/connectors/mail/oauth/start")).json()["url"]
        state = parse_qs(urlsplit(url).query)["state"][0]
        done = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": await browser(url)})
        assert done.json()["state"] == "ready", done.text

        assert (await setup.admin.put(f"{BASE}/catalog/mail/access", json={"members": [bob.member["id"]]})).status_code == 200
        await setup.host.core.users.lock(alice_id)
        before = len(idp.token_requests)
        alice = await setup.host.member("alice")
        members = running.runtime.members
        await eventually(lambda: "mail" in members.records.get(alice_id, {}), what="alice's connectors to load")
        await asyncio.gather(*list(members._tasks), return_exceptions=True)  # the load, to its end

        assert idp.token_requests[before:] == [] and members.connections.get(alice_id, {}).get("mail") is None
        assert await members.connect(alice_id, "mail") is None
        assert (await alice.post(f"{BASE}/my/connectors/mail/restart")).json()["state"] == "withdrawn"
        assert idp.token_requests[before:] == []


async def test_an_empty_or_overlong_code_does_not_use_up_the_sign_in(setup: Setup):
    """The state was taken (single-use) before the code was looked at: a paste that
    came out empty answered "paste the code" and the retry with the right code then
    read "unknown, expired or already used". The code is checked first now."""
    await allow_private(setup)
    alice = await setup.host.member("alice")
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        await mail_activated(setup, alice, idp.issuer, demo.url)
        url = (await alice.post(f"{BASE}/my/connectors/mail/oauth/start")).json()["url"]
        state = parse_qs(urlsplit(url).query)["state"][0]
        code = await browser(url)
        for slip in ("", "   ", "x" * 5000, None, 42):
            response = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": slip})
            assert response.status_code == 400 and response.json()["code"] == "mcp.err_oauth_code_missing", response.text
            assert response.json()["field"] == "code"
        assert idp.token_requests == []
        response = await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 200, response.text
        assert response.json()["state"] == "ready"

async def test_a_state_works_only_in_the_login_session_that_started_the_sign_in(setup: Setup):
    """Check E5: a state is "bound to the session", not only to the member. Alice's
    second login (another browser, someone at her unlocked computer, a leaked consent
    link) cannot finish the sign-in her first session started; the first still can."""
    await allow_private(setup)
    first = await setup.host.member("alice")
    second = await setup.host.member("alice")
    assert first.session_token != second.session_token
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        await mail_activated(setup, first, idp.issuer, demo.url)
        url = (await first.post(f"{BASE}/my/connectors/mail/oauth/start")).json()["url"]
        state = parse_qs(urlsplit(url).query)["state"][0]
        code = await browser(url)
        response = await second.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 400 and "unknown, expired or already used" in response.json()["error"], response.text
        assert idp.token_requests == []  # nothing was sent to the provider
        assert (await second.get(f"{BASE}/my/connectors/mail")).json()["state"] == "needs_oauth"
        # Refused without using it up: the session that started it completes it.
        response = await first.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": state, "code": code})
        assert response.status_code == 200 and response.json()["state"] == "ready", response.text


def test_one_member_starting_sign_ins_over_and_over_does_not_block_the_others(monkeypatch):
    """``MAX_FLOWS`` open sign-ins were shared by every member: one member starting
    1000 of them made everyone else's start answer "too many sign-ins" for ten minutes.
    A member's new start now replaces their own oldest flows beyond a few per connector
    and a few in all; the shared cap stays, as a last resort only."""
    from skald_mcp import oauth
    from skald_mcp.oauth import OAuth, OAuthError

    flows = OAuth(host=None)
    flows.providers["idp"] = {"name": "idp", "auth_url": "https://idp.example/authorize", "client_id": "c", "redirect_uri": "https://idp.example/code"}

    def state_of(url: str) -> str:
        return parse_qs(urlsplit(url).query)["state"][0]

    bob = [state_of(flows.start("bob", "s", "mail", "idp", [], "")) for _ in range(oauth.MAX_FLOWS + 5)]
    bob_flows = [f for f in flows._flows.values() if f.member_id == "bob"]
    assert len(bob_flows) == oauth.CONNECTOR_FLOWS
    assert set(flows._flows) == set(bob[-oauth.CONNECTOR_FLOWS:])  # his newest ones, still usable
    assert flows.take("bob", "s", "mail", bob[-1]).member_id == "bob"
    # Over many connectors of his: a few in all.
    for index in range(oauth.MAX_FLOWS + 5):
        flows.start("bob", "s", f"c{index}", "idp", [], "")
    assert len([f for f in flows._flows.values() if f.member_id == "bob"]) == oauth.MEMBER_FLOWS

    alice = state_of(flows.start("alice", "s", "mail", "idp", [], ""))  # not refused: bob used his own share
    assert flows.take("alice", "s", "mail", alice).member_id == "alice"

    # The shared cap is still there, for many members at once.
    monkeypatch.setattr(oauth, "MAX_FLOWS", len(flows._flows) + 2)
    flows.start("carol", "s", "mail", "idp", [], "")
    flows.start("dave", "s", "mail", "idp", [], "")
    try:
        flows.start("erin", "s", "mail", "idp", [], "")
    except OAuthError as exc:
        assert exc.code == "oauth_busy"
    else:
        raise AssertionError("the shared cap let one more flow in")


def test_a_caller_with_no_credential_handle_can_never_complete_a_sign_in():
    """Neither a session nor a device: each request gets a binding of its own, so the
    state a start gave can never match a completion (fail closed); once all such callers
    of a member shared one."""
    from skald_hookspecs import Caller
    from skald_mcp.routes import login_session

    bare = Caller("m1", "alice", "Alice", "en", False)
    assert login_session(bare) != login_session(bare)
    assert login_session(Caller("m1", "alice", "Alice", "en", False, device_id="d1")) == "device:d1"
    assert login_session(Caller("m1", "alice", "Alice", "en", False, session_id="s1")) == "session:s1"

"""Access withdrawn while something of the member's is under way: a question a
connector asked them (elicitation) ends when the admin revokes the grant or closes
the template, and nothing they type afterwards reaches the server; a write-only secret
saved back masked never follows its connector or sign-in service to a new destination."""

from __future__ import annotations

import json
import sys

from mcp_support import BASE, DEMO, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send, state
from skald_host.testing import Reply, ToolCall
from skald_mcp import running
from skald_mcp.strings import STRINGS

CANARY = "Zelda-0b7d-after-revocation"


async def pending(client) -> list[dict]:
    return (await client.get(f"{BASE}/my/elicitations")).json()["elicitations"]


async def _none(client) -> bool:
    return await pending(client) == []


async def _answer_after_revocation(setup: Setup, alice, cid: str, revoke) -> None:
    """Alice's question is waiting; ``revoke`` withdraws her access; the question ends
    at once, her late answer is refused, the server is declined and she is told why."""
    await send(alice, cid, "Greet me.")
    asked = await eventually(lambda: pending(alice), what="the question to reach alice")
    question = asked[0]["id"]
    await revoke()
    # Synchronous: withdrawn before the admin's request was answered (the card's end
    # reaches the page a moment later, from the call's own task).
    await eventually(lambda: _none(alice), what="the withdrawn question to go away")
    response = await alice.post(f"/api/questions/{question}", json={"action": "accept", "content": {"name": CANARY, "pin": "1234"}})
    assert response.status_code == 404, response.text  # settled: nothing of hers goes anywhere
    messages = await finished(alice, cid)
    assert CANARY not in json.dumps(messages)
    assert calls(messages)[-1]["result"] == "decline"  # what the server was told
    assert (await state(alice, cid))["questions"] == []
    assert "no longer available to you" in json.dumps(await state(alice, cid))  # the reason, in the conversation


async def test_revoking_a_global_grant_ends_the_members_waiting_question(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await setup.add_stdio(name="globo", access=[alice_id])
    await allow(setup.admin, "globo__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("globo__ask", {})]), Reply("Done.")])
    cid = await new_conversation(alice)

    async def revoke() -> None:
        response = await setup.admin.delete(f"{BASE}/servers/globo/access/{alice_id}")
        assert response.status_code == 200, response.text

    await _answer_after_revocation(setup, alice, cid, revoke)


async def test_closing_a_template_to_the_member_ends_their_activations_waiting_question(setup: Setup):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        template = {"title": "KV", "transport": "http", "url": demo.url, "access": [alice_id],
                    "fields": [{"name": "api_key", "label": "API key", "secret": True, "header": "Authorization", "format": "Bearer {value}"}]}
        assert (await setup.admin.put(f"{BASE}/catalog/kv", json=template)).status_code == 200
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "kv", "values": {"api_key": "k-1"}})
        assert response.status_code == 201 and "kv__ask" in response.json()["tools"], response.text
        await allow(setup.admin, "kv__*")
        setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("kv__ask", {})]), Reply("Done.")])
        cid = await new_conversation(alice)

        async def revoke() -> None:
            response = await setup.admin.delete(f"{BASE}/catalog/kv/access/{alice_id}")
            assert response.status_code == 200, response.text

        await _answer_after_revocation(setup, alice, cid, revoke)


async def test_the_answer_is_checked_again_when_it_would_be_sent(setup: Setup):
    """Access lost without the revocation's push (the grant set changed in memory
    alone): the answer, given after it, is still not sent to the server, since it is
    checked at the moment it would be."""
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await setup.add_stdio(name="globo", access=[alice_id])
    await allow(setup.admin, "globo__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("globo__ask", {})]), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Greet me.")
    asked = await eventually(lambda: pending(alice), what="the question to reach alice")
    running.runtime.access["globo"].discard(alice_id)  # no route, so nothing is pushed
    response = await alice.post(f"/api/questions/{asked[0]['id']}", json={"action": "accept", "content": {"name": CANARY}})
    assert response.status_code == 200, response.text
    messages = await finished(alice, cid)
    assert CANARY not in json.dumps(messages)
    assert calls(messages)[-1]["result"] == "decline"


async def test_a_masked_header_does_not_follow_a_new_address(setup: Setup):
    async with HttpDemo() as first, HttpDemo() as second:
        body = {"name": "web", "transport": "http", "url": first.url, "headers": {"Authorization": "Bearer old-key-1f3a"}, "access": []}
        response = await setup.admin.post(f"{BASE}/servers", json=body)
        assert response.status_code == 201, response.text
        moved = {**body, "url": second.url, "headers": {"Authorization": "********"}}
        del moved["access"]
        response = await setup.admin.put(f"{BASE}/servers/web", json=moved)
        assert response.status_code == 400 and response.json()["code"] == "mcp.err_secret_reenter", response.text
        assert running.runtime.specs["web"].url == first.url  # nothing stored
        # The same address keeps the stored header, as before.
        response = await setup.admin.put(f"{BASE}/servers/web", json={**moved, "url": first.url})
        assert response.status_code == 200, response.text
        assert running.runtime.specs["web"].headers["Authorization"] == "Bearer old-key-1f3a"
        # A new value for the new address is taken.
        response = await setup.admin.put(f"{BASE}/servers/web", json={**moved, "headers": {"Authorization": "Bearer new-key-2b"}})
        assert response.status_code == 200, response.text
        assert running.runtime.specs["web"].headers["Authorization"] == "Bearer new-key-2b"


async def test_a_masked_environment_value_does_not_follow_a_new_command(setup: Setup):
    await setup.add_stdio(name="demo", env={"API_KEY": "env-key-77aa"})
    body = {"name": "demo", "transport": "stdio", "command": sys.executable, "args": [DEMO, "--other"], "env": {"API_KEY": "********"}}
    response = await setup.admin.put(f"{BASE}/servers/demo", json=body)
    assert response.status_code == 400 and response.json()["code"] == "mcp.err_secret_reenter", response.text
    assert response.json()["field"] == "env"
    assert running.runtime.specs["demo"].args == (DEMO,)


async def test_a_masked_client_secret_does_not_follow_a_new_token_url_or_issuer(setup: Setup):
    body = {"auth_url": "https://idp.example/authorize", "token_url": "https://idp.example/token", "client_id": "c",
            "client_secret": "cs-held-5e6f", "redirect_uri": "https://skald.example/show"}
    assert (await setup.admin.put(f"{BASE}/providers/idp", json=body)).status_code == 200
    masked = {**body, "client_secret": "********"}
    for changed in ({"token_url": "https://elsewhere.example/token"}, {"issuer": "https://elsewhere.example"}):
        response = await setup.admin.put(f"{BASE}/providers/idp", json={**masked, **changed})
        assert response.status_code == 400 and response.json()["code"] == "mcp.err_secret_reenter", response.text
        assert response.json()["field"] == "client_secret"
    assert running.runtime.oauth.providers["idp"]["token_url"] == "https://idp.example/token"
    # In German too.
    assert (await setup.admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    response = await setup.admin.put(f"{BASE}/providers/idp", json={**masked, "token_url": "https://elsewhere.example/token"})
    assert response.json()["error"] == STRINGS["de"]["err_secret_reenter"].format(name="client_secret")
    # The same destination keeps the stored secret, as before.
    response = await setup.admin.put(f"{BASE}/providers/idp", json={**masked, "extra_params": {"prompt": "consent"}})
    assert response.status_code == 200, response.text
    assert running.runtime.oauth.providers["idp"]["client_secret"] == "cs-held-5e6f"


def test_the_destination_changed_sentence_fits_values_and_sign_in_alike():
    """A template that moved asks for the member's values again, or their sign-in: the
    sentence must not tell a member without any sign-in to sign in."""
    for locale in ("en", "de"):
        text = STRINGS[locale]["err_destination_changed"]
        assert "Melde dich neu an" not in text and "Sign in again" not in text
    assert "Angaben" in STRINGS["de"]["err_destination_changed"] and "Anmeldung" in STRINGS["de"]["err_destination_changed"]


async def test_a_members_own_connectors_work_only_while_their_role_has_the_capability(setup: Setup):
    """Self-service is a role capability for as long as what was set up is used: a
    remote server the member registered is offered and called only while their role
    holds ``connectors.remote``, a template activation only while it holds
    ``connectors.activate``; a call that waited for its approval while the capability
    went is refused when it would start."""
    from mcp_support import card, decide
    from test_member_connectors import grant_remote, set_member_capabilities
    from test_oauth import allow_private

    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await grant_remote(setup)
        await allow_private(setup)
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "mine", "url": demo.url}})
        assert response.status_code == 201, response.text
        template = {"title": "KV", "transport": "http", "url": demo.url, "access": [alice_id],
                    "fields": [{"name": "api_key", "label": "API key", "secret": True, "header": "Authorization", "format": "Bearer {value}"}]}
        assert (await setup.admin.put(f"{BASE}/catalog/kv", json=template)).status_code == 200
        response = await alice.post(f"{BASE}/my/connectors", json={"template": "kv", "values": {"api_key": "k-1"}})
        assert response.status_code == 201, response.text
        await allow(setup.admin, "mine__*")
        cid = await new_conversation(alice)

        setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("mine__echo", {"text": "one"})]), Reply("Done.")])
        await send(alice, cid, "Echo.")
        assert calls(await finished(alice, cid))[-1]["result"] == "echo: one"
        assert {"mine__echo", "kv__echo"} <= setup.offered()

        # connectors.remote taken away: the registered server's tools are gone from the
        # next round; the activation stays.
        await set_member_capabilities(setup, remove={"connectors.remote"})
        setup.model.script("model-mcp", [Reply("Nothing to do.")])
        await send(alice, cid, "Anything?")
        await finished(alice, cid)
        assert not any(n.startswith("mine__") for n in setup.offered())
        assert "kv__echo" in setup.offered()
        mine = (await alice.get(f"{BASE}/my/connectors/mine")).json()
        assert mine["state"] == "withdrawn" and mine["tools"] == [], mine  # their page says so

        # connectors.activate taken away while a call of the activation waits for its
        # approval: refused when it would start, the server never called.
        setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("kv__echo", {"text": "two"})]), Reply("Done.")])
        await send(alice, cid, "Echo again.")
        approval = await card(alice, cid)
        await set_member_capabilities(setup, remove={"connectors.activate"})
        await decide(alice, approval["id"])
        result = calls(await finished(alice, cid))[-1]["result"]
        assert "echo: two" not in result, result
        assert not any(n.startswith("kv__") for n in setup.offered())

        # Given back: both work again, nothing set up anew (their sessions, stopped when
        # the capability went, start again by themselves in the background).
        await set_member_capabilities(setup, add={"connectors.remote", "connectors.activate"})

        async def both_ready() -> bool:
            rows = (await alice.get(f"{BASE}/my/connectors")).json()["connectors"]
            return {r["name"]: r["state"] for r in rows} == {"mine": "ready", "kv": "ready"}

        await eventually(both_ready, what="her connectors to start again")
        setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("mine__echo", {"text": "three"})]), Reply("Done.")])
        await send(alice, cid, "Echo once more.")
        assert calls(await finished(alice, cid))[-1]["result"] == "echo: three"
        assert {"mine__echo", "kv__echo"} <= setup.offered()

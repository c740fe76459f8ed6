"""The elicitation bridge: a server's request for input during a call reaches the member
whose call it is (a note in the conversation, a form on the Connectors page), who
answers or declines; the answer reaches the server and is stored and logged nowhere;
another member cannot answer it; bad answers are refused with a message."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from mcp_support import BASE, Setup, allow, calls, card, decide, eventually, finished, new_conversation, send, state
from skald_host.testing import Reply, ToolCall
from skald_host.testing.host import MEMBER_PASSWORD
from test_connectors_page import TAG

CANARY = "Zelda-7c1e-canary"


async def pending(client) -> list[dict]:
    return (await client.get(f"{BASE}/my/elicitations")).json()["elicitations"]


def clear_text_hits(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_a_servers_question_reaches_the_member_and_only_the_server_gets_the_answer(setup: Setup, caplog):
    caplog.set_level(logging.DEBUG)
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    await setup.add_stdio(access=[alice.member["id"], bob.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("demo__ask", {})]), Reply("Greeted."), Reply(tool_calls=[ToolCall("demo__ask", {})]), Reply("Declined.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Greet me.")
    asked = await eventually(lambda: pending(alice), what="the question to reach alice")
    assert asked[0]["message"] == "The connector demo asks: What is your name?"
    assert [(f["name"], f["type"], f["required"]) for f in asked[0]["fields"]] == [("name", "string", True), ("pin", "integer", False)]
    # The same question is the conversation's card (TurnApi.ask), with the same id.
    cards = (await state(alice, cid))["questions"]
    assert [c["question_id"] for c in cards] == [asked[0]["id"]] and cards[0]["plugin"] == "mcp"
    assert await pending(bob) == []
    response = await bob.post(f"{BASE}/my/elicitations/{asked[0]['id']}", json={"action": "accept", "content": {"name": "Mallory"}})
    assert response.status_code == 404  # not bob's to answer
    response = await bob.post(f"/api/questions/{asked[0]['id']}", json={"action": "accept", "content": {"name": "Mallory"}})
    assert response.status_code == 404  # nor through the chat's route

    # Through the host's channel door the reason comes in the member's language (English here).
    for bad, message in (({"action": "accept", "content": {}}, "Name is required."), ({"action": "accept", "content": {"name": "x", "pin": "abc"}}, "Pin must be a whole number."),
                         ({"action": "accept", "content": {"name": "x", "extra": 1}}, "Not asked for: extra."), ({"action": "maybe"}, "not in the form the question asked for")):
        response = await alice.post(f"{BASE}/my/elicitations/{asked[0]['id']}", json=bad)
        assert response.status_code == 400 and message in response.json()["error"], (bad, response.text)
    response = await alice.post(f"{BASE}/my/elicitations/{asked[0]['id']}", json={"action": "accept", "content": {"name": CANARY, "pin": "1234"}})
    assert response.status_code == 200, response.text
    messages = await finished(alice, cid)
    assert calls(messages)[-1]["result"] == f"hello {CANARY} (1234)"  # the server got it
    assert await pending(alice) == []

    await send(alice, cid, "Again.")
    # The first answer (the connector's, outside text) is in the conversation now: the
    # second call, allowed by the rule, asks first (check E2); the member approves it.
    forced = await card(alice, cid)
    assert forced["untrusted"]["values"]["tool"] == "demo__ask"
    await decide(alice, forced["id"])
    asked = await eventually(lambda: pending(alice), what="the second question")
    # Declined from the conversation's card this time (the host's route).
    response = await alice.post(f"/api/questions/{asked[0]['id']}", json={"action": "decline"})
    assert response.status_code == 200, response.text
    assert calls(await finished(alice, cid))[-1]["result"] == "decline"
    assert (await state(alice, cid))["questions"] == []

    # The answer was stored and logged nowhere but in the tool's result the server chose to return.
    assert CANARY not in caplog.text
    def registry_values(conn) -> str:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return repr([conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])

    assert CANARY not in await setup.host.core.registry.run(registry_values)
    assert clear_text_hits(setup.host.settings.data_dir, CANARY.encode()) == []


async def test_a_stopped_turn_cancels_the_question(setup: Setup):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("demo__ask", {})]), Reply("Stopped.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Greet me.")
    await eventually(lambda: pending(alice), what="the question")
    response = await alice.post(f"/api/conversations/{cid}/stop")
    assert response.status_code in (200, 202), response.text
    await eventually(lambda: _empty(pending(alice)), what="the question to go away")


async def _empty(coro) -> bool:
    return await coro == []


async def test_the_member_answers_on_the_page_in_a_browser(setup: Setup, plugin_browser):
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("demo__ask", {})]), Reply("Greeted.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Greet me.")
    form = page.locator(f"{TAG} form.mcp-ask")
    await form.filter(has_text="What is your name?").wait_for(timeout=20_000)
    await form.locator("input[name=name]").fill("Ada")
    await form.locator("input[name=pin]").fill("7")
    await form.locator("button[type=submit]").click()
    assert calls(await finished(alice, cid))[-1]["result"] == "hello Ada (7)"
    await form.wait_for(state="detached", timeout=10_000)


async def test_the_member_answers_the_card_in_the_conversation_in_a_browser(setup: Setup, plugin_browser):
    """The question is a card in the chat (the host's, TurnApi.ask): it survives a
    reload (it is listed with the conversation), and the answer reaches the server
    (the server-side checks of bad answers: the first test)."""
    alice = await setup.host.member("alice")
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    page = await plugin_browser.new_page(base_url=setup.host.url)
    await page.goto("/")  # the login form, as a member signs in
    await page.get_by_label("User name").fill("alice")
    await page.get_by_label("Password", exact=True).fill(MEMBER_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await page.locator("#sidebar").wait_for(state="attached")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("demo__ask", {})]), Reply("Greeted.")])
    cid = await new_conversation(alice)
    await page.goto(f"/#chat/{cid}")
    await send(alice, cid, "Greet me.")
    card = page.get_by_role("group", name="A question from a tool")
    await card.wait_for(timeout=20_000)  # live, from the member's socket
    assert "The connector demo asks: What is your name?" in await card.inner_text()
    await page.reload()
    await card.wait_for(timeout=20_000)
    await card.locator("input[name=name]").fill("Ada")
    await card.locator("input[name=pin]").fill("7")
    await card.locator("button[type=submit]").click()
    await card.locator(".approval-status.approved").wait_for(timeout=10_000)
    assert calls(await finished(alice, cid))[-1]["result"] == "hello Ada (7)"

"""The conversation list: new (with the role's default agent), titled by its first
message, renamed, searched by title (``%`` and ``_`` are literal), deleted — also while
its turn runs, which stops it first."""

from __future__ import annotations

from skald_host.testing import Hang, Reply, ToolCall

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation, types


async def listing(client, search: str | None = None) -> list[dict]:
    response = await client.get("/api/conversations", params={"search": search} if search is not None else None)
    assert response.status_code == 200
    return response.json()["conversations"]


async def test_conversations_are_titled_renamed_searched_and_deleted(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("ok")
    async with ChatSocket(alice) as sock:
        first = await new_conversation(alice)
        await sock.send(first, "  Plan the   garden\nfor spring, with 100% organic seeds and more words than a title holds")
        await sock.turn(first)
        second = await new_conversation(alice, title="Taxes_2026")
        await sock.send(second, "Start.")
        await sock.turn(second)

    titles = {c["id"]: c["title"] for c in await listing(alice)}
    assert titles[first] == "Plan the garden for spring, with 100% organic seeds and more"  # first words, one line
    assert titles[second] == "Taxes_2026"  # a given title is kept
    assert [c["agent_id"] for c in await listing(alice)] == ["assistant", "assistant"]

    assert [c["id"] for c in await listing(alice, "100%")] == [first]
    assert [c["id"] for c in await listing(alice, "s_2")] == [second]
    assert await listing(alice, "s%2") == []  # a literal %, not a wildcard
    assert (await alice.get("/api/conversations", params={"search": "x" * 201})).status_code == 400

    response = await alice.patch(f"/api/conversations/{second}", json={"title": "  Taxes, done  "})
    assert response.status_code == 200 and response.json()["title"] == "Taxes, done"
    assert (await alice.patch(f"/api/conversations/{second}", json={"title": "x" * 201})).status_code == 400

    assert (await alice.delete(f"/api/conversations/{first}")).status_code == 200
    assert [c["id"] for c in await listing(alice)] == [second]
    assert (await alice.get(f"/api/conversations/{first}")).status_code == 404
    assert (await alice.delete(f"/api/conversations/{first}")).status_code == 404


async def test_deleting_a_conversation_whose_turn_runs_stops_the_turn_first(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Hang(text="streaming on", token_delay=0.01)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go on and on.")
        await sock.wait_event(cid, "token", delta=" on")
        assert (await alice.delete(f"/api/conversations/{cid}")).status_code == 200
        await chat.server.wait_for_disconnects(1)
        events = await sock.turn(cid)
    assert "cancelled" in types(events)
    assert await listing(alice) == []


async def test_new_conversation_takes_the_roles_chat_agent_and_refuses_task_or_unknown_agents(chat):
    alice = await chat.host.member("alice")
    response = await chat.admin.patch("/api/admin/roles/member", json={"attrs": {"chat_agent": "quiet"}})
    assert response.status_code == 200, response.text
    cid = await new_conversation(alice)
    assert [c["agent_id"] for c in await listing(alice) if c["id"] == cid] == ["quiet"]
    assert (await alice.get("/api/chat/status")).json()["default_agent"] == "quiet"
    for agent in ("researcher", "nobody", "../assistant"):
        response = await alice.post("/api/conversations", json={"agent": agent})
        assert response.status_code in (400, 404), (agent, response.text)
    chat_agents = {a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]}
    assert {"assistant", "companion", "quiet"} <= chat_agents and "researcher" not in chat_agents


async def test_a_slow_context_provider_does_not_hold_up_a_conversations_creation(chat, monkeypatch):
    """The frozen prompt is built as a conversation is created (off its first token's
    path), but never for longer than ``PREPARE_PROMPT_SECONDS``: past that the first
    turn builds it, with the provider's answer."""
    import asyncio
    import time

    from skald_host.core.agent import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "PREPARE_PROMPT_SECONDS", 0.2)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("ok")
    calls = 0

    async def context(member, source):
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(30)  # stuck, the first time
        return "Shared context, on time."

    chat.host.core.chat.add_context_provider("probe:", context)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    started = time.monotonic()
    cid = (await runtime.create_conversation(source="probe:slow"))["id"]
    assert time.monotonic() - started < 5
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "Hello.")
        events = await sock.turn(cid)
    assert "done" in types(events)
    assert "Shared context, on time." in chat.server.requests_for(MODEL_A)[0].messages[0]["content"]


async def test_the_list_puts_the_conversation_whose_turn_ended_last_first(chat):
    """Rounds in the middle of a turn leave the conversation's time alone (two pages
    fewer in each round's commit); the turn's end moves it, and the list follows."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    rounds = [Reply(tool_calls=[ToolCall("list_agents", {})]), Reply(tool_calls=[ToolCall("list_agents", {})]), Reply("Two looks.")]
    chat.server.script(MODEL_A, [Reply("Hello.")] + rounds)
    async with ChatSocket(alice) as sock:
        first = await new_conversation(alice)
        second = await new_conversation(alice)
        await sock.send(second, "Hi.")
        await sock.turn(second)
        await sock.send(first, "Look twice.")
        assert types(await sock.turn(first)).count("tool_done") == 2
    listed = await listing(alice)
    assert [c["id"] for c in listed] == [first, second]
    answer = (await messages(alice, first))[-1]
    assert answer["content"] == "Two looks."
    assert listed[0]["updated_at"] >= answer["created_at"]

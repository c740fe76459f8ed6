"""The per-conversation inbox: a message sent during a turn is stored (the ack says
queued) and starts the next turn, after the answer it arrived during; an idempotency
key stores a message once however often, and by whichever channel, it is sent."""

from __future__ import annotations

import asyncio

from skald_host.core.agent import store as conversation_store
from skald_host.core.agent.definitions import AgentError
from skald_host.testing import Reply, ScriptedModelServer, echo_last_user_message

from .support import (
    ALL_MODELS,
    API_KEY,
    MODEL_A,
    PROBE,
    ChatProbe,
    ChatSocket,
    configure_models,
    eventually,
    messages,
    new_conversation,
    types,
    write_probe_agents,
)


async def test_message_sent_during_a_turn_is_queued_and_delivered_in_the_next_turn(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    release = asyncio.Event()
    answers = iter(["First answer.", "Second answer."])

    async def held_until_released(request):
        await release.wait()  # the first turn runs until the test lets it end
        return Reply(next(answers))

    chat.server.responder = held_until_released
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        assert (await sock.send(cid, "First question."))["queued"] is False
        await chat.server.wait_for_requests(1)
        ack = await sock.send(cid, "A second thought.", key="second-thought")
        assert ack["type"] == "ack" and ack["queued"] is True and ack["message_id"] is None
        queued = (await alice.get(f"/api/conversations/{cid}")).json()["queued"]
        assert [q["content"] for q in queued] == ["A second thought."]
        release.set()
        first = await sock.turn(cid)
        second = await sock.turn(cid)
    # Each turn is announced as one: started, its answer, finished.
    assert types(first).count("turn_started") == 1 and [e for e in first if e["type"] == "done"][0]["content"] == "First answer."
    assert types(second)[0:2] == ["user_message", "turn_started"] and types(second)[-2:] == ["done", "turn_finished"]

    first_request, second_request = chat.server.requests_for(MODEL_A)
    assert first_request.messages[1:] == [{"role": "user", "content": "First question."}]
    assert second_request.messages[1:] == [
        {"role": "user", "content": "First question."},
        {"role": "assistant", "content": "First answer."},
        {"role": "user", "content": "A second thought."},
    ]
    transcript = await messages(alice, cid)
    assert [m["content"] for m in transcript] == ["First question.", "First answer.", "A second thought.", "Second answer."]
    assert (await alice.get(f"/api/conversations/{cid}")).json()["queued"] == []


async def test_same_idempotency_key_twice_stores_one_message_and_acks_both(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("Answered once.", first_token_delay=0.2)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        first = await sock.send(cid, "Only once, please.", key="retry-key-0001")
        again = await sock.send(cid, "Only once, please.", key="retry-key-0001")
        over_http = await alice.post(
            f"/api/conversations/{cid}/messages", json={"text": "Only once, please.", "idempotency_key": "retry-key-0001"}
        )
        assert first["type"] == again["type"] == "ack"
        assert again["duplicate"] is True and again["message_id"] == first["message_id"]
        assert over_http.status_code == 202 and over_http.json()["message_id"] == first["message_id"]
        await sock.turn(cid)
    assert [m["content"] for m in await messages(alice, cid)] == ["Only once, please.", "Answered once."]
    assert len(chat.server.requests_for(MODEL_A)) == 1

    # A key belongs to one conversation.
    other = await new_conversation(alice)
    response = await alice.post(f"/api/conversations/{other}/messages", json={"text": "x", "idempotency_key": "retry-key-0001"})
    assert response.status_code == 400
    assert await messages(alice, other) == []


async def test_concurrent_retries_with_one_key_are_all_acknowledged_and_stored_once(chat):
    """A client that retries before the first ack arrives (check G1) races itself; by
    HTTP and over two sockets, while no turn runs and while one does."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("Busy.", first_token_delay=0.3)])
    chat.server.responder = lambda request: Reply("Answered.")
    cid = await new_conversation(alice)
    async with ChatSocket(alice) as one, ChatSocket(alice) as two:
        for round in range(12):
            key, text = f"racing-key-{round:04d}", f"Racing {round}."
            body = {"text": text, "idempotency_key": key}
            http = [alice.post(f"/api/conversations/{cid}/messages", json=body) for _ in range(3)]
            results = await asyncio.gather(*http, one.send(cid, text, key), two.send(cid, text, key))
            assert [r.status_code for r in results[:3]] == [202] * 3, [r.text for r in results[:3]]
            assert [r["type"] for r in results[3:]] == ["ack", "ack"], results[3:]
            acks = [r.json() for r in results[:3]] + results[3:]
            assert sum(not a.get("duplicate") for a in acks) == 1, acks
        await one.wait_event(cid, "turn_finished")
        await eventually(lambda: _idle(alice, cid), what="the queued messages to be answered")
    contents = [m["content"] for m in await messages(alice, cid) if m["role"] == "user"]
    assert sorted(contents) == sorted(f"Racing {round}." for round in range(12))


async def _idle(client, conversation_id: str) -> bool:
    state = (await client.get(f"/api/conversations/{conversation_id}")).json()
    return not state["running"] and not state["queued"]


async def test_a_retry_of_a_message_older_than_the_remembered_keys_is_stored_once_and_starts_no_turn(chat, monkeypatch):
    """A turn may start before its message commits when the key is not among those
    remembered; a retry of an older message then reaches the write, which finds the
    key taken: the ack says duplicate, nothing is stored, nothing is announced."""
    monkeypatch.setattr(conversation_store, "RECENT_KEYS", 0)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("Answered.")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello.", key="old-key-0001")
        await sock.turn(cid)
    # The member's runtime starts afresh (as after a restart) and remembers no key.
    await chat.host.core.chat.before_lock(alice.member["id"])
    async with ChatSocket(alice) as sock:
        again = await sock.send(cid, "Hello.", key="old-key-0001")
        assert again["type"] == "ack" and again.get("duplicate") is True
        await sock.send(cid, "Something new.", key="new-key-0001")
        events = await sock.turn(cid)
    # The retry announced nothing: the socket's first events are the new message's turn.
    assert types(events).count("turn_finished") == 1, [(e["type"], e.get("message_id"), e.get("content")) for e in sock.events]
    assert types(events)[:2] == ["user_message", "turn_started"], [(e["type"], e.get("message_id"), e.get("content")) for e in sock.events]
    assert [m["content"] for m in await messages(alice, cid)] == ["Hello.", "Answered.", "Something new.", "Answered."]


async def test_a_message_queued_after_the_turns_last_look_at_the_inbox_is_answered(chat, monkeypatch):
    """The race this guards: the turn submits its last drain of the inbox, a message
    comes in (the turn still runs, so it is queued) and is written after that drain.
    The ending turn must notice and start the next one, not leave it in the inbox."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply(f"Answer to {request.last_user_text}")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First.", key="first-key")
        await sock.turn(cid)
        runtime = chat.host.core.chat.live_runtime(alice.member["id"])
        drain = runtime.store.drain_inbox
        raced = []

        async def drain_then_a_late_message(frame):
            draining = asyncio.ensure_future(drain(frame))
            await asyncio.sleep(0)  # the drain's job is submitted
            if not raced:
                raced.append(await runtime.send(cid, "Late.", "late-key"))
            return await draining

        monkeypatch.setattr(runtime.store, "drain_inbox", drain_then_a_late_message)
        await sock.send(cid, "Second.", key="second-key")
        await sock.turn(cid)
        assert raced and raced[0]["queued"] is True
        await eventually(lambda: _idle(alice, cid), what="the late message to be answered")
    assert [m["content"] for m in await messages(alice, cid)] == [
        "First.", "Answer to First.", "Second.", "Answer to Second.", "Late.", "Answer to Late.",
    ]


async def test_a_turn_refused_before_its_request_went_out_still_stores_and_acks_the_message(chat):
    """A turn's first request goes out before its message is written; a turn refused
    before that point (here: the conversation's context provider says no) must still
    store the member's message, acknowledge it, and end its placeholder as failed."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("Fine.")
    removed = False  # from the second turn on: the member left the shared space

    async def context(member, source):
        if removed:
            raise AgentError("you are no longer part of this")
        return "Shared context."

    chat.host.core.chat.add_context_provider("probe:", context)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    cid = (await runtime.create_conversation(source="probe:1"))["id"]
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "First.", key="refused-1")
        await sock.turn(cid)
        removed = True
        ack = await sock.send(cid, "Second.", key="refused-2")
        events = await sock.turn(cid)
    assert ack["type"] == "ack" and ack["message_id"]
    assert types(events) == ["user_message", "turn_started", "error", "turn_finished"], types(events)
    transcript = await messages(alice, cid)
    assert [(m["role"], m["status"], m["content"]) for m in transcript] == [
        ("user", "complete", "First."), ("assistant", "complete", "Fine."),
        ("user", "complete", "Second."), ("assistant", "error", "you are no longer part of this"),
    ]
    assert transcript[-1]["reason"]["code"] == "agent_failed"  # worded in the reader's language after a reload too
    assert len(chat.server.requests_for(MODEL_A)) == 1  # the refused turn never asked the model


async def test_a_flood_from_one_member_is_refused_past_the_send_budget_and_nothing_refused_is_stored(skald, tmp_path):
    """Check H3's message flood, scaled down: a member's own client sends as fast as it
    can; past the budget each send is refused with when to try again, others are not
    affected, and what was refused was not stored."""
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY, responder=echo_last_user_message) as server:
        settings = skald.settings(chat={"send_burst": 5, "sends_per_second": 1.0})
        host = await skald.start(plugins=[ChatProbe(write_probe_agents(tmp_path / "agents"))], enable=[PROBE], settings=settings)
        await configure_models(await host.admin(), server)
        alice, bob = await host.member("alice"), await host.member("bob")
        cid, bobs = await new_conversation(alice), await new_conversation(bob)
        async with ChatSocket(alice) as sock:
            replies = [await sock.send(cid, f"flood {n}", key=f"flood-message-{n}") for n in range(40)]
        acked = [r for r in replies if r["type"] == "ack"]
        refused = [r for r in replies if r["type"] == "error"]
        assert 5 <= len(acked) <= 8, len(acked)  # the burst, and what refilled meanwhile
        assert refused and all(r["code"] == "too_fast" and r["retry_after"] >= 1 and r["idempotency_key"] for r in refused)
        response = await alice.post(f"/api/conversations/{cid}/messages", json={"text": "one more"})
        assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1, response.text
        async with ChatSocket(bob) as sock:  # another member's budget is their own
            assert (await sock.send(bobs, "hello"))["type"] == "ack"

        async def settled() -> dict | None:
            data = (await alice.get(f"/api/conversations/{cid}")).json()
            return None if data["queued"] or data["running"] else data

        data = await eventually(settled, what="the flood's turns to end")
        stored = [m["content"] for m in data["messages"] if m["role"] == "user"]
        assert sorted(stored) == sorted(f"flood {r['idempotency_key'].rsplit('-', 1)[1]}" for r in acked)

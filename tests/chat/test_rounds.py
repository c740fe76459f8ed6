"""The round loop seen from outside: tool rounds on the wire, streaming, tool-less
agents, parallel sub-agents and the depth limit (seed 001 "The LLM loop", "Sub-agents",
"Token streaming"; check E2's tool-less part)."""

from __future__ import annotations

import asyncio
import json

import pytest

from openai._utils._json import openapi_dumps

from skald_host.testing import Reply, ToolCall

from .support import (
    MODEL_A,
    PINNED,
    ChatSocket,
    allow_tool,
    assert_well_formed,
    configure_models,
    eventually,
    messages,
    new_conversation,
    types,
)


async def test_multi_round_tool_conversation_sends_calls_and_results_in_call_order_and_streams_before_done(chat):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "lookup")
    alice = await chat.host.member("alice", display_name="Alice Exâmple")  # not ASCII: sent as UTF-8, unescaped
    chat.server.script(
        MODEL_A,
        [
            Reply("Let me look.", tool_calls=[ToolCall("lookup", {"text": "x"}), ToolCall("lookup", {"text": "y"})]),
            Reply("x is 1 and y is 2.", reasoning="Both lookups answered.", token_delay=0.01),
        ],
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        ack = await sock.send(cid, "What are x and y?", key="first-message-1")
        assert ack["type"] == "ack" and ack["queued"] is False and ack["idempotency_key"] == "first-message-1"
        events = await sock.turn(cid)

    first, second = chat.server.requests_for(MODEL_A)
    assert first.stream and second.stream
    assert [t["function"]["name"] for t in first.tools] == sorted(t["function"]["name"] for t in first.tools)
    assert "lookup" in [t["function"]["name"] for t in first.tools]
    assert first.messages[0]["role"] == "system" and "Name: Alice Exâmple" in first.messages[0]["content"]
    assert first.messages[1:] == [{"role": "user", "content": "What are x and y?"}]

    # The host joins each body from JSON it keeps of what earlier rounds sent: the
    # bytes are exactly what the SDK makes of the same request.
    for request in (first, second):
        assert request.raw == openapi_dumps(request.body)
    assert b'"content":"What are x and y?"' in second.raw

    # Round two carries the assistant's calls and their results, in call order.
    assistant, *results = second.messages[2:]
    assert second.messages[:2] == first.messages
    assert assistant["role"] == "assistant" and assistant["content"] == "Let me look."
    calls = assistant["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("lookup", {"text": "x"}),
        ("lookup", {"text": "y"}),
    ]
    assert results == [
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "result for x"},
        {"role": "tool", "tool_call_id": calls[1]["id"], "content": "result for y"},
    ]

    # Tokens stream before the round's outcome; done is the authoritative answer.
    kinds = types(events)
    # The first message titles the conversation: that is said right after it.
    assert kinds[:3] == ["user_message", "conversation_changed", "turn_started"] and kinds[-1] == "turn_finished"
    assert kinds.count("done") == 1 and kinds.count("assistant") == 1 and "error" not in kinds
    done = next(e for e in events if e["type"] == "done")
    tokens = [e for e in events if e["type"] == "token" and e["message_id"] == done["message_id"]]
    assert len(tokens) > 1
    assert all(events.index(t) < events.index(done) for t in tokens)
    content = [t["delta"] for t in tokens if t["channel"] == "content"]
    reasoning = [t["delta"] for t in tokens if t["channel"] == "reasoning"]
    assert "".join(content) == done["content"] == "x is 1 and y is 2."
    assert "".join(reasoning) == done["reasoning"] == "Both lookups answered."
    # Each says where it goes: the characters of its channel before it.
    for channel in ("content", "reasoning"):
        deltas = [t for t in tokens if t["channel"] == channel]
        assert [t["at"] for t in deltas] == [sum(len(t["delta"]) for t in deltas[:i]) for i in range(len(deltas))]
    assert kinds.index("assistant") < kinds.index("tool_start") < kinds.index("tool_done") < kinds.index("done")
    assert [e["call_id"] for e in events if e["type"] == "tool_done"] == [c["id"] for c in calls]

    transcript = await messages(alice, cid)
    assert [(m["role"], m["status"]) for m in transcript] == [("user", "complete"), ("assistant", "complete"), ("assistant", "complete")]
    assert [(c["id"], c["status"], c["result"]) for c in transcript[1]["tool_calls"]] == [
        (calls[0]["id"], "done", "result for x"),
        (calls[1]["id"], "done", "result for y"),
    ]
    assert (transcript[2]["content"], transcript[2]["reasoning"]) == ("x is 1 and y is 2.", "Both lookups answered.")
    assert chat.server.pending(MODEL_A) == 0


async def test_tool_less_chat_agent_requests_carry_no_tools_key_and_tool_calls_in_its_replies_are_dropped(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(
        MODEL_A,
        [Reply("I would write it.", tool_calls=[ToolCall("write_note", {"text": "injected"})]), Reply("Still no tools.")],
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice, agent="quiet")
        await sock.send(cid, "Please write a note.")
        first = await sock.turn(cid)
        await sock.send(cid, "And now?")
        await sock.turn(cid)
    assert not {"approval_required", "tool_start", "assistant"} & set(types(first))
    assert next(e for e in first if e["type"] == "done")["content"] == "I would write it."
    requests = chat.server.requests_for(MODEL_A)
    assert len(requests) == 2
    for request in requests:
        assert "tools" not in request.body and "tool_choice" not in request.body
        assert not any("tool_calls" in m or m["role"] == "tool" for m in request.messages)
    assert requests[0].messages[0] == {"role": "system", "content": "You answer without tools."}
    assert requests[1].messages[2] == {"role": "assistant", "content": "I would write it."}
    assert chat.probe.writes == []
    assert [m["tool_calls"] for m in await messages(alice, cid)] == [[], [], [], []]


async def test_delegated_tool_less_researcher_request_carries_no_tools_key(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(
        MODEL_A,
        [
            Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Find the capital of Norway."})]),
            Reply("Oslo."),
            Reply("The researcher says: Oslo."),
        ],
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Capital of Norway?")
        events = await sock.turn(cid)
    root, child, final = chat.server.requests_for(MODEL_A)
    assert "execute_task" in [t["function"]["name"] for t in root.tools]
    assert "tools" not in child.body
    assert child.messages[0]["content"].startswith("You are a focused research helper")
    assert child.messages[1:] == [{"role": "user", "content": "Find the capital of Norway."}]
    assert final.messages[-1]["role"] == "tool" and final.messages[-1]["content"] == "Oslo."
    assert [e["type"] for e in events if e.get("depth") == 1 and e["type"] in ("agent_start", "done", "agent_done")] == [
        "agent_start", "done", "agent_done",
    ]
    assert (await messages(alice, cid))[-1]["content"] == "The researcher says: Oslo."


async def test_parallel_delegate_batch_runs_concurrently_and_records_results_in_call_order(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A, *PINNED.values()))
    alice = await chat.host.member("alice")
    # Each child's model holds its answer until all three children have asked: run one
    # after the other, the first would wait for the others forever (here: 5 s, then fail).
    all_asked = asyncio.Event()
    delays = {"alpha": 0.3, "beta": 0.0, "gamma": 0.15}  # they then finish as beta, gamma, alpha

    async def answer_when_all_three_asked(request):
        if sum(r.model in PINNED.values() for r in chat.server.requests) == 3:
            all_asked.set()
        await asyncio.wait_for(all_asked.wait(), 5)
        agent = next(agent for agent, model in PINNED.items() if model == request.model)
        return Reply(f"{agent} result", first_token_delay=delays[agent])

    chat.server.responder = answer_when_all_three_asked
    batch = [ToolCall("execute_task", {"agent": agent, "task": f"Task for {agent}."}) for agent in PINNED]
    chat.server.script(MODEL_A, [Reply(tool_calls=batch), Reply("All three are done.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Do the three tasks.")
        events = await sock.turn(cid)

    children = {agent: chat.server.requests_for(model) for agent, model in PINNED.items()}
    assert all(len(requests) == 1 for requests in children.values())
    assert all_asked.is_set()
    finished = [e["agent"] for e in events if e["type"] == "agent_done"]
    assert sorted(finished) == sorted(PINNED)
    for agent, requests in children.items():
        assert "tools" not in requests[0].body
        assert requests[0].messages[1:] == [{"role": "user", "content": f"Task for {agent}."}]

    root_first, root_second = chat.server.requests_for(MODEL_A)
    ids = [c["id"] for c in root_second.messages[2]["tool_calls"]]
    results = root_second.messages[3:]
    assert [r["tool_call_id"] for r in results] == ids
    assert [r["content"] for r in results] == ["alpha result", "beta result", "gamma result"]
    assert [e["call_id"] for e in events if e["type"] == "tool_done"] == ids
    transcript = await messages(alice, cid)
    assert [c["result"] for c in transcript[1]["tool_calls"]] == ["alpha result", "beta result", "gamma result"]
    assert_well_formed(transcript)


@pytest.mark.parametrize(
    ("chat_settings", "deepest_level"),
    [({}, 4), ({"subagents": {"max_tree_depth": 2}}, 2)],
    ids=["seed-default-4", "configured-2"],
)
async def test_the_deepest_level_allowed_is_not_offered_delegation(chat, deepest_level):
    """§9 ``max_tree_depth``: the seed's 4 by default, and what the instance's
    ``subagents`` settings say when they say otherwise. A helper at that depth is not
    offered ``execute_task``: one level deeper would be refused, so offering it only
    spent a round of the helper's on a call that could not run."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    nests = [Reply(tool_calls=[ToolCall("execute_task", {"agent": f"nester{level}", "task": "Go one level deeper."})])
             for level in range(1, deepest_level + 1)]
    unwinding = [Reply(f"level {depth} done") for depth in range(deepest_level, -1, -1)]
    chat.server.script(MODEL_A, nests + unwinding)  # the root and every level but the deepest nest
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Nest as deep as you can.")
        events = await sock.turn(cid)
    requests = chat.server.requests_for(MODEL_A)
    assert len(requests) == 2 * deepest_level + 1 and chat.server.pending(MODEL_A) == 0
    assert [t["function"]["name"] for t in requests[1].tools] == ["execute_task"]  # the nester offers only that
    assert [t["function"]["name"] for t in requests[deepest_level - 1].tools] == ["execute_task"]
    deepest = requests[deepest_level]  # the deepest level's request: nothing to delegate with
    assert "tools" not in deepest.body, deepest.tools
    assert max(e.get("depth", 0) for e in events) == deepest_level
    assert "error" not in types(events)
    transcript = await messages(alice, cid)
    assert transcript[-1]["content"] == "level 0 done"
    assert transcript[1]["tool_calls"][0]["result"] == "level 1 done"
    assert_well_formed(transcript)


async def test_only_tools_the_member_may_use_are_offered_and_others_are_refused(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    response = await chat.admin.put(f"/api/admin/members/{alice.member['id']}/plugins", json={"plugins": []})
    assert response.status_code == 200, response.text
    chat.server.script(
        MODEL_A,
        [Reply(tool_calls=[ToolCall("write_note", {"text": "sneaky"}), ToolCall("list_agents", {})]), Reply("Fine.")],
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write a note and list the agents.")
        events = await sock.turn(cid)
    first, second = chat.server.requests_for(MODEL_A)
    offered = {t["function"]["name"] for t in first.tools}
    core = chat.host.core
    host_tools = {t.name for t in core.chat.tools.all() if core.plugins.status(t.plugin_id).builtin}
    assert {"notify", "list_agents", "execute_task", "schedule_prompt"} <= host_tools
    # The host's own, not the probe's; emit_signal only ever in a run with a signal
    # contract, get_skill only to an agent with skills.
    assert offered == host_tools - {"emit_signal", "get_skill"}
    assert "approval_required" not in types(events) and chat.probe.writes == []
    refused, listed = second.messages[-2:]
    assert "no tool named 'write_note'" in refused["content"]
    # list_agents shows task agents only, never a chat agent, and no agent of a plugin
    # the member may not use (the probe's nesters).
    assert "researcher" in listed["content"] and "nester" not in listed["content"]
    assert "assistant" not in listed["content"] and "quiet" not in listed["content"]


async def test_a_grant_changed_behind_the_runtimes_back_is_caught_by_the_turns_fresh_read(chat):
    """The fresh read of the member (started once the turn's first request is out)
    still guards what no push told the runtime about — here a grant row deleted in the
    registry directly: that answer is dropped unseen and the turn is asked again for
    the member as they are now, without the plugin's tools."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("First."), Reply("Asked with the old rights."), Reply("Asked anew.")])

    def offered(request) -> set[str]:
        return {t["function"]["name"] for t in request.tools}

    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "One.")
        await sock.turn(cid)
        await chat.host.core.registry.transaction(
            lambda c: c.execute("DELETE FROM plugin_access WHERE user_id = ?", (alice.member["id"],))
        )
        await sock.send(cid, "Two.")
        events = await sock.turn(cid)
    requests = chat.server.requests_for(MODEL_A)
    assert len(requests) == 3 and "lookup" in offered(requests[1])  # the first one went out before the read
    assert "lookup" not in offered(requests[2])
    assert [e["content"] for e in events if e["type"] == "done"] == ["Asked anew."]
    assert "old rights" not in json.dumps(sock.events)
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    assert [m["content"] for m in transcript if m["role"] == "assistant"] == ["First.", "Asked anew."]


def test_queued_token_deltas_of_one_message_are_sent_as_one():
    from skald_hookspecs.events import UserEvent
    from skald_host.web.routes.events import coalesce_tokens

    def token(message_id: int, channel: str, delta: str, at: int) -> UserEvent:
        return UserEvent("chat", "m", {"type": "token", "conversation_id": "c", "message_id": message_id, "channel": channel, "delta": delta, "at": at})

    done = UserEvent("chat", "m", {"type": "done", "conversation_id": "c", "message_id": 1})
    events = [token(1, "reasoning", "a", 0), token(1, "content", "He", 0), token(1, "content", "llo", 2), done, token(2, "content", "x", 0)]
    joined = coalesce_tokens(events)
    assert [(e.data["type"], e.data.get("delta"), e.data.get("at")) for e in joined] == [
        ("token", "a", 0), ("token", "Hello", 0), ("done", None, None), ("token", "x", 0)
    ]  # a joined delta starts where its first did


async def test_a_grant_revoked_since_the_last_turn_applies_from_the_next_turns_answer(chat):
    """A turn's first request is built for the member as known from their last turn and
    goes out while the message commits. A revoked grant is pushed to the member's
    runtime before the admin's request answers (``ChatService.access_changed``), so
    that request is already built without the plugin's tools: the model is never asked
    with the old rights (a change that is not pushed is caught by the fresh read, which
    drops the answer unseen and asks again)."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("First."), Reply("Asked anew.")])

    def offered(request) -> set[str]:
        return {t["function"]["name"] for t in request.tools}

    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "One.")
        await sock.turn(cid)
        assert "lookup" in offered(chat.server.requests_for(MODEL_A)[0])
        response = await chat.admin.put(f"/api/admin/members/{alice.member['id']}/plugins", json={"plugins": []})
        assert response.status_code == 200, response.text
        await sock.send(cid, "Two.")
        events = await sock.turn(cid)
    requests = chat.server.requests_for(MODEL_A)
    assert len(requests) == 2 and "lookup" not in offered(requests[1])
    assert [e["content"] for e in events if e["type"] == "done"] == ["Asked anew."]
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    assert [m["content"] for m in transcript if m["role"] == "assistant"] == ["First.", "Asked anew."]


def test_socket_messages_are_the_events_as_json_coalesced_and_batched():
    """What the socket sends (``encode``): each event as ``{kind, member_id, data}``, one
    message per event or an ``events`` batch of several, whatever mapping the data is
    (a read-only view, keys that are not strings) and non-ASCII text as itself."""
    import types as pytypes

    from skald_hookspecs.events import UserEvent
    from skald_host.web.routes.events import batch, coalesce_tokens, encode

    def token(delta: str) -> UserEvent:
        return UserEvent("chat", "m", {"type": "token", "conversation_id": "c", "message_id": 7, "channel": "content", "delta": delta})

    single = json.loads(encode(batch([UserEvent("chat", "m", pytypes.MappingProxyType({"type": "done", "content": "Grüße", 3: 4}))])))
    assert single == {"type": "event", "event": {"kind": "chat", "member_id": "m", "data": {"type": "done", "content": "Grüße", "3": 4}}}
    assert "Grüße" in encode(batch([token("Grüße")]))
    done = UserEvent("chat", "m", {"type": "done", "conversation_id": "c", "message_id": 7})
    several = json.loads(encode(batch(coalesce_tokens([token("He"), token("llo"), done]))))
    assert several["type"] == "events"
    assert [e["data"]["type"] for e in several["events"]] == ["token", "done"]
    assert several["events"][0] == {"kind": "chat", "member_id": "m", "data": {**token("Hello").data}}
    # A lone surrogate (a model may stream one, escaped) goes out escaped, never fails the socket.
    assert json.loads(encode(batch([token("a\ud800b"), done])))["events"][0]["data"]["delta"] == "a\ud800b"


async def test_a_turn_with_no_socket_open_builds_no_events(chat, monkeypatch):
    """Events are announcements to open sockets: with none open (a message sent over the
    HTTP API, the tab closed), a streamed answer publishes nothing, token by token, and
    the stored answer is whole."""
    from skald_host.core.buses import MemberBuses

    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("one two three four five six", token_delay=0.005)])
    published: list[dict] = []
    original = MemberBuses.publish

    def publish(self, event):
        if event.member_id == alice.member["id"]:
            published.append(dict(event.data))
        return original(self, event)

    monkeypatch.setattr(MemberBuses, "publish", publish)
    cid = await new_conversation(alice)
    response = await alice.post(f"/api/conversations/{cid}/messages", json={"text": "Count."})
    assert response.status_code == 202, response.text

    async def answered():
        stored = await messages(alice, cid)
        return stored[-1]["role"] == "assistant" and stored[-1]["status"] == "complete" and stored[-1]
    last = await eventually(answered, what="the answer to be stored")
    assert last["content"] == "one two three four five six"
    assert published == []


def test_a_stream_chunk_orjson_refuses_is_read_as_json_reads_it():
    from skald_host.core.llm.client import _loads

    for text in ('{"choices":[{"delta":{"content":"x"}}]}', '{"v": NaN}', '{"t": "\\ud800"}'):
        assert repr(_loads(text)) == repr(json.loads(text))


async def test_a_read_mid_answer_has_the_text_streamed_so_far_and_the_tokens_go_on_from_it(chat):
    """The row on disk holds the answer as last checkpointed (at most every 0.5 s); a
    page that read it mid-answer, then heard the tokens sent after, lacked the words
    between. A read gives the text streamed so far, with its length in each channel
    (``streamed``): the ``at`` of the tokens that follow."""
    from skald_host.testing import Hang

    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    words = " ".join(f"w{n}" for n in range(1, 41))
    chat.server.script(MODEL_A, [Hang(text=words, token_delay=0.01)])  # streams them all, then never ends
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Count")
        last = await eventually(lambda: next((e for e in sock.events if e.get("type") == "token" and e["delta"].endswith("w40")), None),
                                what="the last token")
        read = await alice.get(f"/api/conversations/{cid}")
        assert read.status_code == 200, read.text
        answer = read.json()["messages"][-1]
        assert (answer["role"], answer["status"]) == ("assistant", "streaming")
        assert answer["content"] == words and answer["streamed"] == {"content": len(words), "reasoning": 0}
        assert last["at"] + len(last["delta"]) == len(words)
        assert (await sock.stop(cid))["type"] == "stopped"
        await sock.turn(cid)
    read = (await alice.get(f"/api/conversations/{cid}")).json()
    assert "streamed" not in read["messages"][-1]  # ended: the row on disk is the answer

"""What a probe of the agent runtime found (a real server, a scripted model), each
fixed and kept fixed:

- a background run the member cancelled reached the model only at a turn's tool
  round: a following turn without one never told it;
- a call a sign-out cut read "the server restarted…" when recovery ended it;
- a call an earlier version's Stop left ``requested`` in a turn that had moved on
  stayed so for ever (recovery now ends it, never a call of a turn it resumes).

A real host and the scripted model server; the member's file read where it matters."""

from __future__ import annotations

import asyncio

from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply, ToolCall

from .support import (
    MODEL_A,
    TRIGGER,
    ChatSocket,
    alice_back_after_a_sign_out_cut_her_wiki_call,
    cancel_run,
    configure_models,
    delegate_a_slow_task,
    inbox_statuses,
    last,
    messages,
    new_conversation,
    start_a_slow_task,
)


def triggers(request) -> list[str]:
    return [m["content"] for m in request.messages if TRIGGER in (m.get("content") or "")]


async def test_a_cancelled_background_run_reaches_the_first_request_of_the_next_turn_without_a_tool_round_once(chat):
    """The member cancels a background task, then says hello: that turn runs no tool,
    and its one request carries the cancel (after the member's message, before the
    answer); the turn after it, with a tool round, carries it once as history and is
    not told again."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def respond(request):
        said = [m.get("content") for m in request.messages]
        if "Look around." in said:
            return Reply("Looked.") if last(request)["role"] == "tool" else Reply(tool_calls=[ToolCall("list_agents", {})])
        if "Hello." in said:
            return Reply("Hi.")
        return delegate_a_slow_task(request)

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid, started = await start_a_slow_task(chat, alice, sock)
        await cancel_run(alice, sock, cid, started["run_id"])
        await asyncio.sleep(0.5)
        await sock.send(cid, "Hello.")
        await sock.turn(cid)
        hello = [r for r in chat.server.requests_for(MODEL_A) if any(m.get("content") == "Hello." for m in r.messages)]
        assert len(hello) == 1
        [told] = triggers(hello[0])
        assert "status cancelled" in told and started["run_id"] in told
        assert last(hello[0])["content"] == told  # the newest message: after the member's, at the boundary
        assert await inbox_statuses(chat, alice) == ["consumed"]

        await sock.send(cid, "Look around.")
        await sock.turn(cid)
    after = [r for r in chat.server.requests_for(MODEL_A) if any(m.get("content") == "Look around." for m in r.messages)]
    assert len(after) == 2 and [len(triggers(r)) for r in after] == [1, 1]  # history, never a second trigger
    shown = await messages(alice, cid)
    assert [m["content"] for m in shown if m["role"] == "assistant" and not m["tool_calls"]][-2:] == ["Hi.", "Looked."]
    assert not any(m.get("origin") for m in shown)  # the trigger is hidden from the member
    assert not any(m["role"] == "assistant" and m["status"] == "streaming" for m in shown)


async def test_a_call_a_sign_out_cut_says_the_data_locked_not_that_the_server_restarted(chat):
    """A turn's call left running when the member's file locked (a sign-out): recovery
    ends it without running it again, in words of a lock; the server never restarted."""
    alice, cid = await alice_back_after_a_sign_out_cut_her_wiki_call(chat)
    call = (await messages(alice, cid))[1]["tool_calls"][0]
    assert (call["status"], call["result"]) == ("interrupted", HOST_RESULTS["locked"])
    assert "restarted" not in str(chat.server.requests_for(MODEL_A)[-1].messages)


async def test_recovery_ends_calls_left_requested_in_a_turn_that_moved_on_and_leaves_a_resumed_turns_calls(chat):
    """Files of an earlier version: a Stop left the calls queued behind a stopped one
    ``requested``, and the conversation went on. Recovery ends them (never run); the
    calls of a turn it resumes (its last message's) run as before."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    old, resumed = await new_conversation(alice), await new_conversation(alice)
    member = await chat.host.core.users.get(alice.member["id"])
    runtime = await chat.host.core.chat.runtime(member)
    store = runtime.store

    frame = await store.root_frame(old)
    await store.add_user_message(frame, "Two things.", None)
    answer = await store.start_assistant(frame, MODEL_A)
    await store.finish_assistant(answer, content="", reasoning="", model=MODEL_A, calls=[
        ("old_1", "list_agents", "{}", "rerun"), ("old_2", "list_agents", "{}", "rerun"),
    ])
    await store.set_calls([("old_1", "cancelled", HOST_RESULTS["stopped"])])  # the stopped one; old_2 stayed requested
    await store.add_user_message(frame, "Something else.", None)
    final = await store.start_assistant(frame, MODEL_A)
    await store.finish_assistant(final, content="Something else, then.", reasoning="", model=MODEL_A)

    frame = await store.root_frame(resumed)
    await store.add_user_message(frame, "List them.", None)
    answer = await store.start_assistant(frame, MODEL_A)
    await store.finish_assistant(answer, content="", reasoning="", model=MODEL_A, calls=[("new_1", "list_agents", "{}", "rerun")])
    assert (await alice.post("/api/auth/logout")).status_code == 200

    chat.server.responder = lambda request: Reply("Listed.")
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        await sock.wait_event(resumed, "turn_finished")
    healed = {c["id"]: c for m in await messages(alice, old) for c in m["tool_calls"]}
    assert (healed["old_1"]["status"], healed["old_1"]["result"]) == ("cancelled", HOST_RESULTS["stopped"])
    assert (healed["old_2"]["status"], healed["old_2"]["result"]) == ("cancelled", HOST_RESULTS["not_run"])
    taken_up = await messages(alice, resumed)
    assert taken_up[1]["tool_calls"][0]["status"] == "done"
    assert taken_up[-1]["content"] == "Listed."
    assert not any(any(m.get("content") == "Two things." for m in r.messages) for r in chat.server.requests_for(MODEL_A))

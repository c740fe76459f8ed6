"""Regenerate and Edit set aside the answer that started a background run: the run is
cancelled as a Stop cancels it, and no continuation turn tells the new branch about a
task its history never asked for."""

from __future__ import annotations

import asyncio

import pytest

from skald_host.testing import Reply, ToolCall

from .support import MODEL_A, TRIGGER, ChatSocket, configure_models, last, messages, new_conversation, runs


def delegate_once(request):
    """The first answer to "Go." starts a background run that ends after a second; every
    later answer is plain text."""
    content = last(request)["content"] or ""
    if content == "Slow task.":
        return Reply("Slow result.", first_token_delay=1.0)
    if content.startswith(TRIGGER):
        return Reply("The task came back.")
    if last(request)["role"] == "tool":
        return Reply("Started.")
    if content == "Go." and not delegate_once.done:
        delegate_once.done = True
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Slow task.", "mode": "background"})])
    return Reply("A plain answer.")


@pytest.mark.parametrize("change", ["regenerate", "edit"])
async def test_regenerate_or_edit_cancels_the_background_run_of_the_answer_it_replaces(chat, change):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    delegate_once.done = False
    chat.server.responder = delegate_once
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go.")
        await sock.turn(cid)
        [row] = await runs(alice, cid)
        assert (row["mode"], row["status"]) in {("background", "running"), ("background", "queued")}
        if change == "regenerate":
            response = await alice.post(f"/api/conversations/{cid}/regenerate")
        else:
            first = next(m for m in await messages(alice, cid) if m["role"] == "user")
            response = await alice.post(f"/api/conversations/{cid}/edit", json={"message_id": first["id"], "text": "Go."})
        assert response.status_code in (200, 202), response.text
        await sock.turn(cid)
        [row] = await runs(alice, cid)
        assert row["status"] == "cancelled"
        await asyncio.sleep(1.5)  # past the run's own end, had it gone on
    assert not any((last(r)["content"] or "").startswith(TRIGGER) for r in chat.server.requests_for(MODEL_A))
    shown = [(m["role"], m["content"]) for m in await messages(alice, cid) if not m["variant"]]
    assert shown == [("user", "Go."), ("assistant", "A plain answer.")]


async def test_a_regenerate_with_nothing_to_regenerate_cancels_nothing(chat):
    """Refused before anything is undone: it cancelled the conversation's background
    runs first, then found no answer to set aside."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    cancelled: list[str] = []
    cancel = runtime.subagents.cancel_conversation

    async def noted(conversation_id, **kwargs):
        cancelled.append(conversation_id)
        return await cancel(conversation_id, **kwargs)

    runtime.subagents.cancel_conversation = noted
    cid = await new_conversation(alice)
    response = await alice.post(f"/api/conversations/{cid}/regenerate")
    assert (response.status_code, response.json()["code"]) == (409, "nothing_to_regenerate")
    assert cancelled == []

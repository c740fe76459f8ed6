"""Regenerate (issue 19): the last message is answered again; the earlier answer is
kept as a version the member can flip back to, and only the version shown is ever
sent to the model."""

from __future__ import annotations

from skald_host.testing import Hang, Reply

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation


async def test_regenerate_keeps_earlier_answers_as_versions_and_the_model_sees_only_the_shown_one(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("First answer."), Reply("Second answer."), Reply("Noted."), Hang(text="slow", token_delay=0.2)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        assert (await alice.post(f"/api/conversations/{cid}/regenerate")).status_code == 409  # nothing answered yet
        await sock.send(cid, "Tell me something")
        await sock.turn(cid)
        response = await alice.post(f"/api/conversations/{cid}/regenerate")
        assert response.status_code == 202, response.text
        await sock.turn(cid)
        shown = [(m["role"], m["content"], m["variant"]) for m in await messages(alice, cid)]
        assert shown == [("user", "Tell me something", 0), ("assistant", "First answer.", 1), ("assistant", "Second answer.", 0)]
        first, second = chat.server.requests_for(MODEL_A)
        assert second.messages == first.messages  # the earlier answer is not in the request

        # Flip back to the first answer: it is the one the conversation continues from.
        response = await alice.put(f"/api/conversations/{cid}/version", json={"variant": 1})
        assert response.status_code == 200, response.text
        shown = [(m["content"], m["variant"]) for m in await messages(alice, cid) if m["role"] == "assistant"]
        assert shown == [("First answer.", 0), ("Second answer.", 2)]
        assert (await alice.put(f"/api/conversations/{cid}/version", json={"variant": 7})).status_code == 404
        assert (await alice.put(f"/api/conversations/{cid}/version", json={"variant": "1"})).status_code == 400
        await sock.send(cid, "And then?")
        await sock.turn(cid)
        third = chat.server.requests_for(MODEL_A)[2]
        assert [m["content"] for m in third.messages if m["role"] == "assistant"] == ["First answer."]

        await sock.send(cid, "Slowly")
        await sock.wait_event(cid, "token")
        busy = await alice.post(f"/api/conversations/{cid}/regenerate")
        assert busy.status_code == 409 and "running" in busy.json()["error"]
        await sock.stop(cid)
    exported = (await alice.get(f"/api/conversations/{cid}/export", params={"format": "md"})).text
    assert "First answer." in exported and "Second answer." not in exported
    other = await chat.host.member("bob")
    assert (await other.post(f"/api/conversations/{cid}/regenerate")).status_code == 404

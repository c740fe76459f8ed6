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


async def test_editing_a_message_continues_from_it_and_keeps_the_old_branch(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("Re: " + request.last_user_text)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        for text in ("One", "Two", "Three"):
            await sock.send(cid, text)
            await sock.turn(cid)
        two = next(m for m in await messages(alice, cid) if m["content"] == "Two")
        response = await alice.post(f"/api/conversations/{cid}/edit", json={"message_id": two["id"], "text": "Deux"})
        assert response.status_code == 202, response.text
        await sock.turn(cid)
        shown = [m["content"] for m in await messages(alice, cid) if not m["variant"]]
        assert shown == ["One", "Re: One", "Deux", "Re: Deux"]
        request = chat.server.requests[-1]
        assert [m["content"] for m in request.messages if m["role"] != "system"] == ["One", "Re: One", "Deux"]
        # The old branch, from "Two" on, is one version at the same point; flip back to it.
        old = {m["variant"] for m in await messages(alice, cid) if m["content"] in ("Two", "Re: Two", "Three", "Re: Three")}
        assert len(old) == 1 and old != {0}
        response = await alice.put(f"/api/conversations/{cid}/version", json={"variant": old.pop()})
        assert response.status_code == 200, response.text
        shown = [m["content"] for m in await messages(alice, cid) if not m["variant"]]
        assert shown == ["One", "Re: One", "Two", "Re: Two", "Three", "Re: Three"]
        # Regenerating after flipping keeps both the edit branch and the old answer.
        assert (await alice.post(f"/api/conversations/{cid}/regenerate")).status_code == 202
        await sock.turn(cid)
        shown = [m["content"] for m in await messages(alice, cid) if not m["variant"]]
        assert shown == ["One", "Re: One", "Two", "Re: Two", "Three", "Re: Three"]  # the scripted model says the same
        assert len({m["variant"] for m in await messages(alice, cid)}) == 3  # shown, the edit branch, the first answer to "Three"
        first_answer = next(m["variant"] for m in await messages(alice, cid) if m["content"] == "Re: Three" and m["variant"])
        two = next(m for m in await messages(alice, cid) if m["content"] == "Two" and not m["variant"])
        assert (await alice.post(f"/api/conversations/{cid}/edit", json={"message_id": two["id"], "text": "Zwei"})).status_code == 202
        await sock.turn(cid)
        # That answer branches off "Three", now itself in a version not shown: not reachable from here.
        assert (await alice.put(f"/api/conversations/{cid}/version", json={"variant": first_answer})).status_code == 404
        assert [m["content"] for m in await messages(alice, cid) if not m["variant"]] == ["One", "Re: One", "Zwei", "Re: Zwei"]
    for body in ({"message_id": 10_000, "text": "x"}, {"message_id": two["id"] + 1, "text": "an answer is not the member's"}):
        assert (await alice.post(f"/api/conversations/{cid}/edit", json=body)).status_code == 404
    assert (await alice.post(f"/api/conversations/{cid}/edit", json={"message_id": two["id"], "text": " "})).status_code == 400


async def test_what_a_compaction_summarised_is_not_taken_back(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("A summary." if "summar" in str(request.messages[0]["content"]).lower() else "ok")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        for text in ("One", "Two"):
            await sock.send(cid, text)
            await sock.turn(cid)
    assert (await alice.post(f"/api/conversations/{cid}/compact")).json() == {"compacted": True}
    one = next(m for m in await messages(alice, cid) if m["content"] == "One")
    edit = await alice.post(f"/api/conversations/{cid}/edit", json={"message_id": one["id"], "text": "Uno"})
    assert edit.status_code == 409 and "compaction" in edit.json()["error"]
    assert not any(m["variant"] for m in await messages(alice, cid))
    # The last answer is the exception (test_compaction_edges): the summary made after
    # it summarised that very answer, and goes aside with it.
    async with ChatSocket(alice) as sock:
        assert (await alice.post(f"/api/conversations/{cid}/regenerate")).status_code == 202
        await sock.turn(cid)
    kept = [(m["role"], m["variant"]) for m in await messages(alice, cid) if m["variant"]]
    assert kept == [("assistant", 1), ("summary", 1)]

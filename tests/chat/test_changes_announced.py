"""A change to a conversation that the member's other open clients must see (another
tab, another device) is announced as a chat event once it is written, never before:
``conversation_changed`` (its title, its model), ``conversation_deleted``, and
``branch_changed`` when what it shows changed other than by a message added at its end
(a regenerate, an edit, a version flipped to, a failed turn retried)."""

from __future__ import annotations

from typing import Any

from skald_host.testing import Reply

from .support import MODEL_A, MODEL_B, ChatSocket, configure_models, conversation, messages, new_conversation

ANNOUNCED = ("conversation_changed", "conversation_deleted", "branch_changed")
WRITES = ("rename", "choose_model", "delete", "keep_as_version", "edit_message", "show_version", "take_back_failure")


def watch_writes_and_announcements(core: Any, store: Any) -> list[tuple[str, str]]:
    """What happened, in order: ("written", store method) once a write returned, and
    ("announced", event type) when one of these events was published to the member."""
    order: list[tuple[str, str]] = []

    def after(name: str) -> Any:
        write = getattr(store, name)

        async def written(*args: Any, **kwargs: Any) -> Any:
            result = await write(*args, **kwargs)
            order.append(("written", name))
            return result

        return written

    for name in WRITES:
        setattr(store, name, after(name))
    publish = core.buses.members.publish

    def announced(event: Any) -> int:
        if event.kind == "chat" and event.data.get("type") in ANNOUNCED:
            order.append(("announced", event.data["type"]))
        return publish(event)

    core.buses.members.publish = announced
    return order


async def watched(chat: Any) -> tuple[Any, list[tuple[str, str]]]:
    """Alice's client, and what her conversations' writes and announcements were, in order."""
    alice = await chat.host.member("alice")
    core = chat.host.core
    runtime = await core.chat.runtime(await core.users.get(alice.member["id"]))
    return alice, watch_writes_and_announcements(core, runtime.store)


async def events_of(sock: ChatSocket, conversation_id: str, kind: str, start: int, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events of ``kind`` of the conversation from index ``start`` on."""
    found: list[dict[str, Any]] = []
    while len(found) < count:
        event = await sock.wait_event(conversation_id, kind, start=start)
        found.append(event)
        start = sock.events.index(event) + 1
    return found


async def test_a_changed_branch_is_announced_after_it_is_written(chat):
    alice, order = await watched(chat)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        # A turn that failed (no model yet), retried once there is one: the failure goes.
        await sock.send(cid, "One")
        await sock.turn(cid)
        await configure_models(chat.admin, chat.server)
        chat.server.responder = lambda request: Reply(f"{request.model}: {request.last_user_text}")
        order.clear()
        assert (await alice.post(f"/api/conversations/{cid}/retry")).status_code == 202
        retried = await sock.turn(cid)
        assert retried[0]["type"] == "branch_changed" and retried[0]["reason"] == "retry", retried
        assert order == [("written", "take_back_failure"), ("announced", "branch_changed")]

        # Regenerate: announced once the earlier answer is kept as a version, before the new turn.
        order.clear()
        assert (await alice.post(f"/api/conversations/{cid}/regenerate")).status_code == 202
        regenerated = await sock.turn(cid)
        assert [e["type"] for e in regenerated][:2] == ["branch_changed", "turn_started"], regenerated
        assert regenerated[0]["reason"] == "regenerate"
        assert order == [("written", "keep_as_version"), ("announced", "branch_changed")]

        # Edit: the new branch's message id is said.
        first = next(m for m in await messages(alice, cid) if m["role"] == "user")
        order.clear()
        response = await alice.post(f"/api/conversations/{cid}/edit", json={"message_id": first["id"], "text": "Uno"})
        assert response.status_code == 202, response.text
        edited = await sock.turn(cid)
        assert edited[0]["type"] == "branch_changed" and edited[0]["reason"] == "edit", edited
        assert edited[0]["message_id"] == response.json()["message_id"] and edited[0]["edited_id"] == first["id"]
        assert order == [("written", "edit_message"), ("announced", "branch_changed")]

        # A version flipped to.
        variant = next(m["variant"] for m in await messages(alice, cid) if m["variant"])
        start = len(sock.events)
        order.clear()
        assert (await alice.put(f"/api/conversations/{cid}/version", json={"variant": variant})).status_code == 200
        flipped = await sock.wait_event(cid, "branch_changed", start=start)
        assert flipped["reason"] == "version" and flipped["variant"] == variant
        assert order == [("written", "show_version"), ("announced", "branch_changed")]

        # Refused changes announce nothing.
        order.clear()
        assert (await alice.put(f"/api/conversations/{cid}/version", json={"variant": 99})).status_code == 404
        assert (await alice.post(f"/api/conversations/{cid}/retry")).status_code == 409
        assert (await alice.post(f"/api/conversations/{cid}/edit", json={"message_id": 10**9, "text": "x"})).status_code == 404
        assert [what for what in order if what[0] == "announced"] == []


async def test_a_new_title_and_model_are_announced_after_they_are_written(chat):
    ids = await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice, order = await watched(chat)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        # Each says the conversation's title and model, whole.
        start = len(sock.events)
        order.clear()
        response = await alice.patch(f"/api/conversations/{cid}", json={"title": "Renamed"})
        assert response.status_code == 200, response.text
        renamed = await sock.wait_event(cid, "conversation_changed", start=start)
        assert (renamed["title"], renamed["model"]) == ("Renamed", None)
        assert order == [("written", "rename"), ("announced", "conversation_changed")]
        start = len(sock.events)
        order.clear()
        response = await alice.patch(f"/api/conversations/{cid}", json={"model": ids[MODEL_B]})
        assert response.status_code == 200, response.text
        chosen = await sock.wait_event(cid, "conversation_changed", start=start)
        assert (chosen["title"], chosen["model"]) == ("Renamed", ids[MODEL_B])
        assert order == [("written", "choose_model"), ("announced", "conversation_changed")]
        stored = (await conversation(alice, cid))["conversation"]
        assert (stored["title"], stored["model"]) == ("Renamed", ids[MODEL_B])

        # Both in one request: the last event says both.
        start = len(sock.events)
        response = await alice.patch(f"/api/conversations/{cid}", json={"title": "Both", "model": None})
        assert response.status_code == 200, response.text
        assert (response.json()["title"], response.json()["model"]) == ("Both", None)
        both = await events_of(sock, cid, "conversation_changed", start, 2)
        assert (both[-1]["title"], both[-1]["model"]) == ("Both", None)

        # A refused change announces nothing.
        order.clear()
        assert (await alice.patch(f"/api/conversations/{cid}", json={"model": "no-such-model"})).status_code == 400
        assert [what for what in order if what[0] == "announced"] == []


async def test_a_deletion_is_announced_after_it_is_written_to_the_member_alone(chat):
    alice, order = await watched(chat)
    bob = await chat.host.member("bob")
    async with ChatSocket(alice) as sock, ChatSocket(bob) as other:
        cid = await new_conversation(alice)
        start = len(sock.events)
        order.clear()
        assert (await alice.delete(f"/api/conversations/{cid}")).status_code == 200
        await sock.wait_event(cid, "conversation_deleted", start=start)
        assert order == [("written", "delete"), ("announced", "conversation_deleted")]
        assert (await alice.get(f"/api/conversations/{cid}")).status_code == 404
        order.clear()
        assert (await alice.delete(f"/api/conversations/{cid}")).status_code == 404  # nothing left to announce
        assert (await bob.delete(f"/api/conversations/{(await new_conversation(alice))}")).status_code == 404
        assert order == []
        # Another member's socket hears none of it.
        assert [e for e in other.events if e.get("type") in ANNOUNCED] == []


async def test_the_title_a_first_message_gives_is_announced_once(chat):
    """A client showing a new conversation learns its title from this event: its list of
    conversations, filtered by a search, may not hold it (the header kept "New
    conversation" after the answer)."""
    await configure_models(chat.admin, chat.server, (MODEL_A,))
    chat.server.responder = lambda request: Reply(f"Answer to {request.last_user_text}")
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "What about **rhubarb** pie?")
        first = await sock.turn(cid)
        changed = [e for e in first if e["type"] == "conversation_changed"]
        assert [e["title"] for e in changed] == ["What about rhubarb pie?"], first
        types = [e["type"] for e in first]
        assert types.index("user_message") < types.index("conversation_changed"), types  # once written
        assert (await conversation(alice, cid))["conversation"]["title"] == "What about rhubarb pie?"

        # A later message keeps the title: nothing to announce.
        await sock.send(cid, "And custard?")
        second = await sock.turn(cid)
        assert [e for e in second if e["type"] == "conversation_changed"] == [], second

        # A conversation renamed before its first message keeps that name, unannounced again.
        named = await new_conversation(alice)
        assert (await alice.patch(f"/api/conversations/{named}", json={"title": "Mine"})).status_code == 200
        start = len(sock.events)
        await sock.send(named, "Hello there")
        await sock.turn(named)
        assert [e for e in sock.events[start:] if e.get("conversation_id") == named and e["type"] == "conversation_changed"] == []

"""The project chat source: "Chat in this project" starts a conversation of the caller's
own with the project coordinator, whose system prompt (as the scripted model server
received it, through the real ``openai`` SDK) carries the project's context. Only
members may start one, and a member who leaves gets no further turn in it."""

from __future__ import annotations

from skald_host.testing import Reply, ScriptedModelServer
from tests.folders.support import join_project
from tests.chat.support import (
    ALL_MODELS,
    API_KEY,
    MODEL_A,
    ChatSocket,
    configure_models,
    messages,
)


def _system(request) -> str:
    return next(m["content"] for m in request.messages if m["role"] == "system")


async def test_a_project_chat_carries_the_project_context_and_stops_when_membership_ends(skald):
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_models(admin, server)
        olga, rita, otto = await host.member("olga"), await host.member("rita"), await host.member("otto")
        response = await olga.post("/api/projects", json={"slug": "garden", "title": "Garden plan", "description": "Raised beds by June"})
        pid = response.json()["id"]
        await join_project(olga, rita, pid, can_write=False)
        server.responder = lambda request: Reply("noted")

        response = await otto.post(f"/api/projects/{pid}/chat")
        assert response.status_code == 404  # not in the project: as if there were none

        response = await rita.post(f"/api/projects/{pid}/chat")
        assert response.status_code == 201, response.text
        conversation = response.json()
        assert (conversation["agent_id"], conversation["source"], conversation["title"]) == (
            "project-coordinator", f"project:{pid}", "Garden plan",
        )
        async with ChatSocket(rita) as sock:
            await sock.send(conversation["id"], "What is in the folder?")
            events = await sock.turn(conversation["id"])
            assert "error" not in [e["type"] for e in events], events
            system = _system(server.requests_for(MODEL_A)[-1])
            assert "You are Skald, working inside one project" in system  # the coordinator's own prompt
            assert "- Title: Garden plan" in system
            assert "- Description: Raised beds by June" in system
            assert "- Folder: projects/olga/garden/" in system
            assert "olga (owner): can write" in system and "rita: read only" in system
            assert "The member you are talking with can only read the project folder." in system

            # a membership change reaches the next round's prompt
            await olga.patch(f"/api/projects/{pid}/members/{rita.member['id']}", json={"can_write": True})
            await sock.send(conversation["id"], "And now?")
            await sock.turn(conversation["id"])
            assert "The member you are talking with can write in the project folder." in _system(server.requests_for(MODEL_A)[-1])

            # removed from the project: the conversation stays hers, but no turn runs
            await olga.delete(f"/api/projects/{pid}/members/{rita.member['id']}")
            sent = len(server.requests)
            await sock.send(conversation["id"], "Still there?")
            events = await sock.turn(conversation["id"])
            errors = [e for e in events if e["type"] == "error"]
            assert errors and "not a member of this project" in errors[0]["error"], events
            assert (errors[0]["code"], errors[0]["values"]) == ("project_left", {})  # worded in the reader's language
            assert len(server.requests) == sent  # the model was never asked
        # After a reload the failure says the same, with a Retry: its reason is stored.
        failed = (await messages(rita, conversation["id"]))[-1]
        assert (failed["status"], failed["id"]) == ("error", errors[0]["message_id"])
        assert failed["reason"] == {"code": "project_left", "values": {}}
        assert host.core.strings.lookup("core.error.project_left", "de").startswith("Du bist nicht mehr Mitglied")
        retried = await rita.post(f"/api/conversations/{conversation['id']}/retry")  # it would only fail again
        assert (retried.status_code, retried.json()["code"]) == (409, "project_left")
        assert (await rita.get(f"/api/conversations/{conversation['id']}")).status_code == 200

        # the coordinator cannot be started without a project (it would know nothing of it)
        response = await otto.post("/api/conversations", json={"agent": "project-coordinator"})
        assert response.status_code == 400
        await skald.close()


async def test_the_project_agent_starts_only_from_a_project(skald):
    """Without its project the coordinator has no context to work with: it is not in a
    member's agent list and a plain conversation cannot be started with it."""
    host = await skald.start()
    member = await host.member("olga")
    status = (await member.get("/api/chat/status")).json()
    assert "project-coordinator" not in [a["id"] for a in status["agents"]]
    assert "assistant" in [a["id"] for a in status["agents"]]
    response = await member.post("/api/conversations", json={"agent": "project-coordinator"})
    assert response.status_code == 400
    assert "not a chat agent" in response.json()["error"]
    project = (await member.post("/api/projects", json={"slug": "garden", "title": "Garden"})).json()
    started = await member.post(f"/api/projects/{project['id']}/chat")
    assert started.status_code == 201, started.text
    assert started.json()["agent_id"] == "project-coordinator"


async def test_a_deleted_projects_chat_says_it_was_deleted_and_refuses_a_retry(skald):
    """The owner deletes her project: her conversation in it stops with ``project_deleted``
    (not ``project_left``: she did not leave, the project is gone), and its Retry is
    refused at once (409, the same code) instead of being accepted to fail again."""
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        host = await skald.start()
        admin = await host.admin()
        await configure_models(admin, server)
        alice = await host.member("alice")
        pid = (await alice.post("/api/projects", json={"slug": "gaerten", "title": "Gärten"})).json()["id"]
        conversation = (await alice.post(f"/api/projects/{pid}/chat")).json()
        server.responder = lambda request: Reply("noted")
        async with ChatSocket(alice) as sock:
            await sock.send(conversation["id"], "Beds first?")
            assert "error" not in [e["type"] for e in await sock.turn(conversation["id"])]
            assert (await alice.delete(f"/api/projects/{pid}")).status_code == 200
            sent = len(server.requests)
            await sock.send(conversation["id"], "And now?")
            errors = [e for e in await sock.turn(conversation["id"]) if e["type"] == "error"]
            assert errors and (errors[0]["code"], errors[0]["values"]) == ("project_deleted", {}), errors
            assert "was deleted" in errors[0]["error"]
            assert len(server.requests) == sent  # the model was never asked
        failed = (await messages(alice, conversation["id"]))[-1]
        assert (failed["status"], failed["reason"]) == ("error", {"code": "project_deleted", "values": {}})

        response = await alice.post(f"/api/conversations/{conversation['id']}/retry")
        assert response.status_code == 409, response.text
        assert response.json()["code"] == "project_deleted"
        # refused before anything changed: the failed answer is still the last message
        assert (await messages(alice, conversation["id"]))[-1]["id"] == failed["id"]
        assert len(server.requests) == sent
        assert host.core.strings.lookup("core.error.project_deleted", "de").startswith("Dieses Projekt wurde gelöscht")
        await skald.close()

"""Issue 19, bug 2: one member message is one model request. The host's only second
request for a message is deliberate — logged and shown in the conversation — never a
silent repeat a paid provider would bill twice."""

from __future__ import annotations

import dataclasses
import logging

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.testing import Reply, ScriptedError, ScriptedModelServer

from .support import API_KEY, MODEL_A, MODEL_B, ChatSocket, configure_models, eventually, messages, new_conversation


async def test_each_message_is_one_request_even_when_the_member_changes_between_turns(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice", display_name="Alice")
    member_id = (await chat.host.core.users.find("alice")).id
    chat.server.responder = lambda request: Reply("ok " + request.last_user_text)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        for n in range(4):
            # A change of the member that leaves the request as it was (the prompt's prefix
            # is frozen per conversation, the tools are the same) sends nothing again.
            response = await chat.admin.patch(f"/api/admin/members/{member_id}", json={"display_name": f"Alice {n}"})
            assert response.status_code == 200, response.text
            await sock.send(cid, f"Message {n}")
            events = await sock.turn(cid)
            assert not any(e.get("retry") for e in events), events
    assert [r.last_user_text for r in chat.server.requests_for(MODEL_A)] == [f"Message {n}" for n in range(4)]
    assert [m["role"] for m in await messages(alice, cid)] == ["user", "assistant"] * 4


async def test_a_failing_model_is_asked_once_no_sdk_retry_behind_the_fallback(chat, caplog):
    """A 500 is not retried by the SDK under the host's own fallback: one request to
    the failing model, one to the next, both logged and the fallback shown."""
    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [ScriptedError(500), ScriptedError(503)])
    chat.server.script(MODEL_B, [Reply("B answers.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        with caplog.at_level(logging.WARNING, logger="skald_host.core.agent.kernel"):
            await sock.send(cid, "Hello?")
            events = await sock.turn(cid)
    assert [e["type"] for e in events if e["type"] in ("model_fallback", "done")] == ["model_fallback", "done"]
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records if "failed (HTTP" in r.getMessage()] == [
        f"model '{MODEL_A}' ({MODEL_A} at scripted) failed (HTTP 500); the request goes to '{MODEL_B}' ({MODEL_B} at scripted)",
    ]
    assert len(chat.server.requests_for(MODEL_A)) == 1 and len(chat.server.requests_for(MODEL_B)) == 1


async def test_a_request_sent_again_is_logged_and_shown_to_the_member(chat, caplog):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("ok " + request.last_user_text)
    member = await chat.host.core.users.find("alice")
    runtime = await chat.host.core.chat.runtime(member)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First")
        await sock.turn(cid)
        # The tools this member may use change while the next request is on its way
        # (a grant revoked, say), and the member record with them.
        names = iter([("before",), ("after",)])
        runtime._offered_names = lambda frame, member: next(names)
        response = await chat.admin.patch(f"/api/admin/members/{member.id}", json={"display_name": "Alice B."})
        assert response.status_code == 200, response.text
        # The change is pushed to the runtime at once (ChatService.access_changed); a
        # change the push has not reached yet is what the turn's fresh read catches.
        runtime.member = dataclasses.replace(runtime.member, display_name="Alice")
        with caplog.at_level(logging.WARNING, logger="skald_host.core.agent.runtime"):
            await sock.send(cid, "Second")
            events = await sock.turn(cid)
    notes = [e for e in events if e["type"] == "notification" and e.get("retry")]
    assert len(notes) == 1 and "sent to the model again" in notes[0]["content"]
    assert notes[0]["code"] == "request_sent_again"  # the page says it in the member's language
    assert any("sent again" in r.getMessage() for r in caplog.records), caplog.text
    assert [r.last_user_text for r in chat.server.requests_for(MODEL_A)] == ["First", "Second", "Second"]
    stored = await messages(alice, cid)
    assert [m["role"] for m in stored if m["role"] != "note"] == ["user", "assistant", "user", "assistant"]
    assert any(m["role"] == "note" and "sent to the model again" in m["content"] and m["reason"]["code"] == "request_sent_again" for m in stored)

    # The first request, cut by the host, was on its way all the same (a provider may
    # bill it): it is a row of the request log too (README "Models and chat").
    async def logged() -> list:
        rows = await chat.host.core.registry.run(lambda c: c.execute("SELECT status FROM llm_requests ORDER BY created_at, rowid").fetchall())
        return [r[0] for r in rows] if len(rows) == 3 else []

    assert sorted(await eventually(logged, what="a row for each of the three requests")) == ["interrupted", "ok", "ok"]


class Greeter:
    """Installed, off until the admin enables it; its row's birth grants it to members
    of auto-grant roles (seed 001 "Default access")."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="greeter", title="Greeter", spec=">=1.2,<2")

    @hookimpl
    def register_tools(self, register) -> None:
        async def hello(args, ctx) -> str:
            return "hi"

        register(Tool(name="greeter_hello", description="Say hi.", parameters={"type": "object"}, run=hello))


async def test_a_plugin_enabled_for_a_chatting_member_sends_their_next_message_once(skald, caplog):
    """The grants the plugin's birth gives are pushed to live runtimes: the next turn's
    request (built from the member as known) offers the new tool and goes out once —
    found by a newcomer with Telegram, whose first message after enabling it went twice."""
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as server:
        host = await skald.start(plugins=[Greeter()])
        admin = await host.admin()
        await configure_models(admin, server)
        alice = await host.member("alice")
        server.responder = lambda request: Reply("ok " + request.last_user_text)
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "First")
            await sock.turn(cid)
            response = await admin.put("/api/admin/plugins/greeter/enabled", json={"enabled": True})
            assert response.status_code == 200, response.text
            with caplog.at_level(logging.WARNING, logger="skald_host.core.agent.runtime"):
                await sock.send(cid, "Second")
                events = await sock.turn(cid)
        assert not any(e.get("retry") for e in events), events
        assert not any("sent again" in r.getMessage() for r in caplog.records), caplog.text
        requests = server.requests_for(MODEL_A)
        assert [r.last_user_text for r in requests] == ["First", "Second"]
        assert "greeter_hello" in {t["function"]["name"] for t in requests[-1].tools}

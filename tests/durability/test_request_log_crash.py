"""The model request log survives a crash (issue 19: a provider's bill is never
silent). The registry gathers request rows for a moment before one commit; the server
here is killed (``SKALD_FAULT_CRASH_AT=request_log.before_write``) in exactly that
moment, after the member's file committed the round. After a restart the registry
holds one row per request the scripted model server received, with its status: the
member's file carried the rows through the crash (``store.RequestOutbox``).
"""

from __future__ import annotations

import uuid

import httpx

from skald_host.testing import Reply, ScriptedModelServer
from tests.chat.support import API_KEY, MODEL_A, configure_models, eventually, messages, new_conversation
from tests.durability.helpers import ServerProcess, create_member, request_log, setup_admin

PASSWORD = "member passphrase for the request log"


async def armed_member(servers, model: ScriptedModelServer) -> tuple[ServerProcess, object, str]:
    server = await servers.start(crash_at="request_log.before_write")
    admin = await setup_admin(server)
    await configure_models(admin, model)
    await create_member(admin, "kim", PASSWORD)
    member = await server.login("kim", PASSWORD)
    return server, member, await new_conversation(member)


async def restarted(servers, conversation_id: str) -> tuple[ServerProcess, list[dict]]:
    """The server started again; the member signs in, which recovers their runtime."""
    server = await servers.start()
    member = await server.login("kim", PASSWORD)
    return server, await messages(member, conversation_id)


async def test_a_finished_answers_request_row_survives_a_crash_before_the_registry_wrote_it(servers):
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as model:
        model.responder = lambda request: Reply(text="Stored before the crash.")
        server, member, conversation_id = await armed_member(servers, model)
        sent = await member.post(f"/api/conversations/{conversation_id}/messages", json={"text": "Hello", "idempotency_key": uuid.uuid4().hex})
        assert sent.status_code in (200, 202), sent.text
        await server.wait_exit()  # the armed point killed it once the registry came to write
        assert request_log(server.data_dir) == [], "the registry wrote the row before the crash point: the test proves nothing"
        server, transcript = await restarted(servers, conversation_id)
        assert [m["content"] for m in transcript if m["role"] == "assistant"] == ["Stored before the crash."]
        assert len(model.requests_for(MODEL_A)) == 1
        await eventually(lambda: request_log(server.data_dir) == [(MODEL_A, "ok")], what=f"one ok row, not {request_log(server.data_dir)}")


async def test_a_stopped_requests_row_survives_a_crash_right_after_the_stop(servers):
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as model:
        model.responder = lambda request: Reply(text=" ".join(["word"] * 200), token_delay=0.05)
        server, member, conversation_id = await armed_member(servers, model)
        sent = await member.post(f"/api/conversations/{conversation_id}/messages", json={"text": "Talk", "idempotency_key": uuid.uuid4().hex})
        assert sent.status_code in (200, 202), sent.text
        await eventually(lambda: model.requests_for(MODEL_A), what="the request to reach the model")
        # The first ok row is not due until the answer ends: the stop comes first.
        try:
            stopped = await member.post(f"/api/conversations/{conversation_id}/stop")
            assert stopped.status_code == 200, stopped.text
        except httpx.TransportError:
            pass  # the crash point may come before the answer to the stop
        await server.wait_exit()
        assert request_log(server.data_dir) == []
        server, transcript = await restarted(servers, conversation_id)
        answers = [m for m in transcript if m["role"] == "assistant"]
        assert [a["status"] for a in answers] == ["cancelled"], answers
        assert len(model.requests_for(MODEL_A)) == 1  # a stopped answer is not asked for again
        await eventually(lambda: request_log(server.data_dir) == [(MODEL_A, "stopped")], what=f"one stopped row, not {request_log(server.data_dir)}")

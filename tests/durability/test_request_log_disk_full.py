"""The request log errs toward over-counting, never under-counting (README), also when
the disk holding system.db is full: a model request made while the registry could not
write its row keeps the row in the member's own file, and the registry gets it once it
can write again, while the server runs, and at the latest at the member's next
recovery. Exactly one row per request: a row is written again by its request id.

A real ``skald serve`` with its data directory on a small tmpfs (tests/disk.py) that
fills up while a slow answer of the scripted model streams; the member stops it.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from skald_host.testing import Reply, ScriptedModelServer
from tests.chat.support import API_KEY, MODEL_A, configure_models, eventually, messages, new_conversation
from tests.disk import fill
from tests.durability.helpers import ServerProcess, create_member, request_log, setup_admin

PASSWORD = "member passphrase for the full disk"


@pytest.mark.parametrize("then", ["running", "restarted"])
async def test_a_request_made_while_the_registry_could_not_write_gets_exactly_one_row_later(small_disk, then):
    data_dir = small_disk / "data"
    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as model:
        model.responder = lambda request: Reply(text=" ".join(["word"] * 200), token_delay=0.03)
        server = await ServerProcess(data_dir, small_disk.parent, "first").start()
        try:
            admin = await setup_admin(server)
            await configure_models(admin, model)
            await create_member(admin, "kim", PASSWORD)
            member = await server.login("kim", PASSWORD)
            conversation_id = await new_conversation(member)
            sent = await member.post(f"/api/conversations/{conversation_id}/messages",
                                     json={"text": "Talk", "idempotency_key": uuid.uuid4().hex})
            assert sent.status_code in (200, 202), sent.text
            await eventually(lambda: model.requests_for(MODEL_A), what="the request to reach the model")
            await asyncio.sleep(1.0)
            filler = fill(small_disk)
            try:
                stopped = await member.post(f"/api/conversations/{conversation_id}/stop")
                assert stopped.status_code in (200, 507), stopped.text
                await eventually(lambda: "request log of member" in server.output, what="the registry's write to fail")
                assert request_log(data_dir) == [], "the registry wrote the row on a full disk: the test proves nothing"
            finally:
                filler.unlink()
            if then == "running":
                # Writes work again: the registry is given the row while the server runs.
                await eventually(lambda: request_log(data_dir) == [(MODEL_A, "stopped")], timeout=20,
                                 what=f"the stopped request's one row, not {request_log(data_dir)}")
            assert await server.terminate() == 0, server.output[-3000:]
        finally:
            server.kill()

        # A graceful restart and a new sign-in (the member's recovery): still exactly one
        # row for it.
        server = await ServerProcess(data_dir, small_disk.parent, "second").start()
        try:
            member = await server.login("kim", PASSWORD)
            transcript = await messages(member, conversation_id)
            model.responder = lambda request: Reply(text="Back to normal.")
            sent = await member.post(f"/api/conversations/{conversation_id}/messages",
                                     json={"text": "and now?", "idempotency_key": uuid.uuid4().hex})
            assert sent.status_code in (200, 202), sent.text
            # When the stop's cancelled answer could not be written either, recovery
            # counted it once more as interrupted and asked for it again (over, never under).
            def statuses() -> list[str]:
                return [status for _, status in request_log(data_dir)]

            await eventually(lambda: len(model.requests_for(MODEL_A)) >= 2 and statuses()[-1:] == ["ok"]
                             and statuses().count("ok") == len(model.requests_for(MODEL_A)) - 1,
                             what=f"a row for every request, not {request_log(data_dir)}")
            await asyncio.sleep(0.5)  # a row written twice would show by now
            rows = statuses()
            assert rows.count("stopped") == 1, (rows, [(m["role"], m["status"]) for m in transcript])
            assert len([s for s in rows if s != "interrupted"]) == len(model.requests_for(MODEL_A)), rows
        finally:
            server.kill()

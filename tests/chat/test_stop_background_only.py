"""A Stop that finds no turn running but a background run of the conversation stops
that run, and says so: ``{"stopped": true}`` (it said false after cancelling it)."""

from __future__ import annotations

from .support import ChatSocket, configure_models, delegate_a_slow_task, eventually, runs, start_a_slow_task


async def test_a_stop_that_cancelled_only_a_background_run_says_it_stopped_something(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = delegate_a_slow_task
    async with ChatSocket(alice) as sock:
        cid, started = await start_a_slow_task(chat, alice, sock)  # its turn has ended: only the run is live
        response = await alice.post(f"/api/conversations/{cid}/stop")
        assert response.status_code == 200 and response.json() == {"stopped": True}
        await sock.wait_event(cid, "agent_done", run_id=started["run_id"])

    async def cancelled() -> bool:
        return [r["status"] for r in await runs(alice, cid)] == ["cancelled"]

    await eventually(cancelled, what="the run cancelled")
    assert (await alice.post(f"/api/conversations/{cid}/stop")).json() == {"stopped": False}  # nothing left to stop

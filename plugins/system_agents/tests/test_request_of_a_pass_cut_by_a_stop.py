"""A system agent's pass runs its turn in a conversation of its own that is deleted
once the pass ends. A stop of the server mid-answer leaves that answer streaming for
the chat's recovery to count as a cut request (README "Models and chat": every request
is a row of the request log, ``interrupted`` for one a stop cut) — so deleting the
conversation must not take the request's trace with it."""

from __future__ import annotations

import asyncio

from skald_host.testing import Hang


async def rows(core) -> list[str]:
    return [r[0] for r in await core.registry.run(lambda c: c.execute("SELECT status FROM llm_requests").fetchall())]


async def test_a_pass_request_a_stop_cut_is_a_row_after_the_restart(setup, skald):
    server = await skald.model_server(Hang(text="thinking"))
    await setup.host.use_model(server)
    alice = await setup.host.member("alice")
    await setup.core.host_api("capture").append_member_event(alice.member["id"], "mcp.notification", {"server": "ci", "text": "failed"})
    setup.clock.advance(minutes=6)
    passes = asyncio.ensure_future(setup.tick())  # event triage asks the model, which never finishes
    try:
        for _ in range(500):
            if server.requests:
                break
            await asyncio.sleep(0.01)
        assert len(server.requests) == 1
        await asyncio.sleep(0.2)  # its answer streams
        await setup.restart()  # the stop cuts the pass's request
    finally:
        await asyncio.gather(passes, return_exceptions=True)
    await setup.host.member("alice")  # her sign-in ...
    await setup.core.chat.runtime(await setup.core.users.find("alice"))  # ... and her chat recover
    for _ in range(100):
        if await rows(setup.core):
            break
        await asyncio.sleep(0.05)
    assert await rows(setup.core) == ["interrupted"]

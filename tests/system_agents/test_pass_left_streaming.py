"""A pass's own conversation (ephemeral) that a crash left with its answer streaming:
the request that answer was for is counted by the chat's recovery (README "Models and
chat": a request a crash cut is an ``interrupted`` row of the request log), which finds
it by that streaming row. The scheduler's sweep of such conversations comes at the
agent's first pass after the start, which may be before the member's chat recovered
(the chat starts at its first use): the sweep waits for it, then removes them."""

from __future__ import annotations

import asyncio

from tests.system_agents.support import Clock, CountingAgents


async def test_a_pass_conversation_left_streaming_is_swept_only_once_recovery_counted_its_request(skald):
    plugin = CountingAgents(unit="minutes", interval=5)
    host = await skald.start(plugins=[plugin], enable=["counting"], settings=skald.settings(system_agents={"run": False}))
    clock = host.core.system_agents.clock = Clock()
    alice_id = (await host.member("alice")).member["id"]
    assert host.core.chat.live_runtime(alice_id) is None  # her chat has not recovered yet
    db = host.core.users.owner_db(alice_id)

    def left_by_a_crash(c) -> None:
        c.execute("INSERT INTO conversations (id, agent_id, source, ephemeral) VALUES ('left', 'x', 'system:counted', 1)")
        c.execute("INSERT INTO frames (id, conversation_id, agent_id, depth) VALUES ('left-root', 'left', 'x', 0)")
        c.execute("INSERT INTO messages (conversation_id, frame_id, role, status, model) VALUES ('left', 'left-root', 'assistant', 'streaming', 'm')")

    async def left() -> int:
        return await db.run(lambda c: c.execute("SELECT count(*) FROM conversations WHERE ephemeral = 1").fetchone()[0])

    async def rows() -> list[tuple[str, str]]:
        return [tuple(r) for r in await host.core.registry.run(lambda c: c.execute("SELECT model, status FROM llm_requests").fetchall())]

    await db.transaction(left_by_a_crash)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["ran"]
    assert await left() == 1  # kept: its cut request is not counted yet

    await host.core.chat.runtime(await host.core.users.get(alice_id))  # her chat's recovery counts it
    for _ in range(100):
        if await rows():
            break
        await asyncio.sleep(0.05)
    assert await rows() == [("m", "interrupted")]
    clock.advance(minutes=6)
    assert [o.result for o in await host.core.system_agents.tick() if o.member_id == alice_id] == ["ran"]
    assert await left() == 0

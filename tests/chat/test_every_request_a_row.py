"""Every request the host sends is a row of the request log (README "Models and chat"),
also one the host itself cuts short: a turn's opening request goes out beside its
message's write, and when the turn does not go on from it (the request is sent again
because the member's tools changed meanwhile) that first request was on its way all
the same, and a provider may bill it."""

from __future__ import annotations

import dataclasses

from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, eventually, new_conversation


async def test_an_opening_request_the_host_sends_again_is_a_row_too(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply("ok " + request.last_user_text)
    member = await chat.host.core.users.find("alice")
    runtime = await chat.host.core.chat.runtime(member)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First")
        await sock.turn(cid)
        # The tools this member may use change while the next request is on its way (as
        # in test_one_request): the turn starts over, and its first request is cut.
        names = iter([("before",), ("after",)])
        runtime._offered_names = lambda frame, member: next(names)
        response = await chat.admin.patch(f"/api/admin/members/{member.id}", json={"display_name": "Alice B."})
        assert response.status_code == 200, response.text
        runtime.member = dataclasses.replace(runtime.member, display_name="Alice")
        await sock.send(cid, "Second")
        events = await sock.turn(cid)
    assert any(e["type"] == "notification" and e.get("code") == "request_sent_again" for e in events)
    assert [r.last_user_text for r in chat.server.requests_for(MODEL_A)] == ["First", "Second", "Second"]

    async def logged() -> list:
        rows = await chat.host.core.registry.run(lambda c: c.execute("SELECT status FROM llm_requests ORDER BY created_at, rowid").fetchall())
        return [r[0] for r in rows] if len(rows) == 3 else []

    assert sorted(await eventually(logged, what="a row for each of the three requests")) == ["interrupted", "ok", "ok"]


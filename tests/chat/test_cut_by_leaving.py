"""A member deleted (or deactivated) while an answer streams: the lock cuts the request,
and no recovery will ever count it (their file, the only place the cut answer lives, is
deleted; a deactivated member's file is not unlocked). The request is in the registry's
log all the same, as interrupted: the log errs toward over-counting a bill, never under."""

from __future__ import annotations

import asyncio

from skald_host.testing import Hang, Reply

from .support import MODEL_A, ChatSocket, configure_models, new_conversation


async def _rows(chat, member_id: str) -> list[str]:
    return await chat.host.core.registry.run(
        lambda c: [r[0] for r in c.execute("SELECT status FROM llm_requests WHERE member_id = ?", (member_id,))])


async def _streaming(chat, alice) -> None:
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Stream.")
        await sock.wait_event(cid, "token", delta=" answer")


async def test_a_member_deleted_mid_answer_leaves_the_cut_request_in_the_log(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A,))
    chat.server.script(MODEL_A, [Hang(text="half an answer", token_delay=0.01)])
    alice = await chat.host.member("alice")
    member_id = alice.member["id"]
    await _streaming(chat, alice)
    assert (await chat.admin.delete(f"/api/admin/members/{member_id}")).status_code == 200
    assert await _rows(chat, member_id) == ["interrupted"]


async def test_a_member_deactivated_mid_answer_then_deleted_leaves_it_once(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A,))
    chat.server.script(MODEL_A, [Hang(text="half an answer", token_delay=0.01)])
    alice = await chat.host.member("alice")
    member_id = alice.member["id"]
    await _streaming(chat, alice)
    assert (await chat.admin.patch(f"/api/admin/members/{member_id}", json={"active": False})).status_code == 200
    assert await _rows(chat, member_id) == ["interrupted"]
    assert (await chat.admin.delete(f"/api/admin/members/{member_id}")).status_code == 200
    assert await _rows(chat, member_id) == ["interrupted"]


async def test_a_member_deactivated_mid_answer_and_reactivated_is_counted_once(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A,))
    chat.server.script(MODEL_A, [Hang(text="half an answer", token_delay=0.01), Reply("The whole answer.")])
    alice = await chat.host.member("alice")
    member_id = alice.member["id"]
    await _streaming(chat, alice)
    assert (await chat.admin.patch(f"/api/admin/members/{member_id}", json={"active": False})).status_code == 200
    assert (await chat.admin.patch(f"/api/admin/members/{member_id}", json={"active": True})).status_code == 200
    alice = await chat.host.member("alice")  # logs in again: the admin's cut holds, nothing is asked again (check C5)
    async with ChatSocket(alice):
        await asyncio.sleep(1.0)  # a resumed answer's row would be written in the background
    assert await _rows(chat, member_id) == ["interrupted"]
    assert len(chat.server.requests_for(MODEL_A)) == 1

"""Scheduled prompts (``scheduled_jobs``): durable, delivered into the conversation that
asked, once — also when a crash left one half-delivered."""

from __future__ import annotations

from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation


async def test_scheduled_prompt_left_running_by_a_crash_is_delivered_once(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    job_id = await runtime.store.schedule(cid, "Water the plants.", "2000-01-01T00:00:00.000000Z")
    await runtime.store.set_job(job_id, "running")  # what a crash after marking it, before sending, leaves
    chat.server.script(MODEL_A, [Reply("Reminder: water the plants.")])
    async with ChatSocket(alice) as sock:
        await runtime.deliver_due_jobs()
        await runtime.deliver_due_jobs()  # a second pass (or the scheduler's own) stores nothing twice
        await sock.wait_event(cid, "turn_finished")
    assert [(m["role"], m["content"]) for m in await messages(alice, cid)] == [
        ("user", "[Scheduled] Water the plants."),
        ("assistant", "Reminder: water the plants."),
    ]
    assert await runtime.store.due_jobs("2999-01-01T00:00:00.000000Z") == []

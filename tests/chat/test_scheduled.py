"""Scheduled prompts (``scheduled_jobs``): durable, delivered into the conversation that
asked, once — also when a crash left one half-delivered."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

from skald_host.core import schedules
from skald_host.core.agent.runtime import SCHEDULER_MAX_SLEEP, SCHEDULER_RETRY_SECONDS, seconds_until
from skald_host.testing import Hang, Reply, ScriptedError, SkaldClient, ToolCall

from .support import MODEL_A, PROBE, ChatSocket, allow_tool, configure_models, eventually, messages, new_conversation


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


async def test_the_scheduled_marker_is_in_the_members_language(chat):
    await configure_models(chat.admin, chat.server)
    bert = await chat.host.member("bert", locale="de")
    cid = await new_conversation(bert)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(bert.member["id"]))
    await runtime.store.schedule(cid, "Erinnerung: Pflanzen gießen.", "2000-01-01T00:00:00.000000Z")
    chat.server.script(MODEL_A, [Reply("Gieß die Pflanzen.")])
    async with ChatSocket(bert) as sock:
        await runtime.deliver_due_jobs()
        await sock.wait_event(cid, "turn_finished")
    assert [(m["role"], m["content"]) for m in await messages(bert, cid)][0] == ("user", "[Geplant] Erinnerung: Pflanzen gießen.")


async def test_a_prompt_scheduled_for_soon_is_delivered_when_due_without_polling(chat):
    """The scheduler sleeps until the next job is due and wakes when one is scheduled:
    a prompt due in a second arrives about then, by the scheduler alone (the earlier
    scheduler looked every 5 s, so this took up to 5 s and idle members' files were
    read all day long)."""
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "schedule_prompt")
    alice = await chat.host.member("alice")
    schedule = Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": "Stretch your legs.", "in_minutes": 1 / 60})])
    chat.server.script(MODEL_A, [schedule, Reply("I will remind you."), Reply("Time to stretch your legs.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Remind me to stretch in a second.")
        await sock.turn(cid)
        asked = time.monotonic()
        await sock.wait_event(cid, "turn_finished", start=len(sock.events), timeout=3.5)
        assert time.monotonic() - asked < 3.5
    assert [(m["role"], m["content"]) for m in await messages(alice, cid)][-2:] == [
        ("user", "[Scheduled] Stretch your legs."),
        ("assistant", "Time to stretch your legs."),
    ]


async def scheduled_in(chat, timezone: str, arguments: dict[str, Any]) -> tuple[SkaldClient, dict[str, Any]]:
    """alice, her time zone ``timezone``, asks for a reminder, and the model calls
    ``schedule_prompt`` with ``arguments``: alice, and the call as her conversation keeps
    it (its result is what the model was told)."""
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "schedule_prompt")
    alice = await chat.host.member("alice")
    assert (await alice.put("/api/me/settings", json={"timezone": timezone})).status_code == 200
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("schedule_prompt", arguments)]), Reply("Noted.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Remind me.")
        await sock.turn(cid)
    return alice, (await messages(alice, cid))[1]["tool_calls"][0]


async def test_a_one_off_prompt_in_the_past_is_refused_to_the_model_saying_what_now_is(chat):
    """A model that got the year wrong is told the time is past and what now is (in the
    member's time zone); nothing is scheduled, nothing fires."""
    alice, call = await scheduled_in(chat, "Europe/Berlin", {"prompt": "past prompt", "at": "2020-01-01T00:00:00Z"})
    assert call["status"] == "error", call
    assert call["result"].startswith("Error: the time 2020-01-01 01:00 (Europe/Berlin) is in the past: it is now "), call["result"]
    assert "(Europe/Berlin); give a time after now" in call["result"]
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    assert await runtime.store.jobs() == []


def test_the_scheduler_sleeps_until_the_next_job_and_retries_an_overdue_one_after_a_pause():
    soon = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert 25 < seconds_until(soon) <= 30
    assert seconds_until(None) == SCHEDULER_MAX_SLEEP
    assert seconds_until("2099-01-01T00:00:00.000000Z") == SCHEDULER_MAX_SLEEP  # the clock may move meanwhile
    assert seconds_until("2000-01-01T00:00:00.000000Z") == SCHEDULER_RETRY_SECONDS  # its delivery failed: no busy loop
    assert seconds_until("not a time") == SCHEDULER_RETRY_SECONDS


async def test_a_one_off_prompt_is_confirmed_to_the_model_in_the_members_time_zone(chat):
    """The model passes the confirmation on: a member in Tokyo was told her reminder was
    "Scheduled for 2026-12-05T15:16:51.117172Z" (a probe). It names her zone, to the minute."""
    _, call = await scheduled_in(chat, "Asia/Tokyo", {"prompt": "Call mum.", "at": "2099-03-01T10:30:00+01:00"})
    assert call["status"] == "done", call
    assert call["result"].startswith("Scheduled for 2099-03-01 18:30 (Asia/Tokyo) (job "), call["result"]


async def test_a_scheduled_run_whose_answer_failed_reads_failed_and_an_answered_one_done(chat):
    """The Schedules page shows each job's last result: a run whose model call failed
    is "failed" there, as its answer is in the conversation (it read "done": the prompt
    had been delivered); the next run, answered, is "done" again."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    try:
        schedules.clock.set(dt.datetime(2026, 7, 1, 12, 1, tzinfo=dt.timezone.utc))
        response = await alice.post("/api/schedules", json={"prompt": "Check the weather.", "every": "*/5 * * * *"})
        assert response.status_code == 201, response.text
        cid = response.json()["conversation_id"]
        chat.server.script(MODEL_A, [ScriptedError(500, "the provider is down", should_retry=False), Reply("Sunny.")])

        async def last_result() -> Any:
            job = (await alice.get("/api/schedules")).json()["jobs"][0]
            return (job["last_status"], job["runs"], job["status"])

        schedules.clock.set(dt.datetime(2026, 7, 1, 12, 5, 1, tzinfo=dt.timezone.utc))
        await runtime.deliver_due_jobs()
        assert await eventually(lambda: _when(last_result, ("failed", 1, "pending")), what="the failed run") == ("failed", 1, "pending")
        assert [(m["role"], m["status"]) for m in await messages(alice, cid)][-1] == ("assistant", "error")

        schedules.clock.set(dt.datetime(2026, 7, 1, 12, 10, 1, tzinfo=dt.timezone.utc))
        await runtime.deliver_due_jobs()
        await eventually(lambda: _answered(alice, cid, "Sunny."), what="the second run's answer")
        await asyncio.sleep(0.3)  # its turn has ended: nothing to change, it stays done
        assert await last_result() == ("done", 2, "pending")
    finally:
        schedules.clock.set(None)


async def _when(read, wanted):
    value = await read()
    return value if value == wanted else None


async def _answered(client: SkaldClient, cid: str, text: str) -> bool:
    return any(m["role"] == "assistant" and m["content"] == text and m["status"] == "complete" for m in await messages(client, cid))


async def test_a_scheduled_run_whose_answer_a_stop_cut_reads_failed_when_the_resumed_answer_fails(chat, skald):
    """A stop of the server (or a crash) while a delivered prompt's answer streams ended
    the watch that marks a failed answer: the run read "done" over an answer that, asked
    again after the restart, failed. Recovery watches it again."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.get(alice.member["id"]))
    chat.server.script(MODEL_A, [Hang(text="half a forecast", token_delay=0.01)])
    async with ChatSocket(alice) as sock:
        job_id = await runtime.store.schedule(cid, "Check the weather.", "2000-01-01T00:00:00.000000Z")  # due: delivered at once
        await sock.wait_event(cid, "token", delta=" forecast")
    assert (await alice.get("/api/schedules")).json()["jobs"][0]["last_status"] == "done"
    await chat.host.stop()

    chat.server.script(MODEL_A, [ScriptedError(500, "the provider is down", should_retry=False)])
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")

    async def last_result() -> Any:
        job = (await alice.get("/api/schedules")).json()["jobs"][0]
        return (job["id"], job["last_status"], job["runs"], job["status"])

    assert await eventually(lambda: _when(last_result, (job_id, "failed", 1, "failed")), what="the resumed run's failure")
    assert [(m["role"], m["status"]) for m in await messages(alice, cid)][-1] == ("assistant", "error")

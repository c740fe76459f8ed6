"""Recurring scheduled prompts end to end (issue 22 point 6): a real host, the member's
real SQLCipher file, the scripted model, and the scheduler's clock set by the test
(``skald_host.core.schedules.clock``) — the one thing the host cannot wait for is a
change of daylight saving time.

Checked here: a job fires on time across the DST changes of Europe/Berlin; it is not
delivered twice after a restart that came between storing its prompt and writing its
next occurrence; after downtime (or while the member was locked) it runs once, not
once per missed occurrence; a job from before the migration still runs; the agent's
tools create, list, change and delete jobs, with approval for all but listing; nothing
of a job's text reaches system.db or the log."""

from __future__ import annotations

import datetime as dt
import logging
import uuid

import pytest

from skald_host.core import schedules
from skald_host.core.agent.store import ConversationStore
from skald_host.core.schedules import service
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.testing import Reply, ToolCall

from .support import ChatSocket, configure_models, eventually, messages, new_conversation

UTC = dt.timezone.utc
BERLIN = "Europe/Berlin"


def utc(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


@pytest.fixture(autouse=True)
def reset_clock():
    yield
    schedules.clock.set(None)


async def runtime_of(chat, client):
    return await chat.host.core.chat.runtime(await chat.host.core.users.get(client.member["id"]))


def scheduled(transcript, prompt):
    return [m for m in transcript if m["role"] == "user" and m["content"] == f"[Scheduled] {prompt}"]


async def test_a_daily_job_fires_on_time_across_spring_forward_and_not_twice_after_a_restart(chat, skald):
    await configure_models(chat.admin, chat.server)
    chat.server.responder = lambda request: Reply("Good morning.")
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    rt = await runtime_of(chat, alice)
    schedules.clock.set(utc(2026, 3, 28, 12))  # Saturday; the clocks go forward on Sunday 02:00
    job = await service.create(rt.store, cid, "Morning briefing.", every="every day at 8", timezone=BERLIN)
    assert (job["cron"], job["phrase"], job["next_run"]) == ("0 8 * * *", "every day at 8", "2026-03-29T06:00:00.000000Z")

    async with ChatSocket(alice) as sock:
        schedules.clock.set(utc(2026, 3, 29, 5, 59, 59))  # 07:59:59 CEST: not yet
        assert await rt.deliver_due_jobs() == 0
        schedules.clock.set(utc(2026, 3, 29, 6, 0, 1))  # 08:00 CEST, the first summer morning
        assert await rt.deliver_due_jobs() == 1
        await sock.wait_event(cid, "turn_finished")
    job = (await service.listing(rt.store))[0]
    assert (job["next_run"], job["last_status"], job["runs"], job["status"]) == ("2026-03-30T06:00:00.000000Z", "done", 1, "pending")

    # Monday's run: the prompt is stored, then the process dies before the next
    # occurrence is written. That is what the row looks like afterwards:
    schedules.clock.set(utc(2026, 3, 30, 6, 0, 2))
    async with ChatSocket(alice) as sock:
        occurrence = "2026-03-30T06:00:00.000000Z"
        await rt.store.set_job(job["id"], "running")
        await rt.send(cid, "[Scheduled] Morning briefing.", f"job:{job['id']}:{occurrence}", unattended=True)
        await sock.wait_event(cid, "turn_finished", start=len(sock.events))
    assert (await rt.store.job(job["id"]))["due_at"] == occurrence

    await chat.host.stop()
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=["chatprobe"])
    alice = await host.member("alice")  # the unlock starts her schedule: the job is due again

    async def moved_on():
        jobs = (await alice.get("/api/schedules")).json()["jobs"]
        return jobs[0]["next_run"] if jobs[0]["next_run"] != occurrence and jobs[0]["status"] == "pending" else None

    assert await eventually(moved_on, what="the job moving on to Tuesday") == "2026-03-31T06:00:00.000000Z"
    transcript = await messages(alice, cid)
    assert len(scheduled(transcript, "Morning briefing.")) == 2  # Sunday's and Monday's, Monday's once


async def test_fall_back_a_repeated_time_runs_once(chat):
    await configure_models(chat.admin, chat.server)
    chat.server.responder = lambda request: Reply("Done.")
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    rt = await runtime_of(chat, alice)
    schedules.clock.set(utc(2026, 10, 24, 12))  # the clocks go back on Sunday 25 October, 03:00 CEST → 02:00 CET
    job = await service.create(rt.store, cid, "Night check.", every="30 2 * * *", timezone=BERLIN)
    assert job["next_run"] == "2026-10-25T00:30:00.000000Z" and job["phrase"] is None  # 02:30 CEST, its first passing
    async with ChatSocket(alice) as sock:
        schedules.clock.set(utc(2026, 10, 25, 0, 30, 1))
        assert await rt.deliver_due_jobs() == 1
        await sock.wait_event(cid, "turn_finished")
        schedules.clock.set(utc(2026, 10, 25, 1, 30, 1))  # 02:30 CET, the same wall-clock time again
        assert await rt.deliver_due_jobs() == 0
    assert (await service.listing(rt.store))[0]["next_run"] == "2026-10-26T01:30:00.000000Z"  # Monday 02:30 CET
    assert len(scheduled(await messages(alice, cid), "Night check.")) == 1


async def test_a_member_locked_through_three_occurrences_gets_one_run_at_unlock_then_the_schedule(chat):
    """Locked, the member's file cannot be read: nothing of theirs runs. Their next
    unlock starts their schedule without their opening a chat, and the missed mornings
    collapse into one run (the catch-up rule)."""
    await configure_models(chat.admin, chat.server)
    chat.server.responder = lambda request: Reply("Caught up.")
    alice = await chat.host.member("alice")
    member_id = alice.member["id"]
    cid = await new_conversation(alice)
    rt = await runtime_of(chat, alice)
    schedules.clock.set(utc(2026, 5, 3, 12))  # Sunday
    job = await service.create(rt.store, cid, "Plan the day.", every="every weekday at 8", timezone=BERLIN)
    assert job["next_run"] == "2026-05-04T06:00:00.000000Z"
    assert (await alice.post("/api/auth/logout")).status_code == 200
    assert not chat.host.core.users.is_unlocked(member_id)

    schedules.clock.set(utc(2026, 5, 7, 8))  # Thursday 10:00 CEST: Monday to Thursday were missed
    alice = await chat.host.member("alice")  # logs in, asks nothing else

    def delivered():
        db = chat.host.core.users.owner_db(member_id)
        return db is not None and chat.host.core.chat.live_runtime(member_id) is not None

    await eventually(delivered, what="the runtime started at unlock")
    store = chat.host.core.chat.live_runtime(member_id).store

    async def moved_on():
        rows = await service.listing(store)
        return rows[0] if rows[0]["next_run"] != "2026-05-04T06:00:00.000000Z" and rows[0]["status"] == "pending" else None

    after = await eventually(moved_on, what="the catch-up run")
    assert (after["next_run"], after["runs"], after["last_status"]) == ("2026-05-08T06:00:00.000000Z", 1, "done")  # Friday
    await eventually(lambda: _settled(alice, cid), what="the catch-up turn")
    assert len(scheduled(await messages(alice, cid), "Plan the day.")) == 1


async def _settled(client, cid):
    transcript = await messages(client, cid)
    return transcript and transcript[-1]["role"] == "assistant" and transcript[-1]["status"] == "complete"


async def test_a_one_shot_row_from_before_the_migration_still_runs(tmp_path):
    """A member file at the schema before recurring prompts, with a one-shot row in it,
    opened by this version: the row is a one-shot prompt, due, listed, and delivered."""
    ours = next(step for step in OWNER_MIGRATIONS.steps if step.description.startswith("recurring scheduled prompts"))
    before = OWNER_MIGRATIONS.before(ours.version)
    path, key = tmp_path / "member.db", b"k" * 32
    old = await Database.open(path, key=key, migrations=before, create=True)
    # Rows as that version wrote them, in plain SQL: today's store writes columns that
    # later steps added.
    cid = "oldconversation1"
    await old.transaction(
        lambda c: (
            c.execute("INSERT INTO conversations (id, agent_id, title) VALUES (?, 'assistant', 'old')", (cid,)),
            c.execute(
                "INSERT INTO scheduled_jobs (id, conversation_id, prompt, due_at) VALUES ('oldjob01', ?, 'Feed the cat.', '2026-01-01T08:00:00.000000Z')",
                (cid,),
            ),
            # One that had fired already: it ran once (read "not run yet" before step 16).
            c.execute(
                "INSERT INTO scheduled_jobs (id, conversation_id, prompt, due_at, status, finished_at)"
                " VALUES ('oldjob02', ?, 'Water the plants.', '2025-12-01T08:00:00.000000Z', 'done', '2025-12-01T08:00:03.000000Z')",
                (cid,),
            ),
        )
    )
    await old.close()

    db = await Database.open(path, key=key, migrations=OWNER_MIGRATIONS, create=False)
    try:
        store = ConversationStore(db)
        due = await store.due_jobs("2026-06-01T00:00:00.000000Z")
        assert [(j["id"], j["cron"], j["paused"], j["status"]) for j in due] == [("oldjob01", None, 0, "pending")]
        listed = {job["id"]: job for job in await service.listing(store)}
        assert (listed["oldjob01"]["recurring"], listed["oldjob01"]["next_run"], listed["oldjob01"]["runs"]) == (
            False, "2026-01-01T08:00:00.000000Z", 0)
        fired = listed["oldjob02"]
        assert (fired["status"], fired["runs"], fired["last_status"], fired["last_run_at"]) == ("done", 1, "done", "2025-12-01T08:00:03.000000Z")
        await store.set_job("oldjob01", "running")
        await store.set_job("oldjob01", "done")
        listed = {job["id"]: job for job in await service.listing(store)}
        ran = listed["oldjob01"]
        assert (ran["status"], ran["next_run"], ran["last_status"], ran["runs"]) == ("done", None, "done", 1)
    finally:
        await db.close()


async def test_the_agent_creates_lists_pauses_and_deletes_recurring_prompts_with_approval(chat, caplog):
    caplog.set_level(logging.DEBUG)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    canary = f"CANARY-{uuid.uuid4()}"
    schedules.clock.set(utc(2026, 1, 5, 9))  # Monday 10:00 CET
    listed: list[str] = []

    def respond(request):
        last_user = max(i for i, m in enumerate(request.messages) if m["role"] == "user")
        results = [m for m in request.messages[last_user:] if m["role"] == "tool"]  # this turn's
        asked = request.last_user_text or ""
        if asked.startswith("Remind"):
            if not results:
                return Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": f"Water the plants {canary}.", "every": "werktags um 7:30"})])
            return Reply("Scheduled.")
        if asked.startswith("What"):
            if not results:
                return Reply(tool_calls=[ToolCall("list_scheduled_prompts", {})])
            listed.append(results[-1]["content"])
            return Reply("Here they are.")
        job = listed[0].split()[1]  # "- <id8> [pending] …"
        if asked.startswith("Pause"):
            return Reply(tool_calls=[ToolCall("change_scheduled_prompt", {"job": job, "paused": True})]) if not results else Reply("Paused.")
        return Reply(tool_calls=[ToolCall("delete_scheduled_prompt", {"job": job})]) if not results else Reply("Deleted.")

    chat.server.responder = respond
    await alice.put("/api/me/settings", json={"timezone": BERLIN})
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Remind me to water the plants every weekday at 7:30.")
        card = await sock.wait_event(cid, "approval_required")
        assert card["name"] == "schedule_prompt"  # creating asks first (the catch-all)
        await sock.approve(card["approval_id"])
        await sock.turn(cid)
        [job] = (await alice.get("/api/schedules")).json()["jobs"]
        assert (job["cron"], job["timezone"], job["phrase"], job["next_run"]) == (
            "30 7 * * 1-5", BERLIN, "werktags um 7:30", "2026-01-06T06:30:00.000000Z",
        )

        start = len(sock.events)
        await sock.send(cid, "What is scheduled?")
        await sock.turn(cid)  # listing asks nobody (a built-in allow rule)
        assert not [e for e in sock.events[start:] if e.get("type") == "approval_required"]
        assert listed[0].startswith(f"- {job['id'][:8]} [pending] werktags um 7:30 (cron 30 7 * * 1-5, {BERLIN})")

        start = len(sock.events)
        await sock.send(cid, "Pause it.")
        card = await sock.wait_event(cid, "approval_required", start=start)
        assert card["name"] == "change_scheduled_prompt"
        await sock.approve(card["approval_id"])
        await sock.turn(cid)
        [paused] = (await alice.get("/api/schedules")).json()["jobs"]
        assert paused["paused"] is True and paused["next_run"] is None
        rt = await runtime_of(chat, alice)
        schedules.clock.set(utc(2026, 1, 6, 7))
        assert await rt.deliver_due_jobs() == 0  # paused: not delivered

        start = len(sock.events)
        await sock.send(cid, "Delete it.")
        card = await sock.wait_event(cid, "approval_required", start=start)
        assert card["name"] == "delete_scheduled_prompt"
        await sock.approve(card["approval_id"])
        await sock.turn(cid)
    assert (await alice.get("/api/schedules")).json()["jobs"] == []

    database_dir = chat.host.settings.database_dir
    for name in ("system.db", "system.db-wal"):
        if (database_dir / name).exists():
            assert canary.encode() not in (database_dir / name).read_bytes(), f"the job's text reached {name}"
    assert canary not in caplog.text

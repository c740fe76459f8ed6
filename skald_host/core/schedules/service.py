"""Creating, listing, changing and deleting a member's scheduled prompts — the one
way both the REST routes (the schedules page) and the agent's tools (through
``TurnApi``) do it, on the member's own ``ConversationStore``."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from typing import TYPE_CHECKING, Any

from skald_host.core.schedules import Phrases, Recurrence, ScheduleError, clock, following, iso, parse_iso, zone

if TYPE_CHECKING:
    from skald_host.core.agent.store import ConversationStore

#: member_settings key of the member's time zone (an IANA name, JSON-encoded).
TIMEZONE_SETTING = "timezone"
DEFAULT_TIMEZONE = "UTC"
MAX_PROMPT = 20_000
#: Active recurring prompts a member may have: each run is a model turn.
MAX_RECURRING = 100
#: How far in the past a one-shot time may lie and still run (at once): a time the
#: member just said ("now") is a few seconds old when it arrives. Further back is a
#: mistake (a model that got the year wrong) that would fire at once, so it is refused.
PAST_GRACE = dt.timedelta(minutes=1)
log = logging.getLogger(__name__)


async def member_timezone(store: "ConversationStore") -> str | None:
    """The member's own time zone setting (their private file), or None if unset or unusable."""
    row = await store.db.run(lambda c: c.execute("SELECT value FROM member_settings WHERE key = ?", (TIMEZONE_SETTING,)).fetchone())
    if row is None:
        return None
    try:
        name = json.loads(row[0])
        zone(name)
    except (ValueError, ScheduleError):
        return None
    return name


async def _zone_name(store: "ConversationStore", timezone: str | None) -> str:
    if timezone is not None and str(timezone).strip():
        zone(timezone)
        return str(timezone).strip()
    return await member_timezone(store) or DEFAULT_TIMEZONE


def check_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ScheduleError("the prompt must be non-empty text", code="prompt_empty")
    if len(prompt) > MAX_PROMPT:
        raise ScheduleError(f"the prompt is longer than {MAX_PROMPT} characters", code="too_long", limit=MAX_PROMPT)
    return prompt


def summary(job: dict[str, Any], member_zone: str | None = None) -> dict[str, Any]:
    """What the page and the tools show of a job. ``next_run`` is None once a one-shot
    prompt ran (or a job stopped) and while a job is paused; ``next_run_local`` is it as
    the member reads it (``local_time`` in ``member_zone``, their saved zone; without
    one a recurring job's own, else UTC), what the model tells them rather than a UTC
    instant; ``last_run_local`` the same of ``last_run_at``. Every job's times are told
    in one zone: a member in Berlin read a one-shot in Berlin time beside recurring
    jobs in UTC. A recurring job still names its own zone (``timezone``): its schedule
    runs on that wall clock."""
    reading = member_zone or job.get("timezone") or DEFAULT_TIMEZONE
    active = job["status"] in ("pending", "running")
    next_run = job["due_at"] if active and not job["paused"] else None
    return {
        "id": job["id"],
        "prompt": job["prompt"],
        "conversation_id": job["conversation_id"],
        "conversation_title": job.get("conversation_title") or "",
        "recurring": bool(job["cron"]),
        "cron": job["cron"],
        "phrase": job.get("phrase"),
        "timezone": job.get("timezone"),
        "paused": bool(job["paused"]),
        "status": job["status"],
        "next_run": next_run,
        "next_run_local": local_time(parse_iso(next_run), reading) if next_run else None,
        "last_run_at": job.get("last_run_at"),
        "last_run_local": local_time(parse_iso(job["last_run_at"]), reading) if job.get("last_run_at") else None,
        "last_status": job.get("last_status"),
        "runs": job.get("runs") or 0,
        "created_at": job["created_at"],
    }


async def check_room(store: "ConversationStore") -> None:
    """Refuse a new recurring prompt beyond ``MAX_RECURRING`` active ones."""
    active = await store.db.run(
        lambda c: c.execute("SELECT count(*) FROM scheduled_jobs WHERE cron IS NOT NULL AND status IN ('pending', 'running')").fetchone()[0]
    )
    if active >= MAX_RECURRING:
        raise ScheduleError(f"at most {MAX_RECURRING} recurring prompts; delete one first", code="schedules_too_many", limit=MAX_RECURRING)


async def create(
    store: "ConversationStore", conversation_id: str, prompt: str, *, at: str | None = None, every: str | None = None,
    timezone: str | None = None, grammar: Phrases | None = None,
) -> dict[str, Any]:
    """A one-shot prompt at ``at`` (ISO 8601, UTC) or a recurring one ``every`` (cron
    or phrase, read with ``grammar``: ``schedules.phrases(core.strings)``) in
    ``timezone`` (default: the member's own, else UTC)."""
    prompt = check_prompt(prompt)
    if every is not None:
        name = await _zone_name(store, timezone)
        recurrence = Recurrence.parse(every, name, grammar)
        await check_room(store)
        first = recurrence.next_after(clock.now())
        phrase = " ".join(every.split()) if " ".join(every.split()) != recurrence.cron else None
        job_id = await store.schedule(conversation_id, prompt, iso(first), cron=recurrence.cron, timezone=name, phrase=phrase)
    else:
        if not at:
            raise ScheduleError("say when: a time, or how often", code="recurrence_invalid")
        job_id = await store.schedule(conversation_id, prompt, iso(await _not_past(store, parse_iso(at))))
    job = await store.job(job_id)
    assert job is not None
    return summary(job, await _member_zone(store))


def local_time(when: dt.datetime, name: str) -> str:
    """``when`` as the member reads it: wall-clock minutes in the zone ``name``, and the
    zone's name ("2026-12-06 00:16 (Asia/Tokyo)"). One form for what the model is told of
    a one-shot time (its confirmation, a refusal), as a recurring job names its zone."""
    return f"{when.astimezone(zone(name)):%Y-%m-%d %H:%M} ({name})"


async def _member_zone(store: "ConversationStore") -> str | None:
    """The member's own zone, None if they set none (``summary`` then reads a job in its
    own zone, else UTC)."""
    return await member_timezone(store)


async def _not_past(store: "ConversationStore", due: dt.datetime) -> dt.datetime:
    """``due``, unless it lies more than ``PAST_GRACE`` before now: refused saying both
    times in the member's time zone (UTC if they set none), so whoever asked (the
    model, the member) can tell what is wrong and pick a time after now."""
    now = clock.now()
    if due >= now - PAST_GRACE:
        return due
    name = await member_timezone(store) or DEFAULT_TIMEZONE
    local = zone(name)
    asked, current = (f"{t.astimezone(local):%Y-%m-%d %H:%M}" for t in (due, now))
    raise ScheduleError(
        f"the time {local_time(due, name)} is in the past: it is now {local_time(now, name)}; give a time after now",
        code="schedule_in_past", at=asked, now=current, timezone=name,
    )


async def listing(store: "ConversationStore") -> list[dict[str, Any]]:
    member_zone = await _member_zone(store)
    return [summary(job, member_zone) for job in await store.jobs()]


async def find(store: "ConversationStore", job_id: str) -> dict[str, Any]:
    job = await store.job(job_id) if isinstance(job_id, str) else None
    if job is None:
        raise ScheduleError("no such scheduled prompt", code="not_found")
    return job


async def change(
    store: "ConversationStore", job_id: str, *, prompt: str | None = None, every: str | None = None,
    timezone: str | None = None, paused: bool | None = None, grammar: Phrases | None = None,
) -> dict[str, Any]:
    """Edit a job. A new schedule, time zone or a resume starts from now: the next
    occurrence after this moment (a paused stretch is not missed, so it is not caught up)."""
    job = await find(store, job_id)
    changes: dict[str, Any] = {}
    if prompt is not None:
        changes["prompt"] = check_prompt(prompt)
    now = clock.now()
    if every is not None or timezone is not None:
        if not job["cron"] and every is None:
            raise ScheduleError("a one-shot prompt has no time zone to change; give it a schedule with 'every'", code="recurrence_invalid")
        name = await _zone_name(store, timezone if timezone is not None else job["timezone"])
        if every is not None:
            recurrence = Recurrence.parse(every, name, grammar)
            text = " ".join(every.split())
            phrase = text if text != recurrence.cron else None
        else:  # the schedule stays as it was read (its phrase's words may have left with a plugin's language)
            recurrence, phrase = Recurrence.parse(job["cron"], name), job["phrase"]
        changes.update(cron=recurrence.cron, timezone=name, phrase=phrase, due_at=iso(_next_from_now(recurrence, job, now)), status="pending")
    if paused is not None and bool(paused) != bool(job["paused"]):
        changes["paused"] = 1 if paused else 0
        if not paused and job["cron"] and "due_at" not in changes:
            changes["due_at"] = iso(_next_from_now(Recurrence(job["cron"], job["timezone"] or DEFAULT_TIMEZONE), job, now))
    if changes:
        await store.update_job(job["id"], changes)
    fresh = await store.job(job["id"])
    assert fresh is not None
    return summary(fresh, await _member_zone(store))


def _next_from_now(recurrence: Recurrence, job: dict[str, Any], now: dt.datetime) -> dt.datetime:
    """The next occurrence after ``now`` for a job resumed or edited now: the runtime's
    own rule (``following``) from the time it last ran, so a local time it already ran
    at is not run again when the clocks go back (paused and resumed in the repeated
    hour, 02:30 would come round a second time)."""
    last = job.get("last_run_at")
    if not last:
        return recurrence.next_after(now)
    return following(recurrence, parse_iso(last), now)


async def delete(store: "ConversationStore", job_id: str) -> None:
    job = await find(store, job_id)
    await store.delete_job(job["id"])


def preview(every: str, timezone: str, count: int = 3, grammar: Phrases | None = None) -> dict[str, Any]:
    recurrence = Recurrence.parse(every, timezone, grammar)
    return {"cron": recurrence.cron, "timezone": recurrence.timezone, "next_runs": [iso(t) for t in recurrence.upcoming(clock.now(), count)]}


class StartAtUnlock:
    """A member's scheduled prompts run in their runtime, which otherwise starts at
    their first chat: at unlock, a member with an active scheduled prompt gets it
    started (in the background; the login does not wait). While a member is locked
    nothing of theirs can run — their file cannot be read — so this is where the
    catch-up rule applies after they were away: each job runs once, then on schedule."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self._tasks: set[asyncio.Task[None]] = set()

    async def after_unlock(self, member_id: str) -> None:
        if self.core.safe_mode:
            return  # scheduled prompts wait for a normal start (``Skald.safe_mode``)
        task = asyncio.create_task(self._start(member_id), name=f"schedules-at-unlock:{member_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start(self, member_id: str) -> None:
        try:
            db = self.core.users.owner_db(member_id)
            if db is None:
                return
            active = await db.run(
                lambda c: c.execute("SELECT 1 FROM scheduled_jobs WHERE status IN ('pending', 'running') AND paused = 0 LIMIT 1").fetchone()
            )
            if active is not None:
                await self.core.chat.runtime(await self.core.users.get(member_id))
        except Exception:
            if not self.core.users.is_unlocked(member_id):
                return  # locked again meanwhile (a quick logout): the next unlock starts them
            log.exception("member %s: scheduled prompts could not be started at unlock", member_id)

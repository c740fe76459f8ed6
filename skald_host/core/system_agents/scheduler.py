"""The one scheduler of system agents (seed 000).

Its wake-up decides nothing: ``base_tick`` only picks how often it looks, and whether an
agent runs for a member is read from persisted state (``system_agent_state`` in their
file; ``system_agent_coverage`` for a review), so a weekly agent comes due after a
reboot. Single-instance per agent (one pass of an agent at a time, its members in
order), which is what makes the crash sweep safe; the agents' passes run side by side
(``system_agents.concurrent_agents`` at most), each run under a time limit
(``system_agents.run_timeout_seconds``): one hung agent held the one scheduler, every
member's and every plugin's agents, until a restart. ``clock`` is what tests move.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Literal, Mapping

from skald_hookspecs.system_agents import Report
from skald_host.core.identity.users import Member, MemberError
from skald_host.core.storage import Database
from skald_host.core.agent.definitions import AgentError
from skald_host.core.plugins.failures import PLUGIN_EXITS, record_failure
from skald_host.core.plugins.manager import PluginError
from skald_host.core.system_agents import store
from skald_host.core.system_agents.registry import AgentRegistry, RegisteredAgent
from skald_host.core.system_agents.timing import Clock, iso, most_recent_occurrence, parse_iso, system_clock
from skald_host.core.system_agents.transcript import conversation_window, render

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

#: How far back ``transcript()`` reaches when its pass was given no start (a review's
#: pass always is: its coverage, or the naming of its latest supervisor).
FIRST_WINDOW = dt.timedelta(days=1)
RUNS_SHOWN = 200
#: The agent's pass under way in this task (a token, set by ``_agent_pass``): its runs'
#: failures are one problem on the plugin's page (``record_failure``'s ``one_pass``),
#: not one per member. A context variable, as each pass is a task of its own and the
#: runs are several calls below it; a run outside a pass has none, and is listed alone.
_THIS_PASS: contextvars.ContextVar[object | None] = contextvars.ContextVar("system_agent_pass", default=None)
#: A pass that failed is tried again this long after, doubling with each failure in a
#: row, never later than the agent would come due anyway (its interval; a review's next
#: night): a model that is down is not asked every few minutes, each ask a billed
#: request and a failed row, and a weekly agent does not wait a week for a hiccup.
FIRST_RETRY = dt.timedelta(hours=1)
#: A pass that found no work does not start the interval (work that appears just after
#: it is done within this, not an interval later), and ``has_work`` is asked no more
#: often than this (or the interval, if shorter).
IDLE_RECHECK = dt.timedelta(hours=1)


def retry_delay(failures: int, cap: dt.timedelta) -> dt.timedelta:
    """How long after its ``failures``-th failure in a row a pass is tried again."""
    return min(cap, FIRST_RETRY * 2 ** min(max(failures - 1, 0), 20))


#: The model's failures a run names by the chat's own code (``error.<code>``), with the
#: values its words need and nothing else: never the provider's words (``reason``,
#: ``detail``), which may quote what was sent.
MODEL_FAILURES = {
    "model_unreachable": "it could not be reached",
    "model_timeout": "it did not answer in time",
    "model_refused": "it refused the request",
    "model_stream_broke": "its answer broke off",
    "model_malformed": "its answer could not be read",
}
#: Any other failure of the model, or an answer with no words.
NO_ANSWER = "model_no_answer"
#: ``model_refused`` with a 5xx status: the provider failed, it did not refuse (the
#: chat's code covers every status; a run's words and code tell the two apart).
PROVIDER_FAILED = "model_provider_failed"


class TurnFailed(RuntimeError):
    """A system agent's turn ended without an answer for a reason the host knows (no
    model is configured, the model failed): ``code`` and ``values`` say it in the
    member's language (``error.<code>``), as the chat does. A ``RuntimeError``, as the
    failure was before: an agent that catches that still does."""

    def __init__(self, message: str, code: str, values: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values = dict(values or {})


def turn_failure(answer: Mapping[str, Any] | None) -> RuntimeError:
    """Why a turn whose last answer row is ``answer`` gave no answer: a ``TurnFailed``
    for what the host recorded a reason for, else a plain ``RuntimeError`` (unexpected:
    its error id leads to the traceback)."""
    if answer is None:
        return RuntimeError("the model gave no answer")
    reason = answer.get("reason") if isinstance(answer.get("reason"), dict) else {}
    code = str(reason.get("code") or "")
    if answer.get("status") == "complete":
        return TurnFailed("the model gave no answer", NO_ANSWER)
    if answer.get("status") != "error" or not code:
        return RuntimeError("the model gave no answer")
    if code == "no_model":
        return TurnFailed("no model is configured", "no_model")
    if code in MODEL_FAILURES:
        values: dict[str, Any] = {}
        status = (reason.get("values") or {}).get("status")
        if code == "model_refused" and isinstance(status, int) and status >= 500:
            return TurnFailed(f"the model failed: its provider failed (HTTP {status})", PROVIDER_FAILED, {"status": status})
        if code == "model_refused":
            values = {"status": status if isinstance(status, int) else "?", "reason": ""}
        words = MODEL_FAILURES[code] + (f" (HTTP {values['status']})" if values else "")
        return TurnFailed(f"the model failed: {words}", code, values)
    if code.startswith("model_"):
        return TurnFailed("the model failed", NO_ANSWER)
    return RuntimeError("the model gave no answer")


def _stored_error(code: str, values: Mapping[str, Any], text: str) -> str:
    """A known failure as the run row keeps it: its words and its code, read back by
    ``runs_of`` (a plain text, the error id of an unexpected one, is kept as it is)."""
    return json.dumps({"code": code, "values": dict(values), "text": text}, ensure_ascii=False)


def _error_view(row: dict[str, Any]) -> None:
    """``error`` as words, with ``error_code`` and ``error_values`` for the page to say
    them in the reader's language (null: it has only the words)."""
    error, code, values = row.get("error"), None, {}
    if isinstance(error, str) and error.startswith("{"):
        try:
            stored = json.loads(error)
            error, code, values = str(stored["text"]), str(stored["code"]), dict(stored.get("values") or {})
        except (ValueError, KeyError, TypeError):
            pass
        status = values.get("status")
        if code == "model_refused" and isinstance(status, int) and status >= 500:
            # Stored before the two were told apart: read as they are written now.
            code, error = PROVIDER_FAILED, f"the model failed: its provider failed (HTTP {status})"
    elif error == store.INTERRUPTED:
        code = "system_agent_interrupted"
    row.update(error=error, error_code=code, error_values=values)


@dataclass(frozen=True)
class Outcome:
    """What one look at one agent for one member (or subject) came to; for tests and
    the log. ``ran`` wrote a run row, and ``failed`` did when the agent's ``has_work``
    or ``run`` failed (not when the pass failed around them); the others wrote none."""

    agent_id: str
    member_id: str | None
    subject_id: str | None
    result: Literal["ran", "failed", "idle", "not_due", "locked", "no_runtime"]


class RunCancelled(Exception):
    """A run cut off by the host: it outlived ``system_agents.run_timeout_seconds``, or
    its plugin was disabled. ``code`` and ``values`` say it in the member's language."""

    def __init__(self, message: str, code: str, values: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values = dict(values or {})


class RunContext:
    """``SystemAgentContext``: one pass of one agent for one member (or subject)."""

    def __init__(
        self, scheduler: "SystemAgentScheduler", entry: RegisteredAgent, member: Member, db: Database,
        settings: Mapping[str, Any], now: dt.datetime, *, subject: Member | None = None,
        subject_db: Database | None = None, window_start: dt.datetime | None = None, locale: str = "en",
    ) -> None:
        self._scheduler, self._core, self._entry = scheduler, scheduler.core, entry
        self._locale = locale  # the member's language: their own, else the instance's
        self._member, self._db, self._subject, self._subject_db = member, db, subject, subject_db
        self.agent_id = entry.id
        self.member_id = member.id
        self.subject_id = subject.id if subject else None
        self.now = now
        self.window_start = window_start
        self.settings = dict(settings)
        self.stats: dict[str, int] = {}
        self.run_id: str | None = None
        self._memo: dict[str, Any] | None = None

    async def events(self, *, after: int = 0, limit: int = 100) -> list[Mapping[str, Any]]:
        def read(conn: Any) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT id, plugin_id, kind, data, created_at FROM plugin_events WHERE id > ? ORDER BY id LIMIT ?",
                (int(after), max(1, min(int(limit), 1000))),
            )
            return [dict(r) | {"data": json.loads(r["data"])} for r in rows]

        return await self._db.run(read)

    async def memory_notes(self, which: Literal["private", "shared"]) -> list[Mapping[str, str]]:
        """Read-only by construction: a SELECT, and nothing here writes a note."""
        db = self._db if which == "private" else self._core.registry
        rows = await db.run(lambda c: c.execute("SELECT key, content FROM memory_docs ORDER BY key").fetchall())
        root = "user-memory" if which == "private" else "shared-memory"
        return [{"path": f"{root}/{r[0]}", "content": r[1]} for r in rows]

    async def transcript(self) -> str:
        if self._subject is None or self._subject_db is None:
            return ""
        start = iso(self.window_start or self.now - FIRST_WINDOW)
        rows = await self._subject_db.run(lambda c: conversation_window(c, start, iso(self.now)))
        self.stats["messages"] = len(rows)
        return render(rows, self._subject.display_name or self._subject.username)

    async def subject_profile(self) -> str:
        if self._subject is None:
            return ""
        from skald_host.core.agent.runtime import render_profile

        language = self._subject.locale or await self._core.default_locale()
        return render_profile(self._subject, "About the member whose conversations you review:", language)

    async def run_turn(self, agent: str, message: str, *, substitutions: Mapping[str, str] | None = None) -> str:
        return await self._scheduler.run_ephemeral_turn(self._member, self._entry, agent, message, substitutions or {})

    async def notify(self, text: str) -> None:
        await self._core.notify_member(self.member_id, text)

    async def file_report(self, report: Report, *, kind: str) -> str:
        scope = self._entry.agent.scope
        values = dict(
            kind=str(kind)[:100], agent_id=self.agent_id, run_id=self.run_id, producer_user_id=self.member_id,
            title=report.title, summary=report.summary, body=report.body,
            period_start=iso(self.window_start) if self.window_start else None, period_end=iso(self.now),
        )
        if scope == "per_member":
            return await self._db.transaction(lambda c: store.insert_report(c, audience="self", subject_user_id=self.member_id, **values))
        if scope == "per_subject":
            audience = "supervisors"
            readers = await self._core.registry.run(lambda c: store.supervisors_of(c, self.subject_id))
        else:
            audience = "admins"
            readers = [m.id for m in await self._core.users.list() if m.active and m.is_admin]
        meta = {k: v for k, v in values.items() if k not in ("title", "summary", "body")}
        return await self._core.reports.file_shared(audience, readers, report, subject_user_id=self.subject_id, **meta)

    async def memo_get(self, key: str) -> Any:
        if self._memo is None:
            self._memo = await self._db.run(lambda c: store.memo(c, self.agent_id))
        return self._memo.get(key)

    async def memo_set(self, key: str, value: Any) -> None:
        if self._memo is None:
            self._memo = await self._db.run(lambda c: store.memo(c, self.agent_id))
        self._memo[key] = value
        memo = dict(self._memo)
        await self._db.transaction(lambda c: store.set_memo(c, self.agent_id, memo, iso(self.now)))

    def translate(self, key: str, **values: Any) -> str:
        own = f"{self._entry.plugin_id}."
        key = key if key.startswith(own) else own + key
        self._core.strings.asked_for(key)
        return self._core.strings.translate(key, self._locale, **values)


class SystemAgentScheduler:
    def __init__(self, core: "Skald", registry: AgentRegistry, clock: Clock = system_clock) -> None:
        self.core = core
        self.registry = registry
        self.clock = clock
        self._pass = asyncio.Lock()  # one pass at a time: the loop's and a test's never overlap
        self._swept: set[tuple[str, str]] = set()
        #: Run rows a pass of this process has open: any other ``running`` row was cut
        #: off by a stop, and reads as the sweep will write it.
        self._live_runs: set[str] = set()
        #: When this process began (its recovery): a run a stop cut off ended before it,
        #: and is said to have ended then — not at the agent's next pass, which may be
        #: long after (its run would read as running until then).
        self._began = iso(system_clock())
        #: (agent, member) skips already logged: one INFO line when a member is found
        #: locked, not one per pass while they stay locked.
        self._skips_logged: set[tuple[str, str]] = set()
        self.wake = asyncio.Event()
        #: Each agent's pass still under way (agent id -> task): a pass is not started
        #: again beside itself, and ``cancel_runs`` finds a plugin's.
        self._passes: dict[str, asyncio.Task[list[Outcome]]] = {}
        #: The tasks of runs under way, by plugin, and why the host cut off each it cut.
        self._runs: dict[str, set[asyncio.Task[Any]]] = {}
        self._cut: dict[asyncio.Task[Any], RunCancelled] = {}
        #: Files a run is using now: their ephemeral conversations are swept only when
        #: none is (another agent's live ``run_turn`` has one there).
        self._busy_dbs: dict[str, int] = {}
        self._slots = asyncio.Semaphore(max(1, core.settings.system_agents.concurrent_agents))

    @property
    def run_timeout(self) -> float:
        return float(self.core.settings.system_agents.run_timeout_seconds)

    def cancel_runs(self, plugin_id: str, reason: str = "disabled") -> int:
        # ``reason`` is the log's and the plugin page's (English, as the host's words
        # there are); the run row says it by its code, in the reader's language.
        """Cut off the plugin's runs under way (its plugin was disabled or stopped): each
        is recorded as failed with that reason, and its agents' passes go on to nothing
        more (``registry.enabled`` says no). How many were cut."""
        tasks = [t for t in self._runs.get(plugin_id, ()) if not t.done()]
        for task in tasks:
            self._cut[task] = RunCancelled(f"cancelled: its plugin was {reason}", "system_agent_cancelled")
            task.cancel()
        return len(tasks)

    async def _limited(self, entry: RegisteredAgent, work: Awaitable[Any], limit: float) -> Any:
        # ``limit``: what is left of the run's time (``has_work`` used some); a cut-off
        # run is said to have outlived the whole limit, the number the admin set.
        """``work`` (the agent's ``has_work`` or ``run``) in a task of its own, under
        ``limit`` seconds; ``RunCancelled`` when the limit or ``cancel_runs`` cut it off.
        Its own task, so cancelling it (the plugin disabled) ends the agent's code and
        not the pass that records the outcome."""
        task: asyncio.Task[Any] = asyncio.ensure_future(work)
        self._runs.setdefault(entry.plugin_id, set()).add(task)
        try:
            done, _ = await asyncio.wait({task}, timeout=limit)
            if not done:
                self._cut.setdefault(task, RunCancelled(
                    f"timed out after {self.run_timeout:g} s", "system_agent_timed_out", {"seconds": f"{self.run_timeout:g}"}
                ))
                task.cancel()
                await asyncio.wait({task}, timeout=5.0)  # an agent that ignores its cancellation is left behind
            cut = self._cut.pop(task, None)
            if cut is not None:
                raise cut
            return task.result()
        except asyncio.CancelledError:
            task.cancel()  # the scheduler itself is stopping: the agent's code stops too
            raise
        finally:
            self._runs.get(entry.plugin_id, set()).discard(task)
            self._cut.pop(task, None)

    # -- the loop ---------------------------------------------------------------------------

    async def run_forever(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await self.tick(wait=False)
                wait = await self.registry.base_tick()
            except Exception:
                log.exception("system agents: a pass failed")
                wait = 60.0
            self.wake.clear()
            waiters = [asyncio.ensure_future(stopping.wait()), asyncio.ensure_future(self.wake.wait())]
            try:
                await asyncio.wait(waiters, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        passes = list(self._passes.values())
        for task in passes:  # the server stops: a run it cuts off, the next start sweeps
            task.cancel()
        await asyncio.gather(*passes, return_exceptions=True)

    async def tick(self, *, wait: bool = True) -> list[Outcome]:
        """One look at every enabled agent: each agent's pass in a task of its own, side
        by side (``concurrent_agents`` at most); an agent whose last pass is still under
        way is not started again. ``wait``: return once the passes started here ended,
        with their outcomes in the agents' order (tests, ``run_system_agents``); the
        loop does not wait, so one slow agent never delays the next look at the others."""
        async with self._pass:
            members = await self.core.users.list()
            started: list[asyncio.Task[list[Outcome]]] = []
            for entry in self.registry.entries:
                if entry.id in self._passes:
                    continue
                task = asyncio.create_task(self._agent_pass(entry, members), name=f"system-agent:{entry.id}")
                self._passes[entry.id] = task
                task.add_done_callback(lambda _t, agent_id=entry.id: self._passes.pop(agent_id, None))
                started.append(task)
        if not wait or not started:
            return []
        try:
            return [outcome for outcomes in await asyncio.gather(*started) for outcome in outcomes]
        except asyncio.CancelledError:
            for task in started:
                task.cancel()
            raise

    async def _agent_pass(self, entry: RegisteredAgent, members: list[Member]) -> list[Outcome]:
        """One agent's pass over its members (or subjects, or the instance), in order.
        One that fails (its settings, a member's file) leaves the agents and members
        after it their turn."""
        outcomes: list[Outcome] = []
        # This task's own: the failures of the pass's runs fold into one problem.
        _THIS_PASS.set(object())
        async with self._slots:
            try:
                if not await self.registry.enabled(entry):
                    return outcomes
                settings = await self.registry.settings(entry)
                if entry.agent.scope == "per_member":
                    for member in members:
                        if not self.core.catalog.usable(member, entry.plugin_id):
                            # Deny by default: the plugin's code runs on the member's own
                            # file and notifies them, so only for those it is granted to (a
                            # plugin's agent ran, and wrote, for members never granted it).
                            continue
                        if await self.registry.enabled(entry):  # disabled mid-pass: the rest is not run
                            outcomes.append(await self._contained(entry, member.id, self._member_pass(entry, member, settings)))
                elif entry.agent.scope == "instance":
                    outcomes.append(await self._contained(entry, None, self._instance_pass(entry, members, settings)))
                else:
                    for subject_id in await self.core.registry.run(store.subjects):
                        if await self.registry.enabled(entry):
                            outcomes.append(await self._contained(entry, None, self._subject_pass(entry, subject_id, members, settings), subject_id))
            except Exception:
                log.exception("system agents: the pass of %s failed", entry.id)
        return outcomes

    async def join(self) -> None:
        """Wait for the agents' passes under way (each ends within its time limit)."""
        while self._passes:
            await asyncio.gather(*list(self._passes.values()), return_exceptions=True)

    async def _contained(self, entry: RegisteredAgent, member_id: str | None, step: Awaitable[Outcome], subject_id: str | None = None) -> Outcome:
        """One member's (or subject's) pass of an agent; its failure logged and counted
        as failed, not raised into the rest of the pass."""
        try:
            return await step
        except Exception:
            log.exception("system agents: the pass of %s for %s failed", entry.id, member_id or subject_id or "the instance")
            return Outcome(entry.id, member_id, subject_id, "failed")

    # -- the three scopes ---------------------------------------------------------------------

    async def _member_pass(self, entry: RegisteredAgent, member: Member, settings: dict[str, Any], *, as_instance: bool = False) -> Outcome:
        db = self.core.users.owner_db(member.id)
        if db is None:
            # The normal case, not an error: the only file that could record the skip is
            # the one that cannot be opened (seed 000).
            self._log_skip(entry.id, member.id, "system agent %s: member %s is locked; skipped")
            return Outcome(entry.id, member.id, None, "locked")
        self._skips_logged.discard((entry.id, member.id))
        now = self.clock()
        interval = self.registry.instance_interval(entry, settings) if as_instance else await self.registry.interval_for(entry, member.id, settings)
        owed = await db.run(lambda c: store.owed_after_a_stop(c, entry.id))
        last = parse_iso(await db.run(lambda c: store.last_attempt(c, entry.id)))
        retry_text, failures = await db.run(lambda c: store.retry_state(c, entry.id))
        if as_instance and not owed:
            # Once for the whole server: the attempt every admin who may act sees (a
            # timestamp in system.db), not the acting admin's own; their file's marker
            # only for a server that kept it there before.
            shared = parse_iso(await self.core.registry.run(lambda c: store.instance_last_attempt(c, entry.id)))
            shared_retry = await self.core.registry.run(lambda c: store.instance_retry_state(c, entry.id))
            if shared is not None or (shared_retry is not None and shared_retry[0]):
                last = shared if shared is not None else last
                retry_text, failures = shared_retry or (None, 0)
        looked = None if owed else parse_iso(retry_text)
        span = dt.timedelta(seconds=interval)
        if looked is not None:
            # The last pass started no interval: a failure's backoff, or an idle pass's
            # re-check, from its look (with the interval as it is now).
            due: dt.datetime | None = looked + (retry_delay(failures, span) if failures else min(span, IDLE_RECHECK))
        else:
            due = last + span if last is not None else None
        if due is not None and now < due:
            return Outcome(entry.id, member.id, None, "not_due")
        context = RunContext(self, entry, member, db, settings, now, locale=member.locale or await self.core.default_locale())
        result = await self.run_and_record(entry, context, db, mark_attempt=True, instance=as_instance)
        # How the pass ended says when the next one is due: after one that ran, the
        # interval from its attempt; after a failure, a backoff; after an idle pass, a
        # re-check (it found nothing to start an interval with).
        at = iso(now)
        looked_at, failures = (None, 0) if result == "ran" else (at, failures + 1 if result == "failed" else 0)
        await db.transaction(lambda c: store.set_retry(c, entry.id, looked_at, failures, at))
        if as_instance:
            await self.core.registry.transaction(lambda c: store.set_instance_retry(c, entry.id, looked_at, failures))
        return Outcome(entry.id, member.id, None, result)  # type: ignore[arg-type]

    async def _instance_pass(self, entry: RegisteredAgent, members: list[Member], settings: dict[str, Any]) -> Outcome:
        """Ownerless work runs as the first active unlocked admin (a stable choice), so
        its trace, notification and report land where someone can see them; its due-ness
        is the server's (system.db), so another admin acting does not run it again."""
        acting = next((m for m in members if m.active and m.is_admin and self.core.users.is_unlocked(m.id)), None)
        if acting is None:
            self._log_skip(entry.id, "", "system agent %s: no admin is logged in%s; skipped")
            return Outcome(entry.id, None, None, "no_runtime")
        self._skips_logged.discard((entry.id, ""))
        return await self._member_pass(entry, acting, settings, as_instance=True)

    async def _subject_pass(self, entry: RegisteredAgent, subject_id: str, members: list[Member], settings: dict[str, Any]) -> Outcome:
        """Iterates over subjects, not supervisors: two supervisors of one subject yield
        one review, run in whichever of them is unlocked, filed for all of them."""
        supervisors = await self.core.registry.run(lambda c: store.supervisors_of(c, subject_id))
        by_id = {m.id: m for m in members}
        acting = next((by_id[s] for s in supervisors if s in by_id and self.core.users.is_unlocked(s)), None)
        if acting is None:
            self._log_skip(entry.id, subject_id, "system agent %s: no supervisor of member %s is logged in; skipped")
            return Outcome(entry.id, None, subject_id, "no_runtime")
        now = self.clock()
        hour = settings.get("run_at_hour")
        hour = hour if isinstance(hour, int) and not isinstance(hour, bool) and 0 <= hour <= 23 else entry.run_at_hour
        due_after = most_recent_occurrence(now, hour, self.core.settings.system_agents.time_zone)
        start = await self._record_start(entry, subject_id, now, hour, due_after)
        if start >= due_after:
            # Due once the hour has passed since the record started: the first report
            # comes the night after the naming, not at the pass after it.
            return Outcome(entry.id, acting.id, subject_id, "not_due")
        waiting = await self.core.registry.run(lambda c: store.subject_retry(c, entry.id, subject_id))
        if waiting is not None and now < parse_iso(waiting[0]):  # type: ignore[operator]
            # A pass that failed waits its backoff (this subject's own, not the coverage).
            return Outcome(entry.id, acting.id, subject_id, "not_due")
        subject = by_id.get(subject_id)
        if subject is None:
            return Outcome(entry.id, acting.id, subject_id, "no_runtime")
        subject_db, opened = self.core.users.owner_db(subject_id), False
        if subject_db is None:
            try:
                subject_db, opened = await self.core.users.open_unencrypted(subject_id), True
            except MemberError:
                # Work over somebody else's history runs unattended only for a member who
                # is not encrypted, and only while they are logged in for one who is.
                self._log_skip(entry.id, subject_id, "system agent %s: member %s is locked and encrypted; skipped")
                return Outcome(entry.id, acting.id, subject_id, "locked")
        self._skips_logged.discard((entry.id, subject_id))
        acting_db = self.core.users.owner_db(acting.id)
        if acting_db is None:
            if opened:
                await subject_db.close()
            return Outcome(entry.id, acting.id, subject_id, "locked")
        try:
            context = RunContext(
                self, entry, acting, acting_db, settings, now, subject=subject, subject_db=subject_db, window_start=start,
                locale=acting.locale or await self.core.default_locale(),
            )
            result = await self.run_and_record(entry, context, acting_db, mark_attempt=False)
        finally:
            if opened:
                await subject_db.close()
        if result in ("ran", "idle"):
            # Advanced only by a completed pass (or one that found nothing to cover), so
            # a crash re-covers rather than skips.
            def covered(c: Any) -> None:
                store.set_covered_through(c, entry.id, subject_id, iso(now))
                store.set_subject_retry(c, entry.id, subject_id, None)

            await self.core.registry.transaction(covered)
        elif result == "failed":
            # The coverage stays (the next pass covers this window too); the next try
            # waits a backoff, at the latest until the next night's hour.
            failures = (waiting[1] if waiting is not None else 0) + 1
            next_night = most_recent_occurrence(due_after + dt.timedelta(hours=26), hour, self.core.settings.system_agents.time_zone)
            retry_at = iso(min(now + retry_delay(failures, next_night - now), next_night))
            await self.core.registry.transaction(lambda c: store.set_subject_retry(c, entry.id, subject_id, retry_at, failures))
        return Outcome(entry.id, acting.id, subject_id, result)  # type: ignore[arg-type]

    async def _record_start(
        self, entry: RegisteredAgent, subject_id: str, now: dt.datetime, hour: int, due_after: dt.datetime
    ) -> dt.datetime:
        """Where a review of the subject would start: its coverage, or the latest
        supervisor's naming if later (never before it: the first window used to reach a
        day back, into conversations held before the member could know). A naming the
        clock has not reached yet is not counted.

        With no coverage yet, the first pass to see the subject starts the record
        (persisted, so it is due by its hour, not at once): at the naming when that came
        after the run hour before ``due_after``, so a naming missed by one night's pass
        (no supervisor signed in) is still reviewed from the naming; otherwise at
        ``due_after``, so an agent enabled long after the naming writes its first report
        the next night, about one day, not a review at the moment it is turned on."""
        since = parse_iso(await self.core.registry.run(lambda c: store.supervised_since(c, subject_id)))
        if since is not None and since > now:
            since = None
        covered = parse_iso(await self.core.registry.run(lambda c: store.covered_through(c, entry.id, subject_id)))
        if covered is None:
            zone = self.core.settings.system_agents.time_zone
            night_before = most_recent_occurrence(due_after - dt.timedelta(seconds=1), hour, zone)
            covered = since if since is not None and since > night_before else due_after
            baseline = iso(covered)
            await self.core.registry.transaction(lambda c: store.set_covered_through(c, entry.id, subject_id, baseline))
        return max(covered, since) if since is not None else covered

    def _log_skip(self, agent_id: str, who: str, message: str) -> None:
        if (agent_id, who) not in self._skips_logged:
            self._skips_logged.add((agent_id, who))
            log.info(message, agent_id, who)

    # -- one pass ----------------------------------------------------------------------------

    async def run_and_record(
        self, entry: RegisteredAgent, context: RunContext, db: Database, *, mark_attempt: bool, instance: bool = False
    ) -> str:
        """``has_work`` (no: nothing written, or the run log becomes a heartbeat; nor is
        the attempt marked: an idle pass starts no interval) → mark the attempt (not for
        a review, whose due-ness is its coverage) → open the run row → work → finish it.
        A row left ``running`` by a crash is swept to failed before the agent's next pass
        here. The caller records what the result means for the next pass (a backoff
        after a failure, a re-check after an idle pass)."""
        started = iso(self.clock())
        key = (entry.id, str(db.path))
        if key not in self._swept:
            # Sequential and single-instance: no pass of this process is live here yet.
            swept = await db.transaction(lambda c: store.sweep_running(c, entry.id, self._began))
            if swept:
                log.warning("system agent %s: %d run(s) left running by a stop were marked failed", entry.id, swept)
            self._swept.add(key)
        path = str(db.path)
        if (path, "ephemeral") not in self._swept and not self._busy_dbs.get(path):
            if not await db.transaction(store.sweep_ephemeral):
                # Swept again at each pass until none waits for the chat's recovery any more.
                self._swept.add((path, "ephemeral"))
        self._busy_dbs[path] = self._busy_dbs.get(path, 0) + 1
        try:
            return await self._run_and_record(entry, context, db, started, mark_attempt=mark_attempt, instance=instance)
        finally:
            self._busy_dbs[path] -= 1
            if not self._busy_dbs[path]:
                del self._busy_dbs[path]

    async def _run_and_record(
        self, entry: RegisteredAgent, context: RunContext, db: Database, started: str, *, mark_attempt: bool, instance: bool
    ) -> str:
        began = asyncio.get_running_loop().time()  # ``has_work`` and ``run`` share the limit
        try:
            if entry.agent.has_work is not None and not await self._limited(entry, entry.agent.has_work(context), self.run_timeout):
                return "idle"
        except (Exception, *PLUGIN_EXITS) as exc:
            # A failed run in the member's list, as a failure of ``run`` is: the type and
            # the error id, with the hook it came from.
            if isinstance(exc, RunCancelled):
                error_id = self._record_cut(entry, exc, "has_work")
                error = _stored_error(exc.code, exc.values, f"has_work {exc} (error id {error_id})")
            else:
                error_id = record_failure(
                    self.core.plugins, entry.plugin_id, f"system agent {entry.id} (has_work)", exc, say=isinstance(exc, PluginError),
                    one_pass=_THIS_PASS.get(),
                )
                error = f"{type(exc).__name__} in has_work (error id {error_id})"

            def failed_run(c: Any) -> None:
                run_id = store.open_run(c, entry.id, context.subject_id, started)
                store.finish_run(c, run_id, "failed", iso(self.clock()), {}, error)

            await db.transaction(failed_run)
            return "failed"
        if mark_attempt:
            await db.transaction(lambda c: store.mark_attempt(c, entry.id, started))
            if instance:
                await self.core.registry.transaction(lambda c: store.mark_instance_attempt(c, entry.id, started))
        run_id = await db.transaction(lambda c: store.open_run(c, entry.id, context.subject_id, started))
        self._live_runs.add(run_id)
        try:
            context.run_id = run_id
            status, error = "done", None
            try:
                left = max(self.run_timeout - (asyncio.get_running_loop().time() - began), 0.001)
                await self._limited(entry, entry.agent.run(context), left)
            except RunCancelled as exc:
                error_id = self._record_cut(entry, exc, "run")
                status, error = "failed", _stored_error(exc.code, exc.values, f"{exc} (error id {error_id})")
            except TurnFailed as exc:
                # Not the plugin's bug (no traceback): the reason in plain words and its code.
                log.warning("system agent %s: a run for member %s failed: %s", entry.id, context.member_id, exc)
                status, error = "failed", _stored_error(exc.code, exc.values, str(exc))
            except (Exception, *PLUGIN_EXITS) as exc:
                # The type and the error id the plugin's page lists its traceback under; not
                # the message, which may quote the member's words.
                error_id = record_failure(
                    self.core.plugins, entry.plugin_id, f"system agent {entry.id}", exc, say=isinstance(exc, PluginError),
                    one_pass=_THIS_PASS.get(),
                )
                status, error = "failed", f"{type(exc).__name__} (error id {error_id})"
            stats = {k: int(v) for k, v in context.stats.items() if isinstance(v, (int, float))}
            await db.transaction(lambda c: store.finish_run(c, run_id, status, iso(self.clock()), stats, error))
        finally:
            self._live_runs.discard(run_id)
        return "ran" if status == "done" else "failed"

    def _record_cut(self, entry: RegisteredAgent, cut: RunCancelled, what: str) -> str:
        """A run the host cut off, as a problem on its plugin's page (the host's words,
        no member's data); its error id. A cancellation because the admin disabled the
        plugin is said at WARNING: the admin's act, not the plugin's fault."""
        level = logging.WARNING if cut.code == "system_agent_cancelled" else logging.ERROR
        return record_failure(
            self.core.plugins, entry.plugin_id, f"system agent {entry.id} ({what})", cut, say=True, level=level, one_pass=_THIS_PASS.get(),
        )

    async def run_ephemeral_turn(
        self, member: Member, entry: RegisteredAgent, agent_id: str, message: str, substitutions: Mapping[str, str]
    ) -> str:
        """One unattended turn of a ``kind: system`` agent in a conversation of its own
        in the acting member's file, deleted afterwards; its final assistant message."""
        # The host's own words on what the plugin asked for (no member's data in them):
        # as a PluginError the run's failure keeps them, where the agent's error was
        # withheld like a crash's and the author read only "AgentError".
        try:
            definition = self.core.chat.agents.get(agent_id)
        except AgentError as exc:
            raise PluginError(
                f"run_turn({agent_id!r}): {exc} in the host's or any plugin's agents/ folders"
                " (register_agent_dirs; in a wheel the folder must be package data)"
            ) from None
        if definition.kind != "system":
            raise PluginError(f"run_turn({agent_id!r}): agent {agent_id!r} is not a system agent (its meta.yaml needs kind: system)")
        runtime = await self.core.chat.runtime(member)
        conversation_id, _ = await runtime.store.create_conversation(agent_id, source=f"system:{entry.id}", ephemeral=True)
        runtime.prompt_substitutions[conversation_id] = dict(substitutions)
        try:
            await runtime.send(conversation_id, message, None, unattended=True)
            task = runtime.turn_task(conversation_id)
            if task is not None:
                await asyncio.shield(task)
            rows = await runtime.store.transcript(conversation_id)
            answers = [r for r in rows if r["role"] == "assistant" and r["status"] == "complete" and r["content"].strip()]
            if not answers:
                raise turn_failure(next((r for r in reversed(rows) if r["role"] == "assistant"), None))
            return answers[-1]["content"]
        finally:
            runtime.prompt_substitutions.pop(conversation_id, None)
            await runtime.discard(conversation_id)  # a request the runtime's closing cut still counts

    # -- what members read ------------------------------------------------------------------------

    async def runs_of(self, member_id: str, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The caller's own run log (no admin override: everyone sees their own)."""
        db = self.core.users.owner_db(member_id)
        if db is None:
            return []
        rows = await db.run(lambda c: store.runs(c, agent_id, RUNS_SHOWN))
        for row in rows:
            if row["status"] == "running" and row["id"] not in self._live_runs:
                # Cut off by a stop; the agent's next pass writes this same sweep.
                row.update(status="failed", error=store.INTERRUPTED, finished_at=max(row["started_at"], self._began))
            _error_view(row)
        return rows

"""Chat for the whole host (``ChatService``) and for one unlocked member
(``MemberRuntime``).

A member's runtime exists while their file is open: it is built on first use after
unlock, runs recovery then, and is closed *before* the file is (locking cancels every
turn first, so nothing queries a closed connection). One live task per conversation
serialises turns; a message arriving during a turn is queued durably and starts the
next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import functools
import json
import logging
import math
import os
import random
import time
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Mapping, Sequence

from skald_hookspecs.types import ToolError
from skald_hookspecs.events import ChatEvent, UserEvent
from skald_host.core.agent.approvals import DEACTIVATED, WITHDRAWN_REASON, ApprovalWaiters, RuleStore, raised_before_deactivation
from skald_host.core.agent.definitions import AgentCatalog, AgentDefinition, AgentError
from skald_host.core.plugins.failures import record_failure
from skald_host.core.agent.kernel import Abandoned, Kernel, NoModelConfigured, Pending, model_failure
from skald_host.core.agent.questions import Questions
from skald_host.core.agent.projection import SUMMARY_PREFIX, project, unfinished_calls
from skald_host.core.agent.store import HISTORY_CACHE_FRAMES, ConversationStore, Frame, cut_result, reason_json, title_from
from skald_host.core.agent.subagents.catalog import Generation, GenerationRefused, Skill, SubagentCatalog
from skald_host.core.agent.subagents.coordinator import CONTINUATION_ORIGIN, STEER_ORIGIN, SubagentCoordinator, TurnMailbox, continuation_agent
from skald_host.core.agent.subagents.graph import delegates_anyone
from skald_host.core.agent.subagents.limits import OrchestrationLimits
from skald_host.core.agent.tools import RegisteredTool, ToolRegistry
from skald_host.core.faults import crash_point
from skald_host.core.files.media import describe_attachments
from skald_host.core.files.paths import PathRefused
from skald_host.core.files.service import FileError
from skald_host.core.files.sniff import IMAGE_TYPES
from skald_host.core import audit, schedules
from skald_host.core.identity.access import allowed, may_start_agent
from skald_host.core.memory.notes import SHARED_ROOT, SHARED_WRITE, classify_memory
from skald_host.core.identity.users import Member, MemberNotFound, registry_time
from skald_host.core.llm.catalog import ModelCatalog, ModelChoice
from skald_host.core.llm.client import ModelClients, ModelError, ModelTurn
from skald_host.core.storage import DiskFailure, StorageError

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

#: The tool that reads an agent's skills (the agent-tools plugin registers it).
SKILL_TOOL = "get_skill"
#: The tool that delegates to named sub-agents (seed 004 §3; the agent-tools plugin's).
DELEGATE_TOOL = "execute_task"
#: The failed answer under the member's messages a Stop left unanswered (stored as
#: a failed turn's reason is; the live event's code ``stopped_unanswered`` is shown
#: in the reader's language).
#: Recovery's note where an answer was cut off (``error.answer_resumed`` in the reader's language).
RESUMED_NOTE = (
    "An answer here was cut off before it was finished (the server stopped, or your session ended);"
    " it is asked for again below, in a new request to the model."
)
#: How many times recovery asks again for one answer cut off by stops: a server that
#: dies while writing it (out of memory, a crash loop) must not bill the provider on
#: every start. The next cut ends the turn as failed, with Retry.
RESUME_LIMIT = 2
#: Request log rows the registry failed to write (its disk full), and answers a full
#: disk left streaming, are written again after these many seconds, doubling up to the
#: last; a successful write of another request log row of the member's tries at once
#: (``MemberRuntime._resend_stranded``).
RESEND_FIRST_SECONDS = 1.0
RESEND_LAST_SECONDS = 10.0
#: ``times`` counts the attempts begun, not the requests the model got: an attempt's
#: streaming row is committed before its request leaves (so that a request sent is never
#: missing from the log), and a stop between the two cannot be told from one just after
#: the send. Both are counted (the log errs toward over-counting); the wording says so.
RESUME_GIVEN_UP = (
    "This answer was cut off again while it was being written ({times} attempts in all, counting any a stop"
    " cut before it reached the model); it is not asked for again by itself, so that a server that keeps"
    " stopping does not bill the model again and again. Retry to ask again."
)
STOPPED_UNANSWERED = "Not answered: the conversation was stopped. Retry to have these messages answered."
#: The failed answer recovery writes under a turn an admin's deactivation cut (shown as
#: ``error.stopped_deactivated`` in the reader's language): the cut holds after a
#: reactivation, nothing of the turn runs by itself, the member asks again (check C5).
STOPPED_DEACTIVATED = "Stopped: your account was paused by an admin. Retry or send a message to ask again."
#: Below this much free space on the member's disk, a turn's first request waits for
#: its message to commit instead of going out beside the commit (``_room_to_write``).
OVERLAP_MIN_FREE_BYTES = 8 * 1024 * 1024
PREFIX_TTL_SECONDS = 20 * 60
PREPARE_PROMPT_SECONDS = 2.0
INJECTED_NOTE_CHARS = 16_000
#: A due job that could not be delivered is tried again after this long.
SCHEDULER_RETRY_SECONDS = 5.0
#: The longest the scheduler sleeps without looking again (the clock may be set meanwhile).
SCHEDULER_MAX_SLEEP = 300.0
COMPACT_PROMPT = (
    "Summarise the conversation so far for your own later use: the member's goals, facts and "
    "decisions, open questions, and anything you promised. Be complete but brief. Write the summary only."
)


class ChatError(ValueError, ToolError):  # a ToolError: its message is fit for the model when a tool lets it through
    """A chat request that cannot be done; the message says why in English (for the model,
    the log and old clients), ``code`` names it so a client can say it in its reader's
    language (``error.<code>`` in the locale files, with ``values``), and ``status`` is
    the HTTP answer it deserves."""

    def __init__(self, message: str, *, code: str = "chat_refused", status: int = 400, values: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.values = values or {}


class ModelUnavailable(AgentError):
    """An agent bound to one provider's model that the instance does not offer now;
    the message says which and what to do (for the model, the member and the log)."""


class ChatForbidden(ChatError):
    """The member's role does not allow it (an agent they may not start)."""

    def __init__(self, message: str, *, code: str = "agent_forbidden", values: dict[str, Any] | None = None) -> None:
        super().__init__(message, code=code, status=403, values=values)


class RequestLog:
    """Request metadata for the registry, written in batches: each round adds a row,
    and one commit (one sync of system.db) for the rows of ``GATHER_SECONDS`` beats one
    commit per row — each is a sync, a wake of the registry's thread and loop time, and
    the registry's other work (logins, model lookups on the next turn's path) queues
    behind them. A crash loses at most that long of metadata rows (usage figures, no
    member's words); closing a member's runtime writes what waits at once (``hurry``)."""

    GATHER_SECONDS = 0.2

    # A row: (id, member_id, model, status, http_status, tokens_in, tokens_out,
    # latency_ms, first_token_ms, model_id); ``model_id`` is the catalog entry asked.
    # Written with its own ``created_at`` (``add``), never the commit's: a request a
    # crash cut is logged by the recovery at the member's next sign-in, maybe days later,
    # and counts on the day it was sent (the usage page's periods).
    INSERT = (
        "INSERT INTO llm_requests"
        " (id, member_id, model, status, http_status, tokens_in, tokens_out, latency_ms, first_token_ms, model_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )

    RESTORE = (
        "INSERT OR IGNORE INTO llm_requests"
        " (id, member_id, model, status, http_status, tokens_in, tokens_out, latency_ms, first_token_ms, model_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    #: Columns of a row; an outbox entry a version before ``model_id`` wrote has one fewer.
    ROW_LENGTH = 10

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self._waiting: list[tuple[tuple[Any, ...], asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._hurry = asyncio.Event()

    def hurry(self) -> None:
        """Write what waits now rather than at the end of the gathering time."""
        self._hurry.set()

    async def flush(self) -> None:
        """Write what waits now, and return once it is written (or failed: a failure
        is its rows' own callers')."""
        if self._writer is not None and not self._writer.done():
            self.hurry()
            await asyncio.shield(self._writer)

    async def add(self, row: tuple[Any, ...], at: str) -> None:
        """Returns once the row is committed; raises what the commit raised. ``at``: the
        row's ``created_at``, as ``registry_time`` writes it."""
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(((*row, at), written))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        await written

    async def restore(self, entries: list[dict[str, Any]]) -> None:
        """Rows a member's file carried through a crash (``store.RequestOutbox``), at
        the time they were made; those the registry has already are left as they are."""
        rows = [(*e["row"], *(None,) * (self.ROW_LENGTH - len(e["row"])), e["at"]) for e in entries]
        await self.registry.transaction(lambda c: c.executemany(self.RESTORE, rows))

    async def _write(self) -> None:
        try:
            await asyncio.wait_for(self._hurry.wait(), self.GATHER_SECONDS)
        except TimeoutError:
            pass
        self._hurry.clear()
        crash_point("request_log.before_write")
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await self.registry.transaction(lambda c: c.executemany(self.INSERT, [row for row, _ in batch]), bookkeeping=True)
            except Exception as exc:  # each waiter gets the failure; the next batch tries again
                for _, written in batch:
                    if not written.done():
                        written.set_exception(exc)
            else:
                for _, written in batch:
                    if not written.done():
                        written.set_result(None)


class ChatService:
    def __init__(self, core: "Skald", tools: ToolRegistry, agents: AgentCatalog) -> None:
        self.core = core
        self.models = ModelCatalog(core.registry, core.sealer)
        self.clients = ModelClients()
        self.agents = agents
        self.tools = tools
        self.rules = RuleStore(core.registry)
        self.request_log = RequestLog(core.registry)
        self.max_rounds = core.settings.chat.max_rounds
        self.tool_timeout = core.settings.chat.tool_timeout_seconds
        self.compact_after_tokens = core.settings.chat.compact_after_tokens
        self.orchestration = OrchestrationLimits.from_settings(core.settings.subagents)
        #: Step permits of every member's sub-agent runs together (seed 004 §9).
        self.run_permits = asyncio.Semaphore(self.orchestration.max_concurrent_runs)
        self.subagent_catalog = SubagentCatalog(
            agents, lambda: [t.name for t in tools.all()], self.orchestration, known_models=lambda: self.models.known,
            plugin_refused=lambda plugin_id, errors: record_failure(
                core.plugins, plugin_id, "agent definitions", AgentError("; ".join(errors)), say=True,
            ),
        )
        self._runtimes: dict[str, MemberRuntime] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._context_providers: dict[str, Callable[[Member, str], Awaitable[str]]] = {}
        self._sources: dict[str, str] = {}

    def offers_delegation(self, agent: AgentDefinition, depth: int) -> bool:
        """Whether a frame of ``agent`` at ``depth`` (0: a conversation's own agent, 1: a
        helper its root called) is offered ``execute_task``: the one place that says so,
        for the rounds (``MemberRuntime.offered_tools``) and the Helpers page alike. Only
        an agent with tools whose patterns name ``execute_task``, that may delegate to
        someone (§2.2: ``delegates: []`` is nobody), from a frame above the deepest
        level (one deeper is refused: the coordinator). The member's role
        (``tools.delegate``) is asked as for every tool, apart from this."""
        return (agent.allow_tools and agent.offers(DELEGATE_TOOL) and delegates_anyone(agent)
                and depth < self.orchestration.max_tree_depth)

    def member_tools_offered(self, agent: AgentDefinition, member: Member) -> list[RegisteredTool]:
        """The plugins' per-member tools (the member_tools hook, spec 1.2: MCP
        connectors) a frame of ``agent`` offers ``member`` now: granted, the plugin
        running, and named by the agent's tool patterns. The one rule for the rounds
        (``MemberRuntime.offered_tools``) and for the pages that tell the member what
        their assistant can use (a companion with a fixed tool list was said to have a
        connector's tools it was never offered)."""
        if not agent.allow_tools:
            return []
        usable = functools.partial(self.core.catalog.tools_usable, member)
        own = self.core.catalog.usable_tools(member, self.tools.member_tools(member.id, usable))  # a tool's capability (spec 1.13)
        return [t for t in own if agent.offers(t.name)]

    def startable_agents(self, member: Member) -> list[AgentDefinition]:
        """The chat agents ``member`` may start a conversation with (their role's, of
        plugins they may use): the chat's agent list and the pages that say what those
        agents do for them."""
        agents = self.agents.visible_to(lambda plugin_id: self.core.catalog.usable(member, plugin_id))
        return [a for a in agents.all() if a.kind == "chat" and may_start_agent(member, a.id, a.kind)]

    def add_context_provider(self, prefix: str, provider: Callable[[Member, str], Awaitable[str]]) -> None:
        """Conversations whose source starts with ``prefix`` get ``provider(member,
        source)`` appended to their system prompt, asked every round; it raises
        AgentError to refuse the round (e.g. the member left the project)."""
        self._context_providers[prefix] = provider

    async def source_context(self, runtime: "MemberRuntime", conversation_id: str) -> str:
        if not self._context_providers:
            return ""
        source = self._sources.get(conversation_id)
        if source is None:  # a conversation's source never changes: read it once
            conversation = await runtime.store.conversation(conversation_id)
            source = self._sources[conversation_id] = (conversation or {}).get("source") or ""
        provider = next((p for prefix, p in self._context_providers.items() if source.startswith(prefix)), None)
        return await provider(runtime.member, source) if provider else ""

    async def runtime(self, member: Member) -> "MemberRuntime":
        """The member's runtime, built (and recovered) on first use after unlock."""
        lock = self._locks.setdefault(member.id, asyncio.Lock())
        async with lock:
            runtime = self._runtimes.get(member.id)
            if runtime is not None and not runtime.closed and not runtime.store.db.closed:
                # Not replaced by ``member``: a caller's copy may be older than the one
                # pushed since (a WebSocket reads its member once, at connect), and
                # every change of a member is pushed (``access_changed``).
                return runtime
            if runtime is not None and not runtime.closed:  # its file closed under it: never used again
                self._runtimes.pop(member.id, None)
                try:
                    await runtime.close()
                except Exception:  # its file is gone: what it could not write, recovery redoes
                    log.exception("closing the chat runtime of member %s after its file closed failed", member.id)
            if self.core.stopping.is_set():
                # Its turns were interrupted for the restart to resume: none starts now.
                raise ChatError("the server is stopping; try again in a moment", code="server_stopping", status=503)
            db = self.core.users.owner_db(member.id)
            if db is None or self.core.users.is_locking(member.id):
                raise ChatError("your private database is locked; log in again", code="member_locked", status=423)
            runtime = MemberRuntime(self, member, ConversationStore(db))
            self._runtimes[member.id] = runtime
            await runtime.start()
            return runtime

    async def access_changed(self, *, member_id: str | None = None, role_id: str | None = None) -> None:
        """A member's role, active flag or grants changed (``member_id``), or a role's
        capabilities or attributes (``role_id``): the live runtimes concerned read
        their member again now, before the change's request answers. Pushed, never
        left to the bus (authorization is never eventual), so what a turn offers and
        lets start — decided from ``runtime.member`` in memory, with no read per round —
        follows the change from its next round and its next call."""
        for runtime in list(self._runtimes.values()):
            if runtime.closed or not (runtime.member_id == member_id or (role_id is not None and runtime.member.role.id == role_id)):
                continue
            try:
                runtime.member = await self.core.users.get(runtime.member_id)
            except MemberNotFound:  # deleted meanwhile: nothing is allowed any more
                runtime.member = dataclasses.replace(runtime.member, active=False)

    def live_runtime(self, member_id: str) -> "MemberRuntime | None":
        runtime = self._runtimes.get(member_id)
        return runtime if runtime is not None and not runtime.closed else None

    async def before_lock(self, member_id: str) -> None:
        runtime = self._runtimes.pop(member_id, None)
        if runtime is not None:
            leaving = await self._leaving(member_id)
            # A deactivation's cut is said as such: the next recovery (after a
            # reactivation) ends those turns instead of resuming them (check C5).
            deactivated = leaving and not self.core.users.is_deleting(member_id)
            await runtime.close("shutdown" if self.core.stopping.is_set() else "deactivated" if deactivated else "locked")
            if leaving:
                await runtime.settle_cut_requests(resumed=not deactivated)

    async def _leaving(self, member_id: str) -> bool:
        """The member locks because they are being deleted or were deactivated: no
        recovery may come to count the answers this lock cut (their file goes, or
        nobody unlocks it), so the lock does its accounting now."""
        if self.core.users.is_deleting(member_id):
            return True
        try:
            return not (await self.core.users.get(member_id)).active
        except MemberNotFound:
            return True

    async def close(self) -> None:
        for member_id in list(self._runtimes):
            await self.before_lock(member_id)
        await self.clients.close()

    def default_agent(self, member: Member) -> str:
        return member.role.attrs.chat_agent or "assistant"


class SendBudget:
    """How fast a member's own clients may send (check H3): ``burst`` messages at once,
    then ``rate`` a second (a token bucket). A human never meets it; a runaway script
    does, and is told when to try again instead of filling the member's file."""

    WARN_EVERY_SECONDS = 60.0

    def __init__(self, burst: int, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.rate, self.clock = burst, rate, clock
        self.tokens = float(burst)
        self.last = clock()
        self.warned = -self.WARN_EVERY_SECONDS

    def spend(self) -> float:
        """0 when a message may be sent now (it is counted); else the seconds until one may."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate

    def should_warn(self) -> bool:
        """Once a minute at most: a flood is one log line, not one per message."""
        now = self.clock()
        if now - self.warned < self.WARN_EVERY_SECONDS:
            return False
        self.warned = now
        return True


class MemberRuntime:
    def __init__(self, chat: ChatService, member: Member, store: ConversationStore) -> None:
        self.chat = chat
        self.core = chat.core
        self.member = member
        self.member_id = member.id
        self.store = store
        self.kernel = Kernel(self)
        self.subagents = SubagentCoordinator(self, chat.orchestration, chat.run_permits)
        self.waiters = ApprovalWaiters()
        self.pending_cards: dict[str, str] = {}
        #: What tools ask the member while they run (``TurnApi.ask``): RAM only.
        self.questions = Questions(self.emit)
        self.closed = False
        #: What a call the last close (or a crash) cut says when recovery ends it
        #: without running it again (``store.cut_result``; set by ``recover``).
        self.cut_result = cut_result(None)
        self.send_budget = SendBudget(chat.core.settings.chat.send_burst, chat.core.settings.chat.sends_per_second)
        self._live: dict[str, asyncio.Task[None]] = {}
        #: The text streamed so far of each answer being streamed (its message id ->
        #: its ``content`` and ``reasoning``), in memory only: the row on disk has the
        #: last checkpoint, up to ``CHECKPOINT_SECONDS`` behind. A read of the
        #: conversation gives this one (``with_partials``), and each token event says
        #: where its delta starts (``at``), so a page that reads mid-answer misses no word.
        self.partials: dict[int, dict[str, str]] = {}
        #: Per conversation, writes in flight that start a turn once committed (a send's
        #: message stored the plain way, an edit, a regenerate): ``running`` says yes
        #: meanwhile, so a second send queues behind them instead of starting a turn of
        #: its own from a history without them.
        self._starting: dict[str, int] = {}
        #: Streaming rows of turns the disk stopped, not ended yet (it still refused), with
        #: the reason they end with: the resender ends them once the disk writes again, or
        #: the conversation's next turn does, whichever comes first.
        self._unsettled: dict[str, tuple[set[int], str]] = {}
        self._cancel: dict[str, asyncio.Event] = {}
        self._prefix: dict[tuple[str, str, str], tuple[str, float]] = {}
        # Per prefix: the injected shared notes in it another member may have written.
        self._outside_notes: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self._scheduler: asyncio.Task[None] | None = None
        self._logging: set[asyncio.Task[None]] = set()
        self._resender: asyncio.Task[None] | None = None  # writes stranded request rows and unsettled answers again
        self._resend_soon = asyncio.Event()
        #: Scheduled prompts delivered whose answers are awaited (``_watch_answer``).
        self._watching: set[asyncio.Task[None]] = set()
        self._logged_requests: dict[str, tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = {}  # frame id -> its last logged request
        #: Per conversation, ``<!-- KEY -->`` markers of the system prompt and their text:
        #: a system agent's pass about somebody else (seed 001 "Per-pass prompt substitutions").
        self.prompt_substitutions: dict[str, Mapping[str, str]] = {}

    @property
    def agents(self) -> AgentCatalog:
        """The agents this member may use: a plugin's only while it is usable by them."""
        return self.chat.agents.visible_to(lambda plugin_id: self.core.catalog.usable(self.member, plugin_id))

    def subagent_generation(self) -> Generation:
        """The definitions this member's delegations use: the current generation, a
        plugin's only while this member may use the plugin."""
        return self.chat.subagent_catalog.current().visible(lambda plugin_id: self.core.catalog.usable(self.member, plugin_id))

    def skills_of(self, agent: AgentDefinition) -> list[Skill]:
        """The skills ``agent`` may read (its definition's ``skills``), from the
        current generation as this member sees it; none while no generation loaded."""
        if not agent.skills:
            return []
        try:
            return self.subagent_generation().skills_of(agent)
        except GenerationRefused:
            return []

    @property
    def member_groups(self) -> frozenset[str]:
        return frozenset(self.member.role.attrs.permission_groups)

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        await self.subagents.start()  # stale runs interrupted before any conversation is driven again
        resumed = await self.recover()
        for job_id, conversation_id, key, run in await self.store.answers_awaited(resumed):
            self._watch_answer(job_id, conversation_id, key, run)  # the watch a crash or stop ended
        if not self.core.safe_mode:  # scheduled prompts stay due until a normal start (``Skald.safe_mode``)
            self._scheduler = asyncio.create_task(self._run_scheduler(), name=f"scheduler:{self.member_id}")

    async def close(self, cause: str = "shutdown") -> None:
        """``cause``: ``shutdown`` (the server stops), ``locked`` (the member's file
        locks: a sign-out, a session's end) or ``deactivated`` (an admin deactivated the
        member: their next recovery ends the turns it cut instead of resuming them),
        recorded on the runs it cuts."""
        self.closed = True
        await self.subagents.close(cause)
        # No await between answering the waiting questions and cancelling the turns: a
        # turn must not go on (and write) on a "cancel" answer while its member locks.
        self.questions.cancel_all()
        tasks = list(self._live.values()) + list(self._watching) + ([self._scheduler] if self._scheduler else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._live.clear()
        try:  # the calls it cut say why when recovery ends them (``runs.mark_cut`` for runs)
            await self.store.record_cut_cause(cause)
        except Exception:  # the file is gone or failing: recovery says "cut off" instead
            log.warning("member %s: the cause of the turns' cut could not be recorded", self.member_id)
        await self.flush_logs()  # before the member's file closes
        if self._resender is not None:
            self._resender.cancel()
            await asyncio.gather(self._resender, return_exceptions=True)

    def emit(self, event_type: str, conversation_id: str, **data: Any) -> None:
        if not self.core.buses.members.listening(self.member_id):
            return  # no socket open: the events are announcements, the files hold the state
        self.core.buses.members.publish(
            UserEvent("chat", self.member_id, {"type": event_type, "conversation_id": conversation_id, **data})
        )

    def with_partials(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A transcript just read, its answers still streaming as they are now rather
        than as last checkpointed; each says how many characters of each channel it
        holds (``streamed``): the ``at`` its next token events carry. No await between
        this and the events that follow: a token is in the text given or in an event."""
        for message in messages:
            live = self.partials.get(message["id"]) if message.get("status") == "streaming" else None
            if live is not None:
                message["content"], message["reasoning"] = live["content"], live["reasoning"]
                message["streamed"] = {"content": len(live["content"]), "reasoning": len(live["reasoning"])}
        return messages

    def cancel_event(self, conversation_id: str) -> asyncio.Event:
        return self._cancel.setdefault(conversation_id, asyncio.Event())

    def turn_task(self, conversation_id: str) -> "asyncio.Task[None] | None":
        """The task of the conversation's running turn (a system agent's pass awaits it)."""
        return self._live.get(conversation_id)

    def running(self, conversation_id: str) -> bool:
        """Whether a turn runs in the conversation, or a write that starts one is in
        flight (``starting``)."""
        return self._turn_live(conversation_id) or conversation_id in self._starting

    def _turn_live(self, conversation_id: str) -> bool:
        task = self._live.get(conversation_id)
        return task is not None and not task.done()

    def starting(self, conversation_id: str) -> Callable[[], None]:
        """Mark a write that starts a turn once committed as in flight; the returned
        function ends the mark (once, however often it is called), after ``drive``
        or when no turn comes of the write."""
        self._starting[conversation_id] = self._starting.get(conversation_id, 0) + 1
        ended = False

        def end() -> None:
            nonlocal ended
            if ended:
                return
            ended = True
            left = self._starting.pop(conversation_id) - 1
            if left:
                self._starting[conversation_id] = left
            elif not self._turn_live(conversation_id):
                self.subagents.wake()  # an inbox event that saw this conversation busy goes now

        return end

    # -- conversations ----------------------------------------------------------------------

    async def create_conversation(
        self, agent_id: str | None = None, title: str = "", source: str = "web", model_id: str | None = None
    ) -> dict[str, Any]:
        """``model_id``: the enabled model it uses first (None: the agent's choice), as
        ``choose_model`` sets it later, written with the conversation."""
        agent_id = agent_id or self.chat.default_agent(self.member)
        try:
            agent = self.agents.get(agent_id)
        except AgentError as exc:
            raise ChatError(str(exc), code="agent_unknown", values={"agent": agent_id}) from None
        # A project's agent only makes sense with the project's context, which comes with
        # a project source; a member's own chats start a chat agent.
        wanted = "project" if source.startswith("project:") else "chat"
        if agent.kind != wanted:
            raise ChatError(f"{agent_id!r} is not a {wanted} agent", code=f"agent_not_{wanted}", values={"agent": agent_id})
        self.check_agent(agent, via="new_conversation")
        await self._check_model(model_id)
        conversation_id, _ = await self.store.create_conversation(agent.id, source=source, title=title, model=model_id)
        await self._prepare_prompt(await self.store.root_frame(conversation_id), agent)
        return await self.store.conversation(conversation_id)  # type: ignore[return-value]

    async def conversation(self, conversation_id: str) -> dict[str, Any]:
        """The conversation, or the same "not found" whether it is someone else's or
        nobody's: ids live in this member's own file, so another's cannot resolve."""
        conversation = await self.store.conversation(conversation_id) if isinstance(conversation_id, str) else None
        if conversation is None:
            raise ChatError("no such conversation", code="conversation_not_found", status=404)
        return conversation

    async def root(self, conversation_id: str) -> Frame:
        """The conversation's root frame, with the same "not found" as ``conversation``;
        kept in memory, so checking a conversation a turn is sent to costs no read."""
        frame = await self.store.find_root(conversation_id) if isinstance(conversation_id, str) else None
        if frame is None:
            raise ChatError("no such conversation", code="conversation_not_found", status=404)
        return frame

    def sending_too_fast(self, idempotency_key: str | None) -> int:
        """For a message from the member's own clients: 0 when it may be sent now, else
        the whole seconds to wait (``SendBudget``). A retry of a key already sent costs
        nothing (it is stored once whatever happens). Channels and scheduled prompts
        are not counted here: they have their own pace."""
        if idempotency_key is not None and not self.store.key_surely_new(idempotency_key):
            return 0
        wait = self.send_budget.spend()
        if wait and self.send_budget.should_warn():
            log.warning("member %s is sending faster than chat.sends_per_second: sends are refused for now", self.member_id)
        return math.ceil(wait)

    async def send(
        self, conversation_id: str, text: str, idempotency_key: str | None, *, unattended: bool = False,
        attachments: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Store the member's message (the ack means it is durable), then make sure a
        turn runs. The same idempotency key twice is acknowledged twice and stored once.
        ``attachments`` are agent paths of files (uploads) sent with it."""
        await self.root(conversation_id)
        try:
            described = await describe_attachments(self.core, self.member, attachments) if attachments else []
        except (FileError, PathRefused) as exc:
            raise ChatError(f"attachment: {exc}", code="attachment_refused", values={"detail": str(exc)}) from None
        frame = await self.store.root_frame(conversation_id)
        # A message that starts a turn is committed with the turn's streaming placeholder,
        # which names the model: the models are chosen first.
        sends_images = any(a.get("mime") in IMAGE_TYPES for a in described)
        candidates = None if self.running(conversation_id) else await self._opening_models(frame, vision=sends_images)
        # The member, for the turn this may start, is read on the registry's thread while
        # the message is committed to the member's file (a turn's opening: once its
        # request is out, not beside the request being built).
        reading: list[asyncio.Future[Member]] = []

        def member() -> asyncio.Future[Member]:
            if not reading:
                reading.append(asyncio.ensure_future(self.core.users.get(self.member_id)))
                reading[0].add_done_callback(lambda f: f.cancelled() or f.exception())  # a dropped read is no warning
            return reading[0]

        # No await between the check and the write's submission: the store's one worker
        # runs jobs in order, so a turn started after this check reads the message.
        queued = self.running(conversation_id)
        # A retry must not reach the model: the turn starts before its message commits
        # only for a key not seen lately (the write still decides, in its transaction).
        surely_new = self.store.key_surely_new(idempotency_key)
        # A cancelled background run's end waits for this turn's first request (its steer
        # lane, ``Kernel.run_frame``), which is built from the history as written then.
        overlap = (
            not (queued or not candidates or described or not surely_new or self.subagents.may_steer_opening(conversation_id))
            and self._room_to_write()
        )
        settled = self.store.settled_history(frame) if overlap else None
        # A scheduled prompt's (its key says so): its answer also goes to the member's home source.
        scheduled = bool(idempotency_key and idempotency_key.startswith(schedules.SCHEDULED_KEY))

        def write() -> Awaitable[dict[str, Any]]:
            return self.store.add_member_message(
                frame, text, idempotency_key, queued=queued, attachments=json.dumps(described),
                title=title_from(text), placeholder_model=candidates[0] if candidates and not queued else None,
            )

        if settled is not None:
            return await self._send_opening(frame, text, write, member, candidates, settled, unattended, scheduled)  # type: ignore[arg-type]

        async def store_then_start() -> dict[str, Any]:
            """Runs to its end even if the sender goes away (a socket closed mid-send):
            the write commits in the store's thread regardless, and a message stored
            with no turn started was left unanswered, its placeholder streaming, while
            the resend of its key was acknowledged as a duplicate (a crash-kill probe)."""
            stored = await write()
            if stored["duplicate"]:
                if stored["conversation_id"] != conversation_id:
                    raise ChatError("this idempotency key was used for another conversation", code="idempotency_key_reused")
                return {"conversation_id": conversation_id, "duplicate": True, "queued": stored["queued"], "message_id": stored["message_id"]}
            ack = {"conversation_id": conversation_id, "queued": stored["queued"], "message_id": stored["message_id"]}
            if not stored["queued"]:
                self.emit("user_message", conversation_id, message_id=stored["message_id"], content=text, attachments=described, scheduled=scheduled)
            if "titled" in stored:
                self.conversation_changed(stored["titled"])
            self.core.buses.chat.publish(ChatEvent("user_message", self.member_id, conversation_id))
            # Queued while a turn ran: if that turn ended meanwhile, the next one starts here,
            # from the inbox.
            self.drive(
                conversation_id, unattended=unattended, member=member(), candidates=candidates if stored.get("placeholder_id") else None,
                drain_first=stored["queued"],
            )
            return ack

        # Until it has driven (or found nothing to drive), a later send queues behind it.
        end = self.starting(conversation_id)
        storing = asyncio.ensure_future(store_then_start())
        storing.add_done_callback(lambda f: end() or f.cancelled() or f.exception())  # a sender gone: its failure is nobody's to read
        return await asyncio.shield(storing)

    @contextlib.contextmanager
    def _turn_after(self, conversation_id: str) -> Iterator[None]:
        """A write that starts a turn once committed (an edit, a regenerate, a retry):
        ``starting`` while it is in flight, then the turn, unless the write raised."""
        end = self.starting(conversation_id)
        try:
            yield
            self.drive(conversation_id)
        finally:
            end()

    def _room_to_write(self) -> bool:
        """Whether the member's disk has room enough that the message's commit cannot
        fail for space: only then may the turn's first request go out beside it. A
        message a full disk refuses must not have reached the (paid) model."""
        try:
            disk = os.statvfs(self.store.db.path.parent)
        except OSError:
            return False
        return disk.f_bavail * disk.f_frsize >= OVERLAP_MIN_FREE_BYTES

    async def _send_opening(
        self, frame: Frame, text: str, write: Callable[[], Awaitable[dict[str, Any]]], member: Callable[[], asyncio.Future[Member]],
        candidates: list[ModelChoice], settled: list[Any], unattended: bool, scheduled: bool,
    ) -> dict[str, Any]:
        """``send`` for a message that starts a turn on a settled history: the turn's
        first request goes out while the message (with the turn's placeholder) commits,
        and nothing of the turn is announced before. The member the request was built
        for is the one known from their last turn; if the fresh read differs (a role
        change), the turn starts over the plain way once the message is stored.

        The write starts at once, not when the request is out as a tool round's does:
        the member's first token waits for this commit, and one that starts late shows
        in that wait's tail (p99 ~6 vs ~4.5 ms in the chat benchmark)."""
        conversation_id = frame.conversation_id
        row = {"id": None, "frame_id": frame.id, "role": "user", "content": text, "attachments": "[]", "status": "complete", "tool_calls": ()}
        writing = asyncio.ensure_future(write())
        # The member's fresh read starts once the request is out: with the message's write
        # beside it, two database threads took the GIL from the request being built.
        opening = Pending(settled + [MappingProxyType(row)], start=member, early=True)
        before = self.member
        self.drive(conversation_id, unattended=unattended, candidates=candidates, opening=opening)

        async def settle() -> dict[str, Any]:
            """Runs to its end even if the sender goes away: the turn depends on it."""
            try:
                stored = await writing
            except BaseException:
                opening.abandon(Abandoned("the message could not be stored", committed=False))
                raise
            if stored["duplicate"]:
                opening.abandon(Abandoned("a retry of a stored message", committed=False))
                return stored
            self.emit("user_message", conversation_id, message_id=stored["message_id"], content=text, attachments=[], scheduled=scheduled)
            if "titled" in stored:
                self.conversation_changed(stored["titled"])
            self.core.buses.chat.publish(ChatEvent("user_message", self.member_id, conversation_id))
            try:
                fresh = await member()
            except Exception:  # the plain way reads it again and fails as it would have
                opening.abandon(Abandoned("the member could not be read", committed=True))
                return stored
            self.member = fresh
            # Only a change that alters the request sent makes it go again: the prompt's
            # prefix (with the profile) is frozen per conversation, the tools are not.
            # Anything else (a new display name, a login) keeps the request on its way:
            # a provider must not be billed twice for one message.
            if (
                dataclasses.replace(fresh, last_login_at=before.last_login_at) != before
                and self._offered_names(frame, before) != self._offered_names(frame, fresh)
            ):
                reason = "the tools this member may use changed while the request was on its way"
                log.warning("member %s: the model request of a turn is sent again: %s", self.member_id, reason)
                opening.abandon(Abandoned(reason, committed=True))
            else:
                opening.confirm(stored["placeholder_id"])
            return stored

        stored = await asyncio.shield(asyncio.ensure_future(settle()))
        if stored["duplicate"]:
            if stored["conversation_id"] != conversation_id:
                raise ChatError("this idempotency key was used for another conversation", code="idempotency_key_reused")
            return {"conversation_id": conversation_id, "duplicate": True, "queued": stored["queued"], "message_id": stored["message_id"]}
        return {"conversation_id": conversation_id, "queued": False, "message_id": stored["message_id"]}

    def _offered_names(self, frame: Frame, member: Member) -> tuple[str, ...] | None:
        """The names of the tools the frame's agent offers the member as given (what of
        the member a request depends on, besides the frozen prompt prefix)."""
        try:
            return tuple(t.name for t in self.offered_tools(self.agents.get(frame.agent_id), member, frame.depth))
        except AgentError:
            return None

    async def _opening_models(self, frame: Frame, *, vision: bool) -> list[ModelChoice] | None:
        """The fallback chain the conversation's agent gets, for a turn's first round
        (models that see images first when the message carries some)."""
        try:
            agent = self.agents.get(frame.agent_id)
            return await self.models_for(frame, agent, vision=vision)
        except AgentError:
            return None  # the turn says so

    async def models_for(self, frame: Frame, agent: AgentDefinition, *, vision: bool = False) -> list[ModelChoice]:
        """The fallback chain of one of ``agent``'s requests in ``frame``. An agent
        whose definition names an inline provider + model (seed 004 §2.1) gets that
        model alone, and ``ModelUnavailable`` when the instance does not offer it now
        (disabled or removed since its definitions loaded): it never falls back to
        another provider's model."""
        if agent.provider is not None:
            chosen = await self.chat.models.candidates(pin=agent.model, provider=agent.provider, vision=vision)
            if not chosen:
                raise ModelUnavailable(
                    f"the agent {agent.id!r} runs on model {agent.model!r} of provider {agent.provider!r}, which is not enabled"
                    " on this instance; an admin enables it under Models"
                )
            return chosen
        return await self.chat.models.candidates(pin=await self.pin(frame, agent), strength=agent.strength, vision=vision)

    async def pin(self, frame: Frame, agent: AgentDefinition) -> str | None:
        """The model a frame's requests try first: the one the member picked for the
        conversation (its own frame; a sub-agent keeps its agent's), else the agent's."""
        if frame.depth == 0:
            chosen = await self.store.chosen_model(frame.conversation_id)
            if chosen:
                return chosen
        return agent.model

    async def choose_model(self, conversation_id: str, model_id: str | None) -> dict[str, Any]:
        """Pick the model a conversation uses first (None: the agent's choice), among
        the enabled ones; the others stay its fallbacks."""
        await self.conversation(conversation_id)
        await self._check_model(model_id)
        await self.store.choose_model(conversation_id, model_id)
        conversation = await self.conversation(conversation_id)
        self.conversation_changed(conversation)
        return conversation

    async def rename(self, conversation_id: str, title: str) -> dict[str, Any]:
        """Give a conversation a new title; announced once written."""
        await self.conversation(conversation_id)
        await self.store.rename(conversation_id, title)
        conversation = await self.conversation(conversation_id)
        self.conversation_changed(conversation)
        return conversation

    async def delete(self, conversation_id: str) -> None:
        """Stop the conversation's turn and delete it; announced once deleted, so that
        every other open client (another tab, another device) lets it go. Its uploads
        folder goes after the rows' delete is committed: a crash between leaves a folder
        nothing names, never a conversation naming files that are gone."""
        await self.stop(conversation_id)
        if await self.store.delete(conversation_id):
            self.emit("conversation_deleted", conversation_id)
            await self.core.files.remove_uploads(self.member_id, conversation_id)

    async def discard(self, conversation_id: str) -> None:
        """Delete a conversation nobody reads again (a system agent's pass, once it
        ended). A turn of it that this runtime's closing interrupted (the server
        stopping, the file locking) left its answer streaming for recovery to count as a
        cut request; deleted now, recovery would never see it: its rows of the request
        log, as recovery writes them, go in the delete's own commit instead, for the next
        recovery to give the registry (``store.RequestOutbox``)."""
        if self.closed:
            for model, model_id, sent_at in await self.store.cut_requests(conversation_id):
                request_id = f"{random.getrandbits(128):032x}"
                row = (request_id, self.member_id, model, "interrupted", None, None, None, None, None, model_id)
                self.store.outbox.add(request_id, json.dumps({"row": row, "at": sent_at or registry_time()}))
        await self.store.delete(conversation_id)

    def conversation_changed(self, conversation: Mapping[str, Any]) -> None:
        """What the member's other open clients show of a conversation besides its
        messages (its title, its model) changed: said after the write, whole, so that
        any one of these events brings a client up to date."""
        self.emit("conversation_changed", conversation["id"], title=conversation.get("title") or "",
                  model=conversation.get("model"), updated_at=conversation.get("updated_at"))

    def branch_changed(self, conversation_id: str, reason: str, **data: Any) -> None:
        """The messages a conversation shows changed other than by a message added at
        its end (a regenerate, an edit, a version flipped to, a failure retried): said
        after the write; a client showing it reads it again, as a reload would."""
        self.emit("branch_changed", conversation_id, reason=reason, **data)

    async def _check_model(self, model_id: str | None) -> None:
        """A conversation's own model is one of the enabled ones (None: none chosen)."""
        if model_id is not None and not any(c.id == model_id for c in await self.chat.models.candidates()):
            raise ChatError("no such model is enabled", code="model_not_enabled")

    def drive(
        self, conversation_id: str, *, unattended: bool = False, member: Awaitable[Member] | None = None,
        candidates: list[ModelChoice] | None = None, opening: Pending | None = None, drain_first: bool = False,
        continuation: bool = False,
    ) -> None:
        """Start a turn unless one runs. ``continuation``: the turn delivers the
        conversation's due sub-agent inbox events (none: no turn). ``member``: the member as just read, for it;
        ``candidates``: the models its placeholder was written for; ``opening``: that
        placeholder's write, still pending (``_send_opening``); ``drain_first``: the
        turn is for messages that may wait in the inbox (none: no turn)."""
        if self.closed or self._turn_live(conversation_id):
            return
        self.cancel_event(conversation_id).clear()
        self._live[conversation_id] = asyncio.create_task(
            self._drive(conversation_id, unattended, member, candidates, opening, drain_first, continuation), name=f"turn:{conversation_id}"
        )

    async def _drive(
        self, conversation_id: str, unattended: bool, member: Awaitable[Member] | None = None,
        candidates: list[ModelChoice] | None = None, opening: Pending | None = None, drain_first: bool = False,
        continuation: bool = False,
    ) -> None:
        quiet = False  # a turn that never started (its message was not stored) ends unannounced
        ended = False  # the turn ran to its end (not stopped, not failed)
        stopped = False
        failed = False  # an unexpected exception ended it: the messages queued behind it still get their turn
        mailbox: TurnMailbox | None = None  # the running turn's steer lane (seed 004 §4.4)

        def started(_: int) -> None:
            self.emit("turn_started", conversation_id)

        try:
            if conversation_id in self._unsettled:
                await self._settle_left_streams(conversation_id)
            frame = await self.store.find_root(conversation_id)
            agent = self.agents.get(frame.agent_id) if frame else None  # the root frame's agent is the conversation's
            while frame is not None and drain_first:
                moved = await self.store.drain_inbox(frame)
                for message_id in moved:
                    self.emit("user_message", conversation_id, message_id=message_id)
                if moved or await self._history_needs_work(conversation_id):
                    break
                if not self.store.may_have_queued(conversation_id):  # else: one came after that drain, again
                    quiet = ended = True
                    return
            # A continuation's trigger goes after a settled history only: a conversation
            # with unfinished work runs that first, and delivers at the turn's end.
            if frame is not None and continuation and not await self._history_needs_work(conversation_id):
                if not await self.subagents.deliver(frame):
                    quiet = ended = True
                    return
            user_turns = 0
            while agent is not None:
                await self.subagents.close_turn(mailbox, "ended")  # a turn that went round again (below)
                mailbox = self.subagents.open_turn(conversation_id)
                if opening is not None:
                    opening.then(started)  # after the message's own announcement, before any token
                    try:
                        await self.kernel.run_frame(frame, agent, unattended=unattended, candidates=candidates, opening=opening)
                    except Abandoned as exc:
                        if opening.placeholder_id is not None:  # a later round's write failed, not the message's
                            if isinstance(exc.__cause__, DiskFailure):
                                raise exc.__cause__ from None
                            raise RuntimeError("a tool round's results could not be written") from exc
                        opening = candidates = None
                        if exc.committed:
                            # A deliberate second request for the message: said to the
                            # member and in the log, never silent (a provider bills it).
                            text = f"The request was sent to the model again: {exc}."
                            message_id = await self.store.add_note(frame, text, reason=reason_json("request_sent_again"))
                            self.emit("notification", conversation_id, message_id=message_id, content=text, retry=True,
                                      code="request_sent_again", values={})
                            continue  # the plain way, from the stored history
                        quiet = ended = True  # a message queued meanwhile starts the next turn (below)
                        return
                    opening = candidates = None
                else:
                    self.member = await (member or self.core.users.get(self.member_id))  # a role change applies from the next turn
                    member = None
                    started(0)
                    await self._settle_finished_subframes(frame)
                    await self.kernel.run_frame(frame, await self._turn_agent(frame, agent), unattended=unattended, candidates=candidates)
                    candidates = None
                # What the turn was admitted and did not take goes back to the inbox
                # before the queue lane looks (steer degrades to queue, §8.5).
                await self.subagents.close_turn(mailbox, "ended")
                # Fair scheduling (seed 004 §4.6): the member's queued messages first,
                # unless a burst of them ran or the oldest inbox event waited too long.
                delivered = False
                if self.subagents.inbox_first(await self.subagents.oldest_wait(conversation_id), user_turns):
                    delivered = await self.subagents.deliver(frame)
                moved = [] if delivered else await self.store.drain_inbox(frame)
                if not moved and not delivered:
                    delivered = await self.subagents.deliver(frame)
                if delivered:
                    user_turns = 0
                    self.emit("turn_finished", conversation_id)
                    unattended = False
                    continue
                if not moved:
                    break
                user_turns += 1
                # Each turn is announced as one: the queued messages start the next, and a
                # client counting started/finished pairs must see this one end first.
                self.emit("turn_finished", conversation_id)
                for message_id in moved:
                    self.emit("user_message", conversation_id, message_id=message_id)
                unattended = False
            ended = True
        except asyncio.CancelledError:
            if opening is not None:
                try:  # stopped while the message committed: it comes first, then the stop
                    await opening.wait()
                except Abandoned:
                    quiet = True  # nothing of this turn was written
                    raise asyncio.CancelledError from None
            if not self.closed:  # closing interrupts a turn for recovery; it was not stopped
                stopped = True
                await asyncio.shield(self._stopped(conversation_id))
            raise
        except NoModelConfigured:
            # The member's message is answered by this failure (not left open for
            # recovery to answer later, silently): it stays failed until they retry.
            text = "No model is configured yet. An admin can add one on the Models page."
            await self._opening_written(opening)
            frame = await self.store.root_frame(conversation_id)
            message_id = await self.store.fail_turn(frame, text, reason_json("no_model"))
            await self.store.settle_streams(conversation_id, "error")
            self.emit("error", conversation_id, error=text, code="no_model", message_id=message_id, retry=True)
        except AgentError as exc:
            # Answered by this failure, its reason stored as the no-model one is: a
            # reload shows the same words, in the reader's language, and a Retry.
            code, values = (exc.code, exc.values) if exc.code else ("agent_failed", {"detail": str(exc)})
            await self._opening_written(opening)
            frame = await self.store.root_frame(conversation_id)
            message_id = await self.store.fail_turn(frame, str(exc), reason_json(code, values))
            await self.store.settle_streams(conversation_id, "error")
            self.emit("error", conversation_id, error=str(exc), code=code, values=values, message_id=message_id, retry=True)
        except DiskFailure as exc:
            # The disk refused a write (check G4): what was committed stays, the step
            # that failed was rolled back, and the member is told why, not "see the log".
            log.error("member %s: a turn stopped: %s", self.member_id, exc)
            await self._opening_written(opening)
            try:
                rows = await self.store.streaming_rows(conversation_id)
                try:  # its reason kept, as a failed turn's: a reload says why, not a bare failed bubble
                    await self.store.settle_streams(conversation_id, "error", rows, reason_json(exc.code))
                except StorageError:  # the disk still fails: ended once it writes again (or by the next turn here)
                    left, _ = self._unsettled.get(conversation_id, (set(), ""))
                    self._unsettled[conversation_id] = (left | set(rows), reason_json(exc.code))
                    self._start_resender()
            except StorageError:
                pass  # not even readable: recovery at the next start ends them
            self.emit("error", conversation_id, error=f"the turn stopped: {exc.member_text}", code=exc.code)
        except Exception:
            await self._opening_written(opening)
            await self.store.settle_streams(conversation_id, "error")
            log.exception("turn failed in a conversation of member %s", self.member_id)
            self.emit("error", conversation_id, error="the turn failed; see the server log", code="turn_failed")
            # Messages queued behind it get their turn (below), in order, not only after
            # the member's next send; only those: the failed turn is not run again.
            try:
                failed = bool(await self.store.queued(conversation_id))
            except StorageError:  # unreadable: the member's next send, or the next start, drains them
                pass
        finally:
            if mailbox is not None and not mailbox.closed:
                outcome = "interrupted" if self.closed else "stopped" if stopped else "failed"
                try:
                    await asyncio.shield(self.subagents.close_turn(mailbox, outcome))
                except Exception:  # left admitted: recovery releases it at the next start
                    log.exception("member %s: a turn's steer events could not be given back", self.member_id)
            if not quiet:
                self.emit("turn_finished", conversation_id)
            if self._live.get(conversation_id) is asyncio.current_task():
                self._live.pop(conversation_id, None)
                # A message queued after the last drain was submitted (the turn still ran
                # when it came) was not moved by it: it starts the next turn now.
                if (ended or stopped or failed) and self.store.may_have_queued(conversation_id):
                    self.drive(conversation_id, drain_first=True)
                self.subagents.wake()  # an inbox event that waited for this turn goes now

    async def _stopped(self, conversation_id: str) -> None:
        """A Stop, written then announced: the turn's rows end cancelled, and the
        member's messages that waited for the next turn stay in the conversation,
        answered by a failure the member may retry (``ConversationStore.stop_turn``)."""
        frame = await self.store.root_frame(conversation_id)
        moved, failed = await self.store.stop_turn(frame, STOPPED_UNANSWERED, reason_json("stopped_unanswered"))
        self.emit("cancelled", conversation_id)
        for message_id in moved:
            self.emit("user_message", conversation_id, message_id=message_id)
        if failed is not None:
            self.emit("error", conversation_id, error=STOPPED_UNANSWERED, code="stopped_unanswered", message_id=failed, retry=True)

    async def _turn_agent(self, frame: Frame, agent: AgentDefinition) -> AgentDefinition:
        """The agent of a root turn: a continuation turn (its last member-side message
        is a hidden trigger) offers only the read-only tools (seed 004 §4.5), also when
        recovery runs it after a crash."""
        history = await self.store.history(frame.id)
        # A steer trigger is written into a running turn: it does not start one.
        last_user = next((row for row in reversed(history) if row["role"] == "user" and row.get("origin") != STEER_ORIGIN), None)
        if last_user is not None and last_user.get("origin") == CONTINUATION_ORIGIN:
            return continuation_agent(agent)
        return agent

    async def _settle_left_streams(self, conversation_id: str) -> None:
        """Rows a turn that the disk stopped could not end then (``_unsettled``), ended
        as that turn would have: failed, with its reason (a reload says the disk was
        full, as the live event did, not a row that streams for ever)."""
        rows, reason = self._unsettled.pop(conversation_id)
        try:
            await self.store.settle_streams(conversation_id, "error", sorted(rows), reason)
        except StorageError:
            if conversation_id not in self._unsettled:  # a later failure's rows are kept by it
                self._unsettled[conversation_id] = (rows, reason)
            raise

    async def _settle_left_once(self) -> bool:
        """One try of the resender at the answers a full disk left streaming: each
        conversation's written, then announced (a client showing it reads it again, as
        the next turn's start would have made it). A conversation whose turn runs is
        left to that turn, which ends them first. Whether none is left."""
        for conversation_id in list(self._unsettled):
            if conversation_id not in self._unsettled or self._turn_live(conversation_id):
                continue
            try:
                await self._settle_left_streams(conversation_id)
            except StorageError as exc:
                log.warning("member %s: answers a full disk left streaming could not be ended yet (%s); tried again",
                            self.member_id, type(exc).__name__)
                return False
            self.branch_changed(conversation_id, "settled")
            log.info("member %s: the answers a full disk left streaming in a conversation are ended now", self.member_id)
        return not self._unsettled

    @staticmethod
    async def _opening_written(opening: Pending | None) -> None:
        """A turn that failed while its message was being stored: that write comes
        first, so the failure settles its placeholder."""
        if opening is not None:
            try:
                await opening.wait()
            except Abandoned:
                pass

    async def _settle_finished_subframes(self, root: Frame) -> None:
        """Recovery's un-wedge: a sub-agent frame that finished but whose result never
        reached the call that spawned it hands it over without calling the model again."""
        for frame in await self.store.open_frames(root.conversation_id):
            history = await self.store.history(frame.id)
            last = history[-1] if history else None
            if last and last["role"] == "assistant" and last["status"] == "complete" and not last["tool_calls"]:
                await self.store.close_frame(frame.id, "done", last["content"])

    async def stop(self, conversation_id: str) -> bool:
        """Cancel the whole call tree of the conversation's running turn, and its
        background runs. Whether anything was stopped."""
        await self.conversation(conversation_id)
        # Stop cascades to the conversation's background runs; their completions are
        # written consumed, so nothing continues after a Stop (seed 004 §6). What
        # finished before it and waits for a continuation is the next turn's input,
        # which a Stop discards too (§8.6): consumed without one, its result kept on
        # its run (agent_task, the task strip). Before the turn is cancelled: its end
        # wakes the inbox worker.
        cancelled = await self.subagents.cancel_conversation(conversation_id, suppress_continuation=True, background_only=True)
        await self.subagents.discard_waiting(conversation_id)
        task = self._live.get(conversation_id)
        if task is None or task.done():
            return cancelled > 0  # a background run stopped is something stopped
        self.cancel_event(conversation_id).set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return True

    async def resolve_approval(self, approval_id: str, approve: bool) -> dict[str, Any]:
        approval = await self.store.approval(approval_id) if isinstance(approval_id, str) else None
        if approval is None:
            raise ChatError("no such approval", code="approval_not_found", status=404)
        # An OK for a tool the member may no longer use (its plugin disabled, the grant
        # or the capability gone since the card was raised) could not make it run: the
        # kernel refused it as it started, after the channel had been told "approved".
        # Said as what happens: denied, for that reason. The row keeps what the member
        # said (approved): the call's own end says it did not run, and the transcript
        # reads the two together ("Approved, but your access ... was withdrawn").
        refusal = self._approval_refusal(approval) if approve else None
        if not await self.store.resolve_approval(approval_id, "approved" if approve else "denied"):
            raise ChatError("this approval was already answered or has expired", code="approval_settled", status=409)
        decision = "approved" if approve and refusal is None else "denied"
        reason = {} if refusal is None else {"reason": WITHDRAWN_REASON}
        if refusal is not None:
            audit.denied(self.member_id, refusal, via="approval", tool=approval["tool"])
        self.emit("approval_resolved", approval["conversation_id"], approval_id=approval_id, decision=decision, **reason)
        if not self.waiters.wake(approval_id, WITHDRAWN_REASON if refusal is not None else decision):
            # Nobody waits (the server restarted since): continuing the conversation
            # runs the call now, with this member's real context.
            self.drive(approval["conversation_id"])
        return {"approval_id": approval_id, "decision": decision, **reason}

    def _approval_refusal(self, approval: Mapping[str, Any]) -> str | None:
        """Why the member may not use the approval's tool now (``CatalogService.tool_refusal``),
        or None. Only a registered tool is judged here: a plugin's per-member tool is
        offered per agent, and the kernel asks about it as the call starts. A card raised
        before the member's deactivation is refused whatever the tool (check C5)."""
        if raised_before_deactivation(approval, self.member.deactivated_at):
            return DEACTIVATED
        registered = self.chat.tools.get(approval["tool"])
        return None if registered is None else self.core.catalog.tool_refusal(self.member, registered)

    async def notify(self, conversation_id: str, text: str) -> None:
        frame = await self.store.root_frame(conversation_id)
        message_id = await self.store.add_note(frame, text)
        self.emit("notification", conversation_id, message_id=message_id, content=text)

    # -- recovery ---------------------------------------------------------------------------

    async def recover(self) -> list[str]:
        """Make every conversation well-formed and continue what was interrupted
        (seed 001 "Restart recovery"): a partial answer is marked interrupted; unfinished
        calls are re-gated and run, re-asked or marked interrupted by the kernel as it
        drives the conversation; queued messages start their turn."""
        carried = await self.store.outbox_rows()
        if carried:  # rows a crash kept from the registry (it ignores those it has)
            await self.chat.request_log.restore([json.loads(entry) for _, entry in carried])
            await self.store.empty_outbox([request_id for request_id, _ in carried])
        for model, model_id, sent_at in await self.store.cut_requests():
            # A request cut by a crash or a stop of the server may be billed, and resuming
            # asks again: both are rows of the request log, the repeat never silent; the
            # catalog entry it went to names the provider that bills it. Dated when it
            # was sent (its answer's row), not now: a request cut at 23:59 is that day's.
            await self.log_request(f"{random.getrandbits(128):032x}", None, model, [], [], None, None, time.perf_counter(),
                                   payload=False, status="interrupted", model_id=model_id, sent_at=sent_at)
        cut, given_up = await self.store.mark_interrupted_streams(
            RESUMED_NOTE, reason_json("answer_resumed"),
            give_up=(RESUME_LIMIT, RESUME_GIVEN_UP.format(times=RESUME_LIMIT + 1), lambda times: reason_json("resume_limit", {"times": times})),
        )
        if given_up:
            log.warning("member %s: %d answer(s) cut off %d times in a row are not asked for again (Retry asks)",
                        self.member_id, len(given_up), RESUME_LIMIT + 1)
        await self.store.remember_keys()
        cause = await self.store.take_cut_cause()
        self.cut_result = cut_result(cause)
        healed = await self.store.end_left_calls()
        if healed:
            log.info("member %s: %d call(s) left unfinished in turns that had moved on ended at recovery", self.member_id, healed)
        resumed, ended = [], 0
        # Only those the database names as maybe unfinished (one read, no limit: a
        # member's 10,001st conversation is resumed too) are read further; checking
        # each conversation took 1-1.6 s at 3,000 of them, one of 5,000 messages.
        for conversation_id in await self.store.conversations_to_resume():
            if not await self._needs_work(conversation_id):
                continue
            # The admin's cut holds: ended, never taken up by itself. Also a turn whose last
            # row is older than the member's deactivation: cut by it, or before it, by a
            # version that recorded no such cause (an upgrade's inactive member).
            if cause == "deactivated" or await self._written_before_deactivation(conversation_id):
                await self._end_deactivated_turn(conversation_id)
                ended += 1
                continue
            resumed.append(conversation_id)
            self.drive(conversation_id)
        if ended:
            log.info("member %s: %d conversation(s) cut by their deactivation ended, not resumed (they ask again)", self.member_id, ended)
        if resumed:
            # An answer cut mid-stream is asked for again: a second model request for
            # the message, said in the log as in the conversation (a provider bills it).
            log.info("member %s: resuming %d interrupted conversation(s) (a restart, or their file locked), %d with an answer cut off that is asked for again",
                     self.member_id, len(resumed), len(cut))
        return resumed

    async def _written_before_deactivation(self, conversation_id: str) -> bool:
        deactivated_at = self.member.deactivated_at
        if deactivated_at is None:
            return False
        last = await self.store.last_written_at(conversation_id)
        return last is not None and last <= deactivated_at

    async def _end_deactivated_turn(self, conversation_id: str) -> None:
        """A turn an admin's deactivation cut, found by the recovery after a reactivation:
        its cards raised before the deactivation are withdrawn as the kernel withdraws
        one (audit line, announced, denied), then the turn ends as a Stop's does, its
        calls said to have been stopped by the deactivation (``store.end_cut_turn``)."""
        for approval in await self.store.pending_approvals():
            if approval["conversation_id"] != conversation_id or not raised_before_deactivation(approval, self.member.deactivated_at):
                continue
            audit.denied(self.member_id, DEACTIVATED, via="approval", tool=approval["tool"])
            if await self.store.resolve_approval(approval["id"], "denied"):
                self.emit("approval_resolved", conversation_id, approval_id=approval["id"], decision="denied", reason=WITHDRAWN_REASON)
        moved, failed = await self.store.end_cut_turn(
            conversation_id, self.cut_result, STOPPED_DEACTIVATED, reason_json("stopped_deactivated"),
        )
        for message_id in moved:
            self.emit("user_message", conversation_id, message_id=message_id)
        self.emit("error", conversation_id, error=STOPPED_DEACTIVATED, code="stopped_deactivated", message_id=failed, retry=True)

    async def settle_cut_requests(self, resumed: bool = True) -> None:
        """The accounting half of ``recover``, for a closed runtime whose member is being
        deleted or was deactivated: each answer the close cut is logged in the registry
        as an interrupted request now (their file, the only other place it lives, may be
        deleted before any recovery reads it), and marked interrupted as recovery marks
        it, so that a member reactivated later is not counted twice for it; their next
        recovery asks for it again, as after a stop — unless not ``resumed`` (a
        deactivation: the recovery after a reactivation ends the turn, so no note says it
        is asked for again). Awaited: the rows are committed before the file can go."""
        try:
            cut = await self.store.cut_requests()
            for model, model_id, sent_at in cut:
                await self.log_request(f"{random.getrandbits(128):032x}", None, model, [], [], None, None, time.perf_counter(),
                                       payload=False, status="interrupted", model_id=model_id, sent_at=sent_at)
            if cut and not resumed:
                await self.store.mark_interrupted_streams()
            elif cut:
                await self.store.mark_interrupted_streams(
                    RESUMED_NOTE, reason_json("answer_resumed"),
                    give_up=(RESUME_LIMIT, RESUME_GIVEN_UP.format(times=RESUME_LIMIT + 1), lambda times: reason_json("resume_limit", {"times": times})),
                )
            await self.flush_logs()
        except Exception:  # the rows stay streaming in the file: a later recovery counts them
            log.exception("member %s: the requests their lock cut could not be logged", self.member_id)

    async def _needs_work(self, conversation_id: str) -> bool:
        if await self._history_needs_work(conversation_id):
            return True
        # Queued messages start their turn, unless the answer before them was given up
        # (cut off at start after start): they wait behind its Retry. Answered now, they
        # would make that failure no longer the last turn, and Retry could not ask again.
        return bool(await self.store.queued(conversation_id)) and not await self._given_up(conversation_id)

    async def _given_up(self, conversation_id: str) -> bool:
        """Whether the conversation ends in an answer recovery gave up (``resume_limit``)."""
        history = await self.store.history((await self.store.root_frame(conversation_id)).id)
        last = history[-1] if history else None
        if last is None or last["role"] != "assistant" or last["status"] != "error" or not last.get("reason"):
            return False
        reason = last["reason"]
        return (json.loads(reason) if isinstance(reason, str) else reason).get("code") == "resume_limit"

    async def _history_needs_work(self, conversation_id: str) -> bool:
        """Whether the stored conversation is unfinished (the inbox aside)."""
        if await self.store.open_frames(conversation_id):
            return True
        frame = await self.store.root_frame(conversation_id)
        history = await self.store.history(frame.id)
        if not history:
            return False
        last = history[-1]
        if last["role"] == "user":
            # Unanswered — unless its turn failed before any model answered, as recorded
            # by an earlier version (an error note): that turn ended, it was not interrupted.
            return not await self.store.failed_before_answer(frame, last["id"])
        return last["role"] == "assistant" and (bool(unfinished_calls(last)) or last["status"] == "interrupted")

    async def regenerate(self, conversation_id: str) -> None:
        """Answer the member's last message again; the answer it had is kept as an
        earlier version (``show_version`` flips back)."""
        frame = await self._idle_root(conversation_id)  # refused before any run is cancelled
        if not await self.store.answer_to_keep(frame):
            raise ChatError("the last message of this conversation has no answer to regenerate", code="nothing_to_regenerate", status=409)
        await self._leave_branch(conversation_id)
        frame = await self._idle_root(conversation_id)
        with self._turn_after(conversation_id):  # no await since the check: a send now queues behind this
            if not await self.store.keep_as_version(frame):
                raise ChatError("the last message of this conversation has no answer to regenerate", code="nothing_to_regenerate", status=409)
            log.info("member %s: the member regenerates an answer", self.member_id)
            self.branch_changed(conversation_id, "regenerate")

    async def edit(self, conversation_id: str, message_id: int, text: str) -> int:
        """Edit one of the member's messages and continue from it: the conversation from
        that message on is kept as an earlier version (a branch to flip back to)."""
        await self._idle_root(conversation_id)  # refused before any run is cancelled
        await self._leave_branch(conversation_id)
        frame = await self._idle_root(conversation_id)
        with self._turn_after(conversation_id):  # no await since the check: a send now queues behind this
            new_id = await self.store.edit_message(frame, message_id, text)
            if new_id is None:
                raise ChatError("no such message of yours in this conversation", code="message_not_found", status=404)
            if not new_id:
                raise ChatError("this message was already summarised by a compaction: it can no longer be edited", code="message_compacted", status=409)
            log.info("member %s: the member edits a message and continues from it", self.member_id)
            self.branch_changed(conversation_id, "edit", message_id=new_id, edited_id=message_id)
        return new_id

    async def _leave_branch(self, conversation_id: str) -> None:
        """A Regenerate or an Edit set aside the answer that started the conversation's
        background runs: they are cancelled, and what finished and waits for a
        continuation is discarded, as a Stop does (``stop``). Else a run's completion
        starts a continuation on the new branch about a task its history never asked
        for, and the member gets a reply they did not ask for either. The runs do not
        record which answer spawned them before their frame opens, so every background
        run of the conversation goes, as with a Stop. Called before the branch is
        written, outside ``_turn_after``: a send's turn must follow that write with no
        await between (a send queued behind it would start its own turn first); and
        only writing when something is to be written, so a locked file does not hold
        the Regenerate before it is marked as starting."""
        await self.subagents.cancel_conversation(conversation_id, suppress_continuation=True, background_only=True)
        if await self.subagents.store.next_due(conversation_id) is not None:
            await self.subagents.discard_waiting(conversation_id)

    async def show_version(self, conversation_id: str, variant: int) -> None:
        frame = await self._idle_root(conversation_id)
        if not await self.store.show_version(frame, variant):
            raise ChatError("no such version in this conversation", code="version_not_found", status=404)
        self.branch_changed(conversation_id, "version", variant=variant)

    async def _idle_root(self, conversation_id: str) -> Frame:
        """The root frame of a conversation whose turn has ended, nothing waiting on it."""
        await self.conversation(conversation_id)
        if any(a["conversation_id"] == conversation_id for a in await self.store.pending_approvals()):
            raise ChatError("an approval in this conversation is still waiting for an answer", code="approval_pending", status=409)
        frame = await self.store.root_frame(conversation_id)
        # Checked after the last await: the caller marks its write ``starting`` next.
        if self.running(conversation_id):
            raise ChatError("a turn is running in this conversation", code="turn_running", status=409)
        return frame

    async def retry(self, conversation_id: str) -> None:
        """The member's Retry on a turn that failed: its failed answer goes, and the turn
        runs again for the member's last message."""
        await self.conversation(conversation_id)
        # A turn its conversation's source refuses (the project was deleted, the member
        # left it) fails again at once: refused here, in the source's words, rather than
        # accepted and failed the same way. A member let back in may retry.
        try:
            await self.chat.source_context(self, conversation_id)
        except AgentError as exc:
            raise ChatError(str(exc), code=exc.code or "chat_refused", status=409, values=exc.values) from None
        frame = await self.store.root_frame(conversation_id)
        if self.running(conversation_id):
            raise ChatError("a turn is running in this conversation", code="turn_running", status=409)
        with self._turn_after(conversation_id):  # no await since the check: a send now queues behind this
            if not await self.store.take_back_failure(frame):
                raise ChatError("the last turn of this conversation did not fail", code="turn_not_failed", status=409)
            log.info("member %s: the member retries a failed turn", self.member_id)
            self.branch_changed(conversation_id, "retry")

    # -- what a turn needs --------------------------------------------------------------------

    def may_talk_with(self, agent_id: str) -> bool:
        """Whether the member's current role lets them go on talking with ``agent_id``
        (an unknown agent: no)."""
        try:
            agent = self.agents.get(agent_id)
        except AgentError:
            return False
        return may_start_agent(self.member, agent.id, agent.kind)

    def check_agent(self, agent: AgentDefinition, *, via: str) -> None:
        """Refuse (``ChatForbidden``, with an audit line) a conversation with an agent
        the member's current role does not let them start: a chat agent the role does
        not list, a project's agent without ``projects.chat``."""
        if not may_start_agent(self.member, agent.id, agent.kind):
            what = "action:projects.chat" if agent.kind == "project" else f"agent:{agent.id}"
            audit.denied(self.member_id, what, via=via)
            if agent.kind == "project":
                raise ChatForbidden("your role does not include project chat", code="project_chat_forbidden")
            raise ChatForbidden(f"your role does not let you talk with the agent {agent.id!r}", values={"agent": agent.id})

    def offered_tools(self, agent: AgentDefinition, member: Member | None = None, depth: int = 0) -> list[RegisteredTool]:
        """The tools of a round, from the member as now known (pushed on every change
        of their role, grants or active flag: ``ChatService.access_changed``) and the
        plugins' flags: memory only, asked every round. ``member``: as this member was
        (to tell whether a request already sent offered the same tools). ``depth``: the
        frame's, 0 for the conversation's own agent."""
        if not agent.allow_tools:
            return []
        member = member or self.member
        # get_skill is the agent's skills' own tool (seed 004 §2.1): offered with them
        # whatever its tool patterns say, and never without them. execute_task by the
        # one rule the Helpers page shows too (``ChatService.offers_delegation``).
        delegates = self.chat.offers_delegation(agent, depth)

        def offers(name: str) -> bool:
            if name == SKILL_TOOL:
                return bool(agent.skills)
            if name == DELEGATE_TOOL:
                return delegates
            return agent.offers(name)

        fixed = self.core.catalog.usable_tools(member, [t for t in self.chat.tools.all() if offers(t.name)])
        # Plugins' per-member tools, by the same rule as registered tools: granted, and
        # the plugin running (the rule the pages tell the member, too).
        return fixed + self.chat.member_tools_offered(agent, member)

    async def _prepare_prompt(self, frame: Frame, agent: AgentDefinition) -> None:
        """A new conversation's frozen prefix, built as it is created rather than by its
        first message: the injected notes, the profile and the source's context are read
        off the path of that message's first token (~1-3 ms under load, most of the tail
        of time to first token in the chat benchmark). The conversation has started:
        its notes are those of now. A slow context provider does not hold the creation
        up for more than ``PREPARE_PROMPT_SECONDS``."""
        try:
            async with asyncio.timeout(PREPARE_PROMPT_SECONDS):
                await self.system_prompt(frame, agent)
        except Exception as exc:  # the first turn builds it, and fails there if it must
            log.info("the prompt of a new conversation was not built ahead: %s", type(exc).__name__)

    async def system_prompt(self, frame: Frame, agent: AgentDefinition) -> str:
        """Frozen per (conversation, agent) and rebuilt only after 20 minutes idle: the
        prefix is the head of every provider's cache key, so rebuilding it each round
        would make every request a full cache miss (seed 001)."""
        context = await self.chat.source_context(self, frame.conversation_id)
        key = (frame.conversation_id, agent.id, context)
        cached = self._prefix.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[1] < PREFIX_TTL_SECONDS:
            self._prefix[key] = (cached[0], now)
            await self._mark_outside_notes(frame, self._outside_notes.get(key, ()))
            return cached[0]
        text = agent.prompt.replace("<!-- USER_PROFILE -->", await self._profile()) + (f"\n\n{context}" if context else "")
        for marker, value in self.prompt_substitutions.get(frame.conversation_id, {}).items():
            text = text.replace(f"<!-- {marker} -->", value)
        injected, outside = await self._injected_memory(agent)
        text += injected + self._skill_index(agent)
        for stale in [k for k, (_, used) in self._prefix.items() if now - used >= PREFIX_TTL_SECONDS]:
            del self._prefix[stale]  # rebuilt anyway if used again: not kept for every conversation ever seen
            self._outside_notes.pop(stale, None)
        self._prefix[key] = (text, now)
        self._outside_notes[key] = outside
        await self._mark_outside_notes(frame, outside)
        return text

    async def _mark_outside_notes(self, frame: Frame, paths: tuple[str, ...]) -> None:
        """The frame's prompt holds shared notes another member may have written: its
        context holds outside text (check E2), before its first request is sent."""
        if paths:
            await self.store.mark_untrusted(frame.id, "shared_note", {"path": paths[0]})

    async def _others_write_shared_memory(self) -> bool:
        """Whether a member other than this one may change the shared notes. The pool
        keeps no author per note, so an injected shared note counts as outside text
        whenever someone else could have written it (conservative: an admin, or a role
        holding ``memory.shared.write``, enabled or not)."""
        return any(m.id != self.member_id and allowed(m, SHARED_WRITE) for m in await self.core.users.list())

    def _skill_index(self, agent: AgentDefinition) -> str:
        """The agent's skills by name and description; their texts are read with
        get_skill when a task calls for one, so a long skill costs nothing until then."""
        skills = self.skills_of(agent)
        if not skills:
            return ""
        lines = [f"- {skill.name}" + (f": {skill.description}" if skill.description else "") for skill in skills]
        return "\n\n## Skills\nRead a skill with get_skill before a task it fits. Yours:\n" + "\n".join(lines)

    async def _injected_memory(self, agent: AgentDefinition) -> tuple[str, tuple[str, ...]]:
        """The notes the agent's metadata names, read once with the rest of the frozen
        prefix. A write from elsewhere stays invisible until the prefix is rebuilt, so
        the header says so and points at read_file (seed 001, "Memory injection").
        With the text, the shared notes in it that another member may have written
        (``_others_write_shared_memory``): outside text for the approval gate."""
        notes = []
        outside: list[str] = []
        for path in agent.inject_memory:
            content = await self.core.memory.read_path(self.member_id, path)
            if content is None:  # missing, locked or not allowed: nothing to show
                continue
            if len(content) > INJECTED_NOTE_CHARS:
                content = content[:INJECTED_NOTE_CHARS] + "\n[… cut here; read the whole note with read_file]"
            notes.append(f"### {path}\n{content.strip()}")
            memory = classify_memory(path)
            if memory is not None and memory[0] == SHARED_ROOT and content.strip():
                outside.append(path)
        if not notes:
            return "", ()
        if outside and not await self._others_write_shared_memory():
            outside = []
        return (
            "\n\n## Memory notes (loaded when this conversation started)\n"
            "These copies may be stale: a note changed since then (in another conversation or by"
            " another member) is not shown here. Read the file again before relying on a detail.\n\n"
            + "\n\n".join(notes)
        ), tuple(outside)

    async def _profile(self) -> str:
        language = self.member.locale or await self.core.default_locale()
        return render_profile(self.member, "About the member you are talking with:", language)

    async def log_request(
        self,
        request_id: str,
        frame: Frame | None,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        turn: ModelTurn | None,
        error: ModelError | None,
        started: float,
        *,
        payload: bool = True,
        status: str | None = None,
        model_id: str | None = None,
        sent_at: str | None = None,
    ) -> None:
        """Metadata to the registry; bodies only to the member's own file. Written in
        the background: nothing the member sees waits for the log (closing the runtime
        does, ``flush_logs``). ``payload`` False: the bodies go with the round's answer
        (``finish_assistant``). ``status``: a request with neither an answer nor an
        error, cut short (``stopped``, ``interrupted``: recovery's, with no frame and no
        timing of its own). The row also rides in the member's next commit of history
        until the registry has it (``store.RequestOutbox``): a crash while the registry
        gathers rows loses none. Every row is dated when its request was sent, so the
        usage page's days agree however it ended (an answer finishing after midnight
        counted on the next day, the same request cut by a crash on the day it was
        sent): ``started`` (``perf_counter``) when the caller sent it, ``sent_at`` when
        a request recovery logs was sent."""
        elapsed = time.perf_counter() - started
        latency = None if frame is None else int(elapsed * 1000)
        row = (
            request_id, self.member_id, model, status or ("error" if error else "ok"),
            None if status else error.status if error else 200,
            turn.tokens_in if turn else None, turn.tokens_out if turn else None, latency,
            turn.first_token_ms if turn else None, model_id,
        )
        at = sent_at or registry_time(seconds_ago=max(elapsed, 0.0))
        self.store.outbox.add(request_id, json.dumps({"row": row, "at": at}))

        async def write() -> None:
            try:
                await self.chat.request_log.add(row, at)
            except Exception as exc:
                # Never only logged: the row stays in the outbox, is committed into the
                # member's file now and is written again (the log errs toward over-counting).
                log.error("request log of member %s could not be written (%s: %s); the row is kept in their file and written"
                          " once the registry can", self.member_id, type(exc).__name__, exc)
                self.store.outbox.stranded(request_id)
                await self._keep_stranded()
            else:
                self.store.outbox.logged(request_id)
                if self.store.outbox.stranded_entries():
                    self._resend_soon.set()  # the registry writes again
            if not payload:
                return
            try:
                response = None
                if turn is not None:
                    response = {"content": turn.content, "reasoning": turn.reasoning, "tool_calls": [c.__dict__ for c in turn.tool_calls]}
                elif error is not None:
                    response = {"error": str(error), "status": error.status}
                request_text, response_text = await asyncio.to_thread(
                    lambda: (json.dumps({"messages": messages, "tools": tools}), None if response is None else json.dumps(response))
                )
                await self.store.log_payload(request_id, frame.conversation_id, request_text, response_text)
            except Exception:
                log.exception("request log of member %s could not be written", self.member_id)

        self.log_in_background(write())

    async def _keep_stranded(self) -> None:
        """A row the registry failed to write: committed into the member's file (written
        before anything else may be, the server's stop included), and the resender
        started. A file that fails too is tried again by the resender."""
        try:
            await self.store.keep_outbox()
        except Exception as exc:
            log.warning("member %s: a request log row the registry lacks could not be kept in their file yet (%s: %s); tried again",
                        self.member_id, type(exc).__name__, exc)
        self._start_resender()

    def _start_resender(self) -> None:
        if not self.closed and (self._resender is None or self._resender.done()):
            self._resender = asyncio.create_task(self._resend_stranded(), name=f"request-log-resend:{self.member_id}")

    async def _resend_stranded(self) -> None:
        """Write what a full disk refused, until all of it is written: the request log
        rows the registry lacks, and the answers a turn the disk stopped left streaming
        (``_unsettled``; without this they streamed until the member's next send or the
        next start). After a growing pause, or at once when the registry wrote another
        row of this member's."""
        delay = RESEND_FIRST_SECONDS
        while self.store.outbox.stranded_entries() or self._unsettled:
            try:
                await asyncio.wait_for(self._resend_soon.wait(), delay)
            except TimeoutError:
                pass
            self._resend_soon.clear()
            logged = not self.store.outbox.stranded_entries() or await self._resend_once()
            settled = not self._unsettled or await self._settle_left_once()
            if not (logged and settled):
                delay = min(delay * 2, RESEND_LAST_SECONDS)

    async def _resend_once(self) -> bool:
        """One try: the rows into the member's file if they are not there yet, then to
        the registry by request id (a row it has is left as it is: never counted twice).
        Whether the registry has them all now."""
        try:
            await self.store.keep_outbox()
        except Exception as exc:
            log.warning("member %s: request log rows the registry lacks could not be kept in their file yet (%s)", self.member_id, type(exc).__name__)
        stranded = self.store.outbox.stranded_entries()
        if not stranded:
            return True
        try:
            await self.chat.request_log.restore([json.loads(entry) for _, entry in stranded])
        except Exception as exc:
            log.warning("member %s: %d request log row(s) still wait for the registry (%s: %s); tried again",
                        self.member_id, len(stranded), type(exc).__name__, exc)
            return False
        for request_id, entry in stranded:
            self.store.outbox.logged(request_id, entry)
        log.info("member %s: %d request log row(s) the registry had failed to write are written now", self.member_id, len(stranded))
        return True

    def request_body(self, frame: Frame, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """A round's request body as the request log keeps it. A round sends the
        previous round's messages with a few appended, so the body is what it adds to
        the frame's previous logged request (``continues``, ``from``), and
        ``ConversationStore.request_body`` joins it back together: logged whole, every
        round wrote the whole history again (300 KiB at 1,000 messages, ~10 ms of
        commits and WAL checkpoints per round). The tools, the same round after round,
        are left out when they equal the continued request's."""
        previous = self._logged_requests.get(frame.id)
        if previous is not None and len(previous[1]) <= len(messages) and messages[: len(previous[1])] == previous[1]:
            body = {"continues": previous[0], "from": len(previous[1]), "messages": messages[len(previous[1]):]}
            if tools != previous[2]:
                body["tools"] = tools
            return body
        return {"messages": messages, "tools": tools}

    def request_logged(self, frame: Frame, request_id: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
        """The frame's latest request is in the log (committed): the next one continues it."""
        self._logged_requests.pop(frame.id, None)
        self._logged_requests[frame.id] = (request_id, messages, tools)
        while len(self._logged_requests) > HISTORY_CACHE_FRAMES:  # the most recent frames, like the kept histories
            del self._logged_requests[next(iter(self._logged_requests))]

    def log_in_background(self, write: Awaitable[None]) -> None:
        """A request log write nothing the member sees waits for; closing the runtime
        does (``flush_logs``). A failure is logged, never raised."""

        async def guarded() -> None:
            try:
                await write
            except Exception:
                log.exception("request log of member %s could not be written", self.member_id)

        task = asyncio.ensure_future(guarded())
        self._logging.add(task)
        task.add_done_callback(self._logging.discard)

    async def flush_logs(self) -> None:
        """The request log's rows written now: to the registry, or, the registry still
        failing, into the member's file, for their next recovery to give it."""
        if self._logging:
            self.chat.request_log.hurry()
            await asyncio.gather(*list(self._logging), return_exceptions=True)
        if self.store.outbox.stranded_entries():
            await self._resend_once()

    async def after_round(self, frame: Frame, turn: ModelTurn) -> None:
        """Automatic compaction, only when configured (off by default: rewriting history
        costs a full prompt-cache miss)."""
        limit = self.chat.compact_after_tokens
        if limit and frame.depth == 0 and turn.tokens_in and turn.tokens_in > limit and not turn.tool_calls:
            # The answer is complete and written: a compaction that fails does not fail
            # its turn (that stranded the messages queued behind it, and Retry had no
            # failure to take back). The history stays whole; the next answer past the
            # limit asks for the summary again.
            try:
                await self._compact_frame(frame)
            except ChatError as exc:  # the model's refusal: said by its kind, no traceback to read
                # Its status or code only, as the kernel logs a failed answer: the provider's
                # words (kept for the member, who reads their own /compact failure) may quote
                # the very messages it was asked to summarise, and the admin reads the log.
                cause = exc.__cause__
                kind = model_failure(cause) if isinstance(cause, ModelError) else exc.code
                log.warning("member %s: automatic compaction failed (%s); tried again after a later answer", self.member_id, kind)
            except Exception:
                log.exception("member %s: automatic compaction failed; tried again after a later answer", self.member_id)

    async def compact(self, conversation_id: str) -> bool:
        await self.conversation(conversation_id)
        if self.running(conversation_id):
            raise ChatError("a turn is running; compact after it ends", code="turn_running", status=409)
        return await self._compact_frame(await self.store.root_frame(conversation_id))

    async def _compact_frame(self, frame: Frame) -> bool:
        history = await self.store.history(frame.id)
        # A turn that failed is left out of the summary and follows it: folded in, the
        # member's unanswered message would be summarised, never answered, and its Retry
        # gone — while compacting is what a member does after a context-length failure.
        failed = await self.store.failed_exchange(frame)
        if failed:
            history = [m for m in history if m["id"] < failed[0]]
        if len([m for m in history if m["role"] != "summary"]) < 2:
            return False
        conversation = await self.store.conversation(frame.conversation_id)
        agent = self.agents.get(conversation["agent_id"]) if conversation else None
        pin = await self.pin(frame, agent) if agent else await self.store.chosen_model(frame.conversation_id)
        candidates = await self.chat.models.candidates(pin=pin)
        if not candidates:
            raise ChatError("no model is configured", code="no_model", status=409)
        wire = project("You write precise summaries.", history) + [{"role": "user", "content": COMPACT_PROMPT}]
        last_error: ModelError | None = None
        for choice in candidates:
            # A request of the request log like a round's (README "Models and chat"). No
            # streaming row stands for it, so its row is written ahead, as interrupted,
            # into the member's file before it is sent (a crash while it is out: recovery
            # counts it); its own row replaces that one when it ends.
            request_id = f"{random.getrandbits(128):032x}"
            await self.store.ahead(request_id, json.dumps({
                "row": (request_id, self.member_id, choice.model, "interrupted", None, None, None, None, None, choice.id), "at": registry_time(),
            }))
            started = time.perf_counter()
            try:
                turn = await self.chat.clients.complete(choice, wire, [])
            except ModelError as exc:
                await self.log_request(request_id, frame, choice.model, wire, [], None, exc, started, payload=False, model_id=choice.id)
                last_error = exc
                if exc.retriable:
                    continue
                break
            except asyncio.CancelledError:
                if not self.closed:  # a Stop of the turn it ended; one the server's stop cut stays interrupted
                    await self.log_request(request_id, frame, choice.model, wire, [], None, None, started, payload=False, status="stopped", model_id=choice.id)
                raise
            await self.log_request(request_id, frame, choice.model, wire, [], turn, None, started, payload=False, model_id=choice.id)
            summary = turn.content.strip()
            if summary.startswith(SUMMARY_PREFIX.strip()):
                summary = summary[len(SUMMARY_PREFIX.strip()):].strip()
            await self.store.add_summary(frame, summary, before=failed)
            self.emit("compacted", frame.conversation_id)
            self.core.buses.chat.publish(ChatEvent("compaction_done", self.member_id, frame.conversation_id))
            return True
        raise ChatError(f"compaction failed: {last_error}", code="compaction_failed", status=502) from last_error

    # -- scheduled prompts -----------------------------------------------------------------

    async def _run_scheduler(self) -> None:
        """Sleeps until the next job is due, or until one is scheduled: a member with
        nothing scheduled costs no read of their file (50 idle members polling every
        few seconds kept the database threads busy for nothing)."""
        while not self.closed:
            self.store.jobs_changed.clear()  # one scheduled while this pass runs wakes the next sleep
            try:
                await self.deliver_due_jobs()
                wait = seconds_until(await self.store.next_job_due())
            except Exception:
                log.exception("scheduled prompts of member %s failed", self.member_id)
                wait = SCHEDULER_RETRY_SECONDS
            try:
                async with asyncio.timeout(wait):
                    await self.store.jobs_changed.wait()
            except TimeoutError:
                pass

    async def deliver_due_jobs(self) -> int:
        if self.core.safe_mode:
            return 0
        now = schedules.clock.now()
        jobs = await self.store.due_jobs(schedules.iso(now))
        if jobs:  # a scheduled prompt acts for the member now: as they are now
            self.member = await self.core.users.get(self.member_id)
        for job in jobs:
            if not allowed(self.member, "tools.schedule"):
                # Scheduled while the role allowed it; withdrawn since: it is not delivered.
                audit.denied(self.member_id, "action:tools.schedule", via="scheduled_prompt")
                await self.store.set_job(job["id"], "cancelled")
                await self.notify(job["conversation_id"], "A scheduled prompt was not delivered: access to scheduling was withdrawn.")
                continue
            if job["cron"]:
                await self.deliver_recurring(job, now)
                continue
            await self.store.set_job(job["id"], "running")
            key = f"{schedules.SCHEDULED_KEY}{job['id']}"
            try:
                await self.send(job["conversation_id"], f"{await self._scheduled_marker()} {job['prompt']}", key, unattended=True)
            except ChatError:
                await self.store.set_job(job["id"], "failed")
                continue
            await self.store.set_job(job["id"], "done")
            self._watch_answer(job["id"], job["conversation_id"], key, int(job.get("runs") or 0) + 1)
        return len(jobs)

    def _watch_answer(self, job_id: str, conversation_id: str, key: str, run: int) -> None:
        """A delivered prompt's run reads "done"; once its turn ends, "failed" if the
        answer ended in an error (the model failed): the Schedules page shows each job's
        last result, and "done" over a failed answer hid that it needs looking at.
        Watched beside the scheduler, not in its pass: the turn may run long (a turn of
        the member's own the prompt queued behind), and holds up no other prompt."""

        async def watch() -> None:
            try:
                turn = self.turn_task(conversation_id)
                if turn is not None and not turn.done():
                    await asyncio.wait([turn])  # its end, however it ended: a Stop is not this task's
                if not self.closed and await self.store.answer_status(key) == "error":
                    await self.store.job_answer_failed(job_id, run)
            except Exception:
                log.exception("member %s: the result of scheduled prompt %s could not be recorded", self.member_id, job_id)

        task = asyncio.ensure_future(watch())
        self._watching.add(task)
        task.add_done_callback(self._watching.discard)

    async def _scheduled_marker(self) -> str:
        """The marker before a scheduled prompt, in the member's language: it is stored
        in their conversation, where they read it (README "Scheduled prompts")."""
        language = self.member.locale or await self.core.default_locale()
        return self.core.strings.lookup("core.schedules.marker", language) or "[Scheduled]"

    async def deliver_recurring(self, job: dict[str, Any], now: dt.datetime) -> None:
        """One occurrence of a recurring job, however many were missed (the catch-up
        rule, ``skald_host.core.schedules``): its key names the occurrence, so a crash
        before the next one is written delivers it again and stores it once."""
        occurrence = job["due_at"]
        if job["status"] != "running":
            await self.store.set_job(job["id"], "running")
        key = f"{schedules.SCHEDULED_KEY}{job['id']}:{occurrence}"
        try:
            await self.send(job["conversation_id"], f"{await self._scheduled_marker()} {job['prompt']}", key, unattended=True)
            result = "done"
        except ChatError:
            result = "failed"
        try:
            recurrence = schedules.Recurrence(job["cron"], job["timezone"] or "UTC")
            following = schedules.iso(schedules.following(recurrence, schedules.parse_iso(occurrence), now))
        except (schedules.ScheduleError, ValueError):  # its zone vanished from tzdata: it stops, visibly
            await self.store.set_job(job["id"], "failed")
            return
        await self.store.job_ran(job["id"], result, following, occurrence, schedules.iso(now))
        if result == "done":
            self._watch_answer(job["id"], job["conversation_id"], key, int(job.get("runs") or 0) + 1)

def render_profile(member: Member, heading: str, language: str) -> str:
    """A member's profile for a system prompt: name, age, sex, language, notes. The
    conversation's own member under ``<!-- USER_PROFILE -->``; a reviewed member's under
    the review's own marker (seed 001 "Per-pass prompt substitutions"). ``language`` is
    the one they read the shell in: their own, else the instance's."""
    m = member
    lines = [f"Name: {m.display_name or m.username}"]
    if m.birthdate:
        born = dt.date.fromisoformat(m.birthdate)
        today = dt.date.today()
        age = today.year - born.year - ((today.month, today.day) < (born.month, born.day))
        lines.append(f"Date of birth: {m.birthdate} (age {age})")
    else:
        lines.append("Date of birth: unknown")
    lines.append(f"Sex: {m.sex or 'not specified'}")
    lines.append(f"Preferred language: {language}")
    if m.notes:
        lines.append(f"Notes: {m.notes}")
    return heading + "\n" + "\n".join(lines)


def seconds_until(due_at: str | None) -> float:
    """How long the scheduler sleeps before the job due at ``due_at`` (ISO, UTC): a
    job already due (its delivery failed) is retried after a pause, never in a loop."""
    if due_at is None:
        return SCHEDULER_MAX_SLEEP
    try:
        due = dt.datetime.fromisoformat(due_at.replace("Z", "+00:00"))
    except ValueError:
        return SCHEDULER_RETRY_SECONDS
    left = (due - schedules.clock.now()).total_seconds()
    return SCHEDULER_RETRY_SECONDS if left <= 0 else min(left, SCHEDULER_MAX_SLEEP)

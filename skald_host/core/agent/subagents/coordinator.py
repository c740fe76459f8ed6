"""One member's sub-agent runs (seed 004 §3, §4, §6, §7): the coordinator decides and
records, the kernel runs the frames.

Foreground: resolve every target (the graph and the limits refuse before any row is
written, §8.7/§8.8), accept the batch as queued rows in one transaction, put a named
caller in ``waiting_delegates`` (its step permit given back while it waits), run the
delegated runs concurrently, answer in request order, and bring the caller back to
``running`` however the wait ended (§8.16).

Background (the root only): a completion slot is reserved with the rows; the run's
terminal commit turns it into a completion event in the same transaction; the inbox
worker claims due events and hands them to a continuation turn of the conversation,
whose hidden trigger is written in the transaction that consumes them. A wake-up is
only a hint (§8.4): the worker also looks every ``recheck_secs`` — in the file, unless
nothing was written to it since a look found no event waiting (an idle member's file is
not read every few seconds for ever; events only appear or come due by a write, or by a
backoff the look saw).

The coordinator reaches its runtime through a weak reference (§8.10): the runtime
owns it, and a runtime that is gone must not be kept alive by its own helper.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
import weakref
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Sequence

from skald_hookspecs.types import ToolError
from skald_host.core.agent.definitions import AgentDefinition, AgentError
from skald_host.core.agent.subagents.catalog import Generation, signal_contract
from skald_host.core.agent.subagents.graph import DelegationRefused, resolve
from skald_host.core.agent.subagents.limits import CONTINUATION_TOOLS, OrchestrationLimits, run_limits
from skald_host.core.agent.subagents.runs import (
    TERMINAL, Accepted, InboxFull, NewRun, RunStore, TreeFull, asks_for_continuation, consume, consume_pending, due_events, mark_started,
    mark_cut, new_id, recover,
)
from skald_host.core.agent.kernel import NOT_JOINED, Abandoned, Ending, FrameFailed, Pending
from skald_host.core.agent.store import Frame, insert_trigger, reason_json
from skald_host.core.faults import crash_point
from skald_host.core.refusal import ToolRefusal

if TYPE_CHECKING:
    from skald_host.core.agent.kernel import Scope
    from skald_host.core.agent.runtime import MemberRuntime

log = logging.getLogger(__name__)

CONTINUATION_ORIGIN = "agent_continuation"
#: A steer event's trigger, written into the running turn (not a continuation: the
#: turn keeps its tools).
STEER_ORIGIN = "agent_steer"
#: A failed delivery is tried again after this long, doubled per attempt.
BACKOFF_SECONDS = 1.0


@dataclass(frozen=True)
class RunContext:
    """What a sub-agent's frame carries (seed 004 §2.3)."""

    run_id: str
    execution_id: str
    tree_id: str
    ancestry: tuple[str, ...]  # the agents of the runs above and this one's own
    depth: int
    mode: str
    limits: dict[str, int]
    signal_contract: dict[str, Any] | None
    #: Its place in its call's batch: the chat shows a batch's boxes in call order,
    #: live as after a reload, however their starts interleave.
    index: int = 0


def clip_result(text: str, limit: int, run_id: str) -> str:
    """§8.11: the model reads at most ``limit`` characters, and is told where the rest
    is; the run row keeps every character. Python slices code points, so a clip never
    splits a character (the seed's UTF-8 boundary bug cannot happen here; the test
    checks it anyway)."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[result clipped at {limit} of {len(text)} characters; agent_task get_result {run_id} returns all of it]"


def continuation_agent(agent: AgentDefinition) -> AgentDefinition:
    """The conversation's agent with only the read-only tools it already offers."""
    return dataclasses.replace(agent, tools=tuple(name for name in CONTINUATION_TOOLS if agent.offers(name)))


def trigger_text(events: Sequence[dict[str, Any]]) -> str:
    """§4.5: one hidden message for a batch of inbox events, in claim order."""
    parts = ["[Background updates. This message comes from the host, not from the member; tell the member what came back.]"]
    for event in events:
        payload = json.loads(event["payload"])
        if event["event_type"] == "completion":
            body = payload.get("result") or ""
            if payload.get("clipped"):
                body += f"\n[clipped; agent_task get_result {event['run_id']} returns all of it]"
            outcome = f"Result:\n{body}" if payload["status"] == "completed" else f"Error: {payload.get('error') or payload['status']}"
            parts.append(
                f"Background task finished — agent {payload['agent']}, status {payload['status']}, run {event['run_id']}.\n"
                f"Task: {payload['task']}\n{outcome}"
            )
        else:
            parts.append(
                f"Background signal — run {event['run_id']}, severity {event['severity']}: {payload.get('summary', '')}"
                + (f"\nDetails: {json.dumps(payload['details'])}" if payload.get("details") is not None else "")
            )
    return "\n\n".join(parts)


@dataclass(eq=False)
class TurnMailbox:
    """The agent lane of one running root turn's mailbox (seed 004 §4.4): the steer
    events admitted into this turn and not yet in its history, each with the lease
    token that holds it. Its room is its own (``steer_mailbox_capacity``), apart from
    the member's queued messages, which wait for the next turn."""

    conversation_id: str
    capacity: int
    held: list[tuple[str, dict[str, Any]]] = dataclasses.field(default_factory=list)
    reserved: int = 0  # slots taken by admissions still being written
    closed: bool = False
    #: An admission into this turn was submitted: its close looks in the file for what
    #: the turn still holds (a turn nothing was admitted into closes without a write).
    admitting_began: bool = False
    #: One admission at a time; a round boundary waits for one under way.
    admitting: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    _turn_id: str | None = None

    @property
    def turn_id(self) -> str:
        """The id admissions are written under, made when the first one needs it: a
        random id costs a system call (the GIL let go on a busy host) on the path of
        every turn, and most turns admit nothing."""
        if self._turn_id is None:
            self._turn_id = new_id()
        return self._turn_id

    def reserve(self) -> bool:
        if self.closed or len(self.held) + self.reserved >= self.capacity:
            return False
        self.reserved += 1
        return True

    def free(self) -> int:
        return 0 if self.closed else max(0, self.capacity - len(self.held) - self.reserved)


@dataclass(eq=False)
class Steer:
    """What a round boundary takes from its turn's mailbox: the trigger's text and
    the write that puts it ahead of the next round's placeholder, consuming the events
    by their lease tokens in that same transaction."""

    frame: "Frame"
    held: list[tuple[str, dict[str, Any]]]
    mailbox: TurnMailbox

    def write(self, conn: Any) -> list[int]:
        message_id = insert_trigger(conn, self.frame, trigger_text([e for _, e in self.held]), STEER_ORIGIN)
        tokens: dict[str, list[int]] = {}
        for token, event in self.held:
            tokens.setdefault(token, []).append(event["id"])
        for token, ids in tokens.items():
            consume(conn, token, ids, message_id)  # raises LostLease: the round's write rolls back whole
        return [message_id]

    def delivered(self) -> None:
        """Committed: the events are the history's now, no longer the mailbox's."""
        self.mailbox.held = [h for h in self.mailbox.held if h not in self.held]


class _Existing(Exception):
    """Raised in ``_single``'s transaction to roll its frame back: the run exists."""


class Permits:
    """Step permits: a run holds one of the host's, one of its member's and one of its
    conversation's while it runs; a caller waiting for delegated runs gives them back
    (seed 004 §3.1 step 3), and so does a run waiting for its member's answer to a card
    (``SubagentCoordinator.waiting``). The member's share is the host's own addition: with the
    host's alone, one member's runs could hold every permit and stall everyone else's
    delegations for as long as they ran."""

    def __init__(self, host: asyncio.Semaphore, member: asyncio.Semaphore, session: asyncio.Semaphore) -> None:
        self.host, self.member, self.session = host, member, session

    async def acquire(self) -> None:
        taken: list[asyncio.Semaphore] = []
        try:
            for semaphore in (self.session, self.member, self.host):
                await semaphore.acquire()
                taken.append(semaphore)
        except BaseException:
            for semaphore in taken:
                semaphore.release()
            raise

    async def try_acquire(self) -> bool:
        """Take the permits only when all three are free now, never waiting: nothing
        yields between the look and the take (an unlocked ``Semaphore.acquire`` returns
        without suspending)."""
        if any(semaphore.locked() for semaphore in (self.session, self.member, self.host)):
            return False
        await self.acquire()
        return True

    def release(self) -> None:
        self.host.release()
        self.member.release()
        self.session.release()


@dataclass(eq=False)
class _HandedBack:
    """One run's permits given back while it waits (``SubagentCoordinator.waiting``):
    how many of its calls wait now (a round's calls run side by side: two approval
    cards, or a card beside an execute_task), and whether a take-back is under way.
    The permits are given back by the first call that waits and taken back by the
    last one's end, once each."""

    waiting: int = 0
    taking: bool = False


class SubagentCoordinator:
    def __init__(self, runtime: "MemberRuntime", limits: OrchestrationLimits, host_permits: asyncio.Semaphore) -> None:
        self._runtime = weakref.ref(runtime)
        self._member_id = getattr(runtime, "member_id", "?")
        self.limits = limits
        self.store = RunStore(runtime.store.db, generation=new_id())
        self._host_permits = host_permits
        self._member_permits = asyncio.Semaphore(limits.max_concurrent_runs_per_member)
        self._session_permits: dict[str, asyncio.Semaphore] = {}
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._wake = asyncio.Event()
        self._maybe_pending: set[str] = set()  # conversations that may have due inbox events
        self._quiet: set[str] = set()  # conversations that may hold quiet events (a cancelled run's), for their next turn
        self._due_now: set[str] = set()  # woken for: driven without a read first
        self._next_look = 0.0
        self._inbox_empty_at: int | None = None  # the file's ``changes`` when a look found no waking event
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self._mailboxes: dict[str, TurnMailbox] = {}  # the running root turn's, per conversation
        self._steer_hint: set[str] = set()  # conversations whose steer events may be pending
        self._tree_in_flight: dict[str, int] = {}  # single runs per tree whose accepting write may be under way
        self._handed_back: dict[str, _HandedBack] = {}  # runs whose permits are given back while they wait
        self._taking_back: set[asyncio.Task[None]] = set()  # a cancelled wait's take-backs (``waiting``)

    @property
    def runtime(self) -> "MemberRuntime":
        runtime = self._runtime()
        if runtime is None:
            raise RuntimeError("the member's runtime is gone")
        return runtime

    def permits(self, conversation_id: str) -> Permits:
        session = self._session_permits.setdefault(conversation_id, asyncio.Semaphore(self.limits.max_concurrent_runs_per_session))
        return Permits(self._host_permits, self._member_permits, session)

    @contextlib.asynccontextmanager
    async def waiting(self, scope: "Scope") -> AsyncIterator[None]:
        """A run that waits for something no step of its own brings — its helpers'
        answers (seed 004 §3.1 step 3), its member's answer to an approval or a
        question card — holds no permit while it waits: unanswered cards would
        otherwise hold every permit of the member (or of the host) until they expire,
        and every other delegation would wait as long. Afterwards it takes them again,
        written ``queued`` and announced as any run waiting for one is when none is
        free now, and ``running`` once it has them (§8.16: however the wait ended).
        The conversation's own agent holds no permit: nothing to give back."""
        run = scope.run
        if run is None:
            yield
            return
        permits = self.permits(scope.frame.conversation_id)
        state = self._handed_back.setdefault(run.run_id, _HandedBack())
        state.waiting += 1
        if state.waiting == 1 and not state.taking:  # a take-back under way gives them back when it has them
            permits.release()
        cancelled = False
        try:
            yield
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            state.waiting -= 1
            if state.waiting == 0 and not state.taking:
                state.taking = True
                # A task of its own, kept in ``_taking_back`` (``close`` ends what is left):
                # a Stop, the run's cancel or time limit, the server stopping does not
                # make the run wait for a permit to end, whether it came during the wait
                # or while the permits were being taken back (the run queued again). Its
                # runner gives its permits back as it ends; they are taken here once
                # free, so the count stays whole.
                taking = asyncio.ensure_future(self._take_back(scope, state, permits))
                self._taking_back.add(taking)
                taking.add_done_callback(self._taking_back.discard)
                if not cancelled:
                    await asyncio.shield(taking)

    async def _take_back(self, scope: "Scope", state: _HandedBack, permits: Permits) -> None:
        """``waiting``'s end, with ``state.taking`` set by its caller."""
        run = scope.run
        assert run is not None
        try:
            if not await permits.try_acquire():
                try:
                    if not self._closed and await self.store.queued_again(run.run_id, run.execution_id):
                        self.runtime.kernel.emit(scope.frame, "agent_queued", agent=scope.agent.id, run_id=run.run_id, mode=run.mode, index=run.index)
                except Exception:  # only what the run says while it waits: the permits are taken all the same
                    log.warning("member %s: run %s could not be marked queued", self._member_id, run.run_id, exc_info=True)
                await permits.acquire()
        finally:
            state.taking = False
        if state.waiting > 0:  # a call began waiting while they were taken: its end takes them back
            permits.release()
            return
        if self._handed_back.get(run.run_id) is state:
            del self._handed_back[run.run_id]
        if not self._closed:
            await self.store.running_again(run.run_id, run.execution_id)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Startup recovery (§6), then the inbox worker."""
        generation, limits = self.store.generation, self.limits
        report = await self.store.db.transaction(lambda c: recover(c, generation, limits.max_inbox_delivery_attempts, time.time()))
        if any(report.values()):
            log.info("member %s: sub-agent recovery: %s", self.runtime.member_id, report)
        self._maybe_pending.update(await self.store.due_conversations(float("inf")))
        self._quiet.update(await self.store.due_conversations(float("inf"), quiet=True))
        self._worker = asyncio.create_task(self._run_worker(), name=f"agent-inbox:{self.runtime.member_id}")
        return report

    async def close(self, cause: str = "shutdown") -> None:
        """Runs are cancelled as the runtime closes; nothing terminal is written for
        them (recovery at the next start makes them interrupted, exactly as a crash),
        only the cause of the cut (``shutdown``, ``locked``: ``runs.mark_cut``), so that
        a run cut by a sign-out is not said to have met a server that stopped."""
        self._closed = True
        tasks = list(self._tasks.values()) + ([self._worker] if self._worker else []) + list(self._taking_back)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        generation = self.store.generation
        try:
            await self.store.db.transaction(lambda c: mark_cut(c, generation, cause))
        except Exception:  # the file is gone or failing: recovery says "cut off" instead
            log.warning("member %s: the cause of the runs' cut could not be recorded", self.runtime.member_id)

    def wake(self, conversation_id: str | None = None) -> None:
        """Best effort (§4.6): losing one costs at most ``recheck_secs``."""
        if conversation_id is not None:
            self._maybe_pending.add(conversation_id)
            self._due_now.add(conversation_id)
            if conversation_id in self._mailboxes:
                self._steer_hint.add(conversation_id)
        self._wake.set()

    # -- the steer lane (§4.3/§4.4, §8.5/§8.6) ------------------------------------------

    def open_turn(self, conversation_id: str) -> TurnMailbox:
        """A root turn starts: steer events may be admitted into it from now on."""
        mailbox = TurnMailbox(conversation_id, self.limits.steer_mailbox_capacity)
        self._mailboxes[conversation_id] = mailbox
        if conversation_id in self._maybe_pending or conversation_id in self._quiet:  # anything pending already may steer it
            self._steer_hint.add(conversation_id)  # (else no claim on the path of every turn's first boundary)
        return mailbox

    async def close_turn(self, mailbox: TurnMailbox | None, outcome: str) -> None:
        """The turn ended (``ended``/``failed``), was stopped (``stopped``) or is being
        interrupted by the runtime closing (``interrupted``). What it was admitted and
        never took — found in the file by the turn's id, which the admission wrote —
        is released to pending, for the queue lane (steer degrades to queue, never
        dropped); discarded with the turn on a Stop (§8.6: a Stop discards the input
        the turn owns); left admitted when interrupted, for recovery to release at the
        next start, as after a crash. Idempotent."""
        if mailbox is None or mailbox.closed:
            return
        mailbox.closed = True
        if self._mailboxes.get(mailbox.conversation_id) is mailbox:
            del self._mailboxes[mailbox.conversation_id]
            self._steer_hint.discard(mailbox.conversation_id)
        mailbox.held = []
        if not mailbox.admitting_began or outcome == "interrupted":
            return
        if outcome == "stopped":
            await self.store.discard_turn(mailbox.turn_id)
        elif await self.store.release_turn(mailbox.turn_id, max_attempts=self.limits.max_inbox_delivery_attempts):
            self.wake(mailbox.conversation_id)

    async def admit_steer(self, conversation_id: str) -> int:
        """Two-phase admission into the running turn: claim (pending → leased, with a
        lease token), a slot in the turn's mailbox, then the DB admit (leased →
        admitted). Each failure gives the events back to pending and wakes the queue
        lane (§8.5). Claims no more than the mailbox has room for: what does not fit
        stays pending and reaches the next turn as a continuation. The admitted count."""
        mailbox = self._mailboxes.get(conversation_id)
        if mailbox is None:
            return 0
        async with mailbox.admitting:
            return await self._admit(mailbox)

    async def _admit(self, mailbox: TurnMailbox) -> int:
        conversation_id, limits = mailbox.conversation_id, self.limits
        if mailbox.free() == 0:
            return 0
        try:
            token, events = await self.store.claim(conversation_id, time.time(), limits.lease_secs, mailbox.free(), delivery="steer")
        except Exception:
            log.exception("member %s: claiming steer events failed; the queue lane delivers them", self._member_id)
            self.wake(conversation_id)
            return 0
        if not events:
            self._quiet.discard(conversation_id)
            return 0
        fits = [e for e in events if mailbox.reserve()]
        spill = [e["id"] for e in events[len(fits):]]
        admitted: list[int] = []
        try:
            if spill:  # the mailbox filled meanwhile: back to pending, for the queue lane
                await self.store.release(token, spill, backoff_secs=0, max_attempts=limits.max_inbox_delivery_attempts)
            if fits:
                mailbox.admitting_began = True
                admitted = await self.store.admit(token, [e["id"] for e in fits], mailbox.turn_id)
                if admitted:
                    crash_point("subagents.steer_admitted")  # durability tests: a SIGKILL with the event admitted into a live turn
        except Exception:
            log.exception("member %s: admitting steer events failed; the queue lane delivers them", self._member_id)
            await asyncio.shield(self.store.release(token, [e["id"] for e in fits], backoff_secs=0, max_attempts=limits.max_inbox_delivery_attempts))
            admitted = []
        finally:
            mailbox.reserved -= len(fits)
        if mailbox.closed:  # the turn ended while this was written: not its input any more
            if admitted:
                await self.store.release(token, admitted, backoff_secs=0, max_attempts=limits.max_inbox_delivery_attempts)
            admitted = []
        mailbox.held += [(token, e) for e in fits if e["id"] in admitted]
        if spill or len(admitted) < len(fits):
            self.wake(conversation_id)
        return len(admitted)

    def may_steer_opening(self, conversation_id: str) -> bool:
        """Whether a turn starting now may find events for its first request: a
        cancelled run's quiet end (``cancel_run``) waits for the next turn that runs."""
        return conversation_id in self._quiet

    async def steer(self, frame: "Frame") -> Steer | None:
        """The round boundary of a root turn asks its mailbox: the admitted events to
        write ahead of the next round (admitting what may be pending first). None:
        nothing (no DB access when nothing was signalled)."""
        mailbox = self._mailboxes.get(frame.conversation_id)
        if mailbox is None:
            return None
        if frame.conversation_id in self._steer_hint:
            self._steer_hint.discard(frame.conversation_id)
            await self.admit_steer(frame.conversation_id)
        elif mailbox.admitting.locked():
            async with mailbox.admitting:  # the worker's admission under way ends first
                pass
        if not mailbox.held:
            return None
        return Steer(frame, list(mailbox.held), mailbox)

    # -- delegation ------------------------------------------------------------------

    def generation(self) -> Generation:
        return self.runtime.subagent_generation()

    async def delegate(
        self, caller: "Scope", requests: Sequence[tuple[str, str]], *, mode: str = "foreground", asked: dict[str, Any] | None = None,
    ) -> list[str]:
        """Results in request order (foreground), or the accepted run ids (background)."""
        runtime = self.runtime
        if mode not in ("foreground", "background"):
            raise DelegationRefused("mode is foreground or background")
        if not requests:
            raise DelegationRefused("nothing to delegate")
        run: RunContext | None = caller.run
        depth = caller.depth + 1
        if depth > self.limits.max_tree_depth:
            raise DelegationRefused(f"sub-agents may nest at most {self.limits.max_tree_depth} levels deep")
        if mode == "background" and caller.depth != 0:
            raise DelegationRefused("only the conversation's own agent starts background runs; wait for the result here instead")
        generation = self.generation()
        caller_definition = None if run is None else caller.agent
        ancestry = run.ancestry if run is not None else ()
        # Every target is resolved before any row is written (§8.8), its model too:
        # a definition bound to a provider's model the instance does not offer now is
        # refused here, not as a failed run.
        definitions = [resolve(generation, caller_definition, agent_id, ancestry) for agent_id, _ in requests]
        for definition in {d.id: d for d in definitions if d.provider is not None}.values():
            try:
                await runtime.models_for(caller.frame, definition)
            except AgentError as exc:
                raise DelegationRefused(str(exc)) from None
        call_id = caller.call_id
        # One foreground run is accepted in the transaction that opens its frame
        # (``_single``), itself joined with its call's row when that is still unwritten;
        # a batch, or background runs, all together first.
        single = mode == "foreground" and len(requests) == 1
        settle = caller.settle if call_id else None
        if settle is not None and not single:
            call_id, _ = await settle(call_id)  # the frame names its call: the call is written first
        tree_id = run.tree_id if run is not None else await self._root_tree(caller.frame)
        limits = [run_limits(d.limits, asked) for d in definitions]
        new_runs = [
            NewRun(
                agent_id=d.id, definition_hash=d.definition_hash, model=d.model, mode=mode, depth=depth, task=task,
                budget={**lim, "depth_left": self.limits.max_tree_depth - depth},
                signal_contract=signal_contract(d.signal, d.id), idempotency_key=f"{call_id}#{i}" if call_id else None,
            )
            for i, (d, (_, task), lim) in enumerate(zip(definitions, requests, limits))
        ]
        accepted: list[Accepted] = []
        if not single:
            try:
                accepted = await self.store.accept(
                    caller.frame.conversation_id, tree_id, run.run_id if run else None, ancestry,
                    caller.agent.id if run else "root", caller.frame.id, new_runs,
                    max_runs_per_tree=self.limits.max_runs_per_tree, max_pending=self.limits.max_pending_inbox_events_per_session,
                )
            except (TreeFull, InboxFull) as exc:
                raise DelegationRefused(str(exc)) from None
        contexts = [
            RunContext(a.run_id, a.execution_id, tree_id, ancestry + (d.id,), depth, mode, lim, nr.signal_contract, index)
            for index, (a, d, lim, nr) in enumerate(zip(accepted, definitions, limits, new_runs))
        ]
        if mode == "background":
            for a, d, ctx, (_, task) in zip(accepted, definitions, contexts, requests):
                if not a.existing:
                    await self._spawn(caller.frame, call_id or "", d, task, ctx)
            return [a.run_id for a in accepted]
        if run is not None:
            await self.store.waiting_delegates(run.run_id, run.execution_id)
            runtime.kernel.emit(caller.frame, "agent_waiting", run_id=run.run_id)
        async with self.waiting(caller):
            if single:
                template = RunContext("", "", tree_id, ancestry + (definitions[0].id,), depth, mode, limits[0], new_runs[0].signal_contract)
                tasks = [asyncio.ensure_future(
                    self._single(caller, call_id or "", definitions[0], requests[0][1], new_runs[0], template, settle=settle)
                )]
            else:
                tasks = [
                    asyncio.ensure_future(self._foreground(caller, call_id or "", d, task, a, ctx))
                    for a, d, ctx, (_, task) in zip(accepted, definitions, contexts, requests)
                ]
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        if runtime.kernel.interrupted() and any(isinstance(o, asyncio.CancelledError) for o in outcomes):
            # The server stopping (or the file locking) cancelled the runs, not the member:
            # the call stays unfinished, as after a crash, for recovery to take the runs up
            # again. Answering it "cancelled" would be terminal, and the caller would go on
            # from an error no one asked for.
            raise asyncio.CancelledError
        results = []
        for outcome in outcomes:
            if isinstance(outcome, asyncio.CancelledError):
                if len(requests) == 1:
                    # The member cancelled the run: the call ended in an error, as a failed
                    # run's does, not ``done`` with an error for its text.
                    raise ToolError("this run was cancelled.")
                results.append("Error: this run was cancelled.")
            elif isinstance(outcome, BaseException):
                if len(requests) == 1:
                    raise outcome
                results.append(f"Error: {outcome}")
            else:
                results.append(outcome)
        return results

    async def _root_tree(self, frame: "Frame") -> str:
        """A root turn's tree: the runs its delegations start share one count."""
        history = await self.runtime.store.history(frame.id)
        last_user = next((row["id"] for row in reversed(history) if row["role"] == "user" and row.get("origin") != STEER_ORIGIN), 0)
        return f"{frame.id}:{last_user}"

    async def _single(
        self, caller: "Scope", call_id: str, definition: AgentDefinition, task: str, new_run: NewRun, template: RunContext,
        *, settle: Any = None,
    ) -> str:
        """One foreground run: its row accepted, its frame opened with its task and the
        run marked running, in one transaction (each commit is on the path of the
        caller's answer) — with ``settle`` (``Scope.settle``), the transaction that writes
        the caller's round and this call in it, when that is not under way yet: the call
        is written first either way, as the frame names it. A retried call whose run
        exists already takes it up instead.

        Only when its permits are free now: a run that must wait for one is written
        ``queued`` first (``_queued_single``), as a batch's runs are."""
        runtime, run = self.runtime, caller.run
        permits = self.permits(caller.frame.conversation_id)
        held = await permits.try_acquire()
        taken: list[Accepted] = []
        written = [call_id]
        run_ids: list[str] | None = None  # chosen before the write when its first request goes out meanwhile

        def claim(conn: Any, frame: "Frame") -> None:
            written[0] = frame.spawned_by_call_id or ""
            key = f"{written[0]}#0" if written[0] else None
            taken[:] = self.store.accept_rows(
                conn, caller.frame.conversation_id, template.tree_id, run.run_id if run else None, template.ancestry[:-1],
                caller.agent.id if run else "root", caller.frame.id, [dataclasses.replace(new_run, idempotency_key=key)],
                max_runs_per_tree=self.limits.max_runs_per_tree, max_pending=self.limits.max_pending_inbox_events_per_session,
                run_ids=run_ids,
            )
            if taken[0].existing:
                raise _Existing()
            mark_started(conn, taken[0].run_id, taken[0].execution_id, frame.id)

        try:
            self._tree_in_flight[template.tree_id] = self._tree_in_flight.get(template.tree_id, 0) + 1
            if not held:
                return await self._queued_single(caller, call_id, definition, task, new_run, template, settle=settle)
            if settle is not None:
                candidates, in_tree = await asyncio.gather(self._first_models(definition), self.store.tree_count(template.tree_id))
                room = in_tree + self._tree_in_flight[template.tree_id] <= self.limits.max_runs_per_tree
            else:
                candidates, room = await self._first_models(definition), False
            placeholder_model = candidates[0] if candidates else None
            if room and candidates:
                run_ids = [new_id()]
                return await self._single_opening(caller, call_id, definition, task, template, claim, written, candidates, settle, run_ids[0])
            try:
                opened: Any = NOT_JOINED
                if settle is not None:
                    statements = runtime.store.run_frame_statements(caller.frame, definition.id, task, claim, placeholder_model=placeholder_model)
                    call_id, opened = await settle(call_id, statements)
                if opened is NOT_JOINED:
                    sub = await runtime.store.open_run_frame(caller.frame, call_id, definition.id, task, claim, placeholder_model=placeholder_model)
                else:
                    sub = runtime.store.run_frame_opened(opened)
            except _Existing:
                permits.release()
                held = False
                ctx = dataclasses.replace(template, run_id=taken[0].run_id, execution_id=taken[0].execution_id)
                return await self._foreground(caller, written[0], definition, task, taken[0], ctx)
            except (TreeFull, InboxFull) as exc:
                raise DelegationRefused(str(exc)) from None
            except LookupError:
                raise ToolError("this run was cancelled or taken over before it started") from None
            ctx = dataclasses.replace(template, run_id=taken[0].run_id, execution_id=taken[0].execution_id)
            self._tasks[ctx.run_id] = asyncio.current_task()  # type: ignore[assignment]
            try:
                return await self._run_opened(sub, definition, ctx, unattended=caller.unattended, candidates=candidates)
            finally:
                self._tasks.pop(ctx.run_id, None)
        finally:
            if held:
                permits.release()
            left = self._tree_in_flight.get(template.tree_id, 1) - 1  # counted from the start of its try
            if left > 0:
                self._tree_in_flight[template.tree_id] = left
            else:
                self._tree_in_flight.pop(template.tree_id, None)

    async def _queued_single(
        self, caller: "Scope", call_id: str, definition: AgentDefinition, task: str, new_run: NewRun, template: RunContext,
        *, settle: Any = None,
    ) -> str:
        """``_single`` when its permits are all taken (the member's other runs hold
        them, running): the run is written ``queued`` before it
        waits (§3.1 step 2), keyed by its call (settled first: the row names it), so it
        is in the conversation's runs and the task strip while it waits, cancellable
        there and by a Stop, and a restart takes it up again by the same id (the call
        runs again and finds it). Then it waits for its permits as a batch's runs do."""
        run = caller.run
        if settle is not None:
            call_id, _ = await settle(call_id)
        key = f"{call_id}#0" if call_id else None
        try:
            [accepted] = await self.store.accept(
                caller.frame.conversation_id, template.tree_id, run.run_id if run else None, template.ancestry[:-1],
                caller.agent.id if run else "root", caller.frame.id, [dataclasses.replace(new_run, idempotency_key=key)],
                max_runs_per_tree=self.limits.max_runs_per_tree, max_pending=self.limits.max_pending_inbox_events_per_session,
            )
        except (TreeFull, InboxFull) as exc:
            raise DelegationRefused(str(exc)) from None
        ctx = dataclasses.replace(template, run_id=accepted.run_id, execution_id=accepted.execution_id)
        return await self._foreground(caller, call_id, definition, task, accepted, ctx)

    async def _single_opening(
        self, caller: "Scope", call_id: str, definition: AgentDefinition, task: str, template: RunContext,
        claim: Callable[[Any, "Frame"], None], written: list[str], candidates: list[Any], settle: Any, run_id: str,
    ) -> str:
        """``_single`` whose run, frame and first placeholder ride in the caller's round
        write (``settle``), with the run's first request built while that commits
        (``Pending``) and sent once it has: the placeholder is what recovery counts the
        request by if a crash cuts it (a request sent beside the commit was billed and
        never logged when the crash came first, crash-kill probe). Its ``agent_start``
        waits for the commit. Only when the tree has room for it (the one refusal that
        write can meet, §8.7; counted with the runs being written). The run's and
        frame's ids are chosen first, so that request is built before the write."""
        runtime = self.runtime
        frame_id = new_id()
        placeholder_model = candidates[0]
        statements = runtime.store.run_frame_statements(caller.frame, definition.id, task, claim, placeholder_model=placeholder_model, frame_id=frame_id)
        writing = asyncio.ensure_future(settle(call_id, statements))
        sub = Frame(frame_id, caller.frame.conversation_id, caller.frame.id, call_id, definition.id, caller.frame.depth + 1, "open")
        row = {"id": None, "frame_id": frame_id, "role": "user", "content": task, "attachments": "[]", "status": "complete", "tool_calls": ()}
        opening = Pending([MappingProxyType(row)], None, candidates)

        async def landed() -> None:
            try:
                call_written, opened = await writing
                if opened is NOT_JOINED:  # the round was being written already: the frame on its own
                    await runtime.store.open_run_frame(
                        caller.frame, call_written, definition.id, task, claim, placeholder_model=placeholder_model, frame_id=frame_id,
                    )
                else:
                    runtime.store.run_frame_opened(opened)
                placeholder_id = (await runtime.store.history(frame_id))[-1]["id"]
            except BaseException:
                opening.abandon(Abandoned("the run's frame could not be written", committed=False))
                raise
            opening.confirm(placeholder_id)

        landing = asyncio.ensure_future(landed())
        landing.add_done_callback(lambda f: f.cancelled() or f.exception())  # raised below when it matters
        ctx = dataclasses.replace(template, run_id=run_id, execution_id=run_id)
        self._tasks[ctx.run_id] = asyncio.current_task()  # type: ignore[assignment]
        try:
            return await self._run_opened(sub, definition, ctx, unattended=caller.unattended, candidates=candidates, opening=opening, call_id=written)
        except Abandoned:
            try:
                await landing
            except (TreeFull, InboxFull) as exc:
                raise DelegationRefused(str(exc)) from None
            except (_Existing, LookupError):
                raise ToolError("this run was cancelled or taken over before it started") from None
            raise
        finally:
            self._tasks.pop(ctx.run_id, None)
            if not landing.done():
                await asyncio.shield(landing)  # the write runs to its end: its rows are the caller's round

    async def _foreground(self, caller: "Scope", call_id: str, definition: AgentDefinition, task: str, accepted: Accepted, ctx: RunContext) -> str:
        if accepted.existing:
            if accepted.status in TERMINAL:  # finished before a restart; its call is answered now
                row = await self.store.run(accepted.run_id)
                if row and row["status"] == "completed":
                    return clip_result(row["result"] or "", ctx.limits["max_result_chars"], accepted.run_id)
                raise ToolRefusal(f"the run {accepted.run_id} ended {row['status'] if row else 'unknown'}: {row['error'] if row else ''}",
                                  code="agent_run_ended", run=accepted.run_id, status=row["status"] if row else "unknown", error=row["error"] if row else "")
            execution_id = await self.store.new_attempt(accepted.run_id)
            if execution_id is None:
                raise ToolError("the run ended meanwhile")
            ctx = dataclasses.replace(ctx, execution_id=execution_id)
        self._tasks[ctx.run_id] = asyncio.current_task()  # type: ignore[assignment]
        try:
            return await self._execute(caller.frame, call_id, definition, task, accepted.frame_id, ctx, unattended=caller.unattended)
        finally:
            self._tasks.pop(ctx.run_id, None)

    async def _execute(
        self, above: "Frame", call_id: str, definition: AgentDefinition, task: str, frame_id: str | None, ctx: RunContext, *, unattended: bool,
    ) -> str:
        runtime = self.runtime
        store = runtime.store
        permits = self.permits(above.conversation_id)
        try:
            if not await permits.try_acquire():
                # Its row says queued already: the task strip reads it again, or it
                # would show nothing until a run starts or ends.
                runtime.kernel.emit(above, "agent_queued", agent=definition.id, run_id=ctx.run_id, mode=ctx.mode, index=ctx.index)
                await permits.acquire()
        except asyncio.CancelledError:
            await self._cancelled_before_start(ctx)
            raise
        try:
            if frame_id is not None:  # taken up again after a restart: its frame goes on
                sub = await store.frame(frame_id)
                if not await self.store.started(ctx.run_id, ctx.execution_id, sub.id):
                    raise ToolError("this run was cancelled or taken over before it started")
                candidates = None
                spent = await self.store.running_for(ctx.run_id)
            else:
                candidates, spent = await self._first_models(definition), 0.0
                try:
                    sub = await store.open_run_frame(
                        above, call_id, definition.id, task, lambda conn, frame: mark_started(conn, ctx.run_id, ctx.execution_id, frame.id),
                        placeholder_model=candidates[0] if candidates else None,
                    )
                except LookupError:
                    raise ToolError("this run was cancelled or taken over before it started") from None
        except asyncio.CancelledError:
            permits.release()
            await self._cancelled_before_start(ctx)
            raise
        except BaseException:
            permits.release()
            raise
        try:
            return await self._run_opened(sub, definition, ctx, unattended=unattended, candidates=candidates, spent=spent)
        finally:
            permits.release()

    async def _cancelled_before_start(self, ctx: RunContext) -> None:
        """A run cancelled while it waited for its permits (a batch larger than may run
        at once) or while its frame was being opened: ``_run_opened``, which records
        how a started run ends, never saw it, and it would stay ``queued`` for ever (a
        Stop cancels the foreground batch by cancelling its caller's turn). Recorded
        cancelled, as the runs that had started are; a frame whose write landed
        meanwhile is closed with it. Not when the runtime is closing: that leaves the
        run to recovery, as a crash would."""
        runtime = self._runtime()
        if runtime is None or runtime.kernel.interrupted():
            return
        await asyncio.shield(
            self.store.commit_terminal(ctx.run_id, ctx.execution_id, "cancelled", error="cancelled", frame_status="cancelled")
        )

    async def _first_models(self, definition: AgentDefinition) -> list[Any] | None:
        """The models a new frame's first round tries (a sub-agent keeps its agent's
        pin, or its inline provider + model alone), chosen before the frame is written
        so its placeholder goes with it."""
        if definition.provider is not None:
            try:
                return await self.runtime.models_for(None, definition)  # type: ignore[arg-type]  # a pair needs no frame
            except AgentError:
                return None  # gone since the delegation was checked: the run's first round fails, and says why
        return await self.runtime.chat.models.candidates(pin=definition.model, strength=definition.strength) or None

    async def _run_opened(
        self, sub: "Frame", definition: AgentDefinition, ctx: RunContext, *, unattended: bool, candidates: list[Any] | None = None,
        opening: Pending | None = None, call_id: list[str] | None = None, spent: float = 0.0,
    ) -> str:
        """The run's frame, its terminal state written however it ends (the caller
        holds its permits). ``candidates``: the models its written placeholder names.
        ``spent``: the seconds it ran before (taken up again after a restart): its time
        limit counts from its first start, and one with none left times out at once,
        before any model request.
        ``opening``: the frame's write, still in flight (``_single_opening``; ``call_id``
        holds the call's id as that write gives it)."""
        kernel = self.runtime.kernel

        def started(_: int) -> None:
            spawned = call_id[0] if call_id is not None else sub.spawned_by_call_id
            kernel.emit(
                sub, "agent_start", agent=definition.id, spawned_by_call_id=spawned or None, run_id=ctx.run_id, mode=ctx.mode, index=ctx.index,
            )

        if opening is None:
            started(0)
        else:
            opening.then(started)
        # The run's completed state (with, for a background run, its completion event)
        # goes in the commit of the frame's final answer (seed 004 §4.2: still one
        # transaction, guarded by the execution id).
        # A foreground run's caller waits for its answer: that write is queued, and the
        # caller's next request goes out while it commits (its next write queues behind
        # it). The run's end is announced once committed either way.
        ending = Ending(
            lambda content: RunStore.terminal_statements(ctx.run_id, ctx.execution_id, "completed", result=content, frame_status="done"),
            queued=ctx.mode == "foreground",
            on_commit=lambda done: self._after_terminal(sub, definition, ctx, "completed") if done and self._runtime() is not None else None,
        )
        try:
            left = ctx.limits["timeout_secs"] - spent
            async with asyncio.timeout(max(left, 0)):
                if left <= 0:
                    raise TimeoutError
                result = await kernel.run_frame(
                    sub, definition, unattended=unattended, run=ctx, max_rounds=ctx.limits["max_iterations"], candidates=candidates,
                    ending=ending, opening=opening,
                )
        except TimeoutError:
            error = f"the run did not finish within {ctx.limits['timeout_secs']} s"
            if not ending.joined and await self.store.commit_terminal(ctx.run_id, ctx.execution_id, "timed_out", error=error, frame_status="failed"):
                self._after_terminal(sub, definition, ctx, "timed_out")
            if not ending.joined:
                raise ToolError(error) from None
            result = await self._answer_of(sub)
        except asyncio.CancelledError:
            if not kernel.interrupted() and not ending.joined:
                if await asyncio.shield(
                    self.store.commit_terminal(ctx.run_id, ctx.execution_id, "cancelled", error="cancelled", frame_status="cancelled")
                ):
                    self._after_terminal(sub, definition, ctx, "cancelled")
            raise
        except FrameFailed as exc:
            if ending.joined:
                raise
            # The frame ended without an answer (its model failed, its rounds ran out),
            # written and announced in its history: the run failed, and says why; so
            # does its caller's call, for the caller's model to decide what to do next.
            error = str(exc)
            # With its code, as the frame's failed answer has it: the task strip and the
            # box word it in the reader's language (the English stays for the model).
            reason = reason_json(exc.code, exc.values)
            if await self.store.commit_terminal(ctx.run_id, ctx.execution_id, "failed", error=error, frame_status="failed", reason=reason):
                self._after_terminal(sub, definition, ctx, "failed", code=exc.code, values=exc.values, **await self._failed_answer(sub))
            raise ToolRefusal(f"the run {ctx.run_id} of agent {definition.id} failed: {error}", code="agent_run_failed", run=ctx.run_id,
                              agent=definition.id, error=error) from None
        except Exception as exc:
            if ending.joined:
                raise
            if await self.store.commit_terminal(ctx.run_id, ctx.execution_id, "failed", error=str(exc) or type(exc).__name__, frame_status="failed"):
                self._after_terminal(sub, definition, ctx, "failed")
            raise
        if ending.joined:
            pass  # announced by its commit (``on_commit``; a late attempt's answer, False there, announces nothing)
        elif ctx.mode == "background":
            if await self.store.commit_terminal(ctx.run_id, ctx.execution_id, "completed", result=result, frame_status="done"):
                self._after_terminal(sub, definition, ctx, "completed")
        else:
            # Queued on the file before the caller's tool row (one queue, in order),
            # not waited for: the caller's next request need not wait for this
            # commit. Announced once committed.
            committing = self.store.commit_terminal_queued(ctx.run_id, ctx.execution_id, "completed", result=result, frame_status="done")
            committing.add_done_callback(lambda f: self._committed(f, sub, definition, ctx))
        return clip_result(result, ctx.limits["max_result_chars"], ctx.run_id)

    async def _answer_of(self, frame: "Frame") -> str:
        """The final answer a frame's run was completed with (a timeout that struck
        right after that commit: the run is completed, its answer stands)."""
        history = await self.runtime.store.history(frame.id)
        return history[-1]["content"] if history else ""

    def _committed(self, done: "asyncio.Future[bool]", frame: "Frame", definition: AgentDefinition, ctx: RunContext) -> None:
        if done.cancelled():
            return
        if done.exception() is not None:
            log.error("member %s: the terminal state of run %s could not be written: %s", self._member_id, ctx.run_id, done.exception())
        elif done.result() and self._runtime() is not None:
            self._after_terminal(frame, definition, ctx, "completed")

    async def _failed_answer(self, frame: "Frame") -> dict[str, Any]:
        """The failed answer a run's frame ended with, as its history holds it (the
        frame's own ``error`` event goes to no box): its id and text ride on the run's
        ``agent_done``, so the box says why live as it does after a reload, where that
        answer is read back with the run's transcript. Empty when the frame ended on no
        such answer (its rounds ran out)."""
        history = await self.runtime.store.history(frame.id)
        last = history[-1] if history else None
        if last is None or last["role"] != "assistant" or last["status"] != "error":
            return {}
        return {"message_id": last["id"], "error": last["content"]}

    def _after_terminal(self, frame: "Frame", definition: AgentDefinition, ctx: RunContext, status: str, **said: Any) -> None:
        """Announced after the commit (durable first)."""
        self.runtime.kernel.emit(frame, "agent_done", agent=definition.id, run_id=ctx.run_id, status=status, **said)
        if ctx.mode == "background":
            self.wake(frame.conversation_id)

    # -- background ------------------------------------------------------------------

    async def _spawn(self, root: "Frame", call_id: str, definition: AgentDefinition, task: str, ctx: RunContext) -> None:
        """§8.9: a run that cannot be started (the runtime is closing) is cancelled
        at once, its completion slot given back, never left reserved."""
        runtime = self._runtime()
        if runtime is None or runtime.closed or self._closed:
            await self.store.commit_terminal(ctx.run_id, ctx.execution_id, "cancelled", error="the server was shutting down", requires_continuation=False)
            return
        self._tasks[ctx.run_id] = asyncio.create_task(self._background(root, call_id, definition, task, ctx), name=f"agent-run:{ctx.run_id}")

    async def _background(self, root: "Frame", call_id: str, definition: AgentDefinition, task: str, ctx: RunContext) -> None:
        try:
            await self._execute(root, call_id, definition, task, None, ctx, unattended=True)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # recorded as the run's failure by _execute
            log.info("member %s: background run %s ended: %s", self.runtime.member_id, ctx.run_id, type(exc).__name__)
        finally:
            self._tasks.pop(ctx.run_id, None)

    # -- cancel ----------------------------------------------------------------------

    async def cancel_run(self, run_id: str, *, suppress_continuation: bool = False) -> bool:
        """§6: the run's terminal state (with its completion, consumed at once when
        ``suppress_continuation``), its task cancelled, its unsent signals superseded,
        and its live descendants the same way.

        Whoever cancels a run (the member from the task strip, the model through
        agent_task) knows how it ended: its completion is quiet (``runs._complete``),
        and starts no continuation turn of its own — a paid round only to say "you
        cancelled it". It still reaches the model exactly once, with the next delivery
        to the conversation: the next continuation another event asks for, or the safe
        boundary of the next turn that runs (the running one, if any) — its first
        request when it has no tool round (``Kernel.run_frame``)."""
        row = await self.store.run(run_id)
        if row is None or row["status"] in TERMINAL:
            return False
        for below in await self.store.live_runs(row["conversation_id"]):
            if below["caller_run_id"] == run_id:
                await self.cancel_run(below["id"], suppress_continuation=suppress_continuation)
        done = await self.store.commit_terminal(
            run_id, None, "cancelled", error="cancelled", frame_status="cancelled", requires_continuation=not suppress_continuation,
            quiet=not suppress_continuation,
        )
        if done:
            await self._announce_cancelled(row)
        task = self._tasks.pop(run_id, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        await self.store.supersede_signals(run_id)
        if done and row["mode"] == "background" and not suppress_continuation:
            conversation_id = row["conversation_id"]
            self._quiet.add(conversation_id)
            if conversation_id in self._mailboxes:
                self._steer_hint.add(conversation_id)  # the running turn takes it at its next boundary
        return done

    async def _announce_cancelled(self, row: dict[str, Any]) -> None:
        """A cancel commits the run's end here, so its task's own commit finds it ended
        and announces nothing: announced here as other endings are, or the chat's box
        of the run stays "working" until a reload. A run that never started has no
        frame, and no box."""
        runtime = self._runtime()
        if runtime is None or not row["frame_id"]:
            return
        frame = await runtime.store.frame(row["frame_id"])
        runtime.kernel.emit(frame, "agent_done", agent=row["agent_id"], run_id=row["id"], status="cancelled")

    async def cancel_conversation(self, conversation_id: str, *, suppress_continuation: bool = True, background_only: bool = False) -> int:
        """Every live run of the conversation (a foreground one is also stopped by its
        turn's cancellation, which reaches its task: ``background_only`` for a Stop)."""
        count = 0
        for row in await self.store.live_runs(conversation_id):
            if background_only and row["mode"] != "background":
                continue
            if row["caller_run_id"] is None and await self.cancel_run(row["id"], suppress_continuation=suppress_continuation):
                count += 1
        return count

    async def discard_waiting(self, conversation_id: str) -> int:
        """A Stop discards the conversation's next-turn input from the inbox (§8.6):
        events waiting for a continuation leave the inbox without one (§6's
        ``suppress_continuation``; a completion is consumed, its result kept on its run,
        a signal superseded). Events a running turn holds are its own, discarded as
        it closes (``close_turn``)."""
        count = await self.store.discard_pending(conversation_id)
        if count:
            self._maybe_pending.discard(conversation_id)
            self._quiet.discard(conversation_id)
            self._due_now.discard(conversation_id)
        return count

    # -- the inbox -------------------------------------------------------------------

    async def _run_worker(self) -> None:
        while not self._closed:
            self._wake.clear()
            try:
                await self.deliver_due()
            except Exception:
                log.exception("member %s: the sub-agent inbox worker failed; trying again", self.runtime.member_id)
            try:
                async with asyncio.timeout(self.limits.recheck_secs):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def deliver_due(self) -> int:
        """Start a continuation turn in each idle conversation with due events; a busy
        one takes them at its turn's end. A wake-up names its conversation, which is
        driven at once (its turn finds nothing if nothing is due); the full look at
        the inbox is the periodic one."""
        runtime = self.runtime
        started = 0
        woken, self._due_now = self._due_now, set()
        for conversation_id in woken:
            if runtime.running(conversation_id):
                self._due_now.add(conversation_id)  # its turn's end wakes the worker again
                if conversation_id in self._steer_hint and conversation_id in self._mailboxes:
                    self._steer_hint.discard(conversation_id)
                    await self.admit_steer(conversation_id)  # between rounds, taken at the next boundary
            else:
                runtime.drive(conversation_id, continuation=True)
                started += 1
        if time.monotonic() < self._next_look:
            return started
        self._next_look = time.monotonic() + self.limits.recheck_secs
        changes = self.store.db.changes  # read before the look: a write landing after it counts
        if changes == self._inbox_empty_at:
            return started  # nothing written since a look found the inbox without a waking event
        due, waiting = await self.store.waking(time.time())
        self._inbox_empty_at = None if waiting else changes
        for conversation_id in due:
            self._maybe_pending.add(conversation_id)
            if conversation_id in self._mailboxes:
                self._steer_hint.add(conversation_id)  # a lost wake-up: the next boundary looks
            if not runtime.running(conversation_id):
                runtime.drive(conversation_id, continuation=True)
                started += 1
        return started

    async def oldest_wait(self, conversation_id: str) -> float | None:
        if conversation_id not in self._maybe_pending:
            return None
        due = await self.store.next_due(conversation_id)
        if due is None or due[0] > time.time():
            if due is None:
                self._maybe_pending.discard(conversation_id)
            return None
        return time.time() - due[1]

    def inbox_first(self, oldest_wait: float | None, user_turns: int) -> bool:
        """§4.6 fairness: after a burst of the member's turns, or once the oldest event
        waited too long, the next turn is the inbox's."""
        return oldest_wait is not None and (
            user_turns >= self.limits.max_user_turn_burst_before_inbox or oldest_wait >= self.limits.max_inbox_wait_secs
        )

    async def deliver(self, frame: "Frame") -> bool:
        """Take the conversation's due events and write them as one hidden trigger,
        consumed in the same transaction. False when there was nothing to deliver, or
        only quiet events (``cancel_run``), which wait for a delivery something else
        asks for rather than start a turn of their own."""
        conversation_id = frame.conversation_id
        if conversation_id not in self._maybe_pending:
            return False
        taken: list[dict[str, Any]] = []

        def take(conn: Any) -> tuple[str, Any] | None:
            now = time.time()
            taken[:] = due_events(conn, conversation_id, now)
            if not asks_for_continuation(conn, conversation_id, now, taken):
                taken.clear()  # quiet events alone wait for the next delivery
                return None
            ids = [e["id"] for e in taken]
            return trigger_text(taken), lambda c, message_id: consume_pending(c, ids, message_id)

        try:
            message_id = await self.runtime.store.add_continuation_trigger(frame, take)
        except Exception:
            if taken:
                attempts = max(e["attempt_count"] for e in taken) + 1
                await asyncio.shield(self.store.delivery_failed(
                    [e["id"] for e in taken], backoff_secs=BACKOFF_SECONDS * 2 ** (attempts - 1), max_attempts=self.limits.max_inbox_delivery_attempts,
                ))
            raise
        if message_id is None:
            self._maybe_pending.discard(conversation_id)
        return message_id is not None

    # -- authorization and the agent_task tool (§7) -----------------------------------

    async def visible_run(self, scope: "Scope", run_id: str) -> dict[str, Any] | None:
        """A run id is not a credential: the root sees its conversation's runs, a named
        agent only its own and its descendants. Anything else is "not found"."""
        row = await self.store.run(run_id) if isinstance(run_id, str) else None
        if row is None or row["conversation_id"] != scope.frame.conversation_id:
            return None
        if scope.run is not None and not await self.store.descends_from(run_id, scope.run.run_id):
            return None
        return row

    async def visible_runs(self, scope: "Scope") -> list[dict[str, Any]]:
        rows = await self.store.runs(scope.frame.conversation_id, limit=50)
        if scope.run is None:
            return rows
        return [r for r in rows if await self.store.descends_from(r["id"], scope.run.run_id)]

"""The round loop of one frame (seed 001 "The LLM loop").

The loop is driven by the stored history, not by RAM: each round looks at the
frame's last message — unfinished tool calls are executed (or re-asked, or marked
interrupted), an unanswered user message calls the model, a final answer ends the
frame. A live turn and a recovery after a crash therefore run the same code.

Within a round: tool call ids are allocated in call order when the assistant message
is written; a batch whose tools are all ``concurrency_safe`` runs concurrently, any
other batch sequentially; results are recorded in call order. Every transition is
written before it is announced. Cancellation is the asyncio task being cancelled:
it aborts the in-flight HTTP stream, the running tools and every sub-agent frame alike.

Writes are pipelined with work that announces nothing. A round's streaming
placeholder is written with what precedes it (the member's message, or the last tool
result of the previous round), and the round's request is built while that commit is
in flight (``Pending``): the model hears nothing the member may not, and the member
hears nothing (tokens, ``tool_done``, ``turn_started``) before it is durable. The
request itself goes out once the placeholder is committed: that row is how recovery
counts a request a crash cut (an ``interrupted`` row of the request log, README
"Models and chat"), so a request never leaves ahead of it — except a turn's opening,
whose request goes out beside its message's commit (``Pending.early``: a crash there
loses the unacknowledged message with it, which the README says). A call the gate
allows outright is written as running with its assistant message, one commit instead
of two; a round whose calls are all such calls and ``rerun``-safe runs them before
anything of it is written, and writes message, results and the next placeholder in one
commit, on whose heels the next request goes out (``_overlapped_calls``). A crash in
between loses what a crash a moment earlier would: the request was never sent, or the
call is found running (and, unless ``rerun``, marked interrupted, never run twice).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import time
import uuid
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

from skald_hookspecs.types import ToolContext, ToolError
from skald_host.core import audit, schedules
from skald_host.core.agent.approvals import (
    DEACTIVATED,
    WITHDRAWN_REASON,
    arguments_hash,
    decide,
    expired,
    expiry,
    raised_before_deactivation,
    seconds_left,
)
from skald_host.core.agent.definitions import AgentDefinition, AgentError
from skald_host.core.agent.projection import ProjectionMemo, project, unfinished_calls
from skald_host.core.agent.questions import QuestionError
from skald_host.core.agent.store import (
    HISTORY_CACHE_FRAMES, HOST_RESULTS, QUESTION_UNATTENDED, TERMINAL_CALL_STATES, Frame, coded_result, reason_json, result_code,
    result_reason,
)
from skald_host.core.agent.tools import RegisteredTool
from skald_host.core.identity.access import allowed, may_start_agent
from skald_host.core.faults import crash_point
from skald_host.core.json_text import MAX_DEPTH, JsonRefused, read_json
from skald_host.core.text import encodable
from skald_host.core.files.media import turn_images
from skald_host.core.llm.catalog import ModelChoice
from skald_host.core.llm.client import ModelError, ModelTurn
from skald_host.core.plugins.failures import PLUGIN_EXITS, record_failure
from skald_host.core.plugins.manager import LoopWatch, definition_of
from skald_host.core.schedules import service as schedule_service

if TYPE_CHECKING:
    from skald_host.core.agent.runtime import MemberRuntime
    from skald_host.core.agent.subagents.coordinator import RunContext

log = logging.getLogger(__name__)

CHECKPOINT_SECONDS = 0.5
TOOL_RESULT_LIMIT = 64 * 1024
SLOW_CALL_SECONDS = 0.05  # a call running longer is announced as it runs, not only with its result
#: How long an approved call from before a restart waits for its tool to be offered
#: again (a connector starting at the member's login), and how often it looks.
TOOL_RETURN_SECONDS = 30.0
TOOL_RETURN_POLL_SECONDS = 0.1


class NoModelConfigured(RuntimeError, ToolError):  # a sub-agent's turn may hit it: the model reads it
    pass


class FrameFailed(ToolError):
    """A sub-agent run's frame that ended without an answer: its model could not answer
    (every model tried failed, or one may not be retried), or its rounds ran out. The
    failure is written in the frame's history and announced first, as a member's turn's
    is; for a run it is raised, not returned as the answer, so that the run is recorded
    ``failed`` and its caller's call says why. ``code``/``values``: the reason stored
    with it (``error.<code>``)."""

    def __init__(self, message: str, code: str, values: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values = dict(values or {})


class AccessWithdrawn(PermissionError):
    """What a tool asked of its turn (a sub-agent, a command, a scheduled prompt) needs
    a capability the member's role no longer holds."""


#: The result of a call whose tool the member may no longer use when it is to start.
WITHDRAWN = HOST_RESULTS["withdrawn"]


class Abandoned(Exception):
    """A round's placeholder write did not happen (``committed`` False: a duplicate
    message, a failed commit) or happened for a turn that must start over the plain
    way (``committed`` True: the member changed since the request was built)."""

    def __init__(self, reason: str, *, committed: bool) -> None:
        super().__init__(reason)
        self.committed = committed


class Pending:
    """A round's streaming placeholder whose write is pending, with the history the
    round's request is built from: the committed rows plus what that write records.
    The request goes out once the write has committed, unless ``early``: a turn's
    opening, whose request goes out while its message commits (README "Models and
    chat": a crash in that moment leaves no trace of it, nor of the unacknowledged
    message). A ``start`` given is called (``start()``) once the request is built and,
    for an early one, once it has gone out, so that what may wait until then runs
    rather than beside the request being built: a tool round's write, a turn opening's
    fresh read of the member (without a ``start`` the write is under way already).
    ``confirm`` (the write committed) runs
    the announcements queued with ``then`` in order — the write's own first, then the
    round's held tokens."""

    def __init__(
        self, history: list[Any], start: Callable[[], object] | None = None, candidates: list[ModelChoice] | None = None,
        *, early: bool = False,
    ) -> None:
        self.history = history
        self.candidates = candidates  # the models the placeholder names, for its round
        #: The request may go out before the placeholder is committed (a turn's opening).
        self.early = early
        #: An early request went out (``sent``): abandoned now, it was cut short.
        self.request_left = False
        self._start: Callable[[], object] | None = start
        self.placeholder_id: int | None = None
        self._then: list[Callable[[int], None]] = []
        self._done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._done.add_done_callback(lambda f: f.cancelled() or f.exception())  # a failure nobody awaited is no warning
        self._waiters: list[asyncio.Future[int]] = []

    def start(self) -> None:
        """Start it, once: when the request is sent, or when the round ends or fails
        before that (the write must happen either way)."""
        start, self._start = self._start, None
        if start is not None:
            start()

    def sent(self) -> None:
        """The round's request has gone out (its ``on_sent``)."""
        self.request_left = True
        self.start()

    def then(self, announce: Callable[[int], None]) -> None:
        if self.placeholder_id is not None:
            announce(self.placeholder_id)
        else:
            self._then.append(announce)

    def confirm(self, placeholder_id: int) -> None:
        self.placeholder_id = placeholder_id
        announcements, self._then = self._then, []
        for announce in announcements:
            announce(placeholder_id)
        self._done.set_result(placeholder_id)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(placeholder_id)

    def abandon(self, reason: Abandoned) -> None:
        if not self._done.done():
            self._then.clear()
            self._done.set_exception(reason)
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_exception(reason)

    async def wait(self) -> int:
        """The placeholder's id once committed; raises ``Abandoned`` otherwise. Each
        waiter awaits a future of its own: its cancellation leaves the outcome alone,
        and the commit wakes it in one loop pass (``shield`` takes two, on the path of
        every tool round)."""
        if self._done.done():
            return self._done.result()
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return await waiter


#: ``Scope.settle``'s answer when its ``also`` was not written with the round (the
#: round was written already, or is being written): the caller writes it itself.
NOT_JOINED = object()


class _Refused:
    """An ``also`` that raised inside a round's write: rolled back to its savepoint
    (the round's rows stay), raised to its caller once the round has committed."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _in_savepoint(also: Callable[[Any, str], object], index: int, into: list[object]) -> Callable[[Any, list[str]], None]:
    """``also`` for the round's write, on its call's written id: what it writes goes
    or fails alone, the round's own rows are written either way."""

    def run(conn: Any, ids: list[str]) -> None:
        conn.execute("SAVEPOINT settle_also")
        try:
            into.append(also(conn, ids[index]))
        except Exception as error:
            conn.execute("ROLLBACK TO settle_also")
            into.append(_Refused(error))
        conn.execute("RELEASE settle_also")

    return run


class Ending:
    """What ends the job a frame does (a sub-agent run's terminal state), written in
    the commit of the frame's final answer: nothing is announced between the two (the
    answer's ``done``, then the run's ``agent_done``), so they are one transaction —
    one sync fewer on the path of every delegation. ``statements(content)``: what to
    run in that transaction for this answer. ``joined`` once committed so, with
    ``outcome`` what the statements returned; a frame that ends any other way (a
    failure, a recovered answer) leaves it unjoined, and its owner writes the end
    the separate way."""

    def __init__(
        self, statements: Callable[[str], Callable[[Any], object]], *, queued: bool = False,
        on_commit: Callable[[object], None] | None = None,
    ) -> None:
        self.statements = statements
        #: The frame's caller waits for its answer: the write is queued, not awaited
        #: (``Kernel._final_queued``); ``joined`` from its submission.
        self.queued = queued
        self.joined = False
        self.outcome: object = None
        self._on_commit = on_commit

    def committed(self, outcome: object) -> None:
        """The answer and the statements committed (after the answer's ``done``)."""
        self.joined, self.outcome = True, outcome
        if self._on_commit is not None:
            self._on_commit(outcome)


@dataclass
class Scope:
    """One frame being run: the TurnApi a tool sees. The kernel is reached through a
    closure, not a field, so a tool that records what it is handed finds ids, not the
    member's database or the host (check D2)."""

    frame: Frame
    agent: AgentDefinition
    unattended: bool
    call_id: str | None = None  # the tool call this scope was handed to
    plugin_id: str | None = None  # the plugin whose tool that call runs (None: the host's)
    #: Calls written as running with their assistant message, not yet started.
    admitted: set[str] = dataclasses.field(default_factory=set, repr=False, compare=False)
    #: The tools the last model round of this scope offered (None: no round ran here,
    #: as when recovery resumes calls): a call of a tool outside it was never offered,
    #: one inside it that may not start now lost its access meanwhile.
    round_tools: frozenset[str] | None = dataclasses.field(default=None, repr=False, compare=False)
    #: While a round's calls run before it is written (``Kernel._overlapped_calls``):
    #: ``settle(call_id, also=None)`` writes it now and returns the call's id as
    #: written, with what ``also(conn, written_id)`` returned when it ran in that same
    #: transaction (else ``NOT_JOINED``). What a call leaves tied to itself (a sub-agent
    #: frame) or announces (a notification) must follow its row.
    settle: Callable[..., Awaitable[tuple[str, Any]]] | None = dataclasses.field(default=None, repr=False, compare=False)
    reach: Callable[[], "Kernel"] = dataclasses.field(default=lambda: None, repr=False, compare=False)  # type: ignore[assignment, return-value]
    #: The sub-agent run this frame is (None: the conversation's own agent, the root).
    run: "RunContext | None" = dataclasses.field(default=None, repr=False, compare=False)
    #: Written with the frame's final answer (``Ending``), when the frame has one.
    ending: Ending | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def kernel(self) -> "Kernel":
        return self.reach()

    @property
    def depth(self) -> int:
        return self.frame.depth

    def require(self, action: str, via: str) -> None:
        """Refuse what the member's current role does not allow, at the moment it is
        asked — whichever tool asks (a plugin's tool reaches these through TurnApi too)."""
        runtime = self.kernel.runtime
        if not allowed(runtime.member, action):
            audit.denied(runtime.member_id, f"action:{action}", via=via)
            raise AccessWithdrawn(f"access was withdrawn: the member's role does not allow {action}")

    async def delegate(self, agent_id: str, task: str, *, mode: str = "foreground", limits: dict[str, Any] | None = None) -> str:
        self.require("tools.delegate", "delegate")
        results = await self.kernel.runtime.subagents.delegate(self, [(agent_id, task)], mode=mode, asked=limits)
        if mode == "background":
            return (
                f"Started in the background as run {results[0]}. Its result arrives in this conversation by itself when it"
                " finishes; do not wait for it. agent_task shows its state."
            )
        return results[0]

    async def delegate_batch(self, requests: list[tuple[str, str]], *, limits: dict[str, Any] | None = None) -> list[str]:
        self.require("tools.delegate", "delegate")
        return await self.kernel.runtime.subagents.delegate(self, requests, asked=limits)

    async def agent_runs(self) -> list[dict[str, Any]]:
        return [_run_summary(r) for r in await self.kernel.runtime.subagents.visible_runs(self)]

    async def agent_run(self, run_id: str) -> dict[str, Any] | None:
        row = await self.kernel.runtime.subagents.visible_run(self, run_id)
        return None if row is None else {**_run_summary(row), "result": row["result"], "error": row["error"]}

    async def cancel_agent_run(self, run_id: str) -> bool:
        coordinator = self.kernel.runtime.subagents
        if await coordinator.visible_run(self, run_id) is None:
            return False
        if self.run is not None and run_id == self.run.run_id:
            return False  # a run does not cancel itself: it answers
        return await coordinator.cancel_run(run_id)

    async def emit_signal(self, key: str, severity: str, summary: str, details: Any = None, dedupe_key: str | None = None) -> str:
        from skald_host.core.agent.subagents.signals import emit

        return await emit(self, key, severity, summary, details, dedupe_key)

    async def get_skill(self, name: str) -> str:
        """Seed 004 §2.1: a definition's ``skills`` are the scope of ``get_skill``."""
        skills = {skill.name: skill for skill in self.kernel.runtime.skills_of(self.agent)}
        skill = skills.get(name) if isinstance(name, str) else None
        if skill is None:
            known = ", ".join(skills) or "none"
            raise ToolError(f"no skill named {name!r} here; this agent's skills: {known}")
        return skill.text

    async def notify(self, text: str) -> None:
        if self.settle is not None and self.call_id is not None:
            await self.settle(self.call_id)
        await self.kernel.runtime.notify(self.frame.conversation_id, text)

    async def ask(self, message: str, fields: Sequence[Mapping[str, Any]], *, timeout: float = 300.0) -> Mapping[str, Any]:
        if self.unattended and self.run is not None:
            # A helper nobody attends (a background run, or below one): refused at once,
            # as its approvals are, never waiting (and holding its run's slot) for an
            # answer nobody is there to give.
            raise ToolError(QUESTION_UNATTENDED)
        if self.settle is not None and self.call_id is not None:
            await self.settle(self.call_id)
        runtime = self.kernel.runtime
        try:
            async with runtime.subagents.waiting(self):  # a helper holds no run permit while its member answers
                return await runtime.questions.ask(
                    self.frame.conversation_id, self.plugin_id, message, fields,
                    timeout=timeout, cancelled=runtime.cancel_event(self.frame.conversation_id),
                    asker={"frame_id": self.frame.id, "agent": self.agent.id} if self.frame.depth > 0 else None,
                )
        except QuestionError as exc:
            raise ValueError(str(exc)) from None

    # Scheduled prompts: the member's own, through the one service the schedules page uses.

    async def schedule(self, prompt: str, due_at: str | None = None, *, every: str | None = None, timezone: str | None = None) -> str:
        self.require("tools.schedule", "schedule")
        job = await schedule_service.create(
            self.kernel.runtime.store, self.frame.conversation_id, prompt, at=due_at, every=every, timezone=timezone,
            grammar=schedules.phrases(self.kernel.runtime.core.strings),
        )
        return job["id"]

    async def scheduled_prompts(self) -> list[dict[str, Any]]:
        return await schedule_service.listing(self.kernel.runtime.store)

    async def change_scheduled_prompt(
        self, job_id: str, *, prompt: str | None = None, every: str | None = None, timezone: str | None = None,
        paused: bool | None = None,
    ) -> dict[str, Any]:
        self.require("tools.schedule", "change_scheduled_prompt")
        return await schedule_service.change(
            self.kernel.runtime.store, job_id, prompt=prompt, every=every, timezone=timezone, paused=paused,
            grammar=schedules.phrases(self.kernel.runtime.core.strings),
        )

    async def delete_scheduled_prompt(self, job_id: str) -> None:
        await schedule_service.delete(self.kernel.runtime.store, job_id)

    def agents(self) -> list[dict[str, Any]]:
        """The agents this frame may delegate to (the graph, seed 004 §2.2)."""
        from skald_host.core.agent.subagents.graph import delegate_targets

        generation = self.kernel.runtime.subagent_generation()
        caller = None if self.run is None else self.agent
        return [a.summary() for a in delegate_targets(generation, caller, self.run.ancestry if self.run else ())]

    async def run_command(self, command: str, *, workdir: str | None = None, timeout: float | None = None) -> Any:
        self.require("tools.shell", "run_command")
        runtime = self.kernel.runtime
        return await runtime.core.sandbox.execute(
            runtime.member_id, command, workdir=workdir, timeout=timeout,
            cancelled=runtime.cancel_event(self.frame.conversation_id),
        )


def rounds_made(history: Sequence[Mapping[str, Any]]) -> int:
    """The model requests the turn a frame's history ends with has made: its assistant
    rows after its last message from the member (a steer trigger is within the turn;
    a sub-agent's frame has its task alone), but for a placeholder still streaming —
    recovery marks a request a crash cut ``interrupted``, so that one is written
    before its request. A window a compaction opened counts from its summary."""
    from skald_host.core.agent.subagents.coordinator import STEER_ORIGIN  # the coordinator imports this module

    made = 0
    for row in reversed(history):
        if row["role"] == "user" and row.get("origin") != STEER_ORIGIN:
            break
        if row["role"] == "assistant" and row["status"] != "streaming":
            made += 1
    return made


class Kernel:
    def __init__(self, runtime: "MemberRuntime") -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.chat = runtime.chat
        self._memos: dict[str, ProjectionMemo] = {}
        #: Final answers of runs written queued (``_final_queued``), not announced yet.
        self._landing: set[asyncio.Future[list[str]]] = set()

    def _memo(self, frame: Frame) -> ProjectionMemo:
        """The frame's projection memo, for the most recently run frames."""
        memo = self._memos.pop(frame.id, None) or ProjectionMemo()
        self._memos[frame.id] = memo
        while len(self._memos) > HISTORY_CACHE_FRAMES:
            del self._memos[next(iter(self._memos))]
        return memo

    def emit(self, frame: Frame, event_type: str, **data: Any) -> None:
        self.runtime.emit(event_type, frame.conversation_id, frame_id=frame.id, depth=frame.depth, **data)

    def interrupted(self) -> bool:
        """Whether a cancellation is the runtime closing (the server shutting down, the
        member's file locking) rather than a /stop or a tool timeout. An interruption
        must lose no more than a crash does, so it leaves the durable state to recovery
        — a pending approval stays pending, a running call is judged by its restart
        hint, a partial answer is kept as interrupted — instead of recording
        ``cancelled``, which is terminal and never resumed."""
        return self.runtime.closed

    # -- the frame loop -------------------------------------------------------------------

    async def run_frame(
        self, frame: Frame, agent: AgentDefinition, *, unattended: bool, candidates: list[ModelChoice] | None = None,
        opening: Pending | None = None, run: "RunContext | None" = None, max_rounds: int | None = None,
        ending: Ending | None = None,
    ) -> str:
        """``candidates``: the models chosen when the member's message was stored with
        this turn's placeholder, for the first round (no second read before its call).
        ``opening``: that message's write, still in flight (``Pending``). ``ending``:
        written with the final answer, if a round gives one."""
        scope = Scope(frame, agent, unattended, reach=lambda: self, run=run, ending=ending)
        pending = opening
        # The limit counts model requests (README: "model rounds per turn"), whichever
        # way a round's calls run — overlapped with it (``rerun``) or in a pass of their
        # own. The last round it allows runs no call: no model would read the results.
        rounds = min(self.chat.max_rounds, max_rounds) if max_rounds else self.chat.max_rounds
        requests = 0
        counted = pending is not None  # a frame opened here, or a turn whose message was just written: none made yet
        while True:
            if pending is not None:
                requests += 1
                try:
                    outcome = await self.model_round(
                        scope, pending.history, placeholder=pending, candidates=candidates, another_round=requests < rounds
                    )
                finally:
                    pending.start()  # ended before its request went out (stopped, failed): the write still happens
                if isinstance(outcome, str):
                    return outcome
                pending, candidates = outcome, outcome.candidates if outcome else None
                continue
            history = await self.store.history(frame.id)
            if not counted:
                # Taken up again (a restart, a login after one): the rounds this turn
                # made before are stored, and count — a crash gives no fresh budget.
                counted, requests = True, rounds_made(history)
            last = history[-1] if history else None
            if last and last["role"] == "assistant" and unfinished_calls(last):
                pending = await self.execute_calls(scope, last["tool_calls"], another_round=requests < rounds)
                candidates = pending.candidates if pending else None
                continue
            # A streaming row at the tail is nobody's: one turn runs per conversation, a
            # model call ends its own row, and recovery marks a crashed one interrupted.
            # It is the placeholder the member's message was committed with: this round's.
            placeholder = last if last and last["role"] == "assistant" and last["status"] == "streaming" and not last["tool_calls"] else None
            if placeholder is None and last and last["role"] == "assistant" and not last["tool_calls"] and last["status"] != "interrupted":
                if run is not None and last["status"] == "error":
                    raise _failure_of(last)  # a run taken up again after its failure was written: it failed
                return last["content"]  # a final answer, or a failure already shown to the member
            if last is None:
                return ""
            if requests >= rounds:
                break
            if placeholder is not None:
                history = history[:-1]
            if frame.depth == 0 and run is None:
                # The safe boundary before a root turn's request that follows no tool
                # round of its own (its first, a turn taken up again): what its mailbox
                # holds goes in ahead of it — a cancelled background run's end reaches
                # the next turn that runs even when that turn runs no tool (seed 004 §4.4).
                # Consumed by that write: a later round's boundary finds it gone.
                steered = await self._steer_opening(frame, agent, placeholder, candidates)
                if steered is not None:
                    history, placeholder = steered
            requests += 1
            outcome = await self.model_round(
                scope, history, placeholder=placeholder["id"] if placeholder else None, candidates=candidates, another_round=requests < rounds
            )
            if isinstance(outcome, str):
                # Ended here, not by re-reading history: after an automatic compaction
                # the summary is the last row, and it must not start another round.
                return outcome
            pending, candidates = outcome, outcome.candidates if outcome else None
        text = f"Stopped after {rounds} rounds without a final answer."
        await self.store.add_note(frame, text, status="error", reason=reason_json("round_limit", {"rounds": rounds}))
        self.emit(frame, "error", error=text, code="round_limit", values={"rounds": rounds})
        if run is not None:
            raise FrameFailed(text, "round_limit", {"rounds": rounds})  # no answer: the run failed
        return text

    async def _steer_opening(
        self, frame: Frame, agent: AgentDefinition, placeholder: Mapping[str, Any] | None, candidates: list[ModelChoice] | None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
        """The steer events of a root turn's mailbox written ahead of this round's
        placeholder (the one stored with the member's message gives way to one after
        them): the history up to them and the new placeholder, or None (nothing held)."""
        steer = await self.runtime.subagents.steer(frame)
        if steer is None:
            return None
        model: ModelChoice | None = candidates[0] if candidates else None
        if model is None and placeholder is None:
            chosen = await self.runtime.models_for(frame, agent)
            if not chosen:
                return None  # the round fails for it as it would have; the events wait in the mailbox
            model = chosen[0]
        await self.store.steer_opening(frame, model, steer.write, placeholder["id"] if placeholder is not None else None)
        steer.delivered()
        history = await self.store.history(frame.id)
        return history[:-1], history[-1]

    async def model_round(
        self, scope: Scope, history: list[dict[str, Any]], *, placeholder: int | Pending | None = None,
        candidates: list[ModelChoice] | None = None, another_round: bool = False,
    ) -> str | Pending | None:
        """One model call, recorded. Returns the final answer when the round ended the
        frame (no tool calls, or a failure shown to the member); the next round's
        ``Pending`` placeholder when this round's calls ran here (``_overlapped_calls``,
        only with ``another_round``); else None (the calls are recorded, not run). Without
        ``another_round`` (the round limit's last round) the calls are recorded closed:
        no model would read their results, so none of them starts.
        ``placeholder``: the streaming row already written for this round, or its write."""
        frame, agent = scope.frame, scope.agent
        if self._agent_refusal(scope) is not None:
            if isinstance(placeholder, Pending):  # what it writes (the last call's result) comes first
                placeholder.start()
                try:
                    await placeholder.wait()
                except Abandoned:
                    pass
            self._check_agent(scope)
        # The turn's images first: a turn that sends some prefers a model that sees them.
        images = await turn_images(self.runtime.core, self.runtime.member_id, history)
        if candidates is None:
            # The models come from the registry's thread while the prompt is put together.
            candidates, system = await asyncio.gather(
                self.runtime.models_for(frame, agent, vision=bool(images)),
                self.runtime.system_prompt(frame, agent),
            )
        else:
            system = await self.runtime.system_prompt(frame, agent)
        memo = self._memo(frame)
        messages = project(system, history, images, memo)
        tools = self.runtime.offered_tools(agent, depth=scope.depth)
        if scope.run is None or not scope.run.signal_contract:
            tools = [t for t in tools if t.name != "emit_signal"]  # only a run with a signal contract may signal (seed 004 §4.7)
        scope.round_tools = frozenset(t.name for t in tools)
        tools_wire = [t.wire for t in tools]
        messages_json = memo.wire_json(messages)
        encoded = None if messages_json is None else (messages_json, b"[" + b",".join(t.wire_json for t in tools) + b"]")
        try:
            turn, message_id, request_log = await self.call_model(
                frame, candidates, messages, tools_wire, placeholder, images=bool(images), encoded=encoded
            )
        except FrameFailed:
            if scope.run is not None:
                raise  # a sub-agent's run fails with it: its caller's call says why
            return ""  # the member's turn: the failed answer is on screen, with Retry
        if turn is None:
            return ""
        if not tools and turn.tool_calls:
            # A tool-less round accepts no tool call (check E2): recording one would put
            # tool_calls into the history of requests that offer no tools, and give an
            # injected instruction a foothold in the one round that has none.
            log.warning("agent %s proposed %d tool call(s) in a tool-less round; dropped", agent.id, len(turn.tool_calls))
            turn.tool_calls = []
        known = {t.name: t for t in tools}
        calls = [
            (c.id, c.name, c.arguments, known[c.name].tool.restart if c.name in known else "mark_interrupted")
            for c in turn.tool_calls
        ]
        # The last round the limit allows: its calls are written closed, never started —
        # no model round follows to read their results.
        unrun = [] if another_round else [("cancelled", HOST_RESULTS["round_limit"])] * len(calls)
        running = await self._admit(scope, turn.tool_calls, known) if another_round else 0
        if another_round and calls and running == len(calls) and all(c[3] == "rerun" for c in calls):
            following = await self._overlapped_calls(scope, message_id, turn, calls, known, request_log, messages, tools_wire)
            if following is not None:
                await self.runtime.after_round(frame, turn)
                return following
        ending = scope.ending if not calls else None
        outcome: list[object] = []
        also = None if ending is None else _collect(ending.statements(turn.content), outcome)
        if ending is not None and ending.queued:
            return self._final_queued(frame, turn, message_id, request_log, messages, tools_wire, ending, also, outcome)
        call_ids = await self.store.finish_assistant(
            message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id, calls=calls, request_log=request_log,
            running=running, also=also, results=unrun,
        )
        scope.admitted.update(call_ids[:running])
        if request_log is not None:
            self.runtime.request_logged(frame, request_log[0], messages, tools_wire)
        if call_ids:
            self.emit(frame, "assistant", message_id=message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id,
                      tool_calls=[{"id": i, "name": c[1], "arguments": c[2]} for i, c in zip(call_ids, calls)])
            for i, c, (status, result) in zip(call_ids, calls, unrun):
                self._announce_result(scope, {"id": i, "name": c[1]}, status, result)
        else:
            self.emit(frame, "done", message_id=message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id,
                      tokens_in=turn.tokens_in, tokens_out=turn.tokens_out)
        if ending is not None:
            ending.committed(outcome[0])
        await self.runtime.after_round(frame, turn)
        return None if call_ids else turn.content

    def _final_queued(
        self, frame: Frame, turn: ModelTurn, message_id: int, request_log: tuple[str, dict[str, Any], str] | None,
        messages: list[dict[str, Any]], tools: list[dict[str, Any]], ending: Ending, also: Callable[[Any, list[str]], None],
        outcome: list[object],
    ) -> str:
        """A final answer whose frame's caller waits for it (``Ending.queued``): its
        write, with the run's end, takes its place in the file's one queue now and is
        not awaited — the caller's next request goes out while it commits, and the
        caller's own next write, queued behind it, cannot commit first. The answer's
        ``done`` and the run's end are announced once it committed. (A subframe's round
        runs no compaction: nothing of ``after_round`` is skipped.)"""
        written = self.store.finish_assistant_queued(
            message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id, request_log=request_log, also=also,
        )
        ending.joined = True  # written there, or not at all: its owner writes no end of its own

        def landed(done: "asyncio.Future[list[str]]") -> None:
            if done.cancelled() or done.exception() is not None:
                log.error("member %s: a sub-agent's final answer could not be written: %s", self.runtime.member_id,
                          "cancelled" if done.cancelled() else done.exception())
                return
            if request_log is not None:
                self.runtime.request_logged(frame, request_log[0], messages, tools)
            self.emit(frame, "done", message_id=message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id,
                      tokens_in=turn.tokens_in, tokens_out=turn.tokens_out)
            ending.committed(outcome[0])

        written.add_done_callback(landed)
        self._landing.add(written)
        written.add_done_callback(self._landing.discard)
        return turn.content

    async def call_model(
        self, frame: Frame, candidates: list[ModelChoice], messages: list[dict[str, Any]], tools: list[dict[str, Any]],
        placeholder: int | Pending | None = None, *, images: bool = True, encoded: tuple[bytes, bytes] | None = None,
    ) -> tuple[ModelTurn | None, int, tuple[str, dict[str, Any], str] | None]:
        """One round's model call with fallback: the turn, its message id, and the
        request log (request id, request body, response body) for ``finish_assistant``
        to write with it, in the commit a round makes anyway.

        The streaming placeholder row is committed before the first token is announced
        (a token names it); it carries checkpoints of the partial text, so a crash
        mid-stream leaves it on screen. They come at most every ``CHECKPOINT_SECONDS``,
        the first one that long after the first token: a short answer is written once,
        by ``finish_assistant``, and a round of calls alone runs no checkpointing. A
        round's placeholder is usually written with what precedes it (``placeholder``:
        the member's message, a tool round's last result); a ``Pending`` one is still
        being written, and the request goes out once it is committed: the streaming row
        is what recovery counts a request a crash cut by (``cut_requests``), so a request
        that left before it would be billed and never logged. Only a turn's opening
        (``Pending.early``) goes out meanwhile, its tokens held until the write commits."""
        if not candidates:
            raise NoModelConfigured("no model is configured")
        pending = placeholder if isinstance(placeholder, Pending) else None
        written_first = pending is not None and not pending.early
        message_id: int | None = None
        if pending is None:
            message_id = placeholder if placeholder is not None else await self.store.start_assistant(frame, candidates[0])
        partial = {"content": "", "reasoning": ""}
        partials = self.runtime.partials  # the live text a read of the conversation gives (``with_partials``)
        if message_id is not None:
            partials[message_id] = partial
        held: list[tuple[str, str]] = []
        dirty = asyncio.Event()
        saver: asyncio.Task[None] | None = None  # started by the first delta: a round of calls alone has none

        def on_delta(channel: str, text: str) -> None:
            nonlocal saver
            partial[channel] += text
            dirty.set()
            if saver is None:
                saver = asyncio.create_task(checkpoints())
            if message_id is None:
                held.append((channel, text))
            else:
                # ``at``: the characters of its channel before it, so a client that read
                # the text mid-answer (``with_partials``) appends exactly what it lacks.
                self.emit(frame, "token", message_id=message_id, channel=channel, delta=text, at=len(partial[channel]) - len(text))

        def release(placeholder_id: int) -> None:
            nonlocal message_id
            message_id = placeholder_id
            partials[message_id] = partial
            for channel in ("reasoning", "content"):  # what arrived meanwhile, one delta per channel
                text = "".join(t for c, t in held if c == channel)
                if text:
                    self.emit(frame, "token", message_id=message_id, channel=channel, delta=text, at=0)
            held.clear()

        if pending is not None:
            pending.then(release)

        async def checkpoints() -> None:
            while True:
                await asyncio.sleep(CHECKPOINT_SECONDS)
                await dirty.wait()
                dirty.clear()
                if message_id is not None:
                    await self.store.checkpoint(message_id, partial["content"], partial["reasoning"])

        sent: tuple[str, ModelChoice, float] | None = None  # the request under way, for its log row if it is cut
        answering = candidates[0]  # the entry a Stop names: after a fallback, the one streaming
        try:
            if written_first:
                pending.start()  # type: ignore[union-attr]
                message_id = await pending.wait()  # type: ignore[union-attr]
                partials[message_id] = partial
            for index, choice in enumerate(candidates):
                answering = choice
                # An id for the request log, not a secret: ``uuid4`` reads os.urandom,
                # which lets go of the GIL, and getting it back waited behind the
                # round's write thread, right before the request goes out (3% of the
                # loop thread's samples with the benchmark's 200 streams).
                request_id = f"{random.getrandbits(128):032x}"
                started = time.perf_counter()
                sent = (request_id, choice, started)
                try:
                    turn = await self._complete(choice, messages, tools, on_delta, pending if message_id is None else None, images, encoded)
                except ModelError as exc:
                    sent = None
                    await self.runtime.log_request(request_id, frame, choice.model, messages, tools, None, exc, started, model_id=choice.id)
                    if exc.retriable and index + 1 < len(candidates):
                        nxt = candidates[index + 1]
                        partial["content"] = partial["reasoning"] = ""
                        # A second request for the same round, to another model: shown to
                        # the member and logged, never silent. The note is history, written
                        # before it is announced, so a reload shows what the live page did
                        # (it names the answer it goes before: that row was written first).
                        # Named by entry (label, provider): two providers may serve one model name.
                        log.warning("member %s: model %s failed (%s); the request goes to %s",
                                    self.runtime.member_id, _entry(choice), model_failure(exc), _entry(nxt))
                        values = {"failed": choice.label, "next": nxt.label, "message_id": message_id}
                        note_id = await self.store.add_note(
                            frame, f"{choice.label} did not answer; trying {nxt.label}.", reason=reason_json("model_fallback", values),
                        )
                        self.emit(frame, "model_fallback", message_id=message_id, failed=choice.label, next=nxt.label,
                                  status=exc.status, reason=str(exc), note_id=note_id, code="model_fallback", values=values)
                        continue
                    # The last model tried failed too (or may not be retried): the answer
                    # fails, said in the log as every fallback before it was.
                    log.warning("member %s: model %s failed (%s); %s", self.runtime.member_id, _entry(choice), model_failure(exc),
                                "no other model is left to try: the answer failed" if exc.retriable else "not retried: the answer failed")
                    text = f"The model could not answer ({exc})."
                    reason = reason_json(exc.code, exc.values)
                    await self.store.finish_assistant(
                        message_id, content=text, reasoning="", model=choice.model, model_id=choice.id, status="error",
                        also=lambda conn, _ids: conn.execute("UPDATE messages SET reason = ? WHERE id = ?", (reason, message_id)),
                    )
                    # With its model, as ``done`` is: "Failed <model>" live as after a reload.
                    self.emit(frame, "error", message_id=message_id, error=text, code=exc.code, values=exc.values, model=choice.model,
                              model_id=choice.id)
                    raise FrameFailed(text, exc.code, exc.values)  # written and announced: ``model_round`` says what it ends
                sent = None
                await self.runtime.log_request(request_id, frame, choice.model, messages, tools, turn, None, started, payload=False, model_id=choice.id)
                response = {"content": turn.content, "reasoning": turn.reasoning, "tool_calls": [c.__dict__ for c in turn.tool_calls]}
                return turn, message_id, (request_id, self.runtime.request_body(frame, messages, tools), json.dumps(response))
        except Abandoned:
            if sent is not None and pending is not None and pending.request_left:
                # A turn's opening went out beside its message's write, and the turn is not
                # to go on from it (the message was not stored, or the request is sent
                # again): cut short by the host, it may be billed all the same.
                request_id, choice, started = sent
                await self.runtime.log_request(request_id, frame, choice.model, messages, tools, None, None, started, status="interrupted", model_id=choice.id)
            raise
        except asyncio.CancelledError:
            if sent is not None and not self.interrupted():
                # A request the member's Stop cut may be billed all the same: it is logged
                # as stopped. One the server's stop cut is left streaming for recovery,
                # which logs it (as it does one a crash cut) as it asks again.
                request_id, choice, started = sent
                await self.runtime.log_request(request_id, frame, choice.model, messages, tools, None, None, started, status="stopped", model_id=choice.id)
            if message_id is None and pending is not None:
                pending.start()
                try:  # the placeholder's write is in flight: it is the row to end
                    message_id = await pending.wait()
                except Abandoned:
                    pass  # no row was written for this round
            if message_id is None:
                raise
            if self.interrupted():
                # The server stopping (or the file locking): the partial is kept and the
                # row left streaming, exactly as a crash leaves it, so recovery ends it as
                # interrupted with its note in one place — the answer is asked for again
                # then, which the member must never find silent.
                await asyncio.shield(self.store.checkpoint(message_id, partial["content"], partial["reasoning"]))
            else:
                await asyncio.shield(
                    self.store.finish_assistant(
                        message_id, content=partial["content"], reasoning=partial["reasoning"], model=answering.model,
                        model_id=answering.id, status="cancelled",
                    )
                )
                # Written, then announced with its model as ``done`` is, so the stopped
                # answer reads "Stopped <model>" live as it does after a reload; the
                # turn's own ``cancelled`` follows once the whole call tree has stopped.
                # ``content`` is for channels: one that streamed the answer finishes it
                # with what was kept (the web already holds the text).
                self.emit(frame, "answer_cancelled", message_id=message_id, model=answering.model, model_id=answering.id,
                          content=partial["content"])
            raise
        finally:
            if saver is not None:
                saver.cancel()
            if message_id is not None and partials.get(message_id) is partial:
                del partials[message_id]
        return None, message_id, None  # type: ignore[return-value]

    async def _complete(
        self, choice: ModelChoice, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_delta: Any,
        pending: Pending | None, images: bool, encoded: tuple[bytes, bytes] | None,
    ) -> ModelTurn:
        """The model call; with a ``pending`` placeholder, it runs while the write
        commits, and is abandoned with it."""
        if pending is None:
            return await self.chat.clients.complete(choice, messages, tools, on_delta, images=images, encoded=encoded)
        stream = asyncio.ensure_future(
            self.chat.clients.complete(choice, messages, tools, on_delta, images=images, on_sent=pending.sent, encoded=encoded)
        )
        stream.add_done_callback(lambda _: pending.start())  # failed or cancelled before sending: the write still happens
        try:
            await pending.wait()
        except BaseException:
            stream.cancel()
            await asyncio.gather(stream, return_exceptions=True)
            raise
        return await stream

    def _agent_refusal(self, scope: Scope) -> str | None:
        """What the member's current role lacks to go on in this frame, as the audit
        names it: the conversation's agent (``agent:<id>``, or project chat), or for a
        sub-agent's frame delegation; None: nothing."""
        member = self.runtime.member
        if scope.depth == 0:
            if may_start_agent(member, scope.agent.id, scope.agent.kind):
                return None
            return "action:projects.chat" if scope.agent.kind == "project" else f"agent:{scope.agent.id}"
        return None if allowed(member, "tools.delegate") else "action:tools.delegate"

    def _check_agent(self, scope: Scope) -> None:
        """Every round, from the member as now known: the conversation's agent must be
        one their role lets them talk with, a sub-agent's frame needs ``tools.delegate``.
        An AgentError ends the turn (a sub-agent's: its delegating call fails)."""
        refusal = self._agent_refusal(scope)
        if refusal is None:
            return
        audit.denied(self.runtime.member_id, refusal, via="round")
        if scope.depth:
            raise AgentError("access was withdrawn: the member's role no longer allows sub-agents")
        raise AgentError(f"access was withdrawn: the member's role no longer allows this conversation's agent ({scope.agent.id})")

    def _withdrawn(self, scope: Scope, call: dict[str, Any], registered: RegisteredTool) -> tuple[str, str] | None:
        """The refusal of a call whose tool the member may not use now (the grant
        revoked, the plugin disabled, the role changed, the member deactivated), with
        an audit line; None when it may start. Asked as each call starts — after an
        approval wait, a wait in its batch, a restart — whoever answered the approval."""
        refusal = self.runtime.core.catalog.tool_refusal(self.runtime.member, registered) or self._agent_refusal(scope)
        if refusal is None:
            return None
        audit.denied(self.runtime.member_id, refusal, via="tool_start", tool=call["name"])
        return "denied", WITHDRAWN

    # -- tool calls ------------------------------------------------------------------------

    @staticmethod
    def _concurrent(tools: list[RegisteredTool | None]) -> bool:
        """A batch runs concurrently when it has several calls, all of tools that say so."""
        return len(tools) > 1 and all(t is not None and t.tool.concurrency_safe for t in tools)

    async def _admit(self, scope: Scope, calls: list[Any], offered: dict[str, RegisteredTool]) -> int:
        """How many of a new round's leading calls start right away, so are written as
        running with their assistant message: all of a concurrent batch, or the first of
        a sequential one, when each is an offered tool with valid arguments that the
        gate allows outright (else 0: they start the usual way, one write each)."""
        starting = calls if self._concurrent([offered.get(c.name) for c in calls]) else calls[:1]
        if not starting:
            return 0
        rules = await self.chat.rules.rules()
        for call in starting:
            if call.name not in offered:
                return 0
            arguments = call_arguments(call.arguments)
            if not isinstance(arguments, dict) or decide(rules, call.name, arguments, self.runtime.member_groups) != "allow":
                return 0
            if await self._forced_to_ask(scope, offered[call.name], "allow") is not None:
                return 0  # allowed by the rules, but outside text is in the frame: it asks (execute_one)
        return len(starting)

    async def execute_calls(
        self, scope: Scope, calls: list[dict[str, Any]], *, another_round: bool = False
    ) -> Pending | None:
        """Run the round's unfinished calls and record their results in call order.
        With ``another_round`` (a model round follows), the last result is written with
        that round's placeholder, and the round starts on the returned ``Pending``."""
        pending = [c for c in calls if c["status"] not in TERMINAL_CALL_STATES]
        tools = [self.chat.tools.get(c["name"]) for c in pending]
        outcomes: list[tuple[str, str]] = []
        if self._concurrent(tools):
            tasks = [asyncio.create_task(self.execute_one(scope, c)) for c in pending]
            try:
                outcomes = list(await asyncio.gather(*tasks))
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if not self.interrupted():
                    await asyncio.shield(self._record_unfinished(scope, [c["id"] for c in pending], "cancelled", HOST_RESULTS["stopped"]))
                raise
            for call, (status, result) in zip(pending[:-1], outcomes):  # recorded in call order
                await self._record(scope, call, status, result)
        else:
            for index, call in enumerate(pending):
                try:
                    status, result = await self.execute_one(scope, call)
                except asyncio.CancelledError:
                    if not self.interrupted():
                        # The calls queued behind this one end with it, in one write: a
                        # stopped round leaves none ``requested`` (shown waiting for ever,
                        # and read by the next turn as never finished).
                        await asyncio.shield(self._record_unfinished(
                            scope, [c["id"] for c in pending[index:]], "cancelled", HOST_RESULTS["stopped"]))
                    raise
                outcomes.append((status, result))
                if call is not pending[-1]:
                    await self._record(scope, call, status, result)
        if not pending:
            return None
        history = await self.store.history(scope.frame.id) if another_round else []
        if not (history and any(c["id"] == pending[-1]["id"] for c in history[-1]["tool_calls"])):
            await self._record(scope, pending[-1], *outcomes[-1])  # no round follows (or its history is not this one's)
            return None
        return await self._record_and_continue(scope, history, [(pending[-1], *outcomes[-1])])

    async def _overlapped_calls(
        self, scope: Scope, message_id: int, turn: ModelTurn, calls: list[tuple[str, str, str, str]],
        offered: dict[str, RegisteredTool], request_log: tuple[str, dict[str, Any], str] | None,
        messages: list[dict[str, Any]], tools: list[dict[str, Any]],
    ) -> Pending | None:
        """A round whose calls may all simply run again after a crash (``rerun``) and
        that the gate allows outright runs them before its assistant message is
        written; the message, the results and the next placeholder are written in one
        commit while the next request is built from memory, and it goes out once that
        commit has landed (announced on commit: ``assistant``, ``tool_start``, ``tool_done``). Calls
        still running after ``SLOW_CALL_SECONDS`` get their message written (as
        running) and announced meanwhile, so a slow tool shows as it runs. A crash
        before that commit loses only what the model was asked, which the turn asks
        again; one after it finds the calls running, and recovery runs them again.
        None: the round's row is not the kept history's last (the plain way records it)."""
        frame = scope.frame
        rows = await self.store.history(frame.id)
        if not rows or rows[-1]["id"] != message_id:
            return None
        # The model's ids where they are new to this frame (some models number their
        # calls from 0 every round); the write replaces one the file already has.
        on_wire = self._memo(frame).call_ids  # the ids this frame's requests carried
        ids: list[str] = []
        for model_id, *_ in calls:
            fresh = model_id and len(model_id) <= 64 and model_id not in on_wire and model_id not in ids
            ids.append(model_id if fresh else "call_" + uuid.uuid4().hex[:24])
        calls = [(i, *c[1:]) for i, c in zip(ids, calls)]
        started = [{"id": i, "name": c[1], "arguments": c[2], "status": "running"} for i, c in zip(ids, calls)]

        def announce(written: list[str]) -> None:
            """The message and its calls' start, once committed."""
            if request_log is not None:
                self.runtime.request_logged(frame, request_log[0], messages, tools)
            self.emit(frame, "assistant", message_id=message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id,
                      tool_calls=[{"id": i, "name": c[1], "arguments": c[2]} for i, c in zip(written, calls)])
            for i, c in zip(written, calls):
                self.emit(frame, "tool_start", call_id=i, name=c[1], arguments=c[2])

        recorded: asyncio.Future[list[str]] | None = None

        def record(also: Callable[[Any, list[str]], None] | None = None) -> asyncio.Future[list[str]]:
            """Write the message with its calls running (a slow call, an early end, or a
            call's own write that must follow its row: ``settle``)."""
            nonlocal recorded
            if recorded is None:
                recorded = asyncio.ensure_future(self.store.finish_assistant(
                    message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id, calls=calls,
                    request_log=request_log, running=len(calls), also=also,
                ))
                recorded.add_done_callback(lambda w: w.cancelled() or w.exception() is not None or announce(w.result()))
            return recorded

        async def write(changes: list[tuple[str, str, str]], placeholder: tuple[Any, ...]) -> tuple[list[str], int]:
            if recorded is not None:
                written = await recorded
                return written, await self.store.set_calls([(i, s, r) for i, (_, s, r) in zip(written, changes)], placeholder=placeholder)  # type: ignore[return-value]
            written, placeholder_id = await self.store.finish_round(
                message_id, content=turn.content, reasoning=turn.reasoning, model=turn.model, model_id=turn.model_id, calls=calls,
                results=[(s, r) for _, s, r in changes], request_log=request_log, placeholder=placeholder,
            )
            announce(written)
            return written, placeholder_id

        ran = False  # the calls have all returned: the round is written with their results

        async def settle(call_id: str, also: Callable[[Any, str], object] | None = None) -> tuple[str, Any]:
            """``also``: the call's first write (a sub-agent run's frame), joined with the
            round's when that is not under way yet — the two announce nothing between
            them, and a delegation's answer waits for each commit."""
            if ran or call_id not in ids:  # a tool's late use of its context: nothing left to write first
                return call_id, NOT_JOINED
            index = ids.index(call_id)
            joined: list[object] = []
            joins = also is not None and recorded is None
            written = await asyncio.shield(record(_in_savepoint(also, index, joined) if joins else None))  # type: ignore[arg-type]
            if not joins:
                return written[index], NOT_JOINED
            if isinstance(joined[0], _Refused):
                raise joined[0].error
            return written[index], joined[0]

        slow = asyncio.get_running_loop().call_later(SLOW_CALL_SECONDS, record)
        scope.admitted.update(ids)
        scope.settle = settle
        tasks: list[asyncio.Future[tuple[str, str]]] = []
        outcomes: list[tuple[str, str]] | None = None
        try:
            if len(started) == 1:  # no task of its own: one loop pass fewer before the next request
                outcomes = [await self.execute_one(scope, started[0], offered=offered)]
            else:
                tasks = [asyncio.ensure_future(self.execute_one(scope, call, offered=offered)) for call in started]
                outcomes = await asyncio.gather(*tasks)
            slow.cancel()
            scope.settle, ran = None, True
            row = MappingProxyType({
                **rows[-1], "content": turn.content, "reasoning": turn.reasoning, "model": turn.model, "model_id": turn.model_id, "status": "complete",
                "tool_calls": tuple(
                    MappingProxyType({"message_id": message_id, "frame_id": frame.id, "seq": seq, "restart": c[3], **call})
                    for seq, (call, c) in enumerate(zip(started, calls))
                ),
            })
            return await self._record_and_continue(
                scope, rows[:-1] + [row], [(call, *outcome) for call, outcome in zip(started, outcomes)], write
            )
        except BaseException:
            slow.cancel()
            scope.settle, ran = None, True
            for task in tasks:
                task.cancel()
            ended = outcomes if outcomes is not None else await asyncio.gather(*tasks, return_exceptions=True)
            try:
                written = await asyncio.shield(record())
            except Exception:
                written = []  # the round's write failed: nothing of it is stored
            done = [(i, call, *o) for i, call, o in zip(written, started, ended) if isinstance(o, tuple)]
            if done:  # these ran before something else failed: kept, as the plain way keeps them
                await asyncio.shield(self.store.set_calls([(i, status, _clip(result)) for i, _, status, result in done]))
                for i, call, status, result in done:
                    self._announce_result(scope, {**call, "id": i}, status, _clip(result))
            if not self.interrupted():
                for i in written:
                    await asyncio.shield(self._record_if_unfinished(scope, i, "cancelled", HOST_RESULTS["stopped"]))
            raise

    async def _record_and_continue(
        self, scope: Scope, history: list[Any], results: list[tuple[dict[str, Any], str, str]],
        write: Callable[[list[tuple[str, str, str]], tuple[Frame, str]], Awaitable[tuple[list[str], int]]] | None = None,
    ) -> Pending:
        """The batch's last results (call, status, result), written with the next
        round's placeholder; the next request is built meanwhile from ``history`` (its
        last message the one these calls belong to) as that write leaves it; the write
        starts once the request is built (``Pending.start``), and the request goes out
        once it has committed (the placeholder is what recovery counts a request a crash
        cut by). Started no sooner: a run's final answer queued just before (its
        ``agent_done``) is announced before this write's ``tool_done``. ``write``:
        how (given the changes and the placeholder; returns the calls' ids as written
        and the placeholder's id), when that message's own write is not done either."""
        frame, agent = scope.frame, scope.agent
        images = await turn_images(self.runtime.core, self.runtime.member_id, history)
        candidates = await self.runtime.models_for(frame, agent, vision=bool(images))
        if not candidates:
            raise NoModelConfigured("no model is configured")
        results = [(call, status, _clip(result)) for call, status, result in results]
        finished = {call["id"]: (status, result) for call, status, result in results}
        last = history[-1]
        calls = tuple(
            MappingProxyType({**c, "status": finished[c["id"]][0], "result": finished[c["id"]][1]}) if c["id"] in finished else c
            for c in last["tool_calls"]
        )
        changes = [(call["id"], status, result) for call, status, result in results]
        # The safe boundary of a root turn (seed 004 §4.4): steer events its mailbox
        # admitted go into history right ahead of the next round's placeholder, consumed
        # in that same write. Not pipelined then: the request is built from the history
        # as written (a steered round is rare; its read is the price).
        steer = await self.runtime.subagents.steer(frame) if frame.depth == 0 else None
        placeholder = (frame, candidates[0]) if steer is None else (frame, candidates[0], steer.write)

        async def set_calls(changes: list[tuple[str, str, str]], placeholder: tuple[Any, ...]) -> tuple[list[str], int]:
            return [i for i, _, _ in changes], await self.store.set_calls(changes, placeholder=placeholder)  # type: ignore[return-value]

        async def record() -> None:
            """Written, then announced in the same step: the message and its calls' start
            (``write``'s), their results and the next round's held tokens leave as one
            burst, one WebSocket message (a done-callback ran a loop pass later, after
            the socket had sent the first part on its own)."""
            try:
                ids, placeholder_id = await (write or set_calls)(changes, placeholder)
            except BaseException as error:
                abandoned = Abandoned("the calls' results could not be written", committed=False)
                abandoned.__cause__ = error  # the turn ends saying why (a full disk, say)
                pending.abandon(abandoned)
                return
            await self._after_queued_answers()  # a run's answer queued before this write is announced first
            for i, (call, status, result) in zip(ids, results):
                self._announce_result(scope, {**call, "id": i}, status, result)
            pending.confirm(placeholder_id)

        def start() -> None:
            asyncio.ensure_future(record())

        pending = Pending(history[:-1] + [MappingProxyType({**last, "tool_calls": calls})], None if steer else start, candidates)
        if steer is not None:
            await record()
            if pending.placeholder_id is not None:
                steer.delivered()
                pending.history = (await self.store.history(frame.id))[:-1]  # up to its trigger, without the placeholder
        return pending

    async def _record(self, scope: Scope, call: dict[str, Any], status: str, result: str) -> None:
        result = _clip(result)
        await self.store.set_call(call["id"], status, result)
        await self._after_queued_answers()
        self._announce_result(scope, call, status, result)

    async def _after_queued_answers(self) -> None:
        """A run's final answer written queued (``_final_queued``) committed before any
        write submitted after it; its ``done`` and ``agent_done`` are announced before
        what such a write announces (its call's ``tool_done``): the announcements wait
        for its callbacks (``asyncio.wait`` runs after those registered before it)."""
        if self._landing:
            await asyncio.wait(list(self._landing))

    def _announce_result(self, scope: Scope, call: dict[str, Any], status: str, result: str) -> None:
        kind = {"done": "tool_done", "denied": "tool_denied", "cancelled": "tool_cancelled"}.get(status, "tool_error")
        self.emit(scope.frame, kind, call_id=call["id"], name=call["name"], status=status, result=result[:4000], result_code=result_code(result),
                  reason=json.loads(reason) if (reason := result_reason(result)) else None)

    async def _record_if_unfinished(self, scope: Scope, call_id: str, status: str, result: str) -> None:
        await self._record_unfinished(scope, [call_id], status, result)

    async def _record_unfinished(self, scope: Scope, call_ids: list[str], status: str, result: str) -> None:
        """The given calls not finished yet end with ``status``, in one commit, each
        announced (a stopped round's running call and those queued behind it)."""
        rows = [row for call_id in call_ids if (row := await self.store.call(call_id)) is not None and row.status not in TERMINAL_CALL_STATES]
        if not rows:
            return
        await self.store.set_calls([(row.id, status, result) for row in rows])
        for row in rows:
            self.emit(scope.frame, "tool_cancelled", call_id=row.id, name=row.name, status=status)

    async def execute_one(
        self, scope: Scope, call: dict[str, Any], *, offered: dict[str, RegisteredTool] | None = None
    ) -> tuple[str, str]:
        """Run one call through the gate; its outcome (status, result). ``offered``:
        the tools of the round that proposed the call, which it runs right after (its
        start is then announced by whoever writes it: it is not written yet)."""
        registered = offered.get(call["name"]) if offered is not None else self._lookup(scope, call["name"])
        decided = False  # the member approved this call before its tool was looked up again
        if registered is None and offered is None and call["status"] == "awaiting_approval" and self._may_come_back(scope, call["name"]):
            # A card raised before a restart whose tool is not back yet: a plugin's
            # per-member tools (a connector's) come only once it has started again, which
            # the recovering turn does not wait for. The member decides first; the tool
            # is looked up as the call starts.
            verdict = await self._recovered_approval(scope, call)
            if verdict is not None:
                return verdict
            registered, decided = await self._lookup_when_back(scope, call["name"]), True
        if registered is None:
            if call["status"] == "running" and call["id"] not in scope.admitted:
                # Running when the server stopped, and its tool not back (yet): a
                # connector's tools come only once it has started again. Judged as any
                # call that may have had its effect, never as the model's mistake.
                return "interrupted", self.runtime.cut_result
            if decided or (scope.round_tools is not None and call["name"] in scope.round_tools and self.chat.tools.get(call["name"]) is None):
                # A plugin's per-member tool offered for this round (or whose card was
                # raised) and not offered to the member now: its access went (a
                # connector revoked, the plugin stopped), refused as a withdrawn
                # registered tool is, with its audit line. Not the model's mistake.
                audit.denied(self.runtime.member_id, f"tool:{call['name']}", via="tool_start", tool=call["name"])
                return "denied", WITHDRAWN
            return "error", coded_result(f"Error: there is no tool named {call['name']!r} here.", "no_such_tool", {"name": call["name"]})
        arguments = call_arguments(call["arguments"])
        if not isinstance(arguments, dict):
            return "error", arguments
        admitted = call["id"] in scope.admitted
        scope.admitted.discard(call["id"])
        if call["status"] == "running" and not admitted and registered.tool.restart == "mark_interrupted":
            return "interrupted", self.runtime.cut_result
        withdrawn = self._withdrawn(scope, call, registered)
        if withdrawn is not None:  # not asked for: an approval could not make it run
            if call["status"] == "awaiting_approval":
                approval = await self.store.approval_for_call(call["id"])
                if approval is not None:
                    await self._expire_approval(scope, approval["id"])
            return withdrawn

        waited = decided or call["status"] == "awaiting_approval"  # for the member's OK: the rules may have changed since
        if admitted or decided:
            verdict = None  # the gate allowed it as the round was written, as running; or the member did
        elif call["status"] == "awaiting_approval":
            verdict = await self._recovered_approval(scope, call)
        else:
            decision = decide(await self.chat.rules.rules(), call["name"], arguments, self.runtime.member_groups)
            if decision == "deny":
                return "denied", HOST_RESULTS["rule"]
            untrusted = await self._forced_to_ask(scope, registered, decision)
            if untrusted is not None:
                decision = "require"
            if decision == "require":
                if scope.unattended:
                    return "denied", HOST_RESULTS["unattended"]
                args_hash = arguments_hash(arguments)  # what an approval is bound to (only a call that asks needs it)
                approval_id = await self.store.request_approval(call["id"], scope.frame.conversation_id, call["name"], args_hash, expiry(), untrusted)
                self.emit(scope.frame, "approval_required", approval_id=approval_id, call_id=call["id"], name=call["name"],
                          arguments=call["arguments"], untrusted=untrusted)
                approval = await self.store.approval(approval_id)
                verdict = await self._await_approval(scope, call, approval, args_hash)
                waited = True
            else:
                verdict = None
        if verdict is not None:
            return verdict
        if waited and decide(await self.chat.rules.rules(), call["name"], arguments, self.runtime.member_groups) == "deny":
            # A rule made to refuse it while the card waited: the member's OK was asked
            # under the old rule, and a refusal wins over it.
            audit.denied(self.runtime.member_id, f"rule:{call['name']}", via="tool_start", tool=call["name"])
            return "denied", HOST_RESULTS["rule"]
        # Access may have gone while the call waited (for an approval, for its turn in
        # the batch, for the server): asked again as it starts.
        withdrawn = self._withdrawn(scope, call, registered)
        if withdrawn is not None:
            return withdrawn
        if not admitted and self.chat.tools.get(registered.name) is not registered:
            # A member tool (member_tools hook) is asked for again after the gate: it may
            # have been withdrawn (access revoked) while its card waited.
            if not any(t.name == registered.name for t in self.runtime.offered_tools(scope.agent, depth=scope.depth)):
                audit.denied(self.runtime.member_id, f"tool:{call['name']}", via="tool_start", tool=call["name"], plugin=registered.plugin_id)
                return "denied", WITHDRAWN

        if not admitted:
            await self.store.set_call(call["id"], "running")
        if offered is None:
            self.emit(scope.frame, "tool_start", call_id=call["id"], name=call["name"], arguments=call["arguments"])
        plugin_api = self.runtime.core.host_api(registered.plugin_id)
        ctx = ToolContext(
            member_id=self.runtime.member_id,
            conversation_id=scope.frame.conversation_id,
            frame_id=scope.frame.id,
            cancelled=self.runtime.cancel_event(scope.frame.conversation_id),
            host=plugin_api,
            turn=dataclasses.replace(scope, call_id=call["id"], plugin_id=registered.plugin_id),
        )
        outcome = await self._run_tool(registered, arguments, ctx)
        # Before its result is written: a restart after that write must find the mark.
        await self._note_untrusted(scope, registered, ctx)
        return outcome

    async def _note_untrusted(self, scope: Scope, registered: RegisteredTool, ctx: ToolContext) -> None:
        """The call's result carries outside text (its tool says so always, or it said
        so for this call): the frame is marked for good (check E2)."""
        if not registered.tool.untrusted_output and not ctx.untrusted_sources:
            return
        detail = next((source for source in ctx.untrusted_sources if source), "")
        await self.store.mark_untrusted(scope.frame.id, "tool", {"tool": registered.tool.name, "detail": detail[:200]})

    async def _forced_to_ask(self, scope: Scope, registered: RegisteredTool, decision: str) -> dict[str, Any] | None:
        """Why a call the rules allow asks anyway, or None: it has a side effect (its
        tool is not a pure read re-run after a restart) and untrusted text entered this
        frame's context (check E2: an injection there must not act unasked). A deny
        still denies; a call already asked about is asked as it was."""
        if decision != "allow" or registered.tool.restart == "rerun":
            return None
        return await self.store.untrusted(scope.frame.id)

    async def _run_tool(self, registered: RegisteredTool, arguments: dict[str, Any], ctx: ToolContext) -> tuple[str, str]:
        """The tool's own run, its outcome (status, result); raises only a stop."""
        watch = LoopWatch(self.runtime.core.plugins.loop_held)  # a tool that blocks holds up every member: the timeout cannot cut it off, the log says so
        try:
            async with asyncio.timeout(self.chat.tool_timeout):
                result = await watch.steps(registered.tool.run(arguments, ctx))
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if ctx.cancelled.is_set() or self.interrupted() or current is None or current.cancelling():
                # A stop, a timeout (which turns it into TimeoutError), the server stopping
                # or the file locking (a delegation's runs are cut off, and it says so by
                # raising CancelledError: the call stays for recovery).
                raise
            # Nobody cancelled the turn: the tool raised CancelledError itself (a task of
            # its own that was cancelled, re-raised). A failure of the tool, not a stop:
            # the turn ended silently, as if the member had pressed Stop.
            return "error", self._tool_failed(registered, exc)
        except TimeoutError as exc:
            return "error", self._tool_timed_out(registered, exc)
        except ToolError as exc:  # a failure the tool worded for the model
            if not str(exc):
                return "error", "Error: the tool failed."
            text = encodable(f"Error: {exc}")
            # A host-made refusal (a file that does not exist) carries its code: the member
            # reads it in their language, the model the English.
            code = getattr(exc, "code", None)
            return "error", coded_result(text, code, getattr(exc, "values", None)) if isinstance(code, str) and code else text
        except (Exception, *PLUGIN_EXITS) as exc:  # a tool's failure is the tool's result, never the turn's end
            # SystemExit and KeyboardInterrupt too: raised by a tool (sys.exit(), a
            # library's exit), they left asyncio's task and stopped the whole server. A
            # real Ctrl-C never arrives here: ``skald serve`` takes SIGINT by a loop signal
            # handler (server.py) that stops the server, so no KeyboardInterrupt is raised
            # into running code; one seen here was raised by the plugin.
            return "error", self._tool_failed(registered, exc)
        finally:
            watch.warn_if_slow(registered.plugin_id, f"tool {registered.tool.name}")
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            # The tool caught its cancellation (a stop, the server stopping) and returned:
            # the turn still ends here, as for a tool that was cut off.
            raise asyncio.CancelledError
        if result is None:
            return "done", ""
        if not isinstance(result, str):
            defined = definition_of(registered.tool.run)  # the frames end in the host, which found it out
            wrong = TypeError(
                f"tool {registered.tool.name!r} returned {type(result).__name__}; a tool returns str or None"
                f" (encode structured results yourself, e.g. json.dumps){f'; its run is at {defined}' if defined else ''}"
            )
            return "error", self._tool_failed(registered, wrong, say=True)
        return "done", encodable(result)  # a lone surrogate failed the next model request, and the turn with it

    def _tool_failed(self, registered: RegisteredTool, exc: BaseException, *, say: bool = False) -> str:
        """An unexpected failure: the model reads a generic line with an error id; the
        log and the plugin's page get the traceback, its message withheld unless ``say``
        (the host wrote it)."""
        error_id = record_failure(
            self.runtime.core.plugins, registered.plugin_id, f"tool {registered.tool.name}", exc, say=say, tool=registered.tool.name,
        )
        # SystemExit, KeyboardInterrupt, CancelledError: no failure's usual type, and no
        # stop of the server or the turn (its type is the host's word, never member data).
        raised = "" if isinstance(exc, Exception) else f": it raised {type(exc).__name__}"
        return f"Error: the tool failed{raised} (error id {error_id}); the admin can look it up on the plugin's page."

    def _tool_timed_out(self, registered: RegisteredTool, exc: TimeoutError) -> str:
        """A call past the tool timeout: on the plugin's page and in the log like a crash
        (the admin had no trace of it), at WARNING; the frames are where the tool was
        waiting when it was cut off, and the arguments (the member's words) are nowhere."""
        seconds = f"{self.chat.tool_timeout:g}"
        cut_off = exc.__context__ if isinstance(exc.__context__, asyncio.CancelledError) else exc
        stuck = TimeoutError(f"tool {registered.tool.name} did not finish within {seconds} s").with_traceback(cut_off.__traceback__)
        error_id = record_failure(
            self.runtime.core.plugins, registered.plugin_id, f"tool {registered.tool.name}", stuck, say=True,
            tool=registered.tool.name, level=logging.WARNING,
        )
        return f"Error: the tool did not finish within {seconds} s (error id {error_id})."

    def _lookup(self, scope: Scope, name: str) -> RegisteredTool | None:
        """The tool a call of ``name`` runs in this frame now, or None."""
        registered = self.chat.tools.get(name)
        if registered is None:
            # A plugin's per-member tool (the member_tools hook), asked again now: it
            # may have been withdrawn since the round.
            registered = next((t for t in self.runtime.offered_tools(scope.agent, depth=scope.depth) if t.name == name), None)
        if registered is not None and not scope.agent.offers(registered.name):
            return None
        if scope.round_tools is not None and name not in scope.round_tools:
            return None  # the model named a tool its round did not offer
        return registered

    async def _lookup_when_back(self, scope: Scope, name: str) -> RegisteredTool | None:
        """The tool once it is offered again, waiting up to ``TOOL_RETURN_SECONDS``: a
        member approving the moment the server is back beats their connector's start.
        Only while a plugin may still bring it (``_tools_may_arrive``): when none can
        (the tool's plugin uninstalled, disabled or failed), the member waited the whole
        time for a refusal that was certain at once."""
        deadline = asyncio.get_running_loop().time() + TOOL_RETURN_SECONDS
        while (registered := self._lookup(scope, name)) is None and asyncio.get_running_loop().time() < deadline and self._tools_may_arrive():
            await asyncio.sleep(TOOL_RETURN_POLL_SECONDS)
        return registered

    def _tools_may_arrive(self) -> bool:
        """Whether a tool missing now may yet be offered: an enabled plugin that has not
        started yet (nor failed, nor waits for the admin), or a running one whose
        ``member_tools`` offers a member's tools as they come (a connector connecting
        after its start). Registered tools come only with their plugin's load."""
        return any(
            status.state == "loaded" and status.healthy and not status.waiting and (not status.started or "member_tools" in status.hooks)
            for status in self.runtime.core.plugins.statuses()
        )

    def _may_come_back(self, scope: Scope, name: str) -> bool:
        """A tool missing now that this frame could be offered later: not refused by
        its agent or its round, and not one of the fixed tools (those are all there)."""
        return self.chat.tools.get(name) is None and scope.agent.offers(name) and (scope.round_tools is None or name in scope.round_tools)

    async def _recovered_approval(self, scope: Scope, call: dict[str, Any]) -> tuple[str, str] | None:
        """A call awaiting approval when the server stopped: its card reappears on the
        member's screen (seed 001 "Restart recovery", step 2) while this waits; as
        ``_await_approval`` answers."""
        arguments = call_arguments(call["arguments"])
        if not isinstance(arguments, dict):
            return "error", arguments
        approval = await self.store.approval_for_call(call["id"])
        withdrawn = approval is not None and raised_before_deactivation(approval, self.runtime.member.deactivated_at)
        if approval is not None and approval["status"] == "pending" and not scope.unattended and not withdrawn:
            self.emit(scope.frame, "approval_required", approval_id=approval["id"], call_id=call["id"], name=call["name"],
                      arguments=call["arguments"], untrusted=await self.store.untrusted(scope.frame.id))
        return await self._await_approval(scope, call, approval, arguments_hash(arguments))

    async def _expire_approval(self, scope: Scope, approval_id: str) -> None:
        """A pending approval its call no longer waits for: written expired, then
        announced as the member's own decision is (``MemberRuntime.resolve_approval``:
        the conversation's event, whatever frame asked), so that every page showing the
        card — a sub-agent's too — clears it instead of leaving its buttons live."""
        if await self.store.resolve_approval(approval_id, "expired"):
            self.runtime.emit("approval_resolved", scope.frame.conversation_id, approval_id=approval_id, decision="expired")

    async def _withdraw_deactivated(self, scope: Scope, call: dict[str, Any], approval: dict[str, Any]) -> tuple[str, str]:
        """A card raised before the member was deactivated, read again after they were
        reactivated (their file opens again): the call is withdrawn, never run. A card
        still pending is written denied and announced as a withdrawn OK is
        (``MemberRuntime.resolve_approval``), so every page showing it clears it saying
        why, and approving it afterwards changes nothing."""
        audit.denied(self.runtime.member_id, DEACTIVATED, via="approval", tool=call["name"])
        if approval["status"] == "pending" and await self.store.resolve_approval(approval["id"], "denied"):
            self.runtime.emit("approval_resolved", scope.frame.conversation_id, approval_id=approval["id"],
                              decision="denied", reason=WITHDRAWN_REASON)
        return "denied", WITHDRAWN

    async def _await_approval(
        self, scope: Scope, call: dict[str, Any], approval: dict[str, Any] | None, args_hash: str
    ) -> tuple[str, str] | None:
        """None to run the call; else its terminal outcome. The approval must be for
        these exact arguments and is consumed by this one call."""
        if approval is None:
            return "denied", HOST_RESULTS["lost"]
        if raised_before_deactivation(approval, self.runtime.member.deactivated_at):
            return await self._withdraw_deactivated(scope, call, approval)
        status = approval["status"]
        if status == "pending" and expired(approval["expires_at"]):
            await self.store.resolve_approval(approval["id"], "expired")
            status = "expired"
        if status == "pending":
            if scope.unattended:
                await self.store.resolve_approval(approval["id"], "expired")
                return "denied", HOST_RESULTS["unattended"]
            self.runtime.pending_cards[approval["id"]] = scope.frame.conversation_id
            try:
                # Until the card's end (``expires_at``), not for ever: a card left pending
                # past it could still be approved, and ran (a crash-kill probe, SECURITY G2).
                # A helper holds no run permit meanwhile (``SubagentCoordinator.waiting``).
                async with self.runtime.subagents.waiting(scope):
                    status = await asyncio.wait_for(self.runtime.waiters.wait(approval["id"]), seconds_left(approval["expires_at"]))
            except asyncio.TimeoutError:
                await self._expire_approval(scope, approval["id"])
                settled = await self.store.approval(approval["id"])  # the member's answer may have come first
                status = settled["status"] if settled is not None else "expired"
            except asyncio.CancelledError:
                if self.interrupted():
                    pass  # the server stopping: recovery asks again
                elif self.runtime.cancel_event(scope.frame.conversation_id).is_set():
                    # The member's Stop: written expired, unannounced; the turn's
                    # ``cancelled`` settles its card as stopped (the phone app and the
                    # web say "the conversation was stopped", not "it expired").
                    await asyncio.shield(self.store.resolve_approval(approval["id"], "expired"))
                else:  # a run's cancel or timeout: its card is cleared live
                    await asyncio.shield(self._expire_approval(scope, approval["id"]))
                raise
            finally:
                self.runtime.pending_cards.pop(approval["id"], None)
        if status == "approved" and approval["args_hash"] == args_hash:
            if await self.store.consume_approval(approval["id"], args_hash):
                crash_point("approval.after_consume")
                return None
        if status == "used" and approval["args_hash"] == args_hash and call["status"] == "awaiting_approval":
            # Spent by this very call, which had not started when the server stopped: a
            # call's start is written after its approval is spent, and before its tool
            # runs. The member approved it; it runs now, once.
            log.info("an approved call that had not started when the server stopped runs now")
            return None
        if status == WITHDRAWN_REASON:  # approved, but the tool's access had gone (MemberRuntime.resolve_approval)
            return "denied", WITHDRAWN
        if status == "denied":
            return "denied", HOST_RESULTS["declined"]
        if status == "expired":
            return "denied", HOST_RESULTS["expired"]
        return "denied", HOST_RESULTS["mismatch"]


def _entry(choice: ModelChoice) -> str:
    """A catalog entry as the log names it: its label, model and provider (two providers
    may serve the same model name; the label and provider say which one was asked)."""
    return f"{choice.label!r} ({choice.model} at {choice.provider_name})"


def model_failure(exc: ModelError) -> str:
    """A model's failure as the log says it: its HTTP status when it answered, else what
    happened (a refused connection has no status; "HTTP None" said nothing). Never the
    provider's words: an error body may quote the conversation it was sent ("context too
    long; your messages: …"), and the admin reads the log."""
    if exc.status is not None:
        return f"HTTP {exc.status}"
    return "could not be reached" if exc.code == "model_unreachable" else exc.code


def _failure_of(row: Mapping[str, Any]) -> FrameFailed:
    """A failed answer already in a frame's history, as the failure it was written for."""
    try:
        reason = json.loads(row.get("reason") or "null")
    except ValueError:
        reason = None
    if not isinstance(reason, dict):
        reason = {}
    values = reason.get("values")
    return FrameFailed(
        row["content"] or "The model could not answer.", str(reason.get("code") or "model_failed"), values if isinstance(values, dict) else None,
    )


def _collect(statements: Callable[[Any], object], into: list[object]) -> Callable[[Any, list[str]], None]:
    def run(conn: Any, ids: list[str]) -> None:
        into.append(statements(conn))

    return run


def _run_summary(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("id", "agent_id", "mode", "status", "depth", "task", "caller_run_id", "created_at", "finished_at")}


def call_arguments(text: str | None) -> dict[str, Any] | str:
    """A call's arguments as its tool gets them, or the error result the model reads.
    Read with the API's limits (``read_json``): arguments nested 10,000 deep failed the
    turn with a RecursionError, and a lone surrogate (``"\\ud800"``) left the call
    requested for ever (its approval's hash, its storage could not encode it)."""
    try:
        arguments = read_json(text or "{}")
    except JsonRefused as refused:
        if refused.problem == "not_text":
            return coded_result("Error: the arguments are not valid text (a lone surrogate?); send them again as UTF-8 JSON.",
                                "tool_arguments_not_text")
        if refused.problem == "too_deep":
            return coded_result(f"Error: the arguments are nested deeper than {MAX_DEPTH} levels; send flatter JSON.",
                                "tool_arguments_too_deep", {"depth": MAX_DEPTH})
        return "Error: the arguments are not valid JSON."
    if not isinstance(arguments, dict):
        return "Error: the arguments must be a JSON object."
    return arguments


def _clip(result: str) -> str:
    return result if len(result) <= TOOL_RESULT_LIMIT else result[:TOOL_RESULT_LIMIT] + "\n[output truncated]"

"""Runs, the inbox and its capacity, in the member's own file (seed 004 §5).

Every state change is one conditional statement in one transaction, and the
condition is the guard the seed's pitfalls ask for:

- a run's state changes only ``WHERE execution_id = ?`` and not terminal (§8.1): a
  late attempt changes nothing and learns so (``False``);
- inbox capacity is ``pending + reserved`` and is taken by a conditional UPDATE on
  ``agent_session_state``, never by counting rows (§8.2);
- a background run's terminal state, the conversion of its reserved slot into a
  completion event and its frame's close are one transaction (§8.3);
- an event is claimed ``WHERE status = 'pending'`` with a fresh lease token, and
  released or consumed only with that token (§8.13).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from skald_host.core.agent.store import cut_result, end_calls
from skald_host.core.storage import Database

log = logging.getLogger(__name__)

LIVE = ("queued", "running", "waiting_delegates")
TERMINAL = ("completed", "failed", "timed_out", "cancelled", "interrupted")
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ','now')"
_LIVE_SQL = "('queued', 'running', 'waiting_delegates')"
#: How long a run that failed (timed out, was interrupted) stays on the task strip: the
#: member may not have been there when it failed, and needs to see that it did.
STRIP_FAILED_HOURS = 24
#: How long a cancelled run stays on the task strip: its member cancelled it (or
#: stopped the turn) and saw it end as "Cancelled"; the strip's next read after this
#: leaves it out. The run itself stays readable by its id (the transcript links it).
STRIP_CANCELLED_SECONDS = 60
#: An inbox event that asks for a continuation turn (a signal always does; a completion
#: unless it is quiet, ``_complete``).
_WAKES = "(requires_continuation = 1 OR event_type = 'signal')"
#: How much of a result an inbox payload carries (the whole is in agent_runs.result).
PAYLOAD_RESULT_CHARS = 16_000
#: The errors the host records itself, in English; the chat's task strip words each in
#: the reader's language (web/pages/chat-tasks.js ``runError``).
CANCELLED = "cancelled"
INTERRUPTED = "the server stopped while this ran"
#: A run cut by its member's file locking (signed out, the session ended): the server
#: went on, so it is never said to have stopped (the close records the cause, ``mark_cut``).
CUT_LOCKED = "cut off because the member's data was locked (signed out or the session ended)"
#: A run cut because an admin deactivated its member: not resumed, and its end wakes no
#: continuation turn at their next sign-in (check C5).
CUT_DEACTIVATED = "stopped because an admin paused the member's account"
#: A run whose cut nobody recorded (a crash): neither cause is claimed.
CUT_OFF = "this was cut off before it finished"
_CUT_CAUSES = {"shutdown": INTERRUPTED, "locked": CUT_LOCKED, "deactivated": CUT_DEACTIVATED}
NEVER_STARTED = "the server stopped before this started"


class InboxFull(Exception):
    """The conversation's inbox has no room for the completions of a new batch."""


class TreeFull(Exception):
    """The delegation tree already holds ``max_runs_per_tree`` runs."""


def tree_full_message(batch: int, in_tree: int, max_runs_per_tree: int) -> str:
    """Why a batch was refused: a batch larger than what is left is refused even when
    nothing ran yet, and "already ran 0 of at most 3" would not say why."""
    left = max(max_runs_per_tree - in_tree, 0)
    if batch > 1:
        return (f"this batch of {batch} runs is more than the {left} this delegation tree may still start"
                f" ({in_tree} of at most {max_runs_per_tree} already ran); ask for at most {left} at once")
    return f"this delegation tree already ran {in_tree} of at most {max_runs_per_tree} runs"


def new_id() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True)
class NewRun:
    agent_id: str
    definition_hash: str
    model: str | None
    mode: str
    depth: int
    task: str
    budget: dict[str, int]
    signal_contract: dict[str, Any] | None
    idempotency_key: str | None


@dataclass(frozen=True)
class Accepted:
    run_id: str
    execution_id: str
    existing: bool  # the row was there already (a retried call): resumed, not new
    status: str
    result: str | None
    frame_id: str | None


def _row(row: Any) -> dict[str, Any]:
    out = dict(row)
    for key in ("ancestry", "budget", "emitted_signals"):
        if key in out and isinstance(out[key], str):
            out[key] = json.loads(out[key])
    if out.get("signal_contract"):
        out["signal_contract"] = json.loads(out["signal_contract"])
    if "reason" in out:  # {"code", "values"} of the error, or None (no code, a run written before)
        out["reason"] = json.loads(out["reason"]) if out["reason"] else None
    return out


def _ensure_state(conn: Any, conversation_id: str) -> None:
    conn.execute("INSERT OR IGNORE INTO agent_session_state (conversation_id) VALUES (?)", (conversation_id,))


def _left_inbox(conn: Any, conversation_ids: Sequence[str]) -> None:
    """One event per id left the inbox (consumed, superseded, dead-lettered): its
    conversation's pending count goes down with it, in the same transaction."""
    conn.executemany(
        "UPDATE agent_session_state SET pending_event_count = pending_event_count - 1, revision = revision + 1 WHERE conversation_id = ?",
        [(conversation_id,) for conversation_id in conversation_ids],
    )


def _reserve(conn: Any, conversation_id: str, slots: int, limit: int) -> bool:
    """§4.1: a conditional update, so two batches racing cannot both fit in one room."""
    _ensure_state(conn, conversation_id)
    row = conn.execute(
        f"UPDATE agent_session_state SET reserved_completion_slots = reserved_completion_slots + ?, revision = revision + 1,"
        f" updated_at = {NOW} WHERE conversation_id = ? AND pending_event_count + reserved_completion_slots + ? <= ? RETURNING revision",
        (slots, conversation_id, slots, limit),
    ).fetchone()
    return row is not None


class RunStore:
    def __init__(self, db: Database, generation: str) -> None:
        self.db = db
        #: This process's runtime generation: a run of an earlier one has no runner.
        self.generation = generation

    # -- accepting -------------------------------------------------------------------

    async def accept(
        self, conversation_id: str, tree_id: str, caller_run_id: str | None, ancestry: Sequence[str], caller_agent_id: str,
        caller_scope_id: str, runs: Sequence[NewRun], *, max_runs_per_tree: int, max_pending: int,
    ) -> list[Accepted]:
        """Write a batch of runs as queued, all or none (§3.1 step 2). A background run
        reserves its completion slot first; a batch that does not fit is refused whole.
        A run whose idempotency key is already stored is that run (a retried call)."""

        return await self.db.transaction(
            lambda conn: self.accept_rows(
                conn, conversation_id, tree_id, caller_run_id, ancestry, caller_agent_id, caller_scope_id, runs,
                max_runs_per_tree=max_runs_per_tree, max_pending=max_pending,
            )
        )

    def accept_rows(
        self, conn: Any, conversation_id: str, tree_id: str, caller_run_id: str | None, ancestry: Sequence[str], caller_agent_id: str,
        caller_scope_id: str, runs: Sequence[NewRun], *, max_runs_per_tree: int, max_pending: int,
        run_ids: Sequence[str] | None = None,
    ) -> list[Accepted]:
        """``accept``'s statements, inside a caller's transaction (a single foreground
        run is accepted in the transaction that opens its frame). ``run_ids``: the new
        runs' ids (and first execution ids), chosen before the write (a run whose
        first request goes out while it commits)."""
        accepted: list[Accepted | None] = []
        fresh: list[tuple[int, NewRun]] = []
        for index, run in enumerate(runs):
            row = None
            if run.idempotency_key is not None:
                row = conn.execute(
                    "SELECT id, execution_id, status, result, frame_id FROM agent_runs"
                    " WHERE conversation_id = ? AND caller_scope_id = ? AND idempotency_key = ?",
                    (conversation_id, caller_scope_id, run.idempotency_key),
                ).fetchone()
            if row is not None:
                accepted.append(Accepted(row[0], row[1], True, row[2], row[3], row[4]))
            else:
                accepted.append(None)
                fresh.append((index, run))
        if not fresh:
            return accepted  # type: ignore[return-value]
        in_tree = conn.execute("SELECT count(*) FROM agent_runs WHERE tree_id = ?", (tree_id,)).fetchone()[0]
        if in_tree + len(fresh) > max_runs_per_tree:
            raise TreeFull(tree_full_message(len(fresh), in_tree, max_runs_per_tree))
        slots = sum(1 for _, run in fresh if run.mode == "background")
        if slots and not _reserve(conn, conversation_id, slots, max_pending):
            raise InboxFull("the conversation's inbox is full; wait for the running tasks to report")
        for index, run in fresh:
            run_id = run_ids[index] if run_ids is not None else new_id()
            conn.execute(
                "INSERT INTO agent_runs (id, execution_id, runtime_generation, conversation_id, tree_id, caller_run_id, ancestry,"
                " caller_agent_id, caller_scope_id, agent_id, definition_hash, model, mode, depth, task, budget, signal_contract,"
                " idempotency_key, completion_slot_reserved) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id, run_id, self.generation, conversation_id, tree_id, caller_run_id, json.dumps(list(ancestry)),
                    caller_agent_id, caller_scope_id, run.agent_id, run.definition_hash, run.model, run.mode, run.depth, run.task,
                    json.dumps(run.budget), json.dumps(run.signal_contract) if run.signal_contract else None,
                    run.idempotency_key, int(run.mode == "background"),
                ),
            )
            accepted[index] = Accepted(run_id, run_id, False, "queued", None, None)
        return accepted  # type: ignore[return-value]

    async def tree_count(self, tree_id: str) -> int:
        """The runs a delegation tree holds (a hint before a write: the accepting
        transaction decides, §8.7)."""
        return await self.db.run(lambda c: c.execute("SELECT count(*) FROM agent_runs WHERE tree_id = ?", (tree_id,)).fetchone()[0])

    async def new_attempt(self, run_id: str) -> str | None:
        """A fresh execution id for a live run taken up again (after a restart): the
        attempt before it can no longer write. None when the run is terminal. The cause
        of the cut its close wrote (``mark_cut``, for recovery to read) is cleared: the
        run goes on, and was shown "the server stopped while this ran" while it did."""
        execution_id = new_id()
        row = await self.db.transaction(
            lambda c: c.execute(
                f"UPDATE agent_runs SET execution_id = ?, runtime_generation = ?, status = 'queued', error = NULL, revision = revision + 1"
                f" WHERE id = ? AND status IN {_LIVE_SQL} RETURNING id",
                (execution_id, self.generation, run_id),
            ).fetchone()
        )
        return execution_id if row else None

    # -- transitions (all guarded by execution_id, §8.1) ---------------------------------

    async def _transition(self, run_id: str, execution_id: str, status: str, from_states: Sequence[str], extra: str = "") -> bool:
        marks = ",".join("?" * len(from_states))
        row = await self.db.transaction(
            lambda c: c.execute(
                f"UPDATE agent_runs SET status = ?, revision = revision + 1{extra} WHERE id = ? AND execution_id = ?"
                f" AND status IN ({marks}) RETURNING id",
                (status, run_id, execution_id, *from_states),
            ).fetchone()
        )
        return row is not None

    async def started(self, run_id: str, execution_id: str, frame_id: str) -> bool:
        def write(conn: Any) -> bool:
            row = conn.execute(
                f"UPDATE agent_runs SET status = 'running', frame_id = ?, started_at = coalesce(started_at, {NOW}), error = NULL,"
                " revision = revision + 1 WHERE id = ? AND execution_id = ? AND status = 'queued' RETURNING id",
                (frame_id, run_id, execution_id),
            ).fetchone()
            return row is not None

        return await self.db.transaction(write)

    async def running_for(self, run_id: str) -> float:
        """Seconds since the run first started (``started_at`` is kept across attempts):
        a run taken up again after a restart has what is left of its time limit."""
        seconds = await self.db.run(
            lambda c: c.execute(
                "SELECT (julianday('now') - julianday(started_at)) * 86400 FROM agent_runs WHERE id = ?", (run_id,)
            ).fetchone()
        )
        return max(0.0, float(seconds[0])) if seconds and seconds[0] is not None else 0.0

    async def waiting_delegates(self, run_id: str, execution_id: str) -> bool:
        return await self._transition(run_id, execution_id, "waiting_delegates", ("running",))

    async def queued_again(self, run_id: str, execution_id: str) -> bool:
        """A started run that gave its permits back while it waited (for its helpers, for
        its member's answer) and finds none free now: it waits for one as a run not
        started yet does, and says so (``started_at`` and its frame stay its own)."""
        return await self._transition(run_id, execution_id, "queued", ("running", "waiting_delegates"))

    async def running_again(self, run_id: str, execution_id: str) -> bool:
        """§8.16: the symmetric half of ``waiting_delegates`` (and of ``queued_again``)."""
        return await self._transition(run_id, execution_id, "running", ("waiting_delegates", "queued"))

    async def commit_terminal(
        self, run_id: str, execution_id: str | None, status: str, *, result: str | None = None, error: str | None = None,
        frame_status: str | None = None, requires_continuation: bool = True, quiet: bool = False, reason: str | None = None,
    ) -> bool:
        """§4.2, one transaction: the run's terminal state (guarded by its execution id;
        None: whichever attempt is current, for a cancel), its frame closed, and for a
        background run its reserved slot turned into a completion event. False: the run
        was terminal already or another attempt owns it — a late result, dropped.
        ``quiet``: the event waits for the conversation's next delivery without asking
        for a continuation turn of its own (``_complete``). ``reason``: the error's code
        and values (``store.reason_json``), for a screen to word it."""
        return await self.db.transaction(
            self._terminal(run_id, execution_id, status, result, error, frame_status, requires_continuation, quiet, reason)
        )

    def commit_terminal_queued(
        self, run_id: str, execution_id: str, status: str, *, result: str | None = None, frame_status: str | None = None,
    ) -> "asyncio.Future[bool]":
        """``commit_terminal``, queued on the file before this returns: committed before
        any write submitted after it (the caller's tool result), not awaited by it."""
        return self.db.transaction_queued(self._terminal(run_id, execution_id, status, result, None, frame_status, True))

    @classmethod
    def terminal_statements(
        cls, run_id: str, execution_id: str, status: str, *, result: str | None = None, frame_status: str | None = None,
    ) -> Callable[[Any], bool]:
        """``commit_terminal``'s statements, for a transaction that writes more (the
        run frame's final answer, ``kernel.Ending``); they return what it returns."""
        return cls._terminal(run_id, execution_id, status, result, None, frame_status, True)

    @staticmethod
    def _terminal(
        run_id: str, execution_id: str | None, status: str, result: str | None, error: str | None, frame_status: str | None,
        requires_continuation: bool, quiet: bool = False, reason: str | None = None,
    ) -> Callable[[Any], bool]:
        assert status in TERMINAL

        def write(conn: Any) -> bool:
            guard, args = ("AND execution_id = ?", (execution_id,)) if execution_id is not None else ("", ())
            row = conn.execute(
                f"UPDATE agent_runs SET status = ?, result = ?, error = ?, reason = ?, finished_at = {NOW}, revision = revision + 1"
                f" WHERE id = ? {guard} AND status IN {_LIVE_SQL}"
                " RETURNING conversation_id, frame_id, completion_slot_reserved, agent_id, task, emitted_signals",
                (status, result, error, reason, run_id, *args),
            ).fetchone()
            if row is None:
                return False
            conversation_id, frame_id, reserved, agent_id, task, signals = row
            if frame_id and frame_status:
                conn.execute(
                    f"UPDATE frames SET status = ?, result = ?, closed_at = {NOW} WHERE id = ? AND status = 'open'",
                    (frame_status, result if result is not None else (error or ""), frame_id),
                )
            if reserved:
                _complete(conn, run_id, conversation_id, status, agent_id, task, result, error, json.loads(signals), requires_continuation, quiet)
            return True

        return write

    # -- reading ---------------------------------------------------------------------

    async def run(self, run_id: str) -> dict[str, Any] | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM agent_runs WHERE id = ?", (run_id,)).fetchone()) if isinstance(run_id, str) else None
        return _row(row) if row else None

    async def transcript(self, frame_id: str) -> list[dict[str, Any]]:
        """A run's frame for its drill-in, from its latest summary on, as the model's
        history has it, but with the host's notes in it: a model fallback inside the
        run is written as a note, and the member is told it happened (README "Models"),
        which ``ConversationStore.history`` (the model's view) leaves out."""

        def read(conn: Any) -> list[dict[str, Any]]:
            start = conn.execute(
                "SELECT max(id) FROM messages WHERE frame_id = ? AND role = 'summary' AND variant = 0", (frame_id,)
            ).fetchone()[0] or 0
            messages = [dict(r) for r in conn.execute(
                "SELECT * FROM messages WHERE frame_id = ? AND id >= ? AND variant = 0 ORDER BY id", (frame_id, start)
            )]
            calls: dict[int, list[dict[str, Any]]] = {}
            for call in conn.execute("SELECT * FROM tool_calls WHERE frame_id = ? AND message_id >= ? ORDER BY message_id, seq", (frame_id, start)):
                calls.setdefault(call["message_id"], []).append(dict(call))
            for message in messages:
                message["tool_calls"] = calls.get(message["id"], [])
                message["reason"] = json.loads(message["reason"]) if message.get("reason") else None
            return messages

        return await self.db.run(read)

    async def runs(self, conversation_id: str | None = None, *, limit: int = 50, strip: bool = False) -> list[dict[str, Any]]:
        """Newest first; a batch (its rows written in one transaction, in call order,
        often in the same millisecond) last call first, by the order its rows were
        written, not by their random ids. ``strip``: the task strip's runs, those live,
        those that failed in the last ``STRIP_FAILED_HOURS`` and those cancelled in the
        last ``STRIP_CANCELLED_SECONDS`` (a completed run leaves it as it ends)."""
        where, args = [], []
        if conversation_id is not None:
            where.append("conversation_id = ?")
            args.append(conversation_id)
        if strip:
            since = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?)"
            where.append(
                f"(status IN {_LIVE_SQL}"
                f" OR (status NOT IN ('completed', 'cancelled') AND finished_at >= {since})"
                f" OR (status = 'cancelled' AND finished_at >= {since}))"
            )
            args += [f"-{STRIP_FAILED_HOURS} hours", f"-{STRIP_CANCELLED_SECONDS} seconds"]
        sql = "SELECT * FROM agent_runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at DESC, rowid DESC LIMIT ?"
        rows = await self.db.run(lambda c: c.execute(sql, (*args, limit)).fetchall())
        return [_row(r) for r in rows]

    async def descends_from(self, run_id: str, ancestor_run_id: str) -> bool:
        """Whether ``run_id`` is ``ancestor_run_id`` or below it (§7), walking
        ``caller_run_id`` up."""

        def read(conn: Any) -> bool:
            current, hops = run_id, 0
            while current is not None and hops < 64:
                if current == ancestor_run_id:
                    return True
                row = conn.execute("SELECT caller_run_id FROM agent_runs WHERE id = ?", (current,)).fetchone()
                current, hops = (row[0] if row else None), hops + 1
            return False

        return await self.db.run(read)

    async def live_runs(self, conversation_id: str | None = None) -> list[dict[str, Any]]:
        where = f"status IN {_LIVE_SQL}" + (" AND conversation_id = ?" if conversation_id else "")
        rows = await self.db.run(lambda c: c.execute(f"SELECT * FROM agent_runs WHERE {where} ORDER BY depth DESC", (conversation_id,) if conversation_id else ()).fetchall())
        return [_row(r) for r in rows]

    # -- signals ---------------------------------------------------------------------

    async def insert_signal(
        self, run_id: str, execution_id: str, event_key: str, delivery: str, severity: str, payload: dict[str, Any], max_pending: int,
    ) -> tuple[str, int | None]:
        """§4.7: ('ok', id), ('duplicate', None) inside the cooldown window, ('full', None)
        when only reserved capacity is left, ('stale', None) for a run that is not this
        live attempt. Takes only unreserved room: a completion's slot is never given away."""

        def write(conn: Any) -> tuple[str, int | None]:
            row = conn.execute(
                f"SELECT conversation_id FROM agent_runs WHERE id = ? AND execution_id = ? AND status IN {_LIVE_SQL}", (run_id, execution_id)
            ).fetchone()
            if row is None:
                return "stale", None
            conversation_id = row[0]
            if conn.execute(
                "SELECT 1 FROM agent_inbox_events WHERE run_id = ? AND event_type = 'signal' AND event_key = ?", (run_id, event_key)
            ).fetchone():
                return "duplicate", None
            _ensure_state(conn, conversation_id)
            if conn.execute(
                f"UPDATE agent_session_state SET pending_event_count = pending_event_count + 1, revision = revision + 1, updated_at = {NOW}"
                " WHERE conversation_id = ? AND pending_event_count + reserved_completion_slots + 1 <= ? RETURNING revision",
                (conversation_id, max_pending),
            ).fetchone() is None:
                return "full", None
            event_id = conn.execute(
                "INSERT INTO agent_inbox_events (run_id, conversation_id, event_type, event_key, delivery, severity, payload, created_at)"
                " VALUES (?, ?, 'signal', ?, ?, ?, ?, ?)",
                (run_id, conversation_id, event_key, delivery, severity, json.dumps(payload), time.time()),
            ).lastrowid
            signals = json.loads(conn.execute("SELECT emitted_signals FROM agent_runs WHERE id = ?", (run_id,)).fetchone()[0])
            conn.execute("UPDATE agent_runs SET emitted_signals = ? WHERE id = ?", (json.dumps(signals + [event_id]), run_id))
            return "ok", event_id

        return await self.db.transaction(write)

    async def supersede_signals(self, run_id: str) -> int:
        """An explicitly cancelled run's undelivered signals (a completion never is)."""

        def write(conn: Any) -> int:
            rows = conn.execute(
                "UPDATE agent_inbox_events SET status = 'superseded', lease_token = NULL WHERE run_id = ? AND event_type = 'signal'"
                " AND status IN ('pending', 'leased', 'admitted') RETURNING conversation_id",
                (run_id,),
            ).fetchall()
            _left_inbox(conn, [c for (c,) in rows])
            return len(rows)

        return await self.db.transaction(write)

    # -- the inbox -------------------------------------------------------------------

    async def next_due(self, conversation_id: str | None = None) -> tuple[float, float] | None:
        """(earliest next_attempt_at, oldest created_at) of pending events that ask for
        a continuation (a quiet one waits for one, ``_complete``), or None when there
        are none. §8.12: MIN over no rows is NULL, and NULL is "none", never 0 (read as
        0 it said "due since 1970" and the worker spun)."""
        where = f"status = 'pending' AND {_WAKES}" + (" AND conversation_id = ?" if conversation_id else "")
        row = await self.db.run(
            lambda c: c.execute(
                f"SELECT min(next_attempt_at), min(created_at), count(*) FROM agent_inbox_events WHERE {where}",
                (conversation_id,) if conversation_id else (),
            ).fetchone()
        )
        if row is None or row[2] == 0 or row[0] is None:
            return None
        return float(row[0]), float(row[1])

    async def waking(self, now: float) -> tuple[list[str], bool]:
        """The inbox worker's periodic look: the conversations with due events that ask
        for a continuation turn, oldest first, and whether any such event waits at all,
        due or not yet (a backoff's ``next_attempt_at``): when none does, only a write to
        the file can make one due."""
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT conversation_id, min(CASE WHEN next_attempt_at <= ? THEN created_at END) FROM agent_inbox_events"
                f" WHERE status = 'pending' AND {_WAKES} GROUP BY conversation_id",
                (now,),
            ).fetchall()
        )
        due = sorted((row for row in rows if row[1] is not None), key=lambda row: row[1])
        return [row[0] for row in due], bool(rows)

    async def due_conversations(self, now: float, *, quiet: bool = False) -> list[str]:
        """The conversations with due events that ask for a continuation turn, oldest
        first; ``quiet``: only those whose due events wait for one (``_complete``)."""
        wanted = f"NOT {_WAKES}" if quiet else _WAKES
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT conversation_id, min(created_at) FROM agent_inbox_events WHERE status = 'pending' AND next_attempt_at <= ?"
                f" AND {wanted} GROUP BY conversation_id ORDER BY 2",
                (now,),
            ).fetchall()
        )
        return [r[0] for r in rows]

    async def claim(self, conversation_id: str, now: float, lease_secs: float, limit: int = 32, *, delivery: str | None = None) -> tuple[str, list[dict[str, Any]]]:
        """§4.3/§8.13: pending → leased, oldest first by (created_at, id), each with this
        claim's token; an event another claim holds is not pending and is not taken.
        The two-phase path a delivery that cannot hold the write lock needs (a steer
        lane's admission); the queue lane reads and consumes in one transaction
        (``due_events`` / ``consume_pending``), which is its own lease."""
        token = new_id()

        def write(conn: Any) -> list[dict[str, Any]]:
            # A quiet event (one that starts no continuation) goes into whichever turn
            # runs first: the steer lane takes it at that turn's safe boundary.
            lane = (f" AND (delivery = ? OR NOT {_WAKES})" if delivery == "steer" else " AND delivery = ?") if delivery else ""
            rows = conn.execute(
                "UPDATE agent_inbox_events SET status = 'leased', lease_token = ?, lease_until = ?, attempt_count = attempt_count + 1"
                " WHERE id IN (SELECT id FROM agent_inbox_events WHERE conversation_id = ? AND status = 'pending' AND next_attempt_at <= ?"
                f"{lane} ORDER BY created_at, id LIMIT ?) RETURNING *",
                (token, now + lease_secs, conversation_id, now, *((delivery,) if delivery else ()), limit),
            ).fetchall()
            return sorted((dict(r) for r in rows), key=lambda r: (r["created_at"], r["id"]))

        return token, await self.db.transaction(write)

    async def delivery_failed(self, event_ids: Sequence[int], *, backoff_secs: float, max_attempts: int) -> None:
        """A delivery whose transaction failed (nothing of it was written): count the
        attempt, try again after a backoff, dead-letter past the limit."""

        def write(conn: Any) -> None:
            marks = ",".join("?" * len(event_ids))
            rows = conn.execute(
                f"UPDATE agent_inbox_events SET attempt_count = attempt_count + 1, next_attempt_at = ?,"
                f" status = CASE WHEN attempt_count + 1 >= ? THEN 'dead_letter' ELSE status END"
                f" WHERE status = 'pending' AND id IN ({marks}) RETURNING conversation_id, status",
                (time.time() + backoff_secs, max_attempts, *event_ids),
            ).fetchall()
            _left_inbox(conn, [c for c, status in rows if status == "dead_letter"])

        await self.db.transaction(write)

    async def admit(self, token: str, event_ids: Sequence[int], turn_id: str) -> list[int]:
        """§4.3, steer only: leased → admitted, bound to ``turn_id`` in the same
        statement, for events still held by ``token``. The ids admitted (one another
        claim took meanwhile is not)."""
        marks = ",".join("?" * len(event_ids))
        rows = await self.db.transaction(
            lambda c: c.execute(
                f"UPDATE agent_inbox_events SET status = 'admitted', admitted_turn_id = ? WHERE lease_token = ? AND status = 'leased'"
                f" AND id IN ({marks}) RETURNING id",
                (turn_id, token, *event_ids),
            ).fetchall()
        )
        return [r[0] for r in rows]

    async def release_turn(self, turn_id: str, *, max_attempts: int) -> int:
        """A turn closed: every event still admitted into it goes back to pending at
        once (steer degrades to queue, §8.5), or to dead-letter past the attempt limit —
        found by its turn in the file, whatever the process remembers."""

        def write(conn: Any) -> int:
            released = conn.execute(
                "UPDATE agent_inbox_events SET status = CASE WHEN attempt_count >= ? THEN 'dead_letter' ELSE 'pending' END,"
                " lease_token = NULL, lease_until = NULL, admitted_turn_id = NULL, next_attempt_at = ?"
                " WHERE admitted_turn_id = ? AND status = 'admitted' RETURNING conversation_id, status",
                (max_attempts, time.time(), turn_id),
            ).fetchall()
            _left_inbox(conn, [c for c, status in released if status == "dead_letter"])
            return len(released)

        return await self.db.transaction(write)

    async def discard_turn(self, turn_id: str) -> int:
        """A Stop discards the input its turn owned (§8.6): the events still admitted
        into ``turn_id`` become superseded, off the conversation's capacity."""

        def write(conn: Any) -> int:
            rows = conn.execute(
                "UPDATE agent_inbox_events SET status = 'superseded', lease_token = NULL, lease_until = NULL"
                " WHERE admitted_turn_id = ? AND status = 'admitted' RETURNING conversation_id",
                (turn_id,),
            ).fetchall()
            _left_inbox(conn, [c for (c,) in rows])
            return len(rows)

        return await self.db.transaction(write)

    async def discard_pending(self, conversation_id: str) -> int:
        """A Stop's discard of what waits for the conversation's next turn (§8.6, §6
        ``suppress_continuation``): pending completions consumed with no continuation
        (their results stay on their runs), pending signals superseded; off the
        conversation's capacity in the same transaction. Leased or admitted events
        are a claim's, released or discarded by it."""

        def write(conn: Any) -> int:
            rows = conn.execute(
                "UPDATE agent_inbox_events SET status = CASE WHEN event_type = 'completion' THEN 'consumed' ELSE 'superseded' END,"
                " requires_continuation = 0 WHERE conversation_id = ? AND status = 'pending' RETURNING conversation_id",
                (conversation_id,),
            ).fetchall()
            _left_inbox(conn, [c for (c,) in rows])
            return len(rows)

        return await self.db.transaction(write)

    async def release(self, token: str, event_ids: Sequence[int], *, backoff_secs: float, max_attempts: int) -> int:
        """leased/admitted → pending after a backoff, or dead-letter past the attempt
        limit; only events still held by ``token`` (§8.13: never one another claim has
        consumed meanwhile)."""

        def write(conn: Any) -> int:
            marks = ",".join("?" * len(event_ids))
            released = conn.execute(
                f"UPDATE agent_inbox_events SET status = CASE WHEN attempt_count >= ? THEN 'dead_letter' ELSE 'pending' END,"
                f" lease_token = NULL, lease_until = NULL, admitted_turn_id = NULL, next_attempt_at = ?"
                f" WHERE lease_token = ? AND status IN ('leased', 'admitted')"
                f" AND id IN ({marks}) RETURNING conversation_id, status",
                (max_attempts, time.time() + backoff_secs, token, *event_ids),
            ).fetchall()
            _left_inbox(conn, [c for c, status in released if status == "dead_letter"])
            return len(released)

        return await self.db.transaction(write)


def mark_started(conn: Any, run_id: str, execution_id: str, frame_id: str) -> None:
    """Inside the frame's opening transaction: queued → running with its frame, for this
    attempt only (§8.1); raises LookupError (rolling the frame back) otherwise."""
    if conn.execute(
        f"UPDATE agent_runs SET status = 'running', frame_id = ?, started_at = coalesce(started_at, {NOW}), revision = revision + 1"
        " WHERE id = ? AND execution_id = ? AND status = 'queued' RETURNING id",
        (frame_id, run_id, execution_id),
    ).fetchone() is None:
        raise LostLease("the run was cancelled or taken over before it started")


def due_events(conn: Any, conversation_id: str, now: float, limit: int = 32) -> list[dict[str, Any]]:
    """The conversation's due events, oldest first by (created_at, id) (§8.13), read in
    the transaction that delivers them."""
    return [
        dict(r) for r in conn.execute(
            "SELECT * FROM agent_inbox_events WHERE conversation_id = ? AND status = 'pending' AND next_attempt_at <= ?"
            " ORDER BY created_at, id LIMIT ?",
            (conversation_id, now, limit),
        )
    ]


def asks_for_continuation(conn: Any, conversation_id: str, now: float, events: Sequence[dict[str, Any]]) -> bool:
    """Whether a delivery of ``events`` (``due_events``) is due: one of them, or any due
    event of the conversation past them, asks for a continuation. Quiet events alone
    are not (they wait for a delivery something else asks for, ``_complete``)."""
    if any(e["requires_continuation"] or e["event_type"] == "signal" for e in events):
        return True
    return conn.execute(
        f"SELECT 1 FROM agent_inbox_events WHERE conversation_id = ? AND status = 'pending' AND next_attempt_at <= ? AND {_WAKES} LIMIT 1",
        (conversation_id, now),
    ).fetchone() is not None


def consume_pending(conn: Any, event_ids: Sequence[int], message_id: int) -> None:
    """The queue lane's delivery: events read in this same write transaction go from
    pending to consumed with the trigger that carries them (the write lock is the
    lease; nothing can take them in between)."""
    marks = ",".join("?" * len(event_ids))
    rows = conn.execute(
        f"UPDATE agent_inbox_events SET status = 'consumed', attempt_count = attempt_count + 1, consumed_message_id = ?"
        f" WHERE status = 'pending' AND id IN ({marks}) RETURNING conversation_id",
        (message_id, *event_ids),
    ).fetchall()
    if len(rows) != len(event_ids):
        raise LostLease()
    _left_inbox(conn, [c for (c,) in rows])


def consume(conn: Any, token: str, event_ids: Sequence[int], message_id: int | None) -> bool:
    """Inside the continuation's transaction: the claimed events consumed, their count
    off the conversation's capacity. False (and nothing changed) unless every event is
    still held by ``token``."""
    marks = ",".join("?" * len(event_ids))
    rows = conn.execute(
        f"UPDATE agent_inbox_events SET status = 'consumed', lease_token = NULL, consumed_message_id = ?"
        f" WHERE lease_token = ? AND status IN ('leased', 'admitted') AND id IN ({marks}) RETURNING conversation_id",
        (message_id, token, *event_ids),
    ).fetchall()
    if len(rows) != len(event_ids):
        raise LostLease()
    _left_inbox(conn, [c for (c,) in rows])
    return True


class LostLease(LookupError):
    """Raised inside a transaction to roll it back: another claim took the events."""


def _complete(
    conn: Any, run_id: str, conversation_id: str, status: str, agent_id: str, task: str, result: str | None, error: str | None,
    signals: list[int], requires_continuation: bool, quiet: bool = False,
) -> None:
    """Turn the run's reserved slot into its completion event (inside its terminal
    transaction, §8.3). Without continuation (a Stop), the event is written consumed.
    ``quiet`` (a run someone cancelled: they know how it ended): written pending with
    ``requires_continuation`` 0 — it starts no continuation turn, and reaches the model
    exactly once with the conversation's next delivery (a continuation another event
    asks for, or a running turn's safe boundary, §4.4), holding its room until then."""
    pending = requires_continuation or quiet
    payload = {
        "agent": agent_id, "status": status, "task": task[:500], "signal_ids": signals,
        "result": (result or "")[:PAYLOAD_RESULT_CHARS], "clipped": len(result or "") > PAYLOAD_RESULT_CHARS, "error": error,
    }
    conn.execute(
        "INSERT INTO agent_inbox_events (run_id, conversation_id, event_type, event_key, requires_continuation, payload, status, created_at)"
        " VALUES (?, ?, 'completion', 'completion', ?, ?, ?, ?)",
        (run_id, conversation_id, int(requires_continuation and not quiet), json.dumps(payload), "pending" if pending else "consumed", time.time()),
    )
    conn.execute(
        "UPDATE agent_session_state SET reserved_completion_slots = reserved_completion_slots - 1,"
        f" pending_event_count = pending_event_count + ?, revision = revision + 1, updated_at = {NOW} WHERE conversation_id = ?",
        (int(pending), conversation_id),
    )


def mark_cut(conn: Any, generation: str, cause: str) -> None:
    """A closing runtime records why its live runs are cut (``shutdown``, ``locked`` or ``deactivated``)
    in their error, read by ``recover``; a crash records nothing (``CUT_OFF``)."""
    conn.execute(
        f"UPDATE agent_runs SET error = ? WHERE status IN {_LIVE_SQL} AND runtime_generation = ?", (_CUT_CAUSES[cause], generation)
    )


def recover(conn: Any, generation: str, max_attempts: int, now: float) -> dict[str, int]:
    """§6 at startup, one transaction: runs of an earlier runtime generation that have
    no runner become interrupted — said to have stopped before they started when they
    never did, cancelled when the member had stopped their spawning call — (a
    background one's slot becomes a failure completion; a foreground one whose
    spawning call will run again is left for the kernel to take up with a new
    execution id); expired leases go back to pending, or
    to dead-letter past the attempt limit; admitted steer events go back to pending;
    the capacity counters are recomputed from the rows and repaired with a warning."""
    report = {"interrupted": 0, "released": 0, "dead_letter": 0, "repaired": 0}
    stale = conn.execute(
        f"SELECT r.id, r.mode, r.frame_id, r.idempotency_key, r.started_at, r.error FROM agent_runs r WHERE r.status IN {_LIVE_SQL}"
        " AND r.runtime_generation != ?"
        # A helper's helpers after it: a foreground one whose spawning call was in a
        # frame closed here finds that call ended, and ends too.
        " ORDER BY r.depth, r.created_at",
        (generation,),
    ).fetchall()
    for run_id, mode, frame_id, key, started_at, cut in stale:
        call = None
        if mode == "foreground":
            call = conn.execute("SELECT status FROM tool_calls WHERE id = ?", ((key or "").split("#")[0],)).fetchone()
            if call is not None and call[0] not in ("done", "error", "denied", "cancelled", "interrupted"):
                continue  # its call runs again at recovery and takes the run up
        # A run that never started did not run when the server stopped: it is not said
        # to have been interrupted while it ran. One whose spawning call the member
        # stopped was the member's (a batch's runs still waiting for a permit, left
        # queued by an earlier version's Stop): cancelled, as the Stop cancelled the rest.
        never_started = started_at is None and not frame_id
        if never_started and call is not None and call[0] == "cancelled":
            status, error = "cancelled", CANCELLED
        else:
            cause = cut if cut in _CUT_CAUSES.values() else CUT_OFF
            status, error = "interrupted", NEVER_STARTED if never_started else cause
        row = conn.execute(
            f"UPDATE agent_runs SET status = ?, error = ?, finished_at = {NOW},"
            f" revision = revision + 1 WHERE id = ? AND status IN {_LIVE_SQL}"
            " RETURNING conversation_id, completion_slot_reserved, agent_id, task, emitted_signals",
            (status, error, run_id),
        ).fetchone()
        if frame_id:
            conn.execute(f"UPDATE frames SET status = 'failed', result = 'interrupted', closed_at = {NOW} WHERE id = ? AND status = 'open'", (frame_id,))
            # Nothing drives a closed frame again: its calls end here, as the turn's
            # recovery ends a call it does not run again, said by the cause of the cut
            # (``store.cut_result``): a sign-out's is not "the server restarted".
            end_calls(conn, "frame_id", frame_id, cut_result({v: k for k, v in _CUT_CAUSES.items()}.get(cut)))
        if row and row[1]:
            # A deactivation's cut holds: its completion reaches the model with the
            # member's next turn (quiet), never in a continuation turn of its own.
            cut_by_admin = error == CUT_DEACTIVATED
            _complete(conn, run_id, row[0], status, row[2], row[3], None, error, json.loads(row[4]), not cut_by_admin, quiet=cut_by_admin)
        report[status] = report.get(status, 0) + 1
    # Expired leases; and events admitted into a turn: every turn of an earlier process
    # died with it (the turn each was bound to is in the row, §4.3).
    for status in ("leased", "admitted"):
        rows = conn.execute(
            "UPDATE agent_inbox_events SET status = CASE WHEN attempt_count >= ? THEN 'dead_letter' ELSE 'pending' END,"
            " lease_token = NULL, lease_until = NULL, admitted_turn_id = NULL, next_attempt_at = ?"
            " WHERE status = ? AND (? = 'admitted' OR lease_until < ?) RETURNING status",
            (max_attempts, now, status, status, now),
        ).fetchall()
        for (new_status,) in rows:
            report["dead_letter" if new_status == "dead_letter" else "released"] += 1
    counted = {
        r[0]: (r[1], r[2])
        for r in conn.execute(
            "SELECT c.id,"
            " (SELECT count(*) FROM agent_inbox_events e WHERE e.conversation_id = c.id AND e.status IN ('pending', 'leased', 'admitted')),"
            f" (SELECT count(*) FROM agent_runs r WHERE r.conversation_id = c.id AND r.completion_slot_reserved = 1 AND r.status IN {_LIVE_SQL})"
            " FROM conversations c WHERE EXISTS (SELECT 1 FROM agent_runs r WHERE r.conversation_id = c.id)"
            " OR EXISTS (SELECT 1 FROM agent_session_state s WHERE s.conversation_id = c.id)"
        )
    }
    for conversation_id, (pending, reserved) in counted.items():
        _ensure_state(conn, conversation_id)
        stored = conn.execute(
            "SELECT pending_event_count, reserved_completion_slots FROM agent_session_state WHERE conversation_id = ?", (conversation_id,)
        ).fetchone()
        if (stored[0], stored[1]) != (pending, reserved):
            log.warning(
                "sub-agent inbox counters of a conversation were %s pending / %s reserved, the rows say %s / %s: repaired",
                stored[0], stored[1], pending, reserved,
            )
            conn.execute(
                f"UPDATE agent_session_state SET pending_event_count = ?, reserved_completion_slots = ?, revision = revision + 1,"
                f" updated_at = {NOW} WHERE conversation_id = ?",
                (pending, reserved, conversation_id),
            )
            report["repaired"] += 1
    return report

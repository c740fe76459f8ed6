"""The run store and the inbox over a real SQLCipher member file (seed 004 §4-§6, §8).
Each test names the pitfall it guards; the statements under test are the ones the
coordinator runs, on the file's one worker thread, with real concurrency where the
pitfall is a race."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import time
from typing import Any

import pytest
import pytest_asyncio

from skald_host.core.agent.subagents.coordinator import RunContext, SubagentCoordinator
from skald_host.core.agent.subagents.limits import OrchestrationLimits
from skald_host.core.agent.subagents.runs import InboxFull, NewRun, RunStore, TreeFull, consume, recover
from skald_host.core.agent.subagents.signals import event_key
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database

CID = "conversation-1"


@pytest_asyncio.fixture
async def db(tmp_path):
    database = await Database.open(tmp_path / "owner.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)

    def seed(conn: Any) -> None:
        conn.execute("INSERT INTO conversations (id, agent_id) VALUES (?, 'assistant')", (CID,))
        conn.execute("INSERT INTO frames (id, conversation_id, agent_id, depth) VALUES ('root-frame', ?, 'assistant', 0)", (CID,))

    await database.transaction(seed)
    try:
        yield database
    finally:
        await database.close()


def new_run(mode: str = "background", key: str | None = None, task: str = "t") -> NewRun:
    return NewRun("researcher", "h" * 64, None, mode, 1, task, {}, None, key)


async def accept(store: RunStore, *runs: NewRun, tree: str = "tree", max_runs: int = 16, max_pending: int = 128):
    return await store.accept(CID, tree, None, (), "root", "root-frame", list(runs), max_runs_per_tree=max_runs, max_pending=max_pending)


async def counters(db: Database) -> tuple[int, int]:
    row = await db.run(lambda c: c.execute("SELECT pending_event_count, reserved_completion_slots FROM agent_session_state").fetchone())
    return (row[0], row[1]) if row else (0, 0)


async def events(db: Database) -> list[dict[str, Any]]:
    return await db.run(lambda c: [dict(r) for r in c.execute("SELECT * FROM agent_inbox_events ORDER BY id")])


async def deliver_all(db: Database, store: RunStore) -> list[int]:
    """What the coordinator's ``deliver`` does, minus the message: claim, then consume
    with the claim's token in one transaction."""
    delivered: list[int] = []
    while True:
        token, claimed = await store.claim(CID, time.time(), 60)
        if not claimed:
            return delivered
        ids = [e["id"] for e in claimed]
        await db.transaction(lambda c: consume(c, token, ids, None))
        delivered += ids


async def test_a_late_attempt_cannot_overwrite_the_current_ones_state(db):
    """§8.1: the terminal write is guarded by execution_id; the stale one changes nothing."""
    store = RunStore(db, "gen-1")
    [accepted] = await accept(store, new_run("foreground"))
    second = await store.new_attempt(accepted.run_id)
    assert second and second != accepted.execution_id
    assert not await store.commit_terminal(accepted.run_id, accepted.execution_id, "completed", result="stale")
    assert (await store.run(accepted.run_id))["status"] == "queued"
    assert await store.commit_terminal(accepted.run_id, second, "completed", result="current")
    assert not await store.commit_terminal(accepted.run_id, second, "failed", error="again")
    row = await store.run(accepted.run_id)
    assert (row["status"], row["result"]) == ("completed", "current")


async def test_signals_never_take_a_reserved_completion_slot(db):
    """§8.2: capacity is pending + reserved, taken by conditional updates."""
    store = RunStore(db, "gen-1")
    [a, b] = await accept(store, new_run(), new_run(), max_pending=3)
    assert await counters(db) == (0, 2)
    outcome = [await store.insert_signal(a.run_id, a.execution_id, f"signal:k{i}:0", "queue", "info", {}, 3) for i in range(3)]
    assert [o[0] for o in outcome] == ["ok", "full", "full"]
    with pytest.raises(InboxFull):
        await accept(store, new_run(), max_pending=3)
    for run in (a, b):
        assert await store.commit_terminal(run.run_id, run.execution_id, "completed", result="r")
    assert await counters(db) == (3, 0)
    assert sorted(e["event_type"] for e in await events(db)) == ["completion", "completion", "signal"]


async def test_racing_batches_fill_the_inbox_exactly_to_its_bound(db):
    """§8.2: 40 concurrent acceptances against a bound of 25: exactly 25 win."""
    store = RunStore(db, "gen-1")
    outcomes = await asyncio.gather(*(accept(store, new_run(), tree=f"t{i}", max_pending=25) for i in range(40)), return_exceptions=True)
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 25
    assert all(isinstance(o, InboxFull) for o in outcomes if isinstance(o, BaseException))
    assert await counters(db) == (0, 25)


async def test_the_completion_is_written_in_the_terminal_transaction_or_not_at_all(db):
    """§8.3: a failure converting the slot rolls the terminal state back with it, so no
    crash can leave a slot reserved with a run that is already terminal."""
    store = RunStore(db, "gen-1")
    [run] = await accept(store, new_run())
    await db.transaction(lambda c: c.execute(  # the conversion's insert will now collide
        "INSERT INTO agent_inbox_events (run_id, conversation_id, event_type, event_key, payload, status, created_at)"
        " VALUES (?, ?, 'completion', 'completion', '{}', 'superseded', 0)", (run.run_id, CID),
    ))
    with pytest.raises(Exception):
        await store.commit_terminal(run.run_id, run.execution_id, "completed", result="r")
    assert (await store.run(run.run_id))["status"] == "queued"
    assert await counters(db) == (0, 1)


async def test_no_pending_event_is_none_never_due_at_zero(db):
    """§8.12: MIN over no rows is NULL; read as 0 it said "due since 1970"."""
    store = RunStore(db, "gen-1")
    assert await store.next_due(CID) is None
    [run] = await accept(store, new_run())
    await store.commit_terminal(run.run_id, run.execution_id, "completed", result="r")
    await db.transaction(lambda c: c.execute("UPDATE agent_inbox_events SET next_attempt_at = 0"))
    due = await store.next_due(CID)
    assert due is not None and due[0] == 0.0


async def test_claims_are_ordered_and_a_lease_token_guards_release_and_consume(db):
    """§8.13: claim order is (created_at, id); a second claim finds nothing; a release
    or consume with another token changes nothing."""
    store = RunStore(db, "gen-1")
    accepted = await accept(store, *(new_run(task=f"task {i}") for i in range(3)))
    for run in reversed(accepted):
        await store.commit_terminal(run.run_id, run.execution_id, "completed", result=run.run_id)
    token, claimed = await store.claim(CID, time.time(), 60)
    assert [e["id"] for e in claimed] == sorted(e["id"] for e in claimed)
    assert [json.loads(e["payload"])["result"] for e in claimed] == [r.run_id for r in reversed(accepted)]
    assert (await store.claim(CID, time.time(), 60))[1] == []
    ids = [e["id"] for e in claimed]
    assert await store.release("another-token", ids, backoff_secs=0, max_attempts=8) == 0
    with pytest.raises(LookupError):
        await db.transaction(lambda c: consume(c, "another-token", ids, None))
    await db.transaction(lambda c: consume(c, token, ids, None))
    assert await store.release(token, ids, backoff_secs=0, max_attempts=8) == 0  # consumed: never back to pending
    assert {e["status"] for e in await events(db)} == {"consumed"} and await counters(db) == (0, 0)


async def test_idempotency_keys_deduplicate_and_null_keys_never_collide(db):
    """§8.14: the partial unique index ignores NULL keys."""
    store = RunStore(db, "gen-1")
    [first] = await accept(store, new_run("foreground", key="call_1#0"))
    [again] = await accept(store, new_run("foreground", key="call_1#0"))
    assert again.existing and again.run_id == first.run_id
    unkeyed = await accept(store, new_run("foreground"), new_run("foreground"))
    assert len({r.run_id for r in unkeyed}) == 2
    count = await db.run(lambda c: c.execute("SELECT count(*) FROM agent_runs").fetchone()[0])
    assert count == 3


async def test_the_signal_dedupe_key_holds_its_cooldown_window(db):
    """§8.15: the same key is one signal inside a window and a new one in the next."""
    assert event_key("k", 1000.0, 60) == event_key("k", 1019.0, 60) != event_key("k", 1020.0, 60)
    store = RunStore(db, "gen-1")
    [run] = await accept(store, new_run())
    results = [
        (await store.insert_signal(run.run_id, run.execution_id, event_key("k", now, 60), "queue", "info", {}, 128))[0]
        for now in (1000.0, 1019.0, 1020.0)
    ]
    assert results == ["ok", "duplicate", "ok"]


async def test_a_tree_holds_at_most_max_runs_per_tree_and_a_refused_batch_writes_nothing(db):
    """§8.7/§9: the shared tree count is checked in the accepting transaction."""
    store = RunStore(db, "gen-1")
    await accept(store, *(new_run("foreground") for _ in range(3)), max_runs=4)
    with pytest.raises(TreeFull):
        await accept(store, new_run("foreground"), new_run("foreground"), max_runs=4)
    assert await db.run(lambda c: c.execute("SELECT count(*) FROM agent_runs").fetchone()[0]) == 3
    await accept(store, new_run("foreground"), max_runs=4)


async def test_recovery_interrupts_orphans_returns_expired_leases_and_repairs_the_counters(db, caplog):
    """§6: a run of an earlier runtime generation has no runner: interrupted, its slot a
    failure completion; an expired lease goes back to pending, one past its attempts
    to dead-letter; counters that disagree with the rows are repaired, with a warning."""
    old = RunStore(db, "gen-old")
    [orphan, leased, exhausted] = await accept(old, new_run(), new_run(), new_run())
    for run in (leased, exhausted):
        await old.commit_terminal(run.run_id, run.execution_id, "completed", result="r")
    token, claimed = await old.claim(CID, time.time(), lease_secs=-1)  # already expired
    await db.transaction(lambda c: c.execute("UPDATE agent_inbox_events SET attempt_count = 8 WHERE id = ?", (claimed[1]["id"],)))
    await db.transaction(lambda c: c.execute("UPDATE agent_session_state SET pending_event_count = 40"))
    with caplog.at_level(logging.WARNING):
        report = await db.transaction(lambda c: recover(c, "gen-new", 8, time.time()))
    assert report == {"interrupted": 1, "released": 1, "dead_letter": 1, "repaired": 1}
    assert (await old.run(orphan.run_id))["status"] == "interrupted"
    by_run = {e["run_id"]: e for e in await events(db)}
    assert by_run[orphan.run_id]["status"] == "pending" and json.loads(by_run[orphan.run_id]["payload"])["status"] == "interrupted"
    assert {by_run[leased.run_id]["status"], by_run[exhausted.run_id]["status"]} == {"pending", "dead_letter"}
    assert await counters(db) == (2, 0)
    assert "repaired" in caplog.text


class _Runtime:
    """The one thing a coordinator reads from its runtime at construction, its store's
    database; a stand-in because a whole member runtime cannot be collected mid-test."""

    def __init__(self, db: Database) -> None:
        self.store = type("Store", (), {"db": db})()


class _IdleRuntime(_Runtime):
    """Also what the inbox worker's look asks: no turn runs; a drive is recorded."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.driven: list[str] = []

    def running(self, conversation_id: str) -> bool:
        return False

    def drive(self, conversation_id: str, *, continuation: bool = False) -> None:
        self.driven.append(conversation_id)


async def test_the_periodic_look_reads_the_file_only_when_something_may_wait(db):
    """§8.4's periodic look is the safety net for lost wake-ups, but an idle member's
    file was read every ``recheck_secs`` for as long as it stayed open (50 signed-in
    members: 25 reads a second, for nothing). A look that finds no waking event is not
    repeated until the file is written; one that finds an event not due yet (a backoff)
    is."""
    runtime = _IdleRuntime(db)
    coordinator = SubagentCoordinator(runtime, OrchestrationLimits(), asyncio.Semaphore(6))  # type: ignore[arg-type]
    store = coordinator.store
    looks: list[float] = []
    waking = store.waking

    async def counted(now: float) -> tuple[list[str], bool]:
        looks.append(now)
        return await waking(now)

    store.waking = counted  # type: ignore[method-assign]

    async def look() -> None:
        coordinator._next_look = 0.0  # the period has passed
        await coordinator.deliver_due()

    await look()
    await look()
    assert len(looks) == 1  # nothing waits, nothing was written since

    [run] = await accept(store, new_run())  # a write: the next look reads again
    await look()
    await look()
    assert len(looks) == 2 and runtime.driven == []  # the run's slot is reserved, no event yet

    await store.commit_terminal(run.run_id, run.execution_id, "completed", result="r")  # its wake-up is lost
    await look()
    assert len(looks) == 3 and runtime.driven == [CID]

    await db.transaction(lambda c: c.execute("UPDATE agent_inbox_events SET next_attempt_at = ?", (time.time() + 3600,)))
    runtime.driven.clear()
    await look()
    await look()
    await look()
    assert len(looks) == 6 and runtime.driven == []  # waiting, not due: looked at every period


async def test_a_run_that_cannot_be_spawned_gives_its_completion_slot_back(db):
    """§8.9 and §8.10: the coordinator holds its runtime weakly (it does not keep it
    alive), and a background run it can no longer start is cancelled with its slot
    released rather than reserved forever."""
    runtime = _Runtime(db)
    coordinator = SubagentCoordinator(runtime, OrchestrationLimits(), asyncio.Semaphore(6))  # type: ignore[arg-type]
    [run] = await accept(coordinator.store, new_run())
    assert await counters(db) == (0, 1)
    del runtime
    gc.collect()
    assert coordinator._runtime() is None
    ctx = RunContext(run.run_id, run.execution_id, "tree", ("researcher",), 1, "background", {}, None)
    await coordinator._spawn(None, "", None, "t", ctx)  # type: ignore[arg-type]
    assert (await coordinator.store.run(run.run_id))["status"] == "cancelled"
    assert await counters(db) == (0, 0)
    assert [e["status"] for e in await events(db)] == ["consumed"]


async def test_fifty_background_runs_and_competing_signals_lose_no_completion_and_deliver_none_twice(db):
    """The issue's load check: 50 background runs accepted concurrently with signals
    racing for the same inbox; every completion is delivered exactly once."""
    store = RunStore(db, "gen-1")
    accepted = [a for batch in await asyncio.gather(*(accept(store, new_run(task=f"task {i}"), tree=f"t{i}", max_pending=60) for i in range(50))) for a in batch]
    first = accepted[0]

    async def signal(i: int) -> str:
        return (await store.insert_signal(first.run_id, first.execution_id, f"signal:s{i}:0", "queue", "info", {}, 60))[0]

    async def finish(run) -> bool:
        return await store.commit_terminal(run.run_id, run.execution_id, "completed", result=f"result of {run.run_id}")

    outcomes = await asyncio.gather(*(signal(i) for i in range(30)), *(finish(r) for r in accepted))
    signals, finished = outcomes[:30], outcomes[30:]
    assert all(finished) and signals.count("ok") <= 10 and set(signals) <= {"ok", "full"}
    delivered = await deliver_all(db, store)
    rows = await events(db)
    completions = [e for e in rows if e["event_type"] == "completion"]
    assert sorted(e["run_id"] for e in completions) == sorted(r.run_id for r in accepted)
    assert len(delivered) == len(set(delivered)) == len(rows)
    assert {e["status"] for e in rows} == {"consumed"} and await counters(db) == (0, 0)


async def test_fair_scheduling_lets_the_inbox_in_after_a_burst_or_a_long_wait_and_not_before(db):
    """§4.6: the member's queued turns go first, until ``max_user_turn_burst_before_inbox``
    of them ran or the oldest event waited ``max_inbox_wait_secs``; with no event due,
    never (and "no event" is None, not a wait since 1970, §8.12)."""
    limits = OrchestrationLimits(max_user_turn_burst_before_inbox=4, max_inbox_wait_secs=30)
    coordinator = SubagentCoordinator(_Runtime(db), limits, asyncio.Semaphore(6))  # type: ignore[arg-type]
    assert await coordinator.oldest_wait(CID) is None  # not even asked: nothing was woken here
    coordinator.wake(CID)
    assert await coordinator.oldest_wait(CID) is None  # asked: no event
    [run] = await accept(coordinator.store, new_run())
    await coordinator.store.commit_terminal(run.run_id, run.execution_id, "completed", result="r")
    coordinator.wake(CID)
    waited = await coordinator.oldest_wait(CID)
    assert waited is not None and 0 <= waited < 5
    assert not coordinator.inbox_first(waited, user_turns=3)
    assert coordinator.inbox_first(waited, user_turns=4)
    assert coordinator.inbox_first(31.0, user_turns=0)
    assert not coordinator.inbox_first(None, user_turns=10)


async def test_an_event_admitted_into_a_turn_that_died_is_pending_again_after_the_restart(tmp_path):
    """§4.3/§6: admit writes the event's turn with it; a file closed with an event
    admitted into a turn (the process died) is repaired by startup recovery: the
    event is pending again, unbound, due at once, and the capacity count agrees."""
    path, key = tmp_path / "owner.db", os.urandom(32)
    first = await Database.open(path, key=key, migrations=OWNER_MIGRATIONS, create=True)
    await first.transaction(lambda c: (
        c.execute("INSERT INTO conversations (id, agent_id) VALUES (?, 'assistant')", (CID,)),
        c.execute("INSERT INTO frames (id, conversation_id, agent_id, depth) VALUES ('root-frame', ?, 'assistant', 0)", (CID,)),
    ))
    old = RunStore(first, "gen-old")
    [run] = await accept(old, new_run())
    assert (await old.insert_signal(run.run_id, run.execution_id, "signal:k:0", "steer", "info", {"summary": "half way"}, 128))[0] == "ok"
    token, [claimed] = await old.claim(CID, time.time(), 60, delivery="steer")
    assert await old.admit(token, [claimed["id"]], "turn-of-the-dead-process") == [claimed["id"]]
    [stored] = await events(first)
    assert (stored["status"], stored["admitted_turn_id"]) == ("admitted", "turn-of-the-dead-process")
    await first.close()

    again = await Database.open(path, key=key, migrations=OWNER_MIGRATIONS)
    try:
        report = await again.transaction(lambda c: recover(c, "gen-new", 8, time.time()))
        assert report["released"] == 1
        signal = next(e for e in await events(again) if e["event_type"] == "signal")
        assert (signal["status"], signal["admitted_turn_id"], signal["lease_token"]) == ("pending", None, None)
        assert signal["next_attempt_at"] <= time.time()
        # Pending again: the run's completion (the run died too) and the signal.
        assert await counters(again) == (2, 0)
        assert await RunStore(again, "gen-new").due_conversations(time.time()) == [CID]
    finally:
        await again.close()

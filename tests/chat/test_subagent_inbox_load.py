"""The issue's load check through a real host (seed 004 §4, §4.7, §8.2): one turn of the
member's assistant starts 50 background runs; each run signals while the inbox is at
its bound, so signals compete with the completions' reserved room; every run
completes. Every completion reaches the conversation exactly once, through the hidden
triggers of continuation turns, none lost; signals take only unreserved room, are
refused when there is none and deduplicated by key, and those accepted are delivered
exactly once too. The scripted model answers at once; only the host's work is timed."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from skald_host.testing import Reply, ToolCall

from .support import MODEL_A, ChatSocket, configure_models, eventually, new_conversation, write_agent

RUNS = 50
#: The inbox bound of the test's host: room for the 50 completions and two signals.
MAX_PENDING = RUNS + 2
TRIGGER = "[Background updates."
SETTINGS = {"subagents": {"max_runs_per_tree": 64, "max_pending_inbox_events_per_session": MAX_PENDING}}


def last(request: Any) -> dict[str, Any]:
    return request.messages[-1]


def task_of(request: Any) -> str:
    return request.messages[1]["content"] if len(request.messages) > 1 else ""


@pytest.mark.parametrize("chat_settings", [SETTINGS])
async def test_fifty_background_runs_signalling_into_a_full_inbox_deliver_every_completion_exactly_once(chat):
    await configure_models(chat.admin, chat.server)
    write_agent(
        chat.probe.agents_dir, "signaller", "You work and report progress.", title="Signaller", kind="task", tools=["emit_signal"],
        signal={"delivery": "queue", "max_signals": 4, "cooldown_secs": 3600, "severities": ["info"]},
    )
    alice = await chat.host.member("alice")
    tasks = [f"Task {i}." for i in range(RUNS)]
    peaks: list[int] = []
    store_box: list[Any] = []
    # The runs' first answers wait until the root's turn has all 50 accepted (its next
    # request carries the 50 results): then the inbox is at its bound from the first
    # signal on (50 slots reserved, 2 free), and no acceptance races a signal.
    all_accepted = asyncio.Event()

    async def respond(request):
        if store_box:  # the inbox bound holds at every step, read from the member's file
            row = await store_box[0].db.run(
                lambda c: c.execute("SELECT pending_event_count + reserved_completion_slots FROM agent_session_state").fetchone()
            )
            peaks.append(row[0] if row else 0)
        task = task_of(request)
        if task in tasks:
            if last(request)["role"] == "user":
                await all_accepted.wait()
                return Reply(tool_calls=[
                    ToolCall("emit_signal", {"key": "progress", "severity": "info", "summary": f"{task} half way"}),
                    ToolCall("emit_signal", {"key": "progress", "severity": "info", "summary": f"{task} half way, again"}),
                    ToolCall("emit_signal", {"key": "found", "severity": "info", "summary": f"{task} found something"}),
                ])
            return Reply(f"result of {task}")
        if last(request)["content"].startswith(TRIGGER):
            return Reply("Noted.")
        if last(request)["role"] == "tool":
            assert sum("Started in the background" in m["content"] for m in request.messages if m["role"] == "tool") == RUNS
            all_accepted.set()
            return Reply(f"Started {RUNS}.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "signaller", "task": t, "mode": "background"}) for t in tasks])

    chat.server.responder = respond
    started = time.monotonic()
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        runtime = chat.host.core.chat.live_runtime(alice.member["id"])
        assert runtime is not None
        store = runtime.subagents.store
        store_box.append(store)
        await sock.send(cid, f"Start {RUNS} background tasks.")

        async def settled() -> bool:
            rows = await store.runs(cid, limit=RUNS + 10)
            if len(rows) < RUNS or any(r["status"] != "completed" for r in rows):
                return False
            open_events = await store.db.run(
                lambda c: c.execute("SELECT count(*) FROM agent_inbox_events WHERE status != 'consumed'").fetchone()[0]
            )
            return open_events == 0 and not runtime.running(cid)

        await eventually(settled, timeout=50, what="every run completed and every inbox event consumed")
    elapsed = time.monotonic() - started

    db = store.db
    runs = await store.runs(cid, limit=RUNS + 10)
    assert len(runs) == RUNS and {r["status"] for r in runs} == {"completed"} and {r["mode"] for r in runs} == {"background"}
    events = await db.run(lambda c: [dict(r) for r in c.execute("SELECT * FROM agent_inbox_events ORDER BY id")])
    triggers = await db.run(lambda c: [dict(r) for r in c.execute(
        "SELECT id, content FROM messages WHERE conversation_id = ? AND origin = 'agent_continuation' ORDER BY id", (cid,)
    )])
    trigger_text = {t["id"]: t["content"] for t in triggers}

    # Every completion: one event per run, consumed by a continuation's trigger that
    # carries that run's result, and no trigger carries it twice or another time.
    completions = [e for e in events if e["event_type"] == "completion"]
    assert sorted(e["run_id"] for e in completions) == sorted(r["id"] for r in runs)
    for event in completions:
        assert event["status"] == "consumed" and event["consumed_message_id"] in trigger_text
        result = json.loads(event["payload"])["result"]
        assert result.startswith("result of Task ") and result in trigger_text[event["consumed_message_id"]]
    for run in runs:
        assert sum(text.count(f"run {run['id']}.") for text in trigger_text.values()) == 1, run["id"]

    # Signals: only unreserved room, never past the bound; one key once per window;
    # each accepted one delivered once.
    outcomes: dict[str, list[str]] = {}
    for request in chat.server.requests_for(MODEL_A):
        if task_of(request) in tasks and last(request)["role"] == "tool":
            outcomes[task_of(request)] = [m["content"] for m in request.messages if m["role"] == "tool"]
    assert len(outcomes) == RUNS

    def kind(result: str) -> str:
        if result.startswith("Signal "):
            return "ok"
        if "inbox is full" in result:
            return "full"
        assert "already sent in this cooldown window" in result, result
        return "duplicate"

    kinds = {task: [kind(r) for r in results] for task, results in outcomes.items()}
    signals = [e for e in events if e["event_type"] == "signal"]
    assert sum(k.count("ok") for k in kinds.values()) == len(signals)
    assert all(k[:2].count("ok") <= 1 for k in kinds.values())  # "progress" twice is one signal at most
    assert sum(k.count("full") for k in kinds.values()) > 0  # signals met a full inbox and were refused
    assert sum(k.count("duplicate") for k in kinds.values()) > 0
    assert max(peaks) <= MAX_PENDING
    for event in signals:
        assert event["status"] == "consumed" and event["consumed_message_id"] in trigger_text
        summary = json.loads(event["payload"])["summary"]
        assert sum(text.count(summary + "\n") + text.endswith(summary) for text in trigger_text.values()) == 1, summary
    counters = await db.run(lambda c: tuple(c.execute("SELECT pending_event_count, reserved_completion_slots FROM agent_session_state").fetchone()))
    assert counters == (0, 0)
    assert elapsed < 60, f"{elapsed:.1f} s"
    print(f"\n{RUNS} background runs, {len(signals)} signals, {len(triggers)} continuation turns in {elapsed:.1f} s")

"""Named sub-agents (issue 20), against a zero-latency scripted model, in one process
(host, model server and the member's WebSocket share the loop, which charges both
sides of each ratio alike).

- delegation overhead: a turn that delegates to a task agent (root asks, the agent
  answers, root answers: three model requests) beside a turn of the same three
  requests made directly (two rounds of ``list_agents``, then the answer); samples
  interleaved; reported as the ratio of the medians and the added milliseconds per
  delegated run (target: ratio <= 1.2);
- inbox delivery latency: from a background run's terminal commit (the transaction
  that writes its completion event) to the first token of the continuation turn
  that delivers it, as the member's WebSocket sees it (target: p99 <= 50 ms on an
  idle host).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from skald_host.testing.model_server import Reply, ScriptedModelServer, ToolCall

MODEL = "bench-model"
PASSWORD = "bench member password"
WARMUP, SAMPLES = 5, 60
INBOX_SAMPLES = 60
TRIGGER = "[Background updates."


class Socket:
    """The member's WebSocket: chat events with their arrival time."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.changed = asyncio.Event()

    async def __aenter__(self) -> "Socket":
        self._connection = self.client.ws()
        self.ws = await self._connection.__aenter__()
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self._connection.__aexit__(*exc)

    async def _read(self) -> None:
        async for raw in self.ws:
            now = time.perf_counter()
            frame = json.loads(raw)
            if frame.get("type") in ("event", "events"):
                for event in frame["events"] if frame["type"] == "events" else [frame["event"]]:
                    if event["kind"] == "chat":
                        self.events.append((now, event["data"]))
            self.changed.set()

    async def wait(self, predicate, start: int = 0, timeout: float = 20.0) -> tuple[int, float, dict[str, Any]]:
        deadline = time.perf_counter() + timeout
        while True:
            for index in range(start, len(self.events)):
                at, event = self.events[index]
                if predicate(event):
                    return index, at, event
            if time.perf_counter() > deadline:
                raise TimeoutError("the benchmark waited too long for an event")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 1.0)
            except TimeoutError:
                pass

    async def send(self, conversation_id: str, text: str) -> None:
        await self.ws.send(json.dumps({"type": "send", "conversation_id": conversation_id, "text": text}))


async def _turn(sock: Socket, client: Any, text: str) -> float:
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    start = len(sock.events)
    begun = time.perf_counter()
    await sock.send(cid, text)
    _, at, _ = await sock.wait(lambda e: e.get("conversation_id") == cid and e["type"] == "turn_finished", start)
    return at - begun


async def main() -> None:
    from skald_host.core.agent.subagents.coordinator import SubagentCoordinator
    from skald_host.testing.host import UNTHROTTLED_CHAT, start_host, test_settings

    commits: dict[str, float] = {}
    original = SubagentCoordinator._after_terminal

    def timed(self, frame, definition, ctx, status):
        # Called in the loop pass in which the terminal commit (with the completion
        # event, and usually the run's final answer) returned, before the wake-up.
        commits[ctx.run_id] = time.perf_counter()
        return original(self, frame, definition, ctx, status)

    SubagentCoordinator._after_terminal = timed  # type: ignore[method-assign]
    from skald_host.core.storage import Database

    counts = {"transaction": 0, "run": 0}
    originals = {name: getattr(Database, name) for name in ("transaction", "run", "transaction_queued")}

    def counting(name: str, kind: str):
        def wrapper(self, fn):
            counts[kind] += 1
            return originals[name](self, fn)
        return wrapper

    Database.transaction = counting("transaction", "transaction")  # type: ignore[method-assign]
    Database.transaction_queued = counting("transaction_queued", "transaction")  # type: ignore[method-assign]
    Database.run = counting("run", "run")  # type: ignore[method-assign]
    per_kind: dict[str, list[tuple[int, int]]] = {"direct": [], "delegate": []}

    def respond(request):
        last = request.messages[-1]
        content = last.get("content") or ""
        if content.startswith(TRIGGER):
            return Reply("It came back.")
        if content.startswith("direct"):
            return Reply(tool_calls=[ToolCall("list_agents", {})])
        if content.startswith("delegate"):
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "answer " + content})])
        if content.startswith("background"):
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "answer " + content, "mode": "background"})])
        if content.startswith("answer "):
            return Reply("child answer")
        if last["role"] == "tool":
            rounds = sum(1 for m in request.messages if m["role"] == "tool")
            if request.messages[1]["content"].startswith("direct") and rounds < 2:
                return Reply(tool_calls=[ToolCall("list_agents", {})])
            return Reply("done")
        return Reply("done")

    async with ScriptedModelServer(models=(MODEL,), api_key="sk-bench", responder=respond) as server:
        with tempfile.TemporaryDirectory() as tmp:
            host = await start_host(test_settings(Path(tmp) / "data", chat=UNTHROTTLED_CHAT))
            try:
                admin = await host.admin()
                provider = await admin.post("/api/admin/models/providers", json={"name": "bench", "base_url": server.base_url, "api_key": "sk-bench"})
                await admin.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": MODEL})
                member = await host.member("bench", PASSWORD)
                async with Socket(member) as sock:
                    direct, delegated = [], []
                    for index in range(WARMUP + SAMPLES):
                        pair = [("direct", direct), ("delegate", delegated)]
                        if index % 2:
                            pair.reverse()
                        for kind, samples in pair:
                            before = dict(counts)
                            seconds = await _turn(sock, member, f"{kind} {index}")
                            if index >= WARMUP:
                                samples.append(seconds)
                                per_kind[kind].append((counts["transaction"] - before["transaction"], counts["run"] - before["run"]))
                    latencies = []
                    for index in range(WARMUP + INBOX_SAMPLES):
                        cid = (await member.post("/api/conversations", json={})).json()["id"]
                        start = len(sock.events)
                        await sock.send(cid, f"background {index}")
                        _, at, _ = await sock.wait(
                            lambda e: e.get("conversation_id") == cid and e["type"] == "token" and (e.get("depth") or 0) == 0
                            and "came" in (e.get("delta") or "") , start,
                        )
                        runs = (await member.get(f"/api/conversations/{cid}/runs")).json()["runs"]
                        await sock.wait(lambda e: e.get("conversation_id") == cid and e["type"] == "turn_finished", start)
                        if index >= WARMUP:
                            latencies.append(at - commits[runs[0]["id"]])
            finally:
                await host.stop()
    SubagentCoordinator._after_terminal = original  # type: ignore[method-assign]
    for name, method in originals.items():
        setattr(Database, name, method)

    direct_p50, delegated_p50 = statistics.median(direct), statistics.median(delegated)
    ratio = delegated_p50 / direct_p50
    print(f"delegation vs a direct loop, three model requests each ({SAMPLES} turns each, interleaved):")
    print(f"  direct turn p50 {direct_p50 * 1e3:.2f} ms, delegating turn p50 {delegated_p50 * 1e3:.2f} ms")
    for kind, seen in per_kind.items():
        print(f"  {kind}: {statistics.median(t for t, _ in seen):.0f} write transactions and {statistics.median(r for _, r in seen):.0f} reads per turn (all files)")
    print(f"  ratio {ratio:.2f}x, {(delegated_p50 - direct_p50) * 1e3:+.2f} ms per delegated run — target <= 1.2x: {'ok' if ratio <= 1.2 else 'OVER'}")
    latencies.sort()
    p50, p99 = statistics.median(latencies), latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"inbox delivery, terminal commit to the continuation's first token ({len(latencies)} runs):")
    print(f"  p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms — target p99 <= 50 ms: {'ok' if p99 <= 0.05 else 'OVER'}")

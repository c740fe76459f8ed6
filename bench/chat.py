"""Chat against the scripted model, each figure beside a direct call to the same
server for the same request, measured in the same run. The direct call takes the
host's own transport (one pooled ``aiohttp`` session, ``post`` with the body's bytes as
the host sent them, encoded before its clock starts, the stream read by the host's SSE
reader), so a difference is the host's work, its encoding of the body included; the SDK's typed
``create()`` is printed beside it, since its request transform alone costs more than
the host at 1,000 messages.
``SKALD_BENCH_SYNCHRONOUS=NORMAL`` runs the host with synchronous=NORMAL to show what
the durable default (FULL, check G1) costs.

- time to first token: a WebSocket client's ``send`` to its first ``token`` event, vs a
  direct stream's first content chunk (target: p99 added <= 5 ms);
- per-round loop overhead with a zero-latency model: a turn whose model makes N rounds
  (N-1 calls of ``list_agents``, allowed and free, then an answer) minus a one-round
  turn, less the direct time of its N-1 extra requests replayed byte for byte,
  divided by N-1: what one more round of the loop costs the host, in conversations of
  10, 100 and 1,000 stored messages (target: p50 <= 1 ms, and flat, read here as the
  1,000-message p50 within 1.5x of the 10-message one, or both under 0.5 ms);
- per-turn overhead, printed beside it: a one-round turn (``send`` to its ``done``)
  minus a direct call replaying the exact request the host made, at the same
  histories: the round plus the turn's own work (the member's message received over the
  WebSocket, stored and acked, the answer stored before ``done``, the events out);
- stream relay gap: gaps between tokens as a WebSocket client sees them vs as a direct
  client sees them (target: added p99 <= 2 ms), and the host's CPU per further
  token of one stream (a 100-token turn less a one-token turn, one message each);
- 200 concurrent streaming conversations (50 members x 4, each reply 30 tokens at a
  typical 40 tokens/s) without errors, time to first token p99 beside 200 concurrent
  direct streams (target: within 2x), and the CPU each process spent: the host's per
  streamed token, the turns' own work included (target: <= 60 us), split by the same
  waves with one-token answers into the turns' own work and each further token's, and
  WebSocket messages per token (a socket that lags sends its queued events as one);
- WebSocket bytes per token, on the wire (permessage-deflate, which browsers negotiate)
  and before compression.

``SKALD_BENCH_ONLY=load,relay`` (phases among ttft, rounds, marginal, relay, load) runs
only those, e.g. under a profiler; the report prints what ran.

Where things run. The host runs in this process (``start_host``), alone: the history
conversations are written through its own ``ConversationStore`` on the member's open
file, and nothing else shares its event loop. The clients (WebSocket and direct)
run in a helper subprocess, and the scripted model server in a subprocess of its own
(``ModelProcess``). A first version ran the clients in the host's process; on the
2-core machine that charged the host's core for the clients' frame parsing and let the
host's own work delay the client's read of a frame already sent, which is no cost of
the host. With the helpers, the host process holds exactly what a deployment's does,
and a direct request crosses processes as the host's requests do. The model server
records each request the host sent, so the baseline replays it byte for byte. Host and
baseline samples are interleaved, so drift hits both alike.

Every turn adds to its conversation, so the history measures rotate through
``history_conversations`` conversations of each size (written in one transaction each,
then warmed by one turn): a "10-message" sample runs on 12 to about 35 stored messages,
not on hundreds.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from skald_host.testing.model_server import RecordedRequest, Reply, ScriptedModelServer, ToolCall

if TYPE_CHECKING:  # the helper process never imports the host
    from skald_host.testing.host import RunningHost

MODEL = "bench-model"
REPO = Path(__file__).resolve().parents[1]
PROBE = re.compile(r"bench tokens=(\d+) delay=([0-9.]+)")
ROUNDS = re.compile(r"bench rounds=(\d+)")
PASSWORD = "bench member password"
#: FULL is the host's setting (check G1). SKALD_BENCH_SYNCHRONOUS=NORMAL measures the cost of
#: that choice: in WAL, NORMAL skips the sync per commit and may lose the last commits on
#: power loss (not on a process crash). Only this benchmark's host is switched.
SYNCHRONOUS = os.environ.get("SKALD_BENCH_SYNCHRONOUS", "FULL").upper()
if SYNCHRONOUS not in ("FULL", "NORMAL"):
    raise SystemExit("SKALD_BENCH_SYNCHRONOUS is FULL or NORMAL")

WARMUP = 10
TTFT_SAMPLES, TTFT_TOKENS, TTFT_DELAY = 200, 5, 0.005
TTFT_TURNS_PER_CONVERSATION = 21  # a fresh conversation now and then keeps the history short
HISTORY_SIZES = (10, 100, 1000)
ROUND_SAMPLES = 90  # a p50 of differences of two turns needs many: 30 moved by 0.5 ms run to run
PHASES = ("ttft", "rounds", "marginal", "relay", "load")
#: SKALD_BENCH_ONLY=load (comma-separated phases) runs only those, e.g. under a profiler.
ONLY = tuple(filter(None, os.environ.get("SKALD_BENCH_ONLY", ",".join(PHASES)).split(",")))
if set(ONLY) - set(PHASES):
    raise SystemExit(f"SKALD_BENCH_ONLY names phases among {', '.join(PHASES)}")


def history_conversations(size: int) -> int:
    """Conversations per size and measure: three samples each (with the warm-up), but a
    few for the long ones, where what the samples add is small beside what is stored."""
    return 5 if size >= 1000 else -(-(3 + ROUND_SAMPLES) // 3)
MARGINAL_ROUNDS = 8  # model rounds in the long turn of the marginal-round measure
MARGINAL_TOOL = "list_agents"  # allowed by the seeded rules, no I/O, a short result
TYPED_SAMPLES = 5  # the SDK's typed create(), for reference beside the baseline
RELAY_TOKENS, RELAY_DELAY, RELAY_TURNS = 100, 0.005, 10
MEMBERS, CONVERSATIONS_PER_MEMBER, WAVES = 50, 4, 3
LOAD_TOKENS, LOAD_DELAY = 30, 0.025  # 40 tokens/s, a typical hosted model
#: History rows of a plausible size (a question, a paragraph of answer).
USER_TEXT = "Could you remind me what we decided about the garden, the shed roof and the budget?"
ASSISTANT_TEXT = (
    "We agreed to replant the east bed in spring, to fix the shed roof with bitumen sheets before the rains, "
    "and to keep the whole thing under four hundred euros, with the tools borrowed from your neighbour. "
) * 2


def probe(tokens: int, delay: float = 0.0) -> str:
    """A user message naming the reply it gets; the nonce keeps messages distinct."""
    return f"bench tokens={tokens} delay={delay} #{uuid.uuid4().hex[:8]}"


def rounds_probe(rounds: int) -> str:
    """A user message asking for a turn of ``rounds`` model rounds (tool calls, then an answer)."""
    return f"bench rounds={rounds} #{uuid.uuid4().hex[:8]}"


def bench_reply(request: RecordedRequest) -> Reply:
    """The scripted server's responder: the host and the direct client send the same
    request, so they get the very same reply."""
    rounds = ROUNDS.search(request.last_user_text or "")
    if rounds:
        answered = 0  # tool results since the member's message: the rounds already made
        for message in reversed(request.messages):
            if message.get("role") == "user":
                break
            answered += message.get("role") == "tool"
        if answered + 1 < int(rounds[1]):
            return Reply(tool_calls=[ToolCall(MARGINAL_TOOL, {})])
        return Reply(text=" ".join(["tok"] * 5))
    match = PROBE.search(request.last_user_text or "")
    tokens, delay = (int(match[1]), float(match[2])) if match else (5, 0.0)
    return Reply(text=" ".join(["tok"] * tokens), token_delay=delay)


SCHEDSTAT = Path("/proc/self/schedstat").exists()


def cpu_seconds(pid: int) -> float:
    """CPU time used so far by a process, all threads: the host's (the helper's parent),
    the helper's and the model server's, to show which one saturates. Each thread's
    ``schedstat`` counts nanoseconds; ``stat`` counts 10 ms ticks, which made a one-turn
    figure a multiple of 10 ms. (A thread that ends takes its time out of the sum: the
    figures count the threads alive at both ends, and the host's threads live on.)"""
    if not SCHEDSTAT:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # the thread ended as it was read
    return total / 1e9


class ModelProcess:
    """The scripted model server, in a process of its own (``model_main``): a request
    then crosses processes both ways, from the host and from the direct client alike.
    With the server on the direct client's own loop, the baseline skipped the two
    cross-process wake-ups every host request pays (~0.1 ms each on this VM) and gained
    nothing from the second core, which made the host look slower on short requests
    and faster on long ones than it is. Asked over its pipes for what it recorded."""

    def __init__(self, process: asyncio.subprocess.Process, base_url: str) -> None:
        self.process = process
        self.base_url = base_url
        self._lock = asyncio.Lock()

    @classmethod
    async def start(cls) -> ModelProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from bench.chat import model_main; model_main()",
            cwd=REPO, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=256 * 2**20,
        )
        assert process.stdout is not None
        return cls(process, (await process.stdout.readline()).decode().strip())

    async def ask(self, command: str) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        async with self._lock:
            self.process.stdin.write(command.encode() + b"\n")
            await self.process.stdin.drain()
            return json.loads(await self.process.stdout.readline())

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await asyncio.wait_for(self.process.wait(), 20)


def model_main() -> None:
    """The model server's process: prints its URL, then answers one JSON line per
    command line on stdin (``requests N``: the latest N chat bodies, oldest first;
    ``peak``: the most streams open at once since the last ask) until stdin closes."""

    async def serve() -> None:
        async with ScriptedModelServer((MODEL,), responder=bench_reply) as server:
            print(server.base_url, flush=True)
            loop = asyncio.get_running_loop()
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                command, _, argument = line.strip().partition(" ")
                if command == "requests":
                    answer: Any = [r.body for r in server.requests if r.path == "/v1/chat/completions"][-int(argument):]
                    # Only the latest are ever asked for: thousands of kept bodies made
                    # the collector pause this process for ~90 ms now and then.
                    del server.requests[:-MARGINAL_ROUNDS]
                else:
                    answer, server.peak_active_streams = server.peak_active_streams, 0
                print(json.dumps(answer), flush=True)

    asyncio.run(serve())


def p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


# -- the helper process: model server, WebSocket clients, direct client ----------------------


@dataclass
class Turn:
    started: float
    first_token: float | None = None
    token_times: list[float] = field(default_factory=list)
    finished: float = 0.0
    text: str = ""
    wire_bytes: int = 0
    payload_bytes: float = 0
    token_payload_bytes: float = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ttft(self) -> float:
        assert self.first_token is not None, "no token arrived"
        return self.first_token - self.started

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.token_times, self.token_times[1:])]


class MemberSocket:
    """One member's socket. A pump stamps each message as it arrives and routes it to
    its conversation; wire bytes are counted where the transport hands them over."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.queues: dict[str, asyncio.Queue[tuple[float, dict[str, Any], float]]] = {}
        self.stray: list[dict[str, Any]] = []
        self.wire_bytes = 0
        self.messages = 0
        received = ws.data_received

        def counting(data: bytes) -> None:
            self.wire_bytes += len(data)
            received(data)

        ws.data_received = counting  # the transport looks the method up on every read
        self._pump = asyncio.create_task(self._run())

    @classmethod
    async def connect(cls, host_url: str, headers: dict[str, str]) -> MemberSocket:
        from websockets.asyncio.client import connect

        return cls(await connect("ws" + host_url[4:] + "/api/ws", origin=host_url, additional_headers=headers, proxy=None))  # type: ignore[arg-type]

    def queue(self, conversation_id: str) -> asyncio.Queue[tuple[float, dict[str, Any], float]]:
        return self.queues.setdefault(conversation_id, asyncio.Queue())

    async def _run(self) -> None:
        async for raw in self.ws:
            arrived = time.perf_counter()
            self.messages += 1
            message = json.loads(raw)
            # Events the host sent together arrive as one "events" message; each is
            # routed on its own, with its share of the message's bytes.
            parts = [{"type": "event", "event": e} for e in message["events"]] if message.get("type") == "events" else [message]
            size = len(raw.encode()) / len(parts)
            for part in parts:
                data = part.get("event", {}).get("data", {}) if part.get("type") == "event" else part
                conversation_id = data.get("conversation_id")
                if conversation_id is None:
                    self.stray.append(part)
                else:
                    self.queue(conversation_id).put_nowait((arrived, part, size))

    async def turn(self, conversation_id: str, text: str, timeout: float = 60.0) -> Turn:
        queue = self.queue(conversation_id)
        wire_before = self.wire_bytes
        turn = Turn(time.perf_counter())
        command = {"type": "send", "conversation_id": conversation_id, "text": text, "idempotency_key": uuid.uuid4().hex}
        await self.ws.send(json.dumps(command))
        async with asyncio.timeout(timeout):
            while True:
                arrived, message, size = await queue.get()
                turn.payload_bytes += size
                if message["type"] != "event":
                    if message["type"] != "ack":
                        turn.errors.append(str(message))
                    continue
                data = message["event"]["data"]
                if data["type"] == "token":
                    turn.token_times.append(arrived)
                    turn.token_payload_bytes += size
                    turn.first_token = turn.first_token or arrived
                elif data["type"] == "done":
                    turn.text = data["content"]
                elif data["type"] == "error":
                    turn.errors.append(data.get("error", "error"))
                elif data["type"] == "turn_finished":
                    turn.finished = arrived
                    break
        turn.wire_bytes = self.wire_bytes - wire_before
        return turn

    async def close(self) -> None:
        await self.ws.close()
        self._pump.cancel()
        await asyncio.gather(self._pump, return_exceptions=True)


class Helper:
    def __init__(self, model: ModelProcess) -> None:
        import openai

        self.model = model
        self.session: Any = None  # aiohttp's, as the host's ModelClients keeps one
        self.headers = {"Authorization": "Bearer not-needed", "Content-Type": "application/json", "Accept": "text/event-stream"}
        # The SDK's everyday call, for reference only (direct_typed).
        self.sdk = openai.AsyncOpenAI(
            base_url=model.base_url, api_key="not-needed", max_retries=0, timeout=120, http_client=openai.DefaultAioHttpClient(timeout=120)
        )

    async def last_request(self) -> dict[str, Any]:
        """The body of the host's latest chat request, exactly as the server got it."""
        return (await self.last_requests(1))[0]

    async def last_requests(self, count: int) -> list[dict[str, Any]]:
        """The bodies of the host's latest ``count`` chat requests, oldest first."""
        bodies = await self.model.ask(f"requests {count}")
        assert len(bodies) == count, "fewer chat requests than asked for"
        return bodies

    async def direct(self, body: dict[str, Any]) -> Turn:
        """The same request through the same transport the host takes (one pooled
        ``aiohttp`` session, the body's bytes posted, the raw stream read by the host's
        SSE parser): the difference is then the host's own work. The bytes are the
        host's, encoded before the clock starts, so the host's own encoding of its body
        counts as its work; a baseline that encoded the whole body would charge itself
        what the host keeps from earlier rounds (~1.5 ms at 1,000 messages). The SDK's
        ``create`` would add its typed transform of every message (~2 ms at 10
        messages, ~150 ms at 1,000) to the baseline only, and hide that much host time
        (``direct_typed``, printed for reference)."""
        from skald_host.core.llm.client import wire_json
        from skald_host.core.llm.sse import SSEParser

        content = wire_json(body)  # what the host sent, byte for byte: the same encoding, the same key order
        turn = Turn(time.perf_counter())
        async with self.http().post(f"{self.model.base_url}/chat/completions", data=content, headers=self.headers) as response:
            response.raise_for_status()
            parser = SSEParser()  # the host's reader, over the same raw bytes
            async for raw in response.content.iter_any():
                for data in parser.feed(raw):
                    if data.startswith("[DONE]"):
                        continue
                    choices = json.loads(data).get("choices")
                    content = choices[0].get("delta", {}).get("content") if choices else None
                    if content:
                        arrived = time.perf_counter()
                        turn.token_times.append(arrived)
                        turn.first_token = turn.first_token or arrived
                        turn.text += content
        turn.finished = time.perf_counter()
        return turn

    def http(self) -> Any:
        """The pooled session, made on first use (inside the running loop)."""
        import aiohttp

        if self.session is None:
            self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000), timeout=aiohttp.ClientTimeout(total=120))
        return self.session

    async def direct_typed(self, body: dict[str, Any]) -> Turn:
        """The SDK's everyday call, ``chat.completions.create``, for reference."""
        turn = Turn(time.perf_counter())
        stream = await self.sdk.chat.completions.create(**body)
        async with stream:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    arrived = time.perf_counter()
                    turn.token_times.append(arrived)
                    turn.first_token = turn.first_token or arrived
                    turn.text += chunk.choices[0].delta.content
        turn.finished = time.perf_counter()
        return turn

    async def paired(self, socket: MemberSocket, conversation_id: str, text: str) -> tuple[Turn, Turn]:
        """A turn through the host, then the same request straight to the model."""
        turn = await socket.turn(conversation_id, text)
        if turn.errors:
            raise RuntimeError(f"the host's turn failed: {turn.errors}")
        return turn, await self.direct(await self.last_request())

    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        host_url, solo = plan["host_url"], plan["solo"]
        socket = await MemberSocket.connect(host_url, solo["headers"])
        results: dict[str, Any] = {"tools_offered": 0}

        if "ttft" in ONLY:
            results["ttft"] = await self.ttft(socket, solo["ttft"])
        if "rounds" in ONLY:
            results["rounds"] = {size: await self.rounds(socket, conversations) for size, conversations in solo["history"]["turn"].items()}
        if "marginal" in ONLY:
            results["marginal"] = {size: await self.marginal(socket, conversations) for size, conversations in solo["history"]["marginal"].items()}
        if "relay" in ONLY:
            results["relay"] = await self.relay(socket, solo["relay"])
        if set(ONLY) - {"load"}:
            results["tools_offered"] = len((await self.last_request()).get("tools") or [])
        await socket.close()
        if "load" in ONLY:
            results["load"] = await self.load(host_url, plan["load"])
        return results

    async def ttft(self, socket: MemberSocket, conversations: list[str]) -> dict[str, list[float]]:
        ttft: dict[str, list[float]] = {"host": [], "direct": []}
        for index in range(WARMUP + TTFT_SAMPLES):
            conversation_id = conversations[index // TTFT_TURNS_PER_CONVERSATION]
            turn, baseline = await self.paired(socket, conversation_id, probe(TTFT_TOKENS, TTFT_DELAY))
            if index >= WARMUP:
                ttft["host"].append(turn.ttft)
                ttft["direct"].append(baseline.ttft)
        return ttft

    async def rounds(self, socket: MemberSocket, conversations: list[str]) -> dict[str, list[float]]:
        await self.warm(socket, conversations)
        samples: dict[str, list[float]] = {"turn": [], "direct": [], "overhead": []}
        for index in range(3 + ROUND_SAMPLES):
            turn, baseline = await self.paired(socket, conversations[index % len(conversations)], probe(5))
            if index >= 3:
                samples["turn"].append(turn.finished - turn.started)
                samples["direct"].append(baseline.finished - baseline.started)
                samples["overhead"].append(samples["turn"][-1] - samples["direct"][-1])
        last = await self.last_request()
        samples["request_bytes"] = [len(json.dumps(last))]
        typed = [await self.direct_typed(last) for _ in range(TYPED_SAMPLES)]
        samples["typed"] = [t.finished - t.started for t in typed]
        return samples

    async def relay(self, socket: MemberSocket, conversation_id: str) -> dict[str, Any]:
        relay: dict[str, Any] = {"host": [], "direct": [], "tokens": 0, "wire": 0, "payload": 0, "token_payload": 0, "cpu": 0.0, "short_cpu": 0.0}
        for _ in range(RELAY_TURNS):
            # The host's CPU for a one-token turn, then for the streamed one: their
            # difference is what the further tokens of one stream cost, one frame each.
            cpu = cpu_seconds(os.getppid())
            short = await socket.turn(conversation_id, probe(1))
            relay["short_cpu"] += cpu_seconds(os.getppid()) - cpu
            if short.errors:
                raise RuntimeError(f"the host's turn failed: {short.errors}")
            cpu = cpu_seconds(os.getppid())
            turn = await socket.turn(conversation_id, probe(RELAY_TOKENS, RELAY_DELAY))
            relay["cpu"] += cpu_seconds(os.getppid()) - cpu
            if turn.errors:
                raise RuntimeError(f"the host's turn failed: {turn.errors}")
            baseline = await self.direct(await self.last_request())
            if turn.text != " ".join(["tok"] * RELAY_TOKENS):
                # A lagging socket joins queued deltas of one message into one event
                # (events.coalesce_tokens); only the text must be whole.
                raise RuntimeError(f"the relayed text is not the reply ({len(turn.token_times)} token events)")
            relay["host"] += turn.gaps
            relay["direct"] += baseline.gaps
            relay["tokens"] += len(turn.token_times)
            relay["wire"] += turn.wire_bytes
            relay["payload"] += turn.payload_bytes
            relay["token_payload"] += turn.token_payload_bytes
        return relay

    @staticmethod
    async def warm(socket: MemberSocket, conversations: list[str]) -> None:
        """One turn in each conversation first: the host's first turn in a conversation
        it has not seen since starting reads its history (a restart's cost, not a
        round's), and the samples are of the steady state."""
        for conversation_id in conversations:
            await socket.turn(conversation_id, probe(5))

    async def marginal(self, socket: MemberSocket, conversations: list[str]) -> dict[str, list[float]]:
        """Per sample: a one-round turn, a ``MARGINAL_ROUNDS``-round turn, then the long
        turn's extra requests sent directly. One more round's host cost is the turns'
        difference less those requests' direct time, spread over the extra rounds."""
        extra = MARGINAL_ROUNDS - 1
        await self.warm(socket, conversations)
        samples: dict[str, list[float]] = {"one": [], "many": [], "direct": [], "marginal": []}
        # CPU seconds of the host, the clients and the model server: the extra rounds'
        # (long turn minus short turn) and their requests' sent directly.
        processes = (os.getppid(), os.getpid(), self.model.process.pid)
        samples["cpu_rounds"], samples["cpu_direct"] = [0.0] * 3, [0.0] * 3

        def cpu() -> list[float]:
            return [cpu_seconds(pid) for pid in processes]

        for index in range(3 + ROUND_SAMPLES):
            conversation_id = conversations[index % len(conversations)]
            before_one = cpu()
            one = await socket.turn(conversation_id, rounds_probe(1))
            before_many = cpu()
            many = await socket.turn(conversation_id, rounds_probe(MARGINAL_ROUNDS))
            after_many = cpu()
            for turn in (one, many):
                if turn.errors or turn.text != " ".join(["tok"] * 5):
                    raise RuntimeError(f"the host's tool-round turn failed: {turn.errors or turn.text!r}")
            requests = await self.last_requests(MARGINAL_ROUNDS)
            calls = [m for m in requests[-1]["messages"] if m.get("role") == "tool"][-extra:]
            if len(calls) != extra or any(c["content"].startswith(("Error", "Denied")) for c in calls):
                raise RuntimeError(f"{MARGINAL_TOOL} did not run in every round: {calls}")
            direct = 0.0
            before_direct = cpu()
            for body in requests[1:]:
                baseline = await self.direct(body)
                direct += baseline.finished - baseline.started
            after_direct = cpu()
            if index >= 3:
                for k in range(3):
                    samples["cpu_rounds"][k] += (after_many[k] - before_many[k]) - (before_many[k] - before_one[k])
                    samples["cpu_direct"][k] += after_direct[k] - before_direct[k]
                samples["one"].append(one.finished - one.started)
                samples["many"].append(many.finished - many.started)
                samples["direct"].append(direct / extra)
                samples["marginal"].append((samples["many"][-1] - samples["one"][-1] - direct) / extra)
        return samples

    async def load(self, host_url: str, members: list[dict[str, Any]]) -> dict[str, Any]:
        sockets = [await MemberSocket.connect(host_url, m["headers"]) for m in members]
        conversations = [(s, c) for s, m in zip(sockets, members) for c in m["conversations"]]
        expected = " ".join(["tok"] * LOAD_TOKENS)
        out: dict[str, Any] = {"host": [], "direct": [], "errors": [], "wrong": 0, "wall": [], "direct_wall": [],
                               "turns": 0, "peak_streams": 0, "cpu": [], "helper_cpu": [], "model_cpu": []}
        model_pid = self.model.process.pid

        async def short_wave() -> float:
            """The same turns with one-token answers: the turns' own work (the message in,
            stored, the model request, the answer stored, the events around it). A long
            wave less a short one is what the further tokens alone cost the host."""
            cpu = cpu_seconds(os.getppid())
            turns = await asyncio.gather(*(s.turn(c, probe(1), timeout=120) for s, c in conversations), return_exceptions=True)
            out["errors"] += [repr(t) for t in turns if isinstance(t, BaseException)]
            return cpu_seconds(os.getppid()) - cpu

        out["short_cpu"] = []
        for _ in range(WAVES):
            cpu, helper_cpu, model_cpu = cpu_seconds(os.getppid()), cpu_seconds(os.getpid()), cpu_seconds(model_pid)
            messages = sum(s.messages for s in sockets)
            started = time.perf_counter()
            turns = await asyncio.gather(
                *(s.turn(c, probe(LOAD_TOKENS, LOAD_DELAY), timeout=120) for s, c in conversations), return_exceptions=True
            )
            out["wall"].append(time.perf_counter() - started)
            out["cpu"].append(cpu_seconds(os.getppid()) - cpu)
            out["helper_cpu"].append(cpu_seconds(os.getpid()) - helper_cpu)
            out["model_cpu"].append(cpu_seconds(model_pid) - model_cpu)
            out["messages"] = out.get("messages", 0) + sum(s.messages for s in sockets) - messages
            for turn in turns:
                out["turns"] += 1
                if isinstance(turn, BaseException):
                    out["errors"].append(repr(turn))
                    continue
                out["errors"] += turn.errors
                out["wrong"] += turn.text != expected  # deltas may arrive joined; the text must be whole
                if turn.first_token:
                    out["host"].append(turn.ttft)
            out["peak_streams"] = max(out["peak_streams"], await self.model.ask("peak"))
            body = await self.last_request()  # a load conversation's latest request, as the host sent it
            started = time.perf_counter()
            baselines = await asyncio.gather(*(self.direct(body) for _ in conversations), return_exceptions=True)
            out["direct_wall"].append(time.perf_counter() - started)
            for baseline in baselines:
                if isinstance(baseline, BaseException):
                    out["errors"].append("direct: " + repr(baseline))
                else:
                    out["direct"].append(baseline.ttft)
            # After the long wave, as in the earlier versions of this measure: its first
            # wave pays the conversations' first turns, which the short ones never do.
            out["short_cpu"].append(await short_wave())
        out["stray"] = [m for s in sockets for m in s.stray]
        for socket in sockets:
            await socket.close()
        return out


def helper_main(measure: Callable[[Helper, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None) -> None:
    """The helper process: prints the model server's URL, reads the plan (one JSON line),
    measures (``Helper.run``, or ``measure``: bench/tts.py's relay under speech), prints
    the results (one JSON line), and serves until stdin closes."""

    async def serve() -> None:
        model = await ModelProcess.start()
        try:
            print(model.base_url, flush=True)
            loop = asyncio.get_running_loop()
            plan = json.loads(await loop.run_in_executor(None, sys.stdin.readline))
            helper = Helper(model)
            try:
                results = await (measure(helper, plan) if measure else helper.run(plan))
            except Exception:  # noqa: BLE001 - the parent waits for one line: a failure must be that line
                results = {"failed": traceback.format_exc()}
            await helper.sdk.close()
            if helper.session is not None:
                await helper.session.close()
            print(json.dumps(results), flush=True)
            await loop.run_in_executor(None, sys.stdin.read)
        finally:
            await model.close()

    asyncio.run(serve())


# -- the host process --------------------------------------------------------------------------


async def configure_model(admin: Any, model_url: str) -> None:
    """The scripted model server as the host's one model (bench/tts.py uses it too)."""
    response = await admin.post("/api/admin/models/providers", json={"name": "scripted", "base_url": model_url, "api_key": "x"})
    assert response.status_code == 201, response.text
    response = await admin.post("/api/admin/models/entries", json={"provider_id": response.json()["id"], "model": MODEL})
    assert response.status_code == 201, response.text


async def _prepare(host: RunningHost, model_url: str) -> dict[str, Any]:
    """Model configured, members logged in, conversations (and histories) written."""
    from skald_host.core.agent.store import ConversationStore

    admin = await host.admin()
    await configure_model(admin, model_url)

    async def member(name: str) -> Any:
        response = await admin.post("/api/admin/members", json={"username": name, "password": PASSWORD})
        assert response.status_code == 201, response.text
        client = host.client()
        assert (await client.login(name, PASSWORD)).status_code == 200
        return client

    async def conversation(client: Any) -> str:
        response = await client.post("/api/conversations", json={"title": "bench"})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    solo = await member("solo")
    db = host.core.users.owner_db(solo.member["id"])
    assert db is not None, "logging in opens the member's file"
    store = ConversationStore(db)

    async def stored(size: int) -> str:
        """A conversation of ``size`` answered messages, in one transaction."""
        conversation_id, _ = await store.create_conversation("assistant", title=f"history {size}")
        frame = await store.root_frame(conversation_id)
        rows = [(conversation_id, frame.id, role, text, MODEL if role == "assistant" else None)
                for _ in range(size // 2) for role, text in (("user", USER_TEXT), ("assistant", ASSISTANT_TEXT))]
        await db.transaction(lambda c: c.executemany(
            "INSERT INTO messages (conversation_id, frame_id, role, content, model) VALUES (?, ?, ?, ?, ?)", rows))
        return conversation_id

    history = {
        measure: {size: [await stored(size) for _ in range(history_conversations(size))] for size in HISTORY_SIZES}
        for measure in ("turn", "marginal")
    } if {"rounds", "marginal"} & set(ONLY) else {"turn": {}, "marginal": {}}
    if SYNCHRONOUS != "FULL":  # the negative control: every connection of this host, never a default
        for database in (host.core.registry, db):
            await database.run(lambda c: c.execute(f"PRAGMA synchronous = {SYNCHRONOUS}"))
    ttft_conversations = -(-(WARMUP + TTFT_SAMPLES) // TTFT_TURNS_PER_CONVERSATION)
    plan: dict[str, Any] = {
        "host_url": host.url,
        "solo": {
            "headers": solo.headers("GET"),
            "ttft": [await conversation(solo) for _ in range(ttft_conversations)],
            "history": history,
            "relay": await conversation(solo),
        },
        "load": [],
    }
    for index in range(MEMBERS):
        client = await member(f"load{index:03d}")
        if SYNCHRONOUS != "FULL":
            await host.core.users.owner_db(client.member["id"]).run(lambda c: c.execute(f"PRAGMA synchronous = {SYNCHRONOUS}"))
        conversations = [await conversation(client) for _ in range(CONVERSATIONS_PER_MEMBER)]
        plan["load"].append({"headers": client.headers("GET"), "conversations": conversations})
    return plan


async def main() -> None:
    from skald_host.testing.host import UNTHROTTLED_CHAT, start_host, test_settings

    load_before = os.getloadavg()[0]
    helper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from bench.chat import helper_main; helper_main()",
        cwd=REPO, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=64 * 2**20,
    )
    assert helper.stdin is not None and helper.stdout is not None
    try:
        model_url = (await helper.stdout.readline()).decode().strip()
        with tempfile.TemporaryDirectory() as tmp:
            # The bench's one member is a script sending back to back (~125 a second):
            # the send budget for a member's own clients is lifted for it.
            host = await start_host(test_settings(Path(tmp) / "data", chat=UNTHROTTLED_CHAT))
            try:
                started = time.perf_counter()
                plan = await _prepare(host, model_url)
                setup_seconds = time.perf_counter() - started
                helper.stdin.write(json.dumps(plan).encode() + b"\n")
                await helper.stdin.drain()
                line = await helper.stdout.readline()
            finally:
                await host.stop()
    finally:
        helper.stdin.close()
        await asyncio.wait_for(helper.wait(), 20)
    if not line:
        raise SystemExit("the chat benchmark's helper process died; its traceback is above")
    results = json.loads(line)
    if "failed" in results:
        raise SystemExit(f"the chat benchmark failed: {results['failed']}")
    report(results, setup_seconds, load_before)


# -- the report ----------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f}"


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(results: dict[str, Any], setup_seconds: float, load_before: float) -> None:
    print(f"(1-minute load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores:"
          " other work on the machine shows in every figure)")
    if SYNCHRONOUS != "FULL":
        print(f"(SQLite synchronous={SYNCHRONOUS} on every connection of this host: a measurement of FULL's cost,"
              " not the host's setting; NORMAL may lose the last commits on power loss)")
    print(f"(setup: {setup_seconds:.1f} s for {MEMBERS + 1} members, their conversations and the history rows;"
          f" the assistant agent's requests carry {results['tools_offered']} tools)")
    first, last = str(HISTORY_SIZES[0]), str(HISTORY_SIZES[-1])
    if "ttft" in results:
        ttft = results["ttft"]
        print(f"\ntime to first token, {TTFT_SAMPLES} sequential turns ({TTFT_TOKENS} tokens at {TTFT_DELAY * 1e3:g} ms,"
              " no first-token delay), ms:")
        print("                            p50        p99")
        print(f"  direct stream       {_ms(p(ttft['direct'], .5))}  {_ms(p(ttft['direct'], .99))}")
        print(f"  WebSocket client    {_ms(p(ttft['host'], .5))}  {_ms(p(ttft['host'], .99))}")
        print(f"  difference          {_ms(p(ttft['host'], .5) - p(ttft['direct'], .5))}  {_ms(p(ttft['host'], .99) - p(ttft['direct'], .99))}")
        # Per pair (a host turn and the direct call right after it): a spike in one baseline
        # sample cannot hide the host's tail the way it can in the difference of p99s.
        added = [h - d for h, d in zip(ttft["host"], ttft["direct"])]
        print(f"  added, per pair     {_ms(p(added, .5))}  {_ms(p(added, .99))}   target p99 added <= 5 ms: {_verdict(p(added, .99) <= 0.005)}")

    if "marginal" in results:
        marginal = results["marginal"]
        print(f"\nper-round loop overhead, zero-latency model: ({MARGINAL_ROUNDS}-round turn - 1-round turn"
              f" - direct time of the {MARGINAL_ROUNDS - 1} extra requests) / {MARGINAL_ROUNDS - 1}, each extra round a"
              f" {MARGINAL_TOOL} call, {ROUND_SAMPLES} pairs per history, ms:")
        print("  history  1-round p50  N-round p50  direct/extra p50  per round p50  per round p99")
        for size, r in marginal.items():
            print(f"  {int(size):7d}    {_ms(p(r['one'], .5))}    {_ms(p(r['many'], .5))}"
                  f"         {_ms(p(r['direct'], .5))}      {_ms(p(r['marginal'], .5))}      {_ms(p(r['marginal'], .99))}")
        print("  CPU ms per extra round (host / clients / model server), beside the same requests sent directly:")
        for size, r in marginal.items():
            rounds = len(r["marginal"]) * (MARGINAL_ROUNDS - 1)
            host, direct = (" / ".join(f"{seconds / rounds * 1e3:.2f}" for seconds in r[key]) for key in ("cpu_rounds", "cpu_direct"))
            print(f"  {int(size):7d}    {host}    direct {direct}")
        worst = max(p(r["marginal"], .5) for r in marginal.values())
        low, high = p(marginal[first]["marginal"], .5), p(marginal[last]["marginal"], .5)
        flat = high <= 1.5 * low or max(low, high) <= 0.0005  # a ratio of two near-zero figures says nothing
        print(f"  per round p50, {last} vs {first} messages: {high * 1e3:.2f} vs {low * 1e3:.2f} ms"
              f"   target p50 <= 1 ms: {_verdict(worst <= 0.001)} (worst {worst * 1e3:.2f} ms);"
              f" flat (within 1.5x, or both <= 0.5 ms): {_verdict(flat)}")

    if "rounds" in results:
        rounds = results["rounds"]
        print(f"\nper-turn overhead, beside it: a one-round turn minus the same request sent directly,"
              f" {ROUND_SAMPLES} turns per history, ms:")
        print("  history  request     turn p50  direct p50  overhead p50  overhead p99   (typed create() p50)")
        for size, r in rounds.items():
            print(f"  {int(size):7d}  {r['request_bytes'][0] / 1024:5.0f} KiB {_ms(p(r['turn'], .5))}   {_ms(p(r['direct'], .5))}"
                  f"     {_ms(p(r['overhead'], .5))}     {_ms(p(r['overhead'], .99))}   ({_ms(p(r['typed'], .5))})")
        print("  (the round plus the turn's own work: the message in over the WebSocket, stored and acked, the answer"
              " stored before done, the events out; direct: the host's own transport, post + SSE; the SDK's typed create()"
              " only shows what its request transform would add to both)")
        ratio = p(rounds[last]["overhead"], .5) / p(rounds[first]["overhead"], .5)
        print(f"  overhead p50, {last} vs {first} messages: {ratio:.2f}x")

    if "relay" in results:
        relay = results["relay"]
        print(f"\nstream relay gap, {RELAY_TURNS} turns x {RELAY_TOKENS} tokens at {RELAY_DELAY * 1e3:g} ms, ms:")
        print("                            p50        p99        max")
        for name, key in (("direct stream     ", "direct"), ("WebSocket client  ", "host")):
            gaps = relay[key]
            print(f"  {name}  {_ms(p(gaps, .5))}  {_ms(p(gaps, .99))}  {_ms(max(gaps))}")
        added = p(relay["host"], .99) - p(relay["direct"], .99)
        print(f"  added p99 {added * 1e3:.2f} ms   target <= 2 ms: {_verdict(added <= 0.002)}")
        print(f"  host CPU per further token of one stream (a {RELAY_TOKENS}-token turn less a one-token turn):"
              f" {(relay['cpu'] - relay['short_cpu']) / (RELAY_TURNS * (RELAY_TOKENS - 1)) * 1e6:.0f} us;"
              f" a one-token turn: {relay['short_cpu'] / RELAY_TURNS * 1e3:.2f} ms")

        tokens = relay["tokens"]
        print(f"\nWebSocket bytes per token ({RELAY_TURNS} turns x {RELAY_TOKENS} tokens, the token text is {len(' tok')} B):")
        print(f"  token events, JSON before compression:     {relay['token_payload'] / tokens:6.0f} B/token")
        print(f"  every message of the turn, same:           {relay['payload'] / tokens:6.0f} B/token")
        print(f"  on the wire (permessage-deflate, framing): {relay['wire'] / tokens:6.0f} B/token")

    if "load" in results:
        load = results["load"]
        print(f"\n{MEMBERS * CONVERSATIONS_PER_MEMBER} concurrent streaming conversations ({MEMBERS} members x"
              f" {CONVERSATIONS_PER_MEMBER}), {WAVES} waves, {LOAD_TOKENS} tokens at {LOAD_DELAY * 1e3:g} ms each, ms:")
        print("                            p50        p99   wave wall time")
        walls = ", ".join(f"{w:.2f}" for w in load["direct_wall"])
        print(f"  direct TTFT         {_ms(p(load['direct'], .5))}  {_ms(p(load['direct'], .99))}   {walls} s")
        walls = ", ".join(f"{w:.2f}" for w in load["wall"])
        print(f"  WebSocket TTFT      {_ms(p(load['host'], .5))}  {_ms(p(load['host'], .99))}   {walls} s")
        for name, key in (("host process", "cpu"), ("clients' process", "helper_cpu"), ("model server's process", "model_cpu")):
            busy = ", ".join(f"{c:.2f} s ({c / w:.0%})" for c, w in zip(load[key], load["wall"]))
            print(f"  CPU of the {name} per wave (share of one core): {busy}")
        turns = CONVERSATIONS_PER_MEMBER * MEMBERS
        per_token = statistics.mean(load["cpu"]) / (turns * LOAD_TOKENS)
        print(f"  host CPU per streamed token, the turns' own work included: {per_token * 1e6:.0f} us"
              f"   target <= 60 us: {_verdict(per_token <= 60e-6)}")
        short = statistics.mean(load["short_cpu"])
        extra = (statistics.mean(load["cpu"]) - short) / (turns * (LOAD_TOKENS - 1))
        print(f"  of which the turns' own work (the same waves, one-token answers): {short / turns * 1e3:.2f} ms CPU per turn;"
              f" each further token: {extra * 1e6:.0f} us; WebSocket messages per token:"
              f" {load['messages'] / (turns * WAVES * LOAD_TOKENS):.2f} (the turns' other events included)")
        clean = not load["errors"] and not load["wrong"] and not load["stray"]
        ratio = p(load["host"], .99) / p(load["direct"], .99)
        print(f"  TTFT p99 ratio {ratio:.1f}x   target <= 2x: {_verdict(ratio <= 2)}; {load['turns']} turns,"
              f" {load['peak_streams']} model streams open at the peak, errors {len(load['errors'])},"
              f" wrong or incomplete answers {load['wrong']}, unrouted messages {len(load['stray'])}"
              f"   without errors: {_verdict(clean)}")
        for error in load["errors"][:5]:
            print(f"    {error[:200]}")

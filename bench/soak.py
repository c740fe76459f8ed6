"""Check H2, a chat soak: members chatting over WebSockets for a while, against the
scripted model streaming at a human pace, with the host a real ``skald serve`` process
so its memory and descriptors are its own.

``python -m bench soak`` runs for ``SKALD_SOAK_SECONDS`` (default 120; the check asks
for an hour: ``SKALD_SOAK_SECONDS=3600``). 50 members each keep two sockets open, as a
browser and a phone would (each socket gets every event of the member's turns), and take
turns: a message with an idempotency key, a 50-token reply at 50 tokens/s, a pause of
1-4 s; every 8 turns they start a new conversation, as people do (one conversation
growing for an hour would measure its own growth, not the host's). Beside them, a direct SDK stream of the same reply every second gives the model's
own time to first token. Reported:

- time to first token through the host, p50/p95, and the added p95 over the direct
  streams in the same run (target: < 100 ms);
- every message acknowledged is stored exactly once and answered in full (read back
  over HTTP at the end), and the second socket saw every turn end;
- errors members saw (none may be SQLite's "database is locked": retries are internal);
- the host's RSS by minute, and its growth over the run's last third (target: < 10 %/h
  after warm-up; the warm-up is the bounded caches filling, each unlocked member's page
  cache and kept histories, ~40 minutes at this load), descriptors (flat), and its open
  member database files against the members unlocked (never more).

The clients and the model server share this 2-core machine with the host; their CPU is
printed beside the host's.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.chat import MODEL, ModelProcess, MemberSocket, cpu_seconds, p, probe
from skald_host.testing import SkaldClient

SECONDS = float(os.environ.get("SKALD_SOAK_SECONDS", "120"))
MEMBERS = 50
TOKENS = 50
TOKEN_DELAY = 1 / 50
PAUSE_SECONDS = (1.0, 4.0)
TURNS_PER_CONVERSATION = 8
SAMPLE_SECONDS = 5.0
PASSWORD = "soak member password"
ADMIN_PASSWORD = "soak admin password"
#: The Argon2id floor: 100 logins at the shipped cost would take the setup's minute.
KDF_ENV = {"SKALD_KDF_MEMORY_KIB": "19456", "SKALD_KDF_TIME_COST": "2", "SKALD_KDF_PARALLELISM": "1"}
OWNER_FILE = re.compile(r"/database/[0-9a-f]{32}\.db$")
REPLY = " ".join(["tok"] * TOKENS)


@dataclass
class Member:
    client: SkaldClient
    conversation: str
    active: MemberSocket
    passive: Listener
    sent: list[str] = field(default_factory=list)
    conversations: dict[str, list[str]] = field(default_factory=dict)  # id -> the texts sent there
    ttft: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    incomplete: int = 0


class Listener:
    """The member's second device: counts the turns it saw end, reads everything."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.finished = 0
        self._pump = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            parts = message["events"] if message.get("type") == "events" else [message.get("event", {})]
            self.finished += sum(1 for e in parts if e.get("data", {}).get("type") == "turn_finished")

    async def close(self) -> None:
        await self.ws.close()
        self._pump.cancel()
        await asyncio.gather(self._pump, return_exceptions=True)


def _host_sample(pid: int) -> dict[str, int]:
    rss = next(int(line.split()[1]) * 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmRSS:"))
    fds = os.listdir(f"/proc/{pid}/fd")
    targets = set()
    for fd in fds:
        try:
            targets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return {"rss": rss, "fds": len(fds), "owner_files": sum(1 for t in targets if OWNER_FILE.search(t))}


async def _wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as http:
        for _ in range(600):
            if process.poll() is not None:
                raise SystemExit("the soak's server exited at start")
            try:
                if (await http.get(f"{url}/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise SystemExit("the soak's server did not become healthy")


async def _direct_ttft(model: ModelProcess, deadline: float, out: list[float]) -> None:
    """The model's own first token, one stream a second, through the openai SDK."""
    import openai

    sdk = openai.AsyncOpenAI(  # the host's transport (ModelClients.client)
        base_url=model.base_url, api_key="x", max_retries=0, timeout=60, http_client=openai.DefaultAioHttpClient(timeout=60)
    )
    while time.monotonic() < deadline:
        started = time.perf_counter()
        stream = await sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": probe(TOKENS, TOKEN_DELAY)}], stream=True)
        async with stream:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    out.append(time.perf_counter() - started)
                    break
        await model.ask("requests 1")  # the model server keeps what it was sent; keep it short
        await asyncio.sleep(1.0)


async def _chat(member: Member, deadline: float) -> None:
    """Members start spread over one pause, as people do; the first turn of each is
    warm-up (its runtime is made then) and not counted in the first-token figures."""
    await asyncio.sleep(random.uniform(*PAUSE_SECONDS))
    first = True
    while time.monotonic() < deadline:
        if len(member.conversations.get(member.conversation, ())) >= TURNS_PER_CONVERSATION:
            created = await member.client.post("/api/conversations", json={"title": "soak"})
            if created.status_code != 201:
                member.errors.append(f"a new conversation: {created.status_code} {created.text}")
                return
            member.conversation = created.json()["id"]
        text = probe(TOKENS, TOKEN_DELAY)
        member.sent.append(text)
        member.conversations.setdefault(member.conversation, []).append(text)
        try:
            turn = await member.active.turn(member.conversation, text, timeout=120)
        except TimeoutError:
            member.errors.append("the turn did not finish within 120 s")
            continue
        if turn.errors:
            member.errors += turn.errors
        elif turn.first_token is not None and not first:
            member.ttft.append(turn.ttft)
        first = False
        if turn.text != REPLY:
            member.incomplete += 1
        await asyncio.sleep(random.uniform(*PAUSE_SECONDS))


async def _sampler(pid: int, admin: SkaldClient, deadline: float, out: list[dict[str, Any]]) -> None:
    started = time.monotonic()
    while True:
        sample = _host_sample(pid)
        sample["unlocked"] = (await admin.get("/api/admin/status")).json()["members_unlocked"]
        sample["at"] = time.monotonic() - started
        out.append(sample)
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(min(SAMPLE_SECONDS, max(0.0, deadline - time.monotonic())))


async def _stored(member: Member) -> tuple[int, int, int]:
    """(messages sent and stored once, stored more than once or never, full answers)."""
    once = answers = 0
    for conversation, sent in member.conversations.items():
        messages = (await member.client.get(f"/api/conversations/{conversation}")).json()["messages"]
        said = [m["content"] for m in messages if m["role"] == "user"]
        once += sum(1 for text in sent if said.count(text) == 1)
        answers += sum(1 for m in messages if m["role"] == "assistant" and m["content"] == REPLY)
    return once, len(member.sent) - once, answers


async def main() -> None:
    model = await ModelProcess.start()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")} | KDF_ENV
        subprocess.run(
            [sys.executable, "-m", "skald_host", "setup", "--data-dir", str(data), "--username", "admin", "--password-stdin"],
            input=ADMIN_PASSWORD.encode(), env=env, check=True, capture_output=True,
        )
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "skald_host", "serve", "--data-dir", str(data), "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        members: list[Member] = []
        try:
            await _wait_healthy(url, server)
            setup_started = time.perf_counter()
            admin = SkaldClient(url)
            assert (await admin.login("admin", ADMIN_PASSWORD)).status_code == 200
            provider = await admin.post("/api/admin/models/providers", json={"name": "scripted", "base_url": model.base_url, "api_key": "x"})
            assert provider.status_code == 201, provider.text
            entry = await admin.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": MODEL})
            assert entry.status_code == 201, entry.text
            for index in range(MEMBERS):
                name = f"soak{index:02d}"
                created = await admin.post("/api/admin/members", json={"username": name, "password": PASSWORD})
                assert created.status_code == 201, created.text
                browser, phone = SkaldClient(url), SkaldClient(url)
                for client in (browser, phone):
                    assert (await client.login(name, PASSWORD)).status_code == 200
                conversation = await browser.post("/api/conversations", json={"title": "soak"})
                assert conversation.status_code == 201, conversation.text
                from websockets.asyncio.client import connect

                passive = Listener(await connect("ws" + url[4:] + "/api/ws", origin=url, additional_headers=phone.headers("GET"), proxy=None))
                await phone.aclose()
                active = await MemberSocket.connect(url, browser.headers("GET"))
                members.append(Member(browser, conversation.json()["id"], active, passive))
            setup_seconds = time.perf_counter() - setup_started

            cpu_before = {name: cpu_seconds(pid) for name, pid in (("host", server.pid), ("clients", os.getpid()), ("model", model.process.pid))}
            started = time.monotonic()
            deadline = started + SECONDS
            samples: list[dict[str, Any]] = []
            direct: list[float] = []
            await asyncio.gather(
                _sampler(server.pid, admin, deadline, samples),
                _direct_ttft(model, deadline, direct),
                *(_chat(m, deadline) for m in members),
            )
            wall = time.monotonic() - started
            cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in (("host", server.pid), ("clients", os.getpid()), ("model", model.process.pid))}
            await asyncio.sleep(0.5)  # the last turn_finished on the second sockets
            stored = [await _stored(m) for m in members]
            seen_by_second = sum(m.passive.finished for m in members)
            for m in members:
                await m.active.close()
                await m.passive.close()
                await m.client.aclose()
            await admin.aclose()
        finally:
            server.terminate()
            server.wait(timeout=20)
            await model.close()
    report(members, samples, direct, stored, seen_by_second, cpu, wall, setup_seconds)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report(
    members: list[Member], samples: list[dict[str, Any]], direct: list[float], stored: list[tuple[int, int, int]],
    seen_by_second: int, cpu: dict[str, float], wall: float, setup_seconds: float,
) -> None:
    turns = sum(len(m.sent) for m in members)
    ttft = [t for m in members for t in m.ttft]
    errors = [e for m in members for e in m.errors]
    busy = [e for e in errors if "locked" in e.lower() or "busy" in e.lower()]
    once, wrong, answers = (sum(s[i] for s in stored) for i in range(3))
    incomplete = sum(m.incomplete for m in members)
    warm = next((s for s in samples if s["at"] >= min(30.0, SECONDS / 4)), samples[0])
    end = samples[-1]
    growth = (end["rss"] - warm["rss"]) / warm["rss"]
    # The warm-up is the bounded caches filling (each unlocked member's page cache and
    # kept histories): ~40 minutes at this load. The last third of the run is after it.
    steady = next(s for s in samples if s["at"] >= end["at"] * 2 / 3)
    steady_hours = max(end["at"] - steady["at"], 1e-9) / 3600
    steady_rate = (end["rss"] - steady["rss"]) / steady["rss"] / steady_hours
    print(f"(setup {setup_seconds:.1f} s: {len(members)} members, 2 sockets each; soak {wall:.0f} s, SKALD_SOAK_SECONDS={SECONDS:g})")
    print(f"{turns} turns, {turns / wall:.1f} a second, {TOKENS} tokens each at {1 / TOKEN_DELAY:.0f} tokens/s")
    added = p(ttft, 0.95) - p(direct, 0.95) if ttft and direct else float("nan")
    print("time to first token, ms:          p50      p95")
    print(f"  through the host (WebSocket) {p(ttft, 0.5) * 1e3:8.1f} {p(ttft, 0.95) * 1e3:8.1f}   ({len(ttft)} turns)")
    print(f"  direct SDK stream            {p(direct, 0.5) * 1e3:8.1f} {p(direct, 0.95) * 1e3:8.1f}   ({len(direct)} streams)")
    print(f"  added p95 {added * 1e3:.1f} ms   target < 100 ms: {'met' if added < 0.1 else 'NOT met'}")
    lost_ok = wrong == 0 and answers == turns and incomplete == 0
    print(f"messages: {once} of {turns} stored exactly once, {wrong} not; {answers} full answers stored; "
          f"{incomplete} replies incomplete on the socket   0 lost or duplicated: {'met' if lost_ok else 'NOT met'}")
    print(f"second sockets saw {seen_by_second} of {turns} turns end")
    print(f"errors members saw: {len(errors)}, of them 'database is locked': {len(busy)}   "
          f"SQLITE_BUSY surfaced 0 times: {'met' if not busy else 'NOT met'}")
    for text in sorted(set(errors))[:5]:
        print(f"  {text[:160]}")
    print(f"host process:          after {warm['at']:.0f} s      end")
    print(f"  RSS (MiB)            {warm['rss'] / 2**20:12.1f} {end['rss'] / 2**20:8.1f}   "
          f"{growth * 100:+.1f}% in {(end['at'] - warm['at']) / 60:.1f} min (the caches' bounds filling)")
    print(f"  RSS over the last third, from {steady['rss'] / 2**20:.1f} MiB at minute {steady['at'] / 60:.1f}: "
          f"{steady_rate * 100:+.1f} %/h   target < 10 %/h after warm-up: {'met' if steady_rate < 0.10 else 'NOT met'}"
          f"{' (a short run has not warmed up: run an hour)' if SECONDS < 3600 else ''}")
    print(f"  open descriptors     {warm['fds']:12d} {end['fds']:8d}   flat (at most 5 more): {'met' if end['fds'] - warm['fds'] <= 5 else 'NOT met'}")
    minutes = [next(s for s in samples if s["at"] >= m * 60) for m in range(int(end["at"] // 60) + 1)]
    print("  by minute (RSS MiB / descriptors): " + ", ".join(f"{s['rss'] / 2**20:.0f}/{s['fds']}" for s in minutes + [end]))
    over = [s for s in samples if s["owner_files"] > s["unlocked"]]
    print(f"  member files open vs members unlocked, most at once: {max(s['owner_files'] for s in samples)} vs "
          f"{max(s['unlocked'] for s in samples)}; samples with more files than members: {len(over)}   "
          f"never more: {'met' if not over else 'NOT met'}")
    print("CPU per second of soak (share of one core): " + ", ".join(f"{name} {seconds / wall * 100:.0f}%" for name, seconds in cpu.items()))

"""Logins under load against a real server process with the shipped KDF defaults
(Argon2id m=64 MiB, t=3, p=4, 2 permits).

- throughput: logins/s, sequential vs 50 concurrent;
- event-loop responsiveness: /health latency p99 during a storm of 50 concurrent
  logins vs idle (target: under 5x);
- memory: the server's peak RSS vs its RSS before the storm (target: within
  baseline + 2 x 64 MiB + 10%).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

PASSWORD = "bench password not common"
STORM = 50


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


async def _latencies(client: httpx.AsyncClient, stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        response = await client.get("/health")
        out.append(time.perf_counter() - started)
        assert response.status_code == 200
        await asyncio.sleep(0.005)


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def _login(client: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    response = await client.post("/api/auth/login", json={"username": "admin", "password": PASSWORD, "session": "bearer"})
    assert response.status_code == 200, response.text
    return time.perf_counter() - started


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
        env.update(SKALD_AUTH_LOGIN_FAILURES_PER_ACCOUNT="1000", SKALD_LOG_FILE="")
        subprocess.run(
            [sys.executable, "-m", "skald_host", "setup", "--data-dir", tmp, "--username", "admin", "--password-stdin"],
            input=PASSWORD, text=True, env=env, check=True, capture_output=True,
        )
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "skald_host", "serve", "--data-dir", tmp, "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                for _ in range(200):
                    try:
                        if (await client.get("/health")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.05)
                await _login(client)  # warm up: the first derivation maps the memory once

                idle: list[float] = []
                stop = asyncio.Event()
                probe = asyncio.create_task(_latencies(client, stop, idle))
                await asyncio.sleep(2.0)
                stop.set()
                await probe

                sequential = [await _login(client) for _ in range(6)]
                baseline_rss = _status(server.pid, "VmRSS")

                storm: list[float] = []
                stop = asyncio.Event()
                probe = asyncio.create_task(_latencies(client, stop, storm))
                started = time.perf_counter()
                durations = await asyncio.gather(*(_login(client) for _ in range(STORM)))
                storm_seconds = time.perf_counter() - started
                stop.set()
                await probe
                peak_rss = _status(server.pid, "VmHWM")
        finally:
            server.terminate()
            server.wait(timeout=20)

    seq_rate = len(sequential) / sum(sequential)
    storm_rate = STORM / storm_seconds
    print("login throughput (Argon2id 64 MiB, t=3, p=4, 2 permits):")
    print(f"  sequential {seq_rate:.1f}/s, {STORM} concurrent {storm_rate:.1f}/s, ratio {storm_rate / seq_rate:.2f}x")
    print(f"  slowest of the {STORM} concurrent logins: {max(durations):.2f} s (all succeeded)")
    print("/health latency during the storm vs idle:")
    print(f"  idle p50 {_p(idle, .5) * 1e3:.2f} ms p99 {_p(idle, .99) * 1e3:.2f} ms ({len(idle)} requests)")
    print(f"  storm p50 {_p(storm, .5) * 1e3:.2f} ms p99 {_p(storm, .99) * 1e3:.2f} ms ({len(storm)} requests)")
    print(f"  p99 ratio {_p(storm, .99) / _p(idle, .99):.2f}x (target < 5x)")
    budget = baseline_rss + 2 * 64 * 2**20 * 1.1
    print("memory:")
    print(f"  RSS before storm {baseline_rss / 2**20:.0f} MiB, peak {peak_rss / 2**20:.0f} MiB, budget {budget / 2**20:.0f} MiB"
          f" ({'within' if peak_rss <= budget else 'OVER'} baseline + 2 x 64 MiB + 10%)")

"""SQLCipher vs plain SQLite: single-row transactions through the host's own
``Database`` (worker thread, WAL, synchronous=FULL), the same schema and rows."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from skald_host.core.storage import Database, Migration, MigrationSet

SCHEMA = MigrationSet("bench", (Migration(1, "rows", ("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",)),))
ROWS = 2000


async def _measure(path: Path, key: bytes | None) -> dict[str, float]:
    db = await Database.open(path, key=key, migrations=SCHEMA, create=True)
    body = "x" * 200
    samples = []
    for i in range(ROWS):
        started = time.perf_counter()
        await db.transaction(lambda c, i=i: c.execute("INSERT INTO t (id, body) VALUES (?, ?)", (i, body)))
        samples.append(time.perf_counter() - started)
    started = time.perf_counter()
    for i in range(ROWS):
        await db.run(lambda c, i=i: c.execute("SELECT body FROM t WHERE id = ?", (i,)).fetchone())
    reads = (time.perf_counter() - started) / ROWS
    await db.close()
    samples.sort()
    return {"p50": statistics.median(samples), "p99": samples[int(len(samples) * 0.99)], "read": reads}


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain = await _measure(Path(tmp) / "plain.db", None)
        cipher = await _measure(Path(tmp) / "cipher.db", os.urandom(32))
    print(f"single-row write transaction, {ROWS} rows (WAL, synchronous=FULL):")
    for stat in ("p50", "p99"):
        print(f"  {stat}: plain {plain[stat] * 1e3:.3f} ms, sqlcipher {cipher[stat] * 1e3:.3f} ms, ratio {cipher[stat] / plain[stat]:.2f}x")
    print(f"  point read: plain {plain['read'] * 1e6:.0f} us, sqlcipher {cipher['read'] * 1e6:.0f} us, ratio {cipher['read'] / plain['read']:.2f}x")

"""Issue 23's targets for the mobile connector: from a background result handed to the
channel to its outbox entry being committed (<= 10 ms) and to its Web Push leaving the
host (p99 <= 100 ms), with a device paired and subscribed to the local push-service
stand-in of the plugin's tests (``plugins/mobile_connector/tests/push_standin.py``).

Each figure has its baseline measured in the same run, so a busy machine slows both:
- outbox: the bare ``HostApi.append_member_event`` of the same payload (one commit in
  the member's SQLCipher file) — the connector's entry is that write plus its routing;
- push: one ``pywebpush`` send of the same content-free payload to the same stand-in
  from a thread, as the plugin does — the connector's push is that plus looking up the
  member's devices and their subscriptions.

The clock starts where the host's channel router hands the event over
(``ChannelRouter.deliver``, right after the runtime committed the note and published it)
and stops when ``deliver`` has returned (the outbox row is committed before it returns)
and when the stand-in received the push. ``SKALD_BENCH_MOBILE_EVENTS`` sets how many
(default 200), sent one after another.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "mobile_connector" / "tests"))

from push_standin import PushStandIn  # noqa: E402

EVENTS = int(os.environ.get("SKALD_BENCH_MOBILE_EVENTS", "200"))
PLUGIN = "mobile-connector"
BASE = f"/api/plugin/{PLUGIN}"
TARGET_OUTBOX_MS = 10.0
TARGET_PUSH_P99_MS = 100.0


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def _line(name: str, samples: list[float], baseline: list[float]) -> str:
    p50, p99, b50, b99 = _p(samples, 0.5), _p(samples, 0.99), _p(baseline, 0.5), _p(baseline, 0.99)
    return f"{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms; baseline p50 {b50:.2f} ms, p99 {b99:.2f} ms; ratio p50 {p50 / b50:.2f}x, p99 {p99 / b99:.2f}x"


async def main() -> None:
    from skald_hookspecs import ChannelEvent
    from skald_host.testing.host import start_host, test_settings
    from skald_mobile_connector import running

    with tempfile.TemporaryDirectory(prefix="skald-bench-mobile-") as tmp:
        async with PushStandIn() as push:
            host = await start_host(test_settings(Path(tmp) / "data"), use_entry_points=True)
            try:
                admin = await host.admin()
                config = {"config": {"allow_http_push": True}}
                assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/config", json=config)).status_code == 200
                assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})).status_code == 200
                alice = await host.member("alice")
                code = (await alice.post(f"{BASE}/pairing")).json()["code"]
                phone = host.client()
                paired = await phone.post(f"{BASE}/pair", json={"code": code, "name": "bench"})
                phone.bearer = paired.json()["token"]
                subscription = push.subscription("bench")
                assert (await phone.put(f"{BASE}/push", json=subscription.as_json())).status_code == 200
                member_id = alice.member["id"]
                service = running.service
                api = service.host
                router = host.core.channels.router
                print(f"{EVENTS} background notifications, one after another; a paired phone subscribed to Web Push")

                outbox, pushes, outbox_base, push_base = [], [], [], []
                for i in range(EVENTS):
                    # Baselines first, interleaved with the measured runs.
                    started = time.perf_counter()
                    await api.append_member_event(member_id, "bench", {"kind": "notification", "text": f"baseline {i}"})
                    outbox_base.append((time.perf_counter() - started) * 1000)
                    before = len(push.to("bench"))
                    started = time.monotonic()
                    await asyncio.to_thread(service._send_push, subscription.as_json())
                    await push.wait("bench", before + 1)
                    push_base.append((push.to("bench")[-1].at - started) * 1000)

                    before = len(push.to("bench"))
                    started_wall = time.monotonic()
                    started = time.perf_counter()
                    delivered = await router.deliver(PLUGIN, member_id, ChannelEvent("notification", None, text=f"result {i}"))
                    outbox.append((time.perf_counter() - started) * 1000)
                    assert delivered
                    await push.wait("bench", before + 1)
                    pushes.append((push.to("bench")[-1].at - started_wall) * 1000)

                kept, after = 0, 0
                while page := await api.member_events(member_id, after=after, limit=1000):
                    kept += sum(1 for e in page if e["kind"] == "outbox" and str(e["data"].get("text", "")).startswith("result"))
                    after = page[-1]["id"]
                print(f"outbox entries kept: {kept} of {EVENTS}; pushes received: {len(push.to('bench')) - EVENTS} of {EVENTS}")
                print(_line("to the outbox entry", outbox, outbox_base) + f"  (target <= {TARGET_OUTBOX_MS:.0f} ms)")
                print(_line("to the push leaving the host", pushes, push_base) + f"  (target p99 <= {TARGET_PUSH_P99_MS:.0f} ms)")
            finally:
                await host.stop()

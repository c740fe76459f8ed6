"""Speech (issue 24): time to first audio and real-time factor of ``/api/tts`` for a
three-sentence reply, on a real host through the streamed route, the cache off (each
round is synthesised). Kokoro for English, espeak-ng for German. Targets: first audio
at most 1.5 s on 2 cores, real-time factor at most 1.0 (synthesis time / audio length).
The first round of each engine loads the model and is reported apart, not counted."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from skald_host.testing import SkaldHarness

ROUNDS = 3
TARGET_FIRST_AUDIO = 1.5
TARGET_RTF = 1.0
REPLIES = {
    "en": "Here is what I found about your question. The library opens at nine in the morning on weekdays. On Saturdays it closes early, at two in the afternoon.",
    "de": "Das habe ich zu deiner Frage gefunden. Die Bibliothek öffnet werktags um neun Uhr. Samstags schließt sie schon um vierzehn Uhr.",
}


async def _round(client, text: str) -> tuple[float, float, float]:
    """Seconds to the first audio sample, seconds in all, seconds of audio."""
    started = time.perf_counter()
    first = None
    size = 0
    async with client.http.stream("POST", "/api/tts", headers=client.headers("POST"), json={"text": text}) as response:
        response.raise_for_status()
        rate = None
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if rate is None and size >= 28:
                rate = int.from_bytes((chunk if len(chunk) >= 28 else b"")[24:28] or b"\0\0\0\0", "little") or None
            if first is None and size > 44:
                first = time.perf_counter() - started
    total = time.perf_counter() - started
    seconds = (size - 44) / 2 / (rate or 24000)
    return first or total, total, seconds


def _cpu_bound() -> None:
    """What an idle machine would do: the CPU time Kokoro spends per sentence on one
    thread (``thread_time``: time other processes take from us is not counted), as
    first audio (the first sentence) and real-time factor (CPU s per audio s)."""
    from skald_tts_kokoro.engine import KokoroEngine
    from skald_tts_kokoro.model import resolve

    engine = KokoroEngine()
    engine.configure(resolve(None, None, None), None, 1)
    kokoro = engine._build()
    voice = engine.voices()[0].id
    kokoro.create("Warm up.", voice=voice, lang="en-us")
    cpu, audio, first = 0.0, 0.0, None
    for sentence in REPLIES["en"].split(". "):
        started = time.thread_time()
        samples, rate = kokoro.create(sentence, voice=voice, lang="en-us")
        spent = time.thread_time() - started
        first = spent if first is None else first
        cpu, audio = cpu + spent, audio + len(samples) / rate
    ok_first = "ok" if first <= TARGET_FIRST_AUDIO else "OVER target"
    ok_rtf = "ok" if cpu / audio <= TARGET_RTF else "OVER target"
    print(
        f"en kokoro, CPU time on one thread (an idle core): first sentence {first:5.2f} s (target <= {TARGET_FIRST_AUDIO} s: {ok_first})   "
        f"RTF {cpu / audio:4.2f} (target <= {TARGET_RTF}: {ok_rtf})"
    )


async def _loop_lag(seconds: float, period: float = 0.005) -> list[float]:
    """How late a 5 ms timer fires on the host's event loop: the delay a streamed chat
    token would see before the relay could send it."""
    late = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        due = loop.time() + period
        await asyncio.sleep(period)
        late.append(loop.time() - due)
    return late


def _p99(samples: list[float]) -> float:
    return sorted(samples)[max(0, int(len(samples) * 0.99) - 1)] * 1000


async def _lag_while_speaking(client) -> None:
    """The event loop's p99 lateness alone, then while Kokoro synthesises a reply
    (target: the chat's relay gap p99 grows by at most 2 ms; the host and this probe
    share one loop, as the relay and the TTS route do)."""
    quiet = await _loop_lag(3.0)
    speaking = asyncio.create_task(_round(client, REPLIES["en"]))
    busy = await _loop_lag(3.0)
    await speaking
    added = _p99(busy) - _p99(quiet)
    verdict = "ok" if added <= 2.0 else "OVER target"
    p50 = lambda samples: statistics.median(samples) * 1000  # noqa: E731
    print(
        f"event loop lateness p99: quiet {_p99(quiet):5.2f} ms, during synthesis {_p99(busy):5.2f} ms, added {added:+5.2f} ms "
        f"(target <= 2 ms: {verdict}); p50 {p50(quiet):4.2f} -> {p50(busy):4.2f} ms"
    )


async def main() -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {os.cpu_count()} core(s), load average {load:.1f}; {ROUNDS} rounds after a warm-up round; cache off")
    try:
        _cpu_bound()
    except Exception as exc:
        print(f"kokoro CPU measurement skipped: {exc}")
    with tempfile.TemporaryDirectory() as tmp:
        harness = SkaldHarness(Path(tmp))
        try:
            host = await harness.start(use_entry_points=True, settings=harness.settings(tts={"cache_mib": 0}))
            admin = await host.admin()
            kokoro = await admin.put("/api/admin/plugins/tts_kokoro/enabled", json={"enabled": True})
            if kokoro.status_code != 200 or not kokoro.json().get("healthy"):
                print("kokoro: not available:", kokoro.json().get("error") if kokoro.status_code == 200 else kokoro.text)
            for language, text in REPLIES.items():
                client = await host.member(f"bench-{language}", locale=language)
                if language == "de" and shutil.which("espeak-ng") is None:
                    print("de: espeak-ng is not installed; skipped")
                    continue
                warm_first, warm_total, _ = await _round(client, text)
                rounds = [await _round(client, text) for _ in range(ROUNDS)]
                voice = (await client.post("/api/tts", json={"text": "Ok."})).headers.get("x-skald-voice")
                first = statistics.median(r[0] for r in rounds)
                rtf = statistics.median(r[1] / r[2] for r in rounds)
                audio = statistics.median(r[2] for r in rounds)
                ok_first = "ok" if first <= TARGET_FIRST_AUDIO else "OVER target"
                ok_rtf = "ok" if rtf <= TARGET_RTF else "OVER target"
                print(
                    f"{language} {voice:<16} first audio p50 {first:5.2f} s (target <= {TARGET_FIRST_AUDIO} s: {ok_first})   "
                    f"RTF p50 {rtf:4.2f} (target <= {TARGET_RTF}: {ok_rtf})   audio {audio:4.1f} s   "
                    f"warm-up round: first audio {warm_first:4.2f} s, all {warm_total:4.2f} s"
                )
                if language == "en" and voice and voice.startswith("kokoro:"):
                    await _lag_while_speaking(client)
        finally:
            await harness.close()

"""The TTS manager behind ``/api/tts`` and ``HostApi.synthesize_speech``: a real host on
127.0.0.1, the real espeak-ng engine for German, and a scripted engine whose sentences
the test releases one by one (to prove the stream starts before the text is done)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import io
import math
import struct
import time
import wave
from typing import Any

import numpy as np
import pytest
import soundfile
from hypothesis import given, settings
from hypothesis import strategies as st

from skald_hookspecs import ChannelRequestError, TtsUnavailable, TtsVoice, hookimpl
from skald_hookspecs.types import PluginInfo
from skald_host.testing.host import MEMBER_PASSWORD

SCRIPTED = "tts-scripted"


def tone(seconds: float, rate: int = 16000, freq: float = 220.0) -> bytes:
    samples = (np.sin(2 * math.pi * freq * np.arange(int(seconds * rate)) / rate) * 8000).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return out.getvalue()


def pcm_of_stream(data: bytes) -> tuple[int, np.ndarray]:
    """A streamed WAV (sizes 'unknown'): the rate from the header, the samples after it."""
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt " and data[36:40] == b"data", data[:44]
    rate = struct.unpack("<I", data[24:28])[0]
    return rate, np.frombuffer(data[44:], dtype="<i2")


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) if len(samples) else 0.0


class ScriptedEngine:
    """Speaks English only; each sentence is a 0.5 s tone, released by the test when
    ``gated`` (one event per call, in order)."""

    version = "1"
    quality = 5

    def __init__(self, gated: bool = False) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.gated = gated
        self.gates: list[asyncio.Event] = []
        self.started = asyncio.Queue()

    def voices(self) -> list[TtsVoice]:
        return [TtsVoice("tone", ("en",), "Tone"), TtsVoice("low", ("en",), "Low tone")]

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        self.calls.append((text, voice, locale))
        if self.gated:
            gate = asyncio.Event()
            self.gates.append(gate)
            self.started.put_nowait(text)
            await gate.wait()
        return tone(0.5, freq=110.0 if voice == "low" else 220.0)


class ScriptedPlugin:
    def __init__(self, engine: ScriptedEngine) -> None:
        self.engine = engine

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=SCRIPTED, title="Scripted speech", spec=">=1.2,<2")

    @hookimpl
    def register_tts_engines(self, register: Any) -> None:
        register("scripted", self.engine)


async def start(skald: Any, engine: ScriptedEngine, **tts: Any) -> Any:
    settings = skald.settings(tts=tts) if tts else None
    return await skald.start(plugins=[ScriptedPlugin(engine)], enable=[SCRIPTED], settings=settings)


THREE = "First sentence here. Second one follows! And a third?"


async def test_the_stream_starts_before_the_text_is_synthesised(skald):
    engine = ScriptedEngine(gated=True)
    host = await start(skald, engine)
    member = await host.member("ada")

    async def release_the_first() -> None:
        assert await asyncio.wait_for(engine.started.get(), 10) == "First sentence here."
        engine.gates[0].set()

    releasing = asyncio.create_task(release_the_first())
    async with member.http.stream("POST", "/api/tts", headers=member.headers("POST"), json={"text": THREE}) as response:
        await releasing
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("audio/wav")
        assert response.headers["x-skald-voice"] == "scripted:tone"
        chunks = response.aiter_raw()
        received = b""
        while len(received) < 44 + 16000:  # the header and the first 0.5 s
            received += await asyncio.wait_for(chunks.__anext__(), 10)
        # The second sentence has not been released, yet the first is already here.
        assert await asyncio.wait_for(engine.started.get(), 10) == "Second one follows!"
        assert len(engine.gates) == 2 and not engine.gates[1].is_set()
        engine.gates[1].set()
        assert await asyncio.wait_for(engine.started.get(), 10) == "And a third?"
        engine.gates[2].set()
        async for chunk in chunks:
            received += chunk
    rate, samples = pcm_of_stream(received)
    assert rate == 16000
    assert 1.5 <= len(samples) / rate <= 2.5  # three 0.5 s tones and two pauses
    assert rms(samples) > 1000


async def test_a_repeated_text_comes_from_the_members_own_cache(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine)
    member = await host.member("ada")
    first = await member.post("/api/tts", json={"text": THREE})
    assert first.status_code == 200 and len(engine.calls) == 3
    again = await member.post("/api/tts", json={"text": THREE})
    assert again.status_code == 200 and again.content == first.content
    assert len(engine.calls) == 3  # nothing synthesised twice
    member_id = member.member["id"] if member.member else (await host.core.users.find("ada")).id
    db = host.core.users.owner_db(member_id)
    assert await host.core.tts.cache_entries(db) == 3
    # Another voice is another key.
    other = await member.post("/api/tts", json={"text": THREE, "voice": "scripted:low"})
    assert other.status_code == 200 and len(engine.calls) == 6
    # Privacy: what was read aloud is in no file in clear (the member's file is encrypted).
    for path in host.settings.data_dir.rglob("*"):
        if path.is_file():
            assert b"Second one follows" not in path.read_bytes(), path


async def test_the_cache_stays_within_its_budget(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine, cache_mib=0)
    member = await host.member("ada")
    assert (await member.post("/api/tts", json={"text": "One. Two."})).status_code == 200
    member_id = (await host.core.users.find("ada")).id
    assert await host.core.tts.cache_entries(host.core.users.owner_db(member_id)) == 0


async def test_the_members_voice_choice_is_used(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine)
    member = await host.member("ada")
    assert (await member.put("/api/me/settings", json={"tts.voice": "scripted:low"})).status_code == 200
    listing = (await member.get("/api/tts/voices")).json()
    assert listing["voice"] == "scripted:low"
    names = [v["id"] for e in listing["engines"] for v in e["voices"]]
    assert "scripted:low" in names and "espeak-ng:de" in names
    response = await member.post("/api/tts", json={"text": "Hello."})
    assert response.headers["x-skald-voice"] == "scripted:low" and engine.calls[-1][1] == "low"


async def test_bad_requests_are_refused_with_a_reason(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine, max_chars=50)
    member = await host.member("ada")
    long = await member.post("/api/tts", json={"text": "word " * 20})
    assert long.status_code == 400 and "at most 50" in long.json()["error"]
    assert (await member.post("/api/tts", json={"text": ""})).status_code == 400
    assert (await member.post("/api/tts", json={"text": "```\ncode only\n```"})).status_code == 400
    assert (await member.post("/api/tts", json={"text": "Hi.", "format": "mp3"})).status_code == 400
    nobody = await member.post("/api/tts", json={"text": "Hi.", "locale": "tlh"})
    assert nobody.status_code == 422 and "No installed voice speaks tlh" in nobody.json()["error"]
    assert engine.calls == []
    anonymous = host.client()
    assert (await anonymous.post("/api/tts", json={"text": "Hi."})).status_code in (401, 403)


async def test_an_unknown_voice_is_refused_naming_it(skald):
    """A voice asked for by name that is not there was quietly replaced by the default:
    the client could not tell its choice was wrong."""
    engine = ScriptedEngine()
    host = await start(skald, engine)
    member = await host.member("ada", locale="de")
    for voice in ("scripted:xx", "nope:xx", "scripted", "espeak-ng:xx"):
        for fmt in ("wav", "ogg"):
            answer = await member.post("/api/tts", json={"text": "Hello.", "voice": voice, "format": fmt, "locale": "en"})
            assert answer.status_code == 422, (voice, fmt, answer.text)
            body = answer.json()
            assert (body["code"], body["values"], body["field"]) == ("tts_unknown_voice", {"voice": voice}, "voice"), body
            assert repr(voice) in body["error"]
    assert engine.calls == []
    strings = host.core.strings
    assert "Stimme scripted:xx gibt es hier nicht" in strings.translate("core.error.tts_unknown_voice", "de", voice="scripted:xx")
    assert "no voice scripted:xx" in strings.translate("core.error.tts_unknown_voice", "en", voice="scripted:xx")
    # A voice that is there is used.
    fine = await member.post("/api/tts", json={"text": "Hello.", "voice": "scripted:low", "locale": "en"})
    assert fine.status_code == 200 and fine.headers["x-skald-voice"] == "scripted:low"


async def test_no_voice_is_said_in_the_members_language(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine)
    member = await host.member("ada", locale="de")
    answer = await member.post("/api/tts", json={"text": "Hallo.", "locale": "tlh"})
    assert answer.status_code == 422 and "Keine installierte Stimme spricht tlh" in answer.json()["error"]


@pytest.mark.skipif(__import__("shutil").which("espeak-ng") is None, reason="espeak-ng is not installed")
async def test_a_disabled_engine_is_not_used(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine)
    member = await host.member("ada")
    await host.core.set_plugin_enabled(SCRIPTED, False)
    listing = (await member.get("/api/tts/voices")).json()
    scripted = next(e for e in listing["engines"] if e["engine"] == "scripted")
    assert scripted["ready"] is False and scripted["health_code"] == "tts_engine_unavailable"  # why: the admin's
    listing = (await (await host.admin()).get("/api/tts/voices")).json()
    scripted = next(e for e in listing["engines"] if e["engine"] == "scripted")
    assert scripted["ready"] is False and "not enabled" in scripted["health"]
    response = await member.post("/api/tts", json={"text": "Hello there."})
    assert response.headers["x-skald-voice"].startswith("espeak-ng:")  # the fallback speaks English too
    assert engine.calls == []


async def test_one_member_cannot_run_more_than_their_share(skald):
    engine = ScriptedEngine(gated=True)
    host = await start(skald, engine, per_member=1)
    member = await host.member("ada")
    first = asyncio.create_task(member.post("/api/tts", json={"text": "Held here."}))
    await asyncio.wait_for(engine.started.get(), 10)
    second = await member.post("/api/tts", json={"text": "Another one."})
    assert second.status_code == 429 and second.headers["retry-after"]
    engine.gates[0].set()
    assert (await first).status_code == 200


async def test_syntheses_wait_for_a_free_slot(skald):
    engine = ScriptedEngine(gated=True)
    host = await start(skald, engine, max_concurrent=1)
    ada, bob = await host.member("ada"), await host.member("bob")
    first = asyncio.create_task(ada.post("/api/tts", json={"text": "Ada speaks."}))
    await asyncio.wait_for(engine.started.get(), 10)
    second = asyncio.create_task(bob.post("/api/tts", json={"text": "Bob speaks."}))
    await asyncio.sleep(0.3)
    assert len(engine.calls) == 1  # bob waits for the one slot
    engine.gates[0].set()
    await asyncio.wait_for(engine.started.get(), 10)
    engine.gates[1].set()
    assert (await first).status_code == 200 and (await second).status_code == 200


# -- the real espeak-ng engine --------------------------------------------------------------

needs_espeak = pytest.mark.skipif(
    __import__("shutil").which("espeak-ng") is None, reason="espeak-ng is not installed (apt-get install espeak-ng)"
)


@needs_espeak
async def test_german_is_spoken_by_espeak_as_wav_and_ogg(skald):
    host = await skald.start()
    member = await host.member("greta", locale="de")
    text = "Guten Morgen. Das Wetter ist heute schön."
    response = await member.post("/api/tts", json={"text": text})
    assert response.status_code == 200, response.text
    assert response.headers["x-skald-voice"] == "espeak-ng:de"
    rate, samples = pcm_of_stream(response.content)
    seconds = len(samples) / rate
    assert 1.0 <= seconds <= 8.0, seconds  # ~40 characters at espeak's ~15 characters a second
    assert rms(samples) > 300
    ogg = await member.post("/api/tts", json={"text": text, "format": "ogg"})
    assert ogg.status_code == 200 and ogg.headers["content-type"] == "audio/ogg"
    assert ogg.content[:4] == b"OggS" and b"OpusHead" in ogg.content[:200]
    decoded, ogg_rate = soundfile.read(io.BytesIO(ogg.content), dtype="int16")
    assert abs(len(decoded) / ogg_rate - seconds) < 0.5
    assert rms(decoded) > 300


@needs_espeak
async def test_plugins_synthesize_through_the_host_api(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine)
    await host.member("greta", locale="de")
    greta = await host.core.users.find("greta")
    api = host.core.host_api(SCRIPTED)
    ogg = await api.synthesize_speech(greta.id, "Hallo zusammen.")
    decoded, rate = soundfile.read(io.BytesIO(ogg), dtype="int16")
    assert 0.3 <= len(decoded) / rate <= 5 and rms(decoded) > 300
    assert engine.calls == []  # German: espeak-ng, not the English-only engine
    wav = await api.synthesize_speech(greta.id, "Hallo zusammen.", format="wav")
    assert wav[:4] == b"RIFF"
    with pytest.raises(ChannelRequestError):
        await api.synthesize_speech("no-such-member", "Hallo.")
    with pytest.raises(ChannelRequestError, match="^Dieser Text hat 10000 Zeichen; vorgelesen werden höchstens 4000.$"):
        await api.synthesize_speech(greta.id, "x" * 10_000)  # said in greta's language: a channel shows it as it is


async def test_espeak_missing_is_a_clear_health_message():
    from skald_host.builtins.tts_espeak import MISSING, EspeakEngine

    engine = EspeakEngine(binary="espeak-ng-not-installed")
    engine.probe()
    assert engine.health() == MISSING and "apt-get install espeak-ng" in MISSING
    with pytest.raises(TtsUnavailable, match="not installed"):
        await engine.synthesize("Hallo.", "de", "de")


@needs_espeak
async def test_espeak_runs_below_the_hosts_priority(tmp_path):
    """On 2 cores a synthesis must not take the CPU from the event loop (the chat's
    token stream): each espeak-ng process runs ``NICE`` steps below the host. The real
    espeak-ng, behind a wrapper that first writes down its own nice value."""
    import os
    import shutil

    from skald_host.builtins.tts_espeak import NICE, EspeakEngine

    seen = tmp_path / "nice"
    wrapper = tmp_path / "espeak-ng"
    wrapper.write_text(f'#!/bin/sh\nsleep 0.2\nnice >> "{seen}"\nexec {shutil.which("espeak-ng")} "$@"\n')
    wrapper.chmod(0o755)
    engine = EspeakEngine(binary=str(wrapper))
    await asyncio.to_thread(engine.probe)
    assert engine.health() is None
    seen.write_text("")  # the probe's own runs (--version, --voices) are not syntheses
    wav = await engine.synthesize("Hallo Welt.", "de", "de")
    assert wav[:4] == b"RIFF"
    host_nice = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen.read_text().split() == [str(min(19, host_nice + NICE))]
    assert os.getpriority(os.PRIO_PROCESS, 0) == host_nice  # the host itself keeps its own
    await engine.close()


@needs_espeak
async def test_espeak_is_started_by_a_helper_process_that_comes_back_if_it_dies():
    """The host forks nothing per sentence: one long-lived helper starts each espeak-ng.
    Killed, the sentence in flight fails saying so, and the next starts a new helper."""
    import os
    import signal

    from skald_host.builtins.tts_espeak import EspeakEngine

    engine = EspeakEngine()
    await asyncio.to_thread(engine.probe)
    try:
        first = await engine.synthesize("Hello there.", "en-us", "en")
        helper = engine._helper
        assert first[:4] == b"RIFF" and helper is not None
        second = await engine.synthesize("Hello again.", "en-us", "en")
        assert second[:4] == b"RIFF" and engine._helper is helper  # one helper for many sentences
        os.kill(helper.pid, signal.SIGKILL)
        await helper.wait()
        third = await engine.synthesize("And once more.", "en-us", "en")
        assert third[:4] == b"RIFF" and engine._helper.pid != helper.pid
        helper = engine._helper
        speaking = asyncio.create_task(engine.synthesize("A sentence in flight. " * 40, "en-us", "en"))
        await asyncio.sleep(0.01)
        os.kill(helper.pid, signal.SIGKILL)
        with pytest.raises(TtsUnavailable, match="the espeak-ng helper process stopped"):
            await speaking
    finally:
        await engine.close()


# -- the pieces an engine gets, the instance defaults, the registration check ----------------


def test_markdown_is_made_readable_and_split_into_sentences():
    from skald_host.core.tts.audio import sentences, speakable

    text = "# Title\n\n**Bold** and [a link](https://x.org/y).\n\n```python\nprint('code')\n```\n- item one\n- item two\nSee https://example.org now!"
    spoken = speakable(text)
    assert "print" not in spoken and "https" not in spoken and "*" not in spoken and "#" not in spoken
    assert sentences(spoken) == ["Title", "Bold and a link.", "item one", "item two", "See now!"]
    long = "word, " * 200
    pieces = sentences(long, limit=100)
    assert len(pieces) > 5 and all(len(p) <= 100 for p in pieces)
    assert sentences("... --- !!!") == []



def _squeezed(text: str) -> str:
    return "".join(text.split())


#: Words, and marks that end or cut sentences, in the scripts read aloud: ASCII, German,
#: Chinese and Japanese (no spaces between their words), abbreviations and numbers.
_TOKENS = st.one_of(
    st.text(alphabet="abcdefghijXYZäöüß0123456789", min_size=1, max_size=40),
    st.text(alphabet="我们今天去公园散步天气很好日本語です", min_size=1, max_size=400),
    st.sampled_from([".", "!", "?", "…", ",", ";", ":", "。", "！", "？", "，", "；", "：", "、", "」", "「", "(", ")", '"',
                     "Dr.", "ca.", "z.B.", "3.", "Mai", "Jan.", "etc.", "e.g.", "F.", "x" * 700]),
)
_SEPARATORS = st.sampled_from(["", " ", " ", "  ", "\n", "\t"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(_TOKENS, _SEPARATORS), max_size=60), st.integers(min_value=5, max_value=300))
def test_no_text_is_left_out_of_the_pieces(parts, limit):
    """Whatever the text, its pieces joined are the text (up to the spaces where it was
    cut), and none is longer than the limit: a 'word' longer than the limit (Chinese,
    a hash) was cut off at it and the rest never spoken."""
    from skald_host.core.tts.audio import sentences

    text = "".join(token + separator for token, separator in parts)
    pieces = sentences(text, limit=limit)
    assert all(len(piece) <= limit for piece in pieces)
    spoken = _squeezed("".join(pieces))
    # Only pieces with nothing to say ('...', '」') are left out: every letter and digit is there, in order.
    assert [ch for ch in spoken if ch.isalnum()] == [ch for ch in _squeezed(text) if ch.isalnum()]
    if all(any(ch.isalnum() for ch in token) for token, _ in parts):
        assert spoken == _squeezed(text)


def test_a_long_run_without_spaces_is_cut_and_kept_whole():
    from skald_host.core.tts.audio import sentences

    digest = hashlib.sha512(b"x").hexdigest() * 8  # 1024 characters, no space, no mark
    pieces = sentences(digest[:1000])
    assert "".join(pieces) == digest[:1000] and [len(p) for p in pieces] == [300, 300, 300, 100]
    assert _squeezed("".join(sentences(f"See {digest[:1000]} now."))) == f"See{digest[:1000]}now."


def test_chinese_is_split_at_its_own_sentence_and_clause_marks():
    """Chinese puts no space after 。！？ nor after ，；：、: the whole text was one
    'sentence', cut at 300 characters with the rest dropped."""
    from skald_host.core.tts.audio import sentences

    probe = "我们今天去公园散步。天气很好。" * 40
    pieces = sentences(probe)
    assert pieces[:3] == ["我们今天去公园散步。", "天气很好。", "我们今天去公园散步。"] and "".join(pieces) == probe
    clauses = "我们今天去公园散步，天气很好；" * 20
    pieces = sentences(clauses, limit=100)
    assert "".join(pieces) == clauses and all(len(p) <= 100 and p[-1] in "，；" for p in pieces[:-1])
    assert sentences("「你好。」他说。我们走吧！") == ["「你好。」", "他说。", "我们走吧！"]


@pytest.mark.parametrize(("text", "expected"), [
    ("Das kostet ca. 5 € bzw. 10 Dr. Müller z.B. am 3. Mai.", ["Das kostet ca. 5 € bzw. 10 Dr. Müller z.B. am 3. Mai."]),
    ("Mr. Smith came on Jan. 5. He left.", ["Mr. Smith came on Jan. 5.", "He left."]),
    ("Das ist z. B. gut. Am 1. Januar kam er. Der 2. und 3. sind fort.", ["Das ist z. B. gut.", "Am 1. Januar kam er.", "Der 2. und 3. sind fort."]),
    ("We sell apples, pears etc. Then we go. It is 5 p.m. Done.", ["We sell apples, pears etc.", "Then we go.", "It is 5 p.m.", "Done."]),
    ("John F. Kennedy spoke e.g. of the moon. I have 3. Then 4.", ["John F. Kennedy spoke e.g. of the moon.", "I have 3.", "Then 4."]),
    ("Wait... what? Yes! Fine.", ["Wait...", "what?", "Yes!", "Fine."]),
])
def test_abbreviations_initials_and_german_ordinals_do_not_end_a_sentence(text, expected):
    from skald_host.core.tts.audio import sentences

    assert sentences(text) == expected


def test_the_first_sentence_starts_with_a_short_unit_at_a_natural_boundary():
    """The first audio waits only for a few words: the first sentence is cut at a clause
    near ``FIRST_UNIT`` characters, else at a word boundary; its rest is cut once more
    only when it would take longer to make than the first unit takes to play; every
    later sentence stays whole."""
    from skald_host.core.tts.audio import FIRST_UNIT, pause_after, quick_start

    assert FIRST_UNIT == 24
    bench = ["Here is what I found about your question.", "The library opens at nine in the morning on weekdays."]
    assert quick_start(bench) == ["Here is what I found", "about your question.", bench[1]]
    # A clause near the budget wins over a word cut.
    assert quick_start(["Well, after all that, the second plan is the better one by far.", "Next."]) == [
        "Well, after all that,", "the second plan is the better one by far.", "Next."
    ]
    long = "After looking through everything you sent me this morning, I think the second plan is better."
    assert quick_start([long, "Short one."]) == [
        "After looking through",  # not "After looking through everything" (past the budget)
        "everything you sent me this morning,",  # the long rest cut again, at its clause
        "I think the second plan is better.",
        "Short one.",
    ]
    # A word of one or two letters is not left at the end of the first unit.
    assert quick_start(["We looked at it in a hurry and it is fine now."]) == ["We looked at it in a hurry", "and it is fine now."]
    assert quick_start(["Short first, then more.", long]) == ["Short first, then more.", long]
    assert quick_start(["x" * 200]) == ["x" * 200]  # no boundary: left whole
    assert quick_start([]) == []
    assert quick_start(bench, rtf=0.02) == bench  # an engine far faster than real time: sentences whole
    # The pause after a unit: a sentence's, a clause's, a breath inside a cut sentence.
    assert pause_after("about your question.") == 0.25 and pause_after("this morning,") == 0.12
    assert pause_after("Here is what I found") == 0.04 and pause_after('He said "no."') == 0.25


def test_with_the_engines_speed_each_unit_is_planned_to_be_ready_before_it_is_needed():
    """With the engine's measured real-time factor, a unit that would not be made before
    the audio ahead of it has played is cut (a clause, else a word boundary); units that
    fit stay whole; no text is lost or reordered."""
    from skald_host.core.tts.audio import CHARS_PER_SECOND, pause_after, quick_start

    reply = [
        "Here is what I found about your question.",
        "The library opens at nine in the morning on weekdays.",
        "On Saturdays it closes early, at two in the afternoon.",
    ]
    assert quick_start(reply, rtf=0.66) == [
        "Here is what I found", "about your question.", "The library opens at nine in the morning", "on weekdays.", reply[2],
    ]
    assert quick_start(reply, rtf=0.85)[4:] == ["On Saturdays it closes early,", "at two in the afternoon."]  # at its clause
    for rtf in (0.4, 0.66, 0.85, 1.0):  # slower than real time a gap comes sooner or later
        units = quick_start(reply, rtf=rtf)
        assert " ".join(units) == " ".join(reply)
        lead = len(units[0]) / CHARS_PER_SECOND + pause_after(units[0])
        for unit in units[1:]:
            making = rtf * len(unit) / CHARS_PER_SECOND
            assert making <= lead or len(unit.split()) <= 3, (rtf, unit, making, lead)
            lead += len(unit) / CHARS_PER_SECOND + pause_after(unit) - making
    assert quick_start(reply, rtf=0.3) == quick_start(reply)[:2] + reply[1:]  # fast enough: later sentences whole


async def test_the_instance_default_for_a_language_wins_over_the_better_engine(skald):
    engine = ScriptedEngine()
    host = await start(skald, engine, defaults=["en=espeak-ng:en-us"])
    member = await host.member("ada")
    if host.core.tts.health("espeak-ng") is not None:
        pytest.skip("espeak-ng is not installed")
    response = await member.post("/api/tts", json={"text": "Hello there."})
    assert response.headers["x-skald-voice"] == "espeak-ng:en-us" and engine.calls == []
    # The member's own choice wins over the default.
    await member.put("/api/me/settings", json={"tts.voice": "scripted:tone"})
    response = await member.post("/api/tts", json={"text": "Hello there."})
    assert response.headers["x-skald-voice"] == "scripted:tone"


def test_malformed_speech_settings_are_refused_with_the_setting_named(skald):
    from skald_host.settings import SettingsError

    with pytest.raises(SettingsError, match="tts.defaults: 'german' should look like de=espeak-ng:de"):
        skald.settings(tts={"defaults": ["german"]})
    with pytest.raises(SettingsError, match=r"^tts\.max_concurrent: must be a whole number from 1 to 256, got 0"):
        skald.settings(tts={"max_concurrent": 0})


def test_an_engine_is_checked_at_registration():
    from skald_host.core.plugins.manager import PluginError
    from skald_host.core.tts import validate_engine

    assert validate_engine("p", ("scripted", ScriptedEngine()))[0] == "scripted"
    with pytest.raises(PluginError, match="lacks voices"):
        validate_engine("p", ("bare", object()))
    with pytest.raises(PluginError, match="without ':'"):
        validate_engine("p", ("a:b", ScriptedEngine()))


@needs_espeak
async def test_an_engine_follows_its_plugins_grant(skald):
    """Access denies by default: without the grant for the engine's plugin, a member
    neither sees its voices nor is spoken to by it, even when asking for it by name."""
    engine = ScriptedEngine()
    host = await start(skald, engine)
    member = await host.member("ada")
    admin = await host.admin()
    ada = await host.core.users.find("ada")
    assert (await admin.put(f"/api/admin/members/{ada.id}/plugins", json={"plugins": []})).status_code == 200
    listing = (await member.get("/api/tts/voices")).json()
    assert "scripted" not in [e["engine"] for e in listing["engines"]]
    response = await member.post("/api/tts", json={"text": "Hello.", "voice": "scripted:tone"})
    assert response.status_code == 422 and response.json()["code"] == "tts_unknown_voice"  # not theirs: not there for them
    response = await member.post("/api/tts", json={"text": "Hello."})
    assert response.status_code == 200 and response.headers["x-skald-voice"].startswith("espeak-ng:")
    assert engine.calls == []


async def test_the_mobile_app_gets_a_voice_note_with_its_bearer_token(skald):
    """The app's voice replies use the same route: a bearer session, ``format: ogg``."""
    engine = ScriptedEngine()
    host = await start(skald, engine)
    await host.create_member("ada")
    app = host.client()
    assert (await app.login("ada", MEMBER_PASSWORD, bearer=True)).status_code == 200
    response = await app.post("/api/tts", json={"text": "Your reply, spoken.", "format": "ogg"})
    assert response.status_code == 200 and response.headers["content-type"] == "audio/ogg"
    samples, rate = soundfile.read(io.BytesIO(response.content), dtype="int16")
    assert 0.3 <= len(samples) / rate <= 1.5 and rms(samples) > 1000


# -- why an engine cannot speak: the admin's words, never a member's ---------------------------

#: What an engine says when its model is broken: the admin's path and the library's text.
ADMIN_ONLY = (
    "the Kokoro model could not be loaded: InvalidProtobuf: [ONNXRuntimeError] : 7 : INVALID_PROTOBUF : "
    "Load model from /srv/admin-only/garbage.onnx failed:Protobuf parsing failed."
)


class BrokenEngine(ScriptedEngine):
    """Its model did not load (``health()`` says so), or it says nothing of it until it
    is asked to speak (``failing``)."""

    def __init__(self, failing: bool = False) -> None:
        super().__init__()
        self.failing = failing

    def health(self) -> str | None:
        return None if self.failing else ADMIN_ONLY

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        self.calls.append((text, voice, locale))
        raise TtsUnavailable(ADMIN_ONLY)


async def test_why_an_engine_is_not_ready_is_said_to_the_admin_only(skald):
    """A member read the admin's model path and onnxruntime's error on the Voice page;
    they read that the engine is not available, in their language."""
    host = await start(skald, BrokenEngine())
    for name, locale in (("ada", "en"), ("greta", "de")):
        member = await host.member(name, locale=locale)
        response = await member.get("/api/tts/voices")
        assert "/srv/admin-only" not in response.text and "ONNXRuntimeError" not in response.text
        scripted = next(e for e in response.json()["engines"] if e["engine"] == "scripted")
        assert scripted["ready"] is False and scripted["voices"] == []
        assert scripted["health"] == "the voice engine 'scripted' is not available right now"
        assert (scripted["health_code"], scripted["health_values"]) == ("tts_engine_unavailable", {"engine": "scripted"})
        strings = (await member.get(f"/api/i18n?locale={locale}")).json()["strings"]
        said = strings["core.error.tts_engine_unavailable"].format(**scripted["health_values"])
        assert said == {"en": "The voice engine scripted is not available right now.", "de": "Die Sprachausgabe scripted ist gerade nicht verfügbar."}[locale]
    admin = await host.admin()
    scripted = next(e for e in (await admin.get("/api/tts/voices")).json()["engines"] if e["engine"] == "scripted")
    assert scripted["ready"] is False and scripted["health"] == ADMIN_ONLY and "health_code" not in scripted


async def test_why_an_engine_failed_to_speak_is_said_to_the_admin_only(skald, monkeypatch):
    """An engine that says it is ready but cannot speak, and no other that speaks the
    language: the 503 of /api/tts and what a plugin (Telegram, the mobile app) gets from
    HostApi.synthesize_speech name neither the admin's files nor the library's error;
    the admin's own 503 does."""
    engine = BrokenEngine(failing=True)
    host = await start(skald, engine)
    health = host.core.tts.health
    monkeypatch.setattr(host.core.tts, "health", lambda name: "not here" if name == "espeak-ng" else health(name))
    member = await host.member("ada")
    for fmt in ("wav", "ogg"):
        response = await member.post("/api/tts", json={"text": "Hello there.", "voice": "scripted:tone", "format": fmt})
        assert response.status_code == 503 and response.json()["code"] == "tts_engine_failed"
        assert "/srv/admin-only" not in response.text and "ONNXRuntimeError" not in response.text, response.text
    ada = await host.core.users.find("ada")
    with pytest.raises(TtsUnavailable) as refused:
        await host.core.host_api(SCRIPTED).synthesize_speech(ada.id, "Hello there.")
    assert "/srv/admin-only" not in str(refused.value) and "scripted" in str(refused.value)
    admin = await host.admin()
    response = await admin.post("/api/tts", json={"text": "Hello there.", "voice": "scripted:tone"})
    assert response.status_code == 503 and response.json() == {"error": ADMIN_ONLY, "code": "tts_engine_failed"}
    assert len(engine.calls) == 4


@needs_espeak
async def test_an_engine_that_fails_its_first_sentence_is_passed_over_for_the_next_voice(skald):
    """Kokoro whose model passes the start's look but cannot load (preload off): the
    first read-aloud was a 503 ``tts_engine_failed`` while every later one, the engine
    then unhealthy, spoke with espeak-ng. The first falls back as well: streamed, as a
    file, a voice asked for by name, and for a plugin (HostApi.synthesize_speech)."""
    engine = BrokenEngine(failing=True)
    host = await start(skald, engine)
    member = await host.member("ada")
    for body in ({"text": "Hello there."}, {"text": "Hello again.", "voice": "scripted:tone"}):
        response = await member.post("/api/tts", json=body)
        assert response.status_code == 200, response.text
        assert response.headers["x-skald-voice"].startswith("espeak-ng:")
        rate, samples = pcm_of_stream(response.content)
        assert rms(samples) > 100
    response = await member.post("/api/tts", json={"text": "Hello there, as a file.", "format": "ogg"})
    assert response.status_code == 200 and response.headers["content-type"] == "audio/ogg"
    ada = await host.core.users.find("ada")
    note = await host.core.host_api(SCRIPTED).synthesize_speech(ada.id, "Hello from a plugin.")
    assert note[:4] == b"OggS"
    assert len(engine.calls) == 4  # each tried once, then the next voice spoke


# -- a long reply, heard to its end ---------------------------------------------------------


async def release_the_first(engine: ScriptedEngine) -> None:
    assert await asyncio.wait_for(engine.started.get(), 10) == "First sentence here."
    engine.gates[0].set()


async def test_a_stream_longer_than_quarts_response_timeout_is_not_cut(skald):
    """Quart ends a response body after RESPONSE_TIMEOUT (60 s) unless the response says
    otherwise: a reply read aloud for more than a minute stopped mid-sentence, and
    nothing said so. Here the timeout is a fraction of a second and the second sentence
    is released only after it has passed: all three sentences still arrive."""
    engine = ScriptedEngine(gated=True)
    host = await start(skald, engine)
    host.app.config["RESPONSE_TIMEOUT"] = 0.2
    member = await host.member("ada")
    releasing = asyncio.create_task(release_the_first(engine))
    async with member.http.stream("POST", "/api/tts", headers=member.headers("POST"), json={"text": THREE}) as response:
        await releasing
        assert response.status_code == 200
        assert await asyncio.wait_for(engine.started.get(), 10) == "Second one follows!"
        await asyncio.sleep(0.6)  # past the response timeout (a slower machine waits longer still)
        engine.gates[1].set()
        assert await asyncio.wait_for(engine.started.get(), 10) == "And a third?"
        engine.gates[2].set()
        received = b"".join([chunk async for chunk in response.aiter_raw()])
    rate, samples = pcm_of_stream(received)
    assert 1.5 <= len(samples) / rate <= 2.5  # all three sentences and their pauses


async def test_a_stream_the_listener_leaves_is_logged_without_its_text(skald, caplog):
    """The body caught ``Exception`` only: a cancelled stream (the listener left, the
    server ended it) ended without a word in the log. It is logged, never the text."""
    engine = ScriptedEngine(gated=True)
    host = await start(skald, engine)
    member = await host.member("ada")
    caplog.set_level(logging.INFO, logger="skald_host.web.routes.tts")
    releasing = asyncio.create_task(release_the_first(engine))
    async with member.http.stream("POST", "/api/tts", headers=member.headers("POST"), json={"text": THREE}) as response:
        await releasing
        assert response.status_code == 200
        assert await asyncio.wait_for(engine.started.get(), 10) == "Second one follows!"
    # The client closed the connection while the second sentence was being made.
    for _ in range(200):
        if any("speech stream ended early" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    said = [r.getMessage() for r in caplog.records if "speech stream ended early" in r.getMessage()]
    assert said and "CancelledError" in said[0], [r.getMessage() for r in caplog.records]
    assert not any("sentence" in message.lower() and "follows" in message for message in said)
    for gate in engine.gates:
        gate.set()


# -- what is counted, and in which language it is read ------------------------------------


async def test_the_length_limit_counts_only_what_is_read_aloud(skald):
    """``tts.max_chars`` was checked on the text as sent: a short answer with a script
    in a code block and a long link was refused though only its sentences are spoken."""
    engine = ScriptedEngine()
    host = await start(skald, engine, max_chars=60)
    member = await host.member("ada")
    code = "```python\n" + "print('this line is never read aloud')\n" * 10 + "```"
    text = f"Here is the script you asked for.\n\n{code}\n\nSee https://example.org/{'a' * 200} for more."
    assert len(text) > 60 * 5
    response = await member.post("/api/tts", json={"text": text})
    assert response.status_code == 200, response.text
    assert [call[0] for call in engine.calls] == ["Here is the script you asked for.", "See for more."]
    # What is read aloud still counts, and the refusal names its length.
    long = await member.post("/api/tts", json={"text": "A sentence that is spoken. " * 3 + code})
    assert long.status_code == 400 and long.json()["values"] == {"length": 80, "limit": 60}, long.json()


@needs_espeak
async def test_a_reply_is_read_by_a_voice_of_its_own_language(skald):
    """README "Speech": the member's voice when it speaks the reply's language, else the
    instance default for that language. The voice was picked by the member's interface
    language: an English answer to a member who reads German was spelt out by the German
    voice. Without a ``locale`` the host tells the text's language (py3langid); a text
    too short to tell keeps the member's own."""
    engine = ScriptedEngine()
    host = await start(skald, engine)
    greta = await host.member("greta", locale="de")
    english = "The weather is lovely today. I saved the file you asked for."
    response = await greta.post("/api/tts", json={"text": english})
    assert response.status_code == 200 and response.headers["x-skald-voice"] == "scripted:tone", response.headers
    german = "Das Wetter ist heute schön. Ich habe die Datei gespeichert."
    response = await greta.post("/api/tts", json={"text": german})
    assert response.headers["x-skald-voice"] == "espeak-ng:de"
    ada = await host.member("ada")
    response = await ada.post("/api/tts", json={"text": german})
    assert response.headers["x-skald-voice"] == "espeak-ng:de"
    response = await ada.post("/api/tts", json={"text": "OK."})  # too short to tell: her own language
    assert response.headers["x-skald-voice"] == "scripted:tone"
    response = await greta.post("/api/tts", json={"text": english, "locale": "de"})  # the client knows better
    assert response.headers["x-skald-voice"] == "espeak-ng:de"
    # A plugin's voice note (Telegram, the mobile app) too.
    engine.calls.clear()
    greta_id = (await host.core.users.find("greta")).id
    await host.core.host_api(SCRIPTED).synthesize_speech(greta_id, "Your reply is ready. It was a long day for everyone.")
    assert [call[0] for call in engine.calls] == ["Your reply is ready.", "It was a long day for everyone."]


# -- an engine that hangs, returns no audio or holds the loop -------------------------------


class HangingEngine(ScriptedEngine):
    """Never finishes a sentence (a model stuck on a lock, a dead server it waits on)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = 0

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        self.calls.append((text, voice, locale))
        self.started.put_nowait(text)
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return tone(0.5)


async def engine_failures(host: Any) -> list[dict[str, Any]]:
    admin = await host.admin()
    return [f for f in (await admin.get(f"/api/admin/plugins/{SCRIPTED}")).json()["failures"] if f["where"] == "TTS engine scripted"]


@needs_espeak
async def test_a_hanging_engine_is_cut_off_at_its_time_limit_and_frees_its_slot(skald):
    """An engine that awaited for a minute held one of ``tts.max_concurrent`` slots as
    long: another member's speech with another voice waited 30 s and was refused as
    busy, and nothing told the admin. Its call now ends at ``tts.engine_timeout_seconds``
    as a failure: its request falls back to another voice, the slot is free for the
    other member, and the overrun is on the engine's plugin page."""
    engine = HangingEngine()
    host = await start(skald, engine, engine_timeout_seconds=1, max_concurrent=1)
    ada, bob = await host.member("ada"), await host.member("bob")
    hanging = asyncio.create_task(ada.post("/api/tts", json={"text": "Hello there."}))
    await asyncio.wait_for(engine.started.get(), 10)  # ada's sentence holds the one slot
    other = await asyncio.wait_for(bob.post("/api/tts", json={"text": "Hello, Bob.", "voice": "espeak-ng:en-us"}), 25)
    assert other.status_code == 200, other.text
    response = await asyncio.wait_for(hanging, 25)
    assert response.status_code == 200 and response.headers["x-skald-voice"].startswith("espeak-ng:"), response.text
    assert engine.cancelled == 1
    failures = await engine_failures(host)
    assert len(failures) == 1 and "did not finish a sentence within 1 s" in failures[0]["traceback"], failures
    assert "Hello" not in failures[0]["traceback"]  # the member's words are nowhere


class GarbageEngine(ScriptedEngine):
    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        self.calls.append((text, voice, locale))
        return b"this is not a wav file"


@needs_espeak
async def test_an_engine_returning_bad_audio_falls_back_and_is_on_its_plugins_page(skald, caplog):
    """Invalid audio was read outside the engine's failure handling: a 500 for the
    member, no fallback as for an engine that raises, a log traceback naming neither
    engine nor plugin, and nothing on the plugin's page."""
    engine = GarbageEngine()
    host = await start(skald, engine)
    member = await host.member("ada")
    caplog.set_level(logging.WARNING)
    response = await member.post("/api/tts", json={"text": "Hello there."})
    assert response.status_code == 200, response.text
    assert response.headers["x-skald-voice"].startswith("espeak-ng:") and len(engine.calls) == 1
    ada = await host.core.users.find("ada")
    assert (await host.core.host_api(SCRIPTED).synthesize_speech(ada.id, "Hello again."))[:4] == b"OggS"
    failures = await engine_failures(host)
    assert len(failures) == 2 and all("not a WAV file" in f["traceback"] for f in failures), failures
    logged = [r.getMessage() for r in caplog.records if "TTS engine scripted" in r.getMessage()]
    assert logged and all(SCRIPTED in message for message in logged), logged


class BlockingEngine(ScriptedEngine):
    """Makes its audio on the event loop: the whole server waits for it."""

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        self.calls.append((text, voice, locale))
        time.sleep(1.5)
        return tone(0.5)


async def test_an_engine_that_holds_the_event_loop_is_listed_among_its_plugins_problems(skald, caplog):
    """plugins.md promises that plugin code holding the loop past half a second is
    logged and listed on the plugin's page; a speech engine doing so was not watched."""
    engine = BlockingEngine()
    host = await start(skald, engine)
    member = await host.member("ada")
    caplog.set_level(logging.WARNING)
    response = await member.post("/api/tts", json={"text": "Hello there."})
    assert response.status_code == 200 and response.headers["x-skald-voice"] == "scripted:tone"
    failures = await engine_failures(host)
    assert len(failures) == 1 and failures[0]["held_seconds"] >= 1.5, failures
    assert any("TTS engine scripted held the event loop" in r.getMessage() for r in caplog.records)

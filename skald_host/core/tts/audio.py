"""Audio plumbing of the TTS manager: WAV in (what engines return), a streamed WAV
or an OGG/Opus file out, and the text made fit to be read aloud.

Pure functions; the manager runs the costly ones (``to_ogg``) in a thread.
"""

from __future__ import annotations

import io
import re
import struct
import wave
from dataclasses import dataclass

#: What a streamed WAV announces as its length: unknown, so players read to the end.
_UNKNOWN = 0xFFFFFFFF
#: The sample rates libsndfile's Opus encoder accepts; others are resampled to 24 kHz.
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


class AudioError(ValueError):
    """An engine returned something that is not a 16-bit mono WAV."""


@dataclass(frozen=True)
class Pcm:
    """16-bit little-endian mono samples and their rate."""

    rate: int
    frames: bytes

    @property
    def seconds(self) -> float:
        return len(self.frames) / 2 / self.rate if self.rate else 0.0


def read_wav(data: bytes) -> Pcm:
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            if w.getsampwidth() != 2 or w.getnchannels() != 1:
                raise AudioError(f"expected 16-bit mono WAV, got {w.getsampwidth() * 8}-bit, {w.getnchannels()} channel(s)")
            return Pcm(w.getframerate(), w.readframes(w.getnframes()))
    except (wave.Error, EOFError, struct.error) as exc:
        raise AudioError(f"not a WAV file: {exc}") from None


def wav_bytes(pcm: Pcm) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(pcm.rate)
        w.writeframes(pcm.frames)
    return out.getvalue()


def stream_header(rate: int) -> bytes:
    """The 44-byte header of a WAV whose length is not known yet: the samples follow as
    they are made. Players (and the web client's reader) take the sizes as 'to the end'."""
    return b"RIFF" + struct.pack("<I", _UNKNOWN) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16
    ) + b"data" + struct.pack("<I", _UNKNOWN)


def silence(rate: int, seconds: float) -> bytes:
    return b"\x00\x00" * int(rate * seconds)


def resample(pcm: Pcm, rate: int) -> Pcm:
    """Linear interpolation: enough for speech going into a lossy codec."""
    import numpy as np

    if pcm.rate == rate or not pcm.frames:
        return Pcm(rate, pcm.frames)
    samples = np.frombuffer(pcm.frames, dtype="<i2").astype(np.float32)
    count = int(round(len(samples) * rate / pcm.rate))
    positions = np.linspace(0, len(samples) - 1, count)
    out = np.interp(positions, np.arange(len(samples)), samples)
    return Pcm(rate, np.clip(out, -32768, 32767).astype("<i2").tobytes())


def to_ogg(pcm: Pcm) -> bytes:
    """OGG/Opus through libsndfile (``soundfile``, libsndfile >= 1.0.29 bundled in its
    wheel): a voice note Telegram plays inline, with no ffmpeg on the machine."""
    import numpy as np
    import soundfile

    if pcm.rate not in OPUS_RATES:
        pcm = resample(pcm, 24000)
    out = io.BytesIO()
    samples = np.frombuffer(pcm.frames, dtype="<i2")
    soundfile.write(out, samples, pcm.rate, format="OGG", subtype="OPUS")
    return out.getvalue()


_CODE_BLOCK = re.compile(r"```.*?(```|$)", re.S)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_MARKS = re.compile(r"[*_`#>|~]+")
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\n{1,}")
_CLAUSE = re.compile(r"(?<=[,;:])\s+")


def speakable(text: str) -> str:
    """Markdown made readable aloud: code blocks and URLs dropped, link texts kept,
    emphasis and heading marks removed."""
    text = _CODE_BLOCK.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = re.sub(r"^\s*[-+]\s+", "", text, flags=re.M)
    text = _MARKS.sub("", text)
    return "\n".join(" ".join(line.split()) for line in text.splitlines()).strip()


def sentences(text: str, limit: int = 300) -> list[str]:
    """The pieces an engine gets, one at a time: sentences, a long one cut at clauses,
    then at words, so no piece exceeds ``limit`` characters."""
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        sentence = sentence.strip()
        if not sentence:
            continue
        if len(sentence) <= limit:
            out.append(sentence)
            continue
        piece = ""
        for part in _CLAUSE.split(sentence):
            for word in part.split(" "):
                if piece and len(piece) + 1 + len(word) > limit:
                    out.append(piece)
                    piece = ""
                piece = f"{piece} {word}".strip()[:limit]
        if piece:
            out.append(piece)
    return [s for s in out if any(ch.isalnum() for ch in s)]


#: The first unit's size in characters: about 1.5 s of speech, so the first audio waits
#: only for a short synthesis while the rest is made during its playback.
FIRST_UNIT = 24
#: After each unit, silence by how the unit ends: a sentence, a clause, a word cut.
PAUSES = {"sentence": 0.25, "clause": 0.12, "word": 0.04}
_SENTENCE_MARK = re.compile(r"[.!?…。！？][\"')\]»”’]*$")
_CLAUSE_MARK = re.compile(r"[,;:，；：][\"')\]»”’]*$")


def pause_after(piece: str) -> float:
    """The pause after a unit: full after a sentence, short at a clause, a breath where
    a sentence was cut between words (it goes on in the next unit)."""
    if _SENTENCE_MARK.search(piece):
        return PAUSES["sentence"]
    if _CLAUSE_MARK.search(piece):
        return PAUSES["clause"]
    return PAUSES["word"]


def _cut(text: str, budget: int) -> tuple[str, str] | None:
    """``text`` cut in two near ``budget`` characters at a natural boundary: the first
    clause mark (, ; :) that ends between half and one and a half budgets, else the last
    word boundary within the budget that does not leave a short word (three letters or
    fewer: mostly articles, prepositions, conjunctions) dangling at the end of the head, else the first one past it. The tail keeps at least
    two words. None when there is no such cut."""
    for match in _CLAUSE.finditer(text):
        head, tail = text[: match.start()].strip(), text[match.end():].strip()
        if budget // 2 <= len(head) <= budget * 3 // 2 and len(tail.split()) >= 2:
            return head, tail
    spaces = [m.start() for m in re.finditer(r" ", text) if len(text[m.end():].split()) >= 2 and m.start() >= budget // 2]
    within = [i for i in spaces if i <= budget and len(text[:i].rsplit(" ", 1)[-1]) > 3]
    beyond = [i for i in spaces if i > budget]
    at = within[-1] if within else (beyond[0] if beyond else None)
    if at is None:
        return None
    return text[:at].strip(), text[at + 1:].strip()


#: How fast speech goes, to tell a unit's audio length from its text (Kokoro's English
#: at speed 1: 15-19 characters a second; the bench's reply: 16.6). Taken high, so the
#: audio ahead of a unit is not overestimated.
CHARS_PER_SECOND = 17.0
#: A unit is planned to be ready with this share of the audio ahead of it still to play
#: (the real-time factor moves from unit to unit on a busy machine).
HEADROOM = 0.85


def quick_start(pieces: list[str], budget: int = FIRST_UNIT, rtf: float | None = None) -> list[str]:
    """The units an engine gets so the member hears something soon and then no gap.

    The first sentence is cut into a first unit of about ``budget`` characters (a clause
    or a few words) and its rest. With ``rtf`` (the engine's seconds of synthesis per
    second of speech, as measured), every unit after the first is then checked against
    the audio that will be buffered when its synthesis starts: a unit that would not be
    ready before that audio has played is cut once more (a clause, else a word
    boundary) near what can be made in time. A sentence that fits stays whole, for its
    prosody. An engine many times faster than real time (``rtf`` below 0.3) gets the
    sentences as they are. Without ``rtf``: the rest of the first sentence is cut again
    only when it is much longer than the first unit, later sentences stay whole."""
    if rtf is not None and rtf < 0.3:
        return pieces
    if not pieces or len(pieces[0]) <= budget * 3 // 2:
        head, rest = (pieces[0], pieces[1:]) if pieces else (None, [])
    else:
        first = _cut(pieces[0], budget)
        head, rest = (first[0], [first[1], *pieces[1:]]) if first else (pieces[0], pieces[1:])
    if head is None:
        return pieces
    if rtf is None:
        if len(rest) > len(pieces) - 1:  # the first sentence was cut: its rest is rest[0]
            room = max(budget, len(head) * 3 // 2)
            second = _cut(rest[0], room) if len(rest[0]) > room * 3 // 2 else None
            rest = [*second, *rest[1:]] if second else rest
        return [head, *rest]
    out = [head]
    lead = len(head) / CHARS_PER_SECOND + pause_after(head)  # audio ahead when playback starts
    queue = list(rest)
    while queue:
        unit = queue.pop(0)
        making = rtf * len(unit) / CHARS_PER_SECOND
        if making > lead * HEADROOM:
            affordable = int(lead * HEADROOM * CHARS_PER_SECOND / rtf)
            cut = _cut(unit, affordable) if affordable >= budget // 2 else None
            if cut is not None and len(cut[0]) < len(unit):
                unit = cut[0]
                queue.insert(0, cut[1])
                making = rtf * len(unit) / CHARS_PER_SECOND
        out.append(unit)
        lead += len(unit) / CHARS_PER_SECOND + pause_after(unit) - making
    return out

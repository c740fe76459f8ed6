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


def quick_start(pieces: list[str], limit: int = 80) -> list[str]:
    """A long first sentence split at its first clause that leaves a usable piece: the
    member hears something after a few words instead of after the whole sentence."""
    if not pieces or len(pieces[0]) <= limit:
        return pieces
    first = pieces[0]
    for match in _CLAUSE.finditer(first):
        head, tail = first[: match.start()].strip(), first[match.end():].strip()
        if 20 <= len(head) <= limit and tail:
            return [head, tail, *pieces[1:]]
    return pieces

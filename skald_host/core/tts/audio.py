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
#: Where a sentence may end: a run of end marks (and the quotes or brackets that close
#: it) before a space; Chinese and Japanese end marks without one (those scripts put no
#: space between sentences); a line break.
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]»”’]*(?=\s)|[。！？]+[」』）】〕\"')\]»”’]*|\n+")
#: A clause boundary: after , ; : and a space (kept for ``_cut``, whose units are words).
_CLAUSE = re.compile(r"(?<=[,;:])\s+")
#: Where an over-long sentence is cut first: after a clause mark, the full-width ones
#: (Chinese and Japanese, no space after them) included. The group keeps what was
#: between the pieces, so they are joined back as they were.
_CLAUSE_BREAK = re.compile(r"((?<=[,;:])\s+|(?<=[，；：、])\s*)")
#: Then between words.
_WORD_BREAK = re.compile(r"(\s+)")
_OPENERS = "\"'(„“‚‘«»[¿¡"

#: Abbreviations after which a period never ends a sentence: titles before a name and
#: words that introduce what follows ('ca. 5', 'z.B. am', 'e.g. the'). Lower case,
#: without their final period. Each language's own list, used together: the text read
#: aloud is not always in the member's language (a quoted English mail, a German name).
_NEVER_LAST = {
    "en": {"mr", "mrs", "ms", "messrs", "dr", "prof", "rev", "hon", "gen", "col", "capt", "lt", "sgt", "gov", "sen",
           "rep", "st", "mt", "e.g", "i.e", "cf", "vs", "approx", "viz", "ca"},
    "de": {"hr", "hrn", "fr", "dr", "prof", "dipl", "ing", "med", "ca", "bzw", "z.b", "d.h", "u.u", "o.ä", "s.o", "s.u",
           "vgl", "evtl", "ggf", "inkl", "exkl", "zzgl", "sog", "bspw", "bzgl", "gem", "lt", "nr", "mio", "mrd", "tsd",
           "fa", "geb", "gest", "hl", "st", "u.a.m", "u.v.m"},
}
#: Abbreviations that also end sentences ('… and so on, etc. Then …'): a period after
#: one ends the sentence only when a capital letter follows ('Jan. 5' goes on).
_MAYBE_LAST = {
    "en": {"etc", "inc", "ltd", "co", "corp", "jr", "sr", "no", "fig", "vol", "pp", "ed", "min", "max",
           "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"},
    "de": {"usw", "etc", "abs", "art", "str", "tel", "jh", "min", "max", "std", "bd", "hrsg", "aufl",
           "jan", "feb", "mär", "apr", "jun", "jul", "aug", "sep", "sept", "okt", "nov", "dez"},
}
#: Month names: '3. Mai' and '1. January' are dates, not a sentence ending in a number.
_MONTHS = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "januar", "jänner", "februar", "märz", "mai", "juni", "juli", "oktober", "dezember",
    "jan", "feb", "mar", "mär", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "okt", "nov", "dec", "dez",
}
_NEVER = set().union(*_NEVER_LAST.values())
_MAYBE = set().union(*_MAYBE_LAST.values()) - _NEVER
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # z.B, e.g, U.S, u.a (their last period is the mark)


def _period_ends_sentence(before: str, after: str) -> bool:
    """Whether a single period between the word ``before`` it and the word ``after`` it
    ends a sentence. It does not after a title or an abbreviation that leads into what
    follows ('Dr. Müller', 'ca. 5', 'z.B. am'), an initial ('John F. Kennedy'), or a
    number followed by a small letter or a month (the German ordinal: 'am 3. Mai');
    after an abbreviation that may also close a sentence ('etc.', 'Jan.') only when a
    capital letter follows."""
    word = before.lstrip(_OPENERS).lower()
    following = after.lstrip(_OPENERS)
    if not word or not following:
        return True
    capital = following[:1].isupper()
    if word in _NEVER or (len(word) == 1 and word.isalpha()):
        return False
    if word in _MAYBE or _DOTTED.fullmatch(word):
        return capital or not following[:1].isalnum()
    if word.isdigit() and (following[:1].islower() or following.rstrip(".,;:!?").lower() in _MONTHS):
        return False
    return True


_WORD_AT = re.compile(r"\s*(\S*)")


def _word_before(text: str, end: int) -> str:
    """The word that ends at ``end``, read back to the space before it only: a slice of
    all the text before each period would make the splitter quadratic."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end]


def _word_after(text: str, start: int) -> str:
    return _WORD_AT.match(text, start).group(1)


def _split_sentences(text: str) -> list[str]:
    out: list[str] = []
    start = 0
    for mark in _SENTENCE_END.finditer(text):
        if mark.group() == "." and not _period_ends_sentence(_word_before(text, mark.start()), _word_after(text, mark.end())):
            continue
        out.append(text[start:mark.end()])
        start = mark.end()
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def _fit(text: str, limit: int, breaks: tuple[re.Pattern[str], ...]) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters: cut at the first kind of
    boundary in ``breaks``, pieces put back together as long as they fit; a part still
    too long cut at the next kind; one with none (a hash, Chinese without a clause mark)
    cut every ``limit`` characters. Nothing is left out: the pieces joined are the text,
    up to the spaces where they were cut."""
    if len(text) <= limit:
        return [text]
    if not breaks:
        return _hard_cut(text, limit)
    parts = breaks[0].split(text)
    out: list[str] = []
    piece, joiner = "", ""
    for index in range(0, len(parts), 2):
        for number, part in enumerate(_fit(parts[index], limit, breaks[1:])):
            if number == 0 and piece and len(piece) + len(joiner) + len(part) <= limit:
                piece = piece + joiner + part
                continue
            if piece:
                out.append(piece)
            piece = part
        joiner = " " if index + 1 < len(parts) and parts[index + 1] else ""
    if piece:
        out.append(piece)
    return out


def _hard_cut(text: str, limit: int) -> list[str]:
    """``text`` cut every ``limit`` characters. A piece of marks only would be dropped
    as having nothing to say ('Dr.Dr' and '.'): it takes the letters before it along
    ('Dr.D' and 'r.') where they fit."""
    pieces = [text[at:at + limit] for at in range(0, len(text), limit)]
    for index in range(len(pieces) - 1, 0, -1):
        if any(ch.isalnum() for ch in pieces[index]):
            continue
        head = pieces[index - 1]
        last = max((at for at, ch in enumerate(head) if ch.isalnum()), default=0)
        if last and len(head) - last + len(pieces[index]) <= limit:
            pieces[index - 1], pieces[index] = head[:last], head[last:] + pieces[index]
    return pieces


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
    then at words, then (a run with no space, such as Chinese without a clause mark or
    a hash) every ``limit`` characters, so no piece exceeds ``limit`` and no word of
    the text is left out. Pieces with nothing to say (only marks: '---') are dropped."""
    out: list[str] = []
    for sentence in _split_sentences(text):
        out.extend(_fit(sentence, limit, (_CLAUSE_BREAK, _WORD_BREAK)))
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

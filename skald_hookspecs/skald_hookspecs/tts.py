"""The speech contract: text-to-speech engines a plugin contributes.

A plugin registers ``register(name, engine)`` through ``register_tts_engines``; the
host's TTS manager picks, per request, a voice that speaks the member's language (the
member's own choice when it does, else the instance default for that language, else
the voice of the engine with the highest ``quality``), splits the text into sentences
and asks the engine for one sentence at a time, so the first sentence plays while the
next is being made. The host caches what an engine returned (in the member's own
encrypted file), bounds how many syntheses run at once and converts the audio to what
the caller wants (a streamed WAV, an OGG/Opus voice note).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class TtsVoice:
    """One voice of an engine. ``id`` is unique within the engine (the host names it
    ``<engine>:<id>`` to members); ``languages`` are the primary language subtags it
    can speak (``en``, ``de``, ...), best first. ``title`` is what a voice picker shows."""

    id: str
    languages: tuple[str, ...]
    title: str = ""


class TtsUnavailable(Exception):
    """An engine cannot speak right now (model missing, bad path, binary absent); the
    message says what to install or configure, in words fit for the admin."""


@runtime_checkable
class TtsEngine(Protocol):
    """What ``register(name, engine)`` of ``register_tts_engines`` expects.

    ``synthesize`` gets one sentence-sized piece of plain text (the host has split the
    reply and removed markdown) and returns a complete WAV file: RIFF, 16-bit PCM, one
    channel, any sample rate. It must not block the event loop (run the model in a
    thread or a subprocess) and raises ``TtsUnavailable`` when it cannot speak at all.
    Each call has the host's ``tts.engine_timeout_seconds`` (20 s unless the admin says
    otherwise): past it the call is cancelled and the engine failed for that request,
    as when it raises; audio that is not such a WAV file is a failure too. A failure
    on the first sentence passes the request to another voice of the language when
    there is one. A timeout, bad audio and any exception but ``TtsUnavailable`` are
    listed among the plugin's problems on its page (the exception's message withheld),
    and a ``synthesize`` that holds the event loop past half a second is logged and
    listed there as a hook that does.

    Optional attributes, read when present: ``version`` (str, part of the host's cache
    key: change it when the same text would sound different), ``quality`` (int, higher
    wins when several engines speak a language; default 0), ``health()`` (``None``
    when ready, else a message saying what is wrong; must be cheap: no model loading) and
    ``realtime_factor`` (float: seconds of synthesis per second of speech on this machine,
    ideally measured as it runs; the host cuts a streamed reply into units that each
    come ready before the audio ahead of them has played, and hands an engine below 0.3
    whole sentences; absent: only the first sentence is cut short).
    Since 1.2 (``synthesize`` alone since 1.0; ``realtime_factor`` since 1.4)."""

    def voices(self) -> Sequence[TtsVoice]:
        """The voices this engine offers now."""

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        """One WAV file of ``text`` spoken by ``voice`` (an id of ``voices()``) in ``locale``."""

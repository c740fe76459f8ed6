"""``TtsManager`` (``Skald.tts``): the engines of ``register_tts_engines``, which voice
speaks for whom, and the sentence-by-sentence synthesis every caller shares.

- A voice is named ``<engine>:<voice id>``. For a member and a language the manager
  takes the member's own choice (``tts.voice`` in their private settings) when it speaks
  that language, else the instance default for it (``tts.defaults``: ``de=espeak-ng:de``),
  else the first voice of the best engine (``quality``) that speaks it. An engine counts
  only while its plugin is enabled and healthy and its ``health()`` says ready. Why one
  is not (its plugin's error, its ``health()``) and why a synthesis failed are the
  engine's words for the admin, which may name the admin's files and the libraries'
  errors: a member reads only that the engine is not available or failed.
- The text is split into sentences; each goes to the engine on its own, inside one of
  ``tts.max_concurrent`` instance-wide slots, so the first sentence is heard while the
  next is being made and two members' long replies take turns. The first sentence is
  cut once or twice more (``quick_start``: a first unit of a few words), so the first
  audio waits only for a short synthesis.
- Each sentence's audio is cached in the member's own encrypted file (``tts_cache``),
  keyed by a hash of engine, engine version, voice and text, least recently used first
  out past ``tts.cache_mib``. Nothing is cached where the member's file is closed, and
  nothing is written anywhere else.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Mapping, Sequence

from skald_hookspecs.tts import TtsUnavailable, TtsVoice
from skald_host.core.asyncutil import await_me_maybe
from skald_host.core.plugins.failures import record_failure
from skald_host.core.plugins.manager import Contribution, LoopWatch, PluginError
from skald_host.core.tts.language import detect
from skald_host.core.tts.audio import AudioError, Pcm, pause_after, quick_start, read_wav, sentences, silence, speakable, to_ogg, wav_bytes

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

#: The member's private setting naming their voice (``<engine>:<voice>``).
VOICE_SETTING = "tts.voice"
#: How long a request waits for a synthesis slot before it is told the server is busy.
SLOT_WAIT_SECONDS = 30.0
#: The text as sent (Markdown, code blocks, links) may be this many times ``tts.max_chars``
#: (which counts what is read aloud): a bound on the work done before that is counted.
RAW_FACTOR = 25


class NoVoice(Exception):
    """No usable engine speaks the language; ``language`` names it."""

    def __init__(self, language: str) -> None:
        super().__init__(f"no installed voice speaks {language!r}")
        self.language = language


class SpeechRefused(Exception):
    """A refusal the member sees: the message in English (the log, plugins, old
    clients); ``code`` and ``values`` let the page say it in the reader's language
    (``error.<code>`` in the locale files)."""

    def __init__(self, message: str, *, code: str, values: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values = values or {}


class TextTooLong(SpeechRefused, ValueError):
    """Longer than ``tts.max_chars``, or nothing in it to read aloud."""


class UnknownVoice(SpeechRefused, LookupError):
    """A voice asked for by name that no engine the member may use has. Refused rather
    than replaced by the default: a client that names a voice and hears another cannot
    tell its choice was wrong."""

    def __init__(self, voice: str) -> None:
        super().__init__(f"there is no voice {voice!r}; the voice list (GET /api/tts/voices) names those you can use",
                         code="tts_unknown_voice", values={"voice": voice})
        self.voice = voice


class TtsBusy(SpeechRefused):
    """Too many syntheses of this member at once, or no slot came free in time."""


class EngineFailed(TtsUnavailable):
    """An engine could not speak. Its own message (``detail``) is in words for the
    admin and may name the admin's files and the libraries' errors (a model path,
    onnxruntime's text): only an admin reads it. ``str()`` names the engine alone, fit
    for any member, a channel or a plugin (``HostApi.synthesize_speech``)."""

    def __init__(self, engine: str, detail: str) -> None:
        super().__init__(f"the speech engine {engine!r} could not speak")
        self.engine = engine
        self.detail = detail


def withheld(name: str) -> SpeechRefused:
    """What a member reads of an engine that is not ready, instead of its reason."""
    return SpeechRefused(f"the voice engine {name!r} is not available right now", code="tts_engine_unavailable", values={"engine": name})


def no_voice_message(strings: Any, exc: NoVoice, locale: str) -> str:
    """'No voice speaks German here…' in the member's language."""
    return strings.translate("core.tts.no_voice", locale, language=language_name(strings, exc.language, locale))


def language_name(strings: Any, language: str, locale: str) -> str:
    """A language's name ("Deutsch") in ``locale``, or its code when there is none."""
    name = strings.translate(f"core.tts.lang.{language}", locale)
    return language if name == f"core.tts.lang.{language}" else name


def validate_engine(plugin_id: str, args: tuple[Any, ...]) -> tuple[str, Any]:
    """The ``register(name, engine)`` check of ``register_tts_engines``."""
    if len(args) != 2 or not isinstance(args[0], str) or not args[0].strip() or ":" in args[0]:
        raise PluginError("register() expects (name, engine) with a name without ':'")
    name, engine = args
    missing = [m for m in ("voices", "synthesize") if not callable(getattr(engine, m, None))]
    if missing:
        raise PluginError(f"TTS engine {name!r} lacks {', '.join(missing)}")
    return name, engine


def language_of(locale: str) -> str:
    return (locale or "en").replace("_", "-").split("-")[0].lower()


@dataclass(frozen=True)
class Choice:
    engine_name: str
    engine: Any
    voice: str
    language: str

    @property
    def voice_name(self) -> str:
        return f"{self.engine_name}:{self.voice}"

    @property
    def version(self) -> str:
        return str(getattr(self.engine, "version", "0"))


class TtsManager:
    def __init__(self, core: "Skald", engines: Sequence[Contribution]) -> None:
        self._reach = lambda: core
        self.settings = core.settings.tts
        self._engines: dict[str, tuple[str, Any]] = {c.value[0]: (c.plugin_id, c.value[1]) for c in engines}
        self._slots = asyncio.Semaphore(max(1, self.settings.max_concurrent))
        self._running: dict[str, int] = {}
        self._defaults = _parse_defaults(self.settings.defaults)

    @property
    def _core(self) -> "Skald":
        return self._reach()

    # -- what there is -----------------------------------------------------------------------

    def health(self, name: str) -> str | None:
        """None when the engine may speak now, else why not: for the admin only (an
        engine's reason may name the admin's files and the libraries' errors)."""
        plugin_id, engine = self._engines[name]
        if not self._core.plugins.is_enabled(plugin_id):
            return f"the plugin {plugin_id!r} is not enabled"
        status = self._core.plugins.status(plugin_id)
        if status is not None and not status.healthy:
            return status.error or f"the plugin {plugin_id!r} is unhealthy"
        check = getattr(engine, "health", None)
        if callable(check):
            try:
                return check()
            except Exception as exc:  # a broken health check is itself the answer
                return f"health check failed: {exc}"
        return None

    def _voices(self, name: str) -> list[TtsVoice]:
        try:
            return [v for v in self._engines[name][1].voices() if isinstance(v, TtsVoice)]
        except Exception:
            log.exception("TTS engine %s: voices() failed", name)
            return []

    def _may(self, member: Any, name: str) -> bool:
        """The member may use the engine's plugin (its grant; built-ins: any active member)."""
        return member is None or self._core.catalog.usable(member, self._engines[name][0])

    def catalog(self, member: Any = None) -> list[dict[str, Any]]:
        """Every engine the member may use, with its state and voices, best first (the
        voice picker's list). An engine that is not ready says why (``health``) to an
        admin (or without ``member``); anyone else reads only that it is not available,
        with ``health_code`` and ``health_values`` to say so in their language."""
        detailed = member is None or bool(getattr(member, "is_admin", False))
        out = []
        for name in self._ranked():
            plugin_id, engine = self._engines[name]
            if self._core.plugins.is_enabled(plugin_id) and not self._may(member, name):
                continue
            problem = self.health(name)
            entry = {
                "engine": name,
                "plugin_id": plugin_id,
                "version": str(getattr(engine, "version", "0")),
                "ready": problem is None,
                "health": problem,
                "voices": [
                    {"id": f"{name}:{v.id}", "title": v.title or v.id, "languages": list(v.languages)}
                    for v in (self._voices(name) if problem is None else [])
                ],
            }
            if problem is not None and not detailed:
                refusal = withheld(name)
                entry.update(health=str(refusal), health_code=refusal.code, health_values=refusal.values)
            out.append(entry)
        return out

    def _ranked(self) -> list[str]:
        return sorted(self._engines, key=lambda n: (-int(getattr(self._engines[n][1], "quality", 0) or 0), n))

    def languages(self, member: Any = None) -> list[str]:
        return sorted({lang for e in self.catalog(member) for v in e["voices"] for lang in v["languages"]})

    def choose(self, locale: str, preferred: str | None = None, member: Any = None, *, exclude: Sequence[str] = ()) -> Choice:
        """The voice for ``locale``; with ``member``, only among engines they may use;
        never one of the engines in ``exclude`` (they just failed)."""
        language = language_of(locale)
        for wanted in (preferred, self._defaults.get(language)):
            choice = self._named(wanted, language, member)
            if choice is not None and choice.engine_name not in exclude:
                return choice
        for name in self._ranked():
            if name in exclude or self.health(name) is not None or not self._may(member, name):
                continue
            for voice in self._voices(name):
                if language in voice.languages:
                    return Choice(name, self._engines[name][1], voice.id, language)
        raise NoVoice(language)

    def _named(self, wanted: str | None, language: str, member: Any) -> Choice | None:
        if not wanted or ":" not in wanted:
            return None
        name, voice_id = wanted.split(":", 1)
        if name not in self._engines or self.health(name) is not None or not self._may(member, name):
            return None
        for voice in self._voices(name):
            if voice.id == voice_id and language in voice.languages:
                return Choice(name, self._engines[name][1], voice.id, language)
        return None

    def check_voice(self, wanted: str, member: Any = None) -> None:
        """Refuse (``UnknownVoice``) a voice a client names that is not there for the
        member: no such engine, an engine they may not use, or one that does not list
        that voice. An engine that is not ready and lists no voices is not refused here:
        the voice may be real, and ``choose`` falls back as for a voice that does not
        speak the language. Only a voice asked for in the request is checked; the
        member's stored choice outliving its engine just falls back to the default."""
        name, _, voice_id = wanted.partition(":")
        if not voice_id or name not in self._engines or not self._may(member, name):
            raise UnknownVoice(wanted)
        listed = {voice.id for voice in self._voices(name)}
        if voice_id not in listed and (listed or self.health(name) is None):
            raise UnknownVoice(wanted)

    async def preferred_voice(self, db: Any) -> str | None:
        if db is None:
            return None
        row = await db.run(lambda c: c.execute("SELECT value FROM member_settings WHERE key = ?", (VOICE_SETTING,)).fetchone())
        value = json.loads(row[0]) if row else None
        return value if isinstance(value, str) else None

    # -- speaking --------------------------------------------------------------------------

    async def pieces(self, text: str) -> list[str]:
        """The text's sentences (``sentences``), made in a thread: a few thousand
        characters take a millisecond or more, which the event loop should not wait.
        ``tts.max_chars`` counts what is read aloud (``speakable``): a reply's code
        blocks, URLs and Markdown marks are never spoken, so they do not count (a short
        answer with a long script in it was refused). The text as sent may be at most
        ``RAW_FACTOR`` times that."""
        limit = self.settings.max_chars
        if len(text) > limit * RAW_FACTOR:
            raise TextTooLong(f"the text has {len(text)} characters; at most {limit} are read aloud",
                              code="tts_too_long", values={"length": len(text), "limit": limit})
        spoken = await asyncio.to_thread(speakable, text)
        if len(spoken) > limit:
            raise TextTooLong(f"the text has {len(spoken)} characters to read aloud; at most {limit} are read aloud",
                              code="tts_too_long", values={"length": len(spoken), "limit": limit})
        found = await asyncio.to_thread(sentences, spoken)
        if not found:
            raise TextTooLong("there is nothing to read aloud in this text", code="tts_nothing_to_read")
        return found

    async def text_locale(self, text: str, fallback: str, member: Any = None) -> str:
        """The language ``text`` is written in (``language.detect``, in a thread: its
        model loads on first use) among those a voice the member may use speaks and the
        member's own; ``fallback`` (the member's locale) when it cannot be told or is the
        fallback's language anyway (``en-GB`` stays ``en-GB``)."""
        own = language_of(fallback)
        candidates = set(self.languages(member)) | {own}
        if len(candidates) < 2 or len(text) > self.settings.max_chars * RAW_FACTOR:  # too long: ``pieces`` refuses it
            return fallback
        found = await asyncio.to_thread(lambda: detect(speakable(text)[: self.settings.max_chars], candidates))
        return found if found and found != own else fallback

    async def start(self, member_id: str, locale: str, preferred: str | None, member: Any, pieces: list[str], db: Any,
                    *, quick: bool = True) -> tuple[Choice, AsyncIterator[Pcm], Pcm]:
        """The chosen voice, its stream (``speak``) and the stream's first audio. An
        engine that fails on the first sentence (Kokoro whose model passed the start's
        look but cannot load) is passed over for the next voice of the language, as
        every later request passes it over once its ``health()`` says so: the first
        read-aloud no longer fails where the next one speaks. ``EngineFailed`` only when
        no other engine speaks the language either."""
        failed: list[str] = []
        first_failure: EngineFailed | None = None
        while True:
            try:
                choice = self.choose(locale, preferred, member, exclude=failed)
            except NoVoice:
                if first_failure is not None:
                    raise first_failure from None
                raise
            stream = self.speak(member_id, choice, pieces, db, quick=quick)
            try:
                return choice, stream, await stream.__anext__()
            except EngineFailed as exc:
                await stream.aclose()
                log.warning("TTS engine %s (plugin %s) failed on the first sentence; trying another voice",
                            choice.engine_name, self._engines[choice.engine_name][0])
                failed.append(choice.engine_name)
                first_failure = first_failure or exc
            except BaseException:
                await stream.aclose()
                raise

    async def speak(self, member_id: str, choice: Choice, pieces: list[str], db: Any, *, quick: bool = True) -> AsyncIterator[Pcm]:
        """The audio of each piece in order, a pause after each but the last (shorter
        where a sentence was cut: ``pause_after``). ``quick`` (a stream heard as it comes):
        the sentences are first cut into units by ``quick_start`` with the engine's
        measured ``realtime_factor`` (an optional engine attribute), so the first unit is
        short and each next one is ready before the audio before it has played.
        One member may run ``tts.per_member`` of these at once; past that ``TtsBusy``."""
        if quick:
            rtf = getattr(choice.engine, "realtime_factor", None)
            pieces = quick_start(pieces, rtf=float(rtf) if isinstance(rtf, (int, float)) else None)
        if self._running.get(member_id, 0) >= self.settings.per_member:
            raise TtsBusy("speech is already being made for you; wait for it to finish", code="tts_busy_member")
        self._running[member_id] = self._running.get(member_id, 0) + 1
        try:
            for index, piece in enumerate(pieces):
                pcm = await self._piece(choice, piece, db)
                if index < len(pieces) - 1:
                    pcm = Pcm(pcm.rate, pcm.frames + silence(pcm.rate, pause_after(piece)))
                yield pcm
        finally:
            left = self._running.get(member_id, 1) - 1
            if left:
                self._running[member_id] = left
            else:
                self._running.pop(member_id, None)

    async def _piece(self, choice: Choice, text: str, db: Any) -> Pcm:
        key = hashlib.sha256(
            json.dumps([choice.engine_name, choice.version, choice.voice, choice.language, text]).encode()
        ).hexdigest()
        cached = await self._cache_get(db, key)
        if cached is not None:
            return cached
        # A slot is held at most an engine call's time limit: a request waits at least
        # that long for one before it is told the server is busy.
        wait = max(SLOT_WAIT_SECONDS, self.settings.engine_timeout_seconds + 5)
        try:
            await asyncio.wait_for(self._slots.acquire(), wait)
        except asyncio.TimeoutError:
            raise TtsBusy("the server is busy making speech; try again in a moment", code="tts_busy_server") from None
        try:
            pcm = await self._synthesized(choice, text)
        finally:
            self._slots.release()
        await self._cache_put(db, key, pcm)
        return pcm

    async def _synthesized(self, choice: Choice, text: str) -> Pcm:
        """One engine call, its audio read, within ``tts.engine_timeout_seconds``.
        Whatever goes wrong is ``EngineFailed`` (the next voice is tried, as ``start``
        does), and all but the engine's own ``TtsUnavailable`` (its worded state, said
        to the admin where it is refused) is listed on its plugin's page like a tool's
        failure: an overrun (a hung engine held a slot, and every member's speech waited
        behind it), audio that is not a WAV (a 500 that skipped the fallback, and nobody
        told), any other exception. An engine that holds the event loop is noticed as a
        hook or a tool is (``LoopWatch``): its time limit cannot cut that off."""
        name = choice.engine_name
        plugin_id = self._engines[name][0]
        plugins = self._core.plugins
        where = f"TTS engine {name}"
        limit = self.settings.engine_timeout_seconds
        watch = LoopWatch(plugins.loop_held)
        try:
            async with asyncio.timeout(limit):
                data = await await_me_maybe(watch.steps(watch.call(choice.engine.synthesize, text, choice.voice, choice.language)))
            if not isinstance(data, (bytes, bytearray)):
                raise AudioError(f"synthesize returned {type(data).__name__}, not the bytes of a WAV file")
            try:
                return await asyncio.to_thread(read_wav, bytes(data))
            except AudioError as exc:
                raise AudioError(f"synthesize returned audio that cannot be played: {exc}") from None
        except TtsUnavailable as exc:  # its words are the admin's: ``detail``
            log.warning("TTS engine %s (plugin %s) could not speak a sentence", name, plugin_id)
            raise EngineFailed(name, str(exc)) from exc
        except TimeoutError as exc:
            cut_off = exc.__context__ if isinstance(exc.__context__, asyncio.CancelledError) else exc
            stuck = TimeoutError(f"{where} did not finish a sentence within {limit:g} s (tts.engine_timeout_seconds)")
            error_id = record_failure(plugins, plugin_id, where, stuck.with_traceback(cut_off.__traceback__), say=True, level=logging.WARNING)
            raise EngineFailed(name, f"the speech engine {name!r} did not finish a sentence within {limit:g} s (error id {error_id})") from exc
        except AudioError as exc:  # the host's words, no member's: said
            error_id = record_failure(plugins, plugin_id, where, exc, say=True)
            raise EngineFailed(name, f"the speech engine {name!r} {exc} (error id {error_id})") from exc
        except Exception as exc:
            error_id = record_failure(plugins, plugin_id, where, exc)
            raise EngineFailed(name, f"the speech engine {name!r} failed: {type(exc).__name__} (error id {error_id})") from exc
        finally:
            watch.warn_if_slow(plugin_id, where)

    async def render(self, member_id: str, text: str, *, locale: str, db: Any, format: str = "ogg", voice: str | None = None) -> bytes:
        """The whole audio at once (a voice note, a download): WAV or OGG/Opus."""
        if format not in ("ogg", "wav"):
            raise ValueError("format must be 'ogg' or 'wav'")
        pieces = await self.pieces(text)
        member = await self._core.users.get(member_id)
        if voice is not None:
            self.check_voice(voice, member)
        # whole sentences (quick=False): nobody hears it before the end
        _, stream, first = await self.start(member_id, locale, voice or await self.preferred_voice(db), member, pieces, db, quick=False)
        try:
            parts = [first] + [pcm async for pcm in stream]
        finally:
            await stream.aclose()
        pcm = Pcm(parts[0].rate, b"".join(p.frames for p in parts))
        return await asyncio.to_thread(to_ogg if format == "ogg" else wav_bytes, pcm)

    # -- the member's cache ------------------------------------------------------------------

    async def _cache_get(self, db: Any, key: str) -> Pcm | None:
        if db is None or db.closed:
            return None

        def read(conn: Any) -> bytes | None:
            row = conn.execute("SELECT audio FROM tts_cache WHERE key = ?", (key,)).fetchone()
            if row is not None:
                conn.execute("UPDATE tts_cache SET used_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE key = ?", (key,))
            return row[0] if row else None

        blob = await db.run(read)
        return None if blob is None else read_wav(blob)

    async def _cache_put(self, db: Any, key: str, pcm: Pcm) -> None:
        if db is None or db.closed:
            return
        blob = wav_bytes(pcm)
        budget = self.settings.cache_mib * 1024 * 1024
        if len(blob) > budget:
            return

        def write(conn: Any) -> None:
            conn.execute("INSERT OR REPLACE INTO tts_cache (key, audio, bytes) VALUES (?, ?, ?)", (key, blob, len(blob)))
            total = conn.execute("SELECT coalesce(sum(bytes), 0) FROM tts_cache").fetchone()[0]
            if total <= budget:
                return
            for old_key, size in conn.execute("SELECT key, bytes FROM tts_cache WHERE key != ? ORDER BY used_at", (key,)).fetchall():
                conn.execute("DELETE FROM tts_cache WHERE key = ?", (old_key,))
                total -= size
                if total <= budget:
                    break

        await db.transaction(write)

    async def cache_entries(self, db: Any) -> int:
        return await db.run(lambda c: c.execute("SELECT count(*) FROM tts_cache").fetchone()[0])


def _parse_defaults(entries: Sequence[str]) -> Mapping[str, str]:
    """``("de=espeak-ng:de", ...)`` as ``{"de": "espeak-ng:de"}`` (the settings checked
    the form when they were loaded)."""
    out: dict[str, str] = {}
    for entry in entries:
        language, _, voice = entry.partition("=")
        out[language.strip().lower()] = voice.strip()
    return out

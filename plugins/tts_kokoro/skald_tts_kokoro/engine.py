"""The Kokoro engine: numpy, onnxruntime and kokoro-onnx are imported at the first
synthesis, in a worker thread, never at the plugin's import or on the event loop.

The model is built and run on a thread of its own whose scheduling priority is lowered
(``NICE``; on Linux a thread's nice value is its own, and the threads onnxruntime starts
from it inherit it). On 2 cores a synthesis takes a whole core for seconds; at the same
priority it competes with the event loop and the chat's token stream stalls behind it.
"""

from __future__ import annotations

import asyncio
import io
import os
import threading
import wave
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from skald_hookspecs.tts import TtsUnavailable, TtsVoice
from skald_tts_kokoro.model import ModelError, Paths, joined_model

VERSION = "kokoro-v1.0-int8"
#: Kokoro voice names start with their language: ``af_heart`` is American English.
PREFIX_LANGUAGES = {"a": "en", "b": "en", "e": "es", "f": "fr", "h": "hi", "i": "it", "j": "ja", "p": "pt", "z": "zh"}
#: What kokoro-onnx's espeak phonemiser calls each language (British voices: en-gb).
ESPEAK = {"en": "en-us", "es": "es", "fr": "fr-fr", "hi": "hi", "it": "it", "pt": "pt-br", "zh": "cmn"}
#: Languages a voice reads besides its own. Japanese needs a Japanese phonemiser the
#: plugin does not ship, so the Japanese voices of the bundled pack read English.
SPOKEN = set(ESPEAK)
#: How much lower the synthesis thread's priority is than the host's (nice, 0..19).
NICE = 10


def lower_priority() -> None:
    """The synthesis thread's initializer: on Linux ``nice`` changes the calling thread
    only. Where it may not (no permission, another system), the thread runs as it is."""
    try:
        os.nice(NICE)
    except OSError:
        pass


def voice_languages(name: str) -> tuple[str, ...]:
    own = PREFIX_LANGUAGES.get(name[:1])
    if own in SPOKEN:
        return (own,)
    return ("en",)  # the bundled Japanese voices (jf_alpha, ...) and unknown prefixes


class KokoroEngine:
    quality = 10
    version = VERSION

    def __init__(self) -> None:
        self.paths: Paths | None = None
        self.problem: str | None = "the Kokoro plugin has not started"
        self.threads = 1
        self._names: list[str] = []
        self._kokoro: Any = None
        self._loading = asyncio.Lock()
        self._run = threading.Lock()  # one synthesis at a time: espeak's phonemiser is not thread-safe
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="kokoro", initializer=lower_priority)

    def configure(self, paths: Paths | None, problem: str | None, threads: int | None = None) -> None:
        self.paths, self.problem, self._kokoro = paths, problem, None
        self._loading = asyncio.Lock()
        if threads:
            self.threads = threads
        self._names = []
        if paths is not None and problem is None:
            try:
                self._names = voice_names(paths)
            except ModelError as exc:
                self.problem = str(exc)

    def health(self) -> str | None:
        return self.problem

    def voices(self) -> list[TtsVoice]:
        return [TtsVoice(name, voice_languages(name), title(name)) for name in self._names]

    async def load(self) -> Any:
        if self.problem:
            raise TtsUnavailable(self.problem)
        async with self._loading:
            if self._kokoro is None:
                try:
                    self._kokoro = await asyncio.get_running_loop().run_in_executor(self._worker, self._build)
                except ModelError as exc:
                    self.problem = str(exc)
                    raise TtsUnavailable(self.problem) from None
                except Exception as exc:  # onnxruntime refusing the file, a broken voice pack
                    self.problem = f"the Kokoro model could not be loaded: {exc}"
                    raise TtsUnavailable(self.problem) from None
        return self._kokoro

    async def warm(self) -> None:
        """Load the model and speak one word (the first inference allocates), so the
        first answer read aloud starts as fast as the next. A failure only sets
        ``problem`` (the health message); the host goes on."""
        try:
            await self.load()
            if self._names:
                await self.synthesize("Ready.", self._names[0], "en")
        except TtsUnavailable:
            pass

    def _build(self) -> Any:
        import onnxruntime
        from kokoro_onnx import Kokoro

        assert self.paths is not None
        model = self.paths.model or joined_model(self.paths.cache_dir)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        return Kokoro.from_session(session, str(self.paths.voices))

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        kokoro = await self.load()
        if voice not in self._names:
            raise TtsUnavailable(f"Kokoro has no voice {voice!r}")
        language = locale.split("-")[0].lower()
        espeak = "en-gb" if language == "en" and voice.startswith("b") else ESPEAK.get(language)
        if espeak is None:
            raise TtsUnavailable(f"Kokoro does not speak {language!r}")
        return await asyncio.get_running_loop().run_in_executor(self._worker, self._speak, kokoro, text, voice, espeak)

    def _speak(self, kokoro: Any, text: str, voice: str, espeak: str) -> bytes:
        import numpy as np

        with self._run:
            samples, rate = kokoro.create(text, voice=voice, speed=1.0, lang=espeak)
        pcm = (np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767).astype("<i2")
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(int(rate))
            w.writeframes(pcm.tobytes())
        return out.getvalue()


def voice_names(paths: Paths) -> list[str]:
    """The voices in the pack (an ``.npz`` archive: names only, no vectors loaded)."""
    import numpy as np

    try:
        with np.load(paths.voices) as pack:
            names = sorted(pack.files)
    except Exception as exc:
        raise ModelError(f"voices_path {str(paths.voices)!r} is not a Kokoro voice pack (.npz/.bin): {exc}") from None
    if not names:
        raise ModelError(f"voices_path {str(paths.voices)!r} holds no voices")
    return names


def title(name: str) -> str:
    prefix, _, rest = name.partition("_")
    gender = {"f": "♀", "m": "♂"}.get(prefix[1:2], "")
    return f"{rest.replace('_', ' ').title() or name} {gender} (Kokoro)".replace("  ", " ")

"""The ``espeak-ng`` speech engine: a small formant synthesiser that speaks ~100
languages, German included, wherever Debian's ``espeak-ng`` package is installed
(``apt-get install espeak-ng``). Robotic next to a neural voice, so its ``quality`` is
the lowest: the host takes it for the languages no better engine speaks.

Each synthesis is one ``espeak-ng`` process (the text on its stdin, never on its command
line, so no text is ever read as an option or shows in ``ps``), at a lowered priority,
started by a small long-lived helper process (``tts_espeak_helper``), not by the host:
the event loop writes one line and reads one answer per sentence.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import sys
from typing import Any, Callable

from skald_hookspecs import hookimpl
from skald_hookspecs.tts import TtsUnavailable, TtsVoice
from skald_hookspecs.types import PluginInfo
from skald_host.builtins.tts_espeak_helper import NICE  # the helper lowers its own priority; each espeak-ng inherits it

ENGINE = "espeak-ng"
#: Longest a single sentence may take before the process is killed.
TIMEOUT_SECONDS = 30.0
MISSING = "espeak-ng is not installed on this machine (Debian/Ubuntu: apt-get install espeak-ng)"


#: The variant a language's one voice is, where the bare code is not a voice.
PREFERRED = {"en": "en-us", "fr": "fr-fr", "zh": "cmn", "vi": "vi"}
#: espeak-ng codes whose language subtag is not the one members' locales use.
LANGUAGE_OF = {"cmn": "zh", "yue": "zh-yue"}


def parse_voices(listing: str) -> list[TtsVoice]:
    """One voice per language of ``espeak-ng --voices``: the preferred variant
    (``en-us`` for ``en``), else the one whose code is the language (``de``), else the
    first of its variants."""
    chosen: dict[str, tuple[str, str]] = {}
    for line in listing.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4:
            continue
        code, name = fields[1], fields[3].replace("_", " ")
        language = LANGUAGE_OF.get(code, code.split("-")[0].lower())
        if "-" in language:
            continue
        best = PREFERRED.get(language, language)
        if language not in chosen or code == best:
            chosen[language] = (code, name)
    return [TtsVoice(code, (language,), f"{name} (espeak-ng)") for language, (code, name) in sorted(chosen.items())]


class EspeakEngine:
    quality = 0
    #: Seconds of synthesis per second of speech (~0.01 here): the host hands it whole
    #: sentences, no first unit cut short.
    realtime_factor = 0.02

    def __init__(self, binary: str = "espeak-ng") -> None:
        self.binary = binary
        self.version = "espeak-ng"
        self._voices: list[TtsVoice] = []
        self._problem: str | None = "espeak-ng has not been probed yet"
        self._helper: asyncio.subprocess.Process | None = None
        self._helper_loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._ids = itertools.count(1)
        self._starting = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None

    def probe(self) -> None:
        """Blocking (a thread at startup): find the binary, its version and voices."""
        path = shutil.which(self.binary)
        if path is None:
            self._problem = MISSING
            return
        try:
            version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
            listing = subprocess.run([path, "--voices"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            self._problem = f"espeak-ng does not run: {exc}"
            return
        self.binary, self.version = path, version.split("Data at")[0].strip() or "espeak-ng"
        self._voices = parse_voices(listing)
        self._problem = None if self._voices else "espeak-ng lists no voices (is espeak-ng-data installed?)"

    def health(self) -> str | None:
        return self._problem

    def voices(self) -> list[TtsVoice]:
        return list(self._voices)

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        if self._problem:
            raise TtsUnavailable(self._problem)
        if voice not in {v.id for v in self._voices}:
            raise TtsUnavailable(f"espeak-ng has no voice {voice!r}")
        helper = await self._running_helper()
        assert helper.stdin is not None
        ident = next(self._ids)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        request = {"id": ident, "binary": self.binary, "voice": voice, "text": text, "timeout": TIMEOUT_SECONDS}
        helper.stdin.write(json.dumps(request).encode() + b"\n")
        try:
            return await asyncio.wait_for(future, TIMEOUT_SECONDS + 10)
        finally:
            self._pending.pop(ident, None)

    async def _running_helper(self) -> asyncio.subprocess.Process:
        """The helper process, started at the first synthesis and again if it died (or
        belongs to an earlier event loop: a restarted host)."""
        loop = asyncio.get_running_loop()
        async with self._starting:
            helper = self._helper
            if helper is not None and helper.returncode is None and self._helper_loop is loop:
                return helper
            if helper is not None and helper.returncode is None:
                helper.kill()
            helper = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "skald_host.builtins.tts_espeak_helper",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            )
            self._helper, self._helper_loop = helper, loop
            self._reader = loop.create_task(self._read(helper))
            return helper

    async def _read(self, helper: asyncio.subprocess.Process) -> None:
        stdout = helper.stdout
        assert stdout is not None
        try:
            while line := await stdout.readline():
                answer: dict[str, Any] = json.loads(line)
                audio = await stdout.readexactly(answer["bytes"]) if "bytes" in answer else b""
                future = self._pending.pop(answer.get("id"), None)
                if future is None or future.done():
                    continue
                if "error" in answer:
                    future.set_exception(TtsUnavailable(answer["error"]))
                else:
                    future.set_result(audio)
        except (asyncio.IncompleteReadError, ValueError, KeyError):
            pass
        code = await helper.wait()
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(TtsUnavailable(f"the espeak-ng helper process stopped (exit {code}); it is started again at the next sentence"))
        self._pending.clear()

    async def close(self) -> None:
        helper, reader = self._helper, self._reader
        self._helper = self._reader = None
        if helper is None or self._helper_loop is not asyncio.get_running_loop():
            return
        if helper.stdin is not None:
            helper.stdin.close()
        try:
            await asyncio.wait_for(helper.wait(), 5)
        except asyncio.TimeoutError:
            helper.kill()
            await helper.wait()
        if reader is not None:
            await asyncio.gather(reader, return_exceptions=True)


engine = EspeakEngine()


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="tts-espeak",
        title="Speech: espeak-ng",
        description="Reads answers aloud in ~100 languages (German included) with espeak-ng.",
        icon="volume-2",
        spec=">=1.2,<2",
    )


@hookimpl
async def startup() -> None:
    await asyncio.to_thread(engine.probe)


@hookimpl
async def shutdown() -> None:
    await engine.close()


@hookimpl
def register_tts_engines(register: Callable[..., None]) -> None:
    register(ENGINE, engine)

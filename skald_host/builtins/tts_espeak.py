"""The ``espeak-ng`` speech engine: a small formant synthesiser that speaks ~100
languages, German included, wherever Debian's ``espeak-ng`` package is installed
(``apt-get install espeak-ng``). Robotic next to a neural voice, so its ``quality`` is
the lowest: the host takes it for the languages no better engine speaks.

Each synthesis is one ``espeak-ng`` process (the text on its stdin, never on its command
line, so no text is ever read as an option or shows in ``ps``), at a lowered priority;
the event loop only waits for it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from typing import Callable

from skald_hookspecs import hookimpl
from skald_hookspecs.tts import TtsUnavailable, TtsVoice
from skald_hookspecs.types import PluginInfo

ENGINE = "espeak-ng"
#: How much lower a synthesis process's priority is than the host's (nice, 0..19): on 2
#: cores the event loop (the chat's token stream) goes first.
NICE = 10
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


def lower_priority(pid: int) -> None:
    """Lower a just-started synthesis process's priority (its first milliseconds may run
    at the host's). Where that is not allowed, it runs as it is."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, NICE)
    except (OSError, AttributeError):
        pass


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
        process = await asyncio.create_subprocess_exec(
            self.binary, "-v", voice, "-b", "1", "--stdout",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        lower_priority(process.pid)
        try:
            out, err = await asyncio.wait_for(process.communicate(text.encode("utf-8")), TIMEOUT_SECONDS)
        except BaseException:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        if process.returncode != 0 or not out.startswith(b"RIFF"):
            raise TtsUnavailable(f"espeak-ng failed (exit {process.returncode}): {err.decode(errors='replace')[:200]}")
        return out


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
def register_tts_engines(register: Callable[..., None]) -> None:
    register(ENGINE, engine)

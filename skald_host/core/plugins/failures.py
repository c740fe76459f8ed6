"""A plugin's unexpected failure, said one way wherever it happened — a tool, a hook,
a system agent, a route of its router: under an error id, its frames and exception
type go to the log and to the plugin's page (``failures``); its message does not,
since it may carry a member's words, unless the host wrote it (``say``)."""

from __future__ import annotations

import logging
import time
import traceback
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skald_host.core.plugins.manager import PluginManager

log = logging.getLogger(__name__)

#: What a plugin may raise that is no ``Exception``, and that the host catches where it
#: calls plugin code (its import and registration hooks, ``startup``, a tool's ``run``)
#: as it catches any failure there: a ``sys.exit()`` in a plugin (or in a library it
#: calls) otherwise left asyncio's task and ended the whole server, and a plugin left
#: enabled ended every later start too. A real Ctrl-C is not swallowed by this:
#: ``skald serve`` takes SIGINT through a loop signal handler that stops the server
#: (``server.serve_forever``), and before that handler is installed (while plugins are
#: imported) ``asyncio.run`` takes it by cancelling the main task; neither raises a
#: KeyboardInterrupt into running plugin code. Only a second Ctrl-C during a plugin's
#: import could arrive as one and be taken for the plugin's failure, and the first has
#: already cancelled the start by then. ``asyncio.CancelledError`` and ``GeneratorExit``
#: are not here: they are how a stop and a closed generator end plugin code.
PLUGIN_EXITS: tuple[type[BaseException], ...] = (SystemExit, KeyboardInterrupt)

#: The places whose failures repeat with every event rather than once per call a
#: person made: a hook, a channel's ``deliver`` (a channel whose far end is down
#: fails at every typing, answer and note), and an event handler (``subscribe_member``:
#: one per streamed token). A repeat within a minute is folded.
FOLDED = ("hook ", "channel deliver", "event handler")


def withheld_traceback(exc: BaseException, *, say: bool = False) -> str:
    """The traceback of ``exc``: frames and the exception's type, its message only if ``say``."""
    frames = "".join(traceback.format_list(traceback.extract_tb(exc.__traceback__))) if exc.__traceback__ else ""
    head = f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
    return f"Traceback (most recent call last):\n{frames}{head}" + (f": {exc}" if say else " (message withheld: it may hold a member's data)")


def record_failure(
    plugins: PluginManager | None, plugin_id: str, where: str, exc: BaseException, *, say: bool = False, tool: str | None = None,
    level: int = logging.ERROR, one_pass: object | None = None,
) -> str:
    """Log the failure and keep it for the plugin's page; its error id, for whoever
    tells someone that it failed (the model, a client, a run's row). ``level``: a
    WARNING for what may be the world's fault rather than a bug (a tool that ran out
    of time waiting on a slow service).

    A hook's or a channel delivery's failure (``FOLDED``) that repeats one listed less
    than a minute ago (same place, same exception type, and the same message where it
    is said) is folded into that entry
    (``PluginManager.repeat_of``: a count, no new entry, no new log line at ERROR);
    its error id is that entry's.

    ``one_pass``: the system-agent pass the failure happened in (a token of the
    scheduler's). A failing agent fails for every member its pass runs for, and in
    every pass after: each member's failure was an entry of its own (twenty members made
    twenty entries of one bug), then each pass's (an agent failing every minute filled
    the list in twenty minutes), pushing everything else out of the list. The same
    place and exception type (``module.qualname``: a KeyError and a RuntimeError are two
    bugs, each with its own traceback), and the same message where it is said, is one entry while it is listed, ``members``
    counting the failures, ``passes`` the passes they happened in, ``last_at`` the
    latest, and its traceback the latest; a traceback unlike the listed one is still
    logged, under the entry's error id, which every member's run row cites."""
    kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
    fold: tuple[Any, ...] | None = None
    if plugins is not None and one_pass is not None:
        fold = (where, tool, "system agent", kind, str(exc) if say else "")
        text = withheld_traceback(exc, say=say)
        earlier = plugins.repeat_of(plugin_id, fold, window=None)
        if earlier is not None:
            earlier["members"] = earlier.get("members", 1) + 1
            another_pass = plugins.occasion_of(plugin_id, fold) is not one_pass
            if another_pass:
                earlier["passes"] = earlier.get("passes", 1) + 1
                plugins.set_occasion(plugin_id, fold, one_pass)
            if text != earlier["traceback"]:
                earlier["traceback"] = text
                log.log(level, "plugin %s: %s failed again, now so (error id %s)\n%s", plugin_id, where, earlier["error_id"], text)
            elif another_pass:  # one line a pass, not one a member
                log.info("plugin %s: %s failed again in another pass (error id %s, %d passes)", plugin_id, where, earlier["error_id"], earlier["passes"])
            else:
                log.debug("plugin %s: %s failed for another member (error id %s)", plugin_id, where, earlier["error_id"])
            return str(earlier["error_id"])
    elif plugins is not None and where.startswith(FOLDED):
        fold = (where, tool, kind, str(exc) if say else "")
        earlier = plugins.repeat_of(plugin_id, fold)
        if earlier is not None:
            log.debug("plugin %s: %s failed again (repeat %d of error id %s)", plugin_id, where, earlier["repeats"], earlier["error_id"])
            return str(earlier["error_id"])
    error_id = uuid.uuid4().hex[:12]
    text = withheld_traceback(exc, say=say)
    log.log(level, "plugin %s: %s failed, error id %s\n%s", plugin_id, where, error_id, text)
    failure: dict[str, Any] = {
        "error_id": error_id, "where": where, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "traceback": text,
    }
    if tool is not None:
        failure["tool"] = tool
    if one_pass is not None:
        failure["members"], failure["passes"] = 1, 1
    if plugins is not None:
        plugins.record_failure(plugin_id, failure, fold=fold)
        if one_pass is not None and fold is not None:
            plugins.set_occasion(plugin_id, fold, one_pass)
    return error_id

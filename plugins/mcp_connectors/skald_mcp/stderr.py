"""A global stdio connector's stderr, as log lines of its own.

The SDK's ``stdio_client`` hands the command the host's own stderr by default: a
failing tool call printed some thirty bare traceback lines into Skald's log, with no
time, no logger and no connector's name, reading like a crash of Skald itself. The
command gets the write end of a pipe instead; a thread reads it and logs each line
through ``skald_mcp.stderr`` as ``connector <name>: <line>``, each line cut to
``LINE_LIMIT`` characters and at most ``LINES_PER_MINUTE`` lines a minute (the rest
counted and said in one line). A member's stdio connector runs in the sandbox, which
discards its stderr (README); this is only for the admin's own commands.

Only until its session is ready (``session_ready``): a command's stderr while it starts
is what the admin needs (a missing module, a bad key, a traceback), while what it writes
once it serves members may quote their calls ("handling request text=…"), and nothing a
member sends privately may reach a file the admin reads in clear. From then on its lines
are counted, not logged: the count is said at most once every ``WITHHELD_SAID_EVERY``
seconds (when a line comes after that long) and when the session ends.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import IO

log = logging.getLogger("skald_mcp.stderr")

LINE_LIMIT = 500
LINES_PER_MINUTE = 20
WITHHELD_SAID_EVERY = 60.0


class StderrLog:
    """One session's pipe: ``file`` goes to ``stdio_client(..., errlog=file)``;
    ``close()`` when the session ends (the reader stops once the command's copy of
    the write end is gone too)."""

    def __init__(self, connector: str) -> None:
        self.connector = connector
        read_fd, write_fd = os.pipe()
        self.file: IO[str] = os.fdopen(write_fd, "w")
        self._reader = threading.Thread(target=self._read, args=(read_fd,), name=f"mcp-stderr:{connector}", daemon=True)
        self._window_start = time.monotonic()
        self._in_window = 0
        self._suppressed = 0
        #: Set by the event loop, read by the reader thread: a line read after it is
        #: withheld (one the command wrote just before may be too: never the other way).
        self._serving = threading.Event()
        self._withheld = 0
        self._withheld_said_at = 0.0
        self._reader.start()

    def session_ready(self) -> None:
        """The session is initialized: from now on the command serves members' calls,
        and its lines are counted, not logged."""
        self._withheld_said_at = time.monotonic()
        self._serving.set()

    def _read(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "r", encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                self.line(line.rstrip("\r\n"))
        self._say_suppressed()
        self._say_withheld()

    def line(self, text: str) -> None:
        """Log one line of the command's stderr, within the rate, while the session
        starts; count it once the session serves members."""
        if not text.strip():
            return
        now = time.monotonic()
        if self._serving.is_set():
            self._withheld += 1
            if now - self._withheld_said_at >= WITHHELD_SAID_EVERY:
                self._say_withheld()
            return
        if now - self._window_start >= 60:
            self._say_suppressed()
            self._window_start, self._in_window = now, 0
        if self._in_window >= LINES_PER_MINUTE:
            self._suppressed += 1
            return
        self._in_window += 1
        if len(text) > LINE_LIMIT:
            text = text[:LINE_LIMIT] + f"… ({len(text) - LINE_LIMIT} more characters)"
        log.info("connector %s: %s", self.connector, text)

    def _say_suppressed(self) -> None:
        if self._suppressed:
            log.info("connector %s: %d more lines of its stderr not logged (at most %d a minute)", self.connector, self._suppressed, LINES_PER_MINUTE)
            self._suppressed = 0

    def _say_withheld(self) -> None:
        if self._withheld:
            log.info("connector %s wrote %d lines to stderr; withheld: they may quote members' calls", self.connector, self._withheld)
            self._withheld = 0
            self._withheld_said_at = time.monotonic()

    def close(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass

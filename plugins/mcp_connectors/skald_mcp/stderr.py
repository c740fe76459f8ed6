"""A global stdio connector's stderr, as log lines of its own.

The SDK's ``stdio_client`` hands the command the host's own stderr by default: a
failing tool call printed some thirty bare traceback lines into Skald's log, with no
time, no logger and no connector's name, reading like a crash of Skald itself. The
command gets the write end of a pipe instead; a thread reads it and logs each line
through ``skald_mcp.stderr`` as ``connector <name>: <line>``, each line cut to
``LINE_LIMIT`` characters and at most ``LINES_PER_MINUTE`` lines a minute (the rest
counted and said in one line). A member's stdio connector runs in the sandbox, which
discards its stderr (README); this is only for the admin's own commands.
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
        self._reader.start()

    def _read(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "r", encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                self.line(line.rstrip("\r\n"))
        self._say_suppressed()

    def line(self, text: str) -> None:
        """Log one line of the command's stderr, within the rate."""
        if not text.strip():
            return
        now = time.monotonic()
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

    def close(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass

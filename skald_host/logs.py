"""Logging setup. Log lines carry ids and metadata only — never message text, memory,
passwords, keys or tokens (privacy is the product: the admin reads these files)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys

from skald_host.core.storage import secure_dir
from skald_host.settings import Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: Client libraries whose INFO and DEBUG lines carry what members wrote or chose: every
#: request's URL (httpx at INFO: a member's connector address, keys in its query
#: included), request bodies (openai at DEBUG: the messages), frames (websockets),
#: updates (python-telegram-bot). They log from WARNING up whatever ``log.level`` is.
PRIVATE_LIBRARY_LOGGERS = (
    "httpx", "httpx2", "httpcore", "httpcore2", "urllib3", "openai", "mcp", "websockets", "telegram", "hpack",
)


class LogFileHandler(logging.handlers.RotatingFileHandler):
    """The log file, which lives on the data dir's disk: when that disk is full (or
    failing) a line is lost, said once on stderr, not with a traceback per line."""

    _complained = False

    def handleError(self, record: logging.LogRecord) -> None:
        if not self._complained:
            self._complained = True
            error = sys.exc_info()[1]
            print(f"skald: cannot write the log file {self.baseFilename} ({error}); lines go to stderr only", file=sys.stderr)


def configure_logging(settings: Settings) -> None:
    root = logging.getLogger()
    root.setLevel(settings.log.level.upper())
    for name in PRIVATE_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    for handler in list(root.handlers):
        root.removeHandler(handler)
    stream = logging.StreamHandler()
    stream.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(stream)
    if settings.log.file is not None:
        path = settings.resolve(settings.log.file)
        secure_dir(path.parent)
        handler = LogFileHandler(path, maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8")
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
        os.chmod(path, 0o600)

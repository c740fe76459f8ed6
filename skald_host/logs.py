"""Logging setup. Log lines carry ids and metadata only — never message text, memory,
passwords, keys or tokens (privacy is the product: the admin reads these files)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys

from skald_host.core.storage import secure_dir
from skald_host.core.storage.permissions import make_private_dir
from skald_host.settings import Settings

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: Client libraries whose INFO and DEBUG lines carry what members wrote or chose: every
#: request's URL (httpx at INFO: a member's connector address, keys in its query
#: included), request bodies (openai at DEBUG: the messages), frames (websockets),
#: updates (python-telegram-bot). They log from WARNING up whatever ``log.level`` is, and
#: those lines keep only their place (``WithholdLibraryText``).
PRIVATE_LIBRARY_LOGGERS = (
    "httpx", "httpx2", "httpcore", "httpcore2", "urllib3", "openai", "mcp", "websockets", "telegram", "hpack",
)


def _private_library(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in PRIVATE_LIBRARY_LOGGERS)


class WithholdLibraryText(logging.Filter):
    """A private library's WARNING or ERROR line keeps its place, not its words: the mcp
    SDK logs a malformed message from a member's connector with ``logger.exception``, and
    the pydantic error under it quotes what the server said (``input_value={...}``); a
    library's template may be an f-string with a URL in it. The admin reads where it
    came from (logger, module and line) and the exception's type, nothing a member's
    connection carried. On each handler: a filter on the ``mcp`` logger would not see
    the records of its children."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _private_library(record.name) and not getattr(record, "skald_withheld", False):
            error = record.exc_info[1] if record.exc_info else None
            kind = f" ({type(error).__name__})" if error is not None else ""
            record.msg = f"a line from {record.module}:{record.lineno}{kind}, its text withheld (it may quote what a member's connection sent)"
            record.args = None
            record.exc_info = record.exc_text = record.stack_info = None
            record.skald_withheld = True  # one record, several handlers: rewritten once
        return True


class LogFileHandler(logging.handlers.RotatingFileHandler):
    """The log file, which lives on the data dir's disk: when that disk is full (or
    failing) a line is lost, said once on stderr, not with a traceback per line."""

    _complained = False

    def _open(self):  # type: ignore[no-untyped-def]
        """Every file this handler opens is 0600, the first and each one after a rollover
        alike (the logs name members and conversations by id): made with that mode, so no
        moment world-readable, and tightened if an older version left it wider."""
        stream = self._builtin_open(
            self.baseFilename, self.mode, encoding=self.encoding, errors=self.errors,
            opener=lambda path, flags: os.open(path, flags, 0o600),
        )
        os.fchmod(stream.fileno(), 0o600)
        return stream

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
    stream.addFilter(WithholdLibraryText())
    root.addHandler(stream)
    if settings.log.file is not None:
        path = settings.resolve(settings.log.file)
        try:
            if path.parent.resolve().is_relative_to(settings.data_dir.resolve()):
                secure_dir(path.parent)  # the data dir's own logs/ folder, private as the rest
            else:
                make_private_dir(path.parent)  # /tmp or /var/log: never chmod what is not ours
            handler = LogFileHandler(path, maxBytes=10 * 1024 * 1024, backupCount=5, encoding="utf-8")
        except OSError as exc:  # a read-only data dir, a path under /proc: one line, not a traceback
            from skald_host.core.host import StartupError

            raise StartupError(
                f"cannot write the log file {path}: {exc.strerror or exc}"
                " (set log.file to a path this user can write, or null to log to stderr only)"
            ) from None
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(WithholdLibraryText())
        root.addHandler(handler)

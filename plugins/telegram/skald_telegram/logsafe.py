"""The bot token in no log line, in any form, from any logger.

A Bot API URL carries the token (``/bot<token>/sendMessage``, ``/file/bot<token>/…``),
and libraries log URLs: httpx at INFO, httpcore and PTB at DEBUG, each on its own logger
and child loggers, sometimes percent-encoded (``4242%3AAAE…``, issue 25). A filter on a
logger sees only records of that very logger, and a handler filter only the handlers
that exist when it is added, so the redaction sits where every record is made: the
logging module's record factory. While a bot runs, each record's formatted message (and
its exception text) is searched for the token's secret half — the part after the colon,
made of URL-safe characters only, so raw, percent-encoded, double-encoded and quoted
forms all contain it verbatim — and the whole token and its encodings are replaced by
``<bot-token>``, any remaining secret half by ``<bot-token-secret>``. The factory
formats a record's message once more, only for records a logger lets through.
"""

from __future__ import annotations

import logging
import threading
import traceback
from typing import Callable
from urllib.parse import quote

REDACTED = "<bot-token>"
REDACTED_SECRET = "<bot-token-secret>"

_lock = threading.Lock()
_secrets: dict[str, tuple[str, ...]] = {}  # secret half -> full forms to replace first
_previous: Callable[..., logging.LogRecord] | None = None


def forms(token: str) -> tuple[str, ...]:
    """The token as it may appear in a log line (longest first)."""
    found = {token, quote(token, safe=""), quote(token, safe="").lower(), quote(quote(token, safe=""), safe="")}
    return tuple(sorted(found, key=len, reverse=True))


def secret_half(token: str) -> str:
    return token.split(":", 1)[1] if ":" in token else token


def redact(text: str) -> str:
    for secret, full in list(_secrets.items()):
        if secret in text:
            for form in full:
                text = text.replace(form, REDACTED)
            text = text.replace(secret, REDACTED_SECRET)
    return text


def _factory(*args, **kwargs) -> logging.LogRecord:  # noqa: ANN002, ANN003
    record = _previous(*args, **kwargs)  # type: ignore[misc]
    if not _secrets:
        return record
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: the handler reports it, as always
        return record
    cleaned = redact(message)
    if cleaned != message:
        record.msg, record.args = cleaned, ()
    if record.exc_info and record.exc_info[0] is not None:
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        cleaned = redact(text)
        if cleaned != text:
            record.exc_text = cleaned  # what a Formatter prints instead of re-formatting
    return record


def guard(token: str) -> None:
    """Redact ``token`` from every log record made from now on, for the rest of the
    process: a token the bot no longer uses is still a secret (a late record of a
    closing connection, a token changed on the settings page)."""
    global _previous
    if not token:
        return
    with _lock:
        _secrets[secret_half(token)] = forms(token)
        if _previous is None:
            _previous = logging.getLogRecordFactory()
            logging.setLogRecordFactory(_factory)

"""The audit trail of refusals (check C3): who was denied what, on the ``skald.audit``
logger, so an admin can find them in the log and a deployment can route them apart.

Metadata only, like every log line here: ids, names of actions and plugins, the route's
pattern and method. Never a request's body, a message, a path a member typed, or a token.
"""

from __future__ import annotations

import logging

log = logging.getLogger("skald.audit")

_FIELD_CHARS = 120


def denied(member_id: str | None, what: str, **context: str | None) -> None:
    """``what`` was refused to ``member_id`` (None: nobody signed in): ``action:<name>``
    for a capability, ``plugin:<id>`` for a plugin the member has no grant for.
    ``context``: where (``route``, ``method``, ``via``), each cut to a short token."""
    details = "".join(f" {key}={_token(value)}" for key, value in context.items() if value)
    log.warning("denied member=%s %s%s", member_id or "-", _token(what), details)


def _token(value: str) -> str:
    """One line, no spaces: a field cannot forge another field or another record."""
    return "".join(c if c.isprintable() and not c.isspace() else "_" for c in str(value)[:_FIELD_CHARS])

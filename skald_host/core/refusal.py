"""A refusal a person reads, in any language.

``code`` is stable: the web shell shows the string ``core.error.<code>`` in the
reader's language, filled with ``values``; the message stays the English text for the
log, the CLI and clients without strings. A refusal without a code is shown as its
message (the API then answers with the generic ``http_<status>`` code).
"""

from __future__ import annotations

from typing import Any


class Refusal(ValueError):
    def __init__(self, message: str, *, code: str | None = None, **values: Any) -> None:
        super().__init__(message)
        self.code = code
        self.values = values

"""A refusal a person reads, in any language.

``code`` is stable: the web shell shows the string ``core.error.<code>`` in the
reader's language, filled with ``values``; the message stays the English text for the
log, the CLI and clients without strings. A refusal without a code is shown as its
message (the API then answers with the generic ``http_<status>`` code).
"""

from __future__ import annotations

from typing import Any

from skald_hookspecs.types import ToolError


class Refusal(ValueError):
    def __init__(self, message: str, *, code: str | None = None, **values: Any) -> None:
        super().__init__(message)
        self.code = code
        self.values = values


class ToolRefusal(Refusal, ToolError):
    """A host tool's refusal: the model reads the English message (``Error: …``), and the
    kernel keeps ``code`` and ``values`` beside the result (``coded_result``) for the tool
    card and the export to word it in the reader's language, as a ``FileError`` is."""

    @classmethod
    def of(cls, exc: BaseException) -> "ToolRefusal":
        """``exc`` (a ``Refusal``, or any error: then without a code) as a tool's refusal."""
        return cls(str(exc), code=getattr(exc, "code", None), **dict(getattr(exc, "values", None) or {}))

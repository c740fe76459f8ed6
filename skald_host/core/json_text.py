"""Reading JSON that came from outside — a request body, a model's tool arguments —
with the limits both need, in one place.

``json.loads`` recurses once per level: ``"[" * 10000`` is a RecursionError, which is
no ValueError and escaped every ``except ValueError`` (a tool call's arguments failed
the whole turn). The depth is counted before parsing, so such text is refused cheaply.
A lone surrogate escape (``"\\ud800"``) parses into a Python str that no UTF-8 encoder
takes (RFC 7493 §2.1): SQLite, a hash, the next model request would fail on it later,
so it is refused here, where it can still be said what was wrong.
"""

from __future__ import annotations

import json
from typing import Any, Literal

MAX_DEPTH = 32

Problem = Literal["not_json", "too_deep", "not_text"]


class JsonRefused(ValueError):
    """JSON text refused; ``problem`` says why, for the caller to word."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.problem: Problem = problem


def depth_ok(text: str) -> bool:
    """Whether no array or object in ``text`` is nested deeper than ``MAX_DEPTH``
    (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def read_json(text: str) -> Any:
    """``text`` as JSON that UTF-8 can carry back out. Raises ``JsonRefused``."""
    if not depth_ok(text):
        raise JsonRefused("too_deep")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a raw lone surrogate in the text itself
        raise JsonRefused("not_text") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise JsonRefused("not_json") from None
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise JsonRefused("not_text") from None
    except (ValueError, RecursionError):
        raise JsonRefused("not_json") from None
    return data

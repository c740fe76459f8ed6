"""Reading JSON that came from outside — a request body, a model's tool arguments —
with the limits both need, in one place.

``json.loads`` recurses once per level: ``"[" * 10000`` is a RecursionError, which is
no ValueError and escaped every ``except ValueError`` (a tool call's arguments failed
the whole turn). The depth is counted before parsing, so such text is refused cheaply.
A lone surrogate escape (``"\\ud800"``) parses into a Python str that no UTF-8 encoder
takes (RFC 7493 §2.1): SQLite, a hash, the next model request would fail on it later,
so it is refused here, where it can still be said what was wrong. A request body may
also be held to one value per key (``unique_keys``): ``{"role": "member", "role":
"admin"}`` means whatever the last reader decides, and a proxy or a log that kept the
first would disagree with the route that kept the last.
"""

from __future__ import annotations

import json
from typing import Any, Literal

MAX_DEPTH = 32

Problem = Literal["not_json", "too_deep", "not_text", "duplicate_key"]


class JsonRefused(ValueError):
    """JSON text refused; ``problem`` says why, for the caller to word."""

    def __init__(self, problem: Problem, key: str | None = None) -> None:
        super().__init__(problem)
        self.problem: Problem = problem
        #: With ``duplicate_key``: the key given twice.
        self.key = key


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


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


def read_json(text: str, *, unique_keys: bool = False) -> Any:
    """``text`` as JSON that UTF-8 can carry back out; with ``unique_keys``, an object
    naming a key twice is refused. Raises ``JsonRefused``."""
    if not depth_ok(text):
        raise JsonRefused("too_deep")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a raw lone surrogate in the text itself
        raise JsonRefused("not_text") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique) if unique_keys else json.loads(text)
    except _DuplicateKey as duplicate:
        raise JsonRefused("duplicate_key", duplicate.key) from None
    except (ValueError, RecursionError):
        raise JsonRefused("not_json") from None
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise JsonRefused("not_text") from None
    except (ValueError, RecursionError):
        raise JsonRefused("not_json") from None
    return data

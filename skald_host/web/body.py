"""Reading request bodies defensively (check F4): a body that is not a JSON object,
is nested absurdly deep or is not UTF-8 is a 400 that says so, never a 500."""

from __future__ import annotations

import json
from typing import Any

from quart import request

from skald_host.web.errors import ApiError

MAX_DEPTH = 32


def _depth_ok(text: str) -> bool:
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


async def json_object() -> dict[str, Any]:
    raw = await request.get_data(as_text=False)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "request body must be UTF-8 JSON", code="body_invalid") from None
    if not _depth_ok(text):
        raise ApiError(400, f"request body is nested deeper than {MAX_DEPTH} levels", code="body_invalid")
    try:
        data = json.loads(text) if text.strip() else None
        # A lone surrogate ("\ud800") parses but is no text (RFC 7493 §2.1): a 400 here, not a 500 in SQLite/Argon2.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):
        raise ApiError(400, "request body is not valid JSON", code="body_invalid") from None
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object", code="body_invalid")
    return data


def field(data: dict[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = True, default: Any = None) -> Any:
    """One typed field of a JSON body; the error names the field and the expected type."""
    if name not in data or data[name] is None:
        if required:
            raise ApiError(400, f"'{name}' is required", field=name, code="field_required", values={"field": name})
        return default
    value = data[name]
    if isinstance(value, bool) and kind is not bool and (kind == int or (isinstance(kind, tuple) and bool not in kind)):
        raise ApiError(400, f"'{name}' has the wrong type", field=name, code="field_type", values={"field": name})
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        label = {"str": "text", "bool": "true or false", "int": "a whole number", "dict": "an object", "list": "a list"}
        raise ApiError(400, f"'{name}' must be {label.get(names, names)}", field=name, code="field_type", values={"field": name})
    return value

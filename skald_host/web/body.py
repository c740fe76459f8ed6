"""Reading request bodies defensively (check F4), and the one JSON reader of the API.

``loads`` is the only way a request's JSON becomes Python: the host's routes (through
``read_body`` and ``json_object``), a plugin's ``request.get_json()`` (through the app's
JSON provider) and the WebSocket's messages all use it. A body that is not UTF-8, is
nested absurdly deep, is not JSON or holds a number that is not finite (``NaN``,
``Infinity``, ``1e999``: JSON has no such numbers, and a stored one would make every
later answer invalid JSON) is a 400 that says so and names the field, never a 500.

A route declares its body with ``@accepts(schema)`` (a JSON Schema dict, from
``skald_hookspecs``): ``read_body`` validates every request against it before the view
runs, and ``skald_host.web.openapi`` publishes the same schema in the API reference, so
what is documented is what is checked. ``returns`` and ``query`` document a route's
answers and query parameters. ``dumps`` is the one writer: a non-finite number in an
answer goes out as ``null`` (logged with its path), never as invalid JSON.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import Any, Callable, Iterable

import orjson
from flask.json.provider import DefaultJSONProvider
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from quart import current_app, g, request

from skald_hookspecs import REQUEST_BODY_ATTRIBUTE, RESPONSES_ATTRIBUTE, accepts  # noqa: F401 - one marker for host and plugin views
from skald_host.core.identity.access import allowed
from skald_host.core.json_text import MAX_DEPTH, JsonRefused, read_json
from skald_host.web.errors import ApiError

log = logging.getLogger(__name__)

JSON = "application/json"
QUERY_ATTRIBUTE = "_skald_query"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_UNREAD = object()


class BodyError(ValueError):
    """A request body the API refuses: ``field`` is the path to the offending value
    (``"config.limits[2]"``), or None when the body as a whole is wrong."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def api_error(self) -> ApiError:
        if self.field is None:
            return ApiError(400, self.message, code="body_invalid")
        return ApiError(400, self.message, field=self.field, code="field_invalid", values={"field": self.field})


def path_label(parts: Iterable[Any]) -> str:
    """``["config", "limits", 2]`` → ``config.limits[2]``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def non_finite_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Where ``value`` holds a float that is NaN or infinite, outermost first."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in non_finite_paths(item, (*path, key))]
    if isinstance(value, (list, tuple)):
        return [found for index, item in enumerate(value) for found in non_finite_paths(item, (*path, index))]
    return []


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (for answers)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def loads(raw: str | bytes) -> Any:
    """The API's one JSON reader; an empty body is None. Raises ``BodyError``."""
    if not isinstance(raw, (str, bytes, bytearray)):  # a WebSocket frame may carry nothing at all
        raise BodyError("request body is not valid JSON")
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError("request body must be UTF-8 JSON") from None
    if not raw.strip():
        return None
    try:
        # A lone surrogate ("\ud800") parses but is no text (RFC 7493 §2.1): a 400 here, not a 500 in SQLite/Argon2.
        data = read_json(raw, unique_keys=True)
    except JsonRefused as refused:
        if refused.problem == "too_deep":
            raise BodyError(f"request body is nested deeper than {MAX_DEPTH} levels") from None
        if refused.problem == "duplicate_key":
            raise BodyError(f"request body names '{refused.key}' twice: send each key once", field=refused.key) from None
        raise BodyError("request body is not valid JSON") from None
    bad = non_finite_paths(data)
    if bad:
        if not bad[0]:
            raise BodyError("request body must be JSON: NaN and Infinity are not numbers JSON knows")
        name = path_label(bad[0])
        raise BodyError(f"'{name}' must be a finite number: NaN and Infinity are not JSON", field=name)
    return data


def dumps(value: Any, **kwargs: Any) -> str:
    """The API's one JSON writer: always valid JSON (RFC 8259 has no NaN)."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:
        bad = non_finite_paths(value)
        if not bad:
            raise
        log.warning("an answer held a number that is not finite at %s; sent as null", ", ".join(path_label(p) or "(top)" for p in bad[:5]))
        return json.dumps(finite(value), allow_nan=False, **kwargs)


class JSONProvider(DefaultJSONProvider):
    """The app's JSON: ``request.get_json()`` (a plugin's routes) reads with ``loads``,
    every answer is written with ``dumps`` (a large one with orjson: ``response``)."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("default", self.default)
        kwargs.setdefault("ensure_ascii", self.ensure_ascii)
        kwargs.setdefault("sort_keys", self.sort_keys)
        return dumps(obj, **kwargs)

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads(s)

    def response(self, *args: Any, **kwargs: Any) -> Any:
        """An answer a route returns as a dict or list. A large one (past
        ``ORJSON_ANSWER_BYTES``: a long conversation's messages) is encoded with orjson:
        the standard library's encoder took ~48 ms for one of 5,000 messages, on the
        event loop, stalling every other member's request meanwhile (a scale probe: their
        p90 47 ms, 579 ms with five such opens); orjson takes a sixth of it. The same
        JSON: keys sorted, as ``sort_keys`` sorted them (code point order, which is
        UTF-8's byte order), dates, decimals and dataclasses through ``default`` as before
        (``PASSTHROUGH``), text as UTF-8 where ``ensure_ascii`` escaped it (the same JSON
        value), a non-finite number as ``null`` as ``dumps`` writes it (unlogged there:
        finding one would cost more than the standard library's encoding).

        A smaller answer, what orjson refuses (a lone surrogate, an integer past 64 bits,
        a key that is not text) and the indented answers of debug mode are written by
        ``dumps``, as every answer was (orjson's try first costs a few microseconds)."""
        if (self.compact is None and self._app.debug) or self.compact is False:
            return super().response(*args, **kwargs)
        obj = self._prepare_response_obj(args, kwargs)
        try:
            encoded = orjson.dumps(obj, default=self.default, option=ORJSON_RESPONSE_OPTIONS)
        except orjson.JSONEncodeError:
            return super().response(obj)
        if len(encoded) < ORJSON_ANSWER_BYTES:
            return super().response(obj)
        return self._app.response_class(encoded, mimetype=self.mimetype)


#: From this size on an answer is written by orjson (``JSONProvider.response``); below
#: it the standard library's ~1 ms (what a 64 KiB answer costs it) is no stall.
ORJSON_ANSWER_BYTES = 64 * 1024

#: The answers' orjson options: sorted keys and a final newline, as ``response`` wrote
#: them; dates and dataclasses left to ``default`` (an HTTP date and ``asdict``, as before).
ORJSON_RESPONSE_OPTIONS = (
    orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def json_error_request_class(base: type) -> type:
    """The request class with ``get_json()``'s refusals as the API's 400 (naming the
    field), instead of a bare "bad request"."""

    class JsonRequest(base):  # type: ignore[misc, valid-type]
        async def get_json(self, force: bool = False, silent: bool = False, cache: bool = True) -> Any:
            # Quart decodes the body as text before its try: a body that is not UTF-8
            # escaped as a UnicodeDecodeError, a 500 (and ``silent`` did not catch it).
            if force or self.is_json:
                try:
                    (await self.get_data(cache=cache, as_text=False)).decode("utf-8")
                except UnicodeDecodeError:
                    if silent:
                        return None
                    raise BodyError("request body must be UTF-8 JSON").api_error() from None
            return await super().get_json(force=force, silent=silent, cache=cache)

        def on_json_loading_failed(self, error: Exception) -> Any:
            if isinstance(error, BodyError):
                raise error.api_error()
            return super().on_json_loading_failed(error)

    JsonRequest.__name__ = base.__name__
    return JsonRequest


# -- declared bodies ---------------------------------------------------------------------


def _view() -> Any:
    rule = request.url_rule
    return current_app.view_functions.get(rule.endpoint) if rule is not None else None


def declared_body(view: Any) -> tuple[dict[str, Any], str] | None:
    return getattr(view, REQUEST_BODY_ATTRIBUTE, None)


async def read_body() -> None:
    """``before_request`` after the gate: read and check the body of every write to a
    host ``/api`` route, and of a plugin route that declared one. A declared raw body
    (an upload) is left to its view, which streams it."""
    if request.method not in WRITE_METHODS or not request.path.startswith("/api/"):
        return
    view = _view()
    if view is None:
        return
    declared = declared_body(view)
    if declared is not None and declared[1] != JSON:
        return
    if declared is None and request.path.startswith("/api/plugin/"):
        return  # the plugin reads its own body (through ``loads``, by get_json)
    action = getattr(view, "_skald_action", None)
    principal = g.get("principal")
    if action is not None and principal is not None and not allowed(principal.member, action):
        return  # refused by the view's own gate (403) before anything of its body is judged
    try:
        data = loads(await _json_body())
    except BodyError as exc:
        raise exc.api_error() from None
    g._skald_body = data
    if declared is not None:
        check(data, declared[0])


#: A request answered before its body was read (the gate's 401 or 403, a disabled
#: plugin's 404) still has that body on its way. Unread, the server drops the connection
#: after the answer without saying ``Connection: close``, and the client's next request
#: on it fails with no answer at all (a browser whose session expired met a network
#: error instead of the 401 that sends it to sign-in). A small body is read and dropped,
#: keeping the connection; a large one is not (an unsigned request must not make the
#: server take megabytes), and the answer says the connection closes.
DRAIN_BYTES = 64 * 1024
DRAIN_SECONDS = 2.0


async def settle_unread_body(response: Any) -> Any:
    """``after_request``: see ``DRAIN_BYTES``."""
    length, chunked = request.content_length, "chunked" in request.headers.get("Transfer-Encoding", "").lower()
    if not length and not chunked:
        return response
    complete = getattr(request.body, "_complete", None)  # Quart's ``Body``: set once the whole body came
    if complete is None or complete.is_set():
        return response
    if length is not None and length <= DRAIN_BYTES:
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                await request.body
            return response
        except Exception:  # too slow, or more than it said: not worth keeping the connection
            pass
    response.headers["Connection"] = "close"
    return response


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    cache = current_app.extensions.setdefault("skald_validators", {})
    key = id(schema)
    entry = cache.get(key)
    if entry is None or entry[0] is not schema:
        entry = cache[key] = (schema, Draft202012Validator(schema))
    return entry[1]


_TYPE_WORDS = {
    "string": "text",
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
    "object": "an object",
    "array": "a list",
}


def _message(error: ValidationError) -> tuple[str, str | None, str, dict[str, Any]]:
    """The English message, the field's path, and the code and values the shell shows
    in the reader's language (``core.error.<code>``)."""
    path = list(error.absolute_path)
    name = path_label(path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    at = {"field": name}
    custom = schema.get("x-message")
    if custom:
        key = str(error.instance)[:64] if isinstance(error.instance, str) else ""
        return custom.format(name=name, key=repr(key)), name or None, "field_invalid", at
    kind = error.validator
    if kind == "required":
        missing = next(p for p in error.validator_value if p not in error.instance)
        name = path_label([*path, missing])
        return f"'{name}' is required", name, "field_required", {"field": name}
    if kind == "additionalProperties":
        known = set(schema.get("properties", {}))
        unknown = sorted(str(k) for k in error.instance if k not in known)
        where = path_label([*path, unknown[0]]) if unknown else name or None
        return f"unknown field(s): {', '.join(unknown)}", where, "field_invalid", {"field": where or ""}
    if not path:
        return "request body must be a JSON object", None, "body_invalid", {}
    low, high = schema.get("minimum"), schema.get("maximum")
    types = schema.get("type")
    between = "integer" in (types if isinstance(types, list) else [types]) and low is not None and high is not None
    if between and kind in ("type", "minimum", "maximum"):
        if kind == "type" and error.instance is None:
            return f"'{name}' is required", name, "field_required", at
        return f"'{name}' must be a whole number from {low} to {high}", name, "number_between", {**at, "low": low, "high": high}
    if kind == "type":
        if error.instance is None:
            return f"'{name}' is required", name, "field_required", at
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        words = [_TYPE_WORDS[t] for t in wanted if t in _TYPE_WORDS]
        return f"'{name}' must be {' or '.join(words)}", name, "field_type", at
    if kind in ("enum", "const"):
        values = error.validator_value if kind == "enum" else [error.validator_value]
        shown = [repr(v) if isinstance(v, str) else json.dumps(v) for v in values]
        text = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
        return f"'{name}' must be {text}", name, "field_invalid", at
    if kind == "maxLength":
        limit = error.validator_value
        if schema.get("minLength") == 1:
            return f"'{name}' is longer than {limit} characters", name, "length_between", {**at, "limit": limit}
        return f"'{name}' is longer than {limit} characters", name, "too_long", {"limit": limit}
    if kind == "minLength":
        if error.validator_value == 1:
            return f"'{name}' must not be empty", name, "empty", at
        return f"'{name}' is shorter than {error.validator_value} characters", name, "field_invalid", at
    if kind in ("minimum", "maximum"):
        if low is not None and high is not None:
            return f"'{name}' must be from {low} to {high}", name, "field_invalid", at
        return (f"'{name}' must be at least {low}" if low is not None else f"'{name}' must be at most {high}"), name, "field_invalid", at
    if kind == "maxItems":
        return f"'{name}' has more than {error.validator_value} items", name, "field_invalid", at
    return f"'{name}' is not valid", name, "field_invalid", at


def check(data: Any, schema: dict[str, Any]) -> None:
    """Raise the API's 400 for the most relevant way ``data`` misses ``schema``."""
    error = best_match(_validator(schema).iter_errors(data))
    if error is not None:
        message, field_name, code, values = _message(error)
        raise ApiError(400, message, field=field_name, code=code, values=values or None)


async def _json_body() -> bytes:
    """The request's body, refused (415) unless it says it is JSON: a form or a
    ``text/plain`` body is what a page of another site can send without asking first,
    so a JSON route takes none of them, whatever its other defences (check A4)."""
    raw = await request.get_data(as_text=False)
    mimetype = request.mimetype
    if raw.strip() and mimetype != "application/json" and not mimetype.endswith("+json"):
        raise ApiError(
            415, f"request body must be sent as JSON (Content-Type: application/json), not {mimetype or 'without a type'}",
            code="body_not_json",
        )
    return raw


async def json_object() -> dict[str, Any]:
    data = g.get("_skald_body", _UNREAD)
    if data is _UNREAD:
        try:
            data = loads(await _json_body())
        except BodyError as exc:
            raise exc.api_error() from None
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


# -- writing schemas ------------------------------------------------------------------------
# Small builders for the JSON Schemas routes declare, so a route's spec reads like its
# body. Optional fields also accept null: ``field()`` treats null as "not given".

TEXT: dict[str, Any] = {"type": "string"}
BOOL: dict[str, Any] = {"type": "boolean"}
INT: dict[str, Any] = {"type": "integer"}
NUMBER: dict[str, Any] = {"type": "number"}
ANY: dict[str, Any] = {}
OBJECT: dict[str, Any] = {"type": "object"}
ID: dict[str, Any] = {"type": "string", "description": "an id"}
TIME: dict[str, Any] = {"type": "string", "description": "a UTC time, ISO 8601"}


def text(max_length: int | None = None, *, min_length: int | None = None, description: str | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", **extra}
    if max_length is not None:
        schema["maxLength"] = max_length
    if min_length is not None:
        schema["minLength"] = min_length
    if description:
        schema["description"] = description
    return schema


def integer(minimum: int | None = None, maximum: int | None = None, *, description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    if description:
        schema["description"] = description
    return schema


def one_of(*values: Any, description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": list(values)}
    if description:
        schema["description"] = description
    return schema


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if "enum" in schema:
        return {**schema, "enum": [*schema["enum"], *([None] if None not in schema["enum"] else [])]}
    if "type" not in schema:
        return schema
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*types, *(["null"] if "null" not in types else [])]}


def array(items: dict[str, Any], *, max_items: int | None = None, description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if max_items is not None:
        schema["maxItems"] = max_items
    if description:
        schema["description"] = description
    return schema


def obj(
    required: dict[str, dict[str, Any]] | None = None,
    optional: dict[str, dict[str, Any]] | None = None,
    *,
    extra: bool | dict[str, Any] = True,
    description: str | None = None,
) -> dict[str, Any]:
    """An object schema. ``extra=False``: unknown fields are refused (as the routes that
    pass the body on as keyword arguments do)."""
    properties = {**(required or {}), **{k: nullable(v) for k, v in (optional or {}).items()}}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if extra is not True:
        schema["additionalProperties"] = extra
    if description:
        schema["description"] = description
    return schema


def ref(name: str) -> dict[str, Any]:
    """A response schema from ``openapi.COMPONENTS`` (responses only: request schemas
    stay inline, so the validator needs nothing but the schema itself)."""
    return {"$ref": f"#/components/schemas/{name}"}


#: A raw file as the request body (an upload): documented, streamed by its view.
UPLOAD: dict[str, Any] = {"type": "string", "contentMediaType": "application/octet-stream", "description": "the file's bytes, any type"}


def returns(
    schema: dict[str, Any], status: int = 200, description: str | None = None, *, content_types: tuple[str, ...] = (JSON,),
) -> Callable[[Any], Any]:
    """Document one answer of a route view (status, JSON Schema, and the media types
    it comes as: a download may be Markdown as well as JSON)."""

    def mark(view: Any) -> Any:
        responses = dict(getattr(view, RESPONSES_ATTRIBUTE, {}))
        responses[status] = (schema, description, content_types)
        setattr(view, RESPONSES_ATTRIBUTE, responses)
        return view

    return mark


def query(**params: dict[str, Any]) -> Callable[[Any], Any]:
    """Document a route view's query parameters (all optional unless a schema says
    ``"x-required": True``)."""

    def mark(view: Any) -> Any:
        setattr(view, QUERY_ATTRIBUTE, {**getattr(view, QUERY_ATTRIBUTE, {}), **params})
        return view

    return mark

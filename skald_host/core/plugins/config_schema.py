"""Validating and masking config values against a ``ConfigField`` schema.

One implementation for instance config, per-member config and settings sets. Secrets
are write-only: they are stored, handed to the plugin, and only ever come back as
``MASK``; sending ``MASK`` (or leaving the field out) keeps the stored value.

A schema itself is checked when the plugin registers it (``check_schema``): a field of
an unknown type would be validated as text, a choice without choices could never be
saved, a default outside its bounds is a value the admin could not save back, and two
fields of one name would share one stored value.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from typing import Any, Iterable, Mapping, get_args, get_type_hints
from urllib.parse import urlsplit

from skald_hookspecs.types import ConfigField
from skald_host.core.i18n import number_text
from skald_host.core.refusal import Refusal

MASK = "********"
MAX_TEXT = 4096


class ConfigInvalid(Refusal):
    """A value was refused; the message names the field and the reason, the code
    (``config_<why>``) says the reason in any language. ``problems``: this refusal and
    those of the other fields refused with it (``validate`` checks them all), so a form
    can mark every bad field after one save, not one per save."""

    def __init__(self, field: str, reason: str, why: str = "invalid", **values: Any) -> None:
        super().__init__(f"{field}: {reason}", code=f"config_{why}", **values)
        self.field = field
        self.reason = reason
        self.problems: list[ConfigInvalid] = [self]


#: The field types a schema may use, read from the contract's own ``Literal``.
FIELD_TYPES: tuple[str, ...] = get_args(get_type_hints(ConfigField)["type"])


class SchemaInvalid(ValueError):
    """A ``ConfigField`` schema a plugin declared cannot work; the message names the
    schema and the field, and says what to change."""


def check_schema(fields: Any, where: str) -> None:
    """Refuse a schema that cannot work as declared. ``where`` names it in the message
    (``config_schema``, ``settings set 'x'``)."""
    if not isinstance(fields, (tuple, list)):
        raise SchemaInvalid(f"{where} must be a tuple of ConfigField, not {type(fields).__name__}")
    seen: set[str] = set()
    for field in fields:
        if not isinstance(field, ConfigField):
            raise SchemaInvalid(f"{where}: {field!r} is not a ConfigField")
        problem = _schema_problem(field)
        if problem:
            raise SchemaInvalid(f"{where}: field {field.name!r} {problem}")
        if field.name in seen:
            raise SchemaInvalid(f"{where}: field {field.name!r} is declared twice: give each field a name of its own")
        seen.add(field.name)


def _schema_problem(field: ConfigField) -> str | None:
    if not isinstance(field.name, str) or not field.name.strip():
        return "has no name: the first argument of ConfigField is the field's name"
    if field.type not in FIELD_TYPES:
        near = difflib.get_close_matches(str(field.type), FIELD_TYPES, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        return f"has the unknown type {field.type!r}{hint}: use one of {', '.join(FIELD_TYPES)}"
    if field.type == "choice":
        if not isinstance(field.choices, (tuple, list)) or not field.choices:
            return "is a choice without choices: give choices=(...), the values the admin may pick"
        if not all(isinstance(choice, str) for choice in field.choices):
            return "has a choice that is not text: every choice must be a str"
    # A rule the field's type does not use was ignored without a word (a maximum on a
    # text, a max_length on a number): the admin would be held to nothing the plugin meant.
    if field.choices and field.type != "choice":
        return f"has choices but is of type {field.type!r}: choices are the values of a field of type 'choice'"
    for rule in ("minimum", "maximum"):
        if getattr(field, rule) is not None and field.type not in ("integer", "number"):
            return f"has a {rule} but is of type {field.type!r}: minimum and maximum bound an integer or number field"
    if field.max_length is not None and field.type not in ("string", "url"):
        return f"has a max_length but is of type {field.type!r}: max_length limits the text of a string or url field"
    for bound in ("minimum", "maximum"):
        value = getattr(field, bound)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
            return f"has a {bound} that is not a number: {value!r}"
    if field.minimum is not None and field.maximum is not None and field.minimum > field.maximum:
        return f"has minimum {field.minimum:g} above its maximum {field.maximum:g}"
    if field.max_length is not None and (isinstance(field.max_length, bool) or not isinstance(field.max_length, int) or field.max_length < 1):
        return f"has max_length {field.max_length!r}: give a whole number of at least 1"
    if field.pattern is not None:
        if field.type not in ("string", "url"):
            return f"has a pattern but is of type {field.type!r}: a pattern checks the text of a string or url field"
        try:
            re.compile(field.pattern) if isinstance(field.pattern, str) else None
        except re.error as exc:
            return f"has a pattern that is no regular expression ({exc}): {field.pattern!r}"
        if not isinstance(field.pattern, str):
            return f"has the pattern {field.pattern!r}: give a regular expression as text"
        if not (isinstance(field.description, str) and field.description.strip()):
            return "has a pattern but no description: say the form it asks for in words there (a refused value points at it)"
    if field.default is not None:
        try:  # the default is a value like any other: one the admin could not save back is a bug
            _check(dataclasses.replace(field, required=False), field.default)
        except ConfigInvalid as exc:
            return f"has the default {field.default!r}, which its own checks refuse ({exc.reason}): change the default or the field"
    return None


def _check(field: ConfigField, value: Any) -> Any:
    name = field.name
    kind = field.type
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ConfigInvalid(name, "must be true or false", "boolean")
        return value
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigInvalid(name, "must be a number", "number")
        # Python's JSON parser accepts NaN and Infinity; NaN passes every bound (each
        # comparison is false) and neither can be sent back as JSON a browser parses.
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigInvalid(name, "must be a finite number", "number")
        if kind == "integer" and (isinstance(value, float) and not value.is_integer()):
            raise ConfigInvalid(name, "must be a whole number", "integer")
        value = int(value) if kind == "integer" else float(value)
        # The bound as the form's hint says it ("Between 1 and 1,000"), in the reader's
        # number format where a client says it (``<name>_number``: ``i18n.sized``).
        if field.minimum is not None and value < field.minimum:
            low = number_text(field.minimum)
            raise ConfigInvalid(name, f"must be at least {low}", "minimum", minimum=low, minimum_number=field.minimum)
        if field.maximum is not None and value > field.maximum:
            high = number_text(field.maximum)
            raise ConfigInvalid(name, f"must be at most {high}", "maximum", maximum=high, maximum_number=field.maximum)
        return value
    if not isinstance(value, str):
        raise ConfigInvalid(name, "must be text", "text")
    limit = field.max_length or MAX_TEXT
    if len(value) > limit:
        raise ConfigInvalid(name, f"must be at most {limit} characters", "too_long", limit=limit)
    if kind == "choice" and value not in field.choices:
        raise ConfigInvalid(name, f"must be one of {', '.join(field.choices)}", "choice", choices=", ".join(field.choices))
    if kind == "url" and value and not _is_http_url(value):
        raise ConfigInvalid(name, "must be an http(s) URL", "url")
    if field.pattern is not None and value and re.fullmatch(field.pattern, value) is None:
        raise ConfigInvalid(name, "does not have the form its hint describes", "pattern")
    if field.required and not value.strip():
        raise ConfigInvalid(name, "is required", "required")
    return value


def _is_http_url(value: str) -> bool:
    """An http(s) URL with a host and, if any, a port from 1 to 65535. ``urlsplit``
    raises on what it cannot take apart ('http://[::1'), as does reading a port outside
    its range: both were a 500 instead of the field's refusal. It drops tabs and line
    breaks silently, so any blank in the text is refused before: the stored value
    would keep them ('http://exa mple.org' is no address)."""
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        return False
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and port != 0


def stale(fields: Iterable[ConfigField], stored: Mapping[str, Any] | None, *, keep_unknown: bool = False) -> list[str]:
    """The stored fields the current schema refuses, by name, in the stored order: a
    value its checks refuse (a plugin's new version lowered a maximum, turned a choice
    into a number) and, unless ``keep_unknown``, a field it no longer has. What a
    plugin reads has them as their defaults (``current``); a save drops them."""
    schema = {f.name: f for f in fields}
    out = []
    for name, value in (stored or {}).items():
        field = schema.get(name)
        if field is None:
            if not keep_unknown:
                out.append(name)
            continue
        if value is None:
            continue
        try:
            _check(dataclasses.replace(field, required=False), value)
        except ConfigInvalid:
            out.append(name)
    return out


def accepted(fields: Iterable[ConfigField], stored: Mapping[str, Any] | None, *, keep_unknown: bool = False) -> dict[str, Any]:
    """``stored`` without what the current schema refuses (``stale``): the stored
    values as a plugin reads them and a save starts from."""
    fields = tuple(fields)
    refused = set(stale(fields, stored, keep_unknown=keep_unknown))
    return {name: value for name, value in (stored or {}).items() if name not in refused}


def current(fields: Iterable[ConfigField], stored: Mapping[str, Any] | None, *, keep_unknown: bool = False) -> dict[str, Any]:
    """What a plugin reads: the accepted stored values over the fields' defaults, so
    every value satisfies the schema of the version running now. The stored value the
    schema refuses stays stored until a save (a downgrade finds it again)."""
    fields = tuple(fields)
    defaults = {f.name: f.default for f in fields if f.default is not None}
    return {**defaults, **accepted(fields, stored, keep_unknown=keep_unknown)}


def validate(
    fields: Iterable[ConfigField], values: Any, existing: Mapping[str, Any] | None = None, *, keep_unknown: bool = False
) -> dict[str, Any]:
    """The new stored config: ``existing`` updated with ``values``. Unknown keys and
    bad values are refused whole (nothing half-written): the first refusal is raised,
    carrying every field's (``problems``: unknown keys, then in the schema's order).
    The merged result is what is checked, not only the fields sent: a stored value the
    current schema refuses, or of a field it no longer has (``stale``), is not carried
    over, so the field falls back to its default (what the plugin already read) and a
    required one without a default must be sent. ``keep_unknown``: stored keys outside
    the schema are carried over (per-member config, where ``set_user_config`` may keep
    the plugin's own)."""
    if not isinstance(values, Mapping):
        raise ConfigInvalid("config", "must be an object of field values", "object")
    fields = tuple(fields)
    schema = {f.name: f for f in fields}
    problems = [ConfigInvalid(name, "is not a setting of this plugin", "unknown") for name in sorted(set(values) - set(schema))]
    result = accepted(fields, existing, keep_unknown=keep_unknown)
    for field in schema.values():
        try:
            if field.name in values:
                _take(field, values[field.name], result)
            if field.required and result.get(field.name) in (None, "") and field.default in (None, ""):
                raise ConfigInvalid(field.name, "is required", "required")
        except ConfigInvalid as problem:
            problems.append(problem)
    if problems:
        problems[0].problems = problems
        raise problems[0]
    return result


def _take(field: ConfigField, value: Any, result: dict[str, Any]) -> None:
    """``value`` into ``result``: ``None`` removes the field's value, a secret's ``MASK``
    keeps the stored one."""
    if field.secret and value == MASK:
        return
    if value is None:
        if field.required:
            raise ConfigInvalid(field.name, "is required", "required")
        result.pop(field.name, None)
        return
    result[field.name] = _check(field, value)


def masked(fields: Iterable[ConfigField], values: Mapping[str, Any]) -> dict[str, Any]:
    """Values safe to send to a browser: secrets replaced by MASK (or None when unset),
    defaults filled in for display."""
    fields = tuple(fields)
    values = accepted(fields, values)  # a refused stored value shows as the default it reads as
    out: dict[str, Any] = {}
    for field in fields:
        value = values.get(field.name, field.default)
        if field.secret:
            out[field.name] = MASK if values.get(field.name) not in (None, "") else None
        else:
            out[field.name] = value
    return out


def schema_json(fields: Iterable[ConfigField]) -> list[dict[str, Any]]:
    return [
        {
            "name": f.name,
            "type": f.type,
            "label": f.label or f.name,
            "description": f.description,
            "default": None if f.secret else f.default,
            "required": f.required,
            "secret": f.secret,
            "choices": list(f.choices),
            "minimum": f.minimum,
            "maximum": f.maximum,
            "max_length": f.max_length,
            "pattern": f.pattern,
        }
        for f in fields
    ]

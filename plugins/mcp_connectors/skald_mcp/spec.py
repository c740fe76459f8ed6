"""What an admin may say about a connector, checked before anything is stored or started.

A connector is one MCP server: ``stdio`` (a command the host starts, given as an argv
array and never through a shell) or ``http`` (a streamable-HTTP endpoint). Its name
becomes the prefix of its tools' names, ``<name>__<tool>``, so it is short and plain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

NAME = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,128}$")
MAX_ARGS = 64
MAX_VALUE = 4096
TRANSPORTS = ("stdio", "http")
#: The separator of ``<connector>__<tool>``: a connector name cannot contain it.
SEPARATOR = "__"


class SpecError(ValueError):
    """Bad input, with a message that says what was wrong (shown as it is)."""


@dataclass(frozen=True)
class ServerSpec:
    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "url": self.url,
            "headers": dict(self.headers),
        }

    def public(self) -> dict[str, Any]:
        """For the admin's page: environment values and headers are write-only (they
        often hold API keys), so only their names come back."""
        out = self.as_json()
        out["env"] = {k: "********" for k in self.env}
        out["headers"] = {k: "********" for k in self.headers}
        return out


def _strings(value: Any, what: str, *, limit: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{what} must be a list of strings")
    if len(value) > limit:
        raise SpecError(f"{what} may have at most {limit} items")
    for item in value:
        if len(item) > MAX_VALUE or "\x00" in item:
            raise SpecError(f"{what}: an item is too long or contains a NUL byte")
    return tuple(value)


def _mapping(value: Any, what: str, key: re.Pattern[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{what} must be an object of names to strings")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not key.match(k):
            raise SpecError(f"{what}: {k!r} is not a valid name")
        if not isinstance(v, str) or len(v) > MAX_VALUE or "\x00" in v or "\n" in v:
            raise SpecError(f"{what}: the value of {k!r} must be a single-line string of at most {MAX_VALUE} characters")
        out[k] = v
    return out


def parse_spec(body: Any, *, keep: ServerSpec | None = None) -> ServerSpec:
    """A spec from an admin's JSON body. ``keep``: the stored spec being edited, whose
    masked secrets (``"********"``) stand for the values already stored."""
    if not isinstance(body, dict):
        raise SpecError("the body must be a JSON object")
    unknown = set(body) - {"name", "transport", "command", "args", "env", "url", "headers"}
    if unknown:
        raise SpecError(f"unknown field(s): {', '.join(sorted(unknown))}")
    name = body.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise SpecError("name must be 1-24 lower-case letters, digits or '-', starting with a letter")
    transport = body.get("transport")
    if transport not in TRANSPORTS:
        raise SpecError(f"transport must be one of {', '.join(TRANSPORTS)}")
    env = _mapping(body.get("env"), "env", ENV_NAME)
    headers = _mapping(body.get("headers"), "headers", HEADER_NAME)
    if keep is not None:
        env = {k: keep.env.get(k, "") if v == "********" else v for k, v in env.items()}
        headers = {k: keep.headers.get(k, "") if v == "********" else v for k, v in headers.items()}
    if transport == "stdio":
        command = body.get("command")
        if not isinstance(command, str) or not command.strip() or len(command) > MAX_VALUE or "\x00" in command:
            raise SpecError("a stdio connector needs a command (the program to start, without arguments)")
        if body.get("url") or body.get("headers"):
            raise SpecError("url and headers are for http connectors")
        return ServerSpec(name, transport, command=command, args=_strings(body.get("args"), "args", limit=MAX_ARGS), env=env)
    url = body.get("url")
    if not isinstance(url, str) or len(url) > MAX_VALUE:
        raise SpecError("an http connector needs a url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError("url must be an http:// or https:// address")
    if parts.username or parts.password:
        raise SpecError("put credentials in a header, not in the url")
    if body.get("command") or body.get("args") or body.get("env"):
        raise SpecError("command, args and env are for stdio connectors")
    return ServerSpec(name, transport, url=url, headers=headers)


def spec_from_json(data: Mapping[str, Any]) -> ServerSpec:
    return ServerSpec(
        name=data["name"],
        transport=data["transport"],
        command=data.get("command", ""),
        args=tuple(data.get("args") or ()),
        env=dict(data.get("env") or {}),
        url=data.get("url", ""),
        headers=dict(data.get("headers") or {}),
    )


TOOL_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` as the model sees it: characters a tool name may not have
    become ``_``, and the whole is cut to 64 (the host's limit)."""
    return f"{server}{SEPARATOR}{TOOL_CHARS.sub('_', tool)}"[:64]

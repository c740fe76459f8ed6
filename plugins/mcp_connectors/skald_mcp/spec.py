"""What an admin may say about a connector, checked before anything is stored or started.

A connector is one MCP server: ``stdio`` (a command the host starts, given as an argv
array and never through a shell) or ``http`` (a streamable-HTTP endpoint). Its name
becomes the prefix of its tools' names, ``<name>__<tool>``, so it is short and plain.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

NAME = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,128}$")
#: Headers the connection itself sets (HTTP framing, the hop, the MCP session), never a
#: connector's, the admin's or a member's: ``Host`` would address another virtual host
#: at the address the SSRF check approved (guard.py), the framing ones would split or
#: smuggle requests, and the MCP ones would hijack or break the session the SDK keeps.
#: Compared case-insensitively, as HTTP does; every ``Proxy-*`` too (a credential for a
#: proxy has no business at the server). ``Authorization`` and ``Cookie`` stay: they are
#: how a server is signed in to.
TRANSPORT_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "content-type", "content-encoding", "connection", "keep-alive",
    "upgrade", "te", "trailer", "expect", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id",
})


def transport_header(name: str) -> bool:
    """Whether ``name`` is one the connection sets itself (``TRANSPORT_HEADERS``)."""
    lowered = name.lower()
    return lowered in TRANSPORT_HEADERS or lowered.startswith("proxy-")
MAX_ARGS = 64
MAX_VALUE = 4096
TRANSPORTS = ("stdio", "http")
#: The separator of ``<connector>__<tool>``: a connector name cannot contain it.
SEPARATOR = "__"


class SpecError(ValueError):
    """Bad input, with a message that says what was wrong. With a ``code`` the message
    is the string ``err_<code>`` of strings.py, so the routes can answer it in the
    caller's language (``str()`` stays English, for logs and tests); ``field`` names
    the input at fault, for the page to focus. Without one it is shown as it is."""

    def __init__(self, message: str = "", *, code: str = "", field: str = "", **values: Any) -> None:
        from skald_mcp.strings import STRINGS

        self.code, self.field, self.values = code, field, values
        super().__init__(message or STRINGS["en"][f"err_{code}"].format(**values))


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

    def identity(self) -> tuple[Any, ...]:
        """Which server this is: the program and its arguments (stdio), or the address
        (http). An edit that keeps it (a rotated key in the environment or a header) is
        the same server, whose vetted tools stay vetted; one that changes it points the
        connector at another server, whose tools are vetted afresh (``Runtime.replace``)."""
        if self.transport == "stdio":
            return ("stdio", self.command, tuple(self.args))
        return ("http", self.url)


def _listed(names: set[Any]) -> str:
    """Field names from the caller's body, cut short: they are echoed in the answer."""
    return ", ".join(sorted(str(n)[:40] for n in names)[:10])


def unknown_fields(names: set[Any]) -> SpecError:
    return SpecError(code="unknown_fields", fields=_listed(names))


def _strings(value: Any, what: str, *, limit: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(code="list_not_strings", field=what, what=what)
    if len(value) > limit:
        raise SpecError(code="list_too_long", field=what, what=what, limit=limit)
    for item in value:
        if len(item) > MAX_VALUE or "\x00" in item:
            raise SpecError(code="list_item_invalid", field=what, what=what)
    return tuple(value)


def _mapping(value: Any, what: str, key: re.Pattern[str]) -> dict[str, str]:
    """``env`` or ``headers``: a header line without its colon must be refused here
    too, not dropped, or the admin believes a credential is set that is not."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(code=f"{what}_not_object", field=what)
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not key.match(k):
            raise SpecError(code=f"{what}_name_invalid", field=what, name=str(k)[:60])
        if what == "headers" and transport_header(k):
            raise SpecError(code="headers_name_reserved", field=what, name=k)
        if not isinstance(v, str) or len(v) > MAX_VALUE or "\x00" in v or "\n" in v or "\r" in v:
            raise SpecError(code=f"{what}_value_invalid", field=what, name=k, limit=MAX_VALUE)
        out[k] = v
    return out


def parse_spec(body: Any, *, keep: ServerSpec | None = None) -> ServerSpec:
    """A spec from an admin's JSON body. ``keep``: the stored spec being edited, whose
    masked secrets (``"********"``) stand for the values already stored."""
    if not isinstance(body, dict):
        raise SpecError(code="body_not_object")
    unknown = set(body) - {"name", "transport", "command", "args", "env", "url", "headers"}
    if unknown:
        raise unknown_fields(unknown)
    name = body.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise SpecError(code="name_invalid", field="name")
    transport = body.get("transport")
    if transport not in TRANSPORTS:
        raise SpecError(code="transport_invalid", field="transport", choices=", ".join(TRANSPORTS))
    env = _mapping(body.get("env"), "env", ENV_NAME)
    headers = _mapping(body.get("headers"), "headers", HEADER_NAME)
    if transport == "stdio":
        command = body.get("command")
        if not isinstance(command, str) or not command.strip() or len(command) > MAX_VALUE or "\x00" in command:
            raise SpecError(code="command_missing", field="command")
        if body.get("url") or body.get("headers"):
            raise SpecError(code="http_fields_on_stdio", field="url")
        return _kept(ServerSpec(name, transport, command=command, args=_strings(body.get("args"), "args", limit=MAX_ARGS), env=env), keep)
    url = body.get("url")
    if not isinstance(url, str) or len(url) > MAX_VALUE:
        raise SpecError(code="url_missing", field="url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(code="url_scheme", field="url", what="url")
    if parts.username or parts.password:
        raise SpecError(code="url_credentials", field="url")
    if body.get("command") or body.get("args") or body.get("env"):
        raise SpecError(code="stdio_fields_on_http", field="command")
    return _kept(ServerSpec(name, transport, url=url, headers=headers), keep)


def _kept(spec: ServerSpec, keep: ServerSpec | None) -> ServerSpec:
    """``spec`` with its masked secrets (``"********"``) replaced by the stored ones of
    ``keep``, only while it goes where they went (``identity``: the program and its
    arguments, or the address). Pointed elsewhere, a masked value is refused: the old
    key must not follow a new destination unasked (``err_secret_reenter``)."""
    masked = [("env", k) for k, v in spec.env.items() if v == "********"] + [("headers", k) for k, v in spec.headers.items() if v == "********"]
    if keep is None or not masked:
        return spec
    if keep.identity() != spec.identity():
        field, key = masked[0]
        raise SpecError(code="secret_reenter", field=field, name=key)
    env = {k: keep.env.get(k, "") if v == "********" else v for k, v in spec.env.items()}
    headers = {k: keep.headers.get(k, "") if v == "********" else v for k, v in spec.headers.items()}
    return ServerSpec(spec.name, spec.transport, command=spec.command, args=spec.args, env=env, url=spec.url, headers=headers)


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


MAX_TOOL_NAME = 64  # the host's limit


def tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` as the model sees it: characters a tool name may not have
    become ``_``, and the whole is cut to 64 (the host's limit). Two of a server's
    tools may come out the same (``x.y`` and ``x_y``): ``tool_names`` tells them apart."""
    return f"{server}{SEPARATOR}{TOOL_CHARS.sub('_', tool)}"[:MAX_TOOL_NAME]


def tool_names(server: str, tools: Iterable[str]) -> dict[str, str]:
    """Each of a server's tools (by its real name) -> the name the model sees, unique
    within the server. A tool keeps ``tool_name`` unless another tool of the server
    comes out the same; then each of them whose real name had to be changed (a
    character replaced, or cut at 64) gets ``_`` and a short digest of its real name at
    the end (``demo__x_y_3f2a9c``), and a tool whose real name is its name as it is
    keeps the plain one. The digest is of the real name alone, so a tool's name does
    not depend on the order the server lists its tools in; the call goes to the real
    name (``make_tool``)."""
    real = list(dict.fromkeys(tools))
    plain = {tool: tool_name(server, tool) for tool in real}
    shared = Counter(plain.values())
    out = {tool: name for tool, name in plain.items() if shared[name] == 1 or name == f"{server}{SEPARATOR}{tool}"}
    taken = set(out.values())
    for tool in real:
        if tool in out:
            continue
        digest = hashlib.sha256(tool.encode()).hexdigest()
        for size in range(6, len(digest) + 1, 2):  # longer only should two digests meet
            name = f"{plain[tool][: MAX_TOOL_NAME - size - 1]}_{digest[:size]}"
            if name not in taken:
                break
        out[tool] = name
        taken.add(name)
    return out


# -- the catalog: admin-vetted templates a member activates --------------------------------

FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
#: How an OAuth credential reaches a stdio server (in the environment variable the
#: template names): the access token itself (fetched at every start), or an
#: ``authorized_user`` JSON (client id and secret, refresh token, token URL) a server
#: such as Google's libraries refreshes by itself.
DELIVER = ("access_token", "authorized_user")
MAX_FIELDS = 16
MAX_TEXT = 500


@dataclass(frozen=True)
class TemplateField:
    """One value an activation must supply, and how it reaches the server: as an HTTP
    header (``header`` with ``format``, e.g. ``"Bearer {value}"``) for an http template,
    or as an environment variable (``env``) for a stdio one. Never a live credential:
    the template holds only what to ask for."""

    name: str
    label: str
    secret: bool = True
    header: str = ""
    format: str = "{value}"
    env: str = ""


@dataclass(frozen=True)
class Template:
    name: str
    title: str
    description: str
    transport: str
    url: str = ""
    command: str = ""
    args: tuple[str, ...] = ()
    fields: tuple[TemplateField, ...] = ()
    version: int = 1
    #: ``{"provider": name, "scopes": [...]}``: the activation signs in with OAuth 2
    #: (authorization code + PKCE) at that provider; the access token is sent as
    #: ``Authorization: Bearer`` (http), or for a stdio template with ``env`` and
    #: ``deliver`` (``DELIVER``) the credential is put in that environment variable.
    oauth: Mapping[str, Any] | None = None
    #: ``"qr"``: the server produces its credential by pairing a device; it exposes
    #: ``login_status`` (and ``logout``), which Skald calls, never the agent.
    login: str = ""
    #: A local-script connector's files (path -> text), copied into the member's
    #: sandbox with its dependencies installed there (install.py); stdio only.
    files: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "transport": self.transport,
            "url": self.url,
            "command": self.command,
            "args": list(self.args),
            "fields": [f.__dict__ for f in self.fields],
            "version": self.version,
            "oauth": dict(self.oauth) if self.oauth else None,
            "login": self.login,
            "files": dict(self.files),
        }

    def public(self) -> dict[str, Any]:
        """What a member's page shows: no command line (admin business)."""
        out = self.as_json()
        out.pop("command")
        out.pop("args")
        out["files"] = sorted(self.files)
        return out


def _text(body: Mapping[str, Any], key: str, *, required: bool = False, limit: int = MAX_TEXT) -> str:
    value = body.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str) or len(value) > limit or "\x00" in value:
        raise SpecError(code="text_invalid", field=key, name=key, limit=limit)
    if required and not value.strip():
        raise SpecError(code="text_required", field=key, name=key)
    return value


def parse_url(url: Any, what: str = "url") -> str:
    parts = urlsplit(url) if isinstance(url, str) and len(url) <= MAX_VALUE else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(code="url_scheme", field=what, what=what)
    if parts.username or parts.password:
        raise SpecError(code="address_credentials", field=what, what=what)
    return url


def parse_template(body: Any) -> Template:
    if not isinstance(body, dict):
        raise SpecError(code="body_not_object")
    unknown = set(body) - {"name", "title", "description", "transport", "url", "command", "args", "fields", "version", "oauth", "login", "files"}
    if unknown:
        raise unknown_fields(unknown)
    name = body.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise SpecError(code="name_invalid", field="name")
    transport = body.get("transport")
    if transport not in TRANSPORTS:
        raise SpecError(code="transport_invalid", field="transport", choices=", ".join(TRANSPORTS))
    version = body.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= 1_000_000:
        raise SpecError(code="version_invalid", field="version")
    raw_fields = body.get("fields") or []
    if not isinstance(raw_fields, list) or len(raw_fields) > MAX_FIELDS:
        raise SpecError(code="fields_invalid", field="fields", limit=MAX_FIELDS)
    fields = []
    for raw in raw_fields:
        if not isinstance(raw, dict) or set(raw) - {"name", "label", "secret", "header", "format", "env"}:
            raise SpecError(code="field_shape", field="fields")
        fname = raw.get("name")
        if not isinstance(fname, str) or not FIELD_NAME.match(fname):
            raise SpecError(code="field_name_invalid", field="fields")
        secret = raw.get("secret", True)
        if not isinstance(secret, bool):
            raise SpecError(code="field_secret_invalid", field="fields", name=fname)
        header, fmt, env = _text(raw, "header"), _text(raw, "format") or "{value}", _text(raw, "env")
        if transport == "http":
            if not HEADER_NAME.match(header) or env:
                raise SpecError(code="field_header_needed", field="fields", name=fname)
            if transport_header(header):
                raise SpecError(code="headers_name_reserved", field="fields", name=header)
            if "{value}" not in fmt:
                # Named by its label, as the admin wrote it for readers (the key is the fallback).
                raise SpecError(code="field_format_invalid", field="fields", name=_text(raw, "label") or fname)
        elif not ENV_NAME.match(env) or header:
            raise SpecError(code="field_env_needed", field="fields", name=fname)
        fields.append(TemplateField(fname, _text(raw, "label") or fname, secret, header, fmt, env))
    if len({f.name for f in fields}) != len(fields):
        raise SpecError(code="field_names_repeated", field="fields")
    # Each header carries one value (``activation_spec`` builds them as a dict): two
    # fields on one header (names compared as HTTP does, case-insensitively) would drop one.
    seen: set[str] = set()
    for f in fields:
        if f.header and f.header.lower() in seen:
            raise SpecError(code="field_headers_repeated", field="fields", header=f.header)
        seen.add(f.header.lower())
    oauth = body.get("oauth")
    if oauth is not None:
        if not isinstance(oauth, dict) or set(oauth) - {"provider", "scopes", "env", "deliver"}:
            raise SpecError(code="oauth_shape", field="oauth", keys="{provider, scopes}")  # a value: a text without values is not formatted
        provider = oauth.get("provider")
        scopes = oauth.get("scopes") or []
        if not isinstance(provider, str) or not NAME.match(provider):
            raise SpecError(code="oauth_provider_invalid", field="oauth")
        if not isinstance(scopes, list) or not all(isinstance(x, str) and x and " " not in x and len(x) <= 200 for x in scopes) or len(scopes) > 32:
            raise SpecError(code="oauth_scopes_invalid", field="oauth")
        checked: dict[str, Any] = {"provider": provider, "scopes": list(scopes)}
        if transport == "stdio":
            # The credential reaches the server by environment, never as a file.
            env, deliver = oauth.get("env"), oauth.get("deliver", "access_token")
            if not isinstance(env, str) or not ENV_NAME.match(env):
                raise SpecError(code="oauth_env_invalid", field="oauth")
            if deliver not in DELIVER:
                raise SpecError(code="oauth_deliver_invalid", field="oauth", choices=", ".join(DELIVER))
            checked.update(env=env, deliver=deliver)
        elif "env" in oauth or "deliver" in oauth:
            raise SpecError(code="oauth_env_on_http", field="oauth")
        else:
            # The access token goes in Authorization: a field there would be overwritten.
            taken = next((f.header for f in fields if f.header.lower() == "authorization"), None)
            if taken is not None:
                raise SpecError(code="field_header_oauth", field="fields", header=taken)
        oauth = checked
    login = body.get("login") or ""
    if login not in ("", "qr"):
        raise SpecError(code="login_invalid", field="login")
    if login and oauth:
        raise SpecError(code="login_and_oauth", field="login")
    files = _files(body.get("files"))
    if files and transport != "stdio":
        raise SpecError(code="files_on_http", field="files")
    common = dict(files=files, login=login, name=name, title=_text(body, "title") or name, description=_text(body, "description", limit=2000), fields=tuple(fields), version=version, oauth=oauth)
    if transport == "http":
        if body.get("command") or body.get("args"):
            raise SpecError(code="template_command_on_http", field="command")
        return Template(transport="http", url=parse_url(body.get("url")), **common)
    command = body.get("command")
    if not isinstance(command, str) or not command.strip() or len(command) > MAX_VALUE:
        raise SpecError(code="template_command_missing", field="command")
    return Template(transport="stdio", command=command, args=_strings(body.get("args"), "args", limit=MAX_ARGS), **common)


FILE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}){0,7}$")
MAX_FILES = 64
MAX_FILES_BYTES = 512 * 1024


def _files(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_FILES:
        raise SpecError(code="files_invalid", field="files", limit=MAX_FILES)
    total = 0
    for path, content in value.items():
        if not isinstance(path, str) or not FILE_PATH.match(path) or ".." in path.split("/"):
            raise SpecError(code="file_path_invalid", field="files", path=repr(str(path)[:60]))
        if not isinstance(content, str) or "\x00" in content:
            raise SpecError(code="file_not_text", field="files", path=path)
        total += len(content.encode())
    if total > MAX_FILES_BYTES:
        raise SpecError(code="files_too_large", field="files", limit=MAX_FILES_BYTES // 1024)
    return dict(value)


def template_from_json(data: Mapping[str, Any]) -> Template:
    return Template(
        name=data["name"],
        title=data.get("title", data["name"]),
        description=data.get("description", ""),
        transport=data["transport"],
        url=data.get("url", ""),
        command=data.get("command", ""),
        args=tuple(data.get("args") or ()),
        fields=tuple(TemplateField(**f) for f in data.get("fields") or ()),
        version=int(data.get("version", 1)),
        oauth=data.get("oauth"),
        login=data.get("login", ""),
        files=dict(data.get("files") or {}),
    )


def parse_values(template: Template, values: Any) -> dict[str, str]:
    """An activation's values: exactly the template's fields, each a single line."""
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise SpecError(code="values_not_object")
    unknown = set(values) - {f.name for f in template.fields}
    if unknown:
        raise SpecError(code="values_unknown", template=template.name, names=_listed(unknown))
    out = {}
    for f in template.fields:
        value = values.get(f.name)
        if not isinstance(value, str) or not value.strip():
            raise SpecError(code="value_required", field=f.name, label=f.label or f.name)
        if len(value) > MAX_VALUE or "\n" in value or "\r" in value or "\x00" in value:
            raise SpecError(code="value_invalid", field=f.name, label=f.label or f.name, limit=MAX_VALUE)
        out[f.name] = value.strip()
    return out


def destination(template: Template, provider: Mapping[str, Any] | None = None) -> str:
    """Where an activation's values and credentials go, as a digest pinned in the
    member's record when they activate or sign in: the address or the command, which
    field goes where, and the sign-in service's token endpoint (where the refresh token
    is sent). Should the admin change any of it later, nothing of the member's is sent
    until the member activates or signs in again (a changed template must not carry
    their key, or their refresh token, to a new place unasked). A local script's files
    are not part of it: a new version of them is the catalog's update, installed in the
    member's sandbox at their next login."""
    oauth = template.oauth or {}
    where = {
        "transport": template.transport, "url": template.url, "command": template.command, "args": list(template.args),
        "fields": [[f.name, f.header, f.format, f.env] for f in template.fields],
        "oauth": [oauth.get("provider"), oauth.get("env"), oauth.get("deliver")],
        "provider": [(provider or {}).get("token_url"), (provider or {}).get("client_id")],
    }
    return hashlib.sha256(json.dumps(where, sort_keys=True).encode()).hexdigest()


def activation_spec(template: Template, name: str, values: Mapping[str, str], bearer: str | None = None) -> ServerSpec:
    """The connectable spec of a member's activation: the template's address or
    command with the member's values delivered as headers or environment. ``bearer``:
    an OAuth template's credential (an http server's access token, or what a stdio
    template's ``oauth.deliver`` asks for, put in ``oauth.env``)."""
    if template.transport == "http":
        headers = {f.header: f.format.replace("{value}", values[f.name]) for f in template.fields}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        return ServerSpec(name, "http", url=template.url, headers=headers)
    env = {f.env: values[f.name] for f in template.fields}
    if bearer is not None and template.oauth and template.oauth.get("env"):
        env[template.oauth["env"]] = bearer
    return ServerSpec(name, "stdio", command=template.command, args=template.args, env=env)


def parse_remote(body: Mapping[str, Any]) -> ServerSpec:
    """A member's own remote server: a name, an http(s) address and headers. Never a
    command: members cannot start programs."""
    unknown = set(body) - {"name", "url", "headers"}
    if unknown:
        raise SpecError(code="unknown_fields_remote", fields=_listed(unknown))
    return parse_spec({"name": body.get("name"), "transport": "http", "url": body.get("url"), "headers": body.get("headers")})


#: The interactive-login contract: tools Skald calls itself and never offers the agent.
LOGIN_TOOLS = frozenset({"login_status", "logout"})
LOGIN_STATES = frozenset({"connecting", "need_scan", "ready", "logged_out"})


def parse_login_status(text: str) -> dict[str, Any]:
    """``login_status``'s answer, ``{state, qr?, message}``, checked: an unknown state is
    an error, and ``qr`` is kept only as a PNG data URL (anything else could be a link)."""
    import json

    try:
        data = json.loads(text)
    except ValueError:
        raise SpecError(code="login_status_not_json") from None
    if not isinstance(data, dict) or data.get("state") not in LOGIN_STATES:
        raise SpecError(code="login_status_unknown")
    qr = data.get("qr")
    message = data.get("message")
    return {
        "state": data["state"],
        "qr": qr if data["state"] == "need_scan" and isinstance(qr, str) and qr.startswith("data:image/png;base64,") and len(qr) < 200_000 else None,
        "message": message[:500] if isinstance(message, str) else "",
    }

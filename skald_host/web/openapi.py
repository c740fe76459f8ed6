"""The HTTP API reference: an OpenAPI 3.1 document built from the running app.

Nothing here is written by hand per route: the paths and methods come from the app's
URL map (host blueprints and the blueprints of enabled plugins), the auth requirement
from the gate's own markers (``@public``, ``@requires``, the plugin gate), the request
body from the schema the route declares with ``@accepts`` (the very schema
``skald_host.web.body.read_body`` validates requests against), the answers from
``@returns`` and the summary from the view's docstring. ``COMPONENTS`` holds the shared
answer schemas that ``body.ref`` points at.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from quart import Quart

from skald_hookspecs import PUBLIC_ATTRIBUTE
from skald_host.core.host import host_version
from skald_host.web.auth import CSRF_HEADER, PLAIN_COOKIE, PLUGIN_PREFIX
from skald_host.web.body import (
    BOOL,
    ID,
    INT,
    JSON,
    QUERY_ATTRIBUTE,
    RESPONSES_ATTRIBUTE,
    TEXT,
    TIME,
    array,
    declared_body,
    nullable,
    one_of,
    ref,
)

OPENAPI_VERSION = "3.1.0"
SKIPPED_METHODS = frozenset({"HEAD", "OPTIONS"})
_PARAM = re.compile(r"<(?:([^:<>]+):)?([^<>]+)>")


def _record(properties: dict[str, dict[str, Any]], *, description: str | None = None) -> dict[str, Any]:
    """An answer object: every listed property is always present; more may be added
    by later versions (clients ignore what they do not know)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": list(properties)}
    if description:
        schema["description"] = description
    return schema


NULLABLE_TEXT = nullable(TEXT)
NULLABLE_TIME = nullable(TIME)

COMPONENTS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "properties": {
            "error": {"type": "string", "description": "what was wrong, for a person"},
            "field": {"type": "string", "description": "the path of the offending input field (a.b[2]), when there is one"},
            "code": {"type": "string", "description": "stable: the shell shows the string core.error.<code> in the reader's language"},
            "values": {"type": "object", "description": "what fills that string's placeholders"},
            "errors": {
                "type": "array",
                "items": {"type": "object"},
                "description": "a settings save only: every refused field, each in this shape (the first is also the answer itself)",
            },
        },
        "required": ["error", "code"],
        "description": "Every error of the API has this shape.",
    },
    "Member": _record(
        {
            "id": ID,
            "username": TEXT,
            "display_name": TEXT,
            "role": ID,
            "role_label": TEXT,
            "is_admin": BOOL,
            "active": BOOL,
            "encrypted": {"type": "boolean", "description": "whether the member's own file is encrypted with their password"},
            "locale": NULLABLE_TEXT,
            "birthdate": NULLABLE_TEXT,
            "sex": NULLABLE_TEXT,
            "notes": NULLABLE_TEXT,
            "created_at": TIME,
            "last_login_at": NULLABLE_TIME,
            "data_reset_at": {**NULLABLE_TIME, "description": "when an admin's password reset lost their data (set aside on the server), if it did"},
            "password_set_by_admin": {"type": "boolean", "description": "their password is still the one an admin chose (at their creation or a reset): they have not chosen their own yet"},
        },
        description="A member as the admin and the member themself see them: metadata only.",
    ),
    "MemberAdminView": {
        "allOf": [
            ref("Member"),
            _record({"unlocked": {"type": "boolean", "description": "their own file is open (they are logged in)"}, "sessions": INT}),
        ]
    },
    "Provider": _record(
        {
            "id": ID,
            "name": TEXT,
            "base_url": TEXT,
            "api_key": {"type": ["string", "null"], "description": "write-only: a mask when one is stored, else null"},
        },
        description="An OpenAI-compatible model provider.",
    ),
    "Model": _record(
        {
            "id": ID,
            "provider_id": ID,
            "provider_name": TEXT,
            "model": TEXT,
            "label": TEXT,
            "vision": BOOL,
            "strength": {"type": "integer", "minimum": 0, "maximum": 100},
            "priority": {"type": "integer", "minimum": 0, "maximum": 100000},
            "enabled": BOOL,
        }
    ),
    "ApprovalRule": _record(
        {
            "id": INT,
            "tool_pattern": TEXT,
            "path_class": NULLABLE_TEXT,
            "action": one_of("allow", "deny", "require"),
            "priority": INT,
            "group_id": NULLABLE_TEXT,
            "note": TEXT,
            "builtin": BOOL,
        },
        description="Which tool calls run, are refused or wait for the member's approval; the lowest priority that matches decides.",
    ),
    "SecurityGroup": _record({"id": ID, "label": TEXT, "description": TEXT}),
    "Agent": _record({"id": ID, "title": TEXT, "description": TEXT, "kind": TEXT,
                      "member_tools": {"type": "array", "items": TEXT, "description": "the plugins' per-member tools (connectors) it offers the caller now (GET /api/chat/status)"}}),
    "Conversation": _record(
        {"id": ID, "source": TEXT, "agent_id": ID, "title": TEXT, "created_at": TIME, "updated_at": TIME}
    ),
    "ToolCall": _record(
        {
            "id": ID,
            "message_id": INT,
            "seq": INT,
            "name": TEXT,
            "arguments": {"type": "string", "description": "the arguments as JSON text"},
            "status": one_of("requested", "awaiting_approval", "running", "done", "error", "denied", "cancelled", "interrupted"),
            "result": NULLABLE_TEXT,
            "created_at": TIME,
            "finished_at": NULLABLE_TIME,
        }
    ),
    "Message": _record(
        {
            "id": INT,
            "conversation_id": ID,
            "role": one_of("user", "assistant", "summary", "note"),
            "content": TEXT,
            "reasoning": TEXT,
            "status": one_of("complete", "streaming", "interrupted", "cancelled", "error"),
            "model": NULLABLE_TEXT,
            "model_id": {**NULLABLE_TEXT, "description": "an answer: the catalog entry (a Model's id) that wrote it; two providers may"
                         " serve the same model name, and this says which (label it by that entry). Null for answers written"
                         " before entries were recorded: name them by 'model'"},
            "created_at": TIME,
            "idempotency_key": {**NULLABLE_TEXT, "description": "a member's message: the key its client sent it with"},
            "reason": nullable({
                "type": "object",
                "description": "why it failed, when the host has words for it: show error.<code> with values in the reader's language",
                "properties": {"code": TEXT, "values": {"type": "object"}},
                "required": ["code", "values"],
            }),
            "attachments": array(ref("Attachment"), description="the files a member's message carries; empty when none"),
            "tool_calls": array(ref("ToolCall")),
        }
    ),
    "Attachment": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the agent path (open it with /api/file?path=)"},
            "name": TEXT,
            "mime": {"type": "string", "description": "the type sniffed from the file's bytes when it was sent"},
            "size": {"type": "integer", "description": "bytes, when it was sent"},
        },
        "required": ["path"],
        "description": "A file a member attached to a message, as it was when sent.",
    },
    "QueuedMessage": _record(
        {"id": INT, "content": TEXT, "attachments": array(ref("Attachment")), "created_at": TIME,
         "idempotency_key": {**NULLABLE_TEXT, "description": "the key its client sent it with"}},
        description="A message stored while a turn ran; the next turn takes it.",
    ),
    "Approval": _record(
        {
            "id": ID,
            "conversation_id": ID,
            "tool_call_id": ID,
            "tool": TEXT,
            "status": one_of("pending", "approved", "denied", "expired", "used"),
            "created_at": TIME,
            "expires_at": TIME,
            "arguments": {"type": "string", "description": "the call's arguments as JSON text"},
            "frame_id": {**ID, "description": "the frame whose call this is"},
            "agent": {**NULLABLE_TEXT, "description": "the helper (sub-agent) whose call this is; null for the conversation's own agent"},
            "untrusted": {
                "type": ["object", "null"],
                "description": "why a call the rules would allow asks: text from outside entered its frame ({kind, values};"
                " kind shared_note, tool or upload); null when it did not",
            },
        },
        description="A tool call waiting for the member's decision.",
    ),
    "SendAck": _record(
        {
            "conversation_id": ID,
            "queued": {"type": "boolean", "description": "true: a turn was running; the message waits in the inbox"},
            "message_id": {"type": ["integer", "null"]},
        },
        description="The message is stored (durable); the answer streams over /api/ws.",
    ),
    "Ok": _record({"ok": {"const": True}}),
    "PluginGrant": _record(
        {"plugin_id": ID, "title": TEXT, "enabled": BOOL, "granted": BOOL, "implicit": {"type": "boolean", "description": "an admin may use every plugin"}},
        description="Whether a member may use a plugin that access is granted for.",
    ),
    "Upload": _record(
        {"path": {"type": "string", "description": "the agent path to attach to a message"}, "name": TEXT, "mime": TEXT, "size": INT, "is_image": BOOL}
    ),
}
# Only on an answer still streaming in the server's memory, so not in the record's required list.
COMPONENTS["Message"]["properties"]["streamed"] = {
    "type": "object",
    "description": "an answer still streaming: how many characters (code points) of each channel its content and reasoning "
                   "hold; its next token events' `at` go on from there (a delta whose `at` is lower is partly here already)",
    "properties": {"content": INT, "reasoning": INT},
}


def _summary(view: Any, endpoint: str) -> tuple[str, str]:
    doc = inspect.getdoc(view) or ""
    if doc:
        first, _, rest = doc.partition("\n\n")
        summary = " ".join(first.split())
        if len(summary) > 120 and ". " in summary:
            head, _, tail = summary.partition(". ")
            summary, rest = head + ".", (tail + "\n\n" + rest).strip()
        return summary, rest.strip()
    name = endpoint.rsplit(".", 1)[-1].replace("_", " ").strip()
    return name[:1].upper() + name[1:], ""


def openapi_path(rule: str) -> tuple[str, list[dict[str, Any]]]:
    """``/api/x/<int:rule_id>/<path:key>`` → ``/api/x/{rule_id}/{key}`` and its parameters."""
    parameters = []
    for converter, name in _PARAM.findall(rule):
        schema: dict[str, Any] = {"type": "integer"} if converter == "int" else {"type": "string"}
        parameter = {"name": name, "in": "path", "required": True, "schema": schema}
        if converter == "path":
            parameter["description"] = "may contain '/' (each segment percent-encoded)"
        parameters.append(parameter)
    return _PARAM.sub(lambda m: "{" + m.group(2) + "}", rule), parameters


def _plugin_id(rule: str) -> str | None:
    return rule[len(PLUGIN_PREFIX):].split("/", 1)[0] if rule.startswith(PLUGIN_PREFIX) else None


def _auth(view: Any, plugin_id: str | None) -> tuple[list[dict[str, list[str]]], str, dict[str, Any]]:
    if getattr(view, PUBLIC_ATTRIBUTE, False):
        return [], "Public: no session needed (a write must come from this origin).", {"x-skald-auth": "public"}
    action = getattr(view, "_skald_action", None)
    words = "Needs a session (cookie with the X-CSRF-Token header on writes, or a bearer token)"
    extra: dict[str, Any] = {"x-skald-auth": "session"}
    if action:
        words += f" and the capability `{action}`"
        extra["x-skald-capability"] = action
    if plugin_id is not None:
        words += f"; the caller must be allowed to use the plugin `{plugin_id}` (a device token that plugin issued also serves as the bearer token)"
        extra["x-skald-plugin"] = plugin_id
    return [{"session": []}, {"bearer": []}], words + ".", extra


def _responses(view: Any, method: str, public: bool, has_parameters: bool) -> dict[str, Any]:
    declared: dict[int, tuple[dict[str, Any], str | None, tuple[str, ...]]] = getattr(view, RESPONSES_ATTRIBUTE, {})
    responses: dict[str, Any] = {}
    for status, (schema, description, content_types) in sorted(declared.items()):
        responses[str(status)] = {"description": description or "success", "content": {t: {"schema": schema} for t in content_types}}
    if not any(200 <= s < 300 for s in declared):
        responses["200" if method != "WS" else "101"] = {"description": "success (see the summary)"}
    error = {"content": {JSON: {"schema": ref("Error")}}}
    if method in ("POST", "PUT", "PATCH"):
        responses.setdefault("400", {"description": "the request was refused; `error` says why, `field` names the field", **error})
    if not public:
        responses.setdefault("401", {"description": "no valid session", **error})
        responses.setdefault("403", {"description": "not allowed (capability, plugin grant or CSRF token)", **error})
    if has_parameters:
        responses.setdefault("404", {"description": "no such object (or not one of the caller's)", **error})
    responses["default"] = {"description": "an error", **error}
    return responses


def build_document(app: Quart, enabled: Any) -> dict[str, Any]:
    """The document for ``app``; ``enabled(plugin_id)`` says which plugins' routes to list."""
    paths: dict[str, dict[str, Any]] = {}
    tags: set[str] = set()
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if not rule.rule.startswith("/api/"):
            continue
        plugin_id = _plugin_id(rule.rule)
        if plugin_id is not None and not enabled(plugin_id):
            continue
        view = app.view_functions[rule.endpoint]
        path, parameters = openapi_path(rule.rule)
        websocket = bool(getattr(rule, "websocket", False))
        methods = ["GET"] if websocket else sorted(set(rule.methods or ()) - SKIPPED_METHODS)
        tag = f"plugin: {plugin_id}" if plugin_id else rule.endpoint.split(".", 1)[0].replace("_", " ")
        tags.add(tag)
        for method in methods:
            summary, description = _summary(view, rule.endpoint)
            security, auth_words, auth_extra = _auth(view, plugin_id)
            public = security == []
            operation: dict[str, Any] = {
                "operationId": f"{rule.endpoint}.{method.lower()}",
                "summary": summary,
                "description": "\n\n".join(part for part in (description, auth_words) if part),
                "tags": [tag],
                "security": security,
                **auth_extra,
                "responses": _responses(view, "WS" if websocket else method, public, bool(parameters)),
            }
            if websocket:
                operation["description"] += "\n\nA WebSocket: connect with an Upgrade request (ws:// or wss://)."
                operation["x-skald-websocket"] = True
            query = [
                {"name": name, "in": "query", "required": bool(schema.get("x-required")), "schema": {k: v for k, v in schema.items() if k != "x-required"}}
                for name, schema in getattr(view, QUERY_ATTRIBUTE, {}).items()
            ]
            if parameters or query:
                operation["parameters"] = [*parameters, *query]
            body = declared_body(view)
            if body is not None and method in ("POST", "PUT", "PATCH", "DELETE"):
                schema, content_type = body
                operation["requestBody"] = {"required": True, "content": {content_type: {"schema": schema}}}
                responses = operation["responses"]
                default = responses.pop("default")
                responses.setdefault("413", {  # the host's own refusal, before the view runs
                    **default,
                    "description": "the file is larger than the upload limit (`upload_too_large`)" if schema.get("format") == "binary"
                    else "the body is larger than `server.max_body_bytes` (`request_body_too_large`)",
                })
                responses["default"] = default
            paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Skald HTTP API",
            "version": host_version(),
            "description": (
                "Every route of this Skald server under /api, generated from the code that serves and checks it. "
                "Errors are always `{\"error\": \"...\"}` (with `field` naming the input when there is one). "
                "Bodies are JSON objects; NaN and Infinity are refused. Plugin routes (tag `plugin: <id>`) are listed "
                "while their plugin is enabled."
            ),
        },
        "tags": [{"name": name} for name in sorted(tags)],
        "paths": paths,
        "components": {
            "schemas": COMPONENTS,
            "securitySchemes": {
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": PLAIN_COOKIE,
                    "description": (
                        f"The login cookie (`__Host-skald_session` over HTTPS or on loopback, else `{PLAIN_COOKIE}`). "
                        f"Writes also send the session's CSRF token in `{CSRF_HEADER}`."
                    ),
                },
                "bearer": {"type": "http", "scheme": "bearer", "description": "POST /api/auth/login with session: bearer returns the token."},
            },
        },
    }

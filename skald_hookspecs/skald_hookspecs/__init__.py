"""The contract between the Skald host and its plugins.

A plugin depends on this package only, never on ``skald_host``: the markers, the hook
specifications, the small frozen types a plugin registers and the ``HostApi`` protocol
it receives at start. ``SPEC_VERSION`` is what a plugin's declared spec range is
checked against; it follows semantic versioning (a hook renamed or removed bumps the
major version, a hook or argument added bumps the minor).
"""

import pluggy

SPEC_VERSION = "1.19"
PROJECT_NAME = "skald"
ENTRY_POINT_GROUP = "skald.plugins"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

PUBLIC_ATTRIBUTE = "_skald_public"


def public(view):
    """Mark a route view as reachable without a session (e.g. a webhook that checks
    its own secret). Everything else under ``/api`` needs a logged-in member: deny by
    default. A public plugin route still answers 404 while its plugin is disabled."""
    setattr(view, PUBLIC_ATTRIBUTE, True)
    return view


REQUEST_BODY_ATTRIBUTE = "_skald_request_body"


def accepts(schema, *, content_type="application/json"):
    """Declare a route view's request body as a JSON Schema (draft 2020-12) dict
    (spec 1.2). The host then reads the body before the view runs, refuses one that is
    not JSON, holds NaN or Infinity, or does not match the schema (a 400 naming the
    field) and lists the schema in the HTTP API reference (``/api/openapi.json``). A
    view that must check something before any of the body is read (a webhook's
    secret) declares nothing and reads the body itself. ``content_type`` other than
    JSON (a raw file upload) is documented only, never read by the host.

    Since 1.10, a file upload: a body declared as ``{"type": "string", "format":
    "binary"}`` (or with ``contentMediaType``) with a ``content_type`` other than JSON,
    on a ``POST`` or ``PUT`` route, may be as large as the host's upload limit
    (``files.upload_max_bytes``, as the web's own uploads) instead of its general body
    limit (``server.max_body_bytes``). A larger one is refused as the host's uploads
    are: 413 with ``code`` ``upload_too_large`` and the limit in ``values`` (``limit`` in
    bytes, ``size`` in words), before the view runs when its ``Content-Length`` says
    so, else when the view reads past the limit: whole (``get_data``) or, since 1.12,
    in chunks (``async for chunk in request.body``, or ``request.body`` handed to
    ``HostApi.save_upload``), every chunk read counting toward it."""

    def mark(view):
        setattr(view, REQUEST_BODY_ATTRIBUTE, (dict(schema), content_type))
        return view

    return mark


RESPONSES_ATTRIBUTE = "_skald_responses"


def returns(schema, status=200, description=None, *, content_types=("application/json",)):
    """Document one answer of a route view (spec 1.3): its status, its JSON Schema and
    the media types it comes as (``text/event-stream`` for a stream whose events the
    schema describes). The host lists it in ``/api/openapi.json``; it checks nothing at
    run time. Stack one per status."""

    def mark(view):
        responses = dict(getattr(view, RESPONSES_ATTRIBUTE, {}))
        responses[status] = (dict(schema), description, tuple(content_types))
        setattr(view, RESPONSES_ATTRIBUTE, responses)
        return view

    return mark


from skald_hookspecs.types import (  # noqa: E402
    ICONS,
    ConfigField,
    ConfigSet,
    I18nBundle,
    NotReady,
    PluginInfo,
    SystemAgent,
    Tool,
    ToolContext,
    ToolError,
    TurnApi,
    WebPage,
)
from skald_hookspecs.host_api import HostApi  # noqa: E402
from skald_hookspecs.context import Caller, current_caller  # noqa: E402
from skald_hookspecs.events import ChatEvent, SystemEvent, UserEvent  # noqa: E402
from skald_hookspecs.channels import Channel, ChannelEvent, ChannelRequestError, Delivery, MemberLocked, ReachableChannel  # noqa: E402
from skald_hookspecs.sandbox import ExecResult, Mount, SandboxBackend, SandboxProcess, SandboxSpec, SandboxUnavailable  # noqa: E402
from skald_hookspecs.tts import TtsEngine, TtsUnavailable, TtsVoice  # noqa: E402
from skald_hookspecs.system_agents import NOTHING_TO_REPORT, Report, SystemAgentContext, parse_report  # noqa: E402

__all__ = [
    "SPEC_VERSION",
    "PROJECT_NAME",
    "ENTRY_POINT_GROUP",
    "hookspec",
    "hookimpl",
    "public",
    "accepts",
    "returns",
    "ICONS",
    "ConfigField",
    "ConfigSet",
    "I18nBundle",
    "PluginInfo",
    "SystemAgent",
    "SystemAgentContext",
    "Report",
    "parse_report",
    "NOTHING_TO_REPORT",
    "Tool",
    "ToolContext",
    "NotReady",
    "ToolError",
    "TurnApi",
    "WebPage",
    "HostApi",
    "Caller",
    "current_caller",
    "ChatEvent",
    "SystemEvent",
    "UserEvent",
    "Channel",
    "ChannelEvent",
    "ChannelRequestError",
    "Delivery",
    "MemberLocked",
    "ReachableChannel",
    "ExecResult",
    "Mount",
    "SandboxBackend",
    "SandboxProcess",
    "SandboxSpec",
    "SandboxUnavailable",
    "TtsEngine",
    "TtsUnavailable",
    "TtsVoice",
]

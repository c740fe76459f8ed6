"""The contract between the Skald host and its plugins.

A plugin depends on this package only, never on ``skald_host``: the markers, the hook
specifications, the small frozen types a plugin registers and the ``HostApi`` protocol
it receives at start. ``SPEC_VERSION`` is what a plugin's declared spec range is
checked against; it follows semantic versioning (a hook renamed or removed bumps the
major version, a hook or argument added bumps the minor).
"""

import pluggy

SPEC_VERSION = "1.2"
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


from skald_hookspecs.types import (  # noqa: E402
    ConfigField,
    ConfigSet,
    I18nBundle,
    PluginInfo,
    SystemAgent,
    Tool,
    ToolContext,
    TurnApi,
    WebPage,
)
from skald_hookspecs.host_api import HostApi  # noqa: E402
from skald_hookspecs.context import Caller, current_caller  # noqa: E402
from skald_hookspecs.events import ChatEvent, SystemEvent, UserEvent  # noqa: E402
from skald_hookspecs.channels import Channel, ChannelEvent, ChannelRequestError, Delivery, MemberLocked  # noqa: E402
from skald_hookspecs.sandbox import ExecResult, Mount, SandboxBackend, SandboxSpec, SandboxUnavailable  # noqa: E402
from skald_hookspecs.tts import TtsEngine, TtsUnavailable, TtsVoice  # noqa: E402

__all__ = [
    "SPEC_VERSION",
    "PROJECT_NAME",
    "ENTRY_POINT_GROUP",
    "hookspec",
    "hookimpl",
    "public",
    "ConfigField",
    "ConfigSet",
    "I18nBundle",
    "PluginInfo",
    "SystemAgent",
    "Tool",
    "ToolContext",
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
    "ExecResult",
    "Mount",
    "SandboxBackend",
    "SandboxSpec",
    "SandboxUnavailable",
    "TtsEngine",
    "TtsUnavailable",
    "TtsVoice",
]

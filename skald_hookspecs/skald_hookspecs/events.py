"""Events on the host's three buses (seed 001, "Event-driven coupling").

- ``ChatEvent`` on the chat bus: user message, assistant response, compaction done.
- ``SystemEvent`` on the system bus: instance facts, by ``kind``: ``member_created``,
  ``member_deleted``, ``member_active_changed``, ``plugin_enabled``,
  ``plugin_disabled`` (``subject_id`` the member or plugin), and
  ``folders.membership_changed`` (``subject_id`` the member who joined or left a
  shared folder; ``data``: ``reason``, ``kind``, ``id``). No event says a
  plugin's or a settings set's config changed: read the config when you use it.
  Best-effort: a subscriber that falls behind loses the oldest events, so never put
  an access revocation on a bus.
- ``UserEvent`` on a member's own bus (``HostApi.subscribe_member``), by ``kind``:
  ``chat`` (the step of a turn is ``data["type"]``: ``user_message``,
  ``turn_started``, ``token``, ``tool_start``, ``tool_done``, ``assistant``,
  ``done``, ``turn_finished``, ``cancelled``, ``error``, ``compacted``,
  ``approval_resolved``, ``conversation_changed``, ``conversation_deleted``,
  ``branch_changed``, with ``data["conversation_id"]``), ``notification``,
  ``access_changed`` and ``sessions_revoked`` (``data["reason"]``).

The payloads of ``chat`` events carry the member's own words: ``user_message`` has
the message's ``content``, ``token`` and ``assistant`` the reply, ``tool_done`` the
tool's ``result``. That is why the host hands a plugin a member's events only while
the member may use it (since 1.17). Never another member's words, never secrets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class ChatEvent:
    kind: str
    member_id: str
    conversation_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SystemEvent:
    kind: str
    subject_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UserEvent:
    kind: str
    member_id: str
    data: Mapping[str, Any] = field(default_factory=dict)

"""Events on the host's three buses (seed 001, "Event-driven coupling").

- ``ChatEvent`` on the chat bus: user message, assistant response, compaction done.
- ``SystemEvent`` on the system bus: instance facts, by ``kind``: ``member_created``,
  ``member_deleted``, ``member_active_changed``, ``plugin_enabled``,
  ``plugin_disabled`` (``subject_id`` the member or plugin). No event says a
  plugin's or a settings set's config changed: read the config when you use it.
  Best-effort: a subscriber that falls behind loses the oldest events, so never put
  an access revocation on a bus.
- ``UserEvent`` on a member's own bus: what their open clients are shown.

Payloads carry ids and metadata, never message text of another member, never secrets.
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

"""The one place that decides access: ``allowed(member, action)``.

Deny by default: an unknown action, an inactive member or a missing capability is a
no. Admins hold everything implicitly, so no admin rows are ever written. Actions in
``ADMIN_ONLY`` cannot be granted to another role at all: managing members, roles,
plugins and settings is admin by construction.
"""

from __future__ import annotations

from typing import Protocol

ADMIN_ONLY = frozenset({"members.manage", "roles.manage", "plugins.manage", "settings.manage", "instance.status"})

#: Capabilities an admin may give a role; a role row naming anything else is refused.
GRANTABLE = frozenset({"chat.use", "memory.shared.read", "memory.shared.write", "projects.create", "sandbox.network"})

KNOWN_ACTIONS = ADMIN_ONLY | GRANTABLE


class _Actor(Protocol):
    active: bool

    @property
    def is_admin(self) -> bool: ...

    @property
    def capabilities(self) -> frozenset[str]: ...


def allowed(member: _Actor | None, action: str) -> bool:
    if member is None or not member.active or action not in KNOWN_ACTIONS:
        return False
    if member.is_admin:
        return True
    if action in ADMIN_ONLY:
        return False
    return action in member.capabilities

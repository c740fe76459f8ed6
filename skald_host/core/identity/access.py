"""The one place that decides access: ``allowed(member, action)``.

Deny by default: an unknown action, an inactive member, a missing capability or a
missing plugin grant is a no. A plugin grant is read fresh with the member on every
request, so a revoked grant lands on the next call with nothing pushed. Admins hold everything implicitly, so no admin rows are ever written. Actions in
``ADMIN_ONLY`` cannot be granted to another role at all: managing members, roles,
plugins and settings is admin by construction.
"""

from __future__ import annotations

from typing import Protocol

ADMIN_ONLY = frozenset(
    {"members.manage", "roles.manage", "plugins.manage", "settings.manage", "instance.status", "models.manage", "approvals.manage", "backups.manage"}
)

#: Capabilities an admin may give a role; a role row naming anything else is refused.
GRANTABLE = frozenset({"chat.use", "memory.shared.read", "memory.shared.write", "projects.create", "sandbox.network"})

KNOWN_ACTIONS = ADMIN_ONLY | GRANTABLE


class _Actor(Protocol):
    active: bool

    @property
    def is_admin(self) -> bool: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    @property
    def plugin_grants(self) -> frozenset[str]: ...


def plugin_action(plugin_id: str) -> str:
    """The action of using one plugin: its routes, pages, tools, channel messages."""
    return f"plugin:{plugin_id}"


def allowed(member: _Actor | None, action: str) -> bool:
    if member is None or not member.active:
        return False
    if action.startswith("plugin:"):
        return member.is_admin or action[len("plugin:"):] in member.plugin_grants
    if action not in KNOWN_ACTIONS:
        return False
    if member.is_admin:
        return True
    if action in ADMIN_ONLY:
        return False
    return action in member.capabilities

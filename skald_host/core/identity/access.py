"""The one place that decides access: ``allowed(member, action)``.

Deny by default: an unknown action, an inactive member, a missing capability or a
missing plugin grant is a no. Actions are capabilities (``tools.shell``), a plugin
(``plugin:<id>``) or a chat agent (``agent:<id>``, matched against the role's
``attrs.chat_agents``). A plugin grant is read fresh with the member on every
request; a running conversation holds the member as last read, and every change of
their role, grants or active flag is pushed to it (``ChatService.access_changed``),
so its next round and its next call see the change. Admins hold everything
implicitly, so no admin rows are ever written. Actions in
``ADMIN_ONLY`` cannot be granted to another role at all: managing members, roles,
plugins and settings is admin by construction.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Protocol

ADMIN_ONLY = frozenset(
    {"members.manage", "roles.manage", "plugins.manage", "settings.manage", "instance.status", "models.manage", "approvals.manage", "backups.manage"}
)

#: The host's own tools that act on the world, and the capability each needs (seed 001
#: "users": roles are data). Keyed by tool name, applied only to the built-in plugins'
#: tools; every other tool is gated by its plugin's grant alone.
HOST_TOOL_CAPABILITIES = {
    "execute_cmd": "tools.shell",
    "write_file": "tools.files.write",
    "edit_file": "tools.files.write",
    "schedule_prompt": "tools.schedule",
    "list_scheduled_prompts": "tools.schedule",
    "change_scheduled_prompt": "tools.schedule",
    "delete_scheduled_prompt": "tools.schedule",
    "execute_task": "tools.delegate",
    "agent_task": "tools.delegate",
}

#: Capabilities an admin may give a role; a role row naming anything else is refused.
GRANTABLE = frozenset(
    {"chat.use", "memory.shared.read", "memory.shared.write", "projects.create", "projects.chat", "sandbox.network"}
    # Self-service connectors (the Connectors plugin asks them through ``Caller``).
    | {"connectors.activate", "connectors.remote"}
    | set(HOST_TOOL_CAPABILITIES.values())
)

KNOWN_ACTIONS = ADMIN_ONLY | GRANTABLE


class _Actor(Protocol):
    active: bool

    @property
    def is_admin(self) -> bool: ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    @property
    def plugin_grants(self) -> frozenset[str]: ...

    @property
    def role(self) -> Any: ...


def plugin_action(plugin_id: str) -> str:
    """The action of using one plugin: its routes, pages, tools, channel messages."""
    return f"plugin:{plugin_id}"


def allowed(member: _Actor | None, action: str) -> bool:
    if member is None or not member.active:
        return False
    if action.startswith("plugin:"):
        return member.is_admin or action[len("plugin:"):] in member.plugin_grants
    if action.startswith("agent:"):
        agent_id = action[len("agent:"):]
        return member.is_admin or any(fnmatch.fnmatchcase(agent_id, p) for p in member.role.attrs.chat_agents)
    if action not in KNOWN_ACTIONS:
        return False
    if member.is_admin:
        return True
    if action in ADMIN_ONLY:
        return False
    return action in member.capabilities


def agent_action(agent_id: str, kind: str) -> str:
    """The action of starting a conversation with an agent: ``agent:<id>`` for a chat
    agent (the role lists those its members may start), the ``projects.chat``
    capability for a project's agent. Task agents are reached through delegation
    (``tools.delegate``), never started."""
    return "projects.chat" if kind == "project" else f"agent:{agent_id}"


def may_start_agent(member: _Actor | None, agent_id: str, kind: str) -> bool:
    """Whether ``member`` may start (or go on talking with) the ``kind`` agent ``agent_id``.
    A ``system`` agent's conversation is started by the host's scheduler for the member
    (never by them: ``create_conversation`` takes chat and project agents only)."""
    if kind == "system":
        return True
    return kind != "task" and allowed(member, agent_action(agent_id, kind))

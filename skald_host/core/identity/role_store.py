"""Role rows: the admin edits labels, attributes and capabilities; presets cannot be
deleted and the admin role's powers are implicit, so its capability rows stay empty."""

from __future__ import annotations

import fnmatch
import logging
import re
from typing import Any, Awaitable, Callable

from skald_host.core.identity.access import GRANTABLE
from skald_host.core.identity.roles import ADMIN_ROLE, Role, RoleAttrs
from skald_host.core.identity.users import MemberError
from skald_host.core.storage import Database
from skald_host.core.text import check_shown_name

log = logging.getLogger(__name__)
_ROLE_ID = re.compile(r"^[a-z][a-z0-9_-]{1,31}$")
_AGENT_PATTERN = re.compile(r"^[a-z0-9*?_-]{1,64}$")


class RoleError(MemberError):
    """A role request that cannot be done. Each carries a code (and the offending
    ``field`` among its values) so the roles page says it in its reader's language
    beside the input it is about."""


def _attrs(raw: Any, base: RoleAttrs | None = None) -> RoleAttrs:
    if raw is None:
        return base or RoleAttrs()
    if not isinstance(raw, dict):
        raise RoleError("attrs must be an object", code="field_type", field="attrs")
    unknown = set(raw) - {"ui_mode", "chat_agent", "auto_grant", "permission_groups", "chat_agents"}
    if unknown:
        raise RoleError(f"unknown role attribute(s): {', '.join(sorted(unknown))}", code="fields_unknown", field="attrs", fields=", ".join(sorted(unknown)))
    merged = (base or RoleAttrs()).as_dict() | raw
    if base is None and "chat_agents" not in raw:  # a new role may start its own chat agent, no other
        merged["chat_agents"] = [merged["chat_agent"]]
    if merged["ui_mode"] not in ("full", "simple"):
        raise RoleError("attrs.ui_mode must be 'full' or 'simple'", code="role_ui_mode_invalid", field="ui_mode")
    if not isinstance(merged["auto_grant"], bool):
        raise RoleError("attrs.auto_grant must be true or false", code="field_type", field="auto_grant")
    if not isinstance(merged["chat_agent"], str) or not re.match(r"^[a-z0-9_-]{1,64}$", merged["chat_agent"]):
        raise RoleError("attrs.chat_agent must be an agent id", code="role_chat_agent_invalid", field="chat_agent")
    agents = merged["chat_agents"]
    if not isinstance(agents, list) or not all(isinstance(a, str) and _AGENT_PATTERN.match(a) for a in agents):
        raise RoleError("attrs.chat_agents must be a list of agent ids (or patterns such as '*')", code="chat_agents_invalid", field="chat_agents")
    if not any(fnmatch.fnmatchcase(merged["chat_agent"], a) for a in agents):
        raise RoleError(
            "attrs.chat_agent must be one of attrs.chat_agents: members land on it",
            code="chat_agent_not_listed", field="chat_agents", agent=merged["chat_agent"],
        )
    groups = merged["permission_groups"]
    if not isinstance(groups, list) or not all(isinstance(x, str) and len(x) <= 64 for x in groups):
        raise RoleError("attrs.permission_groups must be a list of group names", code="permission_groups_invalid", field="permission_groups")
    return RoleAttrs.parse(merged)


def _capabilities(raw: Any) -> frozenset[str]:
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise RoleError("capabilities must be a list of capability names", code="field_type", field="capabilities")
    unknown = set(raw) - GRANTABLE
    if unknown:
        raise RoleError(f"unknown or admin-only capability: {', '.join(sorted(unknown))}", code="capability_unknown", field="capabilities", capabilities=", ".join(sorted(unknown)))
    return frozenset(raw)


class RoleStore:
    def __init__(self, registry: Database) -> None:
        self.registry = registry
        # Called with a role id after its attributes or capabilities changed, before the
        # request answers: the members of the role are read again where they are held.
        self.after_change: list[Callable[[str], Awaitable[None]]] = []

    @staticmethod
    def _read(conn: Any, role_id: str) -> Role | None:
        row = conn.execute("SELECT id, label, attrs, builtin FROM roles WHERE id = ?", (role_id,)).fetchone()
        if row is None:
            return None
        caps = frozenset(r[0] for r in conn.execute("SELECT capability FROM role_capabilities WHERE role_id = ?", (role_id,)))
        return Role(row["id"], row["label"], RoleAttrs.parse(row["attrs"]), bool(row["builtin"]), caps)

    async def list(self) -> list[Role]:
        def read(conn: Any) -> list[Role]:
            ids = [r[0] for r in conn.execute("SELECT id FROM roles ORDER BY builtin DESC, id")]
            return [r for r in (self._read(conn, i) for i in ids) if r]

        return await self.registry.run(read)

    async def get(self, role_id: str) -> Role:
        role = await self.registry.run(lambda c: self._read(c, role_id))
        if role is None:
            raise RoleError(f"no such role {role_id!r}", code="role_not_found", name=role_id)
        return role

    async def create(self, role_id: Any, label: Any, attrs: Any = None, capabilities: Any = None) -> Role:
        if not isinstance(role_id, str) or not _ROLE_ID.match(role_id):
            raise RoleError("id must be 2-32 lower-case letters, digits, '-' or '_', starting with a letter", code="role_id_invalid", field="id")
        if not isinstance(label, str) or not label.strip() or len(label) > 64:
            raise RoleError("label must be 1-64 characters", code="length_between", field="label", limit=64)
        check_shown_name(label, "label", RoleError)
        parsed, caps = _attrs(attrs), _capabilities(capabilities or [])

        def write(conn: Any) -> None:
            if conn.execute("SELECT 1 FROM roles WHERE id = ?", (role_id,)).fetchone():
                raise RoleError(f"a role {role_id!r} exists already", code="role_exists", field="id", name=role_id)
            conn.execute("INSERT INTO roles (id, label, attrs) VALUES (?, ?, ?)", (role_id, label.strip(), parsed.to_json()))
            conn.executemany("INSERT INTO role_capabilities VALUES (?, ?)", [(role_id, c) for c in sorted(caps)])

        await self.registry.transaction(write)
        return await self.get(role_id)

    async def update(self, role_id: str, *, label: Any = None, attrs: Any = None, capabilities: Any = None) -> Role:
        current = await self.get(role_id)
        if label is not None and (not isinstance(label, str) or not label.strip() or len(label) > 64):
            raise RoleError("label must be 1-64 characters", code="length_between", field="label", limit=64)
        if label is not None:
            check_shown_name(label, "label", RoleError)
        parsed = _attrs(attrs, current.attrs)
        caps = None if capabilities is None else _capabilities(capabilities)
        if role_id == ADMIN_ROLE and caps:
            raise RoleError("the admin role holds every capability implicitly", code="admin_capabilities_implicit", field="capabilities")

        def write(conn: Any) -> None:
            conn.execute(
                "UPDATE roles SET label = ?, attrs = ? WHERE id = ?",
                ((label or current.label).strip(), parsed.to_json(), role_id),
            )
            if caps is not None:
                conn.execute("DELETE FROM role_capabilities WHERE role_id = ?", (role_id,))
                conn.executemany("INSERT INTO role_capabilities VALUES (?, ?)", [(role_id, c) for c in sorted(caps)])

        await self.registry.transaction(write)
        for callback in self.after_change:
            try:
                await callback(role_id)
            except Exception:
                log.exception("role-change callback failed for role %s", role_id)
        return await self.get(role_id)

    async def delete(self, role_id: str) -> None:
        def write(conn: Any) -> None:
            row = conn.execute("SELECT builtin FROM roles WHERE id = ?", (role_id,)).fetchone()
            if row is None:
                raise RoleError(f"no such role {role_id!r}", code="role_not_found", name=role_id)
            if row[0]:
                raise RoleError("preset roles cannot be deleted", code="role_preset_kept")
            if conn.execute("SELECT 1 FROM users WHERE role_id = ? LIMIT 1", (role_id,)).fetchone():
                raise RoleError("the role still has members; move them to another role first", code="role_has_members")
            conn.execute("DELETE FROM roles WHERE id = ?", (role_id,))

        await self.registry.transaction(write)

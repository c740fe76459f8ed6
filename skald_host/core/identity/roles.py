"""Roles are data (seed 001 "users", §0.1): rows with free-form ``attrs`` JSON parsed at
this single point, never new columns or enums per attribute."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

ADMIN_ROLE = "admin"


@dataclass(frozen=True)
class RoleAttrs:
    """Typed view of ``roles.attrs``. Defaults are written out by hand on purpose:
    ``auto_grant`` must default to True, or every role predating the attribute would
    silently stop receiving new plugins (seed 001 "Default access")."""

    ui_mode: Literal["full", "simple"] = "full"
    chat_agent: str = "assistant"
    auto_grant: bool = True
    permission_groups: tuple[str, ...] = ()
    #: The chat agents members of the role may start: ids or patterns (``*``). Absent
    #: means the role's ``chat_agent`` alone (deny by default); the roles that predate
    #: the attribute had it written by a registry migration, so none lost an agent.
    chat_agents: tuple[str, ...] = ("assistant",)

    @classmethod
    def parse(cls, raw: str | dict[str, Any] | None) -> "RoleAttrs":
        data = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        ui_mode = data.get("ui_mode", "full")
        chat_agent = str(data.get("chat_agent") or "assistant")
        chat_agents = data.get("chat_agents")
        return cls(
            ui_mode=ui_mode if ui_mode in ("full", "simple") else "full",
            chat_agent=chat_agent,
            auto_grant=bool(data.get("auto_grant", True)),
            permission_groups=tuple(str(g) for g in data.get("permission_groups") or ()),
            chat_agents=tuple(str(a) for a in chat_agents) if isinstance(chat_agents, list) else (chat_agent,),
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "ui_mode": self.ui_mode,
                "chat_agent": self.chat_agent,
                "auto_grant": self.auto_grant,
                "permission_groups": list(self.permission_groups),
                "chat_agents": list(self.chat_agents),
            }
        )

    def as_dict(self) -> dict[str, Any]:
        return json.loads(self.to_json())


@dataclass(frozen=True)
class Role:
    id: str
    label: str
    attrs: RoleAttrs
    builtin: bool
    capabilities: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return self.id == ADMIN_ROLE

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "attrs": self.attrs.as_dict(),
            "builtin": self.builtin,
            "capabilities": sorted(self.capabilities),
        }

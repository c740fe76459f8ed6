"""Project invitations: nobody is put into a project without saying yes.

A project's folder becomes part of its members' assistants' file space, and its title
and description reach their project chats: a membership nobody asked for was a path
for one member's words into another member's agent (two-member probe: any member could
add any other, again and again, the admin too). So a write-member's "add" makes an
invitation, and the invitee becomes a member only by accepting it; until then the
project is not theirs in any list, mount or chat.

The invitation is kept under the name the inviter typed, whether an account has it or
not: the inviter's answer and the project's list of pending invitations are the same
either way, so neither tells which user names exist (members see no list of each
other). Only an invitation made while an account had that name reaches it
(``invitee_id``), never an account made later under the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Pending invitations one project may hold: invitations to names nobody has stay
#: until withdrawn, and must not grow the registry without bound.
MAX_PENDING = 50

_SELECT = (
    "SELECT i.id, i.project_id, p.title AS project_title, i.invitee_name, i.can_write, i.created_at,"
    " u.username AS inviter_username, u.display_name AS inviter_display_name"
    " FROM project_invitations i JOIN projects p ON p.id = i.project_id JOIN users u ON u.id = i.invited_by"
)


@dataclass(frozen=True)
class ProjectInvitation:
    id: str
    project_id: str
    project_title: str
    username: str  # the invited name as typed (normalized): the same for an account and for no one
    invited_by_username: str
    invited_by_display_name: str
    can_write: bool
    created_at: str

    def _invited_by(self) -> dict[str, str]:
        return {"username": self.invited_by_username, "display_name": self.invited_by_display_name}

    def summary(self) -> dict[str, Any]:
        """As the project's write-members see it (they may withdraw it)."""
        return {
            "id": self.id,
            "username": self.username,
            "can_write": self.can_write,
            "invited_by": self._invited_by(),
            "created_at": self.created_at,
        }

    def invitee_summary(self) -> dict[str, Any]:
        """As the invitee sees it: what they are asked into and by whom, nothing of the
        project's content or its other members before they accept."""
        return {
            "id": self.id,
            "project": {"id": self.project_id, "title": self.project_title},
            "can_write": self.can_write,
            "invited_by": self._invited_by(),
            "created_at": self.created_at,
        }


def _invitation(row: Any) -> ProjectInvitation:
    return ProjectInvitation(
        row["id"],
        row["project_id"],
        row["project_title"],
        row["invitee_name"],
        row["inviter_username"],
        row["inviter_display_name"],
        bool(row["can_write"]),
        row["created_at"],
    )


def pending_for_project(conn: Any, project_id: str) -> tuple[ProjectInvitation, ...]:
    rows = conn.execute(_SELECT + " WHERE i.project_id = ? ORDER BY i.invitee_name", (project_id,)).fetchall()
    return tuple(_invitation(r) for r in rows)


def pending_for_member(conn: Any, member_id: str) -> list[ProjectInvitation]:
    rows = conn.execute(_SELECT + " WHERE i.invitee_id = ? ORDER BY i.created_at, i.id", (member_id,)).fetchall()
    return [_invitation(r) for r in rows]


def find_for_member(conn: Any, invitation_id: str, member_id: str) -> ProjectInvitation | None:
    row = conn.execute(_SELECT + " WHERE i.id = ? AND i.invitee_id = ?", (invitation_id, member_id)).fetchone()
    return _invitation(row) if row else None

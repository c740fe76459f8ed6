"""Joining a project as members do: a write-member invites, the invitee accepts."""

from __future__ import annotations

from typing import Any


async def join_project(inviter: Any, invitee: Any, project_id: str, *, can_write: bool = False) -> dict:
    """``invitee`` (a signed-in client) becomes a member of the project through
    ``inviter``'s invitation; the project as the invitee then sees it."""
    username = invitee.member["username"]
    response = await inviter.post(f"/api/projects/{project_id}/members", json={"username": username, "can_write": can_write})
    assert response.status_code == 201, response.text
    waiting = (await invitee.get("/api/projects")).json()["invitations"]
    [invitation] = [i for i in waiting if i["project"]["id"] == project_id]
    response = await invitee.post(f"/api/project-invitations/{invitation['id']}/accept")
    assert response.status_code == 200, response.text
    return response.json()

"""What an admin does to members, with revocation where it belongs.

Deactivation, deletion, a password reset and "end all sessions" revoke every session
and lock the member *before* returning (a reset: once it is prepared, before its commit) — synchronously, never via a bus — so the
next request or frame on any channel is refused (check A2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skald_host.core.identity.auth import AuthService
from skald_host.core.identity.passwords import check_password_policy
from skald_host.core.identity.users import Member, MemberError, UserManager


class MemberAdministration:
    def __init__(self, users: UserManager, auth: AuthService) -> None:
        self.users = users
        self.auth = auth

    async def create(self, username: str, password: str, **fields: Any) -> Member:
        # The admin chose the password: the member is asked to choose their own.
        return await self.users.register(username, password, set_by_admin=True, **fields)

    async def update(self, member_id: str, **fields: Any) -> Member:
        member = await self.users.update(member_id, **fields)
        if not member.active:
            await self.auth.revoke_member(member_id, "deactivated")
        return member

    async def delete(self, member_id: str, *, acting: Member) -> None:
        if member_id == acting.id:
            raise MemberError("you cannot delete your own account; ask another admin", code="delete_self")
        await self.users.get(member_id)
        with self.users.deleting(member_id):  # the lock logs the requests it cuts: the file goes
            await self.auth.revoke_member(member_id, "deleted")
            await self.users.delete(member_id)

    async def reset_password(self, member_id: str, new_password: str, *, set_by_admin: bool = True) -> Path | None:
        """The admin's reset route and ``skald reset-password`` (which says
        ``set_by_admin=False`` for an admin's own account: they chose it)."""
        member = await self.users.get(member_id)
        check_password_policy(new_password, user_name=member.username)  # refuse before anyone is signed out
        # Signed out once the reset is prepared, just before its commit (still before
        # this returns): a reset the disk refuses while preparing costs the member
        # nothing — not their sessions, not their paired devices.
        return await self.users.reset_password(
            member_id, new_password, set_by_admin=set_by_admin,
            before_commit=lambda: self.auth.revoke_member(member_id, "password reset by an admin"),
        )

    async def recover_reset(self, member_id: str, old_password: str, source: str | None = None) -> Any:
        """``skald recover-reset``: the database a reset quarantined is the account's
        again (``UserManager.recover_reset``). The sessions end after, not before: a wrong
        password changes nothing, not even who is signed in; the server is stopped meanwhile."""
        recovered = await self.users.recover_reset(member_id, old_password, source)
        await self.auth.revoke_member(member_id, "a reset was undone")
        return recovered

    async def end_sessions(self, member_id: str) -> int:
        await self.users.get(member_id)
        return await self.auth.revoke_member(member_id, "sessions ended by an admin")

"""Login, logout and revocation: the member lifecycle above the directory.

Revocation is deliberately synchronous and ordered (seed 001, "Where the bus stops"):
revoke every session (open sockets close with 1008) → lock the member (the owner
connection closes and the DEK leaves memory). Never on a bus: "settles later" is the
failure for a revocation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from skald_hookspecs.events import UserEvent
from skald_host.core.buses import Buses
from skald_host.core.identity.crypto import CredentialError
from skald_host.core.identity.device_tokens import DeviceTokens
from skald_host.core.identity.sessions import Session, SessionStore
from skald_host.core.identity.throttle import LoginThrottle
from skald_host.core.identity.users import Member, UserManager, username_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoginResult:
    token: str
    session: Session
    member: Member


class AuthService:
    def __init__(
        self, users: UserManager, sessions: SessionStore, throttle: LoginThrottle, buses: Buses, devices: DeviceTokens
    ) -> None:
        self.users = users
        self.sessions = sessions
        self.throttle = throttle
        self.buses = buses
        self.devices = devices

    async def login(self, username: Any, password: Any, address: str, kind: str = "web") -> LoginResult:
        """Verify, unlock, open a session. Raises ``LoginThrottled`` before any Argon2
        work when a limit is reached, ``CredentialError`` (one generic error) for every
        wrong-credential case, ``OwnerDatabaseUnavailable`` when the password was right
        but the member's file is gone."""
        account = username if isinstance(username, str) else ""
        key = username_key(account)  # every spelling that reaches one account counts as it
        attempt = await self.throttle.admit(key, address)
        try:
            # A password changed or reset while this one was checked may have been the
            # old one: no session from it (one made during a change would outlive it, and
            # a reset's would open the old file). Checked once more against what is
            # current, so the new password racing the change's commit still signs in.
            for _ in range(2):
                mark = self.users.credentials_mark()
                try:
                    member, dek = await self.users.verify_password(account, password)
                except CredentialError:
                    attempt.failed()
                    raise
                if not self.users.credentials_changed_since(member.id, mark):
                    break
            else:
                raise CredentialError()
            attempt.succeeded()
        finally:
            attempt.release()
        await self.users.unlock(member.id, dek)
        if self.users.credentials_changed_since(member.id, mark):
            await self._lock_if_no_sessions(member.id)
            raise CredentialError()
        token, session = self.sessions.create(member.id, kind)  # type: ignore[arg-type]
        await self.users.record_login(member.id)
        log.info("member %s logged in (%s)", member.id, kind)
        return LoginResult(token, session, member)

    async def resolve(self, token: str | None) -> Session | None:
        """The live session for a token. A session found expired here ends like any
        other: if it was the member's last, the member is locked now, not at the next
        sweep."""
        session = self.sessions.resolve(token)
        if session is None and self.sessions.expired_members:
            await self.expire_idle()
        return session

    async def logout(self, session: Session) -> None:
        self.sessions.revoke_session(session, "logout")
        await self._lock_if_no_sessions(session.member_id)

    async def _lock_if_no_sessions(self, member_id: str) -> None:
        """The last session of a member ending locks them: no session, no key in RAM."""
        if self.sessions.count_for(member_id) == 0:
            await self.users.lock(member_id)

    async def revoke_member(self, member_id: str, reason: str, *, keep: Session | None = None) -> int:
        """End every session of a member and lock them, before the caller responds.
        With ``keep`` (a password change by the member), that one session survives and
        the member stays unlocked. Every device token of the member goes too (a paired
        phone is a session that outlives restarts, and ends with the others). The
        sessions end first, at once: a pairing code a plugin tied to one of them dies
        before the await on the devices, which a redeeming request could otherwise use
        to get a device token that outlives this revocation."""
        count = self.sessions.revoke_member(member_id, reason, keep=keep)
        devices = await self.devices.revoke_member(member_id)
        self.buses.members.publish(UserEvent("sessions_revoked", member_id, {"reason": reason}))
        if keep is None:
            await self.users.lock(member_id)
        log.info("member %s: %d session(s) and %d device(s) revoked (%s)", member_id, count, devices, reason)
        return count

    async def expire_idle(self) -> None:
        for member_id in self.sessions.expire():
            await self._lock_if_no_sessions(member_id)

    async def change_password(self, session: Session, current: Any, new: Any) -> str | None:
        """Every other session of the member ends, and this one gets a new token (returned;
        None if it ended meanwhile): whoever held a copy of any token is out."""
        await self.users.change_password(session.member_id, current, new)
        await self.revoke_member(session.member_id, "password changed", keep=session)
        return self.sessions.rotate(session)

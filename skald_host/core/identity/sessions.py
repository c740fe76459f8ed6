"""RAM-only sessions (DESIGN: a restart locks every member, so sessions cannot outlive
the process either).

Tokens are 256 bits from ``secrets``; the store keys sessions by the SHA-256 of the
token, so even a memory dump of the map does not hand out usable tokens. Revocation is
pushed, not polled: listeners (open WebSockets) are told synchronously and close with
1008 before the revoking request responds.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable, Literal

RevokeListener = Callable[["Session", str], None]

#: Why an admin ended a member's sessions, by the reason ``AuthService.revoke_member`` is
#: given, as a code the holder of such a session is told (its next request's 401, its
#: socket's close): "your account was deactivated" instead of "your session has ended".
#: Only a session's own token learns it; a sign-in attempt is never told (A3).
TOLD_REASONS = {"deactivated": "account_deactivated", "password reset by an admin": "password_reset"}
#: How many ended sessions' reasons are kept (RAM only, the oldest forgotten first).
TOLD_KEEP = 1000


def told_reason(reason: str) -> str | None:
    """The code the session's holder is told for ``reason``, or None (nothing said)."""
    return TOLD_REASONS.get(reason)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Session:
    member_id: str
    token_digest: str
    csrf_token: str
    created_at: float
    last_seen: float
    kind: Literal["web", "bearer"] = "web"
    listeners: list[RevokeListener] = field(default_factory=list)
    #: Random, never shown, the same for the session's whole life (a password change's
    #: ``rotate`` replaces the token, not this): what ``Caller.session_id`` derives from.
    handle: str = field(default_factory=lambda: secrets.token_hex(16))

    @property
    def id(self) -> str:
        """A public handle for the session (never the token)."""
        return self.token_digest[:16]

    def check_csrf(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(presented.encode(), self.csrf_token.encode())


class SessionStore:
    def __init__(self, idle_seconds: float, absolute_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_seconds = idle_seconds
        self.absolute_seconds = absolute_seconds
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        # Members whose session expired on a lookup; the auth service locks them if that
        # was their last session (the store itself knows nothing about unlocking).
        self.expired_members: set[str] = set()
        # Token digest of a session an admin ended → the code its holder is told.
        self._ended: dict[str, str] = {}

    def create(self, member_id: str, kind: Literal["web", "bearer"] = "web") -> tuple[str, Session]:
        token = secrets.token_urlsafe(32)
        now = self._clock()
        session = Session(member_id, _digest(token), secrets.token_urlsafe(32), now, now, kind)
        self._sessions[session.token_digest] = session
        return token, session

    def resolve(self, token: str | None) -> Session | None:
        """The live session for a token, touching its idle clock; None when unknown or
        expired (an expired session is revoked on the spot)."""
        if not token or len(token) > 512:
            return None
        session = self._sessions.get(_digest(token))
        if session is None:
            return None
        now = self._clock()
        if now - session.last_seen > self.idle_seconds or now - session.created_at > self.absolute_seconds:
            self._drop(session, "expired")
            self.expired_members.add(session.member_id)
            return None
        session.last_seen = now
        return session

    def watch(self, session: Session, listener: RevokeListener) -> bool:
        """Tell ``listener`` when ``session`` ends; False (and nothing added) when it has
        already ended: a listener added to a dropped session would never be called."""
        if self._sessions.get(session.token_digest) is not session:
            return False
        session.listeners.append(listener)
        return True

    @staticmethod
    def unwatch(session: Session, listener: RevokeListener) -> None:
        """Stop telling ``listener`` (no error when it was told already)."""
        try:
            session.listeners.remove(listener)
        except ValueError:
            pass

    def revoke(self, token: str, reason: str = "logout") -> Session | None:
        session = self._sessions.get(_digest(token))
        if session is not None:
            self._drop(session, reason)
        return session

    def revoke_session(self, session: Session, reason: str) -> None:
        if self._sessions.get(session.token_digest) is session:
            self._drop(session, reason)

    def rotate(self, session: Session) -> str | None:
        """A new token for a live ``session``, the old one dead at once (its listeners,
        CSRF token and clocks kept: the member's open page and socket go on). A password
        change does it, so a copy of the token taken before the change (the reason to
        change it) opens nothing after. None when the session has already ended."""
        if self._sessions.get(session.token_digest) is not session:
            return None
        token = secrets.token_urlsafe(32)
        del self._sessions[session.token_digest]
        session.token_digest = _digest(token)
        self._sessions[session.token_digest] = session
        return token

    def revoke_member(self, member_id: str, reason: str, *, keep: Session | None = None) -> int:
        doomed = [s for s in self._sessions.values() if s.member_id == member_id and s is not keep]
        for session in doomed:
            self._drop(session, reason)
        return len(doomed)

    def revoke_all(self, reason: str) -> int:
        doomed = list(self._sessions.values())
        for session in doomed:
            self._drop(session, reason)
        return len(doomed)

    def expire(self) -> set[str]:
        """Drop expired sessions; returns the members who lost one."""
        now = self._clock()
        doomed = [
            s for s in self._sessions.values()
            if now - s.last_seen > self.idle_seconds or now - s.created_at > self.absolute_seconds
        ]
        for session in doomed:
            self._drop(session, "expired")
        members = {s.member_id for s in doomed} | self.expired_members
        self.expired_members = set()
        return members

    def ended_reason(self, token: str | None) -> str | None:
        """Why the session of ``token`` ended, when an admin's deactivation or password
        reset ended it (``TOLD_REASONS``): for that session's holder only."""
        if not token or len(token) > 512:
            return None
        return self._ended.get(_digest(token))

    def count_for(self, member_id: str) -> int:
        return sum(1 for s in self._sessions.values() if s.member_id == member_id)

    def _drop(self, session: Session, reason: str) -> None:
        self._sessions.pop(session.token_digest, None)
        code = told_reason(reason)
        if code is not None:
            self._ended.pop(session.token_digest, None)
            self._ended[session.token_digest] = code
            while len(self._ended) > TOLD_KEEP:
                self._ended.pop(next(iter(self._ended)))
        listeners, session.listeners = session.listeners, []
        for listener in listeners:
            listener(session, reason)

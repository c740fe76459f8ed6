"""Who is calling a plugin's route, without importing the host.

The host binds the authenticated member for the duration of each request to
``/api/plugin/<id>/…``; a handler reads it with ``current_caller()``. On a ``@public``
route, or outside a request, it is ``None``.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Caller:
    """The member behind the current request: ids and display data only.

    ``device_id`` (since 1.3): set when the request was authenticated by a device token
    this plugin issued (``HostApi.issue_device_token``), the id of that token; None for
    a browser session.

    ``capabilities`` (since 1.3): their role's capabilities as of this request (an
    admin holds every one implicitly: check ``is_admin`` too).

    ``locale``: the language the member reads the shell in: their own choice, else the
    instance's (chosen at setup). Translate with it (``HostApi.translate``).

    ``session_id`` (since 1.19): an opaque handle of the login session the request was
    authenticated with (a browser's cookie or a bearer login), the same for every request
    of that session and different for each session of the same member, so a plugin can
    bind a step to the session that began it (an OAuth ``state``: check E5). It is not
    the token and not the id the host shows elsewhere: it differs per plugin, so two
    plugins cannot match their callers up. None for a device token (``device_id`` names
    the credential then)."""

    id: str
    username: str
    display_name: str
    locale: str | None
    is_admin: bool
    device_id: str | None = None
    capabilities: frozenset[str] = field(default_factory=frozenset)
    session_id: str | None = None

    def may(self, capability: str) -> bool:
        """Whether the caller's role holds ``capability`` (admins hold all). Since 1.3."""
        return self.is_admin or capability in self.capabilities


_caller: ContextVar[Caller | None] = ContextVar("skald_caller", default=None)


def current_caller() -> Caller | None:
    """The member behind the request being served, in a handler of the plugin's routes
    (``/api/plugin/<id>/…``): bound by the host after it checked the session, the
    plugin's enabled flag and the grant. ``None`` on a ``@public`` route and outside a
    request (a tool, a hook, a system agent: those are handed their member)."""
    return _caller.get()


def bind_caller(caller: Caller | None) -> Token[Caller | None]:
    """For the host only: bind the caller of the request being served."""
    return _caller.set(caller)

"""First-run setup: the one seam both shells call (``skald setup`` in a terminal and
the web setup page), so they cannot drift (seed 001, skald-setup).

Exactly one admin, however many setups race: the registry insert is conditional on
the users table being empty, inside one IMMEDIATE transaction, so a concurrent second
setup finds a member and fails cleanly — in this process or another.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from skald_host.core.identity.roles import ADMIN_ROLE
from skald_host.core.identity.users import Member, MemberError, UserManager

SUPPORTED_LOCALES = ("en", "de")  # the host's own; a running host offers every locale its bundles have


class AlreadySetUp(MemberError):
    pass


async def needs_setup(users: UserManager) -> bool:
    return await users.count() == 0


async def initialize_instance(
    users: UserManager,
    *,
    username: str,
    password: str,
    display_name: str = "",
    locale: str = "en",
    encrypted: bool = True,
    locales: Iterable[str] = SUPPORTED_LOCALES,
) -> Member:
    """Create the first admin and seed the instance defaults."""
    locales = tuple(locales)
    locale = locale.strip().lower() if isinstance(locale, str) else locale  # "DE" is meant as "de"
    if locale not in locales:
        raise MemberError(f"locale must be one of {', '.join(locales)}", code="locale_unknown", locales=", ".join(locales))
    if not await needs_setup(users):
        raise AlreadySetUp("the instance is already set up", code="already_set_up")

    def seed(conn: Any) -> None:
        conn.execute("INSERT OR REPLACE INTO config (key, value) VALUES ('default_locale', ?)", (json.dumps(locale),))

    try:
        return await users.register(
            username,
            password,
            role_id=ADMIN_ROLE,
            encrypted=encrypted,
            only_if_empty=True,
            also=seed,  # the instance's language with its first admin, never one without the other
            display_name=display_name or username,
            locale=locale,
        )
    except MemberError as exc:
        if "already set up" in str(exc):
            raise AlreadySetUp(str(exc), code="already_set_up") from None
        raise

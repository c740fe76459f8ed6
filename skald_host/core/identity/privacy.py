"""What reaches whom of one member's data, as the server is set up now (issue 17.6):
the account page's "What the admin can read" section.

Computed from the member as just read, through the host's own gates: ``allowed`` for
chatting, the model catalog's fallback chain for the models a turn may reach (any
enabled model can answer any member when the ones before it fail), and
``PluginCatalog.usable`` for the plugins that can act for them. Nothing here decides
access; it reports what the deciding functions answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skald_host.core.identity.access import allowed
from skald_host.core.identity.users import MemberNotFound
from skald_host.core.system_agents import store

if TYPE_CHECKING:
    from skald_host.core.host import Skald
    from skald_host.core.identity.users import Member


def endpoint(base_url: str) -> str:
    """Where requests go, without credentials or path: ``https://api.example.org``."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}"


async def privacy_facts(core: Skald, member: Member, locale: str | None = None) -> dict[str, Any]:
    chats = allowed(member, "chat.use")
    models = await core.chat.models.candidates() if chats else []
    plugins = [
        {
            "id": status.id,
            "title": core.strings.plugin_text(status.id, "plugin.title", locale, status.info.title),
            "manages_own_access": status.info.manages_own_access,
        }
        for status in core.plugins.statuses()
        if not status.builtin and status.info is not None and core.catalog.usable(member, status.id)
    ]
    supervisors = await core.registry.run(
        lambda c: c.execute(
            "SELECT u.display_name, u.username FROM supervision s JOIN users u ON u.id = s.supervisor_user_id"
            " WHERE s.subject_user_id = ? AND u.active = 1 ORDER BY u.created_at",
            (member.id,),
        ).fetchall()
    )
    reviewed = [
        e.id for e in core.system_agents.registry.entries
        if e.agent.scope == "per_subject" and await core.system_agents.registry.enabled(e)
    ]
    return {
        # A supervised member is told so, and what a review reads (seed 000): what they
        # and their assistant said, never what tools did; its reports go to these people.
        "supervision": {
            "supervised": bool(supervisors),
            "supervisors": [r[0] or r[1] for r in supervisors],
            "reviewed": bool(supervisors) and bool(reviewed),
        },
        # Of them, who was named since the member last said OK to being told (the web
        # shell shows it above its pages until they do).
        "supervision_news": await supervision_news(core, member.id),
        "encrypted": member.encrypted,
        "chat": chats,
        "models": [
            {"provider": m.provider_name, "endpoint": endpoint(m.base_url), "model": m.model, "label": m.label}
            for m in models
        ],
        "plugins": sorted(plugins, key=lambda p: p["title"].casefold()),
    }


async def supervision_news(core: Skald, member_id: str) -> dict[str, Any]:
    """Who started supervising the member since they last acknowledged it (the web
    shows it until they do: told live only on an open page or a home channel, a member
    signed out then learned nothing), and the latest such naming, which
    their acknowledgement passes back. system.db keeps only a time for it
    (``users.supervision_seen_at``, compared with ``supervision.created_at``), no words."""
    news = await core.registry.run(lambda c: store.unacknowledged_supervisors(c, member_id))
    names = []
    for supervisor_id, _ in news:
        try:
            supervisor = await core.users.get(supervisor_id)
        except MemberNotFound:  # deleted since: no longer a supervisor either
            continue
        names.append(supervisor.display_name or supervisor.username)
    return {"added": names, "added_through": max((at for _, at in news), default=None)}

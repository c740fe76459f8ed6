"""Reading and acknowledging reports (seed 001 "Reports").

The file a report lands in is its audience: a member's own reports in their own file,
reports about a subject for their supervisors in the registry, resolved against the
supervision edges *now* (an edge removed, the report is no longer theirs to read), and
instance reports for the admins. The subject cannot see a report about them because
nothing here offers it to them: they are not their own supervisor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skald_host.core.identity.users import Member
from skald_host.core.system_agents import store
from skald_host.core.system_agents.timing import iso, system_clock

if TYPE_CHECKING:
    from skald_host.core.host import Skald

SHOWN = 200
OWN, SHARED = "own", "shared"


class ReportService:
    def __init__(self, core: "Skald") -> None:
        self.core = core

    async def for_reader(self, reader: Member) -> list[dict[str, Any]]:
        """Newest first: the reader's own reports, then those filed for them as a
        supervisor (or, for an admin, about the instance). ``where`` says which home."""
        found: list[dict[str, Any]] = []
        db = self.core.users.owner_db(reader.id)
        if db is not None:
            rows = await db.run(lambda c: c.execute("SELECT * FROM reports ORDER BY created_at DESC LIMIT ?", (SHOWN,)).fetchall())
            found += [dict(r) | {"where": OWN} for r in rows]

        def shared(conn: Any) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT r.*, u.display_name AS subject_display_name, u.username AS subject_username FROM reports r"
                " LEFT JOIN users u ON u.id = r.subject_user_id"
                " WHERE (r.audience = 'supervisors' AND EXISTS (SELECT 1 FROM supervision s"
                "          WHERE s.subject_user_id = r.subject_user_id AND s.supervisor_user_id = ?))"
                "    OR (r.audience = 'admins' AND ?)"
                " ORDER BY r.created_at DESC LIMIT ?",
                (reader.id, int(reader.is_admin), SHOWN),
            )
            return [dict(r) | {"where": SHARED} for r in rows]

        found += await self.core.registry.run(shared)
        return sorted(found, key=lambda r: r["created_at"], reverse=True)

    async def mark_read(self, reader: Member, where: str, report_id: str) -> bool | None:
        """First reader wins (``read_at IS NULL`` guard). None: no such report for this
        reader (the same answer whether it exists for somebody else or not at all)."""
        at = iso(system_clock())
        if where == OWN:
            db = self.core.users.owner_db(reader.id)
            if db is None:
                return None
            exists = await db.run(lambda c: c.execute("SELECT 1 FROM reports WHERE id = ?", (report_id,)).fetchone())
            if not exists:
                return None
            return await db.transaction(lambda c: store.mark_read(c, report_id, at))
        if where != SHARED:
            return None
        readable = [r for r in await self.for_reader(reader) if r["where"] == SHARED and r["id"] == report_id]
        if not readable:
            return None
        return await self.core.registry.transaction(lambda c: store.mark_read(c, report_id, at))

"""Filing, reading and acknowledging reports (seed 001 "Reports").

The file a report lands in is its audience: a member's own reports in their own file;
reports about a subject for their supervisors, and instance reports for the admins, in
the registry, resolved against the supervision edges *now* (an edge removed, the report
is no longer theirs to read). The subject cannot see a report about them because nothing
here offers it to them: they are not their own supervisor.

Unlike the seed, a registry report's words are not kept in clear: a review narrates
somebody's private conversations, and nothing a member writes privately may reach
system.db in clear (the house rule, check B1). Each reader gets a copy sealed to their
inbox key (the sealed inbox's scheme), opened only in their own session. A reader who has
never logged in has no key yet and gets no copy; nor does a supervisor added later.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from skald_hookspecs.system_agents import Report
from skald_host.core.identity.sealing import SealedBox, SealError, ensure_inbox_key, open_sealed, seal
from skald_host.core.identity.users import Member
from skald_host.core.system_agents import store
from skald_host.core.system_agents.timing import iso, system_clock

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

SHOWN = 200
OWN, SHARED = "own", "shared"
#: A copy is readable by a reader while this holds (besides the copy being theirs).
_STILL_THEIRS = (
    "((r.audience = 'supervisors' AND EXISTS (SELECT 1 FROM supervision s"
    "   WHERE s.subject_user_id = r.subject_user_id AND s.supervisor_user_id = :reader))"
    " OR (r.audience = 'admins' AND :admin))"
)


def _sealed_id(report_id: str) -> str:
    return f"report:{report_id}"


def _pack(box: SealedBox) -> bytes:
    return bytes([box.version]) + box.ephemeral_public + box.nonce + box.ciphertext


def _unpack(raw: bytes) -> SealedBox:
    return SealedBox(raw[1:33], raw[33:45], raw[45:], raw[0])


class ReportService:
    def __init__(self, core: "Skald") -> None:
        self.core = core

    async def file_shared(self, audience: str, reader_ids: list[str], report: Report, **meta: Any) -> str:
        """A registry report for ``reader_ids``, each copy sealed to its reader."""
        report_id = uuid.uuid4().hex
        payload = json.dumps({"title": report.title, "summary": report.summary, "body": report.body}).encode()

        def keys(conn: Any) -> list[tuple[str, bytes]]:
            rows = conn.execute(
                f"SELECT id, inbox_public_key FROM users WHERE active = 1 AND inbox_public_key IS NOT NULL"
                f" AND id IN ({','.join('?' * len(reader_ids))})",
                reader_ids,
            )
            return [(r[0], bytes(r[1])) for r in rows]

        readers = await self.core.registry.run(keys) if reader_ids else []
        copies = [(reader, _pack(seal(public, payload, member_id=reader, sealed_id=_sealed_id(report_id)))) for reader, public in readers]
        if len(copies) < len(reader_ids):
            log.warning("report %s: %d of its readers have never logged in and get no copy", report_id, len(reader_ids) - len(copies))

        def write(conn: Any) -> None:
            conn.execute(
                "INSERT INTO reports (id, kind, audience, subject_user_id, producer_user_id, run_id, agent_id, period_start, period_end)"
                " VALUES (:id, :kind, :audience, :subject_user_id, :producer_user_id, :run_id, :agent_id, :period_start, :period_end)",
                {"id": report_id, "audience": audience, **{k: meta.get(k) for k in (
                    "kind", "subject_user_id", "producer_user_id", "run_id", "agent_id", "period_start", "period_end")}},
            )
            conn.executemany("INSERT INTO report_copies (report_id, reader_user_id, sealed) VALUES (?, ?, ?)",
                             [(report_id, reader, sealed) for reader, sealed in copies])

        await self.core.registry.transaction(write)
        return report_id

    async def for_reader(self, reader: Member) -> list[dict[str, Any]]:
        """Newest first: the reader's own reports, then those filed for them as a
        supervisor (or, for an admin, about the instance). ``where`` says which home."""
        found: list[dict[str, Any]] = []
        db = self.core.users.owner_db(reader.id)
        if db is not None:
            rows = await db.run(lambda c: c.execute("SELECT * FROM reports ORDER BY created_at DESC LIMIT ?", (SHOWN,)).fetchall())
            found += [dict(r) | {"where": OWN} for r in rows]

        if db is None:
            return found
        pair = await ensure_inbox_key(db)

        def shared(conn: Any) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT r.*, c.sealed, u.display_name AS subject_display_name, u.username AS subject_username"
                " FROM reports r JOIN report_copies c ON c.report_id = r.id AND c.reader_user_id = :reader"
                " LEFT JOIN users u ON u.id = r.subject_user_id"
                f" WHERE {_STILL_THEIRS} ORDER BY r.created_at DESC LIMIT :limit",
                {"reader": reader.id, "admin": int(reader.is_admin), "limit": SHOWN},
            )
            return [dict(r) for r in rows]

        for row in await self.core.registry.run(shared):
            try:
                words = json.loads(open_sealed(pair, _unpack(bytes(row.pop("sealed"))), member_id=reader.id, sealed_id=_sealed_id(row["id"])))
            except (SealError, ValueError):
                continue  # sealed to a key an admin reset replaced: unreadable for good
            found.append(row | words | {"where": SHARED})
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
        def mark(conn: Any) -> bool | None:
            readable = conn.execute(
                "SELECT 1 FROM reports r JOIN report_copies c ON c.report_id = r.id AND c.reader_user_id = :reader"
                f" WHERE r.id = :id AND {_STILL_THEIRS}",
                {"reader": reader.id, "admin": int(reader.is_admin), "id": report_id},
            ).fetchone()
            return store.mark_read(conn, report_id, at) if readable else None

        return await self.core.registry.transaction(mark)

"""Whose file a member's database is: the owner's member id, kept inside the file.

An encrypted member's file opens only with their key, so a file moved to another
member's path is refused by SQLCipher itself. A member who chose no encryption has a
plain SQLite file, which opens at any path: two such files swapped on disk (server
stopped, ``mv``) showed each member the other's history, and nothing said so (checks
B2/B4). So every member's file names its owner (owner migration 22), written when the
file is made, and every open of a member's file compares it with the member it is
opened for (``UserManager._open_member_file``, the one place that opens them).

A file written before the record existed has none: its member's first open writes it
(trust on first use). A swap made before that first open is therefore not seen; one
made after it is.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from skald_host.core.storage import Database, DatabaseUnreadable

log = logging.getLogger(__name__)


class DatabaseOfAnotherMember(DatabaseUnreadable):
    """The file opened, but it names another member as its owner. An unreadable file
    to the member it was opened for, and refused as one (quarantined, never replaced):
    what it holds is not theirs to see."""

    def __init__(self, path: Path, member_id: str, owner_id: str) -> None:
        super().__init__(f"{path.name} is the file of member {owner_id}, not of member {member_id}")
        self.member_id = member_id
        self.owner_id = owner_id


async def check_file_owner(db: Database, member_id: str, *, new: bool) -> None:
    """Refuse (``DatabaseOfAnotherMember``) a file that names another owner than
    ``member_id``; write ``member_id`` into a file that names none (a new file, or one
    from before the record: trust on first use)."""

    def claim(conn: Any) -> tuple[str | None, bool]:
        row = conn.execute("SELECT member_id FROM file_owner WHERE id = 1").fetchone()
        if row is not None:
            return row[0], False
        conn.execute("INSERT INTO file_owner (id, member_id) VALUES (1, ?)", (member_id,))
        return member_id, True

    owner_id, written = await db.transaction(claim)
    if owner_id != member_id:
        # Ids only: the admin needs to know whose file sits where, never what it holds.
        log.error("member %s: the private database at their path is member %s's file; refused", member_id, owner_id)
        raise DatabaseOfAnotherMember(db.path, member_id, owner_id)
    if written and not new:
        log.warning("member %s: their private database named no owner (written before the record existed); "
                    "it is now recorded as theirs (trust on first use)", member_id)

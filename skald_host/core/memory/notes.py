"""Memory notes (seed 001 "Memory namespace"): two virtual roots in the agent's path
namespace, backed by ``memory_docs`` rather than the disk.

``user-memory/…`` lives in the member's own encrypted file, ``shared-memory/…`` in the
registry, where every member with the capability reads it. ``classify_memory`` is the
one decision of whether a path is a note; the fs tools, the file API and the approval
matcher all ask it, so they can never disagree about which store a path reaches.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skald_hookspecs.types import ToolError
from skald_host.core.identity.access import allowed
from skald_host.core.identity.users import MemberError, OwnerDatabaseUnavailable
from skald_host.core.refusal import Refusal
from skald_host.core.storage import Database
from skald_host.core.text import code_point, hidden_character, sharp_s_spellings

if TYPE_CHECKING:
    from skald_host.core.host import Skald

MEMORY_ROOTS = ("user-memory", "shared-memory")
USER_ROOT, SHARED_ROOT = MEMORY_ROOTS

#: Spellings of the member's home that name the same place as a bare relative path.
#: Without stripping them ``~/user-memory/x`` would miss the store and become a
#: physical file no reader ever visits (seed 001, the signpost note).
HOME_SPELLINGS = ("./", "~/", "/root/", "/home/member/")

MAX_NOTE_BYTES = 256 * 1024
MAX_KEY_CHARS = 300
MAX_SEARCH_RESULTS = 50

SHARED_READ = "memory.shared.read"
SHARED_WRITE = "memory.shared.write"


class NoteError(Refusal):
    """A note request that cannot be done (bad key, too large…); the message says why,
    its ``code`` (when it has one) says it in the reader's language."""


class NoteAccessDenied(PermissionError, ToolError):
    """The member may not use the shared pool this way (a missing capability). A
    ``ToolError`` too: a file tool that meets it says so to the model, plainly, rather
    than failing as the tool's own bug (an error id, a traceback for the admin).
    ``code``: as a ``Refusal``'s, so the memory page says it in its reader's language."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values: dict[str, Any] = {}


class NoteConflict(Refusal):
    """A write with a precondition (the version the writer opened) that no longer holds:
    the note changed since (``note_changed``) or is gone (``note_gone``). Nothing is
    written: a save from an old editor must not silently undo another tab's or another
    member's newer text, nor bring back a note deleted since."""


def note_version(content: str) -> str:
    """The version a writer names as its precondition: a hash of the note's text. The
    text, not ``updated_at``: that has millisecond steps, and two saves in one
    millisecond would share a version; equal text is the same note to its reader."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class NoteInfo:
    key: str
    size: int
    updated_at: str


@dataclass(frozen=True)
class NoteHit:
    key: str
    snippet: str
    rank: float  # bm25: lower is better


def _strip_home(path: str) -> str:
    stripped = True
    while stripped:
        stripped = False
        for prefix in HOME_SPELLINGS:
            if path.startswith(prefix):
                path = path[len(prefix):]
                stripped = True
    return path


def _clamp(parts: list[str]) -> str:
    """The key inside a store: ``..`` climbs at most to the store's root, never out."""
    kept: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if kept:
                kept.pop()
            continue
        kept.append(part)
    return "/".join(kept)


def classify_memory(path: str) -> tuple[str, str] | None:
    """``(root, key)`` when ``path`` names a memory note (``key`` is ``""`` for the root
    itself), else None. Decided on the first component after the home spellings, so
    ``user-memory/../../etc`` is the note ``etc`` in the store, never a disk path."""
    if not isinstance(path, str):
        return None
    if "\x00" in path:
        raise NoteError("a path may not contain a NUL byte", code="path_nul_byte")
    path = _strip_home(unicodedata.normalize("NFKC", path).strip())
    parts = path.split("/")
    if parts[0] not in MEMORY_ROOTS:
        return None
    return parts[0], _clamp(parts[1:])


def note_key(key: Any) -> str:
    """``key`` validated and in its one spelling (NFKC, no empty parts); a bad key,
    one with a ``.`` or ``..`` part among them, raises ``NoteError``. Agent paths are
    clamped before they get here (``classify_memory``)."""
    if not isinstance(key, str):
        raise NoteError("a note key must be text", code="note_key_not_text")
    if "\x00" in key:
        raise NoteError("a note key may not contain a NUL byte", code="note_key_nul_byte")
    parts = unicodedata.normalize("NFKC", key).strip().split("/")
    # Refused, not clamped: "a/../b.md" stored as "b.md" would answer the caller with a
    # key it did not ask for (the HTTP client's own "%2E%2E" arrives here as "..").
    if any(part in (".", "..") for part in parts):
        raise NoteError(
            "a note key may not have '.' or '..' as a part; use a path such as recipes/bread.md",
            code="note_key_dot_segment",
        )
    normal = "/".join(part for part in parts if part)
    if not normal:
        raise NoteError("a note needs a name, e.g. 'index.md'", code="note_key_empty")
    if len(normal) > MAX_KEY_CHARS:
        raise NoteError(f"a note key may be at most {MAX_KEY_CHARS} characters", code="note_key_too_long", limit=MAX_KEY_CHARS)
    control = next((ch for ch in normal if ord(ch) < 32 or ord(ch) == 127), None)
    if control is not None:  # said as a hidden character is: the shell names which
        raise NoteError("a note key may not contain control characters", code="note_key_hidden_character", char=code_point(control))
    return normal


def new_note_key(key: Any) -> str:
    """``note_key`` for a note being written: besides, no character that hides itself
    or changes how the name around it reads (a bidi override, a zero-width space, a
    control character or line separator: ``hidden_character``). Only for writing, so a
    note stored under such a name before can still be opened and deleted."""
    normal = note_key(key)
    hidden = hidden_character(normal)
    if hidden is not None:
        raise NoteError(
            f"a note key may not contain control characters or invisible formatting characters ({code_point(hidden)})",
            code="note_key_hidden_character", char=code_point(hidden),
        )
    return normal


def fts_terms(query: Any) -> list[str]:
    """The member's words as FTS5 terms that cannot be a syntax error: each quoted
    (quotes doubled), so FTS operators are searched as words, and matched as a prefix
    ("garden" finds "gardening", in any language, which a stemmer would not). A word
    with "ss" or "ß" is its spellings with either, OR-ed, as the conversation search
    has it ("strasse" finds "Straße": the index folds accents, not "ß")."""
    if not isinstance(query, str):
        raise NoteError("the search query must be text", code="field_type", field="q")
    # A term with no letter or digit holds no token; FTS5 would reject it. No term left
    # (`"`, `*`, nothing) is no term: the search finds nothing, as the conversation
    # search's does, rather than being an error.
    terms = [t for t in unicodedata.normalize("NFKC", query).replace("\x00", " ").split() if any(ch.isalnum() for ch in t)]
    grouped = []
    for term in terms[:32]:
        quoted = ['"' + spelled.replace('"', '""') + '"*' for spelled in sharp_s_spellings(term)]
        grouped.append(quoted[0] if len(quoted) == 1 else "(" + " OR ".join(quoted) + ")")
    return grouped


Guard = Callable[[str], Awaitable[None]]


async def _no_guard(_action: str) -> None:
    return None


class NoteStore:
    """One pool of notes: a member's owner database or the registry. ``guard(action)``
    runs before every operation (the shared pool checks capabilities there)."""

    def __init__(self, db: Database, root: str, guard: Guard = _no_guard) -> None:
        self.db = db
        self.root = root
        self._guard = guard

    async def read(self, key: str) -> str:
        key = note_key(key)
        await self._guard(SHARED_READ)
        row = await self.db.run(lambda c: c.execute("SELECT content FROM memory_docs WHERE key = ?", (key,)).fetchone())
        if row is None:
            raise FileNotFoundError(f"{self.root}/{key} does not exist")
        return row["content"]

    async def write(self, key: str, text: str, *, expected: str | None = None) -> NoteInfo:
        """Create or replace the note; returns what was stored (its normalised key).
        ``expected``: the ``note_version`` the writer read; the note must still be at it
        (checked in the write's own transaction), else ``NoteConflict`` and nothing
        written. None: no precondition (the agent's tools, API clients that want it)."""
        key = new_note_key(key)
        if not isinstance(text, str):
            raise NoteError("a note's content must be text", code="field_type", field="content")
        if "\x00" in text:
            raise NoteError("a note may not contain a NUL byte", code="note_nul_byte")
        size = len(text.encode("utf-8"))
        if size > MAX_NOTE_BYTES:
            limit, kib = MAX_NOTE_BYTES // 1024, -(-size // 1024)  # rounded up: 256 KiB and a byte is not "256 KiB"
            raise NoteError(f"a note may be at most {limit} KiB; this one is {kib} KiB", code="note_too_large", limit=limit, size=kib)
        await self._guard(SHARED_WRITE)

        def upsert(conn: Any) -> NoteInfo:
            if expected is not None:
                current = conn.execute("SELECT content FROM memory_docs WHERE key = ?", (key,)).fetchone()
                if current is None:
                    raise NoteConflict(
                        f"{self.root}/{key} was deleted since you opened it; nothing was saved",
                        code="note_gone", key=key,
                    )
                if note_version(current["content"]) != expected:
                    raise NoteConflict(
                        f"{self.root}/{key} was changed since you opened it; nothing was saved."
                        " Load the newer version and apply your change again",
                        code="note_changed", key=key,
                    )
            conn.execute(
                "INSERT INTO memory_docs (key, content) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET"
                " content = excluded.content, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
                (key, text),
            )
            row = conn.execute("SELECT updated_at FROM memory_docs WHERE key = ?", (key,)).fetchone()
            return NoteInfo(key, size, row["updated_at"])

        return await self.db.transaction(upsert)

    async def delete(self, key: str) -> bool:
        key = note_key(key)
        await self._guard(SHARED_WRITE)
        return bool(await self.db.transaction(lambda c: c.execute("DELETE FROM memory_docs WHERE key = ?", (key,)).rowcount))

    async def list(self, prefix: str = "", *, limit: int | None = None) -> list[NoteInfo]:
        """Notes at or under ``prefix`` (a note named like it, and every note inside it
        as a folder), ordered by key."""
        prefix = note_key(prefix) if isinstance(prefix, str) and prefix.strip().strip("/") else ""
        await self._guard(SHARED_READ)
        sql = "SELECT key, length(CAST(content AS BLOB)) AS size, updated_at FROM memory_docs"
        args: tuple[Any, ...] = ()
        if prefix:
            # '0' is the character after '/': the range is exactly "prefix/…", on the index.
            sql += " WHERE key = ? OR (key >= ? AND key < ?)"
            args = (prefix, prefix + "/", prefix + "0")
        sql += " ORDER BY key"
        if limit is not None:
            sql += f" LIMIT {max(0, int(limit))}"
        rows = await self.db.run(lambda c: c.execute(sql, args).fetchall())
        return [NoteInfo(r["key"], r["size"], r["updated_at"]) for r in rows]

    async def search(self, query: str, limit: int = 10) -> list[NoteHit]:
        """Notes that have every word (or a word starting with it), best bm25 first.
        Every word, not any: a word that is in most notes would otherwise make bm25
        score most notes (bench/memory.py). Snippets are made for the chosen notes
        only, since a snippet per matching row would cost more than the ranking."""
        terms = fts_terms(query)
        limit = max(1, min(int(limit), MAX_SEARCH_RESULTS))
        await self._guard(SHARED_READ)
        if not terms:
            return []
        expression = " AND ".join(terms)

        def run(conn: Any) -> list[NoteHit]:
            ranked = conn.execute(
                "SELECT rowid, bm25(memory_docs_fts, 0.5, 1.0) AS score FROM memory_docs_fts"
                " WHERE memory_docs_fts MATCH ? ORDER BY score LIMIT ?",
                (expression, limit),
            ).fetchall()
            if not ranked:
                return []
            details = {
                row["rowid"]: (row["key"], row["snippet"])
                for row in conn.execute(
                    "SELECT rowid, key, snippet(memory_docs_fts, 1, '', '', '…', 16) AS snippet FROM memory_docs_fts"
                    f" WHERE memory_docs_fts MATCH ? AND rowid IN ({', '.join('?' * len(ranked))})",
                    (expression, *(row["rowid"] for row in ranked)),
                )
            }
            return [NoteHit(*details[row["rowid"]], float(row["score"])) for row in ranked if row["rowid"] in details]

        return await self.db.run(run)


@dataclass(frozen=True)
class MemoryHit:
    """A search result across both roots, labelled with its full agent path."""

    path: str
    snippet: str
    rank: float


class MemoryService:
    """Routes a member's memory paths to the right pool and enforces who may use the
    shared one. Capabilities are read fresh on each shared operation, so a revoked
    capability lands on the next call."""

    def __init__(self, core: "Skald") -> None:
        self.core = core

    def notes(self, member_id: str, root: str) -> NoteStore:
        if root == USER_ROOT:
            db = self.core.users.owner_db(member_id)
            if db is None:
                raise OwnerDatabaseUnavailable("your private database is locked; log in again", code="member_locked")
            return NoteStore(db, USER_ROOT)
        if root == SHARED_ROOT:
            return NoteStore(self.core.registry, SHARED_ROOT, self._shared_guard(member_id))
        raise NoteError(f"unknown memory root {root!r}; use one of {', '.join(MEMORY_ROOTS)}", code="memory_root_unknown", roots=", ".join(MEMORY_ROOTS))

    def _shared_guard(self, member_id: str) -> Guard:
        async def guard(action: str) -> None:
            try:
                member = await self.core.users.get(member_id)
            except MemberError:
                member = None
            if not allowed(member, action):
                if action == SHARED_READ:
                    raise NoteAccessDenied("you may not read shared memory", code="memory_shared_read_forbidden")
                raise NoteAccessDenied("you may not change shared memory", code="memory_shared_write_forbidden")

        return guard

    async def may_use_shared(self, member_id: str, action: str = SHARED_READ) -> bool:
        try:
            await self._shared_guard(member_id)(action)
        except NoteAccessDenied:
            return False
        return True

    async def search(self, member_id: str, query: str, limit: int = 10) -> list[MemoryHit]:
        """Ranked hits over the member's own notes and, when they may read it, the shared
        pool; bm25 scores of both pools are merged (lower is better)."""
        hits = [MemoryHit(f"{USER_ROOT}/{h.key}", h.snippet, h.rank) for h in await self.notes(member_id, USER_ROOT).search(query, limit)]
        if await self.may_use_shared(member_id):
            shared = await self.notes(member_id, SHARED_ROOT).search(query, limit)
            hits += [MemoryHit(f"{SHARED_ROOT}/{h.key}", h.snippet, h.rank) for h in shared]
        return sorted(hits, key=lambda h: h.rank)[: max(1, min(int(limit), MAX_SEARCH_RESULTS))]

    async def read_path(self, member_id: str, path: str) -> str | None:
        """The content of a memory path for prompt injection, or None when the note is
        missing, the pool is locked or the member may not read it."""
        try:
            memory = classify_memory(path)
            if memory is None or not memory[1]:
                return None
            return await self.notes(member_id, memory[0]).read(memory[1])
        except (FileNotFoundError, NoteError, NoteAccessDenied, OwnerDatabaseUnavailable):
            return None

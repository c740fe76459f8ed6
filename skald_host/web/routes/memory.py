"""Memory notes over HTTP, for the memory page: list, search, read, write, delete.

``<root>`` is ``user-memory`` (the caller's own notes, in their own file: another
member's notes cannot even be named) or ``shared-memory`` (the registry pool, gated on
``memory.shared.read`` / ``memory.shared.write`` by ``MemoryService`` itself, so this
layer cannot forget the check). A note's key is the URL's tail (``…/notes/<path:key>``,
each segment percent-encoded by the client) and is checked in one place (``note_key``):
a key with a ``.`` or ``..`` part is refused (``note_key_dot_segment``), never
rewritten into another note's name. A search is the conversation list's: at most
``MAX_SEARCH_CHARS``, and one with no word in it finds nothing.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app, request

from skald_host.core.identity.users import OwnerDatabaseUnavailable
from skald_host.core.memory.notes import MEMORY_ROOTS, NoteAccessDenied, NoteConflict, NoteError, NoteStore, note_key, note_version
from skald_host.web.auth import current_principal
from skald_host.web.body import TEXT, accepts, field, json_object, obj, query, text
from skald_host.web.errors import ApiError
from skald_host.web.routes.chat import MAX_SEARCH_CHARS

bp = Blueprint("memory", __name__)

LIST_LIMIT = 2000


def _store(root: str) -> NoteStore:
    if root not in MEMORY_ROOTS:
        raise ApiError(
            404, f"no memory root {root[:40]!r}; use one of {', '.join(MEMORY_ROOTS)}",
            code="memory_root_unknown", values={"roots": ", ".join(MEMORY_ROOTS)},
        )
    try:
        return current_app.config["SKALD_CORE"].memory.notes(current_principal().member.id, root)
    except OwnerDatabaseUnavailable as exc:
        raise ApiError.refusing(423, exc) from None


async def _call(operation: Any) -> Any:
    """The note store's refusals as HTTP answers that say what was wrong."""
    try:
        return await operation
    except NoteAccessDenied as exc:
        raise ApiError.refusing(403, exc) from None
    except NoteConflict as exc:
        raise ApiError.refusing(409, exc) from None
    except NoteError as exc:
        raise ApiError.refusing(400, exc) from None
    except FileNotFoundError:
        raise ApiError(404, "no such note", code="no_such_note") from None


@bp.get("/api/memory/<root>/notes")
@query(prefix=TEXT)
async def list_notes(root: str) -> dict:
    store = _store(root)
    notes = await _call(store.list(request.args.get("prefix", ""), limit=LIST_LIMIT + 1))
    return {
        "root": root,
        "notes": [{"key": n.key, "size": n.size, "updated_at": n.updated_at} for n in notes[:LIST_LIMIT]],
        "truncated": len(notes) > LIST_LIMIT,
    }


@bp.get("/api/memory/<root>/search")
@query(q=text(MAX_SEARCH_CHARS, description="words a note must all contain; none (only punctuation): no hits"))
async def search_notes(root: str) -> dict:
    query = request.args.get("q", "")
    if len(query) > MAX_SEARCH_CHARS:
        raise ApiError(400, f"the search is longer than {MAX_SEARCH_CHARS} characters", field="q", code="too_long",
                       values={"limit": MAX_SEARCH_CHARS})
    hits = await _call(_store(root).search(query, limit=50))
    return {"root": root, "hits": [{"key": h.key, "snippet": h.snippet, "rank": h.rank} for h in hits]}


@bp.get("/api/memory/<root>/notes/<path:key>")
async def read_note(root: str, key: str) -> dict:
    store = _store(root)
    content = await _call(store.read(key))
    return {"root": root, "key": note_key(key), "content": content, "version": note_version(content)}


@bp.put("/api/memory/<root>/notes/<path:key>")
@query(create={"type": "string", "description": "1: only create the note; one of that name answers 409 (note_exists)"})
@accepts(obj({"content": TEXT}, {"expected": {
    "type": "string", "description": "the version the read answered; changed since: 409 note_changed, deleted since: 409 note_gone",
}}))
async def write_note(root: str, key: str) -> dict:
    """Create or replace the note with ``{"content": "…"}``; with ``?create=1`` only
    create it. The page's "New note" must never replace a note, and asking first with a
    GET made every new note's normal answer a 404 in the browser's console.
    ``"expected"`` (the ``version`` a read answered) makes the save conditional: an
    editor open in two tabs, or by two members, must not lose the other's save. A
    body field rather than ``If-Match``: the body is already the route's whole input."""
    store = _store(root)
    body = await json_object()
    content = field(body, "content", str)
    expected = field(body, "expected", str, required=False)
    if request.args.get("create") == "1":
        await _call(_refuse_existing(store, key))
    info = await _call(store.write(key, content, expected=expected))
    return {"root": root, "key": info.key, "size": info.size, "updated_at": info.updated_at, "version": note_version(content)}


async def _refuse_existing(store: NoteStore, key: str) -> None:
    try:
        await store.read(key)
    except FileNotFoundError:
        return
    normal = note_key(key)
    raise ApiError(409, f"a note called {normal!r} already exists; open it to change it, or choose another name",
                   code="note_exists", values={"key": normal})


@bp.delete("/api/memory/<root>/notes/<path:key>")
async def delete_note(root: str, key: str) -> dict:
    store = _store(root)
    if not await _call(store.delete(key)):
        raise ApiError(404, "no such note", code="no_such_note")
    return {"deleted": True}

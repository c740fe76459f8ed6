"""The conversation store over a member's own file: every state transition of the
loop is one write here, made before it is announced, so a crash loses RAM and never
truth (seed 001, "Restart recovery").

Every write to ``messages`` and ``tool_calls`` goes through this class. That is what
lets it keep the history of the frames it has read in memory: each write re-reads the
rows it changed inside its own transaction and splices them into the copy once the
commit succeeded, so a round reads its history without reading (or copying) a long
conversation again, and the copy always equals a fresh read (a summary, a recovery, a
deletion or ``forget`` drop it instead). A module that writes those tables some other
way must call ``forget`` after its commit.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import re
import secrets
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

from skald_host.core import schedules
from skald_host.core.agent.approvals import now_stamp
from skald_host.core.files.media import parse_attachments
from skald_host.core.storage import Database
from skald_host.core.text import clean_title, search_form, sharp_s_spellings

if TYPE_CHECKING:
    from skald_host.core.llm.catalog import ModelChoice

TERMINAL_CALL_STATES = frozenset({"done", "error", "denied", "cancelled", "interrupted"})

#: What a helper's question is answered with in a run nobody attends (a background
#: run and the runs below it, or a helper of a scheduled prompt): refused at once, as
#: its approvals are, rather than holding the run's slot for up to an hour
#: (``Scope.ask``, a ``ToolError``).
QUESTION_UNATTENDED = (
    "nobody is there to answer a question: this task runs unattended, in the background. Go on without"
    " asking, or finish and say in your result what you need to know."
)

#: The host's own results of a call that did not run (or not to its end), in English as
#: the model reads them, by the code a screen says them with in its reader's language
#: (``chat.call_result.<code>``): a German member read "a rule denies this tool here."
HOST_RESULTS = {
    "rule": "a rule denies this tool here.",
    "unattended": "this needs the member's approval and nobody is there to give it.",
    # A ToolError's message as the kernel words it (``Error: ...``).
    "unattended_question": f"Error: {QUESTION_UNATTENDED}",
    "declined": "the member declined.",
    "expired": "the approval request expired.",
    "lost": "the approval request was lost.",
    "mismatch": "the approval does not match this call.",
    "withdrawn": (
        "access to this tool was withdrawn (the member's role, grants or the plugin changed since it"
        " was proposed); it did not run."
    ),
    "restarted": "the server restarted while this ran; it was not run again because it may already have had its effect.",
    # The same end when the member's data locked (a sign-out, a session's end): the
    # server went on, so it is never said to have restarted (``cut_result``).
    "locked": (
        "the member's data was locked (a sign-out or the session's end) while this ran; it was not run again"
        " because it may already have had its effect."
    ),
    # ... and when an admin deactivated the member (``cut_result``): the turn is not
    # taken up again at their next sign-in, even after a reactivation (check C5).
    "deactivated": "stopped: the member's account was paused by an admin while this ran; it was not run again.",
    # ... and when nothing recorded why (a crash, or a close whose cause could not be written).
    "cut": "this was cut off while it ran; it was not run again because it may already have had its effect.",
    # A call its turn never started, found by recovery in a turn that had moved on
    # (an earlier version's Stop left the calls queued behind a stopped one ``requested``).
    "not_run": "not run: its turn ended before it started.",
    "stopped": "stopped",
    # A call of the last round the limit allows: no model round follows to read its result.
    "round_limit": "not run: the round limit was reached.",
    # A tool's ``ToolError`` as the kernel words it (``subagents.catalog.DEFINITIONS_REFUSED``):
    # the reasons name server files, for the admin's Helpers page alone.
    "definitions_refused": "Error: the helper definitions were refused; an admin can see why on the Helpers page.",
}
_RESULT_CODES = {text: code for code, text in HOST_RESULTS.items()}

#: member_settings key where a closing runtime records why its turns were cut
#: (``shutdown``, ``locked``, ``deactivated``), read and cleared by the next ``recover`` — the root
#: turn's counterpart of ``subagents.runs.mark_cut``; a crash records nothing.
CUT_CAUSE_SETTING = "agent.cut_cause"


def cut_result(cause: str | None) -> str:
    """The host result of a call a cut ended without running it again: said by its
    cause (``shutdown``: the server restarted; ``locked``: the member's data locked;
    ``deactivated``: an admin deactivated the member), neutral when none was recorded."""
    return {
        "shutdown": HOST_RESULTS["restarted"], "locked": HOST_RESULTS["locked"], "deactivated": HOST_RESULTS["deactivated"],
    }.get(cause or "", HOST_RESULTS["cut"])


def result_code(result: Any) -> str | None:
    """The code of a call's result when the host wrote it (``HOST_RESULTS``), else None."""
    return _RESULT_CODES.get(result) if isinstance(result, str) else None


class CodedResult(str):
    """A call's result the host worded with a code: the English text, as the model
    reads it, carrying its ``reason`` (``reason_json``), which the store keeps beside it
    (``tool_calls.reason``) for the tool card and the export to word in the reader's
    language (``core.error.<code>``), as a message's ``reason`` is."""

    reason: str | None = None


def coded_result(text: str, code: str, values: Mapping[str, Any] | None = None) -> str:
    """``text`` with its reason (``CodedResult``)."""
    result = CodedResult(text)
    plain = {k: v if v is None or isinstance(v, (str, int, float, bool)) else str(v) for k, v in (values or {}).items()}
    result.reason = reason_json(code, plain)
    return result


def result_reason(result: Any) -> str | None:
    """The stored reason (``reason_json``) of a call's result, when the host gave it one."""
    return getattr(result, "reason", None)
#: Frames whose history is kept in memory per member, the most recently read ones: the
#: conversations a member is in and their sub-agent frames. Each costs its whole
#: history (rows, their wire form, the last request), so the bound is what keeps a
#: member who opened many conversations today from holding all of them (check H2's
#: soak: at 64, a member's every conversation of the hour stayed). At 16, the chat
#: benchmark's 31 conversations in turn each missed and were read again (+1-2 ms a turn).
HISTORY_CACHE_FRAMES = 32
#: Idempotency keys of this many latest messages are kept in memory (with the newest
#: submitted since): a client retries a send it has no ack for, a recent one.
RECENT_KEYS = 1000
#: A history row: read-only, because the same row is handed to every later round.
Row = Mapping[str, Any]
T = TypeVar("T")
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ','now')"


def new_id() -> str:
    """128-bit random ids: unguessable, so an id alone never grants anything."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class Frame:
    id: str
    conversation_id: str
    caller_frame_id: str | None
    spawned_by_call_id: str | None
    agent_id: str
    depth: int
    status: str


@dataclass(frozen=True)
class CallRow:
    id: str
    message_id: int
    frame_id: str
    seq: int
    name: str
    arguments: str
    status: str
    result: str | None
    restart: str


def _frame(row: Any) -> Frame:
    return Frame(row["id"], row["conversation_id"], row["caller_frame_id"], row["spawned_by_call_id"], row["agent_id"], row["depth"], row["status"])


def _untrusted_of(conn: Any, frame_id: str) -> str | None:
    """Why a frame's context holds text from outside (check E2), as stored JSON
    {"kind", "values"}; None when nothing marked it. Derived from stored rows, so a
    restart keeps it: the frame's own mark (``mark_untrusted``), a mark of a sub-agent
    frame below it (its result reached this frame; one still running may have signalled
    it), or an attachment in a member's message of the frame (an uploaded document)."""
    row = conn.execute(
        "WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT f.id FROM frames f JOIN tree t ON f.caller_frame_id = t.id)"
        " SELECT f.untrusted FROM frames f JOIN tree USING (id) WHERE f.untrusted IS NOT NULL ORDER BY f.depth LIMIT 1",
        (frame_id,),
    ).fetchone()
    if row is not None:
        return row[0]
    row = conn.execute(
        "SELECT attachments FROM messages WHERE frame_id = ? AND role = 'user' AND attachments NOT IN ('', '[]') ORDER BY id LIMIT 1",
        (frame_id,),
    ).fetchone()
    if row is None:
        return None
    try:
        first = json.loads(row[0])[0]
        name = str(first.get("name") or first.get("path") or "") if isinstance(first, dict) else str(first)
    except (ValueError, IndexError, TypeError, AttributeError):
        name = ""
    return json.dumps({"kind": "upload", "values": {"name": name.rsplit("/", 1)[-1]}})


def _call(row: Any) -> CallRow:
    return CallRow(row["id"], row["message_id"], row["frame_id"], row["seq"], row["name"], row["arguments"], row["status"], row["result"], row["restart"])


class RequestOutbox:
    """The request log's rows on their way to the registry, carried into the member's
    own file by the next commit of history. The registry gathers rows for a moment
    (``runtime.RequestLog``), so a crash in that moment lost the rows of requests a
    provider had received: a Stop's request, a round whose answer was already
    written. A commit the round makes anyway takes them along (no commit of its own),
    and recovery gives the registry the ones it lacks. Rows the registry has are taken
    out of the file by a later commit, or by the next recovery.

    Lives on the event loop's thread: a commit takes a snapshot as it is submitted,
    and ``carried`` is told what of it the commit wrote. Several commits may be in
    flight with the same row (the file's queue holds them in order): the second to land
    finds the row in the file already, which is no sign that the registry has it — only
    ``logged`` says that (taking it for one dropped the file's copy of a row the registry
    was still gathering, and a crash then lost it: a crash-kill probe).

    A row the registry failed to write (its disk full) is ``stranded``: it stays here,
    is committed into the file at once (``ConversationStore.keep_outbox``) and is given
    to the registry again while the server runs (``stranded_entries``); only the
    registry's commit of it lets it go. Before, the failure was only logged and the row
    waited for some later commit of history and the next recovery: a graceful stop
    before any such commit lost it (a disk-full probe)."""

    def __init__(self) -> None:
        self._unlogged: dict[str, str] = {}  # request id -> its row as JSON, not in the registry yet
        self._unwritten: dict[str, str] = {}  # of those, the rows not in the file yet (as they are now)
        self._boxed: set[str] = set()  # in the file, not yet in the registry
        self._unbox: list[str] = []  # in the file and in the registry: the next commit drops them
        self._stranded: set[str] = set()  # of the unlogged, those whose registry write failed

    def add(self, request_id: str, entry: str) -> None:
        self._unlogged[request_id] = self._unwritten[request_id] = entry
        self._stranded.discard(request_id)  # this row's own write is on its way

    def stranded(self, request_id: str) -> None:
        """The registry's write of the row failed: it is given to the registry again."""
        if request_id in self._unlogged:
            self._stranded.add(request_id)

    def stranded_entries(self) -> list[tuple[str, str]]:
        """The rows the registry failed to write, as they are now (request id, entry)."""
        return [(r, self._unlogged[r]) for r in self._stranded if r in self._unlogged]

    def logged(self, request_id: str, entry: str | None = None) -> None:
        """The registry has committed it (``entry``: that row of it, when a newer one
        may have replaced it here since). A row in the file goes with a later commit,
        also one written there ahead of its request (``ahead``) that the request's own
        row, waiting here, was to replace."""
        if entry is not None and self._unlogged.get(request_id) != entry:
            return  # a newer row of it waits for its own write
        self._stranded.discard(request_id)
        self._unlogged.pop(request_id, None)
        self._unwritten.pop(request_id, None)
        if request_id in self._boxed:
            self._boxed.discard(request_id)
            self._unbox.append(request_id)

    def snapshot(self) -> tuple[list[tuple[str, str]], list[str]] | None:
        if not self._unwritten and not self._unbox:
            return None
        return list(self._unwritten.items()), list(self._unbox)

    @staticmethod
    def write(conn: Any, snapshot: tuple[list[tuple[str, str]], list[str]]) -> None:
        rows, unbox = snapshot
        # REPLACE: a request's own row replaces the one written ahead of it (``ahead``).
        conn.executemany("INSERT OR REPLACE INTO request_log_outbox (request_id, entry) VALUES (?, ?)", rows)
        conn.executemany("DELETE FROM request_log_outbox WHERE request_id = ?", [(r,) for r in unbox])

    def carried(self, snapshot: tuple[list[tuple[str, str]], list[str]]) -> None:
        rows, unbox = snapshot
        for request_id, entry in rows:
            if self._unwritten.get(request_id) == entry:  # (a newer row of it still waits: not this one)
                del self._unwritten[request_id]
            if request_id in self._unlogged:
                self._boxed.add(request_id)
            else:  # the registry committed it while this commit was under way
                self._unbox.append(request_id)
        dropped = set(unbox)
        self._unbox = [r for r in self._unbox if r not in dropped]


class ConversationStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.outbox = RequestOutbox()
        self._history: OrderedDict[str, list[Row]] = OrderedDict()  # frame id -> history(), as a fresh read returns it
        self._writes = 0  # history-changing writes seen; a read racing one is not kept
        self._roots: dict[str, Frame] = {}  # a conversation's root frame never changes
        self._inbox_clean: set[str] = set()  # conversations with nothing queued since their last drain was submitted
        # Idempotency keys seen, oldest first: the latest stored, then each submitted since,
        # the newest 2 x RECENT_KEYS of them (a retry repeats a recent message).
        self._keys: dict[str, None] | None = None
        self._models: dict[str, str | None] = {}  # conversation id -> the model its member picked
        self._no_subframes: set[str] = set()  # conversations with no open sub-agent frame since their last look
        self._marked_untrusted: set[str] = set()  # frames whose outside-text mark is written (it is never cleared)
        self.jobs_changed = asyncio.Event()  # a prompt was scheduled: the member's scheduler looks again

    def forget(self) -> None:
        """Drop every in-memory history (after a write to messages or tool_calls made
        outside this class)."""
        self._history.clear()
        self._writes += 1

    def _splice(self, rows: Sequence[Row]) -> None:
        """Put rows re-read after a committed write into the histories kept in memory."""
        self._writes += 1
        for row in rows:
            cached = self._history.get(row["frame_id"])
            if cached is None or row["role"] == "note":
                continue
            if row["role"] == "summary":  # a summary opens a new window: read it afresh
                del self._history[row["frame_id"]]
                continue
            if cached and cached[0]["role"] == "summary" and row["id"] < cached[0]["id"]:
                continue  # before the window (a late checkpoint of a row the summary replaced)
            index = len(cached)
            while index and cached[index - 1]["id"] >= row["id"]:
                index -= 1
            if index < len(cached) and cached[index]["id"] == row["id"]:
                cached[index] = row
            else:
                cached.insert(index, row)

    async def _write_rows(self, fn: Callable[[Any], tuple[T, Sequence[int]]]) -> T:
        """A transaction that changes history rows: ``fn`` returns its result and the
        ids of the messages it changed, which are re-read before the commit and
        spliced into the copies in memory after it."""

        def write(conn: Any) -> tuple[T, list[Row]]:
            result, message_ids = fn(conn)
            _index_messages(conn, message_ids)  # in the commit that finishes them (search reads only)
            return result, _reread(conn, message_ids)

        result, rows = await self._carrying(write)
        self._splice(rows)
        return result

    async def _carrying(self, fn: Callable[[Any], T]) -> T:
        """A transaction of history that takes the request log's waiting rows along
        (``RequestOutbox``)."""
        snapshot = self.outbox.snapshot()
        if snapshot is None:
            return await self.db.transaction(fn)
        result = await self.db.transaction(_with_outbox(fn, snapshot))
        self.outbox.carried(snapshot)
        return result

    def _carrying_queued(self, fn: Callable[[Any], T]) -> "asyncio.Future[T]":
        """``_carrying``, its place in the file's queue taken before this returns."""
        snapshot = self.outbox.snapshot()
        if snapshot is None:
            return self.db.transaction_queued(fn)
        submitted = self.db.transaction_queued(_with_outbox(fn, snapshot))

        async def carried() -> T:
            result = await submitted
            self.outbox.carried(snapshot)
            return result

        return asyncio.ensure_future(carried())

    async def ahead(self, request_id: str, entry: str) -> None:
        """A request that no streaming row of history stands for (a compaction's): its
        row, as ``entry`` says (interrupted), committed into the outbox before the
        request is sent, so that a crash while it is out still counts it (recovery
        gives it to the registry); the request's own row, logged when it ends, replaces
        it there and in the registry's rows."""
        self.outbox.add(request_id, entry)
        await self._carrying(lambda conn: None)

    async def keep_outbox(self) -> None:
        """Commit the request log's rows that are not in the file yet (a row the
        registry failed to write must not wait for the next commit of history: the
        server may stop before it, and the row lives nowhere else)."""
        if self.outbox.snapshot() is not None:
            await self._carrying(lambda conn: None)

    async def outbox_rows(self) -> list[tuple[str, str]]:
        """Recovery: the request log's rows the file carries (some the registry may lack)."""
        return await self.db.run(lambda c: [tuple(r) for r in c.execute("SELECT request_id, entry FROM request_log_outbox")])

    async def empty_outbox(self, request_ids: Sequence[str]) -> None:
        """Recovery, once the registry holds them."""
        await self.db.transaction(lambda c: c.executemany("DELETE FROM request_log_outbox WHERE request_id = ?", [(r,) for r in request_ids]))

    # -- conversations ------------------------------------------------------------

    async def create_conversation(
        self, agent_id: str, *, source: str = "web", title: str = "", ephemeral: bool = False, model: str | None = None
    ) -> tuple[str, str]:
        """``ephemeral``: a system agent's pass (never listed, never reviewed); ``model``:
        the model it uses first (``choose_model``)."""
        title = clean_title(title)
        conversation_id, frame_id = new_id(), new_id()

        def write(conn: Any) -> None:
            conn.execute(
                "INSERT INTO conversations (id, source, agent_id, title, ephemeral, model) VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, source, agent_id, title, int(ephemeral), model),
            )
            conn.execute(
                "INSERT INTO frames (id, conversation_id, agent_id, depth) VALUES (?, ?, ?, 0)",
                (frame_id, conversation_id, agent_id),
            )

        await self.db.transaction(write)
        # Known without a read from here on: an empty history, no sub-agent frame,
        # nothing queued. The first message of a new conversation is the commonest one.
        self._roots[conversation_id] = Frame(frame_id, conversation_id, None, None, agent_id, 0, "open")
        self._models[conversation_id] = model
        self._keep(frame_id, [])
        self._no_subframes.add(conversation_id)
        self._inbox_clean.add(conversation_id)
        return conversation_id, frame_id

    async def conversation(self, conversation_id: str) -> dict[str, Any] | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone())
        return dict(row) if row else None

    async def conversations(
        self, search: str | None = None, limit: int = 200, before: tuple[str, str, bool] | None = None
    ) -> list[dict[str, Any]]:
        """Newest first (``updated_at``, then ``id``, both descending). ``search``: those whose
        title contains it (folded: ``search_form``; ``%`` and ``_`` are literal), then those whose
        messages hold all its words (FTS5, each word as a prefix), each of the latter with a
        ``snippet`` around the best match (and ``snippet_in_earlier_version`` when the words are
        only in a version not shown), plain words, and the same as ``snippet_parts``: its
        even entries the text between matches, its odd ones the words the search matched
        (as written: "Café" for "cafe"), for the list to mark them. ``before``: the page after a row, as its
        ``(updated_at, id, by_content)`` (``by_content``: a search row found by its messages,
        one with a ``snippet``; ignored without ``search``)."""
        after = before[:2] if before else None
        keyset = " AND (updated_at < ? OR (updated_at = ? AND id < ?))" if after else ""
        keys = (after[0], after[0], after[1]) if after else ()

        def read(conn: Any) -> list[dict[str, Any]]:
            if not search:
                return [dict(r) for r in conn.execute(
                    f"SELECT * FROM conversations WHERE ephemeral = 0{keyset} ORDER BY updated_at DESC, id DESC LIMIT ?",
                    (*keys, limit),
                )]
            # The title folded as the words below are (case, accents, "ß" as "ss"); SQLite's
            # LIKE folds the case of ASCII letters only ("käse" missed "Käsekuchen").
            conn.create_function("search_form", 1, search_form, deterministic=True)
            folded = search_form(search)
            by_content = bool(before and before[2])
            found: list[dict[str, Any]] = []
            if not by_content:  # the title matches first; a page after a content match has none
                found = [dict(r) for r in conn.execute(
                    f"SELECT * FROM conversations WHERE ephemeral = 0 AND instr(search_form(title), ?) > 0{keyset}"
                    " ORDER BY updated_at DESC, id DESC LIMIT ?",
                    (folded, *keys, limit),
                )]
            words = fts_words(search)
            if not words or len(found) >= limit:
                return found
            # Every word somewhere in the conversation (not all in one message).
            matching: set[str] | None = None
            for word in words:
                ids_here = {r[0] for r in conn.execute("SELECT conversation_id FROM messages_fts WHERE messages_fts MATCH ?", (word,))}
                matching = ids_here if matching is None else matching & ids_here
            if not matching:
                return found
            # The page of them (those after ``before`` when it is a content match, else from the first).
            content_keyset, content_keys = (keyset, keys) if by_content else ("", ())
            rows = [dict(r) for r in conn.execute(
                "SELECT * FROM conversations WHERE ephemeral = 0 AND instr(search_form(title), ?) = 0"
                f" AND id IN (SELECT value FROM json_each(?)){content_keyset} ORDER BY updated_at DESC, id DESC LIMIT ?",
                (folded, json.dumps(sorted(matching)), *content_keys, limit - len(found)),
            )]
            if not rows:
                return found
            # The snippet shows the best match of the whole query, else of the first word: the
            # best message of each conversation on the page (one large conversation's many
            # matches must not crowd the others out). A match in the version on screen first;
            # one only in an earlier version (a regenerated answer, an edited branch) says so:
            # opened, it is not shown.
            page = json.dumps([r["id"] for r in rows])
            best: dict[str, tuple[str, int, bool]] = {}
            for query in dict.fromkeys((" AND ".join(words), words[0])):  # one query for one word
                for conversation_id, rowid, earlier in conn.execute(
                    "SELECT conversation_id, rowid, earlier FROM ("
                    " SELECT f.conversation_id, f.rowid AS rowid, m.variant != 0 AS earlier, row_number() OVER ("
                    "  PARTITION BY f.conversation_id ORDER BY m.variant != 0, f.rank) AS place"
                    " FROM messages_fts f JOIN messages m ON m.id = f.rowid"
                    " WHERE messages_fts MATCH ? AND f.conversation_id IN (SELECT value FROM json_each(?))"
                    ") WHERE place = 1",
                    (query, page),
                ):
                    best.setdefault(conversation_id, (query, rowid, bool(earlier)))
            for row in rows:
                if row["id"] not in best:  # its messages changed since the match above
                    continue
                query, rowid, earlier = best[row["id"]]
                snippet = _snippet(conn, rowid, (query, *words))
                parts = marked_words(snippet) if snippet else [""]
                found.append(row | {"snippet": "".join(parts), "snippet_parts": parts, "snippet_in_earlier_version": earlier})
            return found

        if not search:
            return await self.db.run(read)
        await self.index_finished_messages()
        # A read beside the file's writes (the reader connection): a search over thousands
        # of conversations must not hold up a message's send queued behind it.
        return await self.db.read(read)

    async def index_finished_messages(self) -> None:
        """Put into the search index the finished messages that are not in it yet: most
        are indexed by the commit that wrote them (``_write_rows``); what else finished
        them (a stop, a crash's recovery, an inbox drained) is caught up here, before a
        search, asked by a read and written in small transactions (``INDEX_BATCH`` rows
        each), so that a send waits behind one batch at most, never a whole backlog."""
        while await self.db.read(_has_unindexed):
            if await self.db.transaction(_index_finished_batch) < INDEX_BATCH:
                return

    async def last_written_at(self, conversation_id: str) -> str | None:
        """When the conversation's newest message was written (``created_at``'s text, as
        the registry's ``deactivated_at`` spells a time), or None without one. Notes are
        left out: recovery writes its own (an answer asked for again) before it asks."""
        row = await self.db.read(lambda c: c.execute(
            "SELECT max(created_at) FROM messages WHERE conversation_id = ? AND role != 'note'", (conversation_id,)
        ).fetchone())
        return row[0] if row else None

    async def conversations_to_resume(self) -> list[str]:
        """Every listed conversation that may have something to resume, newest first, in
        one read (recovery after each unlock): an open sub-agent frame, a queued message,
        or a root frame whose last message (as ``history`` ends: no note, the version on
        screen) is the member's, an interrupted answer or one with an unfinished call.
        A superset of those that do (the runtime decides on each, reading only these);
        no limit, so none is skipped however many conversations a member has. Each test
        is a lookup in an index (``messages_frame`` from the end, ``tool_calls_message``)
        or in a list read once (the open sub-agent frames, the inbox's few rows)."""
        terminal = json.dumps(sorted(TERMINAL_CALL_STATES))

        def read(conn: Any) -> list[str]:
            return [r[0] for r in conn.execute(
                "SELECT c.id FROM conversations c JOIN frames f ON f.conversation_id = c.id AND f.depth = 0"
                " WHERE c.ephemeral = 0 AND ("
                "  c.id IN (SELECT s.conversation_id FROM frames s WHERE s.depth > 0 AND s.status = 'open')"
                "  OR c.id IN (SELECT i.conversation_id FROM inbox i)"
                "  OR EXISTS (SELECT 1 FROM messages m WHERE m.id = ("
                "   SELECT l.id FROM messages l WHERE l.frame_id = f.id AND l.role != 'note' AND l.variant = 0 ORDER BY l.id DESC LIMIT 1)"
                "   AND (m.role = 'user' OR (m.role = 'assistant' AND (m.status = 'interrupted' OR EXISTS ("
                "    SELECT 1 FROM tool_calls t WHERE t.message_id = m.id AND t.status NOT IN (SELECT value FROM json_each(?))))))))"
                " ORDER BY c.updated_at DESC, c.id DESC",
                (terminal,),
            )]

        return await self.db.run(read)

    async def chosen_model(self, conversation_id: str) -> str | None:
        """The model the member picked for the conversation (None: the agent's), kept in
        memory: every round of every turn asks."""
        if conversation_id not in self._models:
            row = await self.db.run(lambda c: c.execute("SELECT model FROM conversations WHERE id = ?", (conversation_id,)).fetchone())
            self._models[conversation_id] = row[0] if row else None
        return self._models[conversation_id]

    async def choose_model(self, conversation_id: str, model: str | None) -> None:
        await self.db.transaction(lambda c: c.execute("UPDATE conversations SET model = ? WHERE id = ?", (model, conversation_id)))
        self._models[conversation_id] = model

    async def rename(self, conversation_id: str, title: str) -> bool:
        title = clean_title(title)
        return bool(
            await self.db.transaction(
                lambda c: c.execute(f"UPDATE conversations SET title = ?, updated_at = {NOW} WHERE id = ?", (title, conversation_id)).rowcount
            )
        )

    async def delete(self, conversation_id: str) -> bool:
        # Carrying the request log's waiting rows: those of its cut requests, when a
        # conversation recovery would have counted them in goes (``MemberRuntime.discard``).
        deleted = bool(await self._carrying(lambda c: c.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,)).rowcount))
        self._roots.pop(conversation_id, None)
        self._models.pop(conversation_id, None)
        self.forget()
        return deleted

    async def find_root(self, conversation_id: str) -> Frame | None:
        """The conversation's root frame, or None if there is no such conversation. Kept
        once read: a root frame is never closed or changed, only deleted (``delete``)."""
        root = self._roots.get(conversation_id)
        if root is None:
            row = await self.db.run(
                lambda c: c.execute("SELECT * FROM frames WHERE conversation_id = ? AND depth = 0", (conversation_id,)).fetchone()
            )
            if row is None:
                return None
            root = self._roots[conversation_id] = _frame(row)
        return root

    async def root_frame(self, conversation_id: str) -> Frame:
        root = await self.find_root(conversation_id)
        if root is None:
            raise LookupError(f"no conversation {conversation_id}")
        return root

    async def frame(self, frame_id: str) -> Frame:
        return _frame(await self.db.run(lambda c: c.execute("SELECT * FROM frames WHERE id = ?", (frame_id,)).fetchone()))

    async def open_frames(self, conversation_id: str) -> list[Frame]:
        """Open sub-agent frames, deepest first. Only this class opens frames, so a
        conversation that had none and opened none since is answered without a read."""
        if conversation_id in self._no_subframes:
            return []
        writes = self._writes
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT * FROM frames WHERE conversation_id = ? AND status = 'open' AND depth > 0 ORDER BY depth DESC, created_at",
                (conversation_id,),
            ).fetchall()
        )
        if not rows and writes == self._writes:
            self._no_subframes.add(conversation_id)
        return [_frame(r) for r in rows]

    async def subframe_of(self, call_id: str) -> Frame | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM frames WHERE spawned_by_call_id = ?", (call_id,)).fetchone())
        return _frame(row) if row else None

    async def open_subframe(self, caller: Frame, call_id: str, agent_id: str) -> Frame:
        frame_id = new_id()
        self._no_subframes.discard(caller.conversation_id)
        self._writes += 1  # an open_frames read racing this must not conclude "none"
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO frames (id, conversation_id, caller_frame_id, spawned_by_call_id, agent_id, depth, untrusted) VALUES (?, ?, ?, ?, ?, ?, ?)",
                # Started from a frame holding outside text: so does the child, from its start.
                (frame_id, caller.conversation_id, caller.id, call_id, agent_id, caller.depth + 1, _untrusted_of(c, caller.id)),
            )
        )
        return await self.frame(frame_id)

    async def open_run_frame(
        self, caller: Frame, call_id: str, agent_id: str, task: str, claim: Callable[[Any, Frame], object], *, placeholder_model: ModelChoice | str | None = None,
        frame_id: str | None = None,
    ) -> Frame:
        """A sub-agent run's frame with its task as the first message, written with
        ``claim(conn, frame)`` (its run accepted and marked running in it; raising
        rolls all back) in one transaction: five commits were one on the path of every
        delegation (the sub-agent benchmark). ``placeholder_model``: the frame's first
        round's streaming placeholder is written too, as a member's message writes its
        turn's (``add_member_message``)."""
        statements = self.run_frame_statements(caller, agent_id, task, claim, placeholder_model=placeholder_model, frame_id=frame_id)
        return self.run_frame_opened(await self.db.transaction(lambda conn: statements(conn, call_id)))

    def run_frame_statements(
        self, caller: Frame, agent_id: str, task: str, claim: Callable[[Any, Frame], object], *, placeholder_model: ModelChoice | str | None = None,
        frame_id: str | None = None,
    ) -> Callable[[Any, str], tuple[Frame, list[Row]]]:
        """``open_run_frame``'s statements, for a transaction that writes its call too
        (``Scope.settle``): given the call's id as written. Hand what they return,
        once committed, to ``run_frame_opened``. ``frame_id``: the frame's id, chosen
        before the write (its first request goes out while it commits)."""
        chosen = frame_id
        self._no_subframes.discard(caller.conversation_id)
        self._writes += 1  # an open_frames read racing this must not conclude "none"

        def write(conn: Any, call_id: str) -> tuple[Frame, list[Row]]:
            frame = Frame(chosen or new_id(), caller.conversation_id, caller.id, call_id, agent_id, caller.depth + 1, "open")
            conn.execute(
                "INSERT INTO frames (id, conversation_id, caller_frame_id, spawned_by_call_id, agent_id, depth, untrusted) VALUES (?, ?, ?, ?, ?, ?, ?)",
                # Started from a frame holding outside text: so does the child, from its start.
                (frame.id, frame.conversation_id, frame.caller_frame_id, call_id, agent_id, frame.depth, _untrusted_of(conn, caller.id)),
            )
            claim(conn, frame)
            written = [_insert_user_message(conn, frame, task, None)]
            if placeholder_model:
                written.append(_insert_placeholder(conn, frame, placeholder_model))
            _index_messages(conn, written)
            return frame, _reread(conn, written)

        return write

    def run_frame_opened(self, opened: tuple[Frame, list[Row]]) -> Frame:
        frame, rows = opened
        self._writes += 1
        self._keep(frame.id, rows)  # a new frame's whole history: its first round reads no file
        return frame

    async def untrusted(self, frame_id: str) -> dict[str, Any] | None:
        """Why the frame's context holds text from outside ({"kind", "values"}), or None
        (``_untrusted_of``)."""
        return _untrusted_reason(await self.db.run(lambda c: _untrusted_of(c, frame_id)))

    async def mark_untrusted(self, frame_id: str, kind: str, values: Mapping[str, Any]) -> None:
        """Outside text entered the frame's context: kept for good (the first source is
        the one the approval card names; a mark is never cleared)."""
        if frame_id in self._marked_untrusted:
            return  # marked already (a mark stays): no write per round
        source = json.dumps({"kind": kind, "values": dict(values)}, ensure_ascii=False)
        await self.db.transaction(lambda c: c.execute("UPDATE frames SET untrusted = ? WHERE id = ? AND untrusted IS NULL", (source, frame_id)))
        self._marked_untrusted.add(frame_id)

    async def close_frame(self, frame_id: str, status: str, result: str) -> None:
        await self.db.transaction(
            lambda c: c.execute(
                f"UPDATE frames SET status = ?, result = ?, closed_at = {NOW} WHERE id = ?", (status, result, frame_id)
            )
        )

    # -- messages -------------------------------------------------------------------

    async def add_member_message(
        self, frame: Frame, text: str, key: str | None, *, queued: bool, attachments: str = "[]", title: str = "",
        placeholder_model: ModelChoice | str | None = None,
    ) -> dict[str, Any]:
        """Store a member's message — in the conversation, or in its inbox while a turn
        runs — unless its idempotency key is taken. The check and the insert are one
        transaction: two retries racing each other (check G1) must store one message and
        acknowledge both, not fail the second on the UNIQUE index. ``title`` names a
        conversation that has no title yet, in the same commit. ``placeholder_model``:
        the message starts a turn, so the turn's streaming placeholder (``start_assistant``)
        is written in this commit too — one sync fewer before the first token; its id is
        ``placeholder_id``. A crash after the commit leaves what a crash after
        ``start_assistant`` does: recovery marks the row interrupted and answers.
        ``titled``: the conversation as committed when this message gave it its title
        (else absent), for the runtime to announce: a client showing it has no other
        way to learn the title (its list may be filtered by a search that hides it)."""
        title = clean_title(title)

        def write(conn: Any) -> dict[str, Any]:
            row = conn.execute("SELECT id, conversation_id FROM messages WHERE idempotency_key = ?", (key,)).fetchone() if key else None
            if row:
                return {"message_id": row[0], "conversation_id": row[1], "queued": False, "duplicate": True}
            row = conn.execute("SELECT id, conversation_id FROM inbox WHERE idempotency_key = ?", (key,)).fetchone() if key else None
            if row:
                return {"message_id": None, "conversation_id": row[1], "queued": True, "duplicate": True}
            if queued:
                conn.execute(
                    "INSERT INTO inbox (conversation_id, content, idempotency_key, attachments) VALUES (?, ?, ?, ?)",
                    (frame.conversation_id, text, key, attachments),
                )
                return {"message_id": None, "conversation_id": frame.conversation_id, "queued": True, "duplicate": False}
            message_id = _insert_user_message(conn, frame, text, key, attachments)
            placeholder_id = _insert_placeholder(conn, frame, placeholder_model) if placeholder_model else None
            return {"message_id": message_id, "conversation_id": frame.conversation_id, "queued": False, "duplicate": False,
                    "placeholder_id": placeholder_id}

        if queued:
            self._inbox_clean.discard(frame.conversation_id)  # before the write is submitted: a drain after it must look
        if key is not None and self._keys is not None:
            self._keys[key] = None  # from its submission on: a retry racing it is no longer "surely new"
            if len(self._keys) > 2 * RECENT_KEYS:
                del self._keys[next(iter(self._keys))]

        def write_rows(conn: Any) -> tuple[dict[str, Any], list[int]]:
            stored = write(conn)
            if title and not stored["duplicate"]:
                named = conn.execute("UPDATE conversations SET title = ? WHERE id = ? AND title = ''", (title, frame.conversation_id))
                if named.rowcount:
                    stored["titled"] = dict(conn.execute("SELECT * FROM conversations WHERE id = ?", (frame.conversation_id,)).fetchone())
            if stored["message_id"] is None or stored["duplicate"]:
                return stored, []
            return stored, [stored["message_id"]] + ([stored["placeholder_id"]] if stored["placeholder_id"] else [])

        return await self._write_rows(write_rows)

    async def remember_keys(self) -> None:
        """Load the idempotency keys of the latest stored and queued messages, so that
        ``key_surely_new`` can answer from memory (retries repeat recent messages)."""

        def read(conn: Any) -> list[str]:
            rows = conn.execute(
                "SELECT idempotency_key FROM messages WHERE idempotency_key IS NOT NULL ORDER BY id DESC LIMIT ?", (RECENT_KEYS,)
            ).fetchall()
            queued = conn.execute("SELECT idempotency_key FROM inbox WHERE idempotency_key IS NOT NULL").fetchall()
            return [r[0] for r in reversed(rows)] + [r[0] for r in queued]

        keys = dict.fromkeys(await self.db.run(read))
        self._keys = keys | (self._keys or {})

    def key_surely_new(self, key: str | None) -> bool:
        """Whether no message with this key was stored lately or submitted since: a
        message that is not a retry. Only a hint for what may start before the write
        (which decides, in its transaction); unknown until ``remember_keys`` ran."""
        return key is None or (self._keys is not None and key not in self._keys)

    async def add_user_message(self, frame: Frame, text: str, key: str | None) -> int:
        def write(conn: Any) -> tuple[int, list[int]]:
            message_id = _insert_user_message(conn, frame, text, key)
            return message_id, [message_id]

        return await self._write_rows(write)

    async def add_continuation_trigger(
        self, frame: Frame, take: Callable[[Any], tuple[str, Callable[[Any, int], object]] | None]
    ) -> int | None:
        """A continuation turn's hidden trigger (seed 004 §4.5), written with what it
        delivers: ``take(conn)`` reads the due inbox events and returns the trigger's
        text and ``consume(conn, message_id)``, which marks them consumed in the same
        transaction (raising LookupError rolls both back). Once committed, the trigger
        is an unanswered message of the history: the turn that answers it is the
        kernel's, and a crash before the answer is recovered like any other. None when
        there was nothing to take."""

        def write(conn: Any) -> tuple[int | None, list[int]]:
            taken = take(conn)
            if taken is None:
                return None, []
            text, consume = taken
            message_id = insert_trigger(conn, frame, text, "agent_continuation")
            consume(conn, message_id)
            conn.execute(f"UPDATE conversations SET updated_at = {NOW} WHERE id = ?", (frame.conversation_id,))
            return message_id, [message_id]

        try:
            return await self._write_rows(write)
        except LookupError:
            return None

    def may_have_queued(self, conversation_id: str) -> bool:
        """Whether a message may have been queued since the conversation's last drain
        was submitted (only this class queues them)."""
        return conversation_id not in self._inbox_clean

    async def drain_inbox(self, frame: Frame) -> list[int]:
        """Move queued messages into the conversation, oldest first, in one transaction."""

        def move(conn: Any) -> tuple[list[int], list[int]]:
            ids = _move_queued(conn, frame)
            return ids, ids

        # Only this class queues messages, so an inbox nothing was queued in since its last
        # drain was submitted is known empty without a read (jobs run in submission order).
        if frame.conversation_id in self._inbox_clean:
            return []
        self._inbox_clean.add(frame.conversation_id)
        try:
            return await self._write_rows(move)
        except BaseException:
            self._inbox_clean.discard(frame.conversation_id)
            raise

    async def start_assistant(self, frame: Frame, model: ModelChoice | str) -> int:
        """The streaming placeholder: its checkpoints keep partial text across a crash."""

        def write(conn: Any) -> tuple[int, list[int]]:
            message_id = _insert_placeholder(conn, frame, model)
            return message_id, [message_id]

        return await self._write_rows(write)

    async def streaming_rows(self, conversation_id: str) -> list[int]:
        rows = await self.db.run(
            lambda c: c.execute("SELECT id FROM messages WHERE conversation_id = ? AND status = 'streaming'", (conversation_id,)).fetchall()
        )
        return [r[0] for r in rows]

    async def stop_turn(self, frame: Frame, unanswered: str, reason: str | None = None) -> tuple[list[int], int | None]:
        """A Stop's one write (seed 004 §8.6: a Stop discards the input the stopped turn
        owned and the next turn's FIFO, losslessly). The turn's streaming rows end
        ``cancelled``; the member's messages queued for the next turn move into the
        conversation, kept and shown, and are answered by a failed answer saying
        ``unanswered`` — a turn that failed is what recovery leaves alone and what
        Retry (``take_back_failure``) takes back to answer them; a new message is
        answered after them. Returns the moved messages' ids and the failed answer's
        (None: nothing was queued)."""

        def write(conn: Any) -> tuple[tuple[list[int], int | None], list[int]]:
            streaming = [r[0] for r in conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND status = 'streaming'", (frame.conversation_id,)
            )]
            if streaming:
                conn.execute(f"UPDATE messages SET status = 'cancelled' WHERE id IN ({','.join('?' * len(streaming))})", streaming)
            moved = _move_queued(conn, frame)
            failed = None
            if moved:
                failed = conn.execute(
                    "INSERT INTO messages (conversation_id, frame_id, role, content, status, reason) VALUES (?, ?, 'assistant', ?, 'error', ?)",
                    (frame.conversation_id, frame.id, unanswered, reason),
                ).lastrowid
            return (moved, failed), streaming + moved + ([failed] if failed else [])

        self._inbox_clean.add(frame.conversation_id)  # as a drain: a message queued after this is submitted is not moved by it
        try:
            return await self._write_rows(write)
        except BaseException:
            self._inbox_clean.discard(frame.conversation_id)
            raise

    async def end_cut_turn(self, conversation_id: str, result: str, unanswered: str, reason: str) -> tuple[list[int], int]:
        """Recovery of a turn an admin's deactivation cut (check C5): it is not taken up
        again, even after a reactivation, but ends as a Stop's does, in one write. Its
        delegations end (frames failed, runs interrupted), its unfinished calls end
        interrupted with ``result`` (their pending cards expire), its streaming rows end
        interrupted, its queued messages move into the conversation, and a failed answer
        saying ``unanswered`` (``reason``) ends it: nothing resumes it by itself, and the
        member's Retry or next message asks again. Returns the moved messages' ids and the
        failed answer's."""
        frame = await self.root_frame(conversation_id)

        def write(conn: Any) -> tuple[tuple[list[int], int], list[int]]:
            _end_delegations(conn, conversation_id, result)
            end_calls(conn, "conversation_id", conversation_id, result)
            streaming = [r[0] for r in conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND status = 'streaming'", (conversation_id,)
            )]
            if streaming:
                conn.execute(f"UPDATE messages SET status = 'interrupted' WHERE id IN ({','.join('?' * len(streaming))})", streaming)
            moved = _move_queued(conn, frame)
            failed = conn.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, content, status, reason) VALUES (?, ?, 'assistant', ?, 'error', ?)",
                (conversation_id, frame.id, unanswered, reason),
            ).lastrowid
            return (moved, failed), [*streaming, *moved, failed]

        self._inbox_clean.add(conversation_id)  # as a drain: a message queued after this is submitted is not moved by it
        try:
            return await self._write_rows(write)
        except BaseException:
            self._inbox_clean.discard(conversation_id)
            raise

    async def settle_streams(
        self, conversation_id: str, status: str, only: Sequence[int] | None = None, reason: str | None = None
    ) -> None:
        """Give a still-streaming row of the conversation its end: a turn stopped or
        failed before its model call took over the placeholder its message wrote.
        ``only``: just these rows (a later turn's may be streaming meanwhile).
        ``reason`` (``reason_json``) goes to the rows, so a reload says why they failed,
        as the live event did (it dropped a cut answer's bubble and said why): a row
        with text keeps its text, and is shown by its reason (a disk that filled
        mid-answer, check G4)."""

        def write(conn: Any) -> tuple[None, list[int]]:
            ids = list(only) if only is not None else [r[0] for r in conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND status = 'streaming'", (conversation_id,)
            )]
            if ids:
                conn.execute(
                    f"UPDATE messages SET status = ?, reason = COALESCE(?, reason) "
                    f"WHERE status = 'streaming' AND id IN ({','.join('?' * len(ids))})", (status, reason, *ids)
                )
            return None, ids

        await self._write_rows(write)

    async def checkpoint(self, message_id: int, content: str, reasoning: str) -> None:
        def write(conn: Any) -> tuple[None, list[int]]:
            conn.execute(
                "UPDATE messages SET content = ?, reasoning = ? WHERE id = ? AND status = 'streaming'", (content, reasoning, message_id)
            )
            return None, [message_id]

        await self._write_rows(write)

    async def finish_assistant(
        self,
        message_id: int,
        *,
        content: str,
        reasoning: str,
        model: str,
        model_id: str | None = None,
        status: str = "complete",
        calls: list[tuple[str, str, str, str]] = (),  # type: ignore[assignment]
        request_log: tuple[str, dict[str, Any], str] | None = None,
        running: int = 0,
        also: Callable[[Any, list[str]], object] | None = None,
        results: Sequence[tuple[str, str]] = (),
    ) -> list[str]:
        """The round's authoritative result and its tool calls, in one transaction; call
        ids are allocated here, in call order. The round's request log (request id,
        request body, response body) rides in the same commit, encoded on the file's
        thread. The first ``running`` calls are written as started: the kernel admitted
        them and runs them as soon as this commits (one sync fewer per tool round).
        ``results``: each call's final (status, result) instead, for calls that will
        not run (the last round the round limit allows).
        ``also(conn, call_ids)``: more statements for the same transaction (a sub-agent
        run's terminal state with its frame's final answer, ``kernel.Ending``; a run's
        frame with the call that opens it, ``Scope.settle``)."""

        def write(conn: Any) -> tuple[list[str], list[int]]:
            ids = _finish_assistant(conn, message_id, content, reasoning, model, status, calls, request_log, running, results, model_id=model_id)
            if also is not None:
                also(conn, ids)
            return ids, [message_id]

        return await self._write_rows(write)

    def finish_assistant_queued(
        self, message_id: int, *, content: str, reasoning: str, model: str, request_log: tuple[str, dict[str, Any], str] | None,
        also: Callable[[Any, list[str]], object], model_id: str | None = None,
    ) -> "asyncio.Future[list[str]]":
        """A final answer (no calls) as ``finish_assistant`` writes it, its place in the
        file's one queue taken before this returns (``Database.transaction_queued``):
        committed before any write submitted after it, not awaited by its caller."""

        def write(conn: Any) -> tuple[list[str], list[Row]]:
            ids = _finish_assistant(conn, message_id, content, reasoning, model, "complete", (), request_log, 0, model_id=model_id)
            also(conn, ids)
            _index_messages(conn, [message_id])
            return ids, _reread(conn, [message_id])

        submitted = self._carrying_queued(write)

        async def spliced() -> list[str]:
            ids, rows = await submitted
            self._splice(rows)
            return ids

        return asyncio.ensure_future(spliced())

    async def finish_round(
        self,
        message_id: int,
        *,
        content: str,
        reasoning: str,
        model: str,
        calls: list[tuple[str, str, str, str]],
        results: list[tuple[str, str]],
        model_id: str | None = None,
        request_log: tuple[str, dict[str, Any], str] | None,
        placeholder: tuple[Any, ...],
    ) -> tuple[list[str], int]:
        """A round whose calls already ran, in one commit: what ``finish_assistant``
        writes, with each call's (status, result), and the next round's streaming
        placeholder. Returns the call ids and the placeholder's id."""

        def write(conn: Any) -> tuple[tuple[list[str], int], list[int]]:
            ids = _finish_assistant(conn, message_id, content, reasoning, model, "complete", calls, request_log, 0, results, touch=False, model_id=model_id)
            written = _next_round(conn, placeholder)
            return (ids, written[-1]), [message_id, *written]

        return await self._write_rows(write)

    async def add_note(self, frame: Frame, text: str, status: str = "complete", reason: str | None = None) -> int:
        """A message the host writes for the member's eyes (a notification, an error):
        shown in the conversation, never sent to the model, never ending a round.
        ``reason``: its ``reason_json``, when the host has words for it in every language."""
        return await self._carrying(
            lambda c: c.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, content, status, reason) VALUES (?, ?, 'note', ?, ?, ?)",
                (frame.conversation_id, frame.id, text, status, reason),
            ).lastrowid
        )

    async def fail_turn(self, frame: Frame, text: str, reason: str | None = None) -> int:
        """A turn that failed before any model answered (none is configured): its
        streaming placeholder, or a new answer row, ends as ``error`` with the reason as
        its text. The member's message is then answered (by a failure), so recovery
        leaves it alone and the member's Retry starts it again."""

        def write(conn: Any) -> tuple[int, list[int]]:
            row = conn.execute(
                "SELECT id FROM messages WHERE frame_id = ? AND status = 'streaming' ORDER BY id DESC LIMIT 1", (frame.id,)
            ).fetchone()
            if row is not None:
                conn.execute("UPDATE messages SET content = ?, reasoning = '', status = 'error', reason = ? WHERE id = ?", (text, reason, row[0]))
                return row[0], [row[0]]
            message_id = conn.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, content, status, reason) VALUES (?, ?, 'assistant', ?, 'error', ?)",
                (frame.conversation_id, frame.id, text, reason),
            ).lastrowid
            return message_id, [message_id]

        return await self._write_rows(write)

    async def failed_before_answer(self, frame: Frame, message_id: int) -> bool:
        """Whether an error note follows the member's message ``message_id``: how a
        turn that failed before any model answered was recorded before ``fail_turn``."""
        row = await self.db.run(
            lambda c: c.execute(
                "SELECT 1 FROM messages WHERE frame_id = ? AND id > ? AND role = 'note' AND status = 'error' LIMIT 1", (frame.id, message_id)
            ).fetchone()
        )
        return row is not None

    async def take_back_failure(self, frame: Frame) -> bool:
        """Retry: remove the failed end of the frame's history (``_failed_end``) so that
        the member's message is unanswered again. False when the history does not end in
        a failure (nothing changes)."""

        def write(conn: Any) -> bool:
            ids = _failed_end(conn, frame)
            if not ids:
                return False
            conn.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(ids))})", ids)
            return True

        try:
            return await self.db.transaction(write)
        finally:
            self.forget()

    async def failed_exchange(self, frame: Frame) -> list[int]:
        """The member's last message and the failure that answered it (``_failed_end``),
        when the frame's history ends in one the member's Retry takes back; else empty."""
        return await self.db.run(lambda conn: _failed_exchange(conn, frame))

    async def keep_as_version(self, frame: Frame) -> bool:
        """Regenerate: the answer to the member's last message (every row after it: rounds,
        calls, notes) becomes an earlier version, kept but out of the history, so that
        the message is unanswered again. False when there is no such answer, or it is
        still streaming."""

        def write(conn: Any) -> bool:
            last_user = _last_user_message(conn, frame)
            return last_user is not None and _branch(conn, frame, last_user, last_user + 1, answer_only=True)

        try:
            return await self.db.transaction(write)
        finally:
            self.forget()

    async def answer_to_keep(self, frame: Frame) -> bool:
        """Whether ``keep_as_version`` would find an answer to set aside, read only: a
        Regenerate with nothing to regenerate is refused before it undoes anything."""

        def read(conn: Any) -> bool:
            last_user = _last_user_message(conn, frame)
            return last_user is not None and bool(_branch_rows(conn, frame, last_user + 1, answer_only=True))

        return await self.db.run(read)

    async def edit_message(self, frame: Frame, message_id: int, text: str) -> int | None:
        """Edit a member's message: it and everything after it become an earlier version
        (the branch kept), and the edited text follows the row before it as a new
        message; its id, None when ``message_id`` is no message of the member shown, 0
        when it cannot be taken back (a compaction summarised it)."""

        def write(conn: Any) -> tuple[int | None, list[int]]:
            row = conn.execute(
                "SELECT attachments FROM messages WHERE id = ? AND frame_id = ? AND role = 'user' AND variant = 0", (message_id, frame.id)
            ).fetchone()
            if row is None:
                return None, []
            before = conn.execute(
                "SELECT coalesce(max(id), 0) FROM messages WHERE frame_id = ? AND id < ? AND variant = 0", (frame.id, message_id)
            ).fetchone()[0]
            if not _branch(conn, frame, before, message_id):
                return 0, []  # a compaction summarised it (or a row still streams)
            new_id = _insert_user_message(conn, frame, text, None, row[0])  # its attachments stay with it
            return new_id, [new_id]

        try:
            return await self._write_rows(write)
        finally:
            self.forget()

    async def show_version(self, frame: Frame, variant: int) -> bool:
        """Show an earlier version (of an answer, or of a conversation from an edited
        message on) instead of the one shown at its branch point, which is kept as a
        version in turn. False when there is no such version."""

        def write(conn: Any) -> bool:
            if variant <= 0:
                return False
            chosen = conn.execute(
                "SELECT id, branch_point FROM messages WHERE frame_id = ? AND variant = ?", (frame.id, variant)
            ).fetchall()
            if not chosen:
                return False
            point = chosen[0][1] or 0
            if point and not conn.execute("SELECT 1 FROM messages WHERE id = ? AND variant = 0", (point,)).fetchone():
                return False  # its branch point is itself in a version not shown: flip to that first
            if not _branch(conn, frame, point, point + 1, allow_empty=True, answer_only=True):
                return False  # what is shown there cannot be set aside (a compaction covers it)
            conn.execute(
                f"UPDATE messages SET variant = 0, branch_point = NULL WHERE id IN ({','.join('?' * len(chosen))})", [r[0] for r in chosen]
            )
            return True

        try:
            return await self.db.transaction(write)
        finally:
            self.forget()

    async def cut_requests(self, conversation_id: str | None = None) -> list[tuple[str, str | None, str | None]]:
        """Recovery, before ``mark_interrupted_streams``: the model (and catalog entry) of each answer a
        stopped server was streaming, one per request cut short — every row it marks
        interrupted, in any frame: a background run's frame was closed by the runs' own
        recovery already (``subagents.runs.recover``), and its cut request was billed
        all the same. ``conversation_id``: that conversation's only. Each with when its
        request was sent: the answer's row is written as the request starts."""
        if conversation_id is None:
            sql, args = "SELECT model, model_id, created_at FROM messages WHERE status = 'streaming'", ()
        else:  # a streaming row is never indexed for search: the small partial index finds it
            sql, args = ("SELECT model, model_id, created_at FROM messages WHERE indexed = 0 AND status = 'streaming'"
                         " AND conversation_id = ?", (conversation_id,))
        return await self.db.run(lambda conn: [(r[0] or "", r[1], r[2]) for r in conn.execute(sql, args)])

    async def record_cut_cause(self, cause: str) -> None:
        """A closing runtime says why it cuts its turns (``cut_result``)."""
        await self.db.transaction(lambda conn: conn.execute(
            "INSERT INTO member_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (CUT_CAUSE_SETTING, json.dumps(cause)),
        ))

    async def take_cut_cause(self) -> str | None:
        """The cause the last close recorded, cleared: a crash after this recovery
        finds none, and is not said to be a sign-out's."""

        def write(conn: Any) -> str | None:
            row = conn.execute("DELETE FROM member_settings WHERE key = ? RETURNING value", (CUT_CAUSE_SETTING,)).fetchone()
            try:
                return json.loads(row[0]) if row else None
            except ValueError:
                return None

        return await self.db.transaction(write)

    async def end_left_calls(self) -> int:
        """Recovery heals calls left ``requested`` or ``running`` in a turn that moved on
        (a later message of their frame exists): nothing takes them up again — the
        kernel resumes only the calls of its frame's last message — and they showed
        waiting for ever (an earlier version's Stop left the calls queued behind a
        stopped one ``requested``). One never started ends cancelled, one that started
        interrupted; a call waiting for an approval, and every call of a frame's last
        message (a turn recovery resumes), are left alone. The number ended."""

        def write(conn: Any) -> tuple[int, list[int]]:
            rows = conn.execute(
                "SELECT c.id, c.status, c.message_id FROM tool_calls c WHERE c.status IN ('requested', 'running')"
                " AND EXISTS (SELECT 1 FROM messages m WHERE m.frame_id = c.frame_id AND m.id > c.message_id"
                " AND m.role != 'note' AND m.variant = 0)"
            ).fetchall()
            for call_id, status, _ in rows:
                ended, result = ("cancelled", HOST_RESULTS["not_run"]) if status == "requested" else ("interrupted", HOST_RESULTS["cut"])
                conn.execute(
                    f"UPDATE tool_calls SET status = ?, result = ?, finished_at = {NOW} WHERE id = ?", (ended, result, call_id),
                )
            return len(rows), sorted({message_id for _, _, message_id in rows})

        return await self._write_rows(write)

    async def steer_opening(
        self, frame: Frame, model: ModelChoice | str | None, before: Callable[[Any], list[int]], replacing: int | None,
    ) -> int:
        """A root turn's first round with steer events (seed 004 §4.4): ``before``'s
        messages (the trigger) and the round's placeholder in one commit, the events
        consumed by it. ``replacing``: the placeholder written with the member's
        message, still streaming and empty, which gives way to one after the trigger
        (history is in id order, and the trigger goes ahead of the round). The new
        placeholder's id. ``model`` None: the new one asks the model the replaced one named."""

        def write(conn: Any) -> tuple[int, list[int]]:
            if model is None and replacing is not None:
                written = list(before(conn)) + [conn.execute(
                    "INSERT INTO messages (conversation_id, frame_id, role, status, model, model_id)"
                    " SELECT conversation_id, frame_id, 'assistant', 'streaming', model, model_id FROM messages WHERE id = ?",
                    (replacing,),
                ).lastrowid]
            else:
                written = _next_round(conn, (frame, model or "", before))
            if replacing is not None:
                conn.execute("DELETE FROM messages WHERE id = ? AND status = 'streaming'", (replacing,))
            return written[-1], written

        placeholder_id = await self._write_rows(write)
        if replacing is not None:
            self._history.pop(frame.id, None)  # the row it removed is still in the copy kept in memory
        return placeholder_id

    async def mark_interrupted_streams(
        self, note: str = "", reason: str | None = None, *, give_up: tuple[int, str, Callable[[int], str]] | None = None
    ) -> tuple[list[str], list[str]]:
        """Recovery: every answer a stopped server was writing ends as interrupted, and
        (with ``note``) its conversation says so in a note, in the same transaction:
        resuming asks the model again, which a member should never find silent.

        ``give_up`` is (limit, text, reason of a count): a turn whose answer was already
        asked for again ``limit`` times (that many ``reason`` notes after the member's
        message) is not asked again but fails, its answer row saying so, so that a server
        that dies on every start does not bill the provider on every start; the member's
        Retry asks again. A cut in a sub-agent's frame counts as the turn's (its note is
        the top frame's); giving it up also ends the delegation: its frames fail, its runs
        and the calls waiting on them are interrupted. Returns (the conversations to
        resume, those given up)."""

        def write(conn: Any) -> tuple[list[str], list[str]]:
            # Only a stream of a frame still open is asked for again: a background run's
            # frame, closed as interrupted by the runs' own recovery, is not resumed, so
            # its conversation gets no note saying it is.
            cut = [r[0] for r in conn.execute(
                "SELECT DISTINCT m.conversation_id FROM messages m JOIN frames f ON f.id = m.frame_id"
                " WHERE m.status = 'streaming' AND f.status = 'open'"
            )]
            given_up = []
            if give_up is not None and reason is not None:
                limit, text, limit_reason = give_up
                for conversation_id in cut:
                    root = conn.execute("SELECT id FROM frames WHERE conversation_id = ? AND depth = 0", (conversation_id,)).fetchone()
                    if root is None:
                        continue
                    last_user = conn.execute(
                        "SELECT coalesce(max(id), 0) FROM messages WHERE frame_id = ? AND role = 'user' AND variant = 0", (root[0],)
                    ).fetchone()[0]
                    times = conn.execute(
                        "SELECT count(*) FROM messages WHERE frame_id = ? AND role = 'note' AND reason = ? AND id > ? AND variant = 0",
                        (root[0], reason, last_user),
                    ).fetchone()[0]
                    if times >= limit:
                        given_up.append((conversation_id, root[0], limit_reason(times + 1)))
                        _end_delegations(conn, conversation_id, text)
            conn.execute("UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'")
            # Its partial answer stays, interrupted like the others; the failure follows it.
            conn.executemany(
                "INSERT INTO messages (conversation_id, frame_id, role, content, status, reason) VALUES (?, ?, 'assistant', ?, 'error', ?)",
                [(conversation_id, frame_id, give_up[1], why) for conversation_id, frame_id, why in given_up],
            )
            given_up = [conversation_id for conversation_id, _, _ in given_up]
            resumed = [c for c in cut if c not in given_up]
            if note:
                conn.executemany(
                    "INSERT INTO messages (conversation_id, frame_id, role, content, status, reason)"
                    " SELECT conversation_id, id, 'note', ?, 'complete', ? FROM frames WHERE conversation_id = ? AND depth = 0",
                    [(note, reason, conversation_id) for conversation_id in resumed],
                )
            return resumed, given_up

        try:
            return await self._carrying(write)
        finally:
            self.forget()

    async def add_summary(self, frame: Frame, text: str, *, before: Sequence[int] = ()) -> int:
        """A compaction's summary, opening the frame's history from now on. ``before``:
        the failed exchange the summary left out (``failed_exchange``, read before the
        summary was asked for): its rows move after the summary (new ids, in order), so
        the member's unanswered message stays in the history and its Retry stays —
        unless the exchange changed meanwhile (a Retry, a send), then nothing moves."""

        def write(conn: Any) -> tuple[int, list[int]]:
            unchanged = bool(before) and _failed_exchange(conn, frame) == list(before)
            message_id = conn.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, content) VALUES (?, ?, 'summary', ?)",
                (frame.conversation_id, frame.id, text),
            ).lastrowid
            moved = _move_to_end(conn, list(before)) if unchanged else []
            return message_id, [message_id, *moved]

        try:
            return await self._write_rows(write)
        finally:
            if before:
                self.forget()

    # -- tool calls -------------------------------------------------------------------

    async def call(self, call_id: str) -> CallRow | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM tool_calls WHERE id = ?", (call_id,)).fetchone())
        return _call(row) if row else None

    async def calls_of(self, message_id: int) -> list[CallRow]:
        rows = await self.db.run(lambda c: c.execute("SELECT * FROM tool_calls WHERE message_id = ? ORDER BY seq", (message_id,)).fetchall())
        return [_call(r) for r in rows]

    async def set_call(
        self, call_id: str, status: str, result: str | None = None, *, placeholder: tuple[Any, ...] | None = None
    ) -> int | None:
        """A call's new status; with ``placeholder`` (frame, model), the next round's
        streaming placeholder in the same commit, whose id is returned."""
        return await self.set_calls([(call_id, status, result)], placeholder=placeholder)

    async def set_calls(
        self, changes: Sequence[tuple[str, str, str | None]], *, placeholder: tuple[Any, ...] | None = None
    ) -> int | None:
        """Several calls' new (status, result) in one commit, with ``placeholder`` as
        ``set_call`` has it."""

        def write(conn: Any) -> tuple[int | None, list[int]]:
            changed: list[int] = []
            for call_id, status, result in changes:
                conn.execute(
                    "UPDATE tool_calls SET status = ?, result = COALESCE(?, result),"
                    " reason = CASE WHEN ? IS NULL THEN reason ELSE ? END,"
                    f" finished_at = CASE WHEN ? THEN {NOW} ELSE finished_at END WHERE id = ?",
                    (status, result, result, result_reason(result), status in TERMINAL_CALL_STATES, call_id),
                )
                changed += [m for m in _message_of_call(conn, call_id) if m not in changed]
            if placeholder is None:
                return None, changed
            written = _next_round(conn, placeholder)
            return written[-1], changed + written

        return await self._write_rows(write)

    def settled_history(self, frame: Frame) -> list[Row] | None:
        """The frame's history as committed, without a read, when it is kept in memory
        and a new message would simply follow it: nothing streaming, no call unfinished,
        no sub-agent frame open. Else None (the caller reads and settles it first). With
        no write of this frame in flight, the kept copy is what a read would return."""
        cached = self._history.get(frame.id)
        if cached is None or frame.conversation_id not in self._no_subframes:
            return None
        last = cached[-1] if cached else None
        if last is not None and (
            last["status"] == "streaming" or any(c["status"] not in TERMINAL_CALL_STATES for c in last["tool_calls"])
        ):
            return None
        return list(cached)

    async def history(self, frame_id: str) -> list[Row]:
        """A frame's messages with their tool calls, oldest first, from its latest
        summary on (compaction). The rows are read-only: they are shared with the copy
        kept in memory."""
        cached = self._history.get(frame_id)
        if cached is not None:
            self._history.move_to_end(frame_id)
            return list(cached)

        def read(conn: Any) -> list[Row]:
            start = conn.execute(
                "SELECT max(id) FROM messages WHERE frame_id = ? AND role = 'summary' AND variant = 0", (frame_id,)
            ).fetchone()[0] or 0
            return _with_calls(
                conn,
                conn.execute(
                    "SELECT * FROM messages WHERE frame_id = ? AND id >= ? AND role != 'note' AND variant = 0 ORDER BY id", (frame_id, start)
                ),
                conn.execute("SELECT * FROM tool_calls WHERE frame_id = ? AND message_id >= ? ORDER BY message_id, seq", (frame_id, start)),
            )

        writes = self._writes
        rows = await self.db.run(read)
        if writes == self._writes:  # no write finished meanwhile, so none is missing from the copy
            self._keep(frame_id, rows)
        return list(rows)

    def _keep(self, frame_id: str, rows: list[Row]) -> None:
        self._history[frame_id] = rows
        while len(self._history) > HISTORY_CACHE_FRAMES:
            self._history.popitem(last=False)

    async def transcript(self, conversation_id: str) -> list[dict[str, Any]]:
        """The root frame's messages for the member's screen (every status shown). A
        member's message keeps the idempotency key their client sent it with: a screen
        that still holds it unacknowledged knows it is this one, not another to draw."""
        frame = await self.root_frame(conversation_id)

        def read(conn: Any) -> list[dict[str, Any]]:
            # A continuation's trigger is for the model, never the member's screen (seed 004 §4.5).
            messages = [dict(r) for r in conn.execute("SELECT * FROM messages WHERE frame_id = ? AND origin IS NULL ORDER BY id", (frame.id,))]
            calls: dict[int, list[dict[str, Any]]] = {}
            for r in conn.execute("SELECT * FROM tool_calls WHERE frame_id = ? ORDER BY message_id, seq", (frame.id,)):
                calls.setdefault(r["message_id"], []).append(_call_on_the_wire(r))
            _messages_on_the_wire(messages, calls)
            return messages

        return await self.db.run(read)

    async def member_message(self, message_id: Any) -> dict[str, Any] | None:
        """One member's message as a screen draws it (its words, files and the key its
        client sent it with), for a channel told of it after it was stored: the live
        event of a queued message names only its id. None for any other row."""

        def read(conn: Any) -> dict[str, Any] | None:
            row = conn.execute(
                "SELECT id, conversation_id, content, attachments, idempotency_key, created_at FROM messages"
                " WHERE id = ? AND role = 'user' AND origin IS NULL",
                (message_id,),
            ).fetchone()
            if row is None:
                return None
            return {**dict(row), "attachments": parse_attachments(row["attachments"])}

        return await self.db.run(read) if isinstance(message_id, int) else None

    async def transcript_page(
        self,
        conversation_id: str,
        *,
        rows: int,
        before: int | None = None,
        after: int | None = None,
        around: int | None = None,
        find: str | None = None,
        prefer: str = "",
    ) -> dict[str, Any]:
        """A part of ``transcript``: about ``rows`` of the rows on screen (``variant = 0``),
        widened to whole turns (it starts at a member's message, or at the first row, and
        ends before one, or at the last row: a call is never cut from its result, nor a
        turn's versions from it) — the newest, those before the row ``before``, those after
        ``after``, or those around ``around`` or around the earliest row that holds every
        word of ``find`` (the one whose text holds ``prefer``, folded, first). With it, the
        earlier versions that branch off its rows (``branch_point`` from the row before it
        on, before its last row). ``base``: the row before it (0: none; a version that
        branches off it starts in this part); ``earlier``/``later``: the ``before``/``after``
        of the parts next to it (None: none); ``found``: the row ``find`` found (None: none);
        ``span``: the ``created_at`` of the rows just outside it (None: none)."""
        frame = await self.root_frame(conversation_id)

        def locate(conn: Any) -> int | None:
            if not find:
                return None
            words = fts_words(find)
            if not words:
                return None
            hits = conn.execute(
                "SELECT m.id, m.content FROM messages_fts f JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?"
                " AND f.conversation_id = ? AND m.frame_id = ? AND m.variant = 0 AND m.origin IS NULL ORDER BY m.id",
                (" AND ".join(words), conversation_id, frame.id),
            ).fetchall()
            core = search_form(prefer.replace("…", " ")).strip() if prefer else ""
            chosen = next((h for h in hits if core and core in search_form(h[1] or "")), hits[0] if hits else None)
            return chosen[0] if chosen else None

        if find:  # as a search: what was left unindexed first, then a read beside the writer
            await self.index_finished_messages()
        found = await self.db.read(locate) if find else None

        def read(conn: Any) -> dict[str, Any]:
            shown = conn.execute(
                "SELECT id, role, created_at FROM messages WHERE frame_id = ? AND origin IS NULL AND variant = 0 ORDER BY id", (frame.id,)
            ).fetchall()
            ids = [r["id"] for r in shown]
            turn = [i for i, r in enumerate(shown) if r["role"] == "user"]

            def turn_start(index: int) -> int:  # the first row of the turn the row `index` is in
                starts = [i for i in turn if i <= index]
                return starts[-1] if starts else 0

            def turn_end(index: int) -> int:  # one past the last row of the turn `index` is in
                ends = [i for i in turn if i > index]
                return ends[0] if ends else len(ids)

            centre = around if around is not None else found
            if not ids:
                start, end = 0, 0
            elif centre is not None:
                at = min(bisect.bisect_left(ids, centre), len(ids) - 1)
                start, end = turn_start(max(0, at - rows // 2)), turn_end(min(len(ids) - 1, at + rows // 2))
            elif after is not None:
                first = bisect.bisect_right(ids, after)
                start = first
                end = turn_end(min(len(ids) - 1, first + rows - 1)) if first < len(ids) else first
            else:
                last = bisect.bisect_left(ids, before) if before is not None else len(ids)
                end = last
                start = turn_start(max(0, last - rows)) if last > 0 else 0
            base = ids[start - 1] if start > 0 else 0
            later = ids[end - 1] if 0 < end < len(ids) else None
            if start >= end:
                # Nothing there (after the last row, before the first): the part before is that up to its place.
                earlier = None if start == 0 else (ids[start] if start < len(ids) else ids[-1] + 1)
                return {"messages": [], "base": base, "earlier": earlier, "later": later,
                        "span": (None, None), "root_calls": set()}
            lo, hi = ids[start], ids[end - 1]
            point = "coalesce(branch_point, 0)"
            bound = f" AND {point} < ?" if end < len(ids) else ""
            messages = [dict(r) for r in conn.execute(
                "SELECT * FROM messages WHERE frame_id = ? AND origin IS NULL AND ((variant = 0 AND id BETWEEN ? AND ?)"
                f" OR (variant != 0 AND {point} >= ?{bound})) ORDER BY id",
                (frame.id, lo, hi, base, *((hi,) if bound else ())),
            )]
            wanted = {m["id"] for m in messages}
            calls: dict[int, list[dict[str, Any]]] = {}
            root_calls = {r[0] for r in conn.execute("SELECT id FROM tool_calls WHERE frame_id = ?", (frame.id,))}
            first, last = min(wanted), max(wanted)
            for r in conn.execute(
                "SELECT * FROM tool_calls WHERE frame_id = ? AND message_id BETWEEN ? AND ? ORDER BY message_id, seq", (frame.id, first, last)
            ):
                if r["message_id"] in wanted:
                    calls.setdefault(r["message_id"], []).append(_call_on_the_wire(r))
            _messages_on_the_wire(messages, calls)
            return {
                "messages": messages, "base": base, "earlier": lo if start > 0 else None, "later": later,
                "span": (shown[start - 1]["created_at"] if start > 0 else None, shown[end]["created_at"] if end < len(ids) else None),
                "root_calls": root_calls,
            }

        page = await self.db.run(read)
        page["found"] = found
        return page

    async def queued(self, conversation_id: str) -> list[dict[str, Any]]:
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT id, content, attachments, created_at, idempotency_key FROM inbox WHERE conversation_id = ? ORDER BY id",
                (conversation_id,),
            ).fetchall()
        )
        return [dict(r, attachments=parse_attachments(r["attachments"])) for r in rows]

    # -- approvals ----------------------------------------------------------------------

    async def request_approval(
        self, call_id: str, conversation_id: str, tool: str, args_hash: str, expires_at: str,
        untrusted: Mapping[str, Any] | None = None,
    ) -> str:
        """``untrusted``: the outside text that made an allowed call ask, kept so a
        reloaded card says "asked because" exactly when the live one did."""
        approval_id = new_id()
        reason = json.dumps(dict(untrusted), ensure_ascii=False) if untrusted else None

        def write(conn: Any) -> tuple[None, list[int]]:
            conn.execute(
                "INSERT INTO approvals (id, conversation_id, tool_call_id, tool, args_hash, status, expires_at, untrusted)"
                " VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
                (approval_id, conversation_id, call_id, tool, args_hash, expires_at, reason),
            )
            conn.execute("UPDATE tool_calls SET status = 'awaiting_approval' WHERE id = ?", (call_id,))
            return None, _message_of_call(conn, call_id)

        await self._write_rows(write)
        return approval_id

    async def approval_for_call(self, call_id: str) -> dict[str, Any] | None:
        row = await self.db.run(
            lambda c: c.execute("SELECT * FROM approvals WHERE tool_call_id = ? ORDER BY created_at DESC LIMIT 1", (call_id,)).fetchone()
        )
        return dict(row) if row else None

    async def approval(self, approval_id: str) -> dict[str, Any] | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM approvals WHERE id = ?", (approval_id,)).fetchone())
        return dict(row) if row else None

    async def resolve_approval(self, approval_id: str, status: str) -> bool:
        """pending → approved/denied/expired, once: a second resolution changes nothing.
        A member's answer (approved, denied) comes too late once the card's time is up:
        a card still pending past ``expires_at`` is expired, never approved."""
        late = "" if status == "expired" else " AND expires_at > ?"
        args = (status, approval_id) if status == "expired" else (status, approval_id, now_stamp())
        return bool(
            await self.db.transaction(
                lambda c: c.execute(
                    f"UPDATE approvals SET status = ?, resolved_at = {NOW} WHERE id = ? AND status = 'pending'{late}", args
                ).rowcount
            )
        )

    async def consume_approval(self, approval_id: str, args_hash: str) -> bool:
        """approved → used, only for the exact arguments approved: single use."""
        return bool(
            await self.db.transaction(
                lambda c: c.execute(
                    "UPDATE approvals SET status = 'used' WHERE id = ? AND status = 'approved' AND args_hash = ?", (approval_id, args_hash)
                ).rowcount
            )
        )

    async def pending_approvals(self) -> list[dict[str, Any]]:
        """Each with the frame of its call and, when that frame is a helper's (a sub-agent
        run), the helper (``agent``): the card names who asks, after a reload as live."""
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT a.*, t.arguments, t.frame_id, CASE WHEN f.depth > 0 THEN f.agent_id END AS agent"
                " FROM approvals a JOIN tool_calls t ON t.id = a.tool_call_id LEFT JOIN frames f ON f.id = t.frame_id"
                " WHERE a.status = 'pending' ORDER BY a.created_at"
            ).fetchall()
        )
        # Why a card asks when a rule would have allowed it (check E2), as written when it
        # was raised: a reloaded card says so exactly when the live one did (it once said
        # it for every card of a frame with outside text, a rule's own question included).
        return [{**dict(r), "untrusted": _untrusted_reason(r["untrusted"])} for r in rows]

    async def resolved_approvals(self, conversation_id: str) -> list[dict[str, Any]]:
        """A conversation's answered approvals: a reloaded screen shows each card's outcome
        as the live one did. ``status IN`` with the conversation lets the (status,
        conversation_id) index answer, so a long conversation costs one indexed query."""
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT id, tool_call_id, tool, status, created_at, resolved_at FROM approvals"
                " WHERE status IN ('approved', 'denied', 'expired', 'used') AND conversation_id = ? ORDER BY created_at",
                (conversation_id,),
            ).fetchall()
        )
        return [dict(r) for r in rows]

    # -- scheduled prompts -----------------------------------------------------------------

    async def schedule(
        self, conversation_id: str, prompt: str, due_at: str, *, cron: str | None = None, timezone: str | None = None,
        phrase: str | None = None,
    ) -> str:
        """Store a scheduled prompt: one-shot (no ``cron``) or recurring (``cron`` read in
        ``timezone``, first due at ``due_at``; see ``skald_host.core.schedules``)."""
        job_id = new_id()
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO scheduled_jobs (id, conversation_id, prompt, due_at, cron, timezone, phrase) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job_id, conversation_id, prompt, due_at, cron, timezone, phrase),
            )
        )
        self.jobs_changed.set()
        return job_id

    async def next_job_due(self) -> str | None:
        """When the earliest job not yet delivered is due (ISO, UTC), or None."""
        return await self.db.run(
            lambda c: c.execute("SELECT MIN(due_at) FROM scheduled_jobs WHERE status IN ('pending', 'running') AND paused = 0").fetchone()[0]
        )

    async def due_jobs(self, now_iso: str) -> list[dict[str, Any]]:
        """Due jobs, including any left 'running': a crash between marking a job running
        and storing its prompt would otherwise lose it for good. Delivering one twice is
        harmless, the prompt's idempotency key (``job:<id>``, for a recurring job
        ``job:<id>:<due_at>``) stores it once."""
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT * FROM scheduled_jobs WHERE status IN ('pending', 'running') AND paused = 0 AND due_at <= ? ORDER BY due_at",
                (now_iso,),
            ).fetchall()
        )
        return [dict(r) for r in rows]

    async def set_job(self, job_id: str, status: str) -> None:
        def write(c: Any) -> None:
            c.execute(f"UPDATE scheduled_jobs SET status = ?, finished_at = {NOW} WHERE id = ?", (status, job_id))
            if status in ("done", "failed"):
                c.execute(f"UPDATE scheduled_jobs SET last_run_at = {NOW}, last_status = ?, runs = runs + 1 WHERE id = ?", (status, job_id))

        await self.db.transaction(write)

    async def answer_status(self, key: str) -> str | None:
        """The status of the answer to the member's message stored under ``key``: the
        last assistant row after it, before the frame's next member's message (None: not
        stored, or not answered yet)."""

        def read(conn: Any) -> str | None:
            row = conn.execute("SELECT id, frame_id FROM messages WHERE idempotency_key = ?", (key,)).fetchone()
            if row is None:
                return None
            following = conn.execute(
                "SELECT min(id) FROM messages WHERE frame_id = ? AND role = 'user' AND id > ?", (row[1], row[0])
            ).fetchone()[0]
            answer = conn.execute(
                "SELECT status FROM messages WHERE frame_id = ? AND role = 'assistant' AND variant = 0 AND id > ?"
                " AND (? IS NULL OR id < ?) ORDER BY id DESC LIMIT 1",
                (row[1], row[0], following, following),
            ).fetchone()
            return answer[0] if answer else None

        return await self.db.run(read)

    async def answers_awaited(self, conversation_ids: list[str]) -> list[tuple[str, str, str, int]]:
        """The delivered runs in ``conversation_ids`` whose result still reads "done"
        while their answer may yet fail: ``(job id, conversation id, the delivered
        prompt's key, the run)``. Recovery resumes those conversations; a crash ended
        the watch that would have marked a failed answer, so it is set again."""

        def read(c: Any) -> list[tuple[str, str, str, int]]:
            found = []
            marks = ", ".join("?" * len(conversation_ids))
            jobs = c.execute(
                f"SELECT id, conversation_id, runs FROM scheduled_jobs WHERE last_status = 'done' AND conversation_id IN ({marks})",
                conversation_ids,
            ).fetchall()
            for job_id, conversation_id, runs in jobs:
                one_shot = f"{schedules.SCHEDULED_KEY}{job_id}"
                # A one-shot run's key, or the latest occurrence's (``job:<id>:<due_at>``).
                key = c.execute(
                    "SELECT idempotency_key FROM messages WHERE idempotency_key = ?"
                    " OR (idempotency_key > ? AND idempotency_key < ?) ORDER BY id DESC LIMIT 1",
                    (one_shot, one_shot + ":", one_shot + ";"),
                ).fetchone()
                if key is not None:
                    found.append((job_id, conversation_id, key[0], int(runs or 0)))
            return found

        return await self.db.run(read) if conversation_ids else []

    async def job_answer_failed(self, job_id: str, run: int) -> None:
        """A delivered run (``run``: the job's count of runs with it) whose answer ended in
        an error reads "failed", a one-shot job too; a later run's result is left alone."""
        await self.db.transaction(lambda c: c.execute(
            "UPDATE scheduled_jobs SET last_status = 'failed', status = CASE status WHEN 'done' THEN 'failed' ELSE status END"
            " WHERE id = ? AND runs = ? AND last_status = 'done'",
            (job_id, run),
        ))

    async def job_ran(self, job_id: str, result: str, next_due: str, occurrence: str, ran_at: str) -> None:
        """A recurring job's occurrence ``occurrence`` ended (``result``: done or
        failed): it waits for ``next_due``, in the same write. Only the pass that ran
        that occurrence moves it on (two passes at once count it once), and a job edited
        meanwhile (its due_at moved) keeps the edit."""

        def write(c: Any) -> None:
            moved = c.execute(
                "UPDATE scheduled_jobs SET status = 'pending', due_at = ?, last_run_at = ?, last_status = ?, runs = runs + 1"
                " WHERE id = ? AND due_at = ? AND status = 'running'",
                (next_due, ran_at, result, job_id, occurrence),
            ).rowcount
            if not moved:
                c.execute("UPDATE scheduled_jobs SET status = 'pending' WHERE id = ? AND status = 'running' AND due_at != ?", (job_id, occurrence))

        await self.db.transaction(write)

    async def jobs(self) -> list[dict[str, Any]]:
        """The member's scheduled prompts, active first, with their conversation's title."""
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT j.*, c.title AS conversation_title FROM scheduled_jobs j JOIN conversations c ON c.id = j.conversation_id"
                " ORDER BY j.status NOT IN ('pending', 'running'), j.paused, j.due_at LIMIT 500"
            ).fetchall()
        )
        return [dict(r) for r in rows]

    async def job(self, job_id: str) -> dict[str, Any] | None:
        """One job by id, or by an unambiguous prefix of at least 6 characters (what
        the tools show the model)."""
        if len(job_id) < 6:
            return None

        # With its conversation's title, as ``jobs`` gives it (a new job's answer had none).
        select = "SELECT j.*, c.title AS conversation_title FROM scheduled_jobs j LEFT JOIN conversations c ON c.id = j.conversation_id"

        def read(c: Any) -> list[Any]:
            row = c.execute(f"{select} WHERE j.id = ?", (job_id,)).fetchone()
            if row is not None:
                return [row]
            pattern = job_id.replace("\\", "").replace("%", "").replace("_", "") + "%"
            return c.execute(f"{select} WHERE j.id LIKE ? LIMIT 2", (pattern,)).fetchall()

        rows = await self.db.run(read)
        return dict(rows[0]) if len(rows) == 1 else None

    async def update_job(self, job_id: str, changes: dict[str, Any]) -> None:
        allowed_columns = {"prompt", "cron", "timezone", "phrase", "paused", "due_at", "status"}
        if not changes or not set(changes) <= allowed_columns:
            raise ValueError(f"cannot change {sorted(set(changes) - allowed_columns)}")
        columns = ", ".join(f"{name} = ?" for name in changes)
        await self.db.transaction(lambda c: c.execute(f"UPDATE scheduled_jobs SET {columns} WHERE id = ?", (*changes.values(), job_id)))
        self.jobs_changed.set()

    async def delete_job(self, job_id: str) -> bool:
        cursor = await self.db.transaction(lambda c: c.execute("DELETE FROM scheduled_jobs WHERE id = ?", (job_id,)))
        self.jobs_changed.set()
        return bool(cursor.rowcount)

    async def request_body(self, request_id: str) -> dict[str, Any] | None:
        """A logged request body, whole (``messages`` and ``tools``): a body logged as
        the messages it adds to an earlier request (``continues``, ``from``) is joined
        to the bodies it continues, and one without ``tools`` sent those of the body it
        continues. None if it, or one it continues, is not logged."""

        def read(conn: Any) -> dict[str, Any] | None:
            chain, wanted = [], request_id
            while wanted:
                row = conn.execute("SELECT request FROM llm_request_payloads WHERE request_id = ?", (wanted,)).fetchone()
                if row is None:
                    return None
                chain.append(json.loads(row[0]))
                wanted = chain[-1].get("continues")
            messages: list[Any] = []
            for body in reversed(chain):
                messages = messages[: body.get("from", 0)] + body["messages"]
            return {"messages": messages, "tools": next(body["tools"] for body in chain if "tools" in body)}

        return await self.db.run(read)

    async def log_payload(self, request_id: str, conversation_id: str, request: str, response: str | None) -> None:
        await self.db.run(lambda c: _insert_payload(c, request_id, conversation_id, request, response))


def _with_outbox(fn: Callable[[Any], T], snapshot: tuple[list[tuple[str, str]], list[str]]) -> Callable[[Any], T]:
    def write(conn: Any) -> T:
        result = fn(conn)
        RequestOutbox.write(conn, snapshot)
        return result

    return write


def _move_queued(conn: Any, frame: Frame) -> list[int]:
    """The conversation's queued messages into its history, oldest first; their ids."""
    rows = conn.execute(
        "SELECT id, content, idempotency_key, attachments FROM inbox WHERE conversation_id = ? ORDER BY id", (frame.conversation_id,)
    ).fetchall()
    ids = []
    for row in rows:
        conn.execute("DELETE FROM inbox WHERE id = ?", (row[0],))
        ids.append(
            conn.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, content, idempotency_key, attachments)"
                " VALUES (?, ?, 'user', ?, ?, ?)",
                (frame.conversation_id, frame.id, row[1], row[2], row[3]),
            ).lastrowid
        )
    if ids:
        conn.execute(f"UPDATE conversations SET updated_at = {NOW} WHERE id = ?", (frame.conversation_id,))
    return ids


def _untrusted_reason(stored: str | None) -> dict[str, Any] | None:
    """A stored outside-text source ({"kind", "values"}) read back; None for none."""
    try:
        source = json.loads(stored) if stored else None
    except ValueError:
        source = {"kind": "unknown", "values": {}}
    return source if isinstance(source, dict) or source is None else {"kind": "unknown", "values": {}}


def _insert_user_message(conn: Any, frame: Frame, text: str, key: str | None, attachments: str = "[]") -> int:
    cur = conn.execute(
        "INSERT INTO messages (conversation_id, frame_id, role, content, idempotency_key, attachments) VALUES (?, ?, 'user', ?, ?, ?)",
        (frame.conversation_id, frame.id, text, key, attachments),
    )
    conn.execute(f"UPDATE conversations SET updated_at = {NOW} WHERE id = ?", (frame.conversation_id,))
    return cur.lastrowid


def _finish_assistant(
    conn: Any, message_id: int, content: str, reasoning: str, model: str, status: str,
    calls: Sequence[tuple[str, str, str, str]], request_log: tuple[str, dict[str, Any], str] | None, running: int,
    results: Sequence[tuple[str, str]] = (), *, touch: bool = True, model_id: str | None = None,
) -> list[str]:
    """``finish_assistant``'s write; ``results``: each call's (status, result) when the
    calls already ran. ``touch`` False: the conversation's ``updated_at`` is left as it
    is (a round in the middle of a turn: its end moves it, and the row and its index
    are two pages fewer to encrypt and sync in a round's commit)."""
    row = conn.execute("SELECT conversation_id, frame_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    conn.execute(
        # ``model_id``: the catalog entry that answered (its label and provider; two
        # providers may serve one model name), NULL where none is known.
        "UPDATE messages SET content = ?, reasoning = ?, model = ?, model_id = ?, status = ? WHERE id = ?",
        (content, reasoning, model, model_id, status, message_id),
    )
    ids = []
    for seq, (model_call_id, name, arguments, restart) in enumerate(calls):
        call_status, result = results[seq] if results else ("running" if seq < running else "requested", None)
        values = (message_id, row[0], row[1], seq, name, arguments, call_status, restart, result, result_reason(result),
                  call_status in TERMINAL_CALL_STATES)
        # The model's id unless the file has it already (some models number their calls
        # from 0 every round); only a clash on the id is let pass, never another constraint.
        call_id = model_call_id if model_call_id and len(model_call_id) <= 64 else None
        if call_id is None or not conn.execute(INSERT_CALL + " ON CONFLICT (id) DO NOTHING", (call_id, *values)).rowcount:
            call_id = "call_" + new_id()
            conn.execute(INSERT_CALL, (call_id, *values))
        ids.append(call_id)
    if touch:
        conn.execute(f"UPDATE conversations SET updated_at = {NOW} WHERE id = ?", (row[0],))
    if request_log is not None:
        _insert_payload(conn, request_log[0], row[0], json.dumps(request_log[1]), request_log[2])
    return ids


INSERT_CALL = (
    "INSERT INTO tool_calls (id, message_id, conversation_id, frame_id, seq, name, arguments, status, restart, result, reason, finished_at)"
    f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN {NOW} END)"
)


def _call_on_the_wire(row: Any) -> dict[str, Any]:
    """A ``tool_calls`` row as the API gives it; ``reason``: a host-made error's code and
    values (``CodedResult``), as a message's."""
    return {**row, "result_code": result_code(row["result"]), "reason": json.loads(row["reason"]) if row["reason"] else None}


def _messages_on_the_wire(messages: list[dict[str, Any]], calls: Mapping[int, list[dict[str, Any]]]) -> None:
    """``messages`` rows as the API gives them (in place): their calls, the attachments
    and reason stored as JSON text made lists and objects, as the live event and the
    export give them; the search index's bookkeeping left out."""
    for message in messages:
        message["tool_calls"] = calls.get(message["id"], [])
        message.pop("indexed", None)
        message["attachments"] = parse_attachments(message.get("attachments"))
        if message.get("reason"):
            message["reason"] = json.loads(message["reason"])


def reason_json(code: str, values: Mapping[str, Any] | None = None) -> str:
    """Why a message failed, stored beside its text: a stable code and its values, which
    the member's screen words in the reader's language (``error.<code>``) after a reload
    as it does live; the text stays for the model's context and for older clients."""
    return json.dumps({"code": code, "values": dict(values or {})}, ensure_ascii=False)


def insert_trigger(conn: Any, frame: Frame, text: str, origin: str) -> int:
    """A hidden message the host writes for the model (seed 004 §4.5): in the model's
    history, never on the member's screen (``origin`` is not NULL)."""
    return conn.execute(
        "INSERT INTO messages (conversation_id, frame_id, role, content, origin) VALUES (?, ?, 'user', ?, ?)",
        (frame.conversation_id, frame.id, text, origin),
    ).lastrowid


def _next_round(conn: Any, placeholder: tuple[Any, ...]) -> list[int]:
    """The next round's rows: ``placeholder`` is (frame, model) or (frame, model,
    before), where ``before(conn)`` writes the messages that go ahead of the round's
    placeholder (a steer lane's trigger, seed 004 §4.4) and returns their ids. The
    placeholder's id is the last."""
    frame, model, *rest = placeholder
    ahead = list(rest[0](conn)) if rest and rest[0] is not None else []
    return ahead + [_insert_placeholder(conn, frame, model)]


def _insert_placeholder(conn: Any, frame: Frame, model: ModelChoice | str) -> int:
    """A round's streaming row, with the model it asks first and, given the catalog
    entry (a ``ModelChoice``), its id: a request a crash cuts is logged by the entry
    that bills it (``cut_requests``), where a model name alone is two providers'."""
    name, entry = (model, None) if isinstance(model, str) else (model.model, model.id)
    return conn.execute(
        "INSERT INTO messages (conversation_id, frame_id, role, status, model, model_id) VALUES (?, ?, 'assistant', 'streaming', ?, ?)",
        (frame.conversation_id, frame.id, name, entry),
    ).lastrowid


def _insert_payload(conn: Any, request_id: str, conversation_id: str, request: str, response: str | None) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO llm_request_payloads (request_id, conversation_id, request, response) VALUES (?, ?, ?, ?)",
        (request_id, conversation_id, request, response),
    )


#: The rows one catch-up transaction of the search index writes (``index_finished_messages``).
INDEX_BATCH = 200


def _index_messages(conn: Any, message_ids: Sequence[int]) -> None:
    """Put those of ``message_ids`` that are finished into the search index, in the
    caller's transaction (their text no longer changes once they stopped streaming; a
    streaming row is indexed by the commit that finishes it). Notes, summaries,
    continuation triggers and empty rows are only marked: search never shows them."""
    if not message_ids:
        return
    marks = ",".join("?" * len(message_ids))
    # One statement when nothing is searchable (a placeholder, a tool row): the rows it
    # marks come back, and only the member's and the assistant's words are inserted.
    marked = conn.execute(
        f"UPDATE messages SET indexed = 1 WHERE id IN ({marks}) AND indexed = 0 AND status != 'streaming'"
        " RETURNING id, content, conversation_id, role, origin",
        tuple(message_ids),
    ).fetchall()
    searchable = [(r[0], r[1], r[2]) for r in marked if r[3] in ("user", "assistant") and r[1] and r[4] is None]
    if searchable:
        conn.executemany("INSERT INTO messages_fts (rowid, content, conversation_id) VALUES (?, ?, ?)", searchable)


def _has_unindexed(conn: Any) -> bool:
    """Whether a finished message waits for the search index (``messages_unindexed``:
    only those and the few streaming rows are in it)."""
    return conn.execute("SELECT 1 FROM messages WHERE indexed = 0 AND status != 'streaming' LIMIT 1").fetchone() is not None


def _index_finished_batch(conn: Any) -> int:
    """Index up to ``INDEX_BATCH`` finished messages not in the search index yet; how many."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM messages WHERE indexed = 0 AND status != 'streaming' ORDER BY id LIMIT ?", (INDEX_BATCH,)
    )]
    _index_messages(conn, ids)
    return len(ids)


#: A message longer than this gets its search snippet from the piece of this size that
#: matches first, not from FTS5's ``snippet()`` over the whole message: that scores a
#: window at every match against every other match, so its cost grows with the square
#: of a message's matches — one message of "a " * 50000 (the longest a member may send)
#: made a search for "a" take 10 to 40 s. A piece holds at most a few thousand matches.
SNIPPET_PIECE = 4000


def _snippet(conn: Any, rowid: int, queries: Sequence[str]) -> str | None:
    """The snippet of message ``rowid`` around its best match of ``queries[0]`` (a long
    message: its first piece matching the first of ``queries`` any piece matches)."""
    content = conn.execute("SELECT length(content) FROM messages WHERE id = ?", (rowid,)).fetchone()
    if content is None or (content[0] or 0) <= SNIPPET_PIECE:
        snippet = conn.execute(
            "SELECT snippet(messages_fts, 0, ?, ?, '…', 12) FROM messages_fts WHERE messages_fts MATCH ? AND rowid = ?",
            (MATCH_OPENS, MATCH_CLOSES, queries[0], rowid),
        ).fetchone()
        return snippet[0] if snippet else None
    text = conn.execute("SELECT content FROM messages WHERE id = ?", (rowid,)).fetchone()[0]
    pieces = snippet_pieces(text)
    # The pieces are tokenized as the index is, in memory (never written anywhere): the
    # words of the member's file stay out of any file but it.
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute("CREATE VIRTUAL TABLE piece USING fts5(content, tokenize='unicode61 remove_diacritics 2')")
        scratch.executemany("INSERT INTO piece (rowid, content) VALUES (?, ?)", enumerate(pieces))
        for query in dict.fromkeys(queries):
            hit = scratch.execute(
                "SELECT rowid, snippet(piece, 0, ?, ?, '…', 12) FROM piece WHERE piece MATCH ? ORDER BY rowid LIMIT 1",
                (MATCH_OPENS, MATCH_CLOSES, query),
            ).fetchone()
            if hit is not None:
                index, snippet = hit
                return snippet if index == 0 or snippet.startswith("…") else "…" + snippet
    finally:
        scratch.close()
    return None


def snippet_pieces(text: str) -> list[str]:
    """``text`` cut into pieces of at most ``SNIPPET_PIECE`` characters, each at a space
    where there is one (a word cut in two would match as neither half)."""
    pieces: list[str] = []
    while len(text) > SNIPPET_PIECE:
        cut = text.rfind(" ", SNIPPET_PIECE // 2, SNIPPET_PIECE)
        cut = SNIPPET_PIECE if cut < 0 else cut + 1
        pieces.append(text[:cut])
        text = text[cut:]
    pieces.append(text)
    return pieces


def fts_words(text: str) -> list[str]:
    """A member's search words as FTS5 queries: each word quoted (no operator of FTS5's
    syntax can be typed by accident) and matched as a prefix. A word with "ss" or "ß"
    is its spellings with either, OR-ed ("strasse" finds "Straße", "größe" "Grösse"):
    the index folds accents (unicode61, remove_diacritics), not "ß"."""
    words = [w for w in text.replace("\x00", " ").split() if w.strip('"*')][:12]  # FTS5 refuses a NUL
    terms = []
    for word in words:
        quoted = ['"' + v.replace('"', '""') + '"*' for v in sharp_s_spellings(word)]
        terms.append(quoted[0] if len(quoted) == 1 else "(" + " OR ".join(quoted) + ")")
    return terms


#: Markdown's syntax in a search snippet, and what is left of it: the list showed a hit
#: in an answer as "# Hello Here is a **table**: | a | b | |---|---|…" (a newcomer
#: probe). Words stay: "2 * 3" and snake_case keep their marks, a cut link its text.
#: What is set aside before the syntax goes, kept as written: a code span's text
#: (`__init__` is not emphasis) and a backslash-escaped character (\* is a star).
_BACKTICKS = re.compile(r"`+")
#: Math as the chat draws it (web/lib/markdown.js): $$…$$, \[…\], $…$ (no space inside
#: its ends, no digit after: "$5 and $10" is money) and \(…\). Its TeX is set aside as
#: written, its delimiters go: read as Markdown, "$$\int_0^1 x^2\,dx$$" became
#: "$$\int_0^1 x^2,dx$$" (the TeX's thin space taken for an escaped comma). Bounded
#: lengths: each "$" or "\[" scans at most that far for its end.
_MATH = re.compile(
    r"\$\$([^$]{1,500}?)(?:\$\$|(?=…$))"  # or up to a snippet's end that cut it
    r"|\\\[((?:[^\\\]]|\\[^\]]){1,500}?)\\\]"
    r"|\$(?!\s)((?:\\.|[^\\\n$]){1,300}?)(?<!\s)\$(?!\d)"
    r"|\\\(((?:\\.|[^\\\n]){1,300}?)\\\)"
)
#: Not "\\," "\\:" "\\;" "\\{" "\\}": Markdown allows them, but prose needs none of them, and
#: in TeX cut from its math by a snippet's end they are spaces and braces.
_ESCAPED = re.compile(r"\\([!-+\-./<-@\[-`|~])")
_SET_ASIDE = re.compile(r"\x00(\d+)\x01")
_MARKDOWN_SYNTAX = tuple((re.compile(pattern), replacement) for pattern, replacement in (
    # a link or an image: its words ("[" not in them: a scan from each "[" to the line's
    # end for its "]" cost the square of a line of "[")
    (r"!?\[([^\[\]\n]*)\]\([^)\n]*\)?", r"\1"),
    (r"\[([^\[\]\n]*)$", r"\1"),  # a link the snippet's end cut
    (r"^([^\[\n]*?)\]\([^)\s]*\)?", r"\1"),  # a link whose start the snippet's start cut
    # a heading's, quote's or list item's mark, and a task's [x] / [ ] after the last
    (r"(?m)^[ \t]{0,3}(?:#{1,6}|>+|(?:[-*+]|\d{1,9}[.)])(?:[ \t]+\[[ xX]\])?)[ \t]+", ""),
    (r"\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*\|?", " "),  # a table's rule row, a rule
    (r"\|", " "),  # table cells
    (r"`+|\*\*|~~|\$\$", ""),  # a code span or display math the snippet cut, strong, struck
    # emphasis: * or _ / __ at a word's edge, never inside one (snake_case, my__name);
    # a search's mark of a matched word (MATCH_OPENS, MATCH_CLOSES) is inside it
    (r"(?<![\w*])(?<![\w*][\ue000\ue001])\*(?=\S)|(?<=\S)\*(?![\w*])(?![\ue000\ue001][\w*])"
     r"|(?<!\w)(?<!\w[\ue000\ue001])__?(?=[^\s_])|(?<=[^\s_])__?(?!\w)(?![\ue000\ue001]\w)", ""),
))
#: A code fence's line (``` or ~~~ and its info string, "```python"): gone first, or its
#: backticks would read as a code span.
_FENCE_LINE = re.compile(r"(?m)^[ \t]{0,3}(?:`{3,}[^`\n]*|~{3,}[^\n]*)$")
_SPACES = re.compile(r"\s+")


#: How much of its text ``plain_words`` reads: a snippet or a title needs a line's words,
#: and a message may hold 100,000 characters. Some of the patterns below cost more than
#: their text's length on some inputs ("[" repeated: each scans to the line's end for
#: its "]"), and a title is made on the event loop.
PLAIN_WORDS_CHARS = 2000


#: Where FTS5's ``snippet`` says a matched word begins and ends: characters of Unicode's
#: private use area, which no keyboard types, read through ``plain_words`` like the
#: words they hold (a mark inside a code span or math stays with its text).
MATCH_OPENS, MATCH_CLOSES = "\ue000", "\ue001"


def marked_words(snippet: str) -> list[str]:
    """A snippet FTS5 marked (``MATCH_OPENS``/``MATCH_CLOSES``) as the words a reader sees,
    split at the marks: even entries the text between matches, odd ones a matched word.
    A mark left alone (its pair cut with the syntax around it) is dropped."""
    parts, current, inside = [], [], False
    for piece in re.split(f"([{MATCH_OPENS}{MATCH_CLOSES}])", plain_words(snippet)):
        if piece == MATCH_OPENS and not inside or piece == MATCH_CLOSES and inside:
            parts.append("".join(current))
            current, inside = [], not inside
        elif piece not in (MATCH_OPENS, MATCH_CLOSES):
            current.append(piece)
    parts.append("".join(current))
    if inside:  # opened, never closed: the rest is text
        parts[-2:] = [parts[-2] + parts[-1]]
    return parts


def title_from(text: str) -> str:
    """A new conversation's title from its first message: the words a reader sees."""
    return (plain_words(text) or " ".join(text[:PLAIN_WORDS_CHARS].split()))[:60]


def plain_words(markdown: str) -> str:
    """A snippet of Markdown (its first ``PLAIN_WORDS_CHARS``) as the words a reader sees
    (one line)."""
    markdown = markdown[:PLAIN_WORDS_CHARS]
    verbatim: list[str] = []
    text = _set_aside_verbatim(_FENCE_LINE.sub("", markdown.replace("\x00", "")), verbatim)
    for pattern, replacement in _MARKDOWN_SYNTAX:
        text = pattern.sub(replacement, text)
    return _SPACES.sub(" ", _SET_ASIDE.sub(lambda match: verbatim[int(match[1])], text)).strip()


def _set_aside_verbatim(text: str, verbatim: list[str]) -> str:
    """``text`` with its code spans' text, its math's TeX and its backslash-escaped
    characters set aside into ``verbatim`` (``\x00<n>\x01`` where each stood). A code span is a run of
    backticks, the text after it on its line, and the next run of as many (CommonMark);
    escapes inside one are its text. Linear in the text: a regular expression searching
    from each backtick for a closing run held the event loop for 7 s on 5 KB of runs of
    1, 2, 3… backticks (a load probe), and for minutes on 100 KB."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    closer: list[int | None] = [None] * len(runs)
    lines, previous_end = [], 0
    for start, end in runs:
        lines.append((lines[-1] if lines else 0) + text.count("\n", previous_end, start))
        previous_end = end
    next_of: dict[tuple[int, int], int] = {}  # (line, length) -> the next run's index
    for index in range(len(runs) - 1, -1, -1):
        start, end = runs[index]
        closer[index] = next_of.get((lines[index], end - start))
        next_of[(lines[index], end - start)] = index

    out: list[str] = []

    def set_aside(before_end: int, kept: str, resume: int) -> int:
        out.append(text[position:before_end])
        verbatim.append(kept)
        out.append(f"\x00{len(verbatim) - 1}\x01")
        return resume

    position, index = 0, 0
    escape = _ESCAPED.search(text)
    math = _MATH.search(text)
    while True:
        while index < len(runs) and runs[index][0] < position:
            index += 1  # inside an escape's or a span's text: no run starts there
        if escape is not None and escape.start() < position:
            escape = _ESCAPED.search(text, position)
        if math is not None and math.start() < position:
            math = _MATH.search(text, position)
        run = runs[index] if index < len(runs) else None
        # Math first where both start ("\[" is an escape too), an escape before it ("\$5").
        if math is not None and (escape is None or math.start() <= escape.start()) and (run is None or math.start() < run[0]):
            position = set_aside(math.start(), next(group for group in math.groups() if group is not None), math.end())
        elif escape is not None and (run is None or escape.start() < run[0]):
            position = set_aside(escape.start(), escape[1], escape.end())
        elif run is None:
            break
        elif (close := closer[index]) is not None:
            position = set_aside(run[0], text[run[1]:runs[close][0]], runs[close][1])
        else:  # no run of its length closes it on its line: its backticks are text
            out.append(text[position:run[1]])
            position = run[1]
    out.append(text[position:])
    return "".join(out)


def _last_user_message(conn: Any, frame: Frame) -> int | None:
    """The id of the frame's last member message in the version shown."""
    return conn.execute("SELECT max(id) FROM messages WHERE frame_id = ? AND role = 'user' AND variant = 0", (frame.id,)).fetchone()[0]


def _failed_exchange(conn: Any, frame: Frame) -> list[int]:
    """The member's last message and its failed end (``_failed_end``); empty without one."""
    failure = _failed_end(conn, frame)
    return [_last_user_message(conn, frame), *failure] if failure else []


def _move_to_end(conn: Any, ids: list[int]) -> list[int]:
    """Rows (without tool calls) written again at the end of the file's messages, in
    order, the originals deleted: their new ids. Versions branching off one of them
    follow it; the search index takes the copies as new rows."""
    columns = [c[1] for c in conn.execute("PRAGMA table_info(messages)") if c[1] not in ("id", "indexed")]
    names = ", ".join(columns)
    moved = []
    for old_id in ids:
        row = conn.execute(f"SELECT {names} FROM messages WHERE id = ?", (old_id,)).fetchone()
        conn.execute("DELETE FROM messages WHERE id = ?", (old_id,))  # first: its idempotency key is unique
        new_id = conn.execute(f"INSERT INTO messages ({names}) VALUES ({', '.join('?' * len(columns))})", tuple(row)).lastrowid
        conn.execute("UPDATE messages SET branch_point = ? WHERE branch_point = ?", (new_id, old_id))
        moved.append(new_id)
    return moved


def _failed_end(conn: Any, frame: Frame) -> list[int]:
    """The rows of a failed end of the frame's history, after the member's last message:
    an answer that failed without calling a tool, with the notes and the cut-off answers
    before it. Empty when the history does not end in one."""
    last_user = _last_user_message(conn, frame)
    if last_user is None:
        return []
    after = conn.execute(
        "SELECT id, role, status FROM messages WHERE frame_id = ? AND id > ? AND variant = 0 ORDER BY id", (frame.id, last_user)
    ).fetchall()
    # A failure, and what led to it: answers cut off and asked for again (recovery's
    # notes), none of which called a tool. The failed answer may be followed by
    # its fallback notes (written after its row, which exists before the request),
    # or be an error note itself (an earlier version's).
    answers = [r for r in after if r[1] == "assistant"]
    failed = bool(after) and (after[-1][2] == "error" or (bool(answers) and answers[-1][2] == "error"))
    if not after or not failed or any(
        r[1] not in ("assistant", "note") or (r[1] == "assistant" and r[2] not in ("error", "interrupted")) for r in after
    ):
        return []
    ids = [r[0] for r in after]
    if conn.execute(f"SELECT 1 FROM tool_calls WHERE message_id IN ({','.join('?' * len(ids))}) LIMIT 1", ids).fetchone():
        return []
    return ids


def _branch(conn: Any, frame: Frame, point: int, first: int, *, allow_empty: bool = False, answer_only: bool = False) -> bool:
    """Keep the rows shown from ``first`` on as the next earlier version at the branch
    point ``point`` (they are out of the history from now on). False when there are none
    (unless ``allow_empty``), one is still streaming, or a summary of a compaction is
    among them (what it summarised cannot be taken back) — except, with ``answer_only``
    (the rows answer one member message, none of them a member's message), a summary
    made after that answer: it summarised the answer being set aside, so it goes with
    it, and the history opens at the summary before it again (an automatic compaction
    follows every answer past the limit: Regenerate would never work after one)."""
    rows = _branch_rows(conn, frame, first, answer_only=answer_only)
    if not rows:
        return rows is not None and allow_empty
    number = conn.execute("SELECT coalesce(max(variant), 0) + 1 FROM messages WHERE frame_id = ?", (frame.id,)).fetchone()[0]
    ids = [r[0] for r in rows]
    conn.execute(f"UPDATE messages SET variant = ?, branch_point = ? WHERE id IN ({','.join('?' * len(ids))})", (number, point, *ids))
    return True


def _branch_rows(conn: Any, frame: Frame, first: int, *, answer_only: bool = False) -> list[Any] | None:
    """The rows ``_branch`` would set aside from ``first`` on; None when it may not."""
    rows = conn.execute("SELECT id, status, role FROM messages WHERE frame_id = ? AND id >= ? AND variant = 0", (frame.id, first)).fetchall()
    summaries_go = answer_only and not any(r[2] == "user" for r in rows)
    if any(r[1] == "streaming" or (r[2] == "summary" and not summaries_go) for r in rows):
        return None  # a summary (compaction) covers these rows: they are history now
    return rows


def _with_calls(conn: Any, messages: Any, calls: Any) -> list[Row]:
    """Message rows with their tool calls attached, frozen."""
    by_message: dict[int, list[Row]] = {}
    for r in calls:
        by_message.setdefault(r["message_id"], []).append(MappingProxyType(dict(r)))
    rows = []
    for r in messages:
        message = dict(r)
        message["tool_calls"] = tuple(by_message.get(message["id"], ()))
        rows.append(MappingProxyType(message))
    return rows


def _reread(conn: Any, message_ids: Sequence[int]) -> list[Row]:
    """Rows just written, re-read in the writing transaction, for ``_splice``."""
    if not message_ids:
        return []
    marks = ",".join("?" * len(message_ids))
    messages = conn.execute(f"SELECT * FROM messages WHERE id IN ({marks}) ORDER BY id", tuple(message_ids)).fetchall()
    # Calls hang off the assistant's rows only (``_finish_assistant``): a member's
    # message or a note asks no second query.
    asked = [r["id"] for r in messages if r["role"] == "assistant"]
    marks = ",".join("?" * len(asked))
    calls = conn.execute(f"SELECT * FROM tool_calls WHERE message_id IN ({marks}) ORDER BY message_id, seq", asked) if asked else ()
    return _with_calls(conn, messages, calls)


def _message_of_call(conn: Any, call_id: str) -> list[int]:
    row = conn.execute("SELECT message_id FROM tool_calls WHERE id = ?", (call_id,)).fetchone()
    return [row[0]] if row else []


def _end_delegations(conn: Any, conversation_id: str, why: str) -> None:
    """A given-up turn's open sub-agent frames fail, their runs are interrupted, and
    every call still waiting (the ``execute_task`` that spawned them) is interrupted:
    nothing of the turn is taken up again at the next start."""
    frames = [r[0] for r in conn.execute(
        "SELECT id FROM frames WHERE conversation_id = ? AND depth > 0 AND status = 'open'", (conversation_id,)
    )]
    if not frames:
        return
    marks = ",".join("?" * len(frames))
    conn.execute(
        f"UPDATE frames SET status = 'failed', result = 'interrupted', closed_at = {NOW} WHERE id IN ({marks})", frames
    )
    conn.execute(
        f"UPDATE agent_runs SET status = 'interrupted', error = ?, finished_at = {NOW}, revision = revision + 1"
        f" WHERE frame_id IN ({marks}) AND status IN ('queued', 'running', 'waiting_delegates')", (why, *frames),
    )
    end_calls(conn, "conversation_id", conversation_id, why)


def end_calls(conn: Any, column: str, key: str, result: str) -> None:
    """Recovery: every call not finished in a frame (``column`` ``frame_id``) or a whole
    conversation (``conversation_id``) that nothing takes up again — a given-up turn's,
    a sub-agent run's frame closed as interrupted (``subagents.runs.recover``) — ends
    interrupted with ``result``, and the approvals they waited on expire: none is left
    running, or asking, for ever."""
    if column not in ("frame_id", "conversation_id"):
        raise ValueError(column)
    conn.execute(
        f"UPDATE approvals SET status = 'expired', resolved_at = {NOW} WHERE status = 'pending' AND tool_call_id IN"
        f" (SELECT id FROM tool_calls WHERE {column} = ?)", (key,),
    )
    conn.execute(
        f"UPDATE tool_calls SET status = 'interrupted', result = ?, finished_at = {NOW}"
        f" WHERE {column} = ? AND status IN ('requested', 'awaiting_approval', 'running')", (result, key),
    )

"""The conversation store over a member's own file: every state transition of the
loop is one write here, made before it is announced, so a crash loses RAM and never
truth (seed 001, "Restart recovery")."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from skald_host.core.storage import Database

TERMINAL_CALL_STATES = frozenset({"done", "error", "denied", "cancelled", "interrupted"})
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


def _call(row: Any) -> CallRow:
    return CallRow(row["id"], row["message_id"], row["frame_id"], row["seq"], row["name"], row["arguments"], row["status"], row["result"], row["restart"])


class ConversationStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- conversations ------------------------------------------------------------

    async def create_conversation(self, agent_id: str, *, source: str = "web", title: str = "") -> tuple[str, str]:
        conversation_id, frame_id = new_id(), new_id()

        def write(conn: Any) -> None:
            conn.execute(
                "INSERT INTO conversations (id, source, agent_id, title) VALUES (?, ?, ?, ?)",
                (conversation_id, source, agent_id, title),
            )
            conn.execute(
                "INSERT INTO frames (id, conversation_id, agent_id, depth) VALUES (?, ?, ?, 0)",
                (frame_id, conversation_id, agent_id),
            )

        await self.db.transaction(write)
        return conversation_id, frame_id

    async def conversation(self, conversation_id: str) -> dict[str, Any] | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone())
        return dict(row) if row else None

    async def conversations(self, search: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        def read(conn: Any) -> list[dict[str, Any]]:
            if search:
                pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
                rows = conn.execute(
                    "SELECT * FROM conversations WHERE title LIKE ? ESCAPE '\\' ORDER BY updated_at DESC LIMIT ?",
                    (pattern, limit),
                )
            else:
                rows = conn.execute("SELECT * FROM conversations ORDER BY updated_at DESC LIMIT ?", (limit,))
            return [dict(r) for r in rows]

        return await self.db.run(read)

    async def rename(self, conversation_id: str, title: str) -> bool:
        return bool(
            await self.db.transaction(
                lambda c: c.execute(f"UPDATE conversations SET title = ?, updated_at = {NOW} WHERE id = ?", (title, conversation_id)).rowcount
            )
        )

    async def delete(self, conversation_id: str) -> bool:
        return bool(await self.db.transaction(lambda c: c.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,)).rowcount))

    async def root_frame(self, conversation_id: str) -> Frame:
        row = await self.db.run(
            lambda c: c.execute("SELECT * FROM frames WHERE conversation_id = ? AND depth = 0", (conversation_id,)).fetchone()
        )
        return _frame(row)

    async def frame(self, frame_id: str) -> Frame:
        return _frame(await self.db.run(lambda c: c.execute("SELECT * FROM frames WHERE id = ?", (frame_id,)).fetchone()))

    async def open_frames(self, conversation_id: str) -> list[Frame]:
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT * FROM frames WHERE conversation_id = ? AND status = 'open' AND depth > 0 ORDER BY depth DESC, created_at",
                (conversation_id,),
            ).fetchall()
        )
        return [_frame(r) for r in rows]

    async def subframe_of(self, call_id: str) -> Frame | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM frames WHERE spawned_by_call_id = ?", (call_id,)).fetchone())
        return _frame(row) if row else None

    async def open_subframe(self, caller: Frame, call_id: str, agent_id: str) -> Frame:
        frame_id = new_id()
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO frames (id, conversation_id, caller_frame_id, spawned_by_call_id, agent_id, depth) VALUES (?, ?, ?, ?, ?, ?)",
                (frame_id, caller.conversation_id, caller.id, call_id, agent_id, caller.depth + 1),
            )
        )
        return await self.frame(frame_id)

    async def close_frame(self, frame_id: str, status: str, result: str) -> None:
        await self.db.transaction(
            lambda c: c.execute(
                f"UPDATE frames SET status = ?, result = ?, closed_at = {NOW} WHERE id = ?", (status, result, frame_id)
            )
        )

    # -- messages -------------------------------------------------------------------

    async def add_member_message(
        self, frame: Frame, text: str, key: str | None, *, queued: bool, attachments: str = "[]"
    ) -> dict[str, Any]:
        """Store a member's message — in the conversation, or in its inbox while a turn
        runs — unless its idempotency key is taken. The check and the insert are one
        transaction: two retries racing each other (check G1) must store one message and
        acknowledge both, not fail the second on the UNIQUE index."""

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
            return {"message_id": message_id, "conversation_id": frame.conversation_id, "queued": False, "duplicate": False}

        return await self.db.transaction(write)

    async def add_user_message(self, frame: Frame, text: str, key: str | None) -> int:
        return await self.db.transaction(lambda conn: _insert_user_message(conn, frame, text, key))

    async def drain_inbox(self, frame: Frame) -> list[int]:
        """Move queued messages into the conversation, oldest first, in one transaction."""

        def move(conn: Any) -> list[int]:
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

        return await self.db.transaction(move)

    async def start_assistant(self, frame: Frame, model: str) -> int:
        """The streaming placeholder: its checkpoints keep partial text across a crash."""
        return await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, status, model) VALUES (?, ?, 'assistant', 'streaming', ?)",
                (frame.conversation_id, frame.id, model),
            ).lastrowid
        )

    async def checkpoint(self, message_id: int, content: str, reasoning: str) -> None:
        await self.db.run(
            lambda c: c.execute(
                "UPDATE messages SET content = ?, reasoning = ? WHERE id = ? AND status = 'streaming'", (content, reasoning, message_id)
            )
        )

    async def finish_assistant(
        self,
        message_id: int,
        *,
        content: str,
        reasoning: str,
        model: str,
        status: str = "complete",
        calls: list[tuple[str, str, str, str]] = (),  # type: ignore[assignment]
    ) -> list[str]:
        """The round's authoritative result and its tool calls, in one transaction; call
        ids are allocated here, in call order."""

        def write(conn: Any) -> list[str]:
            row = conn.execute("SELECT conversation_id, frame_id FROM messages WHERE id = ?", (message_id,)).fetchone()
            conn.execute(
                "UPDATE messages SET content = ?, reasoning = ?, model = ?, status = ? WHERE id = ?",
                (content, reasoning, model, status, message_id),
            )
            ids = []
            for seq, (model_call_id, name, arguments, restart) in enumerate(calls):
                call_id = model_call_id if model_call_id and len(model_call_id) <= 64 and not _call_exists(conn, model_call_id) else "call_" + new_id()
                conn.execute(
                    "INSERT INTO tool_calls (id, message_id, conversation_id, frame_id, seq, name, arguments, status, restart)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, 'requested', ?)",
                    (call_id, message_id, row[0], row[1], seq, name, arguments, restart),
                )
                ids.append(call_id)
            conn.execute(f"UPDATE conversations SET updated_at = {NOW} WHERE id = ?", (row[0],))
            return ids

        return await self.db.transaction(write)

    async def add_note(self, frame: Frame, text: str, status: str = "complete") -> int:
        """A message the host writes for the member's eyes (a notification, an error):
        shown in the conversation, never sent to the model, never ending a round."""
        return await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, content, status) VALUES (?, ?, 'note', ?, ?)",
                (frame.conversation_id, frame.id, text, status),
            ).lastrowid
        )

    async def mark_interrupted_streams(self) -> int:
        return await self.db.transaction(
            lambda c: c.execute("UPDATE messages SET status = 'interrupted' WHERE status = 'streaming'").rowcount
        )

    async def add_summary(self, frame: Frame, text: str) -> int:
        return await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO messages (conversation_id, frame_id, role, content) VALUES (?, ?, 'summary', ?)",
                (frame.conversation_id, frame.id, text),
            ).lastrowid
        )

    # -- tool calls -------------------------------------------------------------------

    async def call(self, call_id: str) -> CallRow | None:
        row = await self.db.run(lambda c: c.execute("SELECT * FROM tool_calls WHERE id = ?", (call_id,)).fetchone())
        return _call(row) if row else None

    async def calls_of(self, message_id: int) -> list[CallRow]:
        rows = await self.db.run(lambda c: c.execute("SELECT * FROM tool_calls WHERE message_id = ? ORDER BY seq", (message_id,)).fetchall())
        return [_call(r) for r in rows]

    async def set_call(self, call_id: str, status: str, result: str | None = None) -> None:
        finished = status in TERMINAL_CALL_STATES

        def write(conn: Any) -> None:
            conn.execute(
                f"UPDATE tool_calls SET status = ?, result = COALESCE(?, result), finished_at = CASE WHEN ? THEN {NOW} ELSE finished_at END"
                " WHERE id = ?",
                (status, result, finished, call_id),
            )

        await self.db.transaction(write)

    async def history(self, frame_id: str) -> list[dict[str, Any]]:
        """A frame's messages with their tool calls, oldest first, from its latest
        summary on (compaction)."""

        def read(conn: Any) -> list[dict[str, Any]]:
            start = conn.execute(
                "SELECT max(id) FROM messages WHERE frame_id = ? AND role = 'summary'", (frame_id,)
            ).fetchone()[0] or 0
            messages = [
                dict(r)
                for r in conn.execute(
                    "SELECT * FROM messages WHERE frame_id = ? AND id >= ? AND role != 'note' ORDER BY id", (frame_id, start)
                )
            ]
            calls: dict[int, list[dict[str, Any]]] = {}
            for r in conn.execute("SELECT * FROM tool_calls WHERE frame_id = ? AND message_id >= ? ORDER BY message_id, seq", (frame_id, start)):
                calls.setdefault(r["message_id"], []).append(dict(r))
            for message in messages:
                message["tool_calls"] = calls.get(message["id"], [])
            return messages

        return await self.db.run(read)

    async def transcript(self, conversation_id: str) -> list[dict[str, Any]]:
        """The root frame's messages for the member's screen (every status shown)."""
        frame = await self.root_frame(conversation_id)

        def read(conn: Any) -> list[dict[str, Any]]:
            messages = [dict(r) for r in conn.execute("SELECT * FROM messages WHERE frame_id = ? ORDER BY id", (frame.id,))]
            calls: dict[int, list[dict[str, Any]]] = {}
            for r in conn.execute("SELECT * FROM tool_calls WHERE frame_id = ? ORDER BY message_id, seq", (frame.id,)):
                calls.setdefault(r["message_id"], []).append(dict(r))
            for message in messages:
                message["tool_calls"] = calls.get(message["id"], [])
                message.pop("idempotency_key", None)
            return messages

        return await self.db.run(read)

    async def queued(self, conversation_id: str) -> list[dict[str, Any]]:
        rows = await self.db.run(
            lambda c: c.execute("SELECT id, content, created_at FROM inbox WHERE conversation_id = ? ORDER BY id", (conversation_id,)).fetchall()
        )
        return [dict(r) for r in rows]

    # -- approvals ----------------------------------------------------------------------

    async def request_approval(self, call_id: str, conversation_id: str, tool: str, args_hash: str, expires_at: str) -> str:
        approval_id = new_id()

        def write(conn: Any) -> None:
            conn.execute(
                "INSERT INTO approvals (id, conversation_id, tool_call_id, tool, args_hash, status, expires_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
                (approval_id, conversation_id, call_id, tool, args_hash, expires_at),
            )
            conn.execute("UPDATE tool_calls SET status = 'awaiting_approval' WHERE id = ?", (call_id,))

        await self.db.transaction(write)
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
        """pending → approved/denied/expired, once: a second resolution changes nothing."""
        return bool(
            await self.db.transaction(
                lambda c: c.execute(
                    f"UPDATE approvals SET status = ?, resolved_at = {NOW} WHERE id = ? AND status = 'pending'", (status, approval_id)
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
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT a.*, t.arguments FROM approvals a JOIN tool_calls t ON t.id = a.tool_call_id WHERE a.status = 'pending' ORDER BY a.created_at"
            ).fetchall()
        )
        return [dict(r) for r in rows]

    # -- scheduled prompts -----------------------------------------------------------------

    async def schedule(self, conversation_id: str, prompt: str, due_at: str) -> str:
        job_id = new_id()
        await self.db.transaction(
            lambda c: c.execute(
                "INSERT INTO scheduled_jobs (id, conversation_id, prompt, due_at) VALUES (?, ?, ?, ?)", (job_id, conversation_id, prompt, due_at)
            )
        )
        return job_id

    async def due_jobs(self, now_iso: str) -> list[dict[str, Any]]:
        """Due jobs, including any left 'running': a crash between marking a job running
        and storing its prompt would otherwise lose it for good. Delivering one twice is
        harmless, the prompt's idempotency key (``job:<id>``) stores it once."""
        rows = await self.db.run(
            lambda c: c.execute(
                "SELECT * FROM scheduled_jobs WHERE status IN ('pending', 'running') AND due_at <= ? ORDER BY due_at", (now_iso,)
            ).fetchall()
        )
        return [dict(r) for r in rows]

    async def set_job(self, job_id: str, status: str) -> None:
        await self.db.transaction(
            lambda c: c.execute(f"UPDATE scheduled_jobs SET status = ?, finished_at = {NOW} WHERE id = ?", (status, job_id))
        )

    async def log_payload(self, request_id: str, conversation_id: str, request: str, response: str | None) -> None:
        await self.db.run(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO llm_request_payloads (request_id, conversation_id, request, response) VALUES (?, ?, ?, ?)",
                (request_id, conversation_id, request, response),
            )
        )


def _insert_user_message(conn: Any, frame: Frame, text: str, key: str | None, attachments: str = "[]") -> int:
    cur = conn.execute(
        "INSERT INTO messages (conversation_id, frame_id, role, content, idempotency_key, attachments) VALUES (?, ?, 'user', ?, ?, ?)",
        (frame.conversation_id, frame.id, text, key, attachments),
    )
    conn.execute(f"UPDATE conversations SET updated_at = {NOW} WHERE id = ?", (frame.conversation_id,))
    return cur.lastrowid


def _call_exists(conn: Any, call_id: str) -> bool:
    return conn.execute("SELECT 1 FROM tool_calls WHERE id = ?", (call_id,)).fetchone() is not None

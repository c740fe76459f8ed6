"""The conversation review's view of a subject's history (seed 000 "The conversation
review"): what was said in a window, as prose, never what was done.

Four filters, each against a specific way the result would be wrong: ephemeral
conversations out (a pass would read the transcript its previous pass was given and
report on itself), sub-agent frames out (``depth = 0``: machine-to-machine),
machinery-injected turns out (notes, summaries, scheduled prompts, and the hidden
triggers the host writes as user rows: a background result's continuation, a steer
signal; ``insert_trigger`` marks those with an ``origin``, and read as the member's they
would put the host's words and a helper's result in the member's mouth), empty rows out (an assistant row that was only a tool call). Tool calls are absent
by construction: they live in ``tool_calls``, which this never reads.
"""

from __future__ import annotations

from typing import Any

from skald_host.core.schedules import SCHEDULED_KEY

#: The English marker scheduled prompts carried before it followed the member's
#: language; such rows also have a job key, but a review window may reach older ones.
LEGACY_SCHEDULED_PREFIX = "[Scheduled] "

WINDOW_SQL = """
SELECT m.id, m.conversation_id, m.role, m.content, m.created_at, c.title
FROM messages m
JOIN frames f ON f.id = m.frame_id
JOIN conversations c ON c.id = m.conversation_id
WHERE c.ephemeral = 0
  AND f.depth = 0
  AND m.role IN ('user', 'assistant')
  AND m.variant = 0
  AND m.status IN ('complete', 'interrupted')
  AND m.origin IS NULL
  AND NOT (m.role = 'user' AND (substr(coalesce(m.idempotency_key, ''), 1, ?) = ? OR substr(m.content, 1, ?) = ?))
  AND trim(m.content) <> ''
  AND m.created_at >= ? AND m.created_at < ?
ORDER BY c.created_at, m.conversation_id, m.id
"""


def conversation_window(conn: Any, start: str, end: str) -> list[dict[str, Any]]:
    """The messages of ``[start, end)`` (ISO, UTC) that a review may read."""
    return [dict(r) for r in conn.execute(
        WINDOW_SQL, (len(SCHEDULED_KEY), SCHEDULED_KEY, len(LEGACY_SCHEDULED_PREFIX), LEGACY_SCHEDULED_PREFIX, start, end)
    )]


def render(rows: list[dict[str, Any]], subject_name: str) -> str:
    """Prose grouped by conversation: a dialogue read as a dialogue."""
    parts: list[str] = []
    current = None
    for row in rows:
        if row["conversation_id"] != current:
            current = row["conversation_id"]
            title = row["title"] or "untitled"
            parts.append(f"\n### Conversation: {title}\n")
        speaker = subject_name if row["role"] == "user" else "Assistant"
        parts.append(f"[{row['created_at'][:16].replace('T', ' ')} UTC] {speaker}: {row['content'].strip()}")
    return "\n".join(parts).strip()

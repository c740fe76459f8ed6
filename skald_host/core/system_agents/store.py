"""The scheduler's rows, as functions over a connection (each runs on its file's thread).

Owner file (the acting member's): ``system_agent_state`` (the attempt marker, due-ness),
``system_agent_runs`` (the run log, theirs alone), ``reports`` (their own). Registry:
``supervision`` (the edges), ``system_agent_coverage`` (per-subject watermarks),
``system_agent_user_settings`` (per-member intervals), an instance-scope agent's last
attempt (in ``config``: one for the whole server, whichever admin acted) and ``reports`` for supervisors
and admins. Nothing here reads contents into system.db: a registry report is written
for readers who may see it (seed 001 "Reports").
"""

from __future__ import annotations

import json
import uuid
from typing import Any

# -- owner: attempt state and memo -------------------------------------------------------


#: A run's error when a stop (or a crash) cut it off.
INTERRUPTED = "interrupted: the server stopped during the run"


def last_attempt(conn: Any, agent_id: str) -> str | None:
    """When the agent's pass was last attempted (due again an interval later), or None:
    never, or its last run was cut off by a stop (a row left ``running``) and is owed
    now rather than an interval later. Once: a run cut off twice in a row (a server
    that dies in it) waits for its interval like any other, billing nothing more."""
    if owed_after_a_stop(conn, agent_id):
        return None
    row = conn.execute("SELECT last_attempt_at FROM system_agent_state WHERE agent_id = ?", (agent_id,)).fetchone()
    return row[0] if row else None


def owed_after_a_stop(conn: Any, agent_id: str) -> bool:
    """This file holds a run of the agent a stop cut off (a row left ``running``), and
    the run before it was not cut off too: the pass is owed now."""
    if not conn.execute("SELECT 1 FROM system_agent_runs WHERE agent_id = ? AND status = 'running' LIMIT 1", (agent_id,)).fetchone():
        return False
    before = conn.execute(
        "SELECT error FROM system_agent_runs WHERE agent_id = ? AND status != 'running' ORDER BY started_at DESC LIMIT 1", (agent_id,)
    ).fetchone()
    return before is None or before[0] != INTERRUPTED


def _instance_attempt_key(agent_id: str) -> str:
    return f"system_agent_last_attempt:{agent_id}"


def instance_last_attempt(conn: Any, agent_id: str) -> str | None:
    """Registry: when an instance-scope agent's pass was last attempted, by whichever
    admin was acting (a timestamp, no content), or None if no pass recorded it here."""
    row = conn.execute("SELECT value FROM config WHERE key = ?", (_instance_attempt_key(agent_id),)).fetchone()
    if row is None:
        return None
    value = json.loads(row[0])
    return value if isinstance(value, str) else None


def mark_instance_attempt(conn: Any, agent_id: str, at: str) -> None:
    conn.execute(
        "INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (_instance_attempt_key(agent_id), json.dumps(at)),
    )


def mark_attempt(conn: Any, agent_id: str, at: str) -> None:
    conn.execute(
        "INSERT INTO system_agent_state (agent_id, last_attempt_at) VALUES (?, ?)"
        " ON CONFLICT (agent_id) DO UPDATE SET last_attempt_at = excluded.last_attempt_at",
        (agent_id, at),
    )


def memo(conn: Any, agent_id: str) -> dict[str, Any]:
    row = conn.execute("SELECT memo FROM system_agent_state WHERE agent_id = ?", (agent_id,)).fetchone()
    return json.loads(row[0]) if row else {}


def set_memo(conn: Any, agent_id: str, values: dict[str, Any], at: str) -> None:
    conn.execute(
        "INSERT INTO system_agent_state (agent_id, last_attempt_at, memo) VALUES (?, ?, ?)"
        " ON CONFLICT (agent_id) DO UPDATE SET memo = excluded.memo",
        (agent_id, at, json.dumps(values)),
    )


# -- owner: the run log ------------------------------------------------------------------


def sweep_running(conn: Any, agent_id: str, at: str) -> int:
    """Runs of this agent left ``running`` by a process that died mid-pass: failed.
    Safe because the scheduler is sequential and single-instance: nothing else runs it."""
    return conn.execute(
        "UPDATE system_agent_runs SET status = 'failed', finished_at = ?, error = ? WHERE agent_id = ? AND status = 'running'",
        (at, INTERRUPTED, agent_id),
    ).rowcount


def sweep_ephemeral(conn: Any) -> int:
    """The conversations of passes a stop interrupted: never listed, never resumed by
    recovery (it walks the listed ones), so nothing else would remove them. One whose
    answer still streams (a crash cut its request) waits for the chat's recovery, which
    counts that request in the request log by it (``ConversationStore.cut_requests``):
    it is swept once recovery has marked it interrupted. Returns how many wait so."""
    conn.execute(
        "DELETE FROM conversations WHERE ephemeral = 1 AND NOT EXISTS (SELECT 1 FROM messages m"
        " WHERE m.indexed = 0 AND m.status = 'streaming' AND m.conversation_id = conversations.id)"
    )
    return conn.execute("SELECT count(*) FROM conversations WHERE ephemeral = 1").fetchone()[0]


def open_run(conn: Any, agent_id: str, subject_id: str | None, at: str) -> str:
    run_id = uuid.uuid4().hex
    conn.execute(
        "INSERT INTO system_agent_runs (id, agent_id, subject_user_id, status, started_at) VALUES (?, ?, ?, 'running', ?)",
        (run_id, agent_id, subject_id, at),
    )
    return run_id


def finish_run(conn: Any, run_id: str, status: str, at: str, stats: dict[str, int], error: str | None) -> None:
    conn.execute(
        "UPDATE system_agent_runs SET status = ?, finished_at = ?, stats = ?, error = ? WHERE id = ?",
        (status, at, json.dumps(stats), error, run_id),
    )


def runs(conn: Any, agent_id: str | None, limit: int) -> list[dict[str, Any]]:
    where, args = ("WHERE agent_id = ?", [agent_id]) if agent_id else ("", [])
    rows = conn.execute(f"SELECT * FROM system_agent_runs {where} ORDER BY started_at DESC, rowid DESC LIMIT ?", (*args, limit))
    return [dict(r) | {"stats": json.loads(r["stats"])} for r in rows]


# -- reports (the same table in both homes) ------------------------------------------------

REPORT_COLUMNS = (
    "id", "kind", "audience", "subject_user_id", "producer_user_id", "run_id", "agent_id",
    "title", "summary", "body", "period_start", "period_end", "created_at", "read_at",
)


def insert_report(conn: Any, **values: Any) -> str:
    report_id = uuid.uuid4().hex
    names = [name for name in REPORT_COLUMNS if name in values and name != "id"]
    conn.execute(
        f"INSERT INTO reports (id, {', '.join(names)}) VALUES (?, {', '.join('?' * len(names))})",
        (report_id, *(values[n] for n in names)),
    )
    return report_id


def mark_read(conn: Any, report_id: str, at: str) -> bool:
    """First reader wins: acknowledgement is shared (two supervisors, one report, dealt
    with once), so a later reader leaves the first one's time."""
    return bool(conn.execute("UPDATE reports SET read_at = ? WHERE id = ? AND read_at IS NULL", (at, report_id)).rowcount)


# -- registry: supervision, coverage, per-member intervals -----------------------------------


def subjects(conn: Any) -> list[str]:
    """Supervised members who are active, in a stable order."""
    rows = conn.execute(
        "SELECT DISTINCT s.subject_user_id FROM supervision s JOIN users u ON u.id = s.subject_user_id"
        " WHERE u.active = 1 ORDER BY u.created_at, u.id"
    )
    return [r[0] for r in rows]


def supervisors_of(conn: Any, subject_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT s.supervisor_user_id FROM supervision s JOIN users u ON u.id = s.supervisor_user_id"
        " WHERE s.subject_user_id = ? AND u.active = 1 ORDER BY u.created_at, u.id",
        (subject_id,),
    )
    return [r[0] for r in rows]


def set_supervisors(conn: Any, subject_id: str, supervisor_ids: list[str]) -> list[str]:
    """Replace the subject's supervisors; an edge that stays keeps its ``created_at``
    (a review never looks back before the latest one). Returns the ones added."""
    wanted = list(dict.fromkeys(supervisor_ids))
    before = {r[0] for r in conn.execute("SELECT supervisor_user_id FROM supervision WHERE subject_user_id = ?", (subject_id,))}
    conn.executemany(
        "DELETE FROM supervision WHERE subject_user_id = ? AND supervisor_user_id = ?", [(subject_id, s) for s in before - set(wanted)]
    )
    added = [s for s in wanted if s not in before]
    conn.executemany("INSERT INTO supervision (subject_user_id, supervisor_user_id) VALUES (?, ?)", [(subject_id, s) for s in added])
    return added


def unacknowledged_supervisors(conn: Any, subject_id: str) -> list[tuple[str, str]]:
    """The subject's current supervisors named after the subject last acknowledged being
    told (``users.supervision_seen_at``; never: all of them), as (supervisor id,
    ``created_at``) in the order ``supervisors_of`` gives."""
    rows = conn.execute(
        "SELECT s.supervisor_user_id, s.created_at FROM supervision s"
        " JOIN users u ON u.id = s.supervisor_user_id JOIN users m ON m.id = s.subject_user_id"
        " WHERE s.subject_user_id = ? AND u.active = 1 AND s.created_at > coalesce(m.supervision_seen_at, '')"
        " ORDER BY u.created_at, u.id",
        (subject_id,),
    )
    return [(r[0], r[1]) for r in rows]


def acknowledge_supervision(conn: Any, subject_id: str, through: str) -> None:
    """The subject has been told of their supervisors named up to ``through`` (the
    latest time they were shown): one named after it is still to be told. What is kept
    is that edge's own ``created_at``, never later than now, and never moves back."""
    row = conn.execute(
        "SELECT max(created_at) FROM supervision WHERE subject_user_id = ? AND created_at <= ?", (subject_id, through)
    ).fetchone()
    if row and row[0]:
        conn.execute(
            "UPDATE users SET supervision_seen_at = ? WHERE id = ? AND coalesce(supervision_seen_at, '') < ?",
            (row[0], subject_id, row[0]),
        )


def supervised_since(conn: Any, subject_id: str) -> str | None:
    """When the subject's latest current supervisor was named: what a review may cover
    starts there at the earliest (a supervisor reads nothing from before they were)."""
    row = conn.execute(
        "SELECT max(s.created_at) FROM supervision s JOIN users u ON u.id = s.supervisor_user_id"
        " WHERE s.subject_user_id = ? AND u.active = 1",
        (subject_id,),
    ).fetchone()
    return row[0] if row else None


def covered_through(conn: Any, agent_id: str, subject_id: str) -> str | None:
    row = conn.execute(
        "SELECT covered_through FROM system_agent_coverage WHERE agent_id = ? AND subject_user_id = ?", (agent_id, subject_id)
    ).fetchone()
    return row[0] if row else None


def set_covered_through(conn: Any, agent_id: str, subject_id: str, at: str) -> None:
    conn.execute(
        "INSERT INTO system_agent_coverage (agent_id, subject_user_id, covered_through) VALUES (?, ?, ?)"
        " ON CONFLICT (agent_id, subject_user_id) DO UPDATE SET covered_through = excluded.covered_through",
        (agent_id, subject_id, at),
    )


def member_intervals(conn: Any, agent_id: str) -> dict[str, int]:
    rows = conn.execute("SELECT user_id, interval_seconds FROM system_agent_user_settings WHERE agent_id = ?", (agent_id,))
    return {r[0]: r[1] for r in rows}


def set_member_interval(conn: Any, agent_id: str, member_id: str, seconds: int | None) -> None:
    """A row is an override, its absence inheritance: clearing deletes the row."""
    if seconds is None:
        conn.execute("DELETE FROM system_agent_user_settings WHERE agent_id = ? AND user_id = ?", (agent_id, member_id))
        return
    conn.execute(
        "INSERT INTO system_agent_user_settings (agent_id, user_id, interval_seconds) VALUES (?, ?, ?)"
        " ON CONFLICT (agent_id, user_id) DO UPDATE SET interval_seconds = excluded.interval_seconds",
        (agent_id, member_id, seconds),
    )

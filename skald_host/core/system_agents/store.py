"""The scheduler's rows, as functions over a connection (each runs on its file's thread).

Owner file (the acting member's): ``system_agent_state`` (the attempt marker, due-ness),
``system_agent_runs`` (the run log, theirs alone), ``reports`` (their own). Registry:
``supervision`` (the edges), ``system_agent_coverage`` (per-subject watermarks),
``system_agent_retry`` (per subject, when a failed review is tried again),
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
    """A pass found work and is about to run it: the interval starts at ``at`` (a stop
    during the run leaves it owed once, ``owed_after_a_stop``), and no earlier look
    waits any more. ``failures`` stays until the pass's end says how it went."""
    conn.execute(
        "INSERT INTO system_agent_state (agent_id, last_attempt_at) VALUES (?, ?)"
        " ON CONFLICT (agent_id) DO UPDATE SET last_attempt_at = excluded.last_attempt_at, looked_at = NULL",
        (agent_id, at),
    )


def retry_state(conn: Any, agent_id: str) -> tuple[str | None, int]:
    """(when the last pass that did not start the interval looked, or None: the
    interval after the last attempt applies; how many passes failed in a row, 0 for an
    idle one)."""
    row = conn.execute("SELECT looked_at, failures FROM system_agent_state WHERE agent_id = ?", (agent_id,)).fetchone()
    return (row[0], int(row[1] or 0)) if row else (None, 0)


def set_retry(conn: Any, agent_id: str, looked_at: str | None, failures: int, at: str) -> None:
    """How the pass at ``at`` ended: ``looked_at`` None after one that ran (the interval
    from its attempt applies), else ``at`` (a failure's backoff, an idle pass's re-check
    count from it). A row an idle pass creates has its look as the attempt: unused
    while ``looked_at`` is set, which it is until a pass finds work."""
    conn.execute(
        "INSERT INTO system_agent_state (agent_id, last_attempt_at, looked_at, failures) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (agent_id) DO UPDATE SET looked_at = excluded.looked_at, failures = excluded.failures",
        (agent_id, at, looked_at, failures),
    )


def _instance_retry_key(agent_id: str) -> str:
    return f"system_agent_retry:{agent_id}"


def instance_retry_state(conn: Any, agent_id: str) -> tuple[str | None, int] | None:
    """Registry: ``retry_state`` of an instance-scope agent, for the whole server (None:
    no pass recorded one here)."""
    row = conn.execute("SELECT value FROM config WHERE key = ?", (_instance_retry_key(agent_id),)).fetchone()
    if row is None:
        return None
    value = json.loads(row[0])
    if not isinstance(value, dict):
        return None
    at = value.get("looked_at")
    return (at if isinstance(at, str) else None, int(value.get("failures") or 0))


def set_instance_retry(conn: Any, agent_id: str, looked_at: str | None, failures: int) -> None:
    conn.execute(
        "INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (_instance_retry_key(agent_id), json.dumps({"looked_at": looked_at, "failures": failures})),
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
    """Runs of this agent left ``running`` by a process that died mid-pass: failed,
    ended at ``at`` (when this process began: the crash came before it), or at their
    start if that is later. Safe because the scheduler is sequential and
    single-instance: nothing else runs it."""
    return conn.execute(
        "UPDATE system_agent_runs SET status = 'failed', finished_at = max(started_at, ?), error = ?"
        " WHERE agent_id = ? AND status = 'running'",
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


def subject_retry(conn: Any, agent_id: str, subject_id: str) -> tuple[str, int] | None:
    """When a review of the subject that failed may be tried again, and how many failed
    in a row; None: none waits. Kept beside the coverage, never in it (the watermark
    moves only on a completed pass) and per subject (two subjects of one supervisor
    keep two clocks)."""
    row = conn.execute(
        "SELECT retry_at, failures FROM system_agent_retry WHERE agent_id = ? AND subject_user_id = ?", (agent_id, subject_id)
    ).fetchone()
    return (row[0], int(row[1])) if row else None


def set_subject_retry(conn: Any, agent_id: str, subject_id: str, retry_at: str | None, failures: int = 0) -> None:
    """``retry_at`` None: the review completed, nothing waits."""
    if retry_at is None:
        conn.execute("DELETE FROM system_agent_retry WHERE agent_id = ? AND subject_user_id = ?", (agent_id, subject_id))
        return
    conn.execute(
        "INSERT INTO system_agent_retry (agent_id, subject_user_id, retry_at, failures) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (agent_id, subject_user_id) DO UPDATE SET retry_at = excluded.retry_at, failures = excluded.failures",
        (agent_id, subject_id, retry_at, failures),
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

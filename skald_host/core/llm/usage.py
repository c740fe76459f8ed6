"""The request log (``llm_requests`` in the registry) as the admin reads it: what each
member and each model (catalog entry: label and provider) used in a period, and the latest requests, newest first.

The log holds metadata only (model, status, tokens, timings; README "Models and chat"),
so nothing here can show a word of a conversation. A member deleted since keeps their
rows (a bill does not forget them) and is shown as deleted. ``read_usage`` is one
function of a registry connection, run as one job: the totals and the rows are of the
same moment, and the event loop never waits on SQLite.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

# By catalog entry (``model_id``), not only by model name: two providers may serve the
# same name, and each is its own bill. Rows written before the entry was recorded have
# none and are counted by their name alone.
TOTALS_SQL = (
    "SELECT member_id, model_id, model, status, count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0)"
    " FROM llm_requests WHERE created_at >= ? AND created_at < ? GROUP BY member_id, model_id, model, status"
)
LATEST_SQL = (
    "SELECT id, created_at, member_id, model, status, http_status, tokens_in, tokens_out, latency_ms, first_token_ms, rowid,"
    " model_id"
    " FROM llm_requests WHERE created_at >= ? AND created_at < ?{cursor}"
    " ORDER BY created_at DESC, rowid DESC LIMIT ?"
)
# Rows of one batch share their millisecond (``RequestLog`` commits them together); the
# rowid, which every index holds after its columns, keeps them in the order they came.
AFTER_CURSOR = " AND (created_at, rowid) < (?, ?)"


@dataclass(frozen=True)
class Period:
    """Whole UTC days, both included; ``start`` and ``end`` (excluded) as the registry
    writes times, so the comparison is a range of ``llm_requests_created``."""

    since: dt.date
    until: dt.date

    @property
    def start(self) -> str:
        return f"{self.since.isoformat()}T00:00:00.000Z"

    @property
    def end(self) -> str:
        # 24:00 of the last day (ISO 8601's end of a day): after every time of it, and no
        # date arithmetic to overflow on 9999-12-31.
        return f"{self.until.isoformat()}T24:00:00.000Z"


def _counts() -> dict[str, Any]:
    return {"requests": {}, "total": 0, "tokens_in": 0, "tokens_out": 0}


def _add(counts: dict[str, Any], status: str, requests: int, tokens_in: int, tokens_out: int) -> None:
    counts["requests"][status] = counts["requests"].get(status, 0) + requests
    counts["total"] += requests
    counts["tokens_in"] += tokens_in
    counts["tokens_out"] += tokens_out


def read_usage(conn: Any, period: Period, before: tuple[str, int] | None, limit: int) -> dict[str, Any]:
    """The answer of ``GET /api/admin/usage``, read in one registry job."""
    total, by_member, by_model = _counts(), {}, {}
    for member_id, model_id, model, status, requests, tokens_in, tokens_out in conn.execute(TOTALS_SQL, (period.start, period.end)):
        for counts in (total, by_member.setdefault(member_id, _counts()), by_model.setdefault((model_id, model), _counts())):
            _add(counts, status, requests, tokens_in, tokens_out)
    sql = LATEST_SQL.format(cursor=AFTER_CURSOR if before else "")
    rows = conn.execute(sql, (period.start, period.end, *(before or ()), limit + 1)).fetchall()
    more, rows = len(rows) > limit, rows[:limit]
    ids = sorted({member_id for member_id in by_member if member_id is not None} | {row[2] for row in rows if row[2] is not None})
    known = {}
    for start in range(0, len(ids), 500):  # well below SQLite's limit of bound values
        chunk = ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        known.update({r[0]: (r[1], r[2]) for r in conn.execute(f"SELECT id, username, display_name FROM users WHERE id IN ({marks})", chunk)})

    entry_ids = sorted({key[0] for key in by_model if key[0] is not None} | {row[11] for row in rows if row[11] is not None})
    entries: dict[str, tuple[str, str, str]] = {}
    for start in range(0, len(entry_ids), 500):
        chunk = entry_ids[start:start + 500]
        marks = ", ".join("?" * len(chunk))
        entries.update({r[0]: (r[1], r[2], r[3]) for r in conn.execute(
            "SELECT m.id, coalesce(nullif(m.label, ''), m.model), p.id, p.name FROM llm_models m"
            " JOIN llm_providers p ON p.id = m.provider_id"
            f" WHERE m.id IN ({marks})", chunk,
        )})

    def entry(model_id: str | None) -> dict[str, Any] | None:
        """The catalog entry a request went to: its label and provider; one deleted
        since keeps its id and is said deleted (its model name is the row's ``model``).
        None: a row from before entries were recorded."""
        if model_id is None:
            return None
        label, provider_id, provider_name = entries.get(model_id, (None, None, None))
        return {"id": model_id, "label": label, "provider_id": provider_id, "provider_name": provider_name,
                "deleted": model_id not in entries}

    def member(member_id: str | None) -> dict[str, Any] | None:
        if member_id is None:
            return None
        username, display_name = known.get(member_id, (None, None))
        return {"id": member_id, "username": username, "display_name": display_name, "deleted": member_id not in known}

    def busiest(item: tuple[Any, dict[str, Any]]) -> tuple[int, str]:
        return (-item[1]["total"], str(item[0]))

    return {
        "since": period.since.isoformat(),
        "until": period.until.isoformat(),
        "total": total,
        "members": [{"member": member(key), **counts} for key, counts in sorted(by_member.items(), key=busiest)],
        "models": [
            {"model": key[1], "entry": entry(key[0]), **counts}
            for key, counts in sorted(by_model.items(), key=lambda item: (-item[1]["total"], str(item[0][1]), str(item[0][0])))
        ],
        "requests": [
            {
                "id": row[0], "at": row[1], "member": member(row[2]), "model": row[3], "entry": entry(row[11]),
                "status": row[4], "http_status": row[5],
                "tokens_in": row[6], "tokens_out": row[7], "latency_ms": row[8], "first_token_ms": row[9],
            }
            for row in rows
        ],
        "next_before": f"{rows[-1][1]}~{rows[-1][10]}" if more else None,
    }

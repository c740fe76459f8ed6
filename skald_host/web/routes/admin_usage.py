"""The admin's view of the request log (``llm_requests`` in the registry): what each
member and each model (catalog entry: label and provider) used in a period, and the latest requests, newest first.

The log holds metadata only (model, status, tokens, timings; README "Models and chat"),
so nothing here can show a word of a conversation. A member deleted since keeps their
rows (a bill does not forget them) and is shown as deleted. Reads run on the registry's
own thread, one job for the whole answer, so the loop never waits on SQLite and the
totals and the rows are of the same moment.

The reading is ``skald_host.core.llm.usage``'s; this is its HTTP face.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from quart import Blueprint, current_app, request

from skald_host.core.llm.usage import Period, read_usage
from skald_host.web.auth import requires
from skald_host.web.body import INT, TEXT, TIME, array, check, nullable, obj, query, returns
from skald_host.web.errors import ApiError

bp = Blueprint("admin_usage", __name__)

#: The period when none is asked for: the last 30 days, today included.
DEFAULT_DAYS = 30
PAGE_DEFAULT = 50
PAGE_MAX = 200

_DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$", "x-message": "'{name}' must be a date, YYYY-MM-DD"}
# The cursor is the last row's time and place in the log, as ``next_before`` gave it.
_CURSOR = {"type": "string", "maxLength": 100, "pattern": r"^\d{4}-\d{2}-\d{2}T[0-9:.]+Z~[0-9]{1,18}$",
           "x-message": "'{name}' must be a 'next_before' of an earlier answer"}
_LIMIT = {"type": "string", "pattern": r"^[0-9]{1,3}$", "x-message": f"'{{name}}' must be a whole number from 1 to {PAGE_MAX}"}
QUERY_SCHEMA = obj(optional={"since": _DATE, "until": _DATE, "before": _CURSOR, "limit": _LIMIT})

_MEMBER = nullable(obj(
    {"id": TEXT, "username": nullable(TEXT), "display_name": nullable(TEXT), "deleted": {"type": "boolean"}},
    description="who sent the request; deleted: the account is gone (username and display name are then null); null: no member",
))
_ENTRY = nullable(obj(
    {"id": TEXT, "label": nullable(TEXT), "provider_id": nullable(TEXT), "provider_name": nullable(TEXT), "deleted": {"type": "boolean"}},
    description="the catalog entry (Models page) the request went to: two providers may serve the same model name, and the"
                " entry's label and provider say which one (which bill); deleted: the entry is gone since (label and provider"
                " are then null, 'model' still names it); null: a request logged before entries were recorded",
))
_COUNTS = {"requests": obj(extra=INT, description="requests by status: ok, error, stopped, interrupted, …"),
           "total": INT, "tokens_in": INT, "tokens_out": INT}
_ROW = obj({
    "id": TEXT, "at": TIME, "member": _MEMBER, "model": TEXT, "entry": _ENTRY, "status": TEXT, "http_status": nullable(INT),
    "tokens_in": nullable(INT), "tokens_out": nullable(INT), "latency_ms": nullable(INT), "first_token_ms": nullable(INT),
})
ANSWER = obj({
    "since": TEXT, "until": TEXT,
    "total": obj(_COUNTS),
    "members": array(obj({"member": _MEMBER, **_COUNTS})),
    "models": array(obj({"model": TEXT, "entry": _ENTRY, **_COUNTS}),
                    description="one row per catalog entry (per model name for requests logged before entries were recorded)"),
    "requests": array(_ROW),
    "next_before": nullable(TEXT),
})

def _date(args: dict[str, str], name: str, default: dt.date) -> dt.date:
    if name not in args:
        return default
    try:
        return dt.date.fromisoformat(args[name])
    except ValueError:  # the pattern passed, the calendar did not (2026-02-30)
        raise ApiError(400, f"'{name}' must be a date, YYYY-MM-DD", field=name, code="field_invalid", values={"field": name}) from None


def _period(args: dict[str, str]) -> Period:
    today = dt.datetime.now(dt.timezone.utc).date()
    until = _date(args, "until", today)
    back = dt.timedelta(days=DEFAULT_DAYS - 1)
    since = _date(args, "since", until - back if until >= dt.date.min + back else dt.date.min)  # year 1 has no day before
    if since > until:
        raise ApiError(400, "'since' must not be after 'until'", field="since", code="range_reversed", values={"field": "since"})
    return Period(since, until)


def _limit(args: dict[str, str]) -> int:
    limit = int(args["limit"]) if "limit" in args else PAGE_DEFAULT
    if not 1 <= limit <= PAGE_MAX:
        raise ApiError(400, f"'limit' must be a whole number from 1 to {PAGE_MAX}", field="limit", code="number_between",
                       values={"field": "limit", "low": 1, "high": PAGE_MAX})
    return limit


@bp.get("/api/admin/usage")
@query(
    since={**_DATE, "description": "the first day (UTC) of the period; default: 29 days before 'until'"},
    until={**_DATE, "description": "the last day (UTC) of the period, included; default: today"},
    before={**_CURSOR, "description": "the 'next_before' of the previous page: the requests after its last row"},
    limit={**_LIMIT, "description": f"requests per page, 1 to {PAGE_MAX}; default {PAGE_DEFAULT}"},
)
@returns(ANSWER)
@requires("models.manage")
async def usage() -> dict[str, Any]:
    """What each member and each model (catalog entry: label and provider) used in a period (requests by status, tokens in
    and out) and the latest requests of it, from the request log: metadata only."""
    args = request.args.to_dict()
    check(args, QUERY_SCHEMA)
    period, limit = _period(args), _limit(args)
    before = None
    if "before" in args:
        at, place = args["before"].split("~", 1)
        before = (at, int(place))
    core = current_app.config["SKALD_CORE"]
    return await core.registry.run(lambda conn: read_usage(conn, period, before, limit))

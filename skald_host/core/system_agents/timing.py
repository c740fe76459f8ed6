"""Time for the scheduler: one clock the tests move, one text form for the files, and
the daily occurrence a ``run_at_hour`` agent is due after (seed 000)."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from typing import Callable

UTC = dt.timezone.utc
Clock = Callable[[], dt.datetime]


def system_clock() -> dt.datetime:
    return dt.datetime.now(UTC)


def iso(moment: dt.datetime) -> str:
    """The form SQLite's ``strftime('%Y-%m-%dT%H:%M:%fZ','now')`` writes, so stored
    times compare as text with the rows' own ``created_at``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_iso(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def most_recent_occurrence(now: dt.datetime, hour: int, zone: dt.tzinfo | str) -> dt.datetime:
    """The latest moment at or before ``now`` when the wall clock of ``zone`` read
    ``hour``:00, in UTC. Resolved through the zone, not by UTC arithmetic: on the day a
    DST change skips that hour (02:00 in Europe/Berlin each March) the occurrence is the
    first instant after the gap, so the day still has exactly one; on a day that repeats
    it, the first of the two (fold 0), so it has one too."""
    tz = zoneinfo.ZoneInfo(zone) if isinstance(zone, str) else zone
    local_day = now.astimezone(tz).date()
    for back in range(3):
        day = local_day - dt.timedelta(days=back)
        candidate = _wall_time(day, hour, tz)
        if candidate <= now:
            return candidate
    raise AssertionError("unreachable: one of three consecutive days had the hour")


def _wall_time(day: dt.date, hour: int, tz: dt.tzinfo) -> dt.datetime:
    naive = dt.datetime.combine(day, dt.time(hour))
    local = naive.replace(tzinfo=tz, fold=0)
    as_utc = local.astimezone(UTC)
    if as_utc.astimezone(tz).replace(tzinfo=None) != naive:
        # A wall time the zone skips (a DST gap): the occurrence is where the gap ends,
        # the first real instant at or after that wall time.
        after = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
        before = as_utc
        gap_end = min(before, after)
        while gap_end.astimezone(tz).replace(tzinfo=None) < naive:
            gap_end += dt.timedelta(minutes=15)
        return gap_end
    return as_utc

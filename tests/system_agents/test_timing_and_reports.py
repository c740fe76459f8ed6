"""The daily occurrence a review is due after, across DST, and the shallow reading of a
report from a model's final message."""

from __future__ import annotations

import datetime as dt

from skald_hookspecs import NOTHING_TO_REPORT, Report, parse_report
from skald_host.core.system_agents import most_recent_occurrence

UTC = dt.timezone.utc
BERLIN = "Europe/Berlin"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_the_occurrence_is_read_through_the_time_zone():
    assert most_recent_occurrence(at("2026-06-01T03:00"), 4, BERLIN) == at("2026-06-01T02:00")  # 04:00 CEST
    assert most_recent_occurrence(at("2026-06-01T01:59"), 4, BERLIN) == at("2026-05-31T02:00")
    assert most_recent_occurrence(at("2026-01-15T03:00"), 4, BERLIN) == at("2026-01-15T03:00")  # 04:00 CET


def test_a_skipped_hour_occurs_once_where_the_gap_ends():
    """29 March 2026: Berlin jumps from 02:00 CET to 03:00 CEST; "02:00" that day is
    01:00 UTC, the first instant after the gap, and the day still has one occurrence."""
    assert most_recent_occurrence(at("2026-03-29T00:59"), 2, BERLIN) == at("2026-03-28T01:00")
    assert most_recent_occurrence(at("2026-03-29T01:00"), 2, BERLIN) == at("2026-03-29T01:00")
    assert most_recent_occurrence(at("2026-03-29T23:59"), 2, BERLIN) == at("2026-03-29T01:00")
    assert most_recent_occurrence(at("2026-03-30T00:00"), 2, BERLIN) == at("2026-03-30T00:00")


def test_a_repeated_hour_occurs_once_at_its_first_pass():
    """25 October 2026: 02:00-03:00 happens twice in Berlin; the first counts."""
    assert most_recent_occurrence(at("2026-10-25T00:00"), 2, BERLIN) == at("2026-10-25T00:00")
    assert most_recent_occurrence(at("2026-10-25T01:30"), 2, BERLIN) == at("2026-10-25T00:00")


def test_a_report_is_read_from_heading_and_first_paragraph():
    text = "# Late nights\n\nKid chatted past midnight three times.\n\n- Monday: games\n- Tuesday: homework"
    assert parse_report(text) == Report("Late nights", "Kid chatted past midnight three times.", text)
    assert parse_report("Plain first line\n\nThe summary.") == Report("Plain first line", "The summary.", "Plain first line\n\nThe summary.")


def test_nothing_to_report_and_empty_answers_file_nothing():
    assert parse_report(NOTHING_TO_REPORT) is None
    assert parse_report("  NOTHING_TO_REPORT\n") is None
    assert parse_report("") is None

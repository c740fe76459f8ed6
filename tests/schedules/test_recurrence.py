"""When a recurring prompt runs (skald_host.core.schedules): the phrase grammar, cron
read in the job's time zone, the DST rules and the catch-up rule, on fixed times."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skald_host.core.schedules import Clock, Recurrence, ScheduleError, following, phrase_to_cron

UTC = dt.timezone.utc
BERLIN = "Europe/Berlin"


def utc(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize(
    ("phrase", "cron"),
    [
        ("every weekday at 8", "0 8 * * 1-5"),
        ("Every weekday at 8:30", "30 8 * * 1-5"),
        ("werktags um 8", "0 8 * * 1-5"),
        ("an Werktagen um 8.15 Uhr", "15 8 * * 1-5"),
        ("every day at 7pm", "0 19 * * *"),
        ("daily at 12am", "0 0 * * *"),
        ("täglich um 20 Uhr", "0 20 * * *"),
        ("jeden Tag um 6:05", "5 6 * * *"),
        ("every monday and thursday at 9", "0 9 * * 1,4"),
        ("mondays at 9", "0 9 * * 1"),
        ("montags um 9", "0 9 * * 1"),
        ("Mo, Mi, Fr um 6:45", "45 6 * * 1,3,5"),
        ("every sunday at 10", "0 10 * * 0"),
        ("every weekend at 10", "0 10 * * 0,6"),
        ("am Wochenende um 10", "0 10 * * 0,6"),
        ("every 15 minutes", "*/15 * * * *"),
        ("alle 30 Minuten", "*/30 * * * *"),
        ("every hour", "0 * * * *"),
        ("stündlich", "0 * * * *"),
        ("every 2 hours", "0 */2 * * *"),
        ("alle 6 Stunden", "0 */6 * * *"),
        ("every month on the 1st at 9", "0 9 1 * *"),
        ("monatlich am 15. um 18", "0 18 15 * *"),
    ],
)
def test_phrases_map_to_cron(phrase, cron):
    assert phrase_to_cron(phrase) == cron


@pytest.mark.parametrize(
    "phrase",
    ["", "tomorrow", "every blursday at 8", "every day at 25", "every day at 13pm", "every 7 minutes", "every 0 minutes",
     "every month on the 31st at 9", "every day", "0 8 * * 1-5"],
)
def test_what_the_grammar_does_not_know_is_none(phrase):
    assert phrase_to_cron(phrase) is None


def test_a_cron_expression_is_taken_as_it_is_and_checked():
    assert Recurrence.parse("0 8 * * 1-5", BERLIN) == Recurrence("0 8 * * 1-5", BERLIN)
    assert Recurrence.parse("every weekday at 8", BERLIN) == Recurrence("0 8 * * 1-5", BERLIN)
    for bad in ("0 8 * *", "61 8 * * *", "every blursday", "0 8 * * * *", "0 0 30 2 *"):
        with pytest.raises(ScheduleError) as refused:
            Recurrence.parse(bad, BERLIN)
        assert refused.value.code == "recurrence_invalid"


def test_unknown_time_zones_and_too_frequent_schedules_are_refused():
    with pytest.raises(ScheduleError) as refused:
        Recurrence.parse("0 8 * * *", "Mars/Olympus")
    assert refused.value.code == "timezone_unknown"
    with pytest.raises(ScheduleError) as refused:
        Recurrence.parse("* * * * *", BERLIN)
    assert refused.value.code == "recurrence_too_often"
    Recurrence.parse("*/5 * * * *", BERLIN)  # the shortest allowed


@pytest.mark.parametrize("phrase", ["every 2 minutes", "alle 2 Minuten", "every 1 minutes", "every minute", "jede Minute"])
def test_a_phrase_too_frequent_is_refused_as_too_often_not_as_unreadable(phrase):
    with pytest.raises(ScheduleError) as refused:
        Recurrence.parse(phrase, BERLIN)
    assert refused.value.code == "recurrence_too_often"


def test_wall_clock_time_in_the_members_zone_summer_and_winter():
    weekday = Recurrence.parse("every weekday at 8", BERLIN)
    # Friday 27 March 2026, 09:00 CET: next is Monday 30 March 08:00 CEST (06:00 UTC).
    assert weekday.next_after(utc(2026, 3, 27, 8)) == utc(2026, 3, 30, 6)
    # In winter 08:00 CET is 07:00 UTC.
    assert weekday.next_after(utc(2026, 1, 5, 12)) == utc(2026, 1, 6, 7)
    # Across the spring change, a daily 08:00 stays 08:00 local: 07:00 UTC, then 06:00 UTC.
    daily = Recurrence.parse("0 8 * * *", BERLIN)
    assert daily.upcoming(utc(2026, 3, 28, 0), 3) == [utc(2026, 3, 28, 7), utc(2026, 3, 29, 6), utc(2026, 3, 30, 6)]
    assert daily.upcoming(utc(2026, 10, 24, 12), 2) == [utc(2026, 10, 25, 7), utc(2026, 10, 26, 7)]


def test_spring_forward_a_skipped_time_runs_once_right_after_the_gap():
    # 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that night.
    job = Recurrence.parse("30 2 * * *", BERLIN)
    runs = job.upcoming(utc(2026, 3, 27, 12), 4)
    assert runs == [utc(2026, 3, 28, 1, 30), utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30), utc(2026, 3, 31, 0, 30)]
    assert runs[1].astimezone(dt.timezone(dt.timedelta(hours=2))).hour == 3  # 03:00 CEST, once


def test_fall_back_a_repeated_time_runs_once_at_its_first_passing():
    # 25 October 2026: 03:00 CEST becomes 02:00 CET; 02:30 happens twice (00:30 and 01:30 UTC).
    job = Recurrence.parse("30 2 * * *", BERLIN)
    assert job.upcoming(utc(2026, 10, 24, 12), 2) == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
    # The scheduler's own step after running the first 02:30: not the second one.
    assert following(job, utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 0, 30, 5)) == utc(2026, 10, 26, 1, 30)
    # Every quarter hour: the repeated hour's times ran already, so the next is 03:00 CET.
    quarter = Recurrence.parse("every 15 minutes", BERLIN)
    assert following(quarter, utc(2026, 10, 25, 0, 45), utc(2026, 10, 25, 0, 45, 1)) == utc(2026, 10, 25, 2, 0)


def test_catch_up_after_downtime_is_one_run_then_the_schedule_from_now():
    daily = Recurrence.parse("0 8 * * *", BERLIN)
    missed = utc(2026, 5, 4, 6)  # Monday 08:00 CEST; the server was off until Thursday 10:00
    back = utc(2026, 5, 7, 8)
    # The job runs once now (its due time was the Monday one); next is Friday 08:00, not Tuesday.
    assert following(daily, missed, back) == utc(2026, 5, 8, 6)
    # Running on time moves to the next day, as usual.
    assert following(daily, missed, missed + dt.timedelta(seconds=2)) == utc(2026, 5, 5, 6)


def test_the_clock_is_the_systems_unless_set():
    clock = Clock()
    before = dt.datetime.now(UTC)
    assert before <= clock.now() <= dt.datetime.now(UTC)
    clock.set(utc(2030, 1, 1))
    clock.advance(dt.timedelta(hours=1))
    assert clock.now() == utc(2030, 1, 1, 1)
    clock.set(None)
    assert clock.now().year == dt.datetime.now(UTC).year
    with pytest.raises(ValueError):
        clock.set(dt.datetime(2030, 1, 1))


_CRON_PARTS = st.sampled_from(["*", "0", "5", "*/5", "*/15", "1-5", "0,6", "31", "30", "2", "L", "?", "60", "-1", "1-", "MON", "jan", "#", "1#2", "W"])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(_CRON_PARTS, min_size=5, max_size=5).map(" ".join), st.text(max_size=40)))
def test_any_text_is_a_recurrence_or_a_refusal_never_a_crash(when):
    try:
        recurrence = Recurrence.parse(when, BERLIN)
    except ScheduleError as refused:
        assert refused.code in ("recurrence_invalid", "recurrence_too_often")
    else:
        first = recurrence.next_after(utc(2026, 1, 1))
        assert following(recurrence, first, first) > first


def test_the_schedule_forms_examples_parse_in_every_language():
    """The Scheduled prompts page offers ``schedules.examples`` as the placeholder and
    hint, in the reader's language: each must be a phrase (or cron) the server reads."""
    from skald_host.builtins.strings import LOCALES
    from skald_hookspecs import I18nBundle

    strings = I18nBundle.from_folder("core", LOCALES).strings
    for locale, table in strings.items():
        examples = table["schedules.examples"].split(" · ")
        assert len(examples) >= 3, locale
        for example in examples:
            Recurrence.parse(example, "Europe/Berlin")  # raises ScheduleError when unreadable


@pytest.mark.parametrize(
    "cron",
    [
        "0,1 * * * *",  # two runs a minute apart, every hour
        "*/7 * * * *",  # :56, then :00 four minutes later
        "0,58 0,23 * * *",  # 23:58, then 00:00 two minutes later
        "0,58 0,23 28,29 2 *",  # the same, only where 28 and 29 February meet
    ],
)
def test_a_recurrence_shorter_than_the_minimum_anywhere_in_its_cycle_is_refused(cron):
    with pytest.raises(ScheduleError) as refused:
        Recurrence.parse(cron, "UTC")
    assert refused.value.code == "recurrence_too_often"


@pytest.mark.parametrize("cron", ["*/5 * * * *", "0 8 * * 1-5", "0,58 0,23 * * 1,3,5", "0,58 0,23 2-30/2 * *"])
def test_a_recurrence_whose_every_gap_is_long_enough_is_accepted(cron):
    """The last two wrap around midnight, but never on two consecutive days."""
    assert Recurrence.parse(cron, "UTC").cron == cron

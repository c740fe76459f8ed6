"""Recurring scheduled prompts: when a member's prompt runs next.

A scheduled prompt is one row of the member's own ``scheduled_jobs`` table (their
private, encrypted file): one-shot rows have no ``cron``; recurring rows carry a
five-field cron expression and the IANA time zone it is read in. The member's runtime
delivers both (``MemberRuntime.deliver_due_jobs``); this module only answers *when*.

The rules, stated once (README "Scheduled prompts" repeats them for members):

- **Wall-clock time in the job's time zone.** ``0 8 * * 1-5`` is 08:00 local on
  weekdays, summer and winter alike (croniter over ``zoneinfo``).
- **Spring forward:** a time the clock skips (02:30 on the night the clocks go from
  02:00 to 03:00) runs once, at the first moment after the gap (03:00).
- **Fall back:** a time the clock passes twice (02:30 when 03:00 becomes 02:00) runs
  once, at its first passing. Every local time the schedule names runs at most once.
- **Catch-up after downtime:** occurrences missed while the server was down, or while
  the member was locked (their file cannot be read, so nothing of theirs can run), are
  not replayed one by one: the job runs **once** at the first look after it, then
  continues with its next occurrence after *now*. No storm of missed runs.
- **Pause:** a paused job does not run; resuming continues with the next occurrence
  after the moment of resuming (the paused time is not "missed").
- **Not twice after a restart:** each occurrence is delivered with the idempotency key
  ``job:<id>:<due_at>``; a crash after the prompt was stored and before the next
  occurrence was written re-delivers the same key, which is stored once.

Natural phrases ("every weekday at 8", "werktags um 8") are mapped to cron by
``phrase_to_cron``: a small documented grammar (no library parses English *and*
German recurrence phrases to cron; ``recurrent`` is English-only and yields RRULEs)
whose words live in the locale catalogs (``recurrence.words.*``), so a language's file
brings its phrases.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from dataclasses import dataclass
from typing import Iterable, Mapping

from croniter import CroniterError, croniter

from skald_hookspecs.types import I18nBundle
from skald_host.core.i18n import Strings
from skald_host.core.refusal import Refusal

#: A scheduled prompt's message is the one whose idempotency key starts so
#: (``deliver_due_jobs``), and its ``user_message`` event says ``scheduled``: its
#: visible marker ("[Scheduled]", "[Geplant]") follows the member's language, so the
#: text is no test of it.
SCHEDULED_KEY = "job:"

UTC = dt.timezone.utc
#: The shortest interval a recurring prompt may have: each run is a model turn.
MIN_INTERVAL = dt.timedelta(minutes=5)


class ScheduleError(Refusal):
    """A recurrence or time zone that cannot be used (the message says why)."""


class Clock:
    """The scheduler's idea of now. Tests set it (``set``/``advance``); unset, it is
    the system clock."""

    def __init__(self) -> None:
        self._fixed: dt.datetime | None = None

    def now(self) -> dt.datetime:
        return self._fixed if self._fixed is not None else dt.datetime.now(UTC)

    def set(self, when: dt.datetime | None) -> None:
        if when is not None and when.tzinfo is None:
            raise ValueError("the clock needs an aware time")
        self._fixed = when.astimezone(UTC) if when is not None else None

    def advance(self, delta: dt.timedelta) -> None:
        self.set(self.now() + delta)


clock = Clock()


def iso(when: dt.datetime) -> str:
    """The one spelling of a UTC time in ``scheduled_jobs`` (sorts as it compares)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def zone(name: str | None) -> zoneinfo.ZoneInfo:
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError("a time zone is needed, such as Europe/Berlin", code="timezone_unknown")
    try:
        return zoneinfo.ZoneInfo(name.strip())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name[:64]!r}; use a name such as Europe/Berlin", code="timezone_unknown") from None


# -- natural phrases -----------------------------------------------------------------------

#: The locale catalogs' keys (``core.recurrence.words.<name>``) that hold the grammar's
#: words: each text lists alternatives separated by ``|`` ("every|each"), lower or upper
#: case alike. The words of every loaded locale count, whatever the reader's language: a
#: member may type English in a German interface. ``filler`` words are dropped from the
#: days part, so they must be single words; ``every``, ``at``, ``minutes``, ``hours``,
#: ``minutely``, ``hourly``, ``monthly``, ``daily``, ``weekdays`` and ``weekend`` may be
#: phrases ("tous les", "jede stunde").
WORDS_KEY = "core.recurrence.words."
WORD_NAMES = (
    "every", "at", "minutes", "hours", "minutely", "hourly", "monthly", "ordinal", "daily", "weekdays", "weekend",
    "filler", *(f"day.{n}" for n in range(7)), "time_suffix", "am", "pm",
)


def _alternatives(texts: Iterable[str]) -> list[str]:
    """The ``|``-separated alternatives of ``texts``, lower case, spaces normalised, each once."""
    out: list[str] = []
    for text in texts:
        for part in text.split("|"):
            word = " ".join(part.lower().split())
            if word and word not in out:
                out.append(word)
    return out


def _either(words: Iterable[str]) -> str:
    """A regex group matching any of ``words`` (the longest first); one that never
    matches when there are none."""
    ordered = sorted(set(words), key=lambda w: (-len(w), w))
    return "(?:" + "|".join(re.escape(w) for w in ordered) + ")" if ordered else "(?!)"


class Phrases:
    """The phrase grammar over a vocabulary (``WORD_NAMES``, each a list of texts with
    ``|``-separated alternatives); compiled once, then ``to_cron`` is cheap."""

    def __init__(self, words: Mapping[str, Iterable[str]]) -> None:
        w = {name: _alternatives(words.get(name, ())) for name in WORD_NAMES}
        self.hourly = frozenset(w["hourly"])
        self.minutely = frozenset(w["minutely"])
        self.days = {word: n for n in range(7) for word in w[f"day.{n}"]}
        self.day_sets = {**{word: "*" for word in w["daily"]}, **{word: "1-5" for word in w["weekdays"]}, **{word: "0,6" for word in w["weekend"]}}
        self.filler = frozenset(part for word in w["filler"] for part in word.split())
        every = _either(w["every"])
        self.every_minutes = re.compile(rf"{every} (\d{{1,2}}) {_either(w['minutes'])}")
        self.every_hours = re.compile(rf"{every} (\d{{1,2}}) {_either(w['hours'])}")
        self.days_at_time = re.compile(rf"(.*?)\s+{_either(w['at'])}\s+(.+)")
        filler = _either(self.filler)
        self.monthly = re.compile(rf"{_either(w['monthly'])}(?:\s+{filler})*\s+(\d{{1,2}}){_either(w['ordinal'])}?")
        self.suffixes = {**{s: None for s in w["time_suffix"]}, **{s: "am" for s in w["am"]}, **{s: "pm" for s in w["pm"]}}
        self.time = re.compile(rf"^(\d{{1,2}})(?:[:.h](\d{{2}}))?\s*({_either(self.suffixes)})?$")

    def _time(self, text: str) -> tuple[int, int] | None:
        match = self.time.match(text.strip())
        if not match:
            return None
        hour, minute, suffix = int(match.group(1)), int(match.group(2) or 0), self.suffixes.get(match.group(3) or "")
        if suffix in ("am", "pm"):  # the 12-hour clock (English): 12am is midnight, 12pm noon
            if not 1 <= hour <= 12:
                return None
            hour = hour % 12 + (12 if suffix == "pm" else 0)
        if hour > 23 or minute > 59:
            return None
        return hour, minute

    def to_cron(self, phrase: str) -> str | None:
        """See ``phrase_to_cron``."""
        text = " ".join(phrase.lower().replace(",", " ").split())
        if not text:
            return None
        if text in self.hourly:
            return "0 * * * *"
        if text in self.minutely:
            return "* * * * *"
        match = self.every_minutes.fullmatch(text)
        if match:
            n = int(match.group(1))
            return f"*/{n} * * * *" if n >= 1 and 60 % n == 0 else None
        match = self.every_hours.fullmatch(text)
        if match:
            n = int(match.group(1))
            return f"0 */{n} * * *" if 1 <= n <= 12 and 24 % n == 0 else None
        # "<days> at <time>": the time is the tail after the first "at"/"um".
        match = self.days_at_time.fullmatch(text)
        if not match:
            return None
        days_text, time_text = match.group(1), match.group(2)
        when = self._time(time_text)
        if when is None:
            return None
        hour, minute = when
        monthly = self.monthly.fullmatch(days_text)
        if monthly:
            day = int(monthly.group(1))
            return f"{minute} {hour} {day} * *" if 1 <= day <= 28 else None
        words = [w for w in days_text.split() if w not in self.filler]
        if not words:
            return None
        if " ".join(words) in self.day_sets:
            return f"{minute} {hour} * * {self.day_sets[' '.join(words)]}"
        days: list[int] = []
        for word in words:
            key = word[:-1] if word.endswith("s") and word[:-1] in self.days and word not in self.days else word  # "mondays", "montags"
            if key not in self.days:
                return None
            if self.days[key] not in days:
                days.append(self.days[key])
        return f"{minute} {hour} * * {','.join(str(d) for d in sorted(days))}"


_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def describe_cron(cron: str) -> str | None:
    """``cron`` in English words for the model ("every 5 minutes", "every Monday,
    Friday at 08:30"), or None for an expression the phrase grammar cannot produce (the
    caller then shows the expression itself). A job set from a cron expression keeps no
    phrase, and ``list_scheduled_prompts`` told it as "cron (cron */5 * * * *, UTC)"."""
    parts = cron.split()
    if len(parts) != 5:
        return None
    minute, hour, day, month, weekday = parts
    if month != "*":
        return None
    if (hour, day, weekday) == ("*", "*", "*"):
        if minute == "*":
            return "every minute"
        if minute == "0":
            return "every hour"
        if re.fullmatch(r"\*/\d{1,2}", minute):
            return f"every {int(minute[2:])} minutes"
        return None
    if minute == "0" and re.fullmatch(r"\*/\d{1,2}", hour) and (day, weekday) == ("*", "*"):
        return f"every {int(hour[2:])} hours"
    if not (minute.isdigit() and hour.isdigit() and int(minute) < 60 and int(hour) < 24):
        return None
    at = f"at {int(hour):02d}:{int(minute):02d}"
    if day.isdigit() and weekday == "*":
        return f"on day {int(day)} of every month {at}"
    if day != "*":
        return None
    if weekday == "*":
        return f"every day {at}"
    if weekday == "1-5":
        return f"every weekday {at}"
    if weekday in ("0,6", "6,0"):
        return f"every weekend day {at}"
    if re.fullmatch(r"[0-7](,[0-7])*", weekday):
        return "every " + ", ".join(dict.fromkeys(_WEEKDAYS[int(d)] for d in weekday.split(","))) + f" {at}"
    return None


def _build(strings: Strings) -> Phrases:
    return Phrases({name: strings.texts(WORDS_KEY + name) for name in WORD_NAMES})


def phrases(strings: Strings | None = None) -> Phrases:
    """The grammar over the words of every locale ``strings`` holds (a plugin's ``core``
    bundle that adds a language adds its words), built once per change of the catalogs;
    without ``strings``, over the host's own locale files."""
    if strings is None:
        return _shipped()
    return strings.derived("schedules.phrases", _build)


@functools.lru_cache(maxsize=1)
def _shipped() -> Phrases:
    from skald_host.builtins.strings import LOCALES  # the host's own files, read once

    return _build(Strings([I18nBundle.from_folder("core", LOCALES)]))


def phrase_to_cron(phrase: str, grammar: Phrases | None = None) -> str | None:
    """The cron expression a natural phrase means, or None if it is not one we know.

    The grammar's words come from the locale catalogs (``core.recurrence.words.*``, see
    ``WORD_NAMES``; ``grammar`` defaults to the host's own files); in English and German
    (case and commas do not matter):

    - ``every N minutes`` / ``alle N Minuten``            → ``*/N * * * *`` (N divides 60; below 5
      the recurrence is then refused as too often, not as unreadable)
    - ``every minute`` / ``jede Minute``                  → ``* * * * *`` (refused the same way)
    - ``every hour`` / ``hourly`` / ``stündlich``         → ``0 * * * *``
    - ``every N hours`` / ``alle N Stunden``              → ``0 */N * * *``
    - ``<days> at <time>``, where <days> is ``every day``/``daily``/``täglich``/
      ``jeden Tag``, ``every weekday``/``werktags``/``an Werktagen``, ``every weekend``/
      ``am Wochenende``, or day names (``every monday and thursday``, ``montags``,
      ``mo, mi, fr``), and <time> is ``8``, ``8:30``, ``08.30``, ``8h30``, ``8am``,
      ``8:30 pm``, ``20 Uhr``                             → ``M H * * <dow>``
    - ``every month on the 1st at 9`` / ``monatlich am 1. um 9`` → ``0 9 1 * *``
    """
    return (grammar or _shipped()).to_cron(phrase)


# -- recurrences ---------------------------------------------------------------------------


#: Every kind of calendar year (its first weekday, leap or not) occurs within these 28
#: years, and none of them is a century year that skips its leap day: a pattern of days
#: that ever has two consecutive matching days has them here.
_CALENDAR_CYCLE = range(2030, 2058)


def _shortest_gap(cron: str) -> dt.timedelta:
    """The shortest wall-clock time between two consecutive occurrences of ``cron``,
    over its whole cycle, not just the first two after some moment: ``0,1 * * * *``
    runs twice a minute apart every hour, ``*/7 * * * *`` fires at :56 and then :00.

    Computed from the expanded fields rather than by walking occurrences (a walk over
    the years a day pattern can need takes hundreds of milliseconds on the event
    loop). Within a day, the gap is that of the minute-of-day set, which every matching
    day repeats; across midnight, it is the step from the day's last time to its first,
    which counts only when two consecutive days both match. DST can shorten one gap a
    year (the hour the clocks skip); that is not a way to run more often, and is not
    counted."""
    minutes, hours, days, months, weekdays = croniter(cron).expanded
    minute_set = range(60) if minutes == ["*"] else minutes
    hour_set = range(24) if hours == ["*"] else hours
    times = sorted({hour * 60 + minute for hour in hour_set for minute in minute_set})
    within = min((b - a for a, b in zip(times, times[1:])), default=24 * 60)
    across = 24 * 60 - times[-1] + times[0]
    if across < within and across * 60 < MIN_INTERVAL.total_seconds() and not _consecutive_days(cron, tuple(days), tuple(months), tuple(weekdays)):
        across = 24 * 60
    return dt.timedelta(minutes=min(within, across))


@functools.lru_cache(maxsize=256)
def _consecutive_days(cron: str, days: tuple, months: tuple, weekdays: tuple) -> bool:
    """Whether two consecutive calendar days can both match. Fields with ``L``, ``W``
    or ``#`` are answered yes without looking: a refusal there is the safe error."""
    plain = all(isinstance(v, int) or v == "*" for v in (*days, *months, *weekdays))
    if not plain or "#" in cron:
        return True
    day_set = None if days == ("*",) else set(days)
    month_set = set(range(1, 13)) if months == ("*",) else set(months)
    weekday_set = None if weekdays == ("*",) else {w % 7 for w in weekdays}

    def matches(year: int, month: int, day: int) -> bool:
        if month not in month_set:
            return False
        if day_set is None and weekday_set is None:
            return True
        weekday = (dt.date(year, month, day).weekday() + 1) % 7  # cron counts from Sunday = 0
        # One field given: it decides. Both given: either matching is enough (cron's
        # rule, and croniter's default).
        return (day_set is not None and day in day_set) or (weekday_set is not None and weekday in weekday_set)

    if day_set is None:  # a weekday pattern: every month has every pair of neighbouring weekdays
        return weekday_set is None or any((w + 1) % 7 in weekday_set for w in weekday_set)
    # Days of the month alone repeat with the leap year: a common year, a leap year
    # and the turn of the year between them hold every neighbouring pair. With
    # weekdays as well, the whole cycle of calendar years is needed (a few ms; such a
    # pattern is only walked when its times also wrap around midnight in under the
    # minimum, and each pattern is walked once).
    years = _CALENDAR_CYCLE if weekday_set is not None else range(2031, 2033)
    previous = False
    day = dt.date(years.start, 1, 1)
    end = dt.date(years.stop, 1, 1)
    one = dt.timedelta(days=1)
    while day < end:
        if day.month not in month_set:  # jump to the next month: nothing in it matches
            day = dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)
            previous = False
            continue
        current = matches(day.year, day.month, day.day)
        if current and previous:
            return True
        previous = current
        day += one
    return False


@dataclass(frozen=True)
class Recurrence:
    """A checked recurrence: the cron expression and the zone it is read in."""

    cron: str
    timezone: str

    @classmethod
    def parse(cls, when: str, timezone: str | None, grammar: Phrases | None = None) -> "Recurrence":
        """A cron expression (five fields) or a phrase ``phrase_to_cron`` knows (in
        ``grammar``: the words of the host's catalogs, ``phrases(core.strings)``)."""
        if not isinstance(when, str) or not when.strip() or len(when) > 200:
            raise ScheduleError("say when: a cron expression such as '0 8 * * 1-5' or a phrase such as 'every weekday at 8'", code="recurrence_invalid")
        zone(timezone)
        text = " ".join(when.split())
        cron = phrase_to_cron(text, grammar)
        if cron is None:
            if len(text.split(" ")) != 5 or not croniter.is_valid(text):
                raise ScheduleError(
                    f"cannot read {text[:80]!r} as a schedule: use a cron expression such as '0 8 * * 1-5'"
                    " or a phrase such as 'every weekday at 8'",
                    code="recurrence_invalid",
                )
            cron = text
        recurrence = cls(cron, timezone.strip())  # type: ignore[union-attr]
        recurrence._check_interval()
        return recurrence

    def _check_interval(self) -> None:
        self.next_after(dt.datetime(2030, 1, 7, tzinfo=UTC))  # refuses a schedule that never runs (30 February)
        if _shortest_gap(self.cron) < MIN_INTERVAL:
            raise ScheduleError(
                f"a recurring prompt may run at most every {int(MIN_INTERVAL.total_seconds() // 60)} minutes",
                code="recurrence_too_often",
            )

    def next_after(self, after: dt.datetime, *, fired: dt.datetime | None = None) -> dt.datetime:
        """The first occurrence strictly after ``after`` (UTC). ``fired``, the
        occurrence that ran last, keeps a local time the clock passes twice (fall back)
        from running at its second passing."""
        tz = zone(self.timezone)
        fired_local = fired.astimezone(tz).replace(tzinfo=None) if fired is not None else None
        it = croniter(self.cron, after.astimezone(tz))
        for _ in range(1000):
            try:
                candidate = it.get_next(dt.datetime)
            except CroniterError:  # a date that never comes, such as 30 February
                break
            if candidate.tzinfo is None:
                candidate = candidate.replace(tzinfo=tz)
            if candidate.astimezone(UTC) <= after:
                continue
            if fired_local is not None and candidate.replace(tzinfo=None) <= fired_local:
                continue  # the same wall-clock time again (the clocks went back): it ran
            return candidate.astimezone(UTC)
        raise ScheduleError("this schedule never runs", code="recurrence_invalid")

    def upcoming(self, after: dt.datetime, count: int = 3) -> list[dt.datetime]:
        out: list[dt.datetime] = []
        fired = None
        for _ in range(count):
            nxt = self.next_after(after, fired=fired)
            out.append(nxt)
            after = fired = nxt
        return out


def following(recurrence: Recurrence, occurrence: dt.datetime, now: dt.datetime) -> dt.datetime:
    """When a job that just ran ``occurrence`` runs next, at ``now``: the first
    occurrence after both — so occurrences missed meanwhile are skipped (the one run
    that just happened was their catch-up) — and never the same local time twice."""
    return recurrence.next_after(max(occurrence, now), fired=occurrence)

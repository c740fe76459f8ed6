"""System agents: background work the host's one scheduler runs for a member without
being asked (seed 000). Since 1.3.

The unit of work is one agent for one member. An agent owns no timer and no member
list: it says whether there is work (``has_work``) and does it (``run``), both over a
``SystemAgentContext`` the scheduler builds for that member; the host decides who and
when, from state it persists (so a weekly agent still comes due after a reboot).

Scopes:

- ``per_member``: one pass per unlocked member, in that member's own file (their
  events, their private memory, their run log, their own reports).
- ``per_subject``: one pass per supervised member (the *subject*), run in the runtime
  of one of their supervisors who is unlocked; the report is filed for all of the
  subject's supervisors and never reaches the subject. Due-ness is a per-subject
  watermark (``window_start``) and ``run_at_hour``, not the attempt clock.
- ``instance``: ownerless work (the shared memory), run as the first unlocked admin.

Settings: every agent has exactly one ``ConfigSet`` whose ``owner`` is the agent's id,
with at least the fields ``enabled`` (boolean) and, but for ``per_subject`` agents,
``interval`` (integer, in the agent's ``interval_unit``); a ``per_subject`` agent may
have ``run_at_hour`` (0-23). The host refuses a plugin whose agents and sets disagree.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Mapping, Protocol

Scope = Literal["per_member", "per_subject", "instance"]
IntervalUnit = Literal["minutes", "hours", "days"]

#: Seconds per ``interval_unit``.
UNIT_SECONDS: Mapping[str, int] = {"minutes": 60, "hours": 3600, "days": 86400}

#: A review's final message that is exactly this (or starts with it) files no report.
NOTHING_TO_REPORT = "NOTHING_TO_REPORT"


@dataclass(frozen=True)
class Report:
    """A document a system agent files about a stretch of time: ``title`` and
    ``summary`` are shown in lists, ``body`` (markdown) when one is opened. Since 1.3."""

    title: str
    summary: str
    body: str


_HEADING = re.compile(r"^\s*#{1,6}\s+(.+?)\s*#*\s*$")


def parse_report(text: str) -> Report | None:
    """A report from a model's final message, read shallowly (seed 001 "allow_tools"):
    a leading markdown heading is the title, the first paragraph after it the summary,
    the whole text the body; ``NOTHING_TO_REPORT`` (or an empty message) is ``None``,
    no report. A message without a heading takes its first line as the title. Since 1.3."""
    stripped = (text or "").strip()
    if not stripped or stripped.upper().startswith(NOTHING_TO_REPORT):
        return None
    lines = stripped.splitlines()
    heading = _HEADING.match(lines[0])
    title = heading.group(1) if heading else lines[0].strip()
    rest = "\n".join(lines[1:]).strip() if heading else stripped
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", rest) if p.strip()]
    summary = paragraphs[0] if paragraphs else title
    if not heading and len(paragraphs) > 1 and paragraphs[0] == lines[0].strip():
        summary = paragraphs[1]
    return Report(title=title[:200], summary=" ".join(summary.split())[:1000], body=stripped)


class SystemAgentContext(Protocol):
    """What one pass of an agent may see and do. Built by the scheduler per member (or
    subject); it carries ids, never a database handle. Since 1.3."""

    agent_id: str
    #: The member whose runtime the pass runs in: their file holds the run log, the
    #: ephemeral turn and (``per_member``) their own reports; ``notify`` tells them.
    member_id: str
    #: ``per_subject``: the member whose conversations are reviewed; else None.
    subject_id: str | None
    #: The scheduler's clock (aware, UTC): tests move it.
    now: dt.datetime
    #: ``per_subject``: the start of the window not yet covered (None: never covered,
    #: the window starts a day before ``now``). Else None.
    window_start: dt.datetime | None
    #: The agent's config set, stored values over the fields' defaults.
    settings: Mapping[str, Any]
    #: Counters the run may raise (``stats["events"] += 1``): stored with the run, shown
    #: to the member in their run log. Numbers only, never contents.
    stats: dict[str, int]

    async def events(self, *, after: int = 0, limit: int = 100) -> list[Mapping[str, Any]]:
        """The member's events of every plugin with an id above ``after``, oldest first:
        ``{"id", "plugin_id", "kind", "data", "created_at"}``."""

    async def memory_notes(self, store: Literal["private", "shared"]) -> list[Mapping[str, str]]:
        """The notes of the member's private memory or of the shared memory, read-only:
        ``{"path", "content"}`` each."""

    async def transcript(self) -> str:
        """``per_subject``: what the subject and their assistant said in the window, as
        prose grouped by conversation; "" when nothing was said. Never holds tool calls,
        sub-agent frames, machinery-injected turns or earlier review passes."""

    async def subject_profile(self) -> str:
        """``per_subject``: the subject's profile (name, age, sex, language, notes)."""

    async def run_turn(self, agent: str, message: str, *, substitutions: Mapping[str, str] | None = None) -> str:
        """Run one unattended turn of the agent definition ``agent`` (a directory the
        plugin registered with ``register_agent_dirs``; ``kind: system``) in a
        conversation of its own that is deleted afterwards, and return the final
        assistant message. ``substitutions`` replace ``<!-- KEY -->`` markers of its
        system prompt. An agent with ``allow_tools: false`` is offered no tool at all;
        any approval an unattended turn would need is denied."""

    async def notify(self, text: str) -> None:
        """Tell the member (``member_id``) now, on their home source (web, Telegram,
        mobile)."""

    async def file_report(self, report: Report, *, kind: str) -> str:
        """File a report where its audience can read it: ``per_member`` in the member's
        own file, ``per_subject`` for the subject's supervisors, ``instance`` for the
        admins. ``kind`` is the producer's own word (``"conversation_review"``).
        Returns its id."""

    async def memo_get(self, key: str) -> Any:
        """A small value this agent kept for the member (a cursor), or None."""

    async def memo_set(self, key: str, value: Any) -> None:
        """Keep a JSON value for the next pass (in the member's own file)."""

    def translate(self, key: str, **values: Any) -> str:
        """An i18n string of the agent's plugin in the member's language: ``"digest"``
        reads the bundle key ``"<plugin id>.digest"``, and a key that already starts
        with ``"<plugin id>."`` is taken as it is (as ``HostApi.translate`` takes
        it). A key the bundles lack comes back as the key itself."""


@dataclass(frozen=True)
class SystemAgent:
    """Background work run by the host's one scheduler (seed 000).

    Each agent needs its settings: the plugin registers (``register_config_sets``) one
    ``ConfigSet`` whose ``owner`` is the agent's ``id``, holding the fields ``enabled``
    (``"boolean"``: the agent runs only while it is on) and, but for ``per_subject``
    agents, ``interval`` (``"integer"``, in ``interval_unit``); a ``run_at_hour`` field
    is an ``"integer"`` too. A plugin whose agents and sets disagree (a set missing, a
    field missing or of another type) is refused at load.

    ``run(ctx)`` does one pass and may return nothing; ``has_work(ctx)`` (since 1.3;
    None: always) is asked first, and a pass without work writes no run row. Both are
    ``async def``: a plain ``def`` is refused at load (``run must be an async callable
    (async def)``).
    ``interval_seconds`` is the default interval; the admin's ``interval`` setting (in
    ``interval_unit``) replaces it. ``per_member_interval``: the admin may set the
    interval per member (the override may be shorter than the instance value).
    ``run_at_hour``: ``per_subject`` agents come due once a day at this local hour of
    the instance's time zone (a DST-skipped hour still runs once).
    ``description``: shown on the system-agents page (``agent.<id>.description`` of
    the plugin's bundle translates it; ``agent.<id>.title`` the title).
    ``per_subject`` and the fields after ``extra`` since 1.3."""

    id: str
    title: str
    interval_seconds: int
    run: Callable[..., Awaitable[Any]]
    scope: Literal["instance", "per_member", "per_subject"] = "per_member"
    extra: Mapping[str, Any] = field(default_factory=dict)
    has_work: Callable[..., Awaitable[bool]] | None = None
    description: str = ""
    interval_unit: IntervalUnit = "minutes"
    per_member_interval: bool = False
    run_at_hour: int | None = None

"""skald-system-agents: event triage, the memory lints and the conversation review.

Each agent is a ``SystemAgent`` with one settings set owned by its id; the host's one
scheduler decides who and when (seed 000). Every pass talks with the model through a
tool-less agent (``allow_tools: false``): what it reads (events, notes, transcripts) is
other people's text, and the round an injected instruction would act in has no tools
in it. What it concludes comes back as the final message: a notification, a report, or
``NOTHING_TO_REPORT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from skald_hookspecs import ConfigField, ConfigSet, I18nBundle, PluginInfo, SystemAgent, hookimpl, parse_report
from skald_hookspecs.system_agents import SystemAgentContext

from skald_system_agents.strings import STRINGS

PLUGIN_ID = "system_agents"
AGENTS_DIR = Path(__file__).resolve().parent / "agents"
#: Events read per pass, and the characters of one event's data shown to the model.
EVENTS_PER_PASS = 50
EVENT_CHARS = 2000
NOTE_CHARS = 8000
NOTIFICATION_CHARS = 1500


@hookimpl
def plugin_info() -> PluginInfo:
    # manages_own_access: nothing here is a member-facing feature to grant; the admin
    # turns each agent on or off, and a supervised member is chosen on the member's page.
    return PluginInfo(
        id=PLUGIN_ID,
        title="System agents",
        spec=">=1.3,<2",
        description="Background agents: event triage, memory checks and the nightly conversation review.",
        icon="bot",
        manages_own_access=True,
    )


@hookimpl
def register_i18n(register: Callable[..., None]) -> None:
    register(I18nBundle(PLUGIN_ID, STRINGS))


@hookimpl
def register_agent_dirs(register: Callable[..., None]) -> None:
    register(AGENTS_DIR)


# -- event triage ---------------------------------------------------------------------------


async def _new_events(ctx: SystemAgentContext) -> list[Any]:
    return await ctx.events(after=int(await ctx.memo_get("cursor") or 0), limit=EVENTS_PER_PASS)


async def triage_has_work(ctx: SystemAgentContext) -> bool:
    return bool(await _new_events(ctx))


async def triage_run(ctx: SystemAgentContext) -> None:
    events = await _new_events(ctx)
    ctx.stats["events"] = len(events)
    if not events:
        return
    lines = []
    for event in events:
        data = json.dumps(event["data"], ensure_ascii=False)[:EVENT_CHARS]
        lines.append(f"- [{event['created_at']}] from {event['plugin_id']} ({event['kind']}): {data}")
    answer = await ctx.run_turn("event-triage", "New events:\n" + "\n".join(lines))
    # The cursor moves once the model has read them: a failed turn reads them again.
    await ctx.memo_set("cursor", events[-1]["id"])
    if parse_report(answer) is None:
        return
    await ctx.notify(answer.strip()[:NOTIFICATION_CHARS])
    ctx.stats["notified"] = 1


# -- the memory lints ---------------------------------------------------------------------------


def _lint(which: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The private and the shared lint differ only by fields (seed 000): which pool,
    which prompt, which notification."""
    agent = f"memory-lint-{which}"
    message_key = "memory_report_ready" if which == "private" else "shared_report_ready"

    async def has_work(ctx: SystemAgentContext) -> bool:
        # A member who never uses memory collects no weekly row and no notification; an
        # idle pass starts no week, so their first note is checked within the hour.
        return bool(await ctx.memory_notes(which))  # type: ignore[arg-type]

    async def run(ctx: SystemAgentContext) -> None:
        notes = await ctx.memory_notes(which)  # type: ignore[arg-type]
        ctx.stats["notes"] = len(notes)
        text = "\n\n".join(f"## {n['path']}\n{n['content'][:NOTE_CHARS]}" for n in notes)
        report = parse_report(await ctx.run_turn(agent, "The notes:\n\n" + text))
        if report is None:
            return
        await ctx.file_report(report, kind="memory_lint")
        ctx.stats["reports"] = 1
        await ctx.notify(ctx.translate(message_key, title=report.title))

    return has_work, run


# -- the conversation review ----------------------------------------------------------------------


async def review_has_work(ctx: SystemAgentContext) -> bool:
    return bool(await ctx.transcript())


async def review_run(ctx: SystemAgentContext) -> None:
    transcript = await ctx.transcript()
    if not transcript:
        return
    answer = await ctx.run_turn(
        "conversation-review",
        "The transcript since the last review (what was said; tool calls are not shown):\n\n" + transcript,
        substitutions={"SUBJECT_PROFILE": await ctx.subject_profile()},
    )
    report = parse_report(answer)
    if report is None:
        return
    await ctx.file_report(report, kind="conversation_review")
    ctx.stats["reports"] = 1
    await ctx.notify(ctx.translate("review_report_ready", title=report.title))


# -- registration: the agents and their settings, one set per agent -------------------------------


def _settings(agent_id: str, title: str, *fields: ConfigField) -> ConfigSet:
    return ConfigSet(id=agent_id, title=title, owner=agent_id, fields=(ConfigField("enabled", "boolean", "Enabled", default=True), *fields))


def _interval(unit: str, default: int) -> ConfigField:
    return ConfigField("interval", "integer", f"Interval ({unit})", default=default, minimum=1, maximum=100000)


@hookimpl
def register_config_sets(register: Callable[..., None]) -> None:
    register(_settings("event_triage", "Event triage", _interval("minutes", 5)))
    register(_settings("memory_lint_private", "Memory check", _interval("days", 7)))
    register(_settings("memory_lint_shared", "Shared memory check", _interval("days", 7)))
    # Once a night at an hour, not every so often: no interval.
    register(_settings(
        "conversation_review", "Conversation review",
        ConfigField("run_at_hour", "integer", "Hour of the night it runs (instance time zone)", default=4, minimum=0, maximum=23),
    ))


@hookimpl
def register_system_agents(register: Callable[..., None]) -> None:
    private_has_work, private_run = _lint("private")
    shared_has_work, shared_run = _lint("shared")
    register(SystemAgent(
        id="event_triage", title="Event triage", interval_seconds=5 * 60, run=triage_run, has_work=triage_has_work,
        scope="per_member", interval_unit="minutes", per_member_interval=True,
        description="Reads your new events (notifications from your connectors) and tells you when something needs you.",
    ))
    register(SystemAgent(
        id="memory_lint_private", title="Memory check", interval_seconds=7 * 86400, run=private_run, has_work=private_has_work,
        scope="per_member", interval_unit="days",
        description="Once a week, reads your private memory notes and reports contradictions and stale facts.",
    ))
    register(SystemAgent(
        id="memory_lint_shared", title="Shared memory check", interval_seconds=7 * 86400, run=shared_run, has_work=shared_has_work,
        scope="instance", interval_unit="days",
        description="Once a week, reads the shared memory and reports problems, for the admins.",
    ))
    register(SystemAgent(
        id="conversation_review", title="Conversation review", interval_seconds=86400, run=review_run, has_work=review_has_work,
        scope="per_subject", interval_unit="days", run_at_hour=4,
        description="Each night, reads what a supervised member said since the last review and writes one report for their supervisors.",
    ))

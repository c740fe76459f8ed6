"""The host's own agent tools — notify, list_agents, the sub-agent delegate, skills and
scheduled prompts — registered through ``register_tools`` like any plugin's, using
only what ``ToolContext.turn`` offers every tool."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Mapping

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool, ToolContext, ToolError
from skald_host.core.refusal import ToolRefusal
from skald_host.core.schedules import describe_cron

MAX_TEXT = 20_000


def _text(args: Mapping[str, Any], name: str, limit: int = MAX_TEXT) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"'{name}' must be non-empty text")
    if len(value) > limit:
        raise ToolError(f"'{name}' is longer than {limit} characters")
    return value


async def notify(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    await ctx.turn.notify(_text(args, "message"))
    return "The member was notified."


async def list_agents(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    agents = ctx.turn.agents()
    if not agents:
        return "No task agents are available."
    return "\n".join(f"- {a['id']}: {a['title']} — {a['description']}" for a in agents)


#: What an ``execute_task`` call may narrow (seed 004 §9).
LIMIT_KEYS = ("timeout_secs", "max_iterations", "max_result_chars")


def _limits(args: Mapping[str, Any]) -> dict[str, Any] | None:
    limits = args.get("limits")
    if limits is None:
        return None
    if not isinstance(limits, dict):
        raise ToolError("'limits' must be an object")
    # Refused with what was wrong, not dropped in silence: the model would believe it
    # had narrowed a bound it had not. (Above the agent's own bound is allowed: the run
    # keeps its bound, as the description says: never wider.)
    for key, value in limits.items():
        if key not in LIMIT_KEYS:
            raise ToolError(f"'limits' has no {key!r}; it may hold {', '.join(LIMIT_KEYS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ToolError(f"'limits.{key}' must be a positive whole number, not {value!r}")
    return dict(limits)


async def execute_task(args: Mapping[str, Any], ctx: ToolContext) -> str:
    """One task (``agent`` + ``task``), or a batch (``tasks``) answered in request order."""
    assert ctx.turn is not None
    mode = args.get("mode", "foreground")
    if "tasks" in args:
        tasks = args["tasks"]
        if not isinstance(tasks, list) or not tasks or len(tasks) > 8 or not all(isinstance(t, dict) for t in tasks):
            raise ToolError("'tasks' must be a list of 1 to 8 objects with 'agent' and 'task'")
        if mode != "foreground":
            raise ToolError("a batch runs in the foreground; start background runs one at a time")
        requests = [(_text(t, "agent", 64), _text(t, "task")) for t in tasks]
        results = await ctx.turn.delegate_batch(requests, limits=_limits(args))
        return "\n\n".join(f"[{i + 1}] {agent}:\n{result}" for i, ((agent, _), result) in enumerate(zip(requests, results)))
    return await ctx.turn.delegate(_text(args, "agent", 64), _text(args, "task"), mode=mode, limits=_limits(args))


async def agent_task(args: Mapping[str, Any], ctx: ToolContext) -> str:
    """Runs this agent may see (seed 004 §7): list them, read one's whole result, cancel one."""
    assert ctx.turn is not None
    action = args.get("action")
    if action == "list":
        runs = await ctx.turn.agent_runs()
        if not runs:
            return "No sub-agent runs in this conversation."
        return "\n".join(f"- {r['id']} {r['agent_id']} ({r['mode']}): {r['status']} — {r['task'][:80]}" for r in runs)
    run_id = _text(args, "run_id", 64)
    if action in ("get", "get_result"):
        run = await ctx.turn.agent_run(run_id)
        if run is None:
            raise ToolError("no such run here")
        if action == "get_result":
            return run["result"] if run["result"] is not None else f"The run has no result ({run['status']}{': ' + run['error'] if run['error'] else ''})."
        return json.dumps({k: run[k] for k in ("id", "agent_id", "mode", "status", "task", "error", "created_at", "finished_at")})
    if action == "cancel":
        if not await ctx.turn.cancel_agent_run(run_id):
            raise ToolError("no such live run here")
        return f"Run {run_id} was cancelled."
    raise ToolError("'action' must be list, get, get_result or cancel")


async def emit_signal(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    return await ctx.turn.emit_signal(
        args.get("key"), args.get("severity", "info"), args.get("summary"), args.get("details"), args.get("dedupe_key")  # type: ignore[arg-type]
    )


async def get_skill(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    return await ctx.turn.get_skill(_text(args, "name", 64))


async def schedule_prompt(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    prompt = _text(args, "prompt")
    if "every" in args:
        every = _text(args, "every", 200)
        timezone = _text(args, "timezone", 64) if args.get("timezone") is not None else None
        try:
            job_id = await ctx.turn.schedule(prompt, every=every, timezone=timezone)
        except ValueError as exc:
            raise ToolRefusal.of(exc) from None
        return "Scheduled, recurring:\n" + _describe(await ctx.turn.scheduled_prompts(), job_id)
    if "in_minutes" in args:
        minutes = args["in_minutes"]
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes <= 60 * 24 * 366:
            raise ToolError("'in_minutes' must be a number of minutes between 0 and one year")
        due = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=float(minutes))
    else:
        raw = _text(args, "at", 64)
        try:
            due = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ToolError("'at' must be an ISO 8601 time such as 2026-12-24T18:00:00+01:00") from None
        if due.tzinfo is None:
            raise ToolError("'at' must include a time zone offset")
    due_utc = due.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    try:
        job_id = await ctx.turn.schedule(prompt, due_utc)
    except ValueError as exc:  # a time in the past, say: the model reads why and can ask again
        raise ToolRefusal.of(exc) from None
    # Told as the member reads it (their zone, to the minute), not as a UTC instant the
    # model would pass on: a member in Tokyo was told "15:16:51.117172Z".
    job = next((j for j in await ctx.turn.scheduled_prompts() if j["id"] == job_id), None)
    when = job.get("next_run_local") if job else None
    return f"Scheduled for {when or due_utc} (job {job_id[:8]})."


def _line(job: Mapping[str, Any]) -> str:
    # The phrase is the member's own words ("every weekday at 8"): it says "every" itself.
    # A job set from a cron expression has none: it is described in words where the
    # expression is one the phrases make, else the expression is said once.
    if not job["recurring"]:
        when = "once"
    elif (words := job["phrase"] or describe_cron(job["cron"])) is not None:
        when = f"{words} (cron {job['cron']}, {job['timezone']})"
    else:
        when = f"cron {job['cron']} ({job['timezone']})"
    state = "paused" if job["paused"] else job["status"]
    # Both times as the member reads them (the job's zone), not the last one as a UTC instant.
    last = f"{job['last_status']} at {job.get('last_run_local') or job['last_run_at']}" if job["last_run_at"] else "never run"
    prompt = " ".join(job["prompt"].split())
    return f"- {job['id'][:8]} [{state}] {when}; next run {job.get('next_run_local') or '-'}; last {last}: {prompt[:200]}"


def _describe(jobs: list[Mapping[str, Any]], job_id: str) -> str:
    return "\n".join(_line(job) for job in jobs if job["id"] == job_id)


async def list_scheduled_prompts(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    jobs = await ctx.turn.scheduled_prompts()
    if not jobs:
        return "No scheduled prompts."
    return "\n".join(_line(job) for job in jobs)


async def change_scheduled_prompt(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    job_id = _text(args, "job", 64)
    paused = args.get("paused")
    if paused is not None and not isinstance(paused, bool):
        raise ToolError("'paused' must be true or false")
    changes = {
        "prompt": _text(args, "prompt") if args.get("prompt") is not None else None,
        "every": _text(args, "every", 200) if args.get("every") is not None else None,
        "timezone": _text(args, "timezone", 64) if args.get("timezone") is not None else None,
        "paused": paused,
    }
    if all(value is None for value in changes.values()):
        raise ToolError("say what to change: 'prompt', 'every', 'timezone' or 'paused'")
    try:
        job = await ctx.turn.change_scheduled_prompt(job_id, **changes)
    except ValueError as exc:
        raise ToolRefusal.of(exc) from None
    return "Changed:\n" + _line(job)


async def delete_scheduled_prompt(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    job_id = _text(args, "job", 64)
    try:
        await ctx.turn.delete_scheduled_prompt(job_id)
    except ValueError as exc:
        raise ToolRefusal.of(exc) from None
    return f"Deleted the scheduled prompt {job_id[:8]}."


_JOB = {"type": "string", "description": "the job id (its first 8 characters are enough) from list_scheduled_prompts"}
_EVERY = {
    "type": "string",
    "description": "how often: a cron expression ('0 8 * * 1-5') or a phrase ('every weekday at 8', 'every monday at 9:30',"
    " 'every day at 7pm', 'every 2 hours'), read in the member's time zone",
}
_TIMEZONE = {"type": "string", "description": "an IANA time zone such as Europe/Berlin; default: the member's own"}


TOOLS = (
    Tool(
        "notify",
        "Send the member a short note right away (it appears in this conversation).",
        {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
        notify,
        concurrency_safe=True,
        restart="mark_interrupted",
    ),
    Tool(
        "list_agents",
        "List the task agents execute_task can delegate to from here.",
        {"type": "object", "properties": {}},
        list_agents,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "execute_task",
        "Delegate one self-contained task to a task agent and wait for its answer. Several"
        " execute_task calls in one reply run in parallel. mode 'background' (the conversation's own"
        " agent only) returns at once; the result arrives in this conversation later by itself.",
        {
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": "a task agent id from list_agents"},
                "task": {"type": "string", "description": "everything the agent needs to know"},
                "mode": {"type": "string", "enum": ["foreground", "background"]},
                "tasks": {
                    "type": "array", "description": "instead of agent/task: several tasks, answered in this order",
                    "items": {"type": "object", "properties": {"agent": {"type": "string"}, "task": {"type": "string"}}},
                },
                "limits": {
                    "type": "object", "description": "narrower limits than the agent's own (never wider)",
                    "properties": {k: {"type": "integer", "minimum": 1} for k in LIMIT_KEYS},
                },
            },
        },
        execute_task,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "agent_task",
        "Sub-agent runs of this conversation: action 'list', 'get' (state), 'get_result' (the whole"
        " result, also when it was clipped for you) or 'cancel', with run_id.",
        {
            "type": "object",
            "properties": {"action": {"type": "string", "enum": ["list", "get", "get_result", "cancel"]}, "run_id": {"type": "string"}},
            "required": ["action"],
        },
        agent_task,
        concurrency_safe=True,
        restart="mark_interrupted",
    ),
    Tool(
        "emit_signal",
        "Tell the conversation's agent something before you finish (progress, a finding, a problem)."
        " Bounded: few signals, short summary, small details; the same key is sent once per cooldown.",
        {
            "type": "object",
            "properties": {
                "key": {"type": "string"}, "severity": {"type": "string"}, "summary": {"type": "string"},
                "details": {}, "dedupe_key": {"type": "string"},
            },
            "required": ["key", "summary"],
        },
        emit_signal,
        concurrency_safe=True,
        restart="mark_interrupted",
    ),
    Tool(
        "get_skill",
        "Read one of your skills (the system prompt lists them) before a task it fits.",
        {"type": "object", "properties": {"name": {"type": "string", "description": "a skill's name"}}, "required": ["name"]},
        get_skill,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "schedule_prompt",
        "Deliver a prompt into this conversation later, e.g. a reminder: once ('in_minutes' or 'at', ISO 8601 with"
        " offset) or again and again ('every', in the member's time zone unless 'timezone' says otherwise).",
        {
            "type": "object",
            "properties": {
                "prompt": {"type": "string"},
                "in_minutes": {"type": "number"},
                "at": {"type": "string"},
                "every": _EVERY,
                "timezone": _TIMEZONE,
            },
            "required": ["prompt"],
        },
        schedule_prompt,
        restart="mark_interrupted",
    ),
    Tool(
        "list_scheduled_prompts",
        "List the member's scheduled prompts: id, schedule, next run, last result, paused or not.",
        {"type": "object", "properties": {}},
        list_scheduled_prompts,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "change_scheduled_prompt",
        "Edit, pause ('paused': true) or resume ('paused': false) one of the member's scheduled prompts.",
        {
            "type": "object",
            "properties": {"job": _JOB, "prompt": {"type": "string"}, "every": _EVERY, "timezone": _TIMEZONE, "paused": {"type": "boolean"}},
            "required": ["job"],
        },
        change_scheduled_prompt,
        restart="mark_interrupted",
    ),
    Tool(
        "delete_scheduled_prompt",
        "Delete one of the member's scheduled prompts.",
        {"type": "object", "properties": {"job": _JOB}, "required": ["job"]},
        delete_scheduled_prompt,
        restart="mark_interrupted",
    ),
)


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="agent-tools",
        title="Agent tools",
        description="Notify, list agents, delegate to sub-agents, schedule prompts (once or recurring).",
        icon="tool",
        spec=">=1.0,<2",
    )


@hookimpl
def register_tools(register) -> None:
    for tool in TOOLS:
        register(tool)

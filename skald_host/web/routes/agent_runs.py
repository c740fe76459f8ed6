"""Sub-agent runs and definitions over HTTP (seed 004 §1 "everything auditable"): the
chat's task strip, a run's drill-in, cancelling a run, and the definitions page.

Runs live in the member's own file, so a member only ever reads their own; another
member's run id answers the same 404 as one that never existed. The definitions page
shows an admin the validation state of the whole generation (with the reasons a
refused one was refused); a member sees the definitions and their own recent runs."""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app, request

from skald_host.core.agent.runtime import ChatError
from skald_host.core.agent.subagents.catalog import GenerationRefused
from skald_host.core.agent.subagents.runs import STRIP_CANCELLED_SECONDS
from skald_host.core.identity.access import allowed
from skald_host.web.auth import current_principal, reader_locale, requires
from skald_host.web.body import BOOL, TEXT, array, obj, query, returns
from skald_host.web.errors import ApiError
from skald_host.web.routes.chat import chat_error, runtime

bp = Blueprint("agent_runs", __name__)

#: The depth of a helper the conversation's own agent calls: where the Helpers page
#: asks whether a helper may hand work on.
HELPER_DEPTH = 1

RUN = obj(
    {"id": TEXT, "agent_id": TEXT, "mode": TEXT, "status": TEXT, "depth": {"type": "integer"}, "task": TEXT},
    {"frame_id": TEXT, "spawned_by_call_id": TEXT},
)
RUN_KEYS = ("id", "conversation_id", "agent_id", "definition_hash", "mode", "status", "depth", "task", "caller_run_id", "error",
            "reason", "created_at", "started_at", "finished_at", "frame_id")


def _public(row: dict[str, Any], *, full: bool = False, spawned_by: dict[str, str | None] | None = None) -> dict[str, Any]:
    out = {k: row.get(k) for k in RUN_KEYS}
    if spawned_by is not None:
        out["spawned_by_call_id"] = spawned_by.get(row.get("frame_id") or "")
    out["task"] = out["task"] if full else (out["task"] or "")[:200]
    if full:
        out["result"] = row.get("result")
    return out


@bp.get("/api/conversations/<conversation_id>/runs")
@query(strip={"type": "string", "description": "1: only live runs, those that failed in the last day and those cancelled in the last minute (the task strip)"})
@returns(obj({"runs": array(RUN)}, {"cancelled_seconds": {"type": "integer"}}))
@requires("chat.use")
async def conversation_runs(conversation_id: str) -> dict:
    rt = await runtime()
    try:
        await rt.conversation(conversation_id)
    except ChatError as exc:
        raise chat_error(exc) from None
    strip = request.args.get("strip") == "1"
    rows = await rt.subagents.store.runs(conversation_id, limit=50, strip=strip)
    spawned_by = await _spawning_calls(rt, conversation_id, rows)
    out: dict[str, Any] = {"runs": [_public(r, spawned_by=spawned_by) for r in rows]}
    if strip:
        # The strip reads itself again this long after it shows a cancelled run, which
        # has left by then (no other event may come to refresh it).
        out["cancelled_seconds"] = STRIP_CANCELLED_SECONDS
    return out


async def _spawning_calls(rt: Any, conversation_id: str, rows: list[dict[str, Any]]) -> dict[str, str | None]:
    """The call each run's frame was started by, by frame id: after a reload the chat
    rebuilds a running sub-agent's progress inside that call's card (its live
    ``agent_start`` names the call; the run row does not). The open frames come in one
    read (none at all for a conversation that never delegated); a closed one is read
    alone — the strip lists few of those."""
    frames = {frame.id: frame.spawned_by_call_id for frame in await rt.store.open_frames(conversation_id)}
    for row in rows:
        frame_id = row.get("frame_id")
        if frame_id and frame_id not in frames:
            frames[frame_id] = (await rt.store.frame(frame_id)).spawned_by_call_id
    return frames


@bp.get("/api/agent-runs/<run_id>")
@returns(obj({"run": RUN, "transcript": array(obj())}))
@requires("chat.use")
async def get_run(run_id: str) -> dict:
    rt = await runtime()
    row = await rt.subagents.store.run(run_id)
    if row is None:
        raise ApiError(404, "no such run", code="run_not_found")
    transcript = []
    spawned_by: dict[str, str | None] = {}
    if row["frame_id"]:
        spawned_by[row["frame_id"]] = (await rt.store.frame(row["frame_id"])).spawned_by_call_id
        for message in await rt.subagents.store.transcript(row["frame_id"]):
            transcript.append({
                "id": message["id"], "role": message["role"], "content": message["content"], "status": message["status"],
                "reason": message["reason"],
                "tool_calls": [{"id": c["id"], "name": c["name"], "status": c["status"], "result": c["result"]} for c in message["tool_calls"]],
            })
    return {"run": _public(row, full=True, spawned_by=spawned_by), "transcript": transcript}


@bp.post("/api/agent-runs/<run_id>/cancel")
@returns(obj({"cancelled": BOOL}))
@requires("chat.use")
async def cancel_run(run_id: str) -> dict:
    rt = await runtime()
    if await rt.subagents.store.run(run_id) is None:
        raise ApiError(404, "no such run", code="run_not_found")
    return {"cancelled": await rt.subagents.cancel_run(run_id)}


@bp.get("/api/agent-definitions")
@returns(obj({"definitions": array(obj()), "refused": {"type": ["object", "null"]}, "runs": array(RUN),
              "hand_off": obj({"role_allows": BOOL, "assistants": array(obj({"id": TEXT, "title": TEXT, "delegates": BOOL}))},
                              description="whether the caller's assistants can hand work to helpers: their role, and each chat agent they may start")}))
@requires("chat.use")
async def definitions() -> dict:
    core = current_app.config["SKALD_CORE"]
    member = current_principal().member
    catalog = core.chat.subagent_catalog
    try:
        generation = catalog.current()
    except GenerationRefused:
        generation = None
    is_admin = allowed(member, "settings.manage")
    if generation is not None and not is_admin:
        generation = generation.visible(lambda plugin_id: core.catalog.usable(member, plugin_id))
    items = []
    locale = await reader_locale()
    for definition in sorted((generation.definitions.values() if generation else ()), key=lambda d: d.id):
        items.append({
            **definition.summary(core.strings, locale, plugin=generation.owners.get(definition.id) if generation else None),
            "enabled": definition.enabled, "definition_hash": definition.definition_hash,
            "delegates": None if definition.delegates is None else list(definition.delegates),
            # Whether it is offered execute_task at all when the conversation's agent
            # calls it (depth 1): the runtime's own rule, so the page never claims a
            # delegation the helper cannot make (no such tool, no tools, the depth limit).
            "may_delegate": core.chat.offers_delegation(definition, HELPER_DEPTH),
            "tools": list(definition.tools) if definition.allow_tools else [], "limits": dict(definition.limits),
            "signal": definition.signal is not None, "plugin": generation.owners.get(definition.id) if generation else None,
            "skills": list(definition.skills), "provider": definition.provider, "model": definition.model,
        })
    refused = None
    if catalog.refused is not None:
        # The reasons name files on the server: for the admin, who can fix them.
        refused = {"at": catalog.refused.at, "errors": list(catalog.refused.errors) if is_admin else [], "count": len(catalog.refused.errors)}
    runs: list[dict[str, Any]] = []
    try:
        rt = await runtime()
        runs = [_public(r) for r in await rt.subagents.store.runs(limit=30)]
    except ApiError:
        pass  # the member's file is locked: no runs to show
    # What the page may promise: whether the caller's own assistants can hand work to
    # these helpers at all (their role's ``tools.delegate``, and each chat agent they may
    # start by the rounds' own rule). A companion's member read "the named helpers your
    # assistant can hand work to" though it never could.
    hand_off = {
        "role_allows": allowed(member, "tools.delegate"),
        "assistants": [
            {"id": a.id, "title": a.summary(core.strings, locale)["title"] or a.id, "delegates": core.chat.offers_delegation(a, 0)}
            for a in core.chat.startable_agents(member)
        ],
    }
    return {"definitions": items, "refused": refused, "runs": runs, "hand_off": hand_off}

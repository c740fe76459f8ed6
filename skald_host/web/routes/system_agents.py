"""System agents, their runs, supervision and reports (seed 000, seed 001 "Reports").

Everyone sees the agents and their own run log (no admin override: the log lives in the
caller's own file); the settings only an admin (written as every settings set is,
``PUT /api/admin/settings/<set id>``). Reports: one's own, and those filed
for one as a supervisor. The supervision edges and the per-member intervals are the
admin's, on the member's page.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint, current_app, request

from skald_host.core.identity.users import MemberNotFound
from skald_host.core.system_agents import store
from skald_host.web.auth import current_principal, reader_locale, requires
from skald_host.web.body import BOOL, ID, INT, OBJECT, TEXT, accepts, array, field, integer, json_object, nullable, obj, one_of, query, returns
from skald_host.web.errors import ApiError

bp = Blueprint("system_agents", __name__)

AGENT = obj({
    "id": TEXT, "plugin_id": TEXT, "title": TEXT, "description": TEXT, "scope": TEXT, "interval_unit": TEXT,
    "per_member_interval": BOOL, "enabled": BOOL, "settings": nullable(OBJECT),
    "plugin_running": {**BOOL, "description": "false: its plugin is off or not running, so it does not run whatever `enabled` says"},
    "plugin_enabled": {**BOOL, "description": "its plugin is turned on; with `plugin_running` false, it failed to start or is not ready"},
    "plugin_error": {
        **nullable(TEXT),
        "description": "admins only: why its plugin, enabled, does not run (its startup failed, timed out or waits for settings),"
        " in the reader's language where the plugin or the host has the words; null otherwise",
    },
})
#: ``error``: why a run failed, in English; ``error_code`` and ``error_values`` (when the
#: host knows the reason: no model, the model failed, a stop) say it in the reader's
#: language (``error.<code>``). An unexpected failure has only its type and error id.
RUN = obj({
    "id": ID, "agent_id": TEXT, "status": TEXT, "started_at": TEXT, "finished_at": nullable(TEXT), "stats": OBJECT, "error": nullable(TEXT),
    "error_code": nullable(TEXT), "error_values": OBJECT,
})
REPORT = obj({
    "id": ID, "where": one_of("own", "shared"), "kind": TEXT, "agent_id": TEXT, "title": TEXT, "summary": TEXT, "body": TEXT,
    "subject": nullable(TEXT), "audience": nullable(one_of("supervisors", "admins")), "created_at": TEXT, "read_at": nullable(TEXT), "period_start": nullable(TEXT), "period_end": nullable(TEXT),
})


def _core() -> Any:
    return current_app.config["SKALD_CORE"]


async def _agent_view(entry: Any, admin: bool, locale: str) -> dict[str, Any]:
    core = _core()
    registry = core.system_agents.registry
    strings = core.strings
    settings = None
    if admin:
        settings = await core.instance_settings.shown(entry.config_set.id, locale)
    return {
        "id": entry.id,
        "plugin_id": entry.plugin_id,
        "title": strings.plugin_text(entry.plugin_id, f"agent.{entry.id}.title", locale, entry.agent.title),
        "description": strings.plugin_text(entry.plugin_id, f"agent.{entry.id}.description", locale, entry.agent.description),
        "scope": entry.agent.scope,
        "interval_unit": entry.agent.interval_unit,
        "per_member_interval": entry.agent.per_member_interval,
        "enabled": await registry.enabled(entry),
        "settings": settings,
        "plugin_running": registry.plugin_running(entry),
        "plugin_enabled": registry.plugin_enabled(entry),
        "plugin_error": registry.plugin_error(entry, locale) if admin else None,  # the plugin's startup error is the admin's
    }


@bp.get("/api/system-agents")
@returns(obj({"agents": array(AGENT)}))
async def list_agents() -> dict:
    """Every agent for an admin, who turns them on and off, with its settings; for
    everyone else the agents whose plugin runs (the shell's menu shows Reports and
    System agents only when there are some), settings null."""
    member = current_principal().member
    locale = await reader_locale()
    registry = _core().system_agents.registry
    entries = [e for e in registry.entries if member.is_admin or registry.plugin_running(e)]
    return {"agents": [await _agent_view(e, member.is_admin, locale) for e in entries]}


@bp.get("/api/system-agents/runs")
@query(agent={"type": "string", "description": "only this agent's runs"})
@returns(obj({"runs": array(RUN)}))
async def list_runs() -> dict:
    """The caller's own runs, from their own file: everyone, admin included."""
    agent = request.args.get("agent") or None
    return {"runs": await _core().system_agents.runs_of(current_principal().member.id, agent)}


# -- reports ---------------------------------------------------------------------------------


def _report_view(row: dict[str, Any]) -> dict[str, Any]:
    subject = row.get("subject_display_name") or row.get("subject_username")
    return {
        "id": row["id"], "where": row["where"], "kind": row["kind"], "agent_id": row["agent_id"], "title": row["title"],
        "summary": row["summary"], "body": row["body"], "subject": subject if row["where"] == "shared" else None,
        # Whom a shared report was filed for: a supervisor (about a member) or the admins
        # (about the instance); the page lists them apart. None for one's own.
        "audience": row.get("audience") if row["where"] == "shared" else None,
        "created_at": row["created_at"], "read_at": row["read_at"], "period_start": row["period_start"], "period_end": row["period_end"],
    }


@bp.get("/api/reports")
@returns(obj({"reports": array(REPORT)}))
async def list_reports() -> dict:
    """One's own reports and those filed for one as a supervisor (or, for an admin,
    about the instance); a report about oneself for one's supervisors never."""
    rows = await _core().reports.for_reader(current_principal().member)
    return {"reports": [_report_view(r) for r in rows]}


@bp.post("/api/reports/<where>/<report_id>/read")
@returns(obj({"marked": BOOL}))
async def mark_report_read(where: str, report_id: str) -> dict:
    """First reader wins: ``marked`` false when somebody (or oneself) read it first."""
    marked = await _core().reports.mark_read(current_principal().member, where, report_id)
    if marked is None:
        raise ApiError(404, "no such report", code="report_not_found")
    return {"marked": marked}


# -- the admin's side, on a member's page -------------------------------------------------------


async def _member(member_id: str) -> Any:
    try:
        return await _core().users.get(member_id)
    except MemberNotFound:
        raise ApiError(404, "no such member", code="member_not_found") from None


@bp.get("/api/admin/members/<member_id>/supervisors")
@returns(obj({"supervisors": array(ID)}))
@requires("members.manage")
async def get_supervisors(member_id: str) -> dict:
    await _member(member_id)
    return {"supervisors": await _core().registry.run(lambda c: store.supervisors_of(c, member_id))}


@bp.put("/api/admin/members/<member_id>/supervisors")
@accepts(obj({"supervisors": array(ID, max_items=50)}, extra=False))
@returns(obj({"supervisors": array(ID)}))
@requires("members.manage")
async def put_supervisors(member_id: str) -> dict:
    """Who supervises this member: their conversations are reviewed for these members.
    Replaces the list; a member cannot supervise themselves."""
    await _member(member_id)
    ids = field(await json_object(), "supervisors", list)
    for supervisor_id in ids:
        if supervisor_id == member_id:
            raise ApiError(400, "a member cannot supervise themselves", field="supervisors", code="supervise_self")
        await _member(supervisor_id)
    core = _core()
    added = await core.registry.transaction(lambda c: store.set_supervisors(c, member_id, ids))
    if added:
        # The member learns it at once (their open page, their channel), not only by
        # looking at My account; a review covers nothing from before this moment.
        subject = await core.users.get(member_id)
        names = ", ".join([(await core.users.get(s)).display_name for s in added])
        locale = subject.locale or await core.default_locale()
        await core.notify_member(member_id, core.strings.translate("core.account.supervision_added", locale, names=names))
    return {"supervisors": await core.registry.run(lambda c: store.supervisors_of(c, member_id))}


INTERVAL = obj({
    "agent_id": TEXT, "title": TEXT, "interval_unit": TEXT, "interval": nullable(INT), "instance_interval": INT,
    "plugin_enabled": {**BOOL, "description": "its plugin is turned on (a member's page shows the agents of a plugin that is on)"},
})


async def _intervals(member_id: str) -> list[dict[str, Any]]:
    core = _core()
    registry = core.system_agents.registry
    locale = await reader_locale()
    found = []
    for entry in registry.entries:
        if not entry.agent.per_member_interval:
            continue
        override = (await registry.member_intervals(entry)).get(member_id)
        settings = await registry.settings(entry)
        found.append({
            "agent_id": entry.id,
            "title": core.strings.plugin_text(entry.plugin_id, f"agent.{entry.id}.title", locale, entry.agent.title),
            "interval_unit": entry.agent.interval_unit,
            "interval": override // entry.unit_seconds if override else None,
            "instance_interval": registry.instance_interval(entry, settings) // entry.unit_seconds,
            "plugin_enabled": registry.plugin_enabled(entry),
        })
    return found


@bp.get("/api/admin/members/<member_id>/agent-intervals")
@returns(obj({"intervals": array(INTERVAL)}))
@requires("members.manage")
async def get_intervals(member_id: str) -> dict:
    """The agents whose interval may be set per member (event triage), in each agent's
    own unit; ``interval`` null: the member inherits the instance value."""
    await _member(member_id)
    return {"intervals": await _intervals(member_id)}


@bp.put("/api/admin/members/<member_id>/agent-intervals")
@accepts(obj({"agent_id": TEXT}, {"interval": integer(1, 100000)}, extra=False))
@returns(obj({"intervals": array(INTERVAL)}))
@requires("members.manage")
async def put_interval(member_id: str) -> dict:
    """Set (or with null clear) one agent's interval for this member. Lands on the
    scheduler's next wake-up: it re-reads the interval every pass."""
    await _member(member_id)
    data = await json_object()
    core = _core()
    entry = core.system_agents.registry.get(field(data, "agent_id", str))
    if entry is None or not entry.agent.per_member_interval:
        raise ApiError(404, "no such agent with a per-member interval", field="agent_id", code="agent_not_found")
    interval = field(data, "interval", int, required=False)
    seconds = None if interval is None else max(60, interval * entry.unit_seconds)
    await core.registry.transaction(lambda c: store.set_member_interval(c, entry.id, member_id, seconds))
    core.wake_system_agents()  # a shorter interval may bring the next wake-up forward
    return {"intervals": await _intervals(member_id)}

"""The member's scheduled prompts: list, create, edit, pause, resume and delete — the
schedules page's API, on the same service the agent's tools use
(``skald_host.core.schedules.service``). Everything lives in the member's own file;
another member's job ids answer 404 like ids that never existed."""

from __future__ import annotations

from quart import Blueprint, current_app

from skald_host.core import audit
from skald_host.core.agent.runtime import ChatError
from skald_host.core.identity.access import allowed
from skald_host.core.schedules import Phrases, ScheduleError, phrases
from skald_host.core.schedules import service
from skald_host.web.auth import current_principal, reader_locale, requires
from skald_host.web.body import BOOL, INT, TEXT, accepts, array, json_object, nullable, obj, returns, text
from skald_host.web.errors import ApiError
from skald_host.web.routes.chat import runtime

bp = Blueprint("schedules", __name__)

WHEN = text(200, description="a cron expression ('0 8 * * 1-5') or a phrase ('every weekday at 8', 'werktags um 8')")
TIMEZONE = text(64, description="an IANA time zone (Europe/Berlin); default: the member's setting 'timezone', else UTC")
JOB = obj(
    {
        "id": TEXT, "prompt": TEXT, "conversation_id": TEXT, "conversation_title": TEXT, "recurring": BOOL,
        "cron": nullable(TEXT), "phrase": nullable(TEXT), "timezone": nullable(TEXT), "paused": BOOL,
        "status": {"type": "string", "enum": ["pending", "running", "done", "failed", "cancelled"]},
        "next_run": nullable(TEXT), "last_run_at": nullable(TEXT), "last_status": nullable(TEXT), "runs": INT, "created_at": TEXT,
    },
    description="a scheduled prompt; times are ISO 8601 UTC",
)


def _grammar() -> Phrases:
    """The phrase grammar over the words of every loaded language (a plugin's too)."""
    return phrases(current_app.config["SKALD_CORE"].strings)


def _refused(exc: ScheduleError) -> ApiError:
    return ApiError.refusing(404 if exc.code == "not_found" else 400, exc)


@bp.get("/api/schedules")
@returns(obj({"jobs": array(JOB), "timezone": nullable(TEXT)}))
@requires("chat.use")
async def list_jobs() -> dict:
    rt = await runtime()
    return {"jobs": await service.listing(rt.store), "timezone": await service.member_timezone(rt.store)}


@bp.post("/api/schedules")
@accepts(obj(
    {"prompt": text(service.MAX_PROMPT, min_length=1), "every": WHEN},
    {"timezone": TIMEZONE, "conversation_id": text(64, description="where each run is delivered; default: a new conversation")},
    extra=False,
))
@returns(JOB, 201)
@requires("tools.schedule")
async def create_job():
    data = await json_object()
    rt = await runtime()
    conversation_id = data.get("conversation_id")
    try:
        service.check_prompt(data["prompt"])  # before a conversation is made for it
        await service.check_room(rt.store)
        service.preview(data["every"], data.get("timezone") or await service.member_timezone(rt.store) or service.DEFAULT_TIMEZONE, grammar=_grammar())
        if conversation_id is None:
            # Named as the schedule's, in the member's language: it sits empty at the top of
            # the chat's list until the first run, and a bare prompt there read as a chat
            # nobody started.
            prompt = " ".join(data["prompt"].split())[:60]
            title = current_app.config["SKALD_CORE"].strings.translate("core.schedules.conversation_title", await reader_locale(), prompt=prompt)
            conversation_id = (await rt.create_conversation(title=title))["id"]
        else:
            await rt.conversation(conversation_id)
        job = await service.create(rt.store, conversation_id, data["prompt"], every=data["every"], timezone=data.get("timezone"), grammar=_grammar())
    except ScheduleError as exc:
        raise _refused(exc) from None
    except ChatError as exc:
        raise ApiError.refusing(404 if str(exc).startswith("no such") else 400, exc) from None
    return job, 201


@bp.post("/api/schedules/preview")
@accepts(obj({"every": WHEN}, {"timezone": TIMEZONE}, extra=False))
@returns(obj({"cron": TEXT, "timezone": TEXT, "next_runs": array(TEXT)}))
@requires("chat.use")
async def preview():
    """What a schedule means before it is saved: its cron and its next three runs."""
    data = await json_object()
    rt = await runtime()
    try:
        return service.preview(data["every"], data.get("timezone") or await service.member_timezone(rt.store) or service.DEFAULT_TIMEZONE, grammar=_grammar())
    except ScheduleError as exc:
        raise _refused(exc) from None


@bp.patch("/api/schedules/<job_id>")
@accepts(obj(optional={"prompt": text(service.MAX_PROMPT, min_length=1), "every": WHEN, "timezone": TIMEZONE, "paused": BOOL}, extra=False))
@returns(JOB)
@requires("chat.use")
async def change_job(job_id: str):
    """Edit, pause or resume. Resuming (or a new schedule) runs next at the first
    occurrence after now: a paused stretch is not caught up."""
    data = await json_object()
    member = current_principal().member
    if any(data.get(name) is not None for name in ("prompt", "every", "timezone")) and not allowed(member, "tools.schedule"):
        audit.denied(member.id, "action:tools.schedule", via="schedules_page")
        raise ApiError(403, "forbidden", code="forbidden")
    rt = await runtime()
    try:
        job = await service.find(rt.store, job_id)
        if job["id"] != job_id:
            raise ScheduleError("no such scheduled prompt", code="not_found")
        return await service.change(rt.store, job_id, prompt=data.get("prompt"), every=data.get("every"), timezone=data.get("timezone"), paused=data.get("paused"),
                                    grammar=_grammar())
    except ScheduleError as exc:
        raise _refused(exc) from None


@bp.delete("/api/schedules/<job_id>")
@returns(obj({"deleted": TEXT}))
@requires("chat.use")
async def delete_job(job_id: str):
    rt = await runtime()
    try:
        job = await service.find(rt.store, job_id)
        if job["id"] != job_id:
            raise ScheduleError("no such scheduled prompt", code="not_found")
        await service.delete(rt.store, job_id)
    except ScheduleError as exc:
        raise _refused(exc) from None
    return {"deleted": job_id}

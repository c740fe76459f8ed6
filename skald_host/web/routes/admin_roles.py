"""Admin API for roles (presets and the admin's own)."""

from quart import Blueprint, current_app

from skald_host.core.agent.definitions import AgentError
from skald_host.core.identity.role_store import RoleError
from skald_host.web.auth import requires
from skald_host.web.body import OBJECT, TEXT, accepts, array, json_object, obj
from skald_host.web.errors import ApiError, unknown_fields

bp = Blueprint("admin_roles", __name__)


def _roles():
    return current_app.config["SKALD_CORE"].roles


def _check_start_agent(attrs: object) -> None:
    """A role's start agent (``attrs.chat_agent``) must be a chat agent that exists now:
    the store checks only its form, and a typo or a task agent there left every member of
    the role unable to start a conversation. (A plugin's agent disabled later is the
    runtime's to say; this refuses only what is wrong as it is saved.)"""
    agent_id = attrs.get("chat_agent") if isinstance(attrs, dict) else None
    if not isinstance(agent_id, str):
        return  # absent, or the store's own form check says what is wrong
    try:
        agent = current_app.config["SKALD_CORE"].chat.agents.get(agent_id)
    except AgentError:
        raise ApiError(400, f"there is no agent named {agent_id!r}", code="role_chat_agent_unknown", field="chat_agent", values={"agent": agent_id}) from None
    if agent.kind != "chat":
        raise ApiError(400, f"{agent_id!r} is a {agent.kind} agent, not a chat agent: members cannot start there", code="role_chat_agent_not_chat", field="chat_agent", values={"agent": agent_id, "kind": agent.kind})


async def _guard(coro):
    try:
        return await coro
    except RoleError as exc:
        field = exc.values.get("field")  # the input the form marks
        raise ApiError.refusing(404 if exc.code == "role_not_found" else 400, exc, field=field if isinstance(field, str) else None) from None


@bp.get("/api/admin/roles")
@requires("roles.manage")
async def list_roles() -> dict:
    return {"roles": [r.summary() for r in await _roles().list()]}


@bp.post("/api/admin/roles")
@accepts(obj({"id": TEXT, "label": TEXT}, {"attrs": OBJECT, "capabilities": array(TEXT)}))
@requires("roles.manage")
async def create_role():
    data = await json_object()
    _check_start_agent(data.get("attrs"))
    role = await _guard(_roles().create(data.get("id"), data.get("label"), data.get("attrs"), data.get("capabilities")))
    return role.summary(), 201


@bp.patch("/api/admin/roles/<role_id>")
@accepts(obj(optional={"label": TEXT, "attrs": OBJECT, "capabilities": array(TEXT)}, extra=False))
@requires("roles.manage")
async def update_role(role_id: str) -> dict:
    data = await json_object()
    unknown = set(data) - {"label", "attrs", "capabilities"}
    if unknown:
        raise unknown_fields(unknown)
    _check_start_agent(data.get("attrs"))
    role = await _guard(
        _roles().update(role_id, label=data.get("label"), attrs=data.get("attrs"), capabilities=data.get("capabilities"))
    )
    return role.summary()


@bp.delete("/api/admin/roles/<role_id>")
@requires("roles.manage")
async def delete_role(role_id: str) -> dict:
    await _guard(_roles().delete(role_id))
    return {"ok": True}

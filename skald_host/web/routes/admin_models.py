"""Admin API for model providers and models, and the approval rules and security
groups. Provider API keys are write-only: they come back masked."""

from __future__ import annotations

import os

from quart import Blueprint, current_app

from skald_host.core.agent.approvals import RuleError
from skald_host.core.llm.catalog import ModelCatalogError, ModelChoice
from skald_host.core.llm.client import ModelError
from skald_host.web.auth import requires
from skald_host.web.body import BOOL, TEXT, accepts, array, field, integer, json_object, obj, one_of, ref, returns, text
from skald_host.web.errors import ApiError, unknown_fields

bp = Blueprint("admin_models", __name__)

OLLAMA_URL = "http://127.0.0.1:11434/v1"
MODEL_FIELDS = frozenset({"label", "vision", "strength", "priority", "enabled"})
MODEL_SPEC = {
    "label": text(100),
    "vision": BOOL,
    "strength": integer(0, 100, description="how capable: agents that ask for a strength prefer models at or above it"),
    "priority": integer(0, 100000, description="lower is tried first"),
    "enabled": BOOL,
}
RULE_SPEC = {
    "tool_pattern": text(200, description="a tool name or pattern such as 'write_*'"),
    "action": one_of("allow", "deny", "require"),
    "priority": integer(0, 10_000_000, description="the lowest priority that matches decides"),
    "path_class": text(300, description="a path pattern such as 'user-memory/*' (only calls on such paths), or null"),
    "group_id": text(description="a security group: the rule applies to members whose role lists it; null: everyone"),
    "note": text(500),
}


def _chat():
    return current_app.config["SKALD_CORE"].chat


async def _guard(coro):
    try:
        return await coro
    except (ModelCatalogError, RuleError) as exc:
        raise ApiError.refusing(404 if str(exc).startswith("no such") else 400, exc) from None


@bp.get("/api/admin/models")
@returns(obj({"providers": array(ref("Provider")), "models": array(ref("Model"))}))
@requires("models.manage")
async def overview() -> dict:
    chat = _chat()
    return {"providers": await chat.models.providers(), "models": await chat.models.models()}


@bp.post("/api/admin/models/providers")
@accepts(obj({"name": TEXT, "base_url": TEXT}, {"api_key": TEXT}))
@returns(ref("Provider"), 201)
@requires("models.manage")
async def create_provider():
    data = await json_object()
    provider = await _guard(_chat().models.create_provider(data.get("name"), data.get("base_url"), data.get("api_key")))
    return provider, 201


@bp.patch("/api/admin/models/providers/<provider_id>")
@accepts(obj(optional={"name": TEXT, "base_url": TEXT, "api_key": TEXT}, extra=False))
@returns(ref("Provider"))
@requires("models.manage")
async def update_provider(provider_id: str) -> dict:
    data = await json_object()
    unknown = set(data) - {"name", "base_url", "api_key"}
    if unknown:
        raise unknown_fields(unknown)
    return await _guard(_chat().models.update_provider(provider_id, **data))


@bp.delete("/api/admin/models/providers/<provider_id>")
@returns(ref("Ok"))
@requires("models.manage")
async def delete_provider(provider_id: str) -> dict:
    await _guard(_chat().models.delete_provider(provider_id))
    return {"ok": True}


@bp.post("/api/admin/models/providers/<provider_id>/test")
@returns(obj({"ok": BOOL}, {"models": array(TEXT), "error": TEXT, "status": {"type": "integer"}, "code": TEXT, "values": obj()}))
@requires("models.manage")
async def test_provider(provider_id: str) -> dict:
    """Test the connection: list the provider's models with the stored key."""
    chat = _chat()
    base_url, api_key = await _guard(chat.models.provider_secret(provider_id))
    probe = ModelChoice("probe", "", "", provider_id, "", base_url, api_key, False, 0, 0)
    try:
        names = await chat.clients.list_models(probe)
    except ModelError as exc:
        return {"ok": False, "error": str(exc), "status": exc.status, "code": exc.code, "values": exc.values}
    return {"ok": True, "models": names[:200]}


#: The presets' stable keys: the page says each in the admin's language
#: (``models.preset_<key>``), and names the provider so when one is applied.
PRESET_KEYS = ("openai", "openai_environment", "ollama")


@bp.get("/api/admin/models/presets")
@returns(obj({"presets": array(obj(
    {"key": one_of(*PRESET_KEYS), "base_url": TEXT, "api_key_from_environment": BOOL}, {"models": array(TEXT)},
))}))
@requires("models.manage")
async def presets() -> dict:
    """Providers this machine suggests: OpenAI from the environment, a local Ollama."""
    found = []
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        found.append(
            {
                "key": "openai" if not os.environ.get("OPENAI_BASE_URL") else "openai_environment",
                "base_url": os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
                "api_key_from_environment": bool(os.environ.get("OPENAI_API_KEY")),
            }
        )
    probe = ModelChoice("probe", "", "", "", "", OLLAMA_URL, None, False, 0, 0)
    try:
        names = await _chat().clients.list_models(probe, timeout=2.0)
        found.append({"key": "ollama", "base_url": OLLAMA_URL, "models": names[:50], "api_key_from_environment": False})
    except ModelError:
        pass
    return {"presets": found}


@bp.post("/api/admin/models/presets/apply")
@accepts(obj({"name": TEXT, "base_url": TEXT}, {"api_key_from_environment": BOOL}))
@returns(ref("Provider"), 201)
@requires("models.manage")
async def apply_preset():
    """Create a provider from a preset; the environment's key is copied server-side,
    never through the browser. ``name`` is the admin's own label for it (the page sends
    the preset's name in the admin's language), editable like any provider's."""
    data = await json_object()
    base_url = field(data, "base_url", str)
    name = field(data, "name", str)
    key = os.environ.get("OPENAI_API_KEY") if data.get("api_key_from_environment") is True else None
    provider = await _guard(_chat().models.create_provider(name, base_url, key))
    return provider, 201


@bp.post("/api/admin/models/entries")
@accepts(obj({"provider_id": TEXT, "model": TEXT}, MODEL_SPEC, extra=False))
@returns(ref("Model"), 201)
@requires("models.manage")
async def create_model():
    data = await json_object()
    extra = {k: v for k, v in data.items() if k not in ("provider_id", "model")}
    unknown = set(extra) - MODEL_FIELDS  # as in update_model: "self" must not reach the call
    if unknown:
        raise unknown_fields(unknown)
    model = await _guard(_chat().models.create_model(data.get("provider_id"), data.get("model"), **extra))
    return model, 201


@bp.patch("/api/admin/models/entries/<model_id>")
@accepts(obj(optional=MODEL_SPEC, extra=False))
@returns(ref("Model"))
@requires("models.manage")
async def update_model(model_id: str) -> dict:
    data = await json_object()
    # The body's keys become keyword arguments: one named like a parameter
    # ("model_id") would be a TypeError, a 500, before the catalog could refuse it.
    unknown = set(data) - MODEL_FIELDS
    if unknown:
        raise unknown_fields(unknown)
    return await _guard(_chat().models.update_model(model_id, **data))


@bp.delete("/api/admin/models/entries/<model_id>")
@returns(ref("Ok"))
@requires("models.manage")
async def delete_model(model_id: str) -> dict:
    await _guard(_chat().models.delete_model(model_id))
    return {"ok": True}


@bp.get("/api/admin/approval-rules")
@returns(obj({"rules": array(ref("ApprovalRule")), "groups": array(ref("SecurityGroup"))}))
@requires("approvals.manage")
async def list_rules() -> dict:
    chat = _chat()
    return {"rules": [r.summary() for r in await chat.rules.rules()], "groups": await chat.rules.groups()}


@bp.post("/api/admin/approval-rules")
@accepts(obj({k: RULE_SPEC[k] for k in ("tool_pattern", "action", "priority")}, {k: RULE_SPEC[k] for k in ("path_class", "group_id", "note")}, extra=False))
@returns(ref("ApprovalRule"), 201)
@requires("approvals.manage")
async def create_rule():
    data = await json_object()
    return (await _guard(_chat().rules.create(data))).summary(), 201


@bp.patch("/api/admin/approval-rules/<int:rule_id>")
@accepts(obj(optional=RULE_SPEC, extra=False))
@returns(ref("ApprovalRule"))
@requires("approvals.manage")
async def update_rule(rule_id: int) -> dict:
    data = await json_object()
    return (await _guard(_chat().rules.update(rule_id, data))).summary()


@bp.delete("/api/admin/approval-rules/<int:rule_id>")
@returns(ref("Ok"))
@requires("approvals.manage")
async def delete_rule(rule_id: int) -> dict:
    await _guard(_chat().rules.delete(rule_id))
    return {"ok": True}


@bp.post("/api/admin/security-groups")
@accepts(obj({"id": text(40), "label": text(80)}, {"description": text(500)}))
@returns(ref("SecurityGroup"), 201)
@requires("approvals.manage")
async def create_group():
    data = await json_object()
    group = await _guard(_chat().rules.create_group(data.get("id"), data.get("label"), data.get("description", "")))
    return group, 201


@bp.delete("/api/admin/security-groups/<group_id>")
@returns(ref("Ok"))
@requires("approvals.manage")
async def delete_group(group_id: str) -> dict:
    await _guard(_chat().rules.delete_group(group_id))
    return {"ok": True}

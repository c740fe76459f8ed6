"""Admin API for the plugin catalog: list, detail, enable, configure, roster, and a
member's grants (the one write path for grants)."""

from typing import Any

from quart import Blueprint, current_app, jsonify

from skald_host.core.identity.users import MemberNotFound
from skald_host.core.plugins.catalog import CatalogError, ConfigInvalid
from skald_host.core.plugins.manager import PluginError
from skald_host.web.auth import reader_locale, requires
from skald_host.web.body import BOOL, OBJECT, TEXT, accepts, array, field, json_object, obj, ref, returns
from skald_host.web.errors import ApiError

bp = Blueprint("admin_plugins", __name__)


def _core():
    return current_app.config["SKALD_CORE"]


async def _guard(coro, plugin_id: str | None = None):
    """``plugin_id``: the plugin the URL names, so "no such plugin" gets its error code
    and a reader sees it in their language rather than the catalog's English message."""
    try:
        return await coro
    except MemberNotFound:
        raise ApiError(404, "no such member", code="member_not_found") from None
    except CatalogError as exc:
        error = ApiError.refusing(
            404 if str(exc).startswith(("no plugin", "no settings set")) else 409 if exc.code == "plugin_missing" else 400, exc
        )
        if plugin_id is not None and error.code is None and str(exc).startswith("no plugin"):
            error.code, error.values = "plugin_unknown", {"plugin": plugin_id}
        raise error from None
    except PluginError as exc:
        raise ApiError.refusing(404 if exc.code == "plugin_unknown" else 409 if exc.code in ("plugin_failed", "plugin_blocked") else 400, exc) from None


@bp.errorhandler(ConfigInvalid)
async def config_refused(exc: ConfigInvalid) -> Any:
    """A 400 naming every refused field in ``errors``, so the form marks them all after
    one save; the first is also the answer itself, in the shape of every API error."""
    errors = [{"field": p.field, "error": str(p), "code": p.code, "values": p.values} for p in exc.problems]
    response = jsonify({**errors[0], "errors": errors})
    response.status_code = 400
    return response


@bp.get("/api/admin/plugins")
@requires("plugins.manage")
async def list_plugins() -> dict:
    return {"plugins": await _core().catalog.list(await reader_locale())}


@bp.get("/api/admin/plugins/<plugin_id>")
@requires("plugins.manage")
async def plugin_detail(plugin_id: str) -> dict:
    return await _guard(_core().catalog.detail(plugin_id, await reader_locale()), plugin_id)


@bp.put("/api/admin/plugins/<plugin_id>/enabled")
@accepts(obj({"enabled": BOOL}))
@requires("plugins.manage")
async def set_enabled(plugin_id: str) -> dict:
    data = await json_object()
    enabled = field(data, "enabled", bool)
    if _core().plugins.status(plugin_id) is None:  # enabled, but installed no more: off dismisses it
        return await _guard(_core().catalog.set_missing_enabled(plugin_id, enabled, await reader_locale()), plugin_id)
    await _guard(_core().set_plugin_enabled(plugin_id, enabled), plugin_id)
    return await _guard(_core().catalog.detail(plugin_id, await reader_locale()), plugin_id)


@bp.put("/api/admin/plugins/<plugin_id>/config")
@accepts(obj({"config": OBJECT}))
@requires("plugins.manage")
async def configure(plugin_id: str) -> dict:
    data = await json_object()
    values = field(data, "config", dict)
    # ``not_started``: the save restarted the plugin and its startup failed on the
    # saved values (they stay saved); the form says so beside itself.
    return await _guard(_core().catalog.configure(plugin_id, values, await reader_locale()), plugin_id)


@bp.delete("/api/admin/plugins/<plugin_id>/stale-settings")
@requires("plugins.manage")
async def forget_stale_settings(plugin_id: str) -> dict:
    """Remove the stored settings this version refuses (``stale_settings``): the
    plugin's detail after, with none."""
    return await _guard(_core().catalog.forget_stale_settings(plugin_id, await reader_locale()), plugin_id)


@bp.get("/api/admin/plugins/<plugin_id>/access")
@requires("plugins.manage")
async def roster(plugin_id: str) -> dict:
    """The members holding the plugin; ``manages_own_access``: the plugin decides itself
    who may use it (no grant applies), so ``members`` names only the admins."""
    members = await _guard(_core().catalog.roster(plugin_id), plugin_id)
    return {"members": members, "manages_own_access": _core().catalog.manages_own_access(plugin_id)}


@bp.get("/api/admin/members/<member_id>/plugins")
@returns(obj({"plugins": array(ref("PluginGrant"))}))
@requires("plugins.manage")
async def member_grants(member_id: str) -> dict:
    return {"plugins": await _guard(_core().catalog.member_grants(member_id, await reader_locale()))}


@bp.put("/api/admin/members/<member_id>/plugins")
@accepts(obj({"plugins": array(TEXT, description="the ids of every plugin the member may use: the whole set")}))
@returns(obj({"plugins": array(ref("PluginGrant"))}))
@requires("plugins.manage")
async def replace_member_grants(member_id: str) -> dict:
    data = await json_object()
    return {"plugins": await _guard(_core().catalog.replace_member_grants(member_id, field(data, "plugins", list), await reader_locale()))}


@bp.get("/api/admin/settings")
@requires("settings.manage")
async def general_settings() -> dict:
    return {"sets": await _core().instance_settings.general(await reader_locale())}


@bp.put("/api/admin/settings/<set_id>")
@accepts(obj({"values": OBJECT}))
@requires("settings.manage")
async def save_settings(set_id: str) -> dict:
    data = await json_object()
    return {"values": await _guard(_core().instance_settings.save(set_id, field(data, "values", dict)))}

"""What a member sees of plugins: their plugins, their per-member config, their pages."""

from quart import Blueprint, current_app

from skald_host.core.plugins.catalog import CatalogError, ConfigInvalid
from skald_host.web.auth import current_principal, reader_locale
from skald_host.web.body import OBJECT, accepts, field, json_object, obj
from skald_host.web.errors import ApiError

bp = Blueprint("plugins", __name__)


@bp.get("/api/plugins/mine")
async def mine() -> dict:
    core = current_app.config["SKALD_CORE"]
    return {"plugins": await core.catalog.mine(current_principal().member, await reader_locale())}


@bp.put("/api/plugins/<plugin_id>/my-config")
@accepts(obj({"config": OBJECT}))
async def save_my_config(plugin_id: str) -> dict:
    core = current_app.config["SKALD_CORE"]
    data = await json_object()
    try:
        values = await core.catalog.save_my_config(current_principal().member, plugin_id, field(data, "config", dict))
    except CatalogError as exc:
        unknown = str(exc).startswith("no plugin")
        error = ApiError.refusing(404 if unknown else 400, exc)
        if unknown and error.code is None:  # in the reader's language, as the admin routes say it
            error.code, error.values = "plugin_unknown", {"plugin": plugin_id}
        raise error from None
    except ConfigInvalid as exc:
        raise ApiError.refusing(400, exc) from None
    return {"config": values}


@bp.get("/api/plugins/pages")
async def pages() -> dict:
    core = current_app.config["SKALD_CORE"]
    return {"pages": core.catalog.pages(current_principal().member, await reader_locale())}

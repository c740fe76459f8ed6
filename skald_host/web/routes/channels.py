"""Where a member's background notes reach them: the web, or a channel they may use."""

from quart import Blueprint, current_app

from skald_host.web.auth import current_principal, reader_locale
from skald_host.web.body import TEXT, accepts, json_object, obj
from skald_host.web.errors import ApiError

bp = Blueprint("channels", __name__)


async def _state() -> dict:
    """The home in use (``home_source``), what may be chosen, and ``fallback`` when the
    chosen channel cannot reach the member now (its notes stay on the web meanwhile):
    ``{"source", "reason"}``, ``reason`` ``unavailable`` or ``unreachable``; else None."""
    core = current_app.config["SKALD_CORE"]
    member = await core.users.get(current_principal().member.id)
    router = core.channels.router
    choices = await router.home_choices(member)
    home = await router.home(member)
    locale = await reader_locale()
    titles = {}
    named = [name for name in choices if name != "web"] + ([home.stored] if home.reason else [])
    for name in named:  # in the reader's language, as the plugin's catalog entry says it
        status = core.plugins.status(name)
        titles[name] = core.strings.plugin_text(name, "plugin.title", locale, status.info.title) if status and status.info else name
    fallback = {"source": home.stored, "reason": home.reason} if home.reason else None
    return {"home_source": home.source, "choices": choices, "titles": titles, "fallback": fallback}


@bp.get("/api/me/home-source")
async def get_home_source() -> dict:
    return await _state()


@bp.put("/api/me/home-source")
@accepts(obj(optional={"home_source": TEXT}))
async def put_home_source() -> dict:
    core = current_app.config["SKALD_CORE"]
    data = await json_object()
    member = await core.users.get(current_principal().member.id)
    try:
        await core.channels.router.set_home_source(member, data.get("home_source"))
    except ValueError as exc:
        raise ApiError.refusing(400, exc) from None
    return await _state()

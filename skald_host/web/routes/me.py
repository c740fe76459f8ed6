"""The member's own private settings (stored in their own file), what reaches whom of
their data, and UI strings."""

import json
import logging
from datetime import datetime

from quart import Blueprint, current_app, request

from skald_host.core.i18n import FALLBACK_LOCALE
from skald_host.core.identity.privacy import privacy_facts, supervision_news
from skald_host.core.schedules import ScheduleError, zone
from skald_host.core.schedules.service import TIMEZONE_SETTING
from skald_host.core.system_agents import store
from skald_host.web.auth import current_principal, public, reader_locale
from skald_host.web.body import OBJECT, TEXT, TIME, accepts, array, BodyError, json_object, loads, nullable, obj, query, returns, text
from skald_host.web.errors import ApiError

bp = Blueprint("me", __name__)
log = logging.getLogger(__name__)

MAX_SETTINGS = 200
MAX_VALUE_BYTES = 16 * 1024
SETTINGS = {
    "type": "object",
    "description": f"setting name → any JSON value (at most {MAX_VALUE_BYTES} bytes); null removes the setting",
    "propertyNames": {
        "minLength": 1,
        "maxLength": 64,
        "pattern": r"^[\w.-]+$",
        "x-message": "setting name {key} must be 1-64 letters, digits, '.', '_' or '-'",
    },
}


def _owner_db():
    core = current_app.config["SKALD_CORE"]
    db = core.users.owner_db(current_principal().member.id)
    if db is None:  # a session without an open file cannot happen; fail closed if it does
        raise ApiError(423, "your private database is locked; log in again", code="locked")
    return db


@bp.get("/api/me/settings")
@returns(obj({"settings": OBJECT}))
async def get_settings() -> dict:
    db = _owner_db()
    rows = await db.run(lambda c: c.execute("SELECT key, value FROM member_settings").fetchall())
    settings, broken = {}, []
    for key, value in rows:
        try:
            settings[key] = loads(value)
        except BodyError:  # NaN/Infinity stored before the API refused them: back to the default
            broken.append(key)
    if broken:
        log.warning("member settings %s held a value that is not valid JSON; removed (the default applies)", ", ".join(map(repr, broken)))
        await db.transaction(lambda c: c.executemany("DELETE FROM member_settings WHERE key = ?", [(k,) for k in broken]))
    return {"settings": settings}


@bp.put("/api/me/settings")
@accepts(SETTINGS)
@returns(obj({"settings": OBJECT}))
async def put_settings() -> dict:
    """Merge keys into the member's private settings; a null value removes a key."""
    data = await json_object()
    for key, value in data.items():
        if not key or len(key) > 64 or not key.replace(".", "").replace("_", "").replace("-", "").isalnum():
            raise ApiError(400, f"setting name {key[:64]!r} must be 1-64 letters, digits, '.', '_' or '-'", code="setting_name_invalid")
        if len(json.dumps(value)) > MAX_VALUE_BYTES:
            raise ApiError(
                400, f"setting {key!r} is larger than {MAX_VALUE_BYTES} bytes", field=key, code="setting_too_large",
                values={"limit": MAX_VALUE_BYTES},
            )
    if data.get(TIMEZONE_SETTING) is not None:
        # Checked here, not when read: a bad name stored would quietly become UTC for
        # every scheduled prompt, and the member's valid zone would be gone.
        try:
            zone(data[TIMEZONE_SETTING])
        except ScheduleError as exc:
            raise ApiError.refusing(400, exc, field=TIMEZONE_SETTING) from None

    def write(conn) -> int:
        for key, value in data.items():
            if value is None:
                conn.execute("DELETE FROM member_settings WHERE key = ?", (key,))
            else:
                conn.execute(
                    "INSERT INTO member_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET"
                    " value = excluded.value, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
                    (key, json.dumps(value)),
                )
        count = conn.execute("SELECT count(*) FROM member_settings").fetchone()[0]
        if count > MAX_SETTINGS:
            raise ApiError(400, f"at most {MAX_SETTINGS} settings", code="settings_too_many", values={"limit": MAX_SETTINGS})
        return count

    await _owner_db().transaction(write)
    return await get_settings()


@bp.get("/api/me/privacy")
async def privacy() -> dict:
    """Which model providers receive this member's messages, which plugins can act for
    them, and whether their private database is encrypted: from their access now."""
    core = current_app.config["SKALD_CORE"]
    return await privacy_facts(core, current_principal().member, await reader_locale())


SUPERVISION_NEWS = obj({"added": array(TEXT, description="names of the supervisors still to be told of"), "added_through": nullable(TIME)})
#: A time as ``added_through`` gives it (``supervision.created_at``).
SEEN_THROUGH = text(40, pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$", description="added_through, as /api/me/privacy gave it")


@bp.post("/api/me/supervision/seen")
@accepts(obj({"through": SEEN_THROUGH}, extra=False))
@returns(SUPERVISION_NEWS)
async def supervision_seen() -> dict:
    """The member has read who started supervising them, up to ``through`` (the
    ``added_through`` of /api/me/privacy): the notice goes; a supervisor named later is
    still told. Only one's own: the member is the session's."""
    core = current_app.config["SKALD_CORE"]
    member_id = current_principal().member.id
    through = (await json_object())["through"]
    try:
        datetime.fromisoformat(through)
    except ValueError:  # the pattern's shape with no such day or time ("2026-13-45T99:99:99Z")
        raise ApiError(400, "'through' is not a time that exists", field="through", code="field_invalid", values={"field": "through"}) from None
    await core.registry.transaction(lambda c: store.acknowledge_supervision(c, member_id, through))
    return await supervision_news(core, member_id)


@bp.put("/api/me/locale")
@accepts(obj(optional={"locale": TEXT}))
@returns(obj({"locale": TEXT}))
async def set_locale() -> dict:
    """A member picks their own interface language (null: the instance default)."""
    core = current_app.config["SKALD_CORE"]
    data = await json_object()
    locale = data.get("locale")
    if locale is not None and locale not in core.strings.locales:
        raise ApiError(400, f"locale must be one of {', '.join(core.strings.locales)}", field="locale", code="locale_unknown", values={"locales": ", ".join(core.strings.locales)})
    member = await core.users.update(current_principal().member.id, locale=locale)
    return {"locale": member.locale or await core.default_locale()}


@bp.get("/api/i18n")
@query(locale=TEXT)
@returns(obj({"locale": TEXT, "locales": OBJECT, "strings": OBJECT}))
@public
async def strings() -> dict:
    """The merged string table for a locale: asked for, else English."""
    core = current_app.config["SKALD_CORE"]
    locale = request.args.get("locale", FALLBACK_LOCALE)
    if locale not in core.strings.locales:
        locale = FALLBACK_LOCALE
    return {"locale": locale, "locales": core.strings.locales, "strings": core.strings.table(locale)}

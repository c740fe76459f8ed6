"""What the admin sees about the instance itself: plugins and their health, warnings."""

from quart import Blueprint, current_app, request

from skald_host.core.host import host_version, source_revision
from skald_host.core.identity.users import MemberNotFound
from skald_host.web.auth import reader_locale, requires, transport_is_secure
from skald_host.web.body import TEXT, accepts, array, field, json_object, obj, returns
from skald_host.web.errors import ApiError

bp = Blueprint("admin_status", __name__)


@bp.get("/api/admin/plugins.json")
@requires("instance.status")
async def plugins() -> dict:
    """The full status table, tracebacks included (like Datasette's /-/plugins.json)."""
    core = current_app.config["SKALD_CORE"]
    return {"plugins": [s.as_dict() for s in core.plugins.statuses()]}


@bp.get("/api/admin/status")
@requires("instance.status")
async def status() -> dict:
    core = current_app.config["SKALD_CORE"]
    locale = await reader_locale()
    warnings = []
    if not transport_is_secure(request):
        warnings.append({"id": "insecure_transport", "text": core.strings.translate("core.warning.insecure_transport", locale)})
    if core.safe_mode:  # nothing runs on a timer: said, as the members' pages say it
        warnings.append({"id": "safe_mode", "text": core.strings.translate("core.warning.safe_mode", locale)})
    for member_id in list(core.users.older_copies):
        try:
            member = await core.users.get(member_id)
        except MemberNotFound:
            continue
        values = {"member": member.username}
        warnings.append({"id": "older_copy", "values": values, "text": core.strings.translate("core.warning.older_copy", locale, **values)})
    if core.chat.subagent_catalog.refused is not None:
        # The helper definitions were refused (at the start, or an edit since): the
        # reasons name server files, so only the Helpers page shows them, to the admin.
        warnings.append({"id": "agent_definitions_refused", "values": {},
                         "text": core.strings.translate("core.warning.agent_definitions_refused", locale)})
    for plugin in core.plugins.statuses():
        # A plugin that failed to load or to start: its card says why, and so does the
        # instance's status, which otherwise said "no warnings" beside a broken plugin.
        if plugin.waiting and core.plugins.is_enabled(plugin.id):
            # Waiting for the admin (a setting, a token: NotReady), not broken: said as such.
            title = core.strings.plugin_text(plugin.id, "plugin.title", locale, plugin.info.title if plugin.info else plugin.name)
            values = {"plugin": title, "reason": core.catalog.error_text(plugin, locale) or ""}
            warnings.append({"id": "plugin_waiting", "values": values, "text": core.strings.translate("core.warning.plugin_waiting", locale, **values)})
        elif plugin.state == "failed" or (core.plugins.is_enabled(plugin.id) and not plugin.healthy):
            title = core.strings.plugin_text(plugin.id, "plugin.title", locale, plugin.info.title if plugin.info else plugin.name)
            values = {"plugin": title, "error": core.catalog.error_text(plugin, locale) or ""}
            warnings.append({"id": "plugin_failed", "values": values, "text": core.strings.translate("core.warning.plugin_failed", locale, **values)})
        elif plugin.started and plugin.degraded and core.plugins.is_enabled(plugin.id):
            # Running, but it said something keeps it from its job (HostApi.set_degraded).
            title = core.strings.plugin_text(plugin.id, "plugin.title", locale, plugin.info.title if plugin.info else plugin.name)
            values = {"plugin": title, "reason": core.catalog.degraded_text(plugin, locale) or ""}
            warnings.append({"id": "plugin_degraded", "values": values, "text": core.strings.translate("core.warning.plugin_degraded", locale, **values)})
    for plugin_id in await core.catalog.missing():
        # Enabled, then uninstalled: it vanished from every list without a word.
        values = {"plugin": plugin_id}
        warnings.append({"id": "plugin_missing", "values": values, "text": core.strings.translate("core.warning.plugin_missing", locale, **values)})
    plugin_id, sandbox_refusal = await core.sandbox.in_use()
    backend = core.plugins.status(plugin_id) if plugin_id else None
    return {
        "version": host_version(),
        # The checkout's commit and the data's schema: "0.1.0" alone named every version.
        "revision": source_revision(),
        "schema": core.registry.schema_version,
        # Which backend commands run in (its plugin's title), or why none can.
        "sandbox": core.strings.plugin_text(backend.id, "plugin.title", locale, backend.info.title) if backend and backend.info else None,
        "sandbox_refusal": sandbox_refusal,
        "sqlcipher": core.sqlcipher_version,
        "members_unlocked": len(core.users.unlocked_ids),
        "warnings": warnings,
        "missing_translations": core.strings.missing(),
        # Those of missing_translations["en"] that no language has: readers see the
        # plugin's own text there, not a bare key.
        "missing_everywhere": core.strings.missing_everywhere(),
        "background_tasks": core.supervisor.names,
    }


@bp.get("/api/admin/language")
@requires("settings.manage")
@returns(obj({"locale": TEXT, "locales": array(TEXT)}))
async def instance_language() -> dict:
    """The instance's language (chosen at setup) and the languages there are."""
    core = current_app.config["SKALD_CORE"]
    return {"locale": await core.default_locale(), "locales": core.strings.locales}


@bp.put("/api/admin/language")
@accepts(obj({"locale": TEXT}))
@requires("settings.manage")
@returns(obj({"locale": TEXT}))
async def set_instance_language() -> dict:
    """Change the instance's language: members who chose none read it, and the model is
    told it of them."""
    core = current_app.config["SKALD_CORE"]
    locale = field(await json_object(), "locale", str)
    if locale not in core.strings.locales:
        raise ApiError(400, f"locale must be one of {', '.join(core.strings.locales)}", field="locale", code="locale_unknown",
                       values={"locales": ", ".join(core.strings.locales)})
    await core.set_default_locale(locale)
    return {"locale": locale}

"""The plugin catalog: what the admin enables, configures and grants, and what each
member may see (seed 001 "Plugin visibility & per-user config", "Default access").

Grants are rows in ``plugin_access``: deny by default, read fresh on every decision.
The admin holds everything implicitly. Plugins that manage their own access (a
pairing binding decides who uses them) are absent from grant lists, and the grant
writer refuses them: a checkbox that controls nothing is worse than none.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, get_args, get_type_hints
from urllib.parse import unquote, urlsplit

from skald_hookspecs.types import ConfigSet, PluginInfo, WebPage
from skald_host.core.identity.access import allowed, plugin_action
from skald_host.core.identity.users import Member, MemberNotFound
from skald_host.core.plugins.config_schema import (
    ConfigInvalid, SchemaInvalid, accepted, check_schema, masked, schema_json, stale, validate,
)
from skald_host.core.i18n import FALLBACK_LOCALE, number_text
from skald_host.core.plugins.failures import PLUGIN_EXITS, record_failure
from skald_host.core.plugins.manager import PluginError, PluginStatus
from skald_host.core.refusal import Refusal

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)


class CatalogError(Refusal):
    """A catalog request that cannot be done; the message says why, and a ``code``, when
    it has one, says it in the reader's language."""


#: A plugin's status while a ``required`` setting of its own has no value: the host does
#: not run its ``startup`` (which would fail on the missing value, as a crash), and says
#: which settings, by their labels in the reader's language (a core string).
NEEDS_SETTINGS = "core.plugin.needs_settings"
#: A plugin whose ``startup`` ran past the hook timeout (``values``: ``seconds``): the
#: host's words, so a core string says them in the reader's language.
STARTUP_TIMED_OUT = "core.plugin.startup_timed_out"
#: A plugin whose ``startup`` held the event loop past the hook timeout (``HookBlocked``;
#: ``values``: ``seconds``, as measured, and ``timeout``): the host's words too.
STARTUP_BLOCKED = "core.plugin.startup_blocked"
#: The host's own reasons, core strings; any other key is the plugin's (``NotReady``).
HOST_REASONS = (NEEDS_SETTINGS, STARTUP_TIMED_OUT, STARTUP_BLOCKED)
#: Why an enabled plugin is listed as ``missing``: its registry row says enabled, but no
#: installed distribution offers it any more (``pip uninstall``, then a restart).
MISSING = "core.plugin.missing"
#: Why, when a distribution declares an entry point by the missing plugin's name in a
#: group that is nearly ``skald.plugins`` (``values``: ``distribution``, ``group``):
#: reinstalling it, as ``MISSING`` says, would not help.
MISSING_WRONG_GROUP = "core.plugin.missing_wrong_group"


def live_change(schema: Any, previous: dict[str, Any], fresh: dict[str, Any]) -> bool:
    """Whether every field that changed is ``live`` (and one did): a running plugin then
    keeps running on them."""
    changed = {name for name in set(previous) | set(fresh) if previous.get(name) != fresh.get(name)}
    return bool(changed) and changed <= {f.name for f in schema if f.live}


class PluginCatalog:
    def __init__(self, core: "Skald") -> None:
        self._core = core
        core.strings.expect(self._error_keys)

    def _error_keys(self) -> Iterator[tuple[str, ...]]:
        """The strings ``error_text`` will look up (a ``NotReady``'s key), each as the
        full keys that would do: a key no bundle has falls back to the English message,
        and the admin's list of missing translations must name it."""
        for status in self._core.plugins.statuses():
            if status.error_key in HOST_REASONS:
                yield (status.error_key,)
            elif status.error_key:
                yield (f"{status.id}.{status.error_key}", f"core.builtin.{status.id}.{status.error_key}")
            if status.degraded_key:  # ``HostApi.set_degraded``'s, always the plugin's own
                yield (f"{status.id}.{status.degraded_key}", f"core.builtin.{status.id}.{status.degraded_key}")

    # -- helpers ---------------------------------------------------------------------

    def _status(self, plugin_id: str) -> PluginStatus:
        status = self._core.plugins.status(plugin_id)
        if status is None:
            raise CatalogError(f"no plugin {plugin_id!r}", code="plugin_unknown", plugin=plugin_id)
        return status

    def _info(self, plugin_id: str) -> PluginInfo:
        status = self._status(plugin_id)
        if status.info is None or status.state not in ("loaded", "disabled"):
            raise CatalogError(f"plugin {plugin_id!r} is not loaded ({status.state})", code="plugin_not_loaded", plugin=plugin_id, state=status.state)
        return status.info

    async def _rows(self) -> dict[str, dict[str, Any]]:
        rows = await self._core.registry.run(lambda c: c.execute("SELECT id, enabled, config FROM plugins").fetchall())
        return {r[0]: {"enabled": bool(r[1]), "config": self._core.plugin_config(r[0], r[2])} for r in rows}

    async def _config(self, plugin_id: str) -> dict[str, Any]:
        row = await self._core.registry.run(lambda c: c.execute("SELECT config FROM plugins WHERE id = ?", (plugin_id,)).fetchone())
        return self._core.plugin_config(plugin_id, row[0]) if row else {}

    async def _holders(self) -> dict[str, int]:
        rows = await self._core.registry.run(
            lambda c: c.execute(
                "SELECT plugin_id, count(*) FROM plugin_access JOIN users ON users.id = plugin_access.user_id"
                " WHERE users.active = 1 GROUP BY plugin_id"
            ).fetchall()
        )
        return {r[0]: r[1] for r in rows}

    def _chosen(self, status: PluginStatus, rows: dict[str, dict[str, Any]]) -> bool:
        """``enabled`` as the admin chose it. A loaded plugin's switch is its state; a
        failed or blocked one has no switch state (``state`` says why it does not run),
        but the admin's choice is kept in its row and applies again once it loads: report
        that, not ``false`` (an enabled plugin that failed to load read as disabled,
        then came back enabled after the fix and a restart). Without a row: built-ins
        are on, the rest off, as at boot."""
        if status.state in ("loaded", "disabled"):
            return self._core.plugins.is_enabled(status.id)
        row = rows.get(status.id)
        return row["enabled"] if row is not None else status.builtin

    # -- admin ---------------------------------------------------------------------------

    def _text(self, plugin_id: str, key: str, locale: str | None, default: str) -> str:
        return self._core.strings.plugin_text(plugin_id, key, locale, default)

    def _localize(self, entry: dict[str, Any], locale: str | None) -> dict[str, Any]:
        """A status entry's title and description in the reader's language."""
        entry["title"] = self._text(entry["id"], "plugin.title", locale, entry["title"])
        entry["description"] = self._text(entry["id"], "plugin.description", locale, entry["description"])
        status = self._core.plugins.status(entry["id"])
        if status is not None and status.error_key:
            entry["error"] = self.error_text(status, locale)
        if status is not None and status.degraded:
            entry["degraded"] = self.degraded_text(status, locale)
        entry.pop("error_key", None)
        entry.pop("error_values", None)
        entry["failures"] = [self._problem_text(f, locale) for f in entry.get("failures", [])]
        return entry

    def _problem_text(self, failure: dict[str, Any], locale: str | None) -> dict[str, Any]:
        """A problem the host said in words of its own (a hook slow at start): ``message``
        in the reader's language, its seconds in the reader's number format ("3,0 s" in
        German: "3.0 s" read as English), and ``traceback`` the same words in English,
        for a reader of the raw API; they were two differently worded English texts."""
        if "key" not in failure:
            return failure
        values, seconds = dict(failure.get("values", {})), failure.get("took_seconds")
        strings = self._core.strings

        def said(reader: str | None) -> str:
            if isinstance(seconds, (int, float)):
                values["seconds"] = number_text(seconds, reader, "#,##0.0")
            return strings.translate(failure["key"], reader, **values)

        return {**failure, "message": said(locale), "traceback": said(FALLBACK_LOCALE)}

    def error_text(self, status: Any, locale: str | None) -> str | None:
        """Why the plugin is not running, in the reader's language when the plugin said
        it with a string of its own (``NotReady``) or the host with a core string
        (``NEEDS_SETTINGS``, ``STARTUP_TIMED_OUT``, ``STARTUP_BLOCKED``), else as it was said."""
        if not status.error_key:
            return status.error
        if status.error_key == NEEDS_SETTINGS:
            labels = self._core.strings.fields(status.id, "config", schema_json(status.info.config_schema), locale)
            names = {f["name"]: f["label"] for f in labels}
            fields = ", ".join(names.get(name, name) for name in status.error_values.get("fields", ()))
            return self._core.strings.translate(NEEDS_SETTINGS, locale, fields=fields)
        if status.error_key in HOST_REASONS:
            return self._core.strings.translate(status.error_key, locale, **status.error_values)
        return self._plugin_says(status.id, status.error_key, status.error_values, locale, status.error)

    def degraded_text(self, status: Any, locale: str | None) -> str | None:
        """Why the running plugin cannot do its job now (``HostApi.set_degraded``), in
        the reader's language when the plugin has its key in that language (else
        English, else its English reason); None while nothing keeps it from its job."""
        if not status.degraded or not status.degraded_key:
            return status.degraded
        return self._plugin_says(status.id, status.degraded_key, status.degraded_values, locale, status.degraded)

    def _plugin_says(self, plugin_id: str, key: str, values: dict[str, Any], locale: str | None, default: str | None) -> str | None:
        """A plugin's own string ``key`` filled with ``values``; ``default`` (its
        English message) when no bundle has the key."""
        text = self._core.strings.plugin_text(plugin_id, key, locale, "")
        if not text:
            return default
        try:
            return text.format(**values)
        except (KeyError, IndexError, ValueError, AttributeError):
            return text

    # -- enabled, but installed no more -------------------------------------------------------
    # Its row (switch, settings, grants, approval rules) stays, so reinstalling brings it
    # back as it was; until then it is listed as ``missing``, not left out without a
    # word: the admin reinstalls it, or disables it, which dismisses it.

    async def missing(self) -> list[str]:
        """The ids of plugins whose row says enabled that no installed plugin answers to,
        sorted. A candidate that failed or was blocked before it said its id is listed
        under its entry point's name: one whose name or distribution names the id
        (``weather``, ``skald-weather``) may be the plugin, so it is not called missing."""
        rows = await self._core.registry.run(lambda c: c.execute("SELECT id FROM plugins WHERE enabled = 1").fetchall())
        known: set[str] = set()
        for status in self._core.plugins.statuses():
            known.add(status.id)
            if status.info is None:
                for name in (status.name, status.distribution or ""):
                    loose = _loosely(name)
                    known.update({loose, loose.removeprefix("skald-")})
        return sorted(r[0] for r in rows if r[0] not in known and _loosely(r[0]) not in known)

    def near_miss(self, plugin_id: str) -> Any:
        """An entry point in a group that is nearly ``skald.plugins`` that may be this
        plugin (by its name, or its distribution's), or None."""
        loose = _loosely(plugin_id)
        for miss in getattr(self._core.plugins, "near_misses", ()):
            dist = _loosely(miss.distribution or "")
            if loose in (_loosely(miss.name), dist, dist.removeprefix("skald-")):
                return miss
        return None

    def missing_reason(self, plugin_id: str, locale: str | None) -> str:
        miss = self.near_miss(plugin_id)
        if miss is None:
            return self._core.strings.translate(MISSING, locale)
        return self._core.strings.translate(MISSING_WRONG_GROUP, locale, distribution=miss.distribution or miss.name, group=miss.group)

    def missing_entry(self, plugin_id: str, locale: str | None, *, enabled: bool = True) -> dict[str, Any]:
        """A missing plugin as the catalog lists it: the shape of a status entry, with
        what the host still knows (its id) and why it does not run."""
        return {
            "id": plugin_id, "name": plugin_id, "distribution": None, "version": None, "builtin": False, "state": "missing",
            "spec": None, "hooks": [], "error": self.missing_reason(plugin_id, locale), "degraded": None,
            "import_ms": 0.0, "healthy": False, "waiting": False, "needs_settings": False, "problems": 0,
            "title": plugin_id, "description": "", "enabled": enabled, "configurable": False, "icon": "puzzle",
            "manages_own_access": False, "row_born": True,
        }

    async def report_missing(self) -> list[str]:
        """Log, once at start, each enabled plugin that is installed no more; their ids."""
        missing = await self.missing()
        for plugin_id in missing:
            miss = self.near_miss(plugin_id)
            if miss is not None:
                log.warning(
                    "plugin %s is enabled but not found: %s declares it in the entry point group %r, not %r",
                    plugin_id, miss.distribution or miss.name, miss.group, "skald.plugins",
                )
                continue
            log.warning("plugin %s is enabled but installed no more: reinstall its package, or disable it in the catalog", plugin_id)
        return missing

    async def set_missing_enabled(self, plugin_id: str, enabled: bool, locale: str | None = None) -> dict[str, Any]:
        """The switch of a missing plugin: off dismisses it (its row keeps its settings
        and grants, off); on is refused, as nothing is installed to run."""
        if plugin_id not in await self.missing():
            raise CatalogError(f"no plugin {plugin_id!r}", code="plugin_unknown", plugin=plugin_id)
        if enabled:
            raise CatalogError(
                f"plugin {plugin_id!r} is installed no more; reinstall its package and restart the server to enable it",
                code="plugin_missing", plugin=plugin_id,
            )
        await self.store_row(plugin_id, None, enabled=False)
        log.info("plugin %s disabled (installed no more: dismissed from the catalog)", plugin_id)
        return self.missing_entry(plugin_id, locale, enabled=False)

    async def stale_settings(self, plugin_id: str, config: dict[str, Any] | None = None) -> list[str]:
        """The plugin's stored settings its running version refuses (``stale``), which
        it reads as their defaults until the admin saves: its config's fields by name,
        its settings sets' as ``<set id>.<field>``. Names only: values may be secrets."""
        status = self._core.plugins.status(plugin_id)
        if status is None or status.info is None:
            return []
        names = stale(status.info.config_schema, await self._config(plugin_id) if config is None else config)
        for contribution in self._core.config_sets:
            if contribution.plugin_id == plugin_id:
                fields = contribution.value.fields
                values = await self._core.instance_settings.values(contribution.value.id)
                names += [f"{contribution.value.id}.{name}" for name in stale(fields, values)]
        return names

    async def forget_stale_settings(self, plugin_id: str, locale: str | None = None) -> dict[str, Any]:
        """Drop the stored settings the running version refuses (``stale_settings``), the
        admin's "remove" on the notice; the plugin's detail after. A renamed or dropped
        field has nothing in the form to correct, so the notice stayed until the admin
        happened to save the unchanged form, and read as something still to do. The
        plugin already reads their defaults: nothing it reads changes, and it is not
        restarted. Only this removes them (or a save): reading changes nothing stored,
        so going back to the previous version still finds them until then."""
        info = self._info(plugin_id)
        stored = await self._config(plugin_id)
        kept = accepted(info.config_schema, stored)
        if kept != stored:
            await self.store_row(plugin_id, info, config=self._core.sealed("plugins", "config", plugin_id, json.dumps(kept)))
        for contribution in self._core.config_sets:
            if contribution.plugin_id == plugin_id:
                values = await self._core.instance_settings.values(contribution.value.id)
                if (fresh := accepted(contribution.value.fields, values)) != values:
                    await self._core.instance_settings.store(contribution.value.id, fresh)
        log.info("plugin %s: stored settings its version refuses removed at the admin's request", plugin_id)
        return await self.detail(plugin_id, locale)

    async def _standby(self, locale: str | None) -> dict[str, str]:
        """A loaded sandbox backend plugin that does not run the commands here, and why,
        in the reader's words (``SandboxManager.standby``): its card said "Running"
        beside the backend that does, or on a machine without its engine."""
        sandbox = getattr(self._core, "_sandbox", None)
        if sandbox is None:
            return {}
        out = {}
        chosen, _ = await sandbox.in_use()
        for plugin_id, (kind, values) in (await sandbox.standby()).items():
            if kind == "unavailable":
                from skald_host.builtins.sandbox_docker import NOT_RUNNING

                if values.get("reason") == NOT_RUNNING:
                    values = {"reason": self._core.strings.translate("core.plugin.reason.docker_not_running", locale)}
                if chosen is not None:  # another backend does the job: say which
                    other = self._core.plugins.status(chosen)
                    title = other.info.title if other and other.info else chosen
                    values = {**values, "backend": self._text(chosen, "plugin.title", locale, title)}
                    kind = "unavailable_instead"
            if kind == "unused":
                other = self._core.plugins.status(values["plugin"])
                title = other.info.title if other and other.info else values["plugin"]
                values = {"backend": self._text(values["plugin"], "plugin.title", locale, title)}
            out[plugin_id] = self._core.strings.translate(f"core.plugin.state.{kind}", locale, **values)
        return out

    async def list(self, locale: str | None = None) -> list[dict[str, Any]]:
        rows, holders = await self._rows(), await self._holders()
        standby = await self._standby(locale)
        out = []
        for status in self._core.plugins.statuses():
            entry = self._localize(status.as_dict(), locale)
            entry["standby"] = standby.get(status.id) if status.state == "loaded" else None
            entry.pop("traceback", None)  # on the detail and in /api/admin/plugins.json
            entry.pop("tool_failures", None)
            entry.pop("failures", None)
            entry["enabled"] = self._chosen(status, rows)
            entry["configurable"] = bool(status.info and status.info.config_schema)
            entry["icon"] = status.info.icon if status.info else "puzzle"
            entry["manages_own_access"] = bool(status.info and status.info.manages_own_access)
            entry["holders"] = holders.get(status.id, 0)
            entry["row_born"] = status.id in rows
            entry["stale_settings"] = await self.stale_settings(status.id, rows.get(status.id, {}).get("config", {}))
            out.append(entry)
        for plugin_id in await self.missing():
            out.append({**self.missing_entry(plugin_id, locale), "holders": holders.get(plugin_id, 0)})
        return out

    async def detail(self, plugin_id: str, locale: str | None = None) -> dict[str, Any]:
        if self._core.plugins.status(plugin_id) is None and plugin_id in await self.missing():
            return {
                **self.missing_entry(plugin_id, locale), "traceback": None, "failures": [], "tool_failures": [],
                "config_schema": [], "user_config_schema": [], "config": {}, "settings_known": False,
                "grant_by_default": False, "pages": [], "settings_sets": [],
            }
        status = self._status(plugin_id)
        entry = self._localize(status.as_dict(), locale)  # the traceback included: this is the admin's view (plugins.manage)
        entry["standby"] = (await self._standby(locale)).get(plugin_id) if status.state == "loaded" else None
        row = await self._core.registry.run(lambda c: c.execute("SELECT enabled FROM plugins WHERE id = ?", (plugin_id,)).fetchone())
        entry["enabled"] = self._chosen(status, {plugin_id: {"enabled": bool(row[0])}} if row else {})
        info = status.info
        fields = self._core.strings.fields
        entry["config_schema"] = fields(plugin_id, "config", schema_json(info.config_schema), locale) if info else []
        entry["user_config_schema"] = fields(plugin_id, "user_config", schema_json(info.user_config_schema), locale) if info else []
        entry["config"] = masked(info.config_schema, await self._config(plugin_id)) if info else {}
        # A plugin that failed before saying who it is (its import, its plugin_info): the
        # host cannot know whether it has settings, and "no settings" claimed it had none.
        entry["settings_known"] = info is not None
        entry["manages_own_access"] = bool(info and info.manages_own_access)
        entry["grant_by_default"] = bool(info and info.grant_by_default)
        entry["pages"] = [
            {
                "page_id": c.value.page_id,
                "title": self._text(plugin_id, f"page.{c.value.page_id}.title", locale, c.value.title),
                "icon": c.value.icon,
                "admin_only": c.value.admin_only,
            }
            for c in self._core.web_pages if c.plugin_id == plugin_id
        ]
        entry["settings_sets"] = await self._core.instance_settings.owned_by(plugin_id, locale)
        entry["stale_settings"] = await self.stale_settings(plugin_id)
        return entry

    async def store_row(self, plugin_id: str, info: PluginInfo | None, *, enabled: bool | None = None, config: str | None = None) -> None:
        """Write the plugin's row: its switch (``enabled``) or its sealed settings
        (``config``). The row is born at the first of either; born with default access
        (seed 001 "Default access"), its grants are seeded in the same transaction and
        pushed like any grant: a runtime's member as known must not lag the file (its
        next request would go out twice, once built from the old grants)."""
        by_default = bool(info and _grants_by_default(info))
        column = "enabled" if enabled is not None else "config"
        switch = int(enabled if enabled is not None else self._core.plugins.is_enabled(plugin_id))
        settings = config if config is not None else self._core.sealed("plugins", "config", plugin_id, "{}")  # a row born by its switch

        def write(conn: Any) -> list[str]:
            from skald_host.core.identity.users import seed_new_plugin_grants

            born = conn.execute("SELECT 1 FROM plugins WHERE id = ?", (plugin_id,)).fetchone() is None
            conn.execute(
                "INSERT INTO plugins (id, enabled, config, grant_by_default) VALUES (?, ?, ?, ?)"
                f" ON CONFLICT (id) DO UPDATE SET {column} = excluded.{column}, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
                (plugin_id, switch, settings, int(by_default)),
            )
            return seed_new_plugin_grants(conn, plugin_id) if born and by_default else []

        for member_id in await self._core.registry.transaction(write):
            await self._core.users.access_changed(member_id)

    async def missing_settings(self, plugin_id: str) -> list[str]:
        """The plugin's ``required`` settings that have no value yet (stored or default),
        by name: until they have one, its ``startup`` is not run (``NEEDS_SETTINGS``)."""
        info = self._info(plugin_id)
        stored = accepted(info.config_schema, await self._config(plugin_id))
        return [
            f.name for f in info.config_schema
            if f.required and stored.get(f.name) in (None, "") and f.default in (None, "")
        ]

    async def configure(self, plugin_id: str, values: Any, locale: str | None = None) -> dict[str, Any]:
        """Validate against the plugin's schema and store; refused whole on any bad
        field. The row is born here too if the plugin was never toggled (disabled).
        ``{"config": the stored values, masked}``, and ``not_started`` (why, in the
        reader's language) when the save started the plugin and its ``startup`` failed
        on them: the values stay saved, but "Saved." alone hid that from the form."""
        info = self._info(plugin_id)
        # What the plugin ran on: a stored value its schema refuses it read as the default.
        previous = accepted(info.config_schema, await self._config(plugin_id))
        fresh = validate(info.config_schema, values, previous)
        await self.store_row(plugin_id, info, config=self._core.sealed("plugins", "config", plugin_id, json.dumps(fresh)))
        status = self._core.plugins.status(plugin_id)
        running = status is not None and self._core.plugins.is_enabled(plugin_id)
        started = True
        if running and not status.healthy:  # type: ignore[union-attr]
            # Its startup failed, most often for want of these settings: try it again.
            log.info("plugin %s configured; starting it again", plugin_id)
            started = await self._core.start_plugin(plugin_id)
        elif running and fresh != previous and not live_change(info.config_schema, previous, fresh):
            # Running on the old values: what only ``startup`` applies (a bot's token, a
            # public address) must not be "Saved." and ignored.
            log.info("plugin %s configured; restarting it on the new values", plugin_id)
            started = await self._core.restart_plugin(plugin_id)
        elif running and fresh != previous:
            # Every changed field is one the plugin reads where it uses it (``live``): a
            # restart would only end what it is doing (a connector's call in flight).
            log.info("plugin %s configured; its new values apply without a restart", plugin_id)
        else:
            log.info("plugin %s configured%s", plugin_id, "" if fresh != previous else " (nothing changed)")
        answer: dict[str, Any] = {"config": masked(info.config_schema, fresh)}
        if not started and status is not None and not status.healthy:
            answer["not_started"] = self.error_text(status, locale) or ""
        return answer

    def manages_own_access(self, plugin_id: str) -> bool:
        return bool(self._info(plugin_id).manages_own_access)

    async def roster(self, plugin_id: str) -> list[dict[str, Any]]:
        """Who holds the plugin (read-only; grants are edited on each member's page)."""
        info = self._info(plugin_id)
        members = await self._core.users.list()
        return [
            {
                "id": m.id,
                "username": m.username,
                "display_name": m.display_name,
                "implicit": m.is_admin,
                "active": m.active,
            }
            for m in members
            if m.is_admin or (not info.manages_own_access and plugin_id in m.plugin_grants)
        ]

    def _grantable(self) -> list[PluginStatus]:
        return [
            s for s in self._core.plugins.statuses()
            if s.info is not None and s.state in ("loaded", "disabled") and not s.info.manages_own_access and not s.builtin
        ]

    async def member_grants(self, member_id: str, locale: str | None = None) -> list[dict[str, Any]]:
        member = await self._core.users.get(member_id)
        return [
            {
                "plugin_id": s.id,
                "title": self._text(s.id, "plugin.title", locale, s.info.title) if s.info else s.id,
                "enabled": self._core.plugins.is_enabled(s.id),
                "granted": member.is_admin or s.id in member.plugin_grants,
                "implicit": member.is_admin,
            }
            for s in self._grantable()
        ]

    async def replace_member_grants(self, member_id: str, plugin_ids: Any, locale: str | None = None) -> list[dict[str, Any]]:
        """The one write path for grants: the member's whole set, replaced."""
        if not isinstance(plugin_ids, list) or not all(isinstance(p, str) for p in plugin_ids):
            raise CatalogError("plugins must be a list of plugin ids", code="field_type", field="plugins")
        member = await self._core.users.get(member_id)
        grantable = {s.id for s in self._grantable()}
        for plugin_id in plugin_ids:
            status = self._core.plugins.status(plugin_id)
            if status is not None and status.info is not None and status.info.manages_own_access:
                raise CatalogError(f"plugin {plugin_id!r} manages its own access; it cannot be granted here", code="plugin_manages_own_access", plugin=plugin_id)
            if plugin_id not in grantable:
                raise CatalogError(f"no grantable plugin {plugin_id!r}", code="plugin_not_grantable", plugin=plugin_id)
        if member.is_admin:
            raise CatalogError("admins hold every plugin implicitly", code="admin_plugins_implicit")
        wanted = set(plugin_ids)

        def write(conn: Any) -> None:
            for plugin_id in grantable:
                if plugin_id in wanted:
                    conn.execute("INSERT OR IGNORE INTO plugin_access (plugin_id, user_id) VALUES (?, ?)", (plugin_id, member_id))
                else:
                    conn.execute("DELETE FROM plugin_access WHERE plugin_id = ? AND user_id = ?", (plugin_id, member_id))

        await self._core.registry.transaction(write)
        await self._core.users.access_changed(member_id)
        log.info("member %s: plugin grants replaced (%d)", member_id, len(wanted))
        return await self.member_grants(member_id, locale)

    # -- members -------------------------------------------------------------------------

    def usable(self, member: Member, plugin_id: str) -> bool:
        """Enabled, and the member may use it (admins: always; binding-managed plugins
        decide themselves, so any active member passes this gate). Built-ins are part
        of the host: they are never in a grant list, so a grant check would withhold
        their routes and pages from every member forever; they gate by capability
        themselves and mark admin pages ``admin_only``."""
        status = self._core.plugins.status(plugin_id)
        if status is None or status.info is None or not self._core.plugins.is_enabled(plugin_id):
            return False
        if status.builtin or status.info.manages_own_access:
            return member.active
        return allowed(member, plugin_action(plugin_id))

    def tools_usable(self, member: Member, plugin_id: str) -> bool:
        """The member may use the plugin, and it runs: one whose startup failed or that
        waits for its settings (red on its card) has nothing behind its tools (the
        model was offered Telegram's pairing tool while the bot had no token)."""
        status = self._core.plugins.status(plugin_id)
        return status is not None and status.started and self.usable(member, plugin_id)

    def tool_refusal(self, member: Member, tool: Any) -> str | None:
        """Why ``member`` may not use a registered tool now, as the audit names it
        (``plugin:<id>``: the plugin is disabled, not running or not granted; ``action:<capability>``:
        the role lacks the tool's capability), or None: they may. Memory only (the
        member as last read or pushed, the plugins' flags), so it is asked every round
        and again as each call starts."""
        if not self.tools_usable(member, tool.plugin_id):
            return plugin_action(tool.plugin_id)
        if tool.capability is not None and not allowed(member, tool.capability):
            return f"action:{tool.capability}"
        return None

    def usable_tools(self, member: Member, tools: Any) -> list[Any]:
        """``tools`` less those ``tool_refusal`` refuses, each plugin asked once (a
        round's list: memory only, in every round)."""
        plugins: dict[str, bool] = {}
        out = []
        for tool in tools:
            usable = plugins.get(tool.plugin_id)
            if usable is None:
                usable = plugins[tool.plugin_id] = self.tools_usable(member, tool.plugin_id)
            if usable and (tool.capability is None or allowed(member, tool.capability)):
                out.append(tool)
        return out

    async def mine(self, member: Member, locale: str | None = None) -> list[dict[str, Any]]:
        out = []
        for status in self._core.plugins.statuses():
            if status.builtin or not self.usable(member, status.id):
                continue
            info = status.info
            assert info is not None
            values = await self._user_config(status.id, member.id)
            out.append(
                {
                    "id": status.id,
                    "title": self._text(status.id, "plugin.title", locale, info.title),
                    "description": self._text(status.id, "plugin.description", locale, info.description),
                    "icon": info.icon,
                    "user_config_schema": self._core.strings.fields(status.id, "user_config", schema_json(info.user_config_schema), locale),
                    "user_config": masked(info.user_config_schema, values),
                    "configured": bool(values) or not info.user_config_schema,
                }
            )
        return out

    async def _user_config(self, plugin_id: str, member_id: str) -> dict[str, Any]:
        row = await self._core.registry.run(
            lambda c: c.execute(
                "SELECT config FROM plugin_user_configs WHERE plugin_id = ? AND user_id = ?", (plugin_id, member_id)
            ).fetchone()
        )
        return json.loads(row[0]) if row else {}

    async def save_my_config(self, member: Member, plugin_id: str, values: Any) -> dict[str, Any]:
        """Validate against the plugin's per-member schema, then hand to the plugin's
        ``user_config_updated`` (which may turn it into something else, like a pairing
        binding) or, when it has none, store it. Per-member values live in the
        admin-readable registry: schemas must not ask members for secrets."""
        if not self.usable(member, plugin_id):
            raise CatalogError(f"no plugin {plugin_id!r}", code="plugin_unknown", plugin=plugin_id)
        info = self._info(plugin_id)
        fresh = validate(info.user_config_schema, values, await self._user_config(plugin_id, member.id), keep_unknown=True)
        if self._core.plugins.implements("user_config_updated", plugin_id):
            api = self._core.host_api(plugin_id)
            try:
                await self._core.plugins.call_one("user_config_updated", plugin_id, member_id=member.id, values=fresh, host=api)
            except (ConfigInvalid, CatalogError):
                raise
            except ValueError as exc:  # a plugin refusing the value says why, in the member's language (``host.translate``)
                raise CatalogError(str(exc), code="plugin_refused_value", plugin=plugin_id, reason=str(exc)) from None
            except (Exception, *PLUGIN_EXITS) as exc:  # its message may quote the values the member sent: withheld
                error_id = record_failure(self._core.plugins, plugin_id, "hook user_config_updated", exc, say=isinstance(exc, PluginError))
                raise CatalogError(
                    f"plugin {plugin_id!r} could not apply the settings (error id {error_id})",
                    code="plugin_settings_not_applied", plugin=plugin_id, error_id=error_id,
                ) from None
        else:
            await self._core.host_api(plugin_id).set_user_config(member.id, fresh)
        return masked(info.user_config_schema, await self._user_config(plugin_id, member.id))

    # -- a data-losing password reset (``ResetParticipant``) ---------------------------------
    # Per-member config was set by whoever held the old password (a webhook, an account
    # on another service): the account starting over must not send to it. Admin-set
    # rows (grants, supervision) stay: the reset takes what the account did, not what
    # was done to it.

    async def check_set_aside(self, member_id: str, quarantine_dir: Path) -> None:
        """Nothing of the catalog's is on disk."""

    def withdraw(self, conn: Any, member_id: str) -> None:
        conn.execute("DELETE FROM plugin_user_configs WHERE user_id = ?", (member_id,))

    async def set_aside(self, member_id: str, stem: Path) -> None:
        """Nothing of the catalog's is on disk."""

    async def restore(self, member_id: str, stem: Path) -> None:
        """The settings a reset deleted stay deleted."""

    def pages(self, member: Member, locale: str | None = None) -> list[dict[str, Any]]:
        visible = []
        for contribution in self._core.web_pages:
            page = contribution.value
            if not self.usable(member, contribution.plugin_id):
                continue
            slot = getattr(page, "slot", "sidebar")
            if (page.admin_only or slot != "sidebar") and not member.is_admin:
                continue
            visible.append(
                {
                    "plugin_id": contribution.plugin_id,
                    "page_id": page.page_id,
                    "title": self._text(contribution.plugin_id, f"page.{page.page_id}.title", locale, page.title),
                    "icon": page.icon,
                    "priority": page.priority,
                    "admin_only": page.admin_only,
                    "entry_url": f"/api/plugin/{contribution.plugin_id}/{page.entry.lstrip('/')}",
                    "route": f"#plugin/{contribution.plugin_id}/{page.page_id}",
                    "slot": slot,
                }
            )
        return sorted(visible, key=lambda p: (p["priority"], p["title"]))


class InstanceSettings:
    """Values of the config sets plugins register (``register_config_sets``), stored
    in the registry's ``config`` table as ``set:<id>``. Sets with an ``owner`` are
    rendered by that plugin's own page; the rest by the general settings page."""

    def __init__(self, core: "Skald") -> None:
        self._core = core

    def _set(self, set_id: str) -> Any:
        for contribution in self._core.config_sets:
            if contribution.value.id == set_id:
                return contribution.value
        raise CatalogError(f"no settings set {set_id!r}", code="settings_set_unknown", set=set_id)

    async def values(self, set_id: str) -> dict[str, Any]:
        row = await self._core.registry.run(
            lambda c: c.execute("SELECT value FROM config WHERE key = ?", (f"set:{set_id}",)).fetchone()
        )
        return json.loads(self._core.opened("config", "value", f"set:{set_id}", row[0])) if row else {}

    async def _shown(self, contribution: Any, locale: str | None) -> dict[str, Any]:
        config_set, strings = contribution.value, self._core.strings
        return {
            "id": config_set.id,
            "title": strings.plugin_text(contribution.plugin_id, f"set.{config_set.id}.title", locale, config_set.title),
            "plugin_id": contribution.plugin_id,
            "owner": config_set.owner,
            "fields": strings.fields(contribution.plugin_id, f"set.{config_set.id}", schema_json(config_set.fields), locale),
            "values": masked(config_set.fields, stored := await self.values(config_set.id)),
            # Stored values the plugin's running version refuses: read as the defaults
            # ``values`` shows until the set is saved (names only: values may be secret).
            "stale": stale(config_set.fields, stored),
        }

    async def shown(self, set_id: str, locale: str | None = None) -> dict[str, Any]:
        """One set as a settings form shows it (the system-agents page shows each
        agent's own set beside its runs)."""
        contribution = next(c for c in self._core.config_sets if c.value.id == set_id)
        return await self._shown(contribution, locale)

    async def general(self, locale: str | None = None) -> list[dict[str, Any]]:
        return [await self._shown(c, locale) for c in self._core.config_sets if c.value.owner is None]

    async def owned_by(self, plugin_id: str, locale: str | None = None) -> list[dict[str, Any]]:
        """The sets with an ``owner`` that ``plugin_id`` registered: shown on its page in
        the catalog, saved through the same ``save``."""
        return [await self._shown(c, locale) for c in self._core.config_sets if c.plugin_id == plugin_id and c.value.owner is not None]

    async def store(self, set_id: str, values: dict[str, Any]) -> None:
        """Write a set's values as they are (``save`` checks them first)."""
        await self._core.registry.transaction(
            lambda c: c.execute(
                "INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (f"set:{set_id}", self._core.sealed("config", "value", f"set:{set_id}", json.dumps(values))),
            )
        )

    async def save(self, set_id: str, values: Any) -> dict[str, Any]:
        config_set = self._set(set_id)
        fresh = validate(config_set.fields, values, await self.values(set_id))
        await self.store(set_id, fresh)
        self._core.wake_system_agents()  # an agent's set: turned on, or a shorter interval
        return masked(config_set.fields, fresh)


_PAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
#: Where a page may be mounted, read from the contract's own ``Literal``: a page of
#: another slot was accepted and then shown nowhere.
PAGE_SLOTS: tuple[str, ...] = get_args(get_type_hints(WebPage)["slot"])


def validate_web_page(plugin_id: str, args: tuple[Any, ...]) -> WebPage:
    """A ``register_web_pages`` value. Its ``entry`` is loaded by the shell as
    ``/api/plugin/<id>/<entry>`` into the member's session: anything but a plain path
    inside the plugin's own routes (another site's script, ``../../admin/…``) would run
    there as code the plugin does not own."""
    if len(args) != 1 or not isinstance(args[0], WebPage):
        raise PluginError("register() expects one WebPage")
    page = args[0]
    if not isinstance(page.page_id, str) or not _PAGE_ID.fullmatch(page.page_id):
        raise PluginError(
            f"page {page.page_id!r}: the page id must be 1-64 letters, digits, '-' or '_', starting with a letter or digit"
            f" (it is part of the address #plugin/{plugin_id}/<page id> and of the string key page.<page id>.title)"
        )
    if page.slot not in PAGE_SLOTS:
        raise PluginError(f"page {page.page_id!r}: slot {page.slot!r} is not one of {', '.join(map(repr, PAGE_SLOTS))}")
    problem = _entry_problem(page.entry)
    if problem:
        raise PluginError(
            f"page {page.page_id!r}: entry {page.entry!r} {problem}; give a relative path inside the plugin's own routes,"
            f" like 'page.js' (served as /api/plugin/{plugin_id}/page.js)"
        )
    return page


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, str) or not entry.strip():
        return "is not a path"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in entry):  # a URL parser drops tabs and newlines: '.\n.' is '..'
        return "contains a control character"
    try:
        parts = urlsplit(entry)
    except ValueError:
        return "is not a path"
    if parts.scheme or parts.netloc or entry.startswith("//"):
        return "is a URL, not a path"
    path = unquote(parts.path)  # a browser reads '%2e%2e' as '..'
    if "\\" in entry or "\\" in path:
        return "contains a backslash"
    if entry.startswith("/"):
        return "starts with a slash"
    if ".." in path.split("/"):
        return "has a '..' segment"
    return None


def validate_config_set(plugin_id: str, args: tuple[Any, ...]) -> ConfigSet:
    """A ``register_config_sets`` value, its fields checked as a plugin's schemas are."""
    if len(args) != 1 or not isinstance(args[0], ConfigSet):
        raise PluginError("register() expects one ConfigSet")
    config_set = args[0]
    try:
        check_schema(config_set.fields, f"settings set {config_set.id!r}")
    except SchemaInvalid as exc:
        raise PluginError(str(exc)) from None
    return config_set


def _loosely(name: str) -> str:
    """A name as PEP 503 compares distributions: 'Skald_Weather' is 'skald-weather'."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _grants_by_default(info: PluginInfo) -> bool:
    return info.grant_by_default and not info.manages_own_access


__all__ = [
    "PluginCatalog", "InstanceSettings", "CatalogError", "ConfigInvalid", "MemberNotFound", "PluginError",
    "validate_config_set", "validate_web_page",
]

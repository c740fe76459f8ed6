"""``Skald``: the headless application core and its composition root (seed 002).

Built and started without any HTTP: tests and the CLI drive it directly; the web
layer is one consumer of its accessors. ``start`` is staged in dependency order and
``stop`` undoes it: background tasks joined against a deadline, plugins stopped,
every session revoked and every owner file closed so no key stays in memory.
"""

from __future__ import annotations

import asyncio
import json
import gc
import logging
import os
import sys
from pathlib import Path
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Awaitable, Callable

from skald_hookspecs.events import SystemEvent, UserEvent
from skald_hookspecs.types import NotReady
from skald_host.builtins import BUILTIN_PLUGINS
from skald_host.core.agent.definitions import AgentCatalog
from skald_host.core.backups import BackupService
from skald_host.core.agent.runtime import ChatService
from skald_host.core.agent.tools import ToolRegistry, validate_tool
from skald_host.core.buses import Buses
from skald_host.core.channels import ChannelService, validate_channel
from skald_host.core.folders import FolderService
from skald_host.core.files.service import FileService
from skald_host.core.identity.administration import MemberAdministration
from skald_host.core.identity.auth import AuthService
from skald_host.core.identity.crypto import KeyDerivation
from skald_host.core.identity.device_tokens import DeviceTokens
from skald_host.core.identity.role_store import RoleStore
from skald_host.core.identity.sessions import SessionStore
from skald_host.core.identity.throttle import LoginThrottle
from skald_host.core.identity.users import MemberNotFound, UserManager
from skald_host.core.i18n import Strings
from skald_host.core.memory.notes import MemoryService
from skald_host.core.tts import TtsManager, validate_engine
from skald_host.core.sandbox import SandboxManager, validate_backend
from skald_host.core.plugins.failures import PLUGIN_EXITS, record_failure, withheld_traceback
from skald_host.core.plugins.host_api import PluginHostApi, end_member_follows
from skald_host.core.plugins.bundles import add_bundles, bundle_validator
from skald_host.core.plugins.catalog import NEEDS_SETTINGS, STARTUP_BLOCKED, STARTUP_TIMED_OUT, InstanceSettings, PluginCatalog, validate_config_set, validate_web_page
from skald_host.core.plugins.manager import Contribution, HookBlocked, PluginError, PluginManager, StrictPluginFailure, described, place_of
from skald_host.core.schema import REGISTRY_MIGRATIONS
from skald_host.core.schedules.service import StartAtUnlock
from skald_host.core.storage import Database, DiskFailure, StorageError, check_sqlcipher_build, secure_dir
from skald_host.core.storage.sealing import Sealer, holds_sealed, seal_registry
from skald_host.core.supervisor import Supervisor
from skald_host.core.system_agents import AgentRegistry, ReportService, SystemAgentScheduler, pair_agents_with_sets, validate_agent
from skald_host.settings import Settings

log = logging.getLogger(__name__)

#: Every database file has its own thread, and each job's result comes back to the
#: event loop. With CPython's default 5 ms switch interval a busy loop can keep a
#: database thread waiting for the GIL between its statements, and a finished job's
#: result waiting, for that long: on the path of every message and round. The host
#: trades some throughput of CPU-bound threads for that latency.
GIL_SWITCH_SECONDS = 0.0005

SESSION_SWEEP_SECONDS = 30.0


#: The collector's generation thresholds (CPython's default: 700, 10, 10). A young
#: collection traverses every container allocated since the last one, whole, including
#: a turn's history rows and request bodies still in use; at 700 one came every few
#: turns of a chat stream. In the chat benchmark's 200 streams the collector took ~10%
#: of the host's CPU (~450 young, 40 middle and 4 full collections of 50 ms a load
#: phase); at 10,000 it takes ~1.5% (~15 young, 2 middle). The cyclic garbage a turn
#: leaves waits longer, a few MB at most.
GC_THRESHOLDS = (10_000, 10, 10)
#: ``config`` key prefix (then the plugin id): the members whose password reset a
#: plugin missed while it was not running, told to it when it starts. The value is a
#: JSON list of member ids (the format since 1.18; kept as it is).
MISSED_RESETS = "member_reset_missed:"
#: The same for deletions: the members deleted while the plugin was not running.
MISSED_DELETIONS = "member_deleted_missed:"
#: Each per-member hook a plugin off at the event is told when it next starts, in this
#: order (a deleted member's missed reset is dropped at the deletion: never both).
MISSED_HOOKS = (("member_reset", MISSED_RESETS), ("member_deleted", MISSED_DELETIONS))


def _note_missed(c: Any, prefix: str, plugin_ids: list[str], member_id: str) -> None:
    """``member_id`` added, once, to each plugin's list under ``prefix`` (in system.db)."""
    for plugin_id in plugin_ids:
        c.execute("INSERT OR IGNORE INTO config (key, value) VALUES (?, '[]')", (prefix + plugin_id,))
        c.execute(
            "UPDATE config SET value = json_insert(value, '$[#]', ?) WHERE key = ? AND NOT EXISTS"
            " (SELECT 1 FROM json_each(value) WHERE json_each.value = ?)",
            (member_id, prefix + plugin_id, member_id),
        )


def settle_heap() -> None:
    """Take what start-up built (modules, classes, plugin code, alive until exit) out of
    the collector's reach: every full collection walked all of it, a 60-80 ms pause a
    few times an hour of chat in the chat benchmark, landing on somebody's first token.
    Collected first, so no garbage from start-up is kept for good. Then collect less
    often (``GC_THRESHOLDS``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def host_version() -> str:
    try:
        return version("skald-host")
    except PackageNotFoundError:
        return "0+unknown"


def source_revision(checkout: Path | None = None) -> str | None:
    """The commit a source checkout runs (its first 12 hex digits), read from ``.git``
    without running git; None when the host is not run from a checkout. The package
    version stays 0.1.0 from commit to commit, so an admin could not tell which code
    their server ran (operator probe)."""
    git = (checkout or Path(__file__).resolve().parents[2]) / ".git"
    try:
        head = (git / "HEAD").read_text(encoding="ascii").strip()
        if not head.startswith("ref: "):
            return head[:12] or None
        ref = head[5:]
        loose = git / ref
        if loose.is_file():
            return loose.read_text(encoding="ascii").strip()[:12] or None
        for line in (git / "packed-refs").read_text(encoding="ascii").splitlines():
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha[:12]
    except (OSError, UnicodeDecodeError):
        return None
    return None


class StartupError(RuntimeError):
    """The host cannot start; the message says what to fix."""


def build_plugin_manager(settings: Settings, *, extra: tuple[Any, ...] = (), use_entry_points: bool = True) -> PluginManager:
    """The plugin manager as ``settings`` describe it. Tests pass ``extra`` plugins and
    may turn entry points off to get exactly the plugins they name."""
    return PluginManager(
        builtins=BUILTIN_PLUGINS,
        extra=extra,
        use_entry_points=use_entry_points,
        block=settings.plugins.block,
        safe_mode=settings.plugins.safe_mode,
        strict=settings.plugins.strict,
        hook_timeout=settings.plugins.hook_timeout_seconds,
        slow_import_ms=settings.plugins.slow_import_ms,
        host_version=host_version(),
    )


@dataclass
class _Started:
    host_api: PluginHostApi


class Skald:
    def __init__(self, settings: Settings, plugins: PluginManager) -> None:
        self.settings = settings
        self.plugins = plugins
        self.buses = Buses()
        self.supervisor = Supervisor()
        self.stopping = asyncio.Event()
        #: Set once a stop cut the running turns (``interrupt_turns``): their events (each
        #: turn's ``turn_finished``) are on the members' buses, for the sockets to send
        #: before they close (``web.routes.events``).
        self.turns_interrupted = asyncio.Event()
        self.strings = Strings()
        # Every accepted ``register_i18n`` bundle: merged again when a plugin is enabled or
        # disabled, as what it adds to other domains counts only while it is enabled.
        self._bundles: list[Contribution] = []
        self.sqlcipher_version = ""
        self._announced_start = False  # "skald core started" was logged: a stop says "stopped"
        self._started: dict[str, _Started] = {}
        self._lifecycle: dict[str, asyncio.Lock] = {}  # per plugin: a restart's stop and start together
        self.web_pages: list[Contribution] = []
        self.config_sets: list[Contribution] = []
        self.catalog = PluginCatalog(self)
        self.instance_settings = InstanceSettings(self)
        self._registry: Database | None = None
        #: Seals and opens the instance secrets stored in the registry (set at start).
        self.sealer: Sealer | None = None
        self._users: UserManager | None = None
        self._auth: AuthService | None = None
        self._roles: RoleStore | None = None
        self._chat: ChatService | None = None
        self._channels: ChannelService | None = None
        self._files: FileService | None = None
        self.memory = MemoryService(self)
        self.backups = BackupService(self)
        self._folders: FolderService | None = None
        self._sandbox: SandboxManager | None = None
        self._tts: TtsManager | None = None
        self._system_agents: SystemAgentScheduler | None = None
        self.reports = ReportService(self)

    # -- accessors (the surface the web layer and HostApi are cut from) --------------

    @property
    def registry(self) -> Database:
        assert self._registry is not None, "Skald.start() has not run"
        return self._registry

    @property
    def users(self) -> UserManager:
        assert self._users is not None, "Skald.start() has not run"
        return self._users

    @property
    def auth(self) -> AuthService:
        assert self._auth is not None, "Skald.start() has not run"
        return self._auth

    @property
    def chat(self) -> ChatService:
        assert self._chat is not None, "Skald.start() has not run"
        return self._chat

    @property
    def folders(self) -> FolderService:
        assert self._folders is not None, "Skald.start() has not run"
        return self._folders

    @property
    def files(self) -> FileService:
        assert self._files is not None, "Skald.start() has not run"
        return self._files

    @property
    def sandbox(self) -> SandboxManager:
        assert self._sandbox is not None, "Skald.start() has not run"
        return self._sandbox

    @property
    def tts(self) -> TtsManager:
        assert self._tts is not None, "Skald.start() has not run"
        return self._tts

    @property
    def channels(self) -> ChannelService:
        assert self._channels is not None, "Skald.start() has not run"
        return self._channels

    @property
    def system_agents(self) -> SystemAgentScheduler:
        assert self._system_agents is not None, "Skald.start() has not run"
        return self._system_agents

    @property
    def safe_mode(self) -> bool:
        """``plugins.safe_mode``: the server is started to look, not to work — a restored
        copy beside the live server (README "Backups"), or one whose plugins broke it.
        Besides leaving out every non-built-in plugin, nothing starts on a timer that
        would reach the outside or change members' data: scheduled prompts, system
        agents' passes and scheduled backups wait (stay due) for a normal start. A copy
        ran its member's 08:00 prompt beside the live server: the model was asked twice
        and the copy's conversation parted from the original's (operator probe)."""
        return self.settings.plugins.safe_mode

    @property
    def administration(self) -> MemberAdministration:
        return MemberAdministration(self.users, self.auth)

    @property
    def roles(self) -> RoleStore:
        assert self._roles is not None, "Skald.start() has not run"
        return self._roles

    # -- lifecycle --------------------------------------------------------------------

    @classmethod
    async def start(
        cls, settings: Settings, plugins: PluginManager | None = None, *, start_plugins: bool = True
    ) -> "Skald":
        """Build and start the core. ``start_plugins=False`` loads plugins and collects
        their registrations without running any ``startup``: the web layer still has
        routes to collect first, and ``skald plugins`` only wants the status table (it
        must not start a second Telegram poller beside a running server)."""
        core = cls(settings, plugins or build_plugin_manager(settings))
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_SECONDS))
        try:
            await core._start()
            if start_plugins:
                await core.start_enabled_plugins()
                core.start_system_agents()
        except BaseException:
            await core.stop()
            raise
        return core

    async def _start(self) -> None:
        settings = self.settings
        try:
            self.sqlcipher_version = check_sqlcipher_build()
        except StorageError as exc:
            raise StartupError(str(exc)) from None
        secure_dir(settings.data_dir)
        secure_dir(settings.database_dir)
        try:
            self._registry = await Database.open(
                settings.database_dir / "system.db", key=None, migrations=REGISTRY_MIGRATIONS, create=True
            )
        except DiskFailure as exc:
            raise StartupError(f"{exc}; free space on (or repair) the disk that holds {settings.data_dir}, then start again") from None
        except StorageError as exc:
            raise StartupError(str(exc)) from None
        pragmas = await self._registry.pragmas()
        if pragmas["journal_mode"] != "wal" or pragmas["synchronous"] != 2:
            raise StartupError(f"system.db must run with journal_mode=wal and synchronous=FULL, got {pragmas}")
        try:  # instance secrets: sealed before anything reads them (core/storage/sealing.py)
            create = not await self._registry.run(holds_sealed)
            self.sealer = await asyncio.to_thread(Sealer.load_or_create, settings.data_dir, create=create)
            sealed = await self._registry.transaction(lambda c: seal_registry(c, self.sealer))
        except StorageError as exc:
            raise StartupError(str(exc)) from None
        if sealed:
            # Now, not at the next stop: until the checkpoint the clear pages stay in the
            # main file (and a killed earlier server's WAL holds its own clear frames).
            await self._registry.run(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
            log.info("sealed %d instance secret(s) an earlier version stored in clear", sealed)

        kdf = KeyDerivation(settings.kdf.params, permits=settings.kdf.concurrency)
        self._roles = RoleStore(self._registry)
        self._users = UserManager(self._registry, settings.database_dir, kdf, self.buses)
        sessions = SessionStore(settings.auth.session_idle_minutes * 60, settings.auth.session_absolute_hours * 3600)
        throttle = LoginThrottle(
            settings.auth.login_failures_per_account,
            settings.auth.login_failures_per_address,
            settings.auth.login_window_minutes * 60,
        )
        self._auth = AuthService(self._users, sessions, throttle, self.buses, DeviceTokens(self._users.registry, self.sealer))
        self._folders = FolderService(self._registry, self._users, self.buses, settings.data_dir)
        # A deleted member's own projects go under the deletion's mark: registered before
        # the reconcile that finishes a deletion a stop cut short.
        self._users.deletion_participants.append(self._folders)
        await self._users.reconcile()
        self._files = FileService(self)
        await self._files.start()
        self._users.after_delete.append(self._files.remove_home)
        await self._folders.reconcile()  # a projects folder without a member or a mark
        # What a data-losing password reset takes out of the account's reach, in this order.
        self._users.reset_participants.extend([self._files, self._folders, self.catalog])
        self.supervisor.spawn("folders-member-deletions", self._folders.follow_member_deletions(self.stopping))

        self.plugins.load()
        await self._apply_enabled_flags()
        self._bundles = await self.plugins.collect("register_i18n", bundle_validator(self.plugins), kind="bundle")
        add_bundles(self.strings, self._bundles, self.plugins)
        self.web_pages = await self.plugins.collect("register_web_pages", validate_web_page, kind="page")
        tools = await self.plugins.collect("register_tools", validate_tool, key=lambda t: t.name, kind="tool")
        agents = AgentCatalog()
        for contribution in await self.plugins.collect("register_agent_dirs", _one(Path), kind="agent directory"):
            agents.add_directory(contribution.value, contribution.plugin_id)
        self._chat = ChatService(self, ToolRegistry(tools, builtin=self._is_builtin, plugins=self.plugins), agents)
        await self._chat.models.read_known()  # before any definition generation loads: inline models are checked against it
        # Loaded now, every folder and tool registered: a plugin's meta.yaml at fault is on
        # its page from the start (a refusal is logged; the admin's Helpers page says why).
        self._chat.subagent_catalog.check()
        self._chat.add_context_provider("project:", self._folders.project_context)
        self._users.before_lock.append(self._chat.before_lock)
        self._users.after_access_change.append(lambda member_id: self._chat.access_changed(member_id=member_id))  # type: ignore[union-attr]
        self._roles.after_change.append(lambda role_id: self._chat.access_changed(role_id=role_id))  # type: ignore[union-attr]
        self._users.after_access_change.append(lambda member_id: self._announce_access(member_id=member_id))
        self._roles.after_change.append(lambda role_id: self._announce_access(role_id=role_id))
        channels = await self.plugins.collect("register_channels", validate_channel, key=lambda c: c[0], kind="channel")
        self._channels = ChannelService(self, dict(c.value for c in channels))
        backends = await self.plugins.collect("register_sandbox_backends", validate_backend, key=lambda b: b[0], kind="sandbox backend")
        self._sandbox = SandboxManager(self, backends)
        engines = await self.plugins.collect("register_tts_engines", validate_engine, key=lambda e: e[0], kind="TTS engine")
        self._tts = TtsManager(self, engines)
        await self._sandbox.start()
        self._folders.after_membership_change.append(self._sandbox.after_membership_change)
        self._users.before_lock.append(self._sandbox.before_lock)  # after the chat's: turns end first
        self._users.before_lock.append(self._channels.before_lock)
        # Plugins' subscriptions to the member's events end with the lock (contract 1.17).
        self._users.before_lock.append(lambda member_id: end_member_follows(self, member_id))
        self._users.after_unlock.append(self._channels.after_unlock)
        # The member_unlocked / member_locking hooks (contract 1.2): per-member plugin runtimes.
        self._users.after_unlock.append(self._member_hook("member_unlocked"))
        # A member's recurring prompts run from their unlock, not from their first chat.
        self._users.after_unlock.append(StartAtUnlock(self).after_unlock)
        # Only when the file is open and about to close, once (not for every lock call).
        self._users.before_close.append(self._member_hook("member_locking", with_host=False))
        self._reset_hook = self._member_hook("member_reset")
        self._users.after_reset.append(self._member_reset)  # contract 1.7
        self._deleted_hook = self._member_hook("member_deleted")
        self._users.after_delete.append(self._member_deleted)  # contract 1.14
        # contract 1.15: after a member's role, active flag or plugin grants changed, and
        # for each member of a role whose capabilities or attributes changed (both lists
        # are called once the change is stored, before the admin's request answers).
        access_hook = self._member_hook("member_access_changed")
        self._users.after_access_change.append(access_hook)
        self._roles.after_change.append(lambda role_id: self._role_access_changed(role_id, access_hook))
        self.config_sets = await self.plugins.collect(
            "register_config_sets", validate_config_set, key=lambda s: s.id, kind="settings set"
        )
        agents = await self.plugins.collect("register_system_agents", validate_agent, key=lambda a: a.id, kind="system agent")
        paired, disagreements = pair_agents_with_sets(agents, self.config_sets)
        for plugin_id, (problem, place) in disagreements.items():
            self.plugins.fail(plugin_id, f"register_system_agents: {problem}", at=place)
        self._system_agents = SystemAgentScheduler(self, AgentRegistry(self, paired))
        self.supervisor.spawn("session-expiry", self._expire_sessions())
        log.info("skald core started (SQLCipher %s, %d plugin(s))", self.sqlcipher_version, len(self.plugins.statuses()))
        self._announced_start = True
        try:
            full = os.statvfs(settings.data_dir).f_bavail == 0
        except OSError:
            full = False
        if full:  # it reads; what would write answers "disk full" until space is freed (no restart needed)
            log.warning("the disk is full: %s can store nothing until space is freed", settings.data_dir)

    def _is_builtin(self, plugin_id: str) -> bool:
        status = self.plugins.status(plugin_id)
        return status is not None and status.builtin

    async def _apply_enabled_flags(self) -> None:
        rows = await self.registry.run(lambda c: c.execute("SELECT id, enabled FROM plugins").fetchall())
        flags = {r[0]: bool(r[1]) for r in rows}
        for status in self.plugins.statuses():
            if status.builtin:
                self.plugins.set_enabled(status.id, flags.get(status.id, True))
            elif status.id in flags:
                self.plugins.set_enabled(status.id, flags[status.id])

    async def start_enabled_plugins(self) -> None:
        """Start every enabled, healthy plugin, concurrently: each is bounded by the hook
        timeout, so a hanging plugin delays the boot by that much at most, not N times."""
        ids = [p for p in self.plugins.loaded_ids() if self.plugins.is_enabled(p)]
        await asyncio.gather(*(self.start_plugin(p) for p in ids))

    async def start_plugin(self, plugin_id: str) -> bool:
        """Run the plugin's ``startup`` with its HostApi. A failure or a timeout marks it
        unhealthy and is logged; the host goes on."""
        status = self.plugins.status(plugin_id)
        if status is None or status.state != "loaded" or plugin_id in self._started:
            return False
        api = PluginHostApi(plugin_id, self, starting=True)
        status.set_degraded(None)  # an earlier run's reason: this run says its own (HostApi.set_degraded)
        try:
            missing = await self.catalog.missing_settings(plugin_id)
            if missing:  # its startup would only fail on them, reading like a crash
                raise NotReady(f"needs its settings first: {', '.join(missing)}", key=NEEDS_SETTINGS, values={"fields": missing})
            await self.plugins.call_one("startup", plugin_id, host=api)
        except (Exception, *PLUGIN_EXITS) as exc:
            # SystemExit and KeyboardInterrupt too (PLUGIN_EXITS): a plugin's sys.exit()
            # stopped the server, and at every later start again, the plugin being on.
            await api.close()
            status.set_degraded(None)  # it does not run: its error says why
            if isinstance(exc, asyncio.TimeoutError):
                message = f"startup did not finish within {self.plugins.hook_timeout:g} s"
            elif isinstance(exc, PLUGIN_EXITS):  # "startup: SystemExit: 2" read as if 2 were its reason
                message = f"startup raised {exc!r}"
            else:  # NotReady: the plugin's own words (PluginError: the host's); anything else says its type (``KeyError: 'token'``)
                message = f"startup: {exc}" if isinstance(exc, (NotReady, PluginError)) else f"startup: {described(exc)}"
            status.healthy, status.error, status.waiting = False, message, isinstance(exc, NotReady)
            status.error_key, status.error_values = (exc.key, exc.values) if isinstance(exc, NotReady) and exc.key else (None, {})
            if isinstance(exc, asyncio.TimeoutError):  # the host's words: the card says them in the reader's language
                status.error_key, status.error_values = STARTUP_TIMED_OUT, {"seconds": f"{self.plugins.hook_timeout:g}"}
            elif isinstance(exc, HookBlocked):  # the host's words too (a German admin read them in English)
                status.error_key, status.error_values = STARTUP_BLOCKED, {"seconds": exc.seconds, "timeout": f"{self.plugins.hook_timeout:g}"}
            # No member is involved at startup: the message is the plugin's own, shown whole.
            # A NotReady is a state the admin resolves, not a fault: its message says
            # everything, and a traceback beside it read like a crash.
            status.traceback = None if isinstance(exc, (asyncio.TimeoutError, NotReady)) else withheld_traceback(exc, say=True)
            if isinstance(exc, NotReady):  # waiting for the admin (a setting), not a fault
                log.warning("plugin %s is not ready: %s", plugin_id, message)
            else:
                log.error("plugin %s failed to start: %s%s", plugin_id, message, place_of(exc))
            if self.settings.plugins.strict:
                raise StrictPluginFailure.of(plugin_id, "startup", exc) from exc
            return False
        self._started[plugin_id] = _Started(api)
        await self._deliver_missed(plugin_id, status.name, api)
        status.started, status.healthy = True, True
        status.error = status.traceback = status.error_key = None  # an earlier startup's failure is over
        status.waiting = False
        self.wake_system_agents()  # its agents, if it has any, run from now
        return True

    async def set_plugin_enabled(self, plugin_id: str, enabled: bool) -> None:
        """Enable or disable a loaded plugin without a restart. The plugin's registry
        row is born at its first toggle, and that birth — never a later re-enable — is
        when members of ``auto_grant`` roles receive it (seed 001 "Default access")."""
        status = self.plugins.status(plugin_id)
        if status is None:
            raise PluginError(f"no plugin {plugin_id!r} is installed", code="plugin_unknown", values={"plugin": plugin_id})
        if status.state in ("failed", "blocked") and not enabled:
            # Off is always possible: nothing runs, and the admin's choice is kept in its
            # row, so it stays off once the plugin is fixed (or unblocked) and restarted.
            await self.catalog.store_row(plugin_id, status.info, enabled=False)
            log.info("plugin %s disabled (it %s)", plugin_id, "failed to load" if status.state == "failed" else "is blocked")
            self.buses.system.publish(SystemEvent("plugin_disabled", plugin_id))
            return
        if status.state == "failed":
            # What the admin can do about it: the catalog shows the error; a fix needs a restart.
            raise PluginError(
                f"plugin {plugin_id!r} failed to load ({status.error}); fix it and restart the server to enable it",
                code="plugin_failed", values={"plugin": plugin_id, "error": status.error or ""},
            )
        if status.state == "blocked":
            raise PluginError(
                f"plugin {plugin_id!r} is blocked by the server's settings; remove it from the blocklist and restart to enable it",
                code="plugin_blocked", values={"plugin": plugin_id},
            )
        if status.builtin:
            raise PluginError(f"plugin {plugin_id!r} is built in; it cannot be disabled", code="plugin_builtin", values={"plugin": plugin_id})
        await self.catalog.store_row(plugin_id, status.info, enabled=enabled)
        self.plugins.set_enabled(plugin_id, enabled)
        add_bundles(self.strings, self._bundles, self.plugins)  # a translation plugin's language comes and goes with it
        log.info("plugin %s %s", plugin_id, "enabled" if enabled else "disabled")
        self.buses.system.publish(SystemEvent("plugin_enabled" if enabled else "plugin_disabled", plugin_id))
        if enabled:
            await self.start_plugin(plugin_id)
        else:
            await self.stop_plugin(plugin_id, reason="disabled")

    def wake_system_agents(self) -> None:
        """Something an agent's schedule reads changed (its plugin started or stopped,
        a setting or an interval was saved): the scheduler looks again now, not at the
        end of a sleep that may be 15 minutes long."""
        if self._system_agents is not None:
            self._system_agents.wake.set()

    def start_system_agents(self) -> None:
        """The scheduler's loop, once the plugins have started (their agents run only
        while their plugin is enabled: asked at every pass)."""
        if self.safe_mode:
            log.warning("safe mode: system agents do not run (they run again at a normal start)")
            return
        if self.settings.system_agents.run:
            self.supervisor.spawn("system-agents", self.system_agents.run_forever(self.stopping))

    async def notify_member(self, member_id: str, text: str) -> bool:
        """Tell a member something from background work: the open web page (a
        ``notification`` on their bus) and their home source when it is a channel.
        False for an unknown or inactive member."""
        try:
            member = await self.users.get(member_id)
        except MemberNotFound:
            return False
        if not member.active:
            return False
        text = str(text)[:4000]
        self.buses.members.publish(UserEvent("notification", member_id, {"text": text}))
        await self.channels.router.notify_home(member_id, text)
        return True

    async def _announce_access(self, *, member_id: str | None = None, role_id: str | None = None) -> None:
        """The member's open pages (a role's members', for a role's change) read their
        session again: a page showed what the old role allowed until a full reload."""
        ids = [member_id] if member_id else [m.id for m in await self.users.list() if m.role.id == role_id]
        for subject in ids:
            self.buses.members.publish(UserEvent("access_changed", subject, {}))

    def sealed(self, table: str, column: str, row_id: str, text: str | None) -> str | None:
        """``text`` as the registry stores an instance secret (core/storage/sealing.py)."""
        assert self.sealer is not None, "the core is not started"
        return self.sealer.seal(text, table, column, row_id)

    def opened(self, table: str, column: str, row_id: str, stored: str | None) -> str | None:
        assert self.sealer is not None, "the core is not started"
        return self.sealer.open(stored, table, column, row_id)

    def plugin_config(self, plugin_id: str, stored: str) -> dict[str, Any]:
        """A plugin's instance settings as its ``plugins.config`` cell holds them."""
        return json.loads(self.opened("plugins", "config", plugin_id, stored) or "{}")

    async def default_locale(self) -> str:
        """The instance's language, chosen at setup; a member's own locale wins."""
        row = await self.registry.run(lambda c: c.execute("SELECT value FROM config WHERE key = 'default_locale'").fetchone())
        return json.loads(row[0]) if row else "en"

    async def set_default_locale(self, locale: str) -> None:
        """The admin changes the instance's language (one of ``strings.locales``): what
        members on "the instance's default" read, and what the model is told of them."""
        if locale not in self.strings.locales:
            raise ValueError(f"locale must be one of {', '.join(self.strings.locales)}")
        await self.registry.transaction(
            lambda c: c.execute("INSERT OR REPLACE INTO config (key, value) VALUES ('default_locale', ?)", (json.dumps(locale),))
        )

    async def _member_reset(self, member_id: str) -> None:
        """``member_reset`` for each started plugin; every other plugin the host knows
        of (disabled, failed to start or to load, uninstalled, or none run: ``skald
        reset-password`` with the server stopped) is told when it next starts
        (``_deliver_missed``). A chat it linked to the account must not reach the
        account's new holder because the plugin was off when the account changed hands."""
        missed = await self._not_running("member_reset")
        if missed:
            await self._registry.transaction(lambda c: _note_missed(c, MISSED_RESETS, missed, member_id))
        await self._reset_hook(member_id)

    async def _member_deleted(self, member_id: str) -> None:
        """``member_deleted`` for each started plugin, and noted for every other one
        the host knows of, like a reset (``_member_reset``): a plugin off at the deletion
        kept the member's linked chat for good. A reset it missed for the member is
        dropped: it was told for an account that no longer exists."""

        def note(c: Any) -> None:
            c.execute(
                "UPDATE config SET value = (SELECT json_group_array(j.value) FROM json_each(config.value) AS j WHERE j.value != ?)"
                " WHERE key GLOB ? AND EXISTS (SELECT 1 FROM json_each(config.value) AS j WHERE j.value = ?)",
                (member_id, MISSED_RESETS + "*", member_id),
            )
            c.execute("DELETE FROM config WHERE key GLOB ? AND value = '[]'", (MISSED_RESETS + "*",))
            _note_missed(c, MISSED_DELETIONS, missed, member_id)

        missed = await self._not_running("member_deleted")
        await self._registry.transaction(note)
        await self._deleted_hook(member_id)

    async def _not_running(self, hook: str) -> list[str]:
        """The plugins that miss ``hook`` now: every plugin the host knows of (loaded,
        failed, blocked, or only a registry row: uninstalled, or failed before it said
        its id) that is not started, except a loaded one that does not implement it.
        One that failed at import may implement it, unknown until it loads: it is
        noted, and the note is dropped at its start if it does not."""
        rows = await self._registry.run(lambda c: c.execute("SELECT id FROM plugins").fetchall())
        known = {r[0] for r in rows} | {s.id for s in self.plugins.statuses()}
        missed = []
        for plugin_id in sorted(known - set(self._started)):
            status = self.plugins.status(plugin_id)
            if status is not None and status.state in ("loaded", "disabled") and not self.plugins.implements(hook, plugin_id):
                continue
            missed.append(plugin_id)
        return missed

    async def _deliver_missed(self, plugin_id: str, entry_point: str, api: "PluginHostApi") -> None:
        """The resets and deletions a plugin missed while it was not running, now that
        it runs: each member's hook once, if the plugin implements it (a failure is
        recorded like the hook's own), then the list is dropped. A plugin that failed at
        import was known by its entry point's name: what was noted under it is its own."""
        owners = [plugin_id]
        if entry_point != plugin_id and self.plugins.status(entry_point) is None:
            owners.append(entry_point)
        for hook, prefix in MISSED_HOOKS:
            for owner in owners:
                key = prefix + owner
                row = await self._registry.run(lambda c, key=key: c.execute("SELECT value FROM config WHERE key = ?", (key,)).fetchone())
                if row is None:
                    continue
                if self.plugins.implements(hook, plugin_id):
                    for member_id in json.loads(row[0]):
                        try:
                            await self.plugins.call_one(hook, plugin_id, member_id=member_id, host=api)
                        except (Exception, *PLUGIN_EXITS) as exc:
                            self._hook_failed(plugin_id, hook, exc)
                await self._registry.transaction(
                    lambda c, key=key, value=row[0]: c.execute("DELETE FROM config WHERE key = ? AND value = ?", (key, value))
                )

    async def _role_access_changed(self, role_id: str, hook: Callable[[str], Awaitable[None]]) -> None:
        """``member_access_changed`` for each member of the role that changed."""
        for member in await self.users.list():
            if member.role.id == role_id:
                await hook(member.id)

    def _member_hook(self, hook: str, *, with_host: bool = True) -> Callable[[str], Awaitable[None]]:
        """A per-member hook (``member_unlocked``, ``member_locking``, ``member_reset``,
        ``member_deleted``, ``member_access_changed``) as a callback of the member store: called for each started
        plugin implementing it; one plugin's failure is recorded and the others and the
        caller go on.

        The plugins' implementations run concurrently, each under its own hook timeout
        (``call_one``): what awaits the hook (a login, a logout, an admin's request)
        waits for the slowest of them, at most one timeout, not for their sum (one slow
        plugin delayed the others' hooks, and N slow ones every login by N timeouts)."""

        async def one(plugin_id: str, member_id: str) -> None:
            extra = {"host": self.host_api(plugin_id)} if with_host else {}
            try:
                await self.plugins.call_one(hook, plugin_id, member_id=member_id, **extra)
            except (Exception, *PLUGIN_EXITS) as exc:
                self._hook_failed(plugin_id, hook, exc)

        async def call(member_id: str) -> None:
            started = [p for p in self.plugins.implementers(hook) if p in self._started]
            if len(started) == 1:
                await one(started[0], member_id)
            elif started:
                await asyncio.gather(*(one(p, member_id) for p in started))

        return call

    def _hook_failed(self, plugin_id: str, hook: str, exc: BaseException) -> str:
        """A hook's failure after startup (a per-member hook's, ``shutdown``'s): what
        called it goes on; the admin sees it on the plugin's page (its message withheld:
        a per-member hook had a member's id). Its error id."""
        if isinstance(exc, TimeoutError):
            exc = TimeoutError(f"{hook} did not finish within {self.plugins.hook_timeout:g} s")
            return record_failure(self.plugins, plugin_id, f"hook {hook}", exc, say=True)
        return record_failure(self.plugins, plugin_id, f"hook {hook}", exc, say=isinstance(exc, PluginError))

    def host_api(self, plugin_id: str) -> PluginHostApi:
        """The plugin's HostApi: the one it was started with, else a fresh one."""
        started = self._started.get(plugin_id)
        return started.host_api if started else PluginHostApi(plugin_id, self)

    async def restart_plugin(self, plugin_id: str) -> bool:
        """A running plugin whose settings changed: ``shutdown("reconfigured")``, then
        ``startup`` on the new values, one restart at a time per plugin (two saves in a
        row must not interleave their stops and starts)."""
        async with self._lifecycle.setdefault(plugin_id, asyncio.Lock()):
            if plugin_id not in self._started:
                return False
            await self.stop_plugin(plugin_id, reason="reconfigured")
            return await self.start_plugin(plugin_id)

    async def stop_plugin(self, plugin_id: str, *, reason: str) -> None:
        """``reason``: what the plugin's ``shutdown`` is told ("disabled" or "stopping")."""
        started = self._started.pop(plugin_id, None)
        if started is None:
            return
        if reason == "disabled" and self._system_agents is not None:
            # Its agents' runs under way end now, recorded as cancelled: a hung one held
            # on after the admin turned the plugin off, until a restart.
            self._system_agents.cancel_runs(plugin_id, reason)
        failed: str | None = None
        try:
            await self.plugins.call_one("shutdown", plugin_id, reason=reason)
        except (Exception, *PLUGIN_EXITS) as exc:
            what = "did not finish in time" if isinstance(exc, TimeoutError) else f"raised {type(exc).__name__}"
            failed = f"shutdown {what} (error id {self._hook_failed(plugin_id, 'shutdown', exc)}); what it started may still run"
        await started.host_api.close()
        self.wake_system_agents()
        status = self.plugins.status(plugin_id)
        if status:
            status.started = False
            status.set_degraded(None)  # said of the run that ended (HostApi.set_degraded)
            if failed:  # unhealthy until a startup succeeds again; the traceback is in its failures
                status.healthy, status.error, status.error_key = False, failed, None

    async def _expire_sessions(self) -> None:
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(self.stopping.wait(), SESSION_SWEEP_SECONDS)
            except asyncio.TimeoutError:
                await self.auth.expire_idle()

    def announce_stop(self) -> None:
        """The server is going down: member sockets close (1001) and background loops
        end now, while the web server lets requests in flight finish; ``stop`` does the rest."""
        self.stopping.set()

    async def interrupt_turns(self) -> None:
        """Cut every running turn now, as interrupted (what a restart resumes), before
        anything else stops: a turn left running through the web server's graceful wait
        started new tool calls and model rounds after the signal, and one whose plugin
        stopped under it recorded the call as the tool's failure (crash probe). No
        runtime starts again once ``stopping`` is set."""
        try:
            if self._chat is not None:
                await self._chat.close()
        finally:
            self.turns_interrupted.set()

    async def stop(self) -> None:
        """Graceful shutdown: signal loops, join them, stop plugins, revoke every
        session, lock every member, close the registry. Safe to call twice."""
        self.stopping.set()
        await self.interrupt_turns()  # first: a turn's tool may use what a plugin's shutdown ends
        await self.supervisor.join_all(10.0)
        # Side by side, as they start: each ``shutdown`` is bounded by the hook timeout,
        # so the stop waits one timeout at most, not one per plugin (twelve slow plugins
        # outlasted Hypercorn's shutdown timeout, and no member file was closed).
        await asyncio.gather(*(self.stop_plugin(plugin_id, reason="stopping") for plugin_id in list(self._started)))
        if self._auth is not None:
            self._auth.sessions.revoke_all("server stopping")
        if self._channels is not None:
            await self._channels.close()
        if self._chat is not None:
            await self._chat.close()
        if self._sandbox is not None:
            await self._sandbox.close()
        if self._files is not None:
            await self._files.flush()
        if self._users is not None:
            await self._users.lock_all()
        self.buses.close()
        if self._registry is not None:
            await self._registry.close()
        if self._announced_start:  # a start refused (a newer data dir) said why, not "stopped" before it
            log.info("skald core stopped")
            self._announced_start = False


def _one(kind: type) -> Any:
    """A ``register`` validator accepting exactly one value of ``kind``."""

    def validate(plugin_id: str, args: tuple[Any, ...]) -> Any:
        if len(args) != 1 or not isinstance(args[0], kind):
            raise PluginError(f"register() expects one {kind.__name__}")
        return args[0]

    return validate


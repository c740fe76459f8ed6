"""Per-member connectors: what one member activated from the catalog, or registered as
their own remote server, kept in that member's encrypted file (``HostApi.member_secret_*``,
one secret ``connector:<name>`` per connector, holding its values, pins and, for OAuth,
the refresh token) and connected while the member is unlocked: from ``member_unlocked``
to ``member_locking``. Another member never sees them; ``system.db`` never holds them.

A per-member connector's notifications are appended to the member's own file
(``HostApi.append_member_event``), for the member's agents to read later: a burst in
one event (``NOTIFICATIONS_PER_EVENT``), and only the newest ``NOTIFICATION_EVENTS_KEPT``
events of a connector, none older than ``NOTIFICATION_DAYS`` (``prune_member_events``).

An http connector is a session from the host to the remote server; a stdio template
runs inside the member's sandbox (``HostApi.sandbox_spawn``), never on the bare host.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, Mapping

from skald_hookspecs import MemberLocked, Tool
from skald_mcp.runtime import CONNECT_SECONDS, Connection, accepted_pins, definition_hash, make_tool, offered_tools, withheld
from skald_mcp.spec import ServerSpec, SpecError, Template, activation_spec, destination, parse_login_status, parse_values, tool_names

log = logging.getLogger(__name__)

PREFIX = "connector:"
#: How often a QR connector waiting for its device is asked whether it is linked.
LOGIN_POLL_SECONDS = 2.0
#: A member's connector's notifications: the event kind (one per connector, so each is
#: bounded on its own), how many one event holds at most (a burst is one write, not one
#: per notification; an event's data is at most 64 KiB, ``EVENT_BYTES`` leaves room),
#: how many events of a connector are kept (the newest), and for how long.
NOTIFICATION_KIND = "mcp.notification:"
#: The kind earlier versions wrote, one event per notification and never pruned: such
#: events are deleted at a member's first prune (nothing reads them).
LEGACY_NOTIFICATION_KIND = "mcp.notification"
NOTIFICATIONS_PER_EVENT = 50
EVENT_BYTES = 60_000
NOTIFICATION_EVENTS_KEPT = 20
NOTIFICATION_DAYS = 30
#: The older events are pruned every this many writes of a connector (and at its first).
PRUNE_EVERY = 10


class MemberConnectors:
    """Every unlocked member's own connectors. ``records[member][name]`` is the stored
    record (as in the member's file); ``connections[member][name]`` its session."""

    def __init__(
        self,
        host: Any,
        templates: Callable[[], dict[str, Template]],
        bearer: Callable[[str, dict[str, Any]], Awaitable[str | None]],
        elicit: Callable[[Any, str, Any], Awaitable[Any]] | None = None,
        may_use_template: Callable[[str, str], bool] = lambda member_id, name: True,
        credential: Callable[[str, dict[str, Any], str], Awaitable[str]] | None = None,
        provider: Callable[[str], Any] = lambda name: None,
    ) -> None:
        #: A sign-in service's settings by name (oauth.py), for the record's pinned destination.
        self._provider = provider
        #: (member id, record, deliver) -> a stdio OAuth connector's credential (oauth.py).
        self._credential = credential
        self.host = host
        #: (member, template) -> whether the admin lets the member use it now.
        self._may_use_template = may_use_template
        self._elicit = elicit
        self._templates = templates
        #: (member id, record) -> an access token for an OAuth record, or None (oauth.py).
        self._bearer = bearer
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        self.connections: dict[str, dict[str, Connection]] = {}
        self._offered: dict[str, dict[str, list[Tool]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        #: member -> set once their records are read after an unlock (``records_read``).
        self._read: dict[str, asyncio.Event] = {}
        #: member -> connector -> the reconciler's last answer (installed | unchanged).
        self.installs: dict[str, dict[str, str]] = {}
        #: (member, connector) -> the connection whose device login is being followed.
        self._login_watch: dict[tuple[str, str], Connection] = {}
        #: (member, connector) -> the session (connection, its ``sessions``) whose device
        #: login was last asked about: a QR connector is asked once per new session.
        self._login_checked: dict[tuple[str, str], tuple[Connection, int]] = {}
        #: (member, connector) -> the session and what its ``login_status`` last answered
        #: (the QR code to show): what ``login_known`` reports, never asking anyone.
        self._login_seen: dict[tuple[str, str], tuple[Connection, dict[str, Any]]] = {}
        #: (member, connector) -> notifications not yet written, the task writing them,
        #: and how many events were written since the last prune.
        self._unwritten: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._writers: dict[tuple[str, str], asyncio.Task[Any]] = {}
        self._unpruned: dict[tuple[str, str], int] = {}
        #: Members whose file no longer holds the legacy notification events.
        self._legacy_pruned: set[str] = set()
        #: member -> the lock a route holds from its "is the name free" check to the
        #: record's save (``serial``): two activations of one name cannot both pass.
        self._member_locks: dict[str, asyncio.Lock] = {}
        #: (member, connector) -> the lock ``connect`` holds from stopping the session
        #: there is to storing its new one: two connects at once (Restart pressed
        #: twice, an activation and a login) never both store a session, the second
        #: stops the first's, and no session is left running that nothing tracks.
        self._connect_locks: dict[tuple[str, str], asyncio.Lock] = {}
        #: (member, connector) pairs whose session was stopped, or not started, because
        #: the member's role lost the connector's capability (``access_changed``): they
        #: start again once it is back. Members who lost the plugin's grant are in
        #: ``_ungranted``: nothing of theirs is held, and their file is read again then.
        self._access_closed: set[tuple[str, str]] = set()
        #: Connectors an unlock is about to start (``load``): they read ``starting``,
        #: not ``stopped``, before their turn comes (a page read in between showed a
        #: connector that was on its way as stopped).
        self._queued: set[tuple[str, str]] = set()
        self._ungranted: set[str] = set()

    # -- lifecycle ------------------------------------------------------------------------

    def serial(self, member_id: str) -> asyncio.Lock:
        """The member's lock for a check of their records and the write it allows
        (routes.py: a name is free, then the activation is saved). Kept for the
        process's life: one lock per member, never replaced under a holder."""
        return self._member_locks.setdefault(member_id, asyncio.Lock())

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def unlocked(self, member_id: str) -> None:
        """Load and connect the member's connectors in the background (the login does
        not wait for remote servers)."""
        self._read.setdefault(member_id, asyncio.Event())
        self._spawn(self.load(member_id))

    async def records_read(self, member_id: str, within: float = 10.0) -> None:
        """Wait, up to ``within`` seconds, until the member's records are in RAM after
        their unlock: a page opened right after signing in listed no connectors, and
        one connector's own page answered 404, while they were still being read."""
        read = self._read.get(member_id)
        if read is not None:
            try:
                await asyncio.wait_for(read.wait(), within)
            except TimeoutError:
                pass

    async def load(self, member_id: str) -> None:
        try:
            await self._read_records(member_id)
        finally:
            read = self._read.get(member_id)
            if read is not None:
                read.set()
        await self._connect_due(member_id)

    async def _read_records(self, member_id: str) -> None:
        try:
            if not await self.host.member_has_grant(member_id):
                # Unlocked without the plugin: nothing of theirs is read or run until
                # it is granted (``access_changed`` loads it then).
                self._ungranted.add(member_id)
                return
            self._ungranted.discard(member_id)
            names = await self.host.member_secret_names(member_id, PREFIX)
            records = {}
            for secret in names:
                raw = await self.host.member_secret_get(member_id, secret)
                if raw:
                    records[secret[len(PREFIX):]] = json.loads(raw)
        except MemberLocked:
            return
        if member_id not in self.host.unlocked_members():
            return  # locked while it was read: nothing of theirs stays in RAM
        mine = self.records.setdefault(member_id, {})
        for name, record in records.items():
            mine.setdefault(name, record)  # an activation saved meanwhile is newer

    async def _connect_due(self, member_id: str) -> None:
        mine = self.records.get(member_id)
        if mine is None or member_id not in self.host.unlocked_members():
            return
        # A QR connector runs before its login too: it has to produce the code.
        due = [(name, record) for name, record in mine.items() if record.get("state", "ready") in ("ready", "needs_login")]
        self._queued.update((member_id, name) for name, _ in due)
        for name, record in due:
            # One that was working keeps trying if its server is away at this unlock
            # (a crash-kill probe found it failed for good after a restart). One that
            # never connected (its pins are taken at its first contact) is started
            # once and reads failed if it fails again: its address, command or
            # sign-in is what is wrong, not a server that went away.
            try:
                await self.connect(member_id, name, wait=None, resume=self.once_connected(record))
            finally:
                self._queued.discard((member_id, name))

    @staticmethod
    def once_connected(record: dict[str, Any]) -> bool:
        """Whether the member's connector was ever ready: its tools are pinned at its
        first contact (``_changed``), and only then. Working now, as far as the record
        knows: not waiting for a sign-in or a device link."""
        return record.get("state", "ready") == "ready" and record.get("pins") is not None

    def named(self, name: str, template: str | None = None) -> bool:
        """Whether a member whose file is open has a connector of their own named
        ``name`` (other than an activation of the catalog template ``template``): one
        name is one connector in a member's view (routes.py refuses the clash). A
        member whose file is closed is not known here; ``Runtime.member_tools`` keeps
        such a clash from routing their calls elsewhere."""
        for mine in self.records.values():
            record = mine.get(name)
            if record is not None and not (template is not None and record.get("kind") == "catalog" and record.get("template") == template):
                return True
        return False

    async def locking(self, member_id: str) -> None:
        """Stop the member's sessions and forget their records (and tokens) in RAM."""
        self._ungranted.discard(member_id)
        self._read.pop(member_id, None)
        await self._forget(member_id)

    async def _forget(self, member_id: str) -> None:
        for key in [key for key in self._access_closed if key[0] == member_id]:
            self._access_closed.discard(key)
        for key in [key for key in self._queued if key[0] == member_id]:
            self._queued.discard(key)
        self.records.pop(member_id, None)
        self._offered.pop(member_id, None)
        self.installs.pop(member_id, None)
        for key in [key for key in self._login_checked if key[0] == member_id]:
            del self._login_checked[key]
        for key in [key for key in self._login_seen if key[0] == member_id]:
            del self._login_seen[key]
        for key in [key for key in self._unwritten if key[0] == member_id]:
            del self._unwritten[key]  # the file is closing: nothing of theirs stays in RAM
        for key in [key for key in self._unpruned if key[0] == member_id]:
            del self._unpruned[key]
        connections = self.connections.pop(member_id, {})
        await asyncio.gather(*(c.stop() for c in connections.values()), return_exceptions=True)

    async def may_run(self, member_id: str, record: dict[str, Any]) -> bool:
        """Whether the member may run their connector ``record`` now: the plugin is
        theirs (``member_has_grant``) and their role holds its capability
        (``capability``: ``connectors.activate`` for a template's activation,
        ``connectors.remote`` for their own remote server). Read afresh, from the host."""
        return await self.host.member_has_grant(member_id) and await self.host.member_may(member_id, self.capability(record))

    async def access_changed(self, member_id: str) -> bool:
        """The host says the member's access may have changed (``member_access_changed``:
        their grant of the plugin, their role or its capabilities; it says not which).

        - The plugin's grant is gone: every session of theirs stops and nothing of
          theirs stays in RAM (records, tokens), as at ``locking``; their file keeps
          their connectors. Granted again while their file is open, it is read again
          and what was running starts again (``load``), as at their next unlock.
        - Their role lost a connector's capability: its session stops, its record
          stays (their page lists it ``withdrawn``); every start refuses it meanwhile
          (``_open``). The capability back, it starts again at once, in the background.

        Each connector under its ``connect`` lock: a connect that read the old access
        stored its session before, and it is stopped here; one after reads the new.
        Whether the member holds the plugin's grant."""
        if not await self.host.member_has_grant(member_id):
            if member_id in self.records or member_id in self.connections:
                log.info("a member lost the connectors plugin: their connectors are stopped")
            if member_id in self.host.unlocked_members():
                self._ungranted.add(member_id)
            for name in list(self.connections.get(member_id, {})):
                async with self._connect_locks.setdefault((member_id, name), asyncio.Lock()):
                    # Closed before it stops: a call it breaks says its access ended
                    # (``make_tool``), not that the connection broke.
                    self._access_closed.add((member_id, name))
                    await self.disconnect(member_id, name)
            await self._forget(member_id)
            return False
        if member_id in self._ungranted:
            self._ungranted.discard(member_id)
            if member_id in self.host.unlocked_members():
                self._spawn(self.load(member_id))
            return True
        may: dict[str, bool] = {}
        for name in list(self.records.get(member_id, {})):
            async with self._connect_locks.setdefault((member_id, name), asyncio.Lock()):
                record = self.records.get(member_id, {}).get(name)
                if record is None:
                    continue
                capability = self.capability(record)
                if capability not in may:
                    may[capability] = await self.host.member_may(member_id, capability)
                if not may[capability]:
                    self._access_closed.add((member_id, name))
                    await self.disconnect(member_id, name)
                    continue
                reopen = (member_id, name) in self._access_closed and name not in self.connections.get(member_id, {})
                self._access_closed.discard((member_id, name))
            if reopen and record.get("state", "ready") in ("ready", "needs_login"):
                self._spawn(self.connect(member_id, name, wait=None, resume=self.once_connected(record)))
        return True

    async def stop_all(self) -> None:
        for member_id in list(self.connections):
            await self.locking(member_id)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- records ----------------------------------------------------------------------------

    async def save(self, member_id: str, name: str, record: dict[str, Any] | None) -> None:
        """Write one record to the member's file first, then to RAM, unless the file
        closed meanwhile (``locking`` forgot the member's records: a save that was under
        way must not bring them back into RAM)."""
        await self.host.member_secret_set(member_id, PREFIX + name, None if record is None else json.dumps(record))
        mine = self.records.get(member_id)
        if mine is None:
            return
        if record is None:
            mine.pop(name, None)
        else:
            mine[name] = record

    async def spec(self, member_id: str, name: str, record: dict[str, Any]) -> ServerSpec:
        if record["kind"] == "remote":
            return ServerSpec(name, "http", url=record["url"], headers=record.get("headers") or {})
        template = self._templates().get(record["template"])
        if template is None:
            raise SpecError(code="template_gone", template=repr(record["template"]))
        pinned = record.get("destination")
        current = destination(template, self._provider(template.oauth["provider"]) if template.oauth else None)
        if pinned is None:  # activated before destinations were pinned: pinned as it is now
            record["destination"] = current
            await self.save(member_id, name, record)
        elif pinned != current:  # before any token request or value leaves for the new place
            raise SpecError(code="destination_changed", template=repr(template.name))
        if template.oauth and template.transport == "stdio":
            bearer = await self._credential(member_id, record, template.oauth.get("deliver", "access_token"))
        else:
            bearer = await self._bearer(member_id, record) if template.oauth else None
        if record.pop("rotated", False):  # the provider rotated the refresh token
            await self.save(member_id, name, record)
        return activation_spec(template, name, record.get("values") or {}, bearer)

    # -- sessions ---------------------------------------------------------------------------

    async def connect(self, member_id: str, name: str, wait: float | None = CONNECT_SECONDS, *, resume: bool = False) -> Connection | None:
        """The member's connector ``name`` on a new session (the one there is stops
        first). ``resume``: in place of one that was reconnecting by itself
        (``Connection.start``). None for a template the admin took away from the
        member (``withdrawn``), whatever route asked: every session starts here, so no
        value, token request or refresh token of theirs leaves for it again; one that
        runs still is left as it is, its tools reaching nobody (``status``)."""
        lock = self._connect_locks.setdefault((member_id, name), asyncio.Lock())
        async with lock:
            # One connect at a time for the connector, up to the new session's place in
            # ``connections``: it stops the one there is (a connect before it included,
            # whose session is stored by then) and is the only one stored. Its start
            # runs after the lock: a Delete or a lock meanwhile finds it there and stops it.
            connection = await self._open(member_id, name)
        if connection is None or connection.state == "failed":
            return connection
        await connection.start(wait=wait, resume=resume)
        if not self._still_there(member_id, name):
            # The member's file closed (or the connector was removed) while it started.
            await connection.stop()
            if self.connections.get(member_id, {}).get(name) is connection:
                del self.connections[member_id][name]
            return None
        if self.connections.get(member_id, {}).get(name) is not connection:
            # Replaced while it started (a second Restart): the one that replaced it
            # stopped it already, and no session stays that ``connections`` does not hold.
            await connection.stop()
            return self.connections.get(member_id, {}).get(name)
        return connection

    async def stop_moved(self) -> None:
        """Stop at once every activation whose template (or its sign-in service) no
        longer goes where the member agreed (``update_offer``'s ``moved``): asked when
        the admin saves a template or a sign-in service, before the answer. A session
        that runs keeps its old address, and its background reconnect would too: the
        member's values and key would go on to the place the admin moved away from
        until a Restart. Started anew, it fails at ``spec`` (``destination_changed``)
        before anything leaves, and reads so until the member takes the update."""
        templates = self._templates()
        for member_id, mine in list(self.records.items()):
            for name, record in list(mine.items()):
                template = templates.get(record.get("template") or "")
                if record.get("kind") != "catalog" or template is None or record.get("destination") in (None, self._destination(template)):
                    continue
                if self.connections.get(member_id, {}).get(name) is None:
                    continue  # not running: its next start is refused at ``spec``
                if self.withdrawn(member_id, name):
                    async with self._connect_locks.setdefault((member_id, name), asyncio.Lock()):
                        await self.disconnect(member_id, name)
                else:
                    await self.connect(member_id, name)

    async def remove(self, member_id: str, name: str) -> None:
        """The member's Delete: the session stopped (one a connect is opening as well:
        it waits for this, then finds no record) and the record gone from their file."""
        async with self._connect_locks.setdefault((member_id, name), asyncio.Lock()):
            await self.disconnect(member_id, name)
            self._access_closed.discard((member_id, name))
            await self.save(member_id, name, None)

    def _still_there(self, member_id: str, name: str) -> bool:
        """Whether the connector is still the member's, after an await: removed or
        their file closed meanwhile, nothing is stored for it (``locking`` and the
        Delete stopped what there was; a session stored now would outlive both)."""
        return name in self.records.get(member_id, {})

    async def _open(self, member_id: str, name: str) -> Connection | None:
        """``connect`` under its lock: the session there is stopped and the new one,
        not started yet, in its place (a failed one that says why, or None)."""
        record = self.records.get(member_id, {}).get(name)
        if record is None or self.withdrawn(member_id, name):
            return None
        if not await self.may_run(member_id, record):
            # The plugin or the connector's capability taken from the member (a Restart
            # after it, an unlock or a load racing the change): nothing of theirs leaves
            # for it, and one that runs stops. It starts again once access is back.
            self._access_closed.add((member_id, name))
            await self.disconnect(member_id, name)
            return None
        self._access_closed.discard((member_id, name))
        await self.disconnect(member_id, name)
        try:
            spec = await self.spec(member_id, name, record)
        except Exception as exc:  # noqa: BLE001 - a template gone, a token refused: a state
            if not self._still_there(member_id, name):
                return None
            connection = Connection(ServerSpec(name, "http", url=""), on_change=lambda c: None)
            connection.fail(exc, as_said=True)
            self.connections.setdefault(member_id, {})[name] = connection
            return connection

        def notified(message: Any) -> None:
            params = getattr(message, "params", None)
            self._notified(member_id, name, {"method": message.method, "params": params.model_dump(mode="json") if params is not None else None})

        spawn = None
        if spec.transport == "stdio":
            # Inside the member's sandbox, as an argv array (never a shell); the
            # member's values reach it as environment, never as a file.
            argv, env, workdir = [spec.command, *spec.args], dict(spec.env), None
            template = self._templates().get(record.get("template") or "")
            if template is not None and template.files:
                from skald_mcp import install

                try:
                    self.installs.setdefault(member_id, {})[name] = await install.reconcile(self.host, member_id, name, template.files)
                except Exception as exc:  # noqa: BLE001 - the connector's error, shown as it is
                    if not self._still_there(member_id, name):
                        return None
                    failed = Connection(spec, on_change=lambda c: None)
                    failed.fail(exc, as_said=True)
                    self.connections.setdefault(member_id, {})[name] = failed
                    return failed
                workdir = install.folder(name)
                if "requirements.txt" in template.files:
                    env.setdefault("PYTHONPATH", ".pydeps")
            spawn = lambda: self.host.sandbox_spawn(member_id, argv, workdir=workdir, env=env)  # noqa: E731
        elicit = None
        if self._elicit is not None:
            ask = self._elicit

            async def asked(ctx: Any, connector: str, params: Any) -> Any:
                # Asked before the question, when access changes, and at the answer.
                return await ask(ctx, connector, params, allowed=lambda caller: caller == member_id and self.usable(member_id, name))

            elicit = asked

        connection = Connection(spec, on_change=lambda c: self._changed(member_id, c), on_notification=notified, spawn=spawn, elicit=elicit)
        # A member's own server: checked on every connection; a private address is
        # reached only while the admin allows it, which is asked when it matters (the
        # setting is live: a session opened by it is refused from its next request on
        # once it is turned off, guard.py).
        connection.public_only = record["kind"] == "remote"
        connection.allow_private = self.private_allowed
        connection.private = True
        if not self._still_there(member_id, name):
            return None
        self.connections.setdefault(member_id, {})[name] = connection
        return connection

    async def private_allowed(self) -> bool:
        """The admin's *Allow private addresses* as it is now (a live setting: read at
        each ask, never kept)."""
        return bool((await self.host.get_config()).get("allow_private_addresses"))

    async def restart(self, member_id: str, name: str) -> Connection | None:
        """The member's Restart: a new session in place of the one there is (failed,
        reconnecting in the background, or running), as the admin's Restart of a global
        connector (``Runtime.restart``). One that waits for its sign-in has nothing to
        start: ``SpecError`` (sign in first)."""
        record = self.records.get(member_id, {}).get(name)
        if record is None:
            return None
        if record.get("state", "ready") not in ("ready", "needs_login"):
            raise SpecError(code="oauth_sign_in_first")
        if record.get("state") == "needs_login" and self._login_kind(record) != "qr":
            # Left waiting for a device by an earlier version's device-login reset of a
            # connector that has none: nothing would ever link it.
            record["state"] = "ready"
            await self.save(member_id, name, record)
        previous = self.connections.get(member_id, {}).get(name)
        # One that was working (or coming back) keeps trying if its server is away now.
        return await self.connect(member_id, name, resume=previous is not None and previous.state in ("ready", "reconnecting"))

    # -- notifications, kept in the member's file -------------------------------------------

    def _notified(self, member_id: str, name: str, notification: dict[str, Any]) -> None:
        """Queue one notification; one writer per connector writes what has gathered
        while its previous write ran (no timer: nothing waits longer than a write)."""
        key = (member_id, name)
        self._unwritten.setdefault(key, []).append(notification)
        if key not in self._writers:
            task = asyncio.ensure_future(self._write_notifications(member_id, name))
            self._writers[key] = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def settled(self, member_id: str, name: str) -> None:
        """Wait until the notifications the connector sent so far are written (a tool
        call's answer is handed on after them)."""
        task = self._writers.get((member_id, name))
        if task is not None:
            await asyncio.shield(task)

    async def _write_notifications(self, member_id: str, name: str) -> None:
        key = (member_id, name)
        try:
            while self._unwritten.get(key):
                pending = self._unwritten[key]
                batch: list[dict[str, Any]] = []
                size = 0
                while pending and len(batch) < NOTIFICATIONS_PER_EVENT:
                    one = len(json.dumps(pending[0], ensure_ascii=False).encode())
                    if batch and size + one > EVENT_BYTES:
                        break
                    batch.append(pending.pop(0))
                    size += one
                if not pending:
                    self._unwritten.pop(key, None)
                await self._append(member_id, name, batch)
        finally:
            self._writers.pop(key, None)

    async def _append(self, member_id: str, name: str, batch: list[dict[str, Any]]) -> None:
        kind = NOTIFICATION_KIND + name
        try:
            await self.host.append_member_event(member_id, kind, {"connector": name, "notifications": batch})
            key = (member_id, name)
            written = self._unpruned.get(key, PRUNE_EVERY - 1) + 1
            if written >= PRUNE_EVERY:
                oldest = (datetime.now(timezone.utc) - timedelta(days=NOTIFICATION_DAYS)).strftime("%Y-%m-%dT%H:%M:%SZ")
                await self.host.prune_member_events(member_id, kind=kind, keep_last=NOTIFICATION_EVENTS_KEPT, before=oldest)
                if member_id not in self._legacy_pruned:
                    await self.host.prune_member_events(member_id, kind=LEGACY_NOTIFICATION_KIND, keep_last=0)
                    self._legacy_pruned.add(member_id)
                written = 0
            self._unpruned[key] = written
        except Exception as exc:  # noqa: BLE001 - locked meanwhile, or too large: dropped
            log.info("a connector notification was not kept: %s", type(exc).__name__)

    async def disconnect(self, member_id: str, name: str) -> None:
        self._offered.get(member_id, {}).pop(name, None)
        self._login_seen.pop((member_id, name), None)
        connection = self.connections.get(member_id, {}).pop(name, None)
        if connection is not None:
            await connection.stop()

    def _changed(self, member_id: str, connection: Connection) -> None:
        name = connection.spec.name
        if self.connections.get(member_id, {}).get(name) is not connection:
            return
        record = self.records.get(member_id, {}).get(name)
        if record is None:
            return
        if connection.state == "ready" and record.get("pins") is None:
            # First contact after the activation: these tools are what the member
            # activated; later changes wait for the member to accept them.
            record["pins"] = {t.name: definition_hash(t) for t in connection.tools}
            self._spawn(self.save(member_id, name, record))
        if connection.state == "ready" and self._login_kind(record) == "qr":
            # Waiting for its device, or (each new session: a login, a reconnect) linked
            # as far as the record knows: a server that restarted may have forgotten the
            # device, and its tools must not read ready until someone opens its page.
            session = (connection, connection.sessions)
            if record.get("state") == "needs_login" or self._login_checked.get((member_id, name)) != session:
                self._login_checked[(member_id, name)] = session
                self._watch_login(member_id, name, connection)
        self._rebuild(member_id, name)

    def _rebuild(self, member_id: str, name: str) -> None:
        connection = self.connections.get(member_id, {}).get(name)
        offered = self._offered.setdefault(member_id, {})
        # Reconnecting by itself: offered still, so a call is told so (``Connection.call``).
        if connection is None or connection.state not in ("ready", "reconnecting"):
            offered.pop(name, None)
            return
        record = self.records.get(member_id, {}).get(name) or {}
        if record.get("state", "ready") != "ready":
            offered.pop(name, None)  # signed out (or not yet signed in): no tools
            return
        pins = record.get("pins") or {}
        names = tool_names(name, [t.name for t in connection.tools])
        offered[name] = [
            make_tool(
                name, t, lambda caller, _m=member_id, _n=name: caller == _m and self.usable(_m, _n) and (_m, _n) not in self._access_closed, lambda _m=member_id, _n=name: self.connections.get(_m, {}).get(_n),
                names[t.name], capability=self.capability(record), settle=lambda _m=member_id, _n=name: self.settled(_m, _n),
            )
            for t in offered_tools(connection.tools, pins, login_contract=self._login_kind(record) == "qr")
        ]

    async def accept(self, member_id: str, name: str, shown: Mapping[str, str]) -> None:
        """The member vetted the withheld tools ``shown`` as their page showed them
        (``accepted_pins``; ``ReviewOutdated`` when one changed since)."""
        connection = self.connections.get(member_id, {}).get(name)
        record = self.records[member_id][name]
        record["pins"] = accepted_pins(connection.tools if connection else [], record.get("pins") or {}, shown)
        await self.save(member_id, name, record)
        self._rebuild(member_id, name)

    # -- QR / device login (the login_status contract) -------------------------------------

    def login_known(self, member_id: str, name: str, say: Callable[[Any], str] = str) -> dict[str, Any]:
        """The device login as known, for the page's polling (``GET …/login/status``):
        reads only, never starts the connector, asks it nothing, writes nothing. Linked
        as far as the record knows: ``ready``; waiting for its device: what
        ``login_status`` last answered this session (asked by ``_follow_login`` every
        ``LOGIN_POLL_SECONDS`` and by ``login_status``), ``connecting`` until it has
        answered; not running: ``stopped`` with ``running`` false (``login_status``, a
        POST, starts it)."""
        record = self.records.get(member_id, {}).get(name) or {}
        connection = self.connections.get(member_id, {}).get(name)
        if connection is None or connection.state not in ("ready", "starting", "reconnecting"):
            return {"state": "stopped", "qr": None, "message": (connection.said_error(say) if connection else "") or "", "running": False}
        if connection.state != "ready":
            return {"state": "connecting", "qr": None, "message": connection.said_error(say) or "", "running": True}
        seen = self._login_seen.get((member_id, name))
        status = seen[1] if seen is not None and seen[0] is connection else None
        if record.get("state", "ready") == "ready":
            return {"state": "ready", "qr": None, "message": status["message"] if status and status["state"] == "ready" else "", "running": True}
        if status is None or status["state"] == "ready":
            # Not asked yet this session, or its "ready" was a device since signed out.
            return {"state": "connecting", "qr": None, "message": "", "running": True}
        return {**status, "running": True}

    async def login_status(self, member_id: str, name: str, say: Callable[[Any], str] = str) -> dict[str, Any]:
        """Ask the connector's ``login_status`` (starting it if it is not running) and
        record what it says: on ``ready`` the connector's tools are offered from now on.
        A POST's (``…/login/check``, ``…/login/reset``): the page's polling reads
        ``login_known``. ``say``: how a coded refusal reads (``Connection.said_error``).
        Only a connector with the device login has the contract's tools: asking any
        other would start it to ask a tool it has not (``SpecError``)."""
        self._device_login_only(member_id, name, gone_ok=True)
        connection = self.connections.get(member_id, {}).get(name)
        # Reconnecting by itself: asked again once it is back, not started anew here.
        if connection is None or connection.state not in ("ready", "starting", "reconnecting"):
            connection = await self.connect(member_id, name)
        if connection is None or connection.state != "ready":
            return {"state": "connecting", "qr": None, "message": (connection.said_error(say) if connection else "") or ""}
        status = parse_login_status(await connection.call("login_status", {}))
        await self._apply_login(member_id, name, status, connection)
        return status

    async def _apply_login(self, member_id: str, name: str, status: dict[str, Any], connection: Connection) -> None:
        record = self.records.get(member_id, {}).get(name)
        if record is None:
            return
        if self.connections.get(member_id, {}).get(name) is connection:
            self._login_seen[(member_id, name)] = (connection, status)
        wanted = "ready" if status["state"] == "ready" else "needs_login"
        if record.get("state") != wanted:
            record["state"] = wanted
            self._rebuild(member_id, name)  # the tools follow at once, not after the write
            await self.save(member_id, name, record)

    def _watch_login(self, member_id: str, name: str, connection: Connection) -> None:
        if self._login_watch.get((member_id, name)) is not connection:
            self._login_watch[(member_id, name)] = connection
            self._spawn(self._follow_login(member_id, name, connection))

    async def _follow_login(self, member_id: str, name: str, connection: Connection) -> None:
        """The phone links the device and tells Skald nothing: ask ``login_status``
        until it says ready, so the state and the tools follow the login itself, not a
        page that happens to be open and polling."""
        try:
            while self.connections.get(member_id, {}).get(name) is connection and connection.state == "ready":
                record = self.records.get(member_id, {}).get(name)
                if record is None:
                    return
                # Asked at least once: a record that reads linked is checked (a new
                # session), and one that waits is followed until it is linked.
                try:
                    await self._apply_login(member_id, name, parse_login_status(await connection.call("login_status", {})), connection)
                except Exception as exc:  # noqa: BLE001 - asked again at the next turn of the loop
                    log.info("a connector's login_status failed: %s", type(exc).__name__)
                record = self.records.get(member_id, {}).get(name)
                if record is None or record.get("state") != "needs_login":
                    return
                await asyncio.sleep(LOGIN_POLL_SECONDS)
        finally:
            if self._login_watch.get((member_id, name)) is connection:
                del self._login_watch[(member_id, name)]

    async def login_reset(self, member_id: str, name: str, say: Callable[[Any], str] = str) -> dict[str, Any]:
        """Sign the device out (the connector's ``logout``) to link another one. Only a
        connector with the device login (``SpecError`` for any other, before anything
        changes): one without it would be saved waiting for a device it never links."""
        self._device_login_only(member_id, name)
        connection = self.connections.get(member_id, {}).get(name)
        record = self.records[member_id][name]
        record["state"] = "needs_login"
        await self.save(member_id, name, record)
        self._rebuild(member_id, name)
        if connection is not None and connection.state == "ready":
            await connection.call("logout", {})
            self._watch_login(member_id, name, connection)
        return await self.login_status(member_id, name, say)

    def _device_login_only(self, member_id: str, name: str, *, gone_ok: bool = False) -> None:
        """Refuse the device login of a connector that has none. ``gone_ok``: one whose
        template left the catalog cannot tell, and its start says the template is gone
        (nothing is asked of it then)."""
        record = self.records.get(member_id, {}).get(name) or {}
        if gone_ok and record.get("kind") == "catalog" and (record.get("template") or "") not in self._templates():
            return
        if self._login_kind(record) != "qr":
            raise SpecError(code="no_device_login", name=name)

    @staticmethod
    def capability(record: dict[str, Any]) -> str:
        """The role capability a member's own connector is used by, as long as it is
        used, not only when it was set up: ``connectors.remote`` for a remote server they
        registered, ``connectors.activate`` for a template they activated. The host asks
        it (``Tool.capability``) as each round offers the connector's tools and as each
        call starts, from the member's role as it is now; the plugin cannot ask a role
        outside a request of the member's."""
        return "connectors.remote" if record.get("kind") == "remote" else "connectors.activate"

    def usable(self, member_id: str, name: str) -> bool:
        """The member's connector exists and, made from a template, the template is
        still open to them (the admin may revoke it at any moment). Asked by every
        use: a tool call, a new session (``connect``, by ``withdrawn``), an OAuth sign-in
        (routes.py)."""
        record = self.records.get(member_id, {}).get(name)
        if record is None:
            return False
        return record.get("kind") != "catalog" or self._may_use_template(member_id, record.get("template") or "")

    def withdrawn(self, member_id: str, name: str) -> bool:
        """The member's connector is made from a template still in the catalog that is
        no longer open to them. One whose template is gone is not: it fails at its start
        with that reason (``spec``, before anything leaves), which its page says."""
        record = self.records.get(member_id, {}).get(name) or {}
        return record.get("kind") == "catalog" and record.get("template") in self._templates() and not self.usable(member_id, name)

    def member_tools(self, member_id: str) -> list[Tool]:
        return [t for name, tools in self._offered.get(member_id, {}).items() if self.usable(member_id, name) for t in tools]

    def _login_kind(self, record: dict[str, Any]) -> str:
        template = self._templates().get(record.get("template") or "")
        return template.login if template is not None else ""

    # -- a newer version of the template ------------------------------------------------

    def _destination(self, template: Template) -> str:
        return destination(template, self._provider(template.oauth["provider"]) if template.oauth else None)

    def update_offer(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The template's newer version, if there is one: its ``version``, whether it
        ``moved`` (sends the member's values or sign-in somewhere else than where they
        agreed to: then they give them again, as at an activation) and the ``fields``
        to fill in for that. A template that moved at the same version (the admin
        edited its address, a field or its sign-in service without raising the
        version, or deleted and re-created it) is offered too: its connector fails
        until the member takes the update (``spec``: ``destination_changed`` tells
        them to), so the version alone must not hide the way out."""
        template = self._templates().get(record.get("template") or "")
        if record.get("kind") != "catalog" or template is None:
            return None
        moved = record.get("destination") not in (None, self._destination(template))
        if template.version <= (record.get("version") or 0) and not moved:
            return None
        fields = [{"name": f.name, "label": f.label, "secret": f.secret} for f in template.fields] if moved else []
        return {"version": template.version, "moved": moved, "fields": fields}

    async def update(self, member_id: str, name: str, template: Template, values: Any = None) -> None:
        """Re-activate on the template's newer version: the stored values are kept when
        they go where they went before; a moved template takes them anew (``values``),
        and an OAuth or QR one signs in again, never carrying the old credential over."""
        record = self.records[member_id][name]
        offer = self.update_offer(record)
        moved = bool(offer and offer["moved"])
        updated = {
            **record, "version": template.version, "destination": self._destination(template),
            "values": parse_values(template, values if moved else record.get("values")),
        }
        if moved and template.oauth:
            updated.pop("refresh_token", None)
            updated.update(state="needs_oauth", provider=template.oauth["provider"], resource=template.url)
        elif moved and template.login == "qr":
            updated["state"] = "needs_login"
        await self.disconnect(member_id, name)
        await self.save(member_id, name, updated)
        if updated.get("state", "ready") in ("ready", "needs_login"):
            await self.connect(member_id, name)

    def status(self, member_id: str, name: str, say: Callable[[Any], str] = str, may: Callable[[str], bool] | None = None) -> dict[str, Any]:
        """The connector as the member's page shows it; ``say``: how a coded refusal it
        failed with reads (``Connection.said_error``); ``may``: the caller's role
        capabilities (``Caller.may``). A template the admin took away, or a connector
        whose capability (``capability``) their role no longer holds, reads
        ``withdrawn``, without tools: it runs still, but its tools reach nobody (a
        failure, such as the template gone at the next start, says itself instead)."""
        record = self.records.get(member_id, {}).get(name) or {}
        connection = self.connections.get(member_id, {}).get(name)
        pins = record.get("pins") or {}
        failed = connection is not None and connection.state == "failed"
        incapable = bool(record) and may is not None and not may(self.capability(record))
        withdrawn = ((record.get("kind") == "catalog" and not self.usable(member_id, name)) or incapable) and not failed
        tools = connection.tools if connection is not None and connection.state == "ready" and not withdrawn else []
        offered = {t.name for t in self._offered.get(member_id, {}).get(name, ())}
        state = record.get("state", "ready") if record.get("state", "ready") != "ready" else (connection.state if connection else "stopped")
        if state == "stopped" and (member_id, name) in self._queued:
            state = "starting"
        names = tool_names(name, [t.name for t in tools])
        cause = connection.cause if connection else None
        if cause == "command_not_found" and record.get("kind") == "catalog":
            cause = "command_not_found_sandbox"  # the admin's template: the member cannot fix its path
        return {
            "name": name,
            "kind": record.get("kind"),
            "template": record.get("template"),
            #: What the catalog calls it (the id is a key, not a name anyone reads).
            "template_title": getattr(self._templates().get(record.get("template") or ""), "title", None),
            "version": record.get("version"),
            "update": None if withdrawn else self.update_offer(record),
            "url": record.get("url"),
            "state": "withdrawn" if withdrawn else state,
            "error": connection.said_error(say) if connection else None,
            "cause": cause,
            "login": self._login_kind(record),
            "oauth": bool(record.get("provider")),
            "install": self.installs.get(member_id, {}).get(name),
            "tools": [names[t.name] for t in tools if names[t.name] in offered],
            "pending": [t.name for t in tools if pins.get(t.name) != definition_hash(t)] if pins else [],
            "pending_tools": withheld(tools, pins) if pins else [],
        }

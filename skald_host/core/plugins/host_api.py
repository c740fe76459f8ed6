"""The ``HostApi`` each plugin receives: cut from the core's accessors, scoped to that
one plugin (its own config, its own key-value rows, grants for itself only)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import json
import logging
import weakref
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, AsyncIterable, Awaitable, Callable, Mapping, Sequence

from skald_hookspecs.channels import Delivery, MemberLocked
from skald_hookspecs.events import SystemEvent, UserEvent
from skald_host.core.plugins.config_schema import current, stale, validate
from skald_host.core.storage.sealing import kv_cell

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

#: ``seal_for_member``'s boxes: version byte, ephemeral key, nonce, ciphertext, base64url.
SEALED_PREFIX = "sealed1:"
MAX_SECRET_NAME = 200
MAX_EVENT_KIND = 100
MAX_MEMBER_BLOB = 64 * 1024
#: ``set_degraded``'s reason, as a catalog card can show it (longer is cut).
MAX_DEGRADED_REASON = 1000


def _check_text(value: Any, what: str, limit: int) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise ValueError(f"{what} must be a string of 1-{limit} characters")


class _KeyLocks:
    """One ``asyncio.Lock`` per (plugin, key) for the whole host, whichever
    ``PluginHostApi`` asks (a plugin's started one, or a fresh one from
    ``Skald.host_api``), held around a ``kv_update``'s read and write and a ``kv_set``'s
    write. A lock is dropped when nobody holds or waits for it, so keys a plugin used
    once leave nothing behind."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    def __call__(self, plugin_id: str, key: str) -> "_Held":
        return _Held(self, (plugin_id, key))


class _Held:
    def __init__(self, locks: _KeyLocks, name: tuple[str, str]) -> None:
        self._locks, self._name = locks, name

    async def __aenter__(self) -> None:
        table = self._locks._locks
        lock, users = table.get(self._name) or (asyncio.Lock(), 0)
        table[self._name] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:  # cancelled while waiting: no longer a user
            self._release_user()
            raise

    async def __aexit__(self, *exc: Any) -> None:
        self._locks._locks[self._name][0].release()
        self._release_user()

    def _release_user(self) -> None:
        table = self._locks._locks
        lock, users = table[self._name]
        if users <= 1:
            del table[self._name]
        else:
            table[self._name] = (lock, users - 1)


#: The host's kv locks, one table per host (a test process runs several hosts).
_KV_LOCKS: "weakref.WeakKeyDictionary[Any, _KeyLocks]" = weakref.WeakKeyDictionary()

#: The credential of the request being served on a plugin's route, bound by the web gate
#: (``skald_host.web.auth``) once it authenticated it: the plugin's id, the session (None
#: for a device token) and the device token's id. ``HostApi.watch_caller`` reads it.
_request_credential: ContextVar[tuple[str, Any, str | None] | None] = ContextVar("skald_request_credential", default=None)


def bind_request_credential(plugin_id: str | None, session: Any = None, device_id: str | None = None) -> None:
    """For the web gate only: the credential of the plugin request being served (None:
    no plugin route, or a ``@public`` one)."""
    _request_credential.set(None if plugin_id is None else (plugin_id, session, device_id))


#: Per host, the (plugin, what, field names) already logged as read as their defaults:
#: a plugin that reads its settings on every message must not log it on every message.
_STALE_LOGGED: "weakref.WeakKeyDictionary[Any, set[tuple[str, str, tuple[str, ...]]]]" = weakref.WeakKeyDictionary()


def read_settings(core: Any, plugin_id: str, what: str, fields: Sequence[Any], stored: Mapping[str, Any], *, keep_unknown: bool = False) -> dict[str, Any]:
    """Stored values as the plugin reads them (``config_schema.current``): a value its
    current schema refuses, or of a field it no longer has, reads as the default. Said
    once in the log, by field name only: the values may be secrets. The stored value
    stays until the admin saves or removes it (a downgrade finds it again)."""
    names = tuple(stale(fields, stored, keep_unknown=keep_unknown))
    if names:
        logged = _STALE_LOGGED.setdefault(core, set())
        if (plugin_id, what, names) not in logged:
            logged.add((plugin_id, what, names))
            log.warning(
                "plugin %s: the stored %s field(s) %s are refused by the plugin's current schema (or gone from it):"
                " read as their defaults until an admin saves them or removes them (\"Remove the stored values\" on the plugin's"
                " page, or DELETE /api/admin/plugins/%s/stale-settings); a downgrade reads them again until then",
                plugin_id, what, ", ".join(names), plugin_id,
            )
    return current(fields, stored, keep_unknown=keep_unknown)


def _kv_locks(core: Any) -> _KeyLocks:
    locks = _KV_LOCKS.get(core)
    if locks is None:
        locks = _KV_LOCKS[core] = _KeyLocks()
    return locks


#: Member events with nothing of the member's in them, handed to a subscription without
#: the grant check: a plugin must learn that a member's sessions ended or their access
#: changed, to drop what it holds for them.
UNCHECKED_KINDS = frozenset({"sessions_revoked", "access_changed"})


class EventFollow:
    """What ``subscribe_member`` / ``subscribe_system`` return (contract 1.17): calling
    it, or ``close()``, ends the subscription; no event is handed to the handler after
    that, even one already queued."""

    def __init__(self, subscription: Any) -> None:
        self._subscription = subscription
        self.ended = False

    @property
    def active(self) -> bool:
        return not self.ended and not self._subscription.closed

    def close(self) -> None:
        self.ended = True
        self._subscription.close()

    def __call__(self) -> None:
        self.close()


#: Per host, each member's plugin subscriptions, ended when the member locks.
_MEMBER_FOLLOWS: "weakref.WeakKeyDictionary[Any, dict[str, set[EventFollow]]]" = weakref.WeakKeyDictionary()


def _member_follows(core: Any) -> dict[str, set[EventFollow]]:
    follows = _MEMBER_FOLLOWS.get(core)
    if follows is None:
        follows = _MEMBER_FOLLOWS[core] = {}
    return follows


async def end_member_follows(core: Any, member_id: str) -> None:
    """The member locks: every plugin's subscription to their events ends (what was
    published before, such as ``sessions_revoked``, is still delivered). A plugin
    subscribes again in ``member_unlocked``: one that subscribed there at every login
    otherwise got each event once per login since the start."""
    for follow in list(_member_follows(core).pop(member_id, ())):
        follow._subscription.close()


class PluginHostApi:
    """Scoped to one plugin. The core is reached through a closure, not kept as a
    field, so a plugin that records the data it is handed (check D2's spy) finds ids
    and its own config — not the registry connection or other members' files."""

    def __init__(self, plugin_id: str, core: "Skald", *, starting: bool = False) -> None:
        self.plugin_id = plugin_id
        self._reach = lambda: core
        self._tasks: list[asyncio.Task[Any]] = []
        # The HostApi a ``startup`` is given speaks for the plugin from that startup on
        # (``set_degraded`` before the host marks it started); any other, only while it
        # runs. A closed one (its run stopped) never again.
        self._starting = starting
        self._closed = False

    @property
    def _core(self) -> "Skald":
        return self._reach()

    def _schema(self, per_member: bool) -> tuple[Any, ...]:
        status = self._core.plugins.status(self.plugin_id)
        if status is None or status.info is None:
            return ()
        return status.info.user_config_schema if per_member else status.info.config_schema

    async def get_config(self) -> Mapping[str, Any]:
        """Stored values over the schema's defaults, each one the current schema accepts
        (``read_settings``)."""
        row = await self._core.registry.run(
            lambda c: c.execute("SELECT config FROM plugins WHERE id = ?", (self.plugin_id,)).fetchone()
        )
        stored = self._core.plugin_config(self.plugin_id, row[0]) if row else {}
        return read_settings(self._core, self.plugin_id, "config", self._schema(False), stored)

    async def get_settings(self, set_id: str) -> Mapping[str, Any]:
        """A settings set of this plugin's own: stored values over the fields' defaults."""
        owned = [c.value for c in self._core.config_sets if c.plugin_id == self.plugin_id and c.value.id == set_id]
        if not owned:
            raise KeyError(f"plugin {self.plugin_id!r} registered no settings set {set_id!r}")
        stored = await self._core.instance_settings.values(set_id)
        return read_settings(self._core, self.plugin_id, f"settings set {set_id!r}", owned[0].fields, stored)

    async def get_user_config(self, member_id: str) -> Mapping[str, Any]:
        row = await self._core.registry.run(
            lambda c: c.execute(
                "SELECT config FROM plugin_user_configs WHERE plugin_id = ? AND user_id = ?", (self.plugin_id, member_id)
            ).fetchone()
        )
        # Keys outside the schema are the plugin's own (``set_user_config`` stores them):
        # kept; a schema field's value the current schema refuses reads as the default.
        stored = json.loads(row[0]) if row else {}
        return read_settings(self._core, self.plugin_id, "per-member config", self._schema(True), stored, keep_unknown=True)

    async def set_user_config(self, member_id: str, values: Mapping[str, Any]) -> None:
        """Replaces the member's stored config. A value of a ``user_config_schema`` field
        is checked as a member's save is (``ConfigInvalid``, naming the field, and
        nothing stored); keys outside the schema are stored as given."""
        if not isinstance(values, Mapping):
            raise TypeError("set_user_config takes a mapping of field values")
        schema = self._schema(True)
        names = {f.name for f in schema}
        mine = {k: v for k, v in values.items() if k in names}
        checked = validate([dataclasses.replace(f, required=False) for f in schema], mine)
        blob = json.dumps({**{k: v for k, v in values.items() if k not in names}, **checked})
        await self._core.registry.transaction(
            lambda c: c.execute(
                "INSERT INTO plugin_user_configs (plugin_id, user_id, config) VALUES (?, ?, ?)"
                " ON CONFLICT (plugin_id, user_id) DO UPDATE SET config = excluded.config,"
                " updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
                (self.plugin_id, member_id, blob),
            )
        )

    async def kv_get(self, key: str) -> Any:
        row = await self._core.registry.run(
            lambda c: c.execute("SELECT value FROM plugin_kv WHERE plugin_id = ? AND key = ?", (self.plugin_id, key)).fetchone()
        )
        return json.loads(self._core.opened("plugin_kv", "value", kv_cell(self.plugin_id, key), row[0]) or "null") if row else None

    async def kv_set(self, key: str, value: Any) -> None:
        """Sealed under the instance key like the plugin's settings: a plugin keeps its
        own secrets here (the mobile connector's VAPID key). ``None`` removes the key:
        state a plugin lets go of (a device unlinked) leaves no row behind. Never between
        a ``kv_update``'s read and write of the same key (it would be lost)."""
        async with _kv_locks(self._core)(self.plugin_id, key):
            await self._kv_write(key, value)

    async def kv_update(self, key: str, update: Callable[[Any], Any]) -> Any:
        """Read, ``update``, write, under the host's lock of this plugin's key (spec
        1.11): a read-modify-write of ``kv_get`` and ``kv_set`` lost concurrent updates
        (20 counting calls stored 3). ``update`` is the plugin's plain function, called
        on the loop; its exception, or a value JSON cannot store, leaves the value as
        it was (nothing is written before both succeeded)."""
        if not callable(update):
            raise TypeError("kv_update takes a function from the old value to the new one")
        async with _kv_locks(self._core)(self.plugin_id, key):
            new = update(await self.kv_get(key))
            if inspect.isawaitable(new):
                if inspect.iscoroutine(new):
                    new.close()  # never awaited: no "was never awaited" warning on top
                raise TypeError("kv_update's update must be a plain function, not async: it returned an awaitable")
            await self._kv_write(key, new)
            return new

    async def kv_keys(self, prefix: str = "") -> list[str]:
        """This plugin's keys starting with ``prefix``, sorted (spec 1.11)."""
        if not isinstance(prefix, str):
            raise TypeError("prefix must be a string")
        rows = await self._core.registry.run(
            lambda c: c.execute("SELECT key FROM plugin_kv WHERE plugin_id = ?", (self.plugin_id,)).fetchall()
        )
        return sorted(r[0] for r in rows if r[0].startswith(prefix))

    async def _kv_write(self, key: str, value: Any) -> None:
        if value is None:
            await self._core.registry.transaction(
                lambda c: c.execute("DELETE FROM plugin_kv WHERE plugin_id = ? AND key = ?", (self.plugin_id, key))
            )
            return
        blob = self._core.sealed("plugin_kv", "value", kv_cell(self.plugin_id, key), json.dumps(value))
        await self._core.registry.transaction(
            lambda c: c.execute(
                "INSERT INTO plugin_kv (plugin_id, key, value) VALUES (?, ?, ?)"
                " ON CONFLICT (plugin_id, key) DO UPDATE SET value = excluded.value",
                (self.plugin_id, key, blob),
            )
        )

    async def member_has_grant(self, member_id: str) -> bool:
        """Re-read on every call, so a revoked grant lands on the next message. The
        same decision as the route gate and the pages list (catalog.usable). An
        unknown (deleted) member has none: False, as the contract says, never an error."""
        from skald_host.core.identity.users import MemberNotFound

        try:
            member = await self._core.users.get(member_id) if isinstance(member_id, str) else None
        except (LookupError, MemberNotFound):
            return False
        return member is not None and self._core.catalog.usable(member, self.plugin_id)

    async def member_may(self, member_id: str, capability: str) -> bool:
        """Re-read on every call: the member's role as it is now (contract 1.15). Only a
        capability a role can hold; an unknown (deleted) or inactive member holds none."""
        from skald_host.core.identity.access import GRANTABLE, allowed
        from skald_host.core.identity.users import MemberNotFound

        if not isinstance(member_id, str) or capability not in GRANTABLE:
            return False
        try:
            member = await self._core.users.get(member_id)
        except (LookupError, MemberNotFound):
            return False
        return allowed(member, capability)

    def _follow(self, subscription: Any, handler: Callable[[Any], Awaitable[None]], member_id: str | None = None) -> "EventFollow":
        follow = EventFollow(subscription)

        async def pump() -> None:
            from skald_host.core.plugins.failures import PLUGIN_EXITS, record_failure

            try:
                async for event in subscription:
                    if follow.ended:
                        return
                    # Checked at each delivery, not at subscribe: a grant taken away (or
                    # the plugin disabled) stops the member's events at once, without a
                    # restart; the payloads carry the member's words.
                    # A revocation says nothing of theirs and lets a plugin drop what it
                    # holds for them (a pending pairing code): handed on at once, unchecked
                    # (the check's await made the phone's code outlive a password change).
                    if member_id is not None and event.kind not in UNCHECKED_KINDS and not await self.member_has_grant(member_id):
                        continue
                    try:
                        await handler(event)
                    except (Exception, *PLUGIN_EXITS) as exc:
                        # As a hook's failure: error id, frames, the message withheld (a
                        # handler's error may quote what the member wrote), folded when it
                        # repeats with every event.
                        record_failure(self._core.plugins, self.plugin_id, "event handler", exc)
            finally:
                subscription.close()
                if member_id is not None:
                    _member_follows(self._core).get(member_id, set()).discard(follow)

        if member_id is not None:
            _member_follows(self._core).setdefault(member_id, set()).add(follow)
        self._tasks.append(asyncio.create_task(pump(), name=f"plugin:{self.plugin_id}:events"))
        return follow

    def subscribe_system(self, handler: Callable[[SystemEvent], Awaitable[None]]) -> "EventFollow":
        return self._follow(self._core.buses.system.subscribe(), handler)

    def subscribe_member(self, member_id: str, handler: Callable[[UserEvent], Awaitable[None]]) -> "EventFollow":
        """Delivered only while the member may use this plugin (``member_has_grant``,
        asked at each event); ended by the member's lock (``end_member_follows``)."""
        return self._follow(self._core.buses.members.subscribe(member_id), handler, member_id)

    def translate(self, key: str, locale: str | None = None, **values: Any) -> str:
        self._core.strings.asked_for(key)
        return self._core.strings.translate(key, locale, **values)

    async def member_files(self, member_id: str) -> Any:
        """Host-only (built-in plugins): the acting member's file namespace, for the fs
        tools. Not part of the public HostApi: an external plugin gets no file access."""
        status = self._core.plugins.status(self.plugin_id)
        if status is None or not status.builtin:
            raise PermissionError("file access is reserved to the host's own tools")
        from skald_host.core.files.ops import MemberFiles

        return MemberFiles(self._core, await self._core.users.get(member_id))

    def memory(self) -> Any:
        """Host-only (built-in plugins): the memory note stores, for ``memory_search``.
        The service itself checks the shared pool's capabilities on every call."""
        status = self._core.plugins.status(self.plugin_id)
        if status is None or not status.builtin:
            raise PermissionError("memory access is reserved to the host's own tools")
        return self._core.memory

    # -- channels: this plugin is the source of the conversations it speaks for ------------

    async def send_message(
        self, member_id: str, text: str, *, attachments: Sequence[str] = (), idempotency_key: str | None = None
    ) -> Delivery:
        return await self._core.channels.send_message(self.plugin_id, member_id, text, attachments, idempotency_key)

    async def new_conversation(self, member_id: str) -> str:
        return await self._core.channels.new_conversation(self.plugin_id, member_id)

    async def stop_turn(self, member_id: str) -> bool:
        return await self._core.channels.stop_turn(self.plugin_id, member_id)

    async def agent_tasks(self, member_id: str) -> Sequence[Mapping[str, Any]]:
        return await self._core.channels.agent_tasks(self.plugin_id, member_id)

    async def resolve_approval(self, member_id: str, approval_id: str, approve: bool) -> Mapping[str, Any]:
        return await self._core.channels.resolve_approval(self.plugin_id, member_id, approval_id, approve)

    async def member_questions(self, member_id: str) -> list[Mapping[str, Any]]:
        return await self._core.channels.member_questions(self.plugin_id, member_id)

    async def answer_question(self, member_id: str, question_id: str, action: str, content: Mapping[str, Any] | None = None) -> None:
        await self._core.channels.answer_question(self.plugin_id, member_id, question_id, action, content)

    async def save_upload(
        self, member_id: str, filename: str, data: bytes | AsyncIterable[bytes], *, conversation_id: str | None = None
    ) -> Mapping[str, Any]:
        return await self._core.channels.save_upload(self.plugin_id, member_id, filename, data, conversation_id)

    async def member_locale(self, member_id: str) -> str:
        return await self._core.channels.member_locale(self.plugin_id, member_id)

    async def member_name(self, member_id: str) -> Mapping[str, str]:
        return await self._core.channels.member_name(self.plugin_id, member_id)

    # -- this source's conversations, read back (spec 1.3) ----------------------------------

    async def conversations(self, member_id: str, *, limit: int = 50) -> list[Mapping[str, Any]]:
        return await self._core.channels.conversations(self.plugin_id, member_id, limit)

    async def conversation_messages(self, member_id: str, conversation_id: str) -> Mapping[str, Any]:
        return await self._core.channels.conversation_messages(self.plugin_id, member_id, conversation_id)

    async def use_conversation(self, member_id: str, conversation_id: str) -> None:
        await self._core.channels.use_conversation(self.plugin_id, member_id, conversation_id)

    async def member_projects(self, member_id: str) -> list[Mapping[str, Any]]:
        return await self._core.channels.projects(self.plugin_id, member_id)

    async def project_files(self, member_id: str, project_id: str, path: str = "") -> Mapping[str, Any]:
        return await self._core.channels.project_files(self.plugin_id, member_id, project_id, path)

    async def read_project_file(self, member_id: str, project_id: str, path: str) -> Mapping[str, Any]:
        return await self._core.channels.read_project_file(self.plugin_id, member_id, project_id, path)

    # -- device tokens: a binding-managed plugin's paired devices (spec 1.3) ----------------

    async def _device_member(self, member_id: Any) -> Any:
        """The member a device token may be issued for: an unknown (deleted), inactive
        or refused one is ``ChannelRequestError``, as the contract says, never a 500."""
        from skald_hookspecs.channels import ChannelRequestError
        from skald_host.core.identity.users import MemberNotFound

        try:
            member = await self._core.users.get(member_id) if isinstance(member_id, str) else None
        except (LookupError, MemberNotFound):
            member = None
        if member is None or not member.active or not self._core.catalog.usable(member, self.plugin_id):
            raise ChannelRequestError("the member may not use this plugin")
        return member

    async def issue_device_token(self, member_id: str, label: Mapping[str, Any]) -> Mapping[str, str]:
        from skald_hookspecs.channels import ChannelRequestError

        member = await self._device_member(member_id)
        if not isinstance(label, Mapping):
            raise ChannelRequestError("label must be a mapping")
        try:
            token_id, token = await self._core.auth.devices.issue(self.plugin_id, member.id, label)
        except ValueError as exc:
            raise ChannelRequestError(str(exc)) from None
        log.info("plugin %s: a device was paired for member %s", self.plugin_id, member.id)
        return {"id": token_id, "token": token}

    async def device_tokens(self, member_id: str) -> list[Mapping[str, Any]]:
        if not isinstance(member_id, str):
            return []
        return await self._core.auth.devices.list(self.plugin_id, member_id)

    async def revoke_device_token(self, member_id: str, token_id: str) -> bool:
        if not isinstance(member_id, str) or not isinstance(token_id, str):
            return False
        return await self._core.auth.devices.revoke(self.plugin_id, member_id, token_id)

    # -- the credential of the request being served (spec 1.12) ---------------------------

    def watch_caller(self, on_end: Callable[[str], None]) -> Callable[[], None]:
        """A session's revocation listeners (as ``/api/ws`` uses) or the device token's
        watchers; ``on_end`` is called once, its exception logged, never raised into the
        revocation that told it (the member's other listeners are told all the same)."""
        bound = _request_credential.get()
        if bound is None or bound[0] != self.plugin_id:
            raise RuntimeError("watch_caller is for a handler of this plugin's own routes, with a signed-in caller")
        _, session, device_id = bound
        told = False

        def tell(reason: str) -> None:
            nonlocal told
            if told:
                return
            told = True
            try:
                on_end(reason)
            except Exception:
                log.exception("plugin %s: the end of a caller's credential was not taken", self.plugin_id)

        if session is not None:
            sessions = self._core.auth.sessions

            def listener(_session: Any, reason: str) -> None:
                tell(reason)

            if not sessions.watch(session, listener):
                tell("ended")
                return lambda: None
            return lambda: sessions.unwatch(session, listener)
        assert device_id is not None
        devices = self._core.auth.devices
        stop = devices.watch(device_id, tell)

        async def still_there() -> None:
            # Revoked between the request's check and this watch: no revocation will come.
            if not await devices.exists(device_id):
                stop()
                tell("device revoked")

        task = asyncio.create_task(still_there(), name=f"plugin:{self.plugin_id}:watch-device")
        self._tasks.append(task)
        task.add_done_callback(lambda done: self._tasks.remove(done) if done in self._tasks else None)
        return stop

    # -- sealed to a member: a plugin's record of a member's words, unreadable in system.db --

    def _sealed_id(self) -> str:
        """The box's associated data names the plugin: one plugin cannot open another's
        boxes, nor the host's sealed inbox, and a box moved to another member fails."""
        return f"plugin:{self.plugin_id}"

    async def seal_for_member(self, member_id: str, data: bytes) -> str:
        from skald_hookspecs.channels import ChannelRequestError
        from skald_host.core.identity.sealing import seal

        if not isinstance(data, (bytes, bytearray)):
            raise ChannelRequestError("seal_for_member takes bytes")
        row = await self._core.registry.run(
            lambda c: c.execute("SELECT inbox_public_key FROM users WHERE id = ?", (member_id,)).fetchone()
        )
        if row is None or row[0] is None:
            raise ChannelRequestError("the member must log in on the web once before anything can be sealed for them")
        box = seal(bytes(row[0]), bytes(data), member_id=member_id, sealed_id=self._sealed_id())
        raw = bytes([box.version]) + box.ephemeral_public + box.nonce + box.ciphertext
        return SEALED_PREFIX + base64.urlsafe_b64encode(raw).decode("ascii")

    async def open_for_member(self, member_id: str, sealed: str) -> bytes:
        from skald_hookspecs.channels import ChannelRequestError, MemberLocked
        from skald_host.core.identity.sealing import SealedBox, SealError, ensure_inbox_key, open_sealed

        try:
            if not isinstance(sealed, str) or not sealed.startswith(SEALED_PREFIX):
                raise ValueError("not a sealed box")
            raw = base64.urlsafe_b64decode(sealed[len(SEALED_PREFIX):].encode("ascii"))
            if len(raw) < 1 + 32 + 12 + 16:
                raise ValueError("too short")
            box = SealedBox(raw[1:33], raw[33:45], raw[45:], raw[0])
        except (ValueError, UnicodeError):
            raise ChannelRequestError("not a box sealed by seal_for_member") from None
        users = self._core.users
        db = users.owner_db(member_id) if isinstance(member_id, str) else None
        if db is None:
            raise MemberLocked("log in on the web first: your private data is locked until you do", users.lock_reason(str(member_id)))
        pair = await ensure_inbox_key(db)
        try:
            return open_sealed(pair, box, member_id=member_id, sealed_id=self._sealed_id())
        except SealError:
            raise ChannelRequestError("the sealed box does not open for this member and plugin") from None
    # -- per-member data in the member's own encrypted file (spec 1.2) ----------------------

    async def _owner_db(self, member_id: str) -> Any:
        from skald_host.core.identity.users import MemberNotFound

        if not isinstance(member_id, str):
            raise TypeError("member_id must be a string")
        db = self._core.users.owner_db(member_id)
        if db is None:
            try:
                await self._core.users.get(member_id)
            except MemberNotFound:
                # Deleted (in ``member_deleted`` too), or never one: "locked until they
                # log in" sent the plugin waiting for a login that cannot come.
                gone = MemberLocked("no such member: they were deleted (or never existed), and their private file with them")
                gone.code = "member_not_found"
                raise gone from None
            # The same ``lock_reason`` as every other locked answer (a phone showed
            # "restarted" on one route and nothing on the next).
            raise MemberLocked("the member's private file is locked until they log in", self._core.users.lock_reason(member_id))
        return db

    async def member_secret_get(self, member_id: str, name: str) -> str | None:
        _check_text(name, "name", MAX_SECRET_NAME)
        db, plugin_id = await self._owner_db(member_id), self.plugin_id
        row = await db.run(
            lambda c: c.execute("SELECT value FROM plugin_secrets WHERE plugin_id = ? AND name = ?", (plugin_id, name)).fetchone()
        )
        return row[0] if row else None

    async def member_secret_set(self, member_id: str, name: str, value: str | None) -> None:
        _check_text(name, "name", MAX_SECRET_NAME)
        if value is not None and (not isinstance(value, str) or len(value.encode()) > MAX_MEMBER_BLOB):
            raise ValueError(f"value must be a string of at most {MAX_MEMBER_BLOB} bytes, or None")
        db, plugin_id = await self._owner_db(member_id), self.plugin_id

        def write(c: Any) -> None:
            if value is None:
                c.execute("DELETE FROM plugin_secrets WHERE plugin_id = ? AND name = ?", (plugin_id, name))
            else:
                c.execute(
                    "INSERT INTO plugin_secrets (plugin_id, name, value) VALUES (?, ?, ?) ON CONFLICT (plugin_id, name)"
                    " DO UPDATE SET value = excluded.value, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
                    (plugin_id, name, value),
                )

        await db.transaction(write)

    async def member_secret_names(self, member_id: str, prefix: str = "") -> list[str]:
        db, plugin_id = await self._owner_db(member_id), self.plugin_id
        rows = await db.run(
            lambda c: c.execute("SELECT name FROM plugin_secrets WHERE plugin_id = ? ORDER BY name", (plugin_id,)).fetchall()
        )
        return [r[0] for r in rows if r[0].startswith(prefix)]

    async def append_member_event(self, member_id: str, kind: str, data: Mapping[str, Any]) -> int:
        _check_text(kind, "kind", MAX_EVENT_KIND)
        blob = json.dumps(dict(data), ensure_ascii=False)
        if len(blob.encode()) > MAX_MEMBER_BLOB:
            raise ValueError(f"data must encode to at most {MAX_MEMBER_BLOB} bytes of JSON")
        db, plugin_id = await self._owner_db(member_id), self.plugin_id
        return await db.transaction(
            lambda c: c.execute("INSERT INTO plugin_events (plugin_id, kind, data) VALUES (?, ?, ?)", (plugin_id, kind, blob)).lastrowid
        )

    async def notify_member(self, member_id: str, text: str) -> bool:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be non-empty")
        status = self._core.plugins.status(self.plugin_id)
        if not (status and status.info and (status.builtin or status.info.manages_own_access)) and not await self.member_has_grant(member_id):
            return False
        return await self._core.notify_member(member_id, text)

    async def member_events(self, member_id: str, *, after: int = 0, limit: int = 100) -> list[Mapping[str, Any]]:
        db, plugin_id = await self._owner_db(member_id), self.plugin_id
        limit = max(1, min(int(limit), 1000))
        rows = await db.run(
            lambda c: c.execute(
                "SELECT id, kind, data, created_at FROM plugin_events WHERE plugin_id = ? AND id > ? ORDER BY id LIMIT ?",
                (plugin_id, int(after), limit),
            ).fetchall()
        )
        return [{"id": r[0], "kind": r[1], "data": json.loads(r[2]), "created_at": r[3]} for r in rows]

    async def prune_member_events(
        self,
        member_id: str,
        *,
        kind: str | None = None,
        through_id: int | None = None,
        before: str | None = None,
        keep_last: int | None = None,
    ) -> int:
        if kind is not None:
            _check_text(kind, "kind", MAX_EVENT_KIND)
        for name, value in (("through_id", through_id), ("keep_last", keep_last)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a whole number of at least 0")
        if before is not None:
            try:
                moment = datetime.fromisoformat(before.replace("Z", "+00:00")) if isinstance(before, str) else None
            except ValueError:
                moment = None
            if moment is None or moment.tzinfo is None:
                raise ValueError("before must be an ISO-8601 time with its zone, such as 2026-01-31T00:00:00Z")
            # created_at is stored as UTC text ('%Y-%m-%dT%H:%M:%fZ'): compare like with like.
            before = moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if through_id is None and before is None and keep_last is None:
            raise ValueError("say what to prune: through_id, before or keep_last")
        db, plugin_id = await self._owner_db(member_id), self.plugin_id
        scope, params = "plugin_id = ?", [plugin_id]
        if kind is not None:
            scope += " AND kind = ?"
            params.append(kind)
        matches, match_params = [], []
        if through_id is not None:
            matches.append("id <= ?")
            match_params.append(through_id)
        if before is not None:
            matches.append("created_at < ?")
            match_params.append(before)
        if keep_last is not None:
            matches.append(f"id NOT IN (SELECT id FROM plugin_events WHERE {scope} ORDER BY id DESC LIMIT ?)")
            match_params += [*params, keep_last]
        sql = f"DELETE FROM plugin_events WHERE {scope} AND ({' OR '.join(matches)})"
        return await db.transaction(lambda c: c.execute(sql, (*params, *match_params)).rowcount)

    def unlocked_members(self) -> list[str]:
        return list(self._core.users.unlocked_ids)

    async def sandbox_spawn(
        self, member_id: str, argv: Sequence[str], *, workdir: str | None = None, env: Mapping[str, str] | None = None
    ) -> Any:
        member = await self._core.users.get(member_id)
        if not member.active:
            raise ValueError("the member is not active")
        return await self._core.sandbox.spawn(member.id, argv, workdir=workdir, env=env)

    async def synthesize_speech(self, member_id: str, text: str, *, format: str = "ogg") -> bytes:
        from skald_hookspecs.channels import ChannelRequestError
        from skald_hookspecs.tts import TtsUnavailable
        from skald_host.core.tts import NoVoice, SpeechRefused, no_voice_message

        locale = await self.member_locale(member_id)  # checks the member and this plugin's grant
        core = self._core
        try:
            # The voice for the language the text is written in (an English reply to a
            # member who reads German is read by an English voice); the member's own
            # language when it cannot be told.
            member = await core.users.get(member_id)
            spoken = await core.tts.text_locale(text, locale, member) if isinstance(text, str) else locale
            return await core.tts.render(member_id, text, locale=spoken, db=core.users.owner_db(member_id), format=format)
        except SpeechRefused as exc:  # in the member's language: a channel shows it as it is
            # ``values`` too: a channel that asked for voice replies reads the first part
            # of a text over ``tts.max_chars`` (``limit``) rather than nothing.
            raise ChannelRequestError(core.strings.refusal(exc, locale), code=exc.code, values=exc.values) from None
        except ValueError as exc:
            raise ChannelRequestError(str(exc)) from None
        except NoVoice as exc:
            raise TtsUnavailable(no_voice_message(core.strings, exc, locale)) from None

    def set_degraded(self, reason: str | None, *, key: str | None = None, values: Mapping[str, Any] | None = None) -> None:
        """In memory on the plugin's status (``PluginStatus.degraded``); the log says
        each change once, the English reason only (``values`` may hold anything)."""
        if reason is not None:
            if not isinstance(reason, str) or not reason.strip():
                raise ValueError("reason must be a non-empty string, or None once the plugin works again")
            reason = " ".join(reason.split())  # one line in the log, whatever it was given
            if len(reason) > MAX_DEGRADED_REASON:
                reason = reason[: MAX_DEGRADED_REASON - 1] + "…"
            if key is not None and (not isinstance(key, str) or not key.strip()):
                raise ValueError("key must be a non-empty string (a string of the plugin's own bundle), or None")
            if values is not None and not isinstance(values, Mapping):
                raise ValueError("values must be a mapping of the key's placeholders, or None")
        status = self._core.plugins.status(self.plugin_id)
        if status is None or self._closed or not (self._starting or status.started):
            return  # its run is over (a task it left behind), or it never started
        if reason is None:
            if status.set_degraded(None):
                log.info("plugin %s can do its job again", self.plugin_id)
            return
        if status.set_degraded(reason, key, dict(values or {})):
            log.warning("plugin %s runs but cannot do its job: %s", self.plugin_id, reason)

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

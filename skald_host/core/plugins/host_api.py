"""The ``HostApi`` each plugin receives: cut from the core's accessors, scoped to that
one plugin (its own config, its own key-value rows, grants for itself only)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

from skald_hookspecs.channels import Delivery
from skald_hookspecs.events import SystemEvent, UserEvent

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)


class PluginHostApi:
    """Scoped to one plugin. The core is reached through a closure, not kept as a
    field, so a plugin that records the data it is handed (check D2's spy) finds ids
    and its own config — not the registry connection or other members' files."""

    def __init__(self, plugin_id: str, core: "Skald") -> None:
        self.plugin_id = plugin_id
        self._reach = lambda: core
        self._tasks: list[asyncio.Task[Any]] = []

    @property
    def _core(self) -> "Skald":
        return self._reach()

    def _schema(self, per_member: bool) -> tuple[Any, ...]:
        status = self._core.plugins.status(self.plugin_id)
        if status is None or status.info is None:
            return ()
        return status.info.user_config_schema if per_member else status.info.config_schema

    async def get_config(self) -> Mapping[str, Any]:
        """Stored values over the schema's defaults."""
        row = await self._core.registry.run(
            lambda c: c.execute("SELECT config FROM plugins WHERE id = ?", (self.plugin_id,)).fetchone()
        )
        defaults = {f.name: f.default for f in self._schema(False) if f.default is not None}
        return {**defaults, **(json.loads(row[0]) if row else {})}

    async def get_user_config(self, member_id: str) -> Mapping[str, Any]:
        row = await self._core.registry.run(
            lambda c: c.execute(
                "SELECT config FROM plugin_user_configs WHERE plugin_id = ? AND user_id = ?", (self.plugin_id, member_id)
            ).fetchone()
        )
        defaults = {f.name: f.default for f in self._schema(True) if f.default is not None}
        return {**defaults, **(json.loads(row[0]) if row else {})}

    async def set_user_config(self, member_id: str, values: Mapping[str, Any]) -> None:
        blob = json.dumps(dict(values))
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
        return json.loads(row[0]) if row else None

    async def kv_set(self, key: str, value: Any) -> None:
        blob = json.dumps(value)
        await self._core.registry.transaction(
            lambda c: c.execute(
                "INSERT INTO plugin_kv (plugin_id, key, value) VALUES (?, ?, ?)"
                " ON CONFLICT (plugin_id, key) DO UPDATE SET value = excluded.value",
                (self.plugin_id, key, blob),
            )
        )

    async def member_has_grant(self, member_id: str) -> bool:
        """Re-read on every call, so a revoked grant lands on the next message. The
        same decision as the route gate and the pages list (catalog.usable)."""
        try:
            member = await self._core.users.get(member_id)
        except LookupError:
            return False
        return self._core.catalog.usable(member, self.plugin_id)

    def _follow(self, subscription: Any, handler: Callable[[Any], Awaitable[None]]) -> None:
        async def pump() -> None:
            try:
                async for event in subscription:
                    try:
                        await handler(event)
                    except Exception:
                        log.exception("plugin %s: event handler failed", self.plugin_id)
            finally:
                subscription.close()

        self._tasks.append(asyncio.create_task(pump(), name=f"plugin:{self.plugin_id}:events"))

    def subscribe_system(self, handler: Callable[[SystemEvent], Awaitable[None]]) -> None:
        self._follow(self._core.buses.system.subscribe(), handler)

    def subscribe_member(self, member_id: str, handler: Callable[[UserEvent], Awaitable[None]]) -> None:
        self._follow(self._core.buses.members.subscribe(member_id), handler)

    def translate(self, key: str, locale: str | None = None, **values: Any) -> str:
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

    async def resolve_approval(self, member_id: str, approval_id: str, approve: bool) -> Mapping[str, Any]:
        return await self._core.channels.resolve_approval(self.plugin_id, member_id, approval_id, approve)

    async def save_upload(
        self, member_id: str, filename: str, data: bytes, *, conversation_id: str | None = None
    ) -> Mapping[str, Any]:
        return await self._core.channels.save_upload(self.plugin_id, member_id, filename, data, conversation_id)

    async def member_locale(self, member_id: str) -> str:
        return await self._core.channels.member_locale(self.plugin_id, member_id)

    async def synthesize_speech(self, member_id: str, text: str, *, format: str = "ogg") -> bytes:
        from skald_hookspecs.channels import ChannelRequestError
        from skald_hookspecs.tts import TtsUnavailable
        from skald_host.core.tts import NoVoice, TextTooLong, TtsBusy, no_voice_message

        locale = await self.member_locale(member_id)  # checks the member and this plugin's grant
        core = self._core
        try:
            return await core.tts.render(member_id, text, locale=locale, db=core.users.owner_db(member_id), format=format)
        except (TextTooLong, TtsBusy, ValueError) as exc:
            raise ChannelRequestError(str(exc)) from None
        except NoVoice as exc:
            raise TtsUnavailable(no_voice_message(core.strings, exc, locale)) from None

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

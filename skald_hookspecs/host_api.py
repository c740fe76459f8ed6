"""The narrow facade a plugin receives at start.

Everything a plugin may do to the host goes through here; a plugin never gets a
database connection or another plugin's object. Methods are async because the host
serves every database from a worker thread.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping, Protocol, runtime_checkable

from skald_hookspecs.events import SystemEvent, UserEvent


@runtime_checkable
class HostApi(Protocol):
    plugin_id: str

    async def get_config(self) -> Mapping[str, Any]:
        """This plugin's instance config (secrets included: the plugin needs them)."""

    async def get_user_config(self, member_id: str) -> Mapping[str, Any]:
        """This plugin's per-member config for one member."""

    async def set_user_config(self, member_id: str, values: Mapping[str, Any]) -> None:
        """Store this plugin's per-member config (admin-readable: never secrets)."""

    async def kv_get(self, key: str) -> Any:
        """A value from this plugin's own small key-value store, or None."""

    async def kv_set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable value in this plugin's key-value store."""

    async def member_has_grant(self, member_id: str) -> bool:
        """Whether the member may use this plugin right now (re-read on every call)."""

    def subscribe_system(self, handler: Callable[[SystemEvent], Awaitable[None]]) -> None:
        """Receive system-bus events until the plugin stops (best-effort delivery)."""

    def subscribe_member(self, member_id: str, handler: Callable[[UserEvent], Awaitable[None]]) -> None:
        """Receive one member's events until the plugin stops."""

    def translate(self, key: str, locale: str | None = None, **values: Any) -> str:
        """An i18n string of the merged bundles, English when the locale lacks it."""

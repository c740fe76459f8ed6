"""The narrow facade a plugin receives at start.

Everything a plugin may do to the host goes through here; a plugin never gets a
database connection or another plugin's object. Methods are async because the host
serves every database from a worker thread.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping, Protocol, Sequence, runtime_checkable

from skald_hookspecs.channels import Delivery

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

    async def send_message(
        self,
        member_id: str,
        text: str,
        *,
        attachments: Sequence[str] = (),
        idempotency_key: str | None = None,
    ) -> Delivery:
        """Deliver a member's message into their current conversation whose source is
        this plugin (one is created when there is none). ``attachments`` are agent
        paths returned by ``save_upload``. The member's grant for this plugin is
        re-checked first (``refused`` without it, and for an unknown or inactive member
        or a malformed message; ``reason`` says which); a locked member's message is
        sealed and delivered at their next unlock (``sealed``). ``idempotency_key``
        (scoped to this plugin, e.g. the update id) makes a replay store nothing twice,
        sealed or not. Never raises for the member's state. Replies reach the plugin's
        channel through ``Channel.deliver``."""

    async def new_conversation(self, member_id: str) -> str:
        """Start a fresh conversation for this source; later messages go there.
        Raises ``MemberLocked`` for a locked member, ``ChannelRequestError`` without
        the grant (as do ``stop_turn`` and ``resolve_approval``)."""

    async def stop_turn(self, member_id: str) -> bool:
        """Stop the running turn of the member's current conversation of this source;
        False when none runs."""

    async def resolve_approval(self, member_id: str, approval_id: str, approve: bool) -> Mapping[str, Any]:
        """Approve or deny one pending card of a conversation of this source (the
        ``approval_id`` of an ``approval`` event); returns ``{"approval_id",
        "decision"}``. An unknown, foreign or already answered card raises
        ``ChannelRequestError``."""

    async def save_upload(
        self, member_id: str, filename: str, data: bytes, *, conversation_id: str | None = None
    ) -> Mapping[str, Any]:
        """Save a file the member sent through the host's one upload seam (size limit,
        collision-free name, sniffed type). Returns ``{"path", "mime", "size"}`` where
        ``path`` is the agent path to pass as an attachment. Works for a locked member
        too (the file waits under ``uploads/<plugin id>/``); a refused file raises
        ``ChannelRequestError``."""

    async def member_locale(self, member_id: str) -> str:
        """The member's UI locale (``en``, ``de``, ...), for strings the plugin sends."""

    async def synthesize_speech(self, member_id: str, text: str, *, format: str = "ogg") -> bytes:
        """Speak ``text`` for one member with the voice the host picks for them (their
        own choice, else the instance default for their language) through the engines
        of ``register_tts_engines``; returns the whole audio, ``format`` ``"ogg"``
        (OGG/Opus mono: a Telegram voice note) or ``"wav"``. Uses and fills the
        member's cache when their file is open. Raises ``ChannelRequestError`` without
        this plugin's grant, for an unknown member or a text over the length limit, and
        ``TtsUnavailable`` when no enabled engine speaks the member's language (its
        message says so). Since 1.2."""

"""``ChannelService``: the core side of the channel methods of ``HostApi``.

Every method is called on behalf of one plugin (``source``, its id) and one member,
and re-checks on every call that the member exists, is active and may use the plugin:
a revoked grant lands on the next call, with nothing pushed anywhere.
"""

from __future__ import annotations

import datetime as dt

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from skald_hookspecs.channels import Channel, ChannelRequestError, Delivery, MemberLocked
from skald_host.core import audit
from skald_host.core.agent.runtime import ChatError, MemberRuntime
from skald_host.core.channels.inbox import SealedInbox, current_conversation, start_conversation
from skald_host.core.channels.router import ChannelRouter
from skald_host.core.files.service import FileError
from skald_host.core.identity.users import Member, MemberNotFound

if TYPE_CHECKING:
    from skald_host.core.host import Skald


class ChannelService:
    def __init__(self, core: "Skald", channels: Mapping[str, Channel]) -> None:
        self.core = core
        self.router = ChannelRouter(core, channels)
        self.inbox = SealedInbox(core)

    async def after_unlock(self, member_id: str) -> None:
        await self.router.follow(member_id)  # first: the turns the inbox starts are followed
        await self.inbox.after_unlock(member_id)

    async def before_lock(self, member_id: str) -> None:
        await self.router.unfollow(member_id)

    async def close(self) -> None:
        await self.inbox.close()
        await self.router.close()

    # -- the HostApi methods -------------------------------------------------------------

    async def send_message(
        self, source: str, member_id: str, text: str, attachments: Sequence[str], idempotency_key: str | None
    ) -> Delivery:
        return await self.inbox.send(source, member_id, text, attachments, idempotency_key)

    async def _member(self, source: str, member_id: Any) -> Member:
        try:
            member = await self.core.users.get(member_id) if isinstance(member_id, str) else None
        except MemberNotFound:
            member = None
        if member is None:
            raise ChannelRequestError("no such member")
        if not member.active or not self.core.catalog.usable(member, source):
            audit.denied(member.id, f"plugin:{source}", via="channel")
            raise ChannelRequestError("the member may not use this plugin")
        return member

    async def _runtime(self, source: str, member_id: Any) -> MemberRuntime:
        member = await self._member(source, member_id)
        if not self.core.users.is_unlocked(member.id):
            raise MemberLocked("log in on the web first: your private data is locked until you do", self.core.users.lock_reason(member.id))
        try:
            return await self.core.chat.runtime(member)
        except ChatError as exc:  # locked between the check and here
            raise MemberLocked(str(exc), self.core.users.lock_reason(member.id)) from None

    async def new_conversation(self, source: str, member_id: str) -> str:
        runtime = await self._runtime(source, member_id)
        try:
            return await start_conversation(runtime, source)
        except ChatError as exc:
            raise ChannelRequestError(str(exc)) from None

    async def stop_turn(self, source: str, member_id: str) -> bool:
        runtime = await self._runtime(source, member_id)
        conversation_id = await current_conversation(runtime, source, create=False)
        return bool(conversation_id) and await runtime.stop(conversation_id)  # type: ignore[arg-type]

    async def agent_tasks(self, source: str, member_id: str) -> list[dict[str, Any]]:
        """The task strip of the source's current conversation, for a text channel."""
        runtime = await self._runtime(source, member_id)
        conversation_id = await current_conversation(runtime, source, create=False)
        if not conversation_id:
            return []
        since = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        rows = await runtime.subagents.store.runs(conversation_id, limit=20, live_or_failed_since=since)
        return [{"id": r["id"], "agent_id": r["agent_id"], "status": r["status"], "task": r["task"][:200], "created_at": r["created_at"]} for r in rows]

    async def resolve_approval(self, source: str, member_id: str, approval_id: Any, approve: Any) -> Mapping[str, Any]:
        """Only a card of this source's conversations: a channel answers what it was shown."""
        runtime = await self._runtime(source, member_id)
        if not isinstance(approve, bool):
            raise ChannelRequestError("approve must be true or false")
        approval = await runtime.store.approval(approval_id) if isinstance(approval_id, str) else None
        conversation = await runtime.store.conversation(approval["conversation_id"]) if approval else None
        if conversation is None or conversation["source"] != source:
            raise ChannelRequestError("no such approval")
        try:
            return await runtime.resolve_approval(approval_id, approve)
        except ChatError as exc:
            raise ChannelRequestError(str(exc)) from None

    async def save_upload(
        self, source: str, member_id: str, filename: str, data: bytes, conversation_id: str | None
    ) -> Mapping[str, Any]:
        """Into the given conversation's upload folder, else the source's current one;
        for a locked member (whose conversations cannot be read) a folder named after
        the source, so a sealed message can carry the path."""
        member = await self._member(source, member_id)
        if not isinstance(data, (bytes, bytearray)) or not isinstance(filename, str):
            raise ChannelRequestError("save_upload takes a file name and the file's bytes")
        if conversation_id is None:
            runtime = self.core.chat.live_runtime(member.id)
            if runtime is None and self.core.users.is_unlocked(member.id):
                runtime = await self.core.chat.runtime(member)
            conversation_id = (await current_conversation(runtime, source) if runtime else None) or source
        try:
            saved = await self.core.files.save_upload(member.id, conversation_id, filename, bytes(data))
        except FileError as exc:
            raise ChannelRequestError(str(exc)) from None
        return {"path": saved.path, "mime": saved.mime, "size": saved.size}

    async def member_locale(self, source: str, member_id: str) -> str:
        member = await self._member(source, member_id)
        return member.locale or await self.core.default_locale()

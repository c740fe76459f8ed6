"""``ChannelService``: the core side of the channel methods of ``HostApi``.

Every method is called on behalf of one plugin (``source``, its id) and one member,
and re-checks on every call that the member exists, is active and may use the plugin:
a revoked grant lands on the next call, with nothing pushed anywhere.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from skald_hookspecs.channels import Channel, ChannelRequestError, Delivery, MemberLocked
from skald_host.core import audit
from skald_host.core.agent.runtime import ChatError, MemberRuntime
from skald_host.core.channels.inbox import SealedInbox, channel_key, current_conversation, start_conversation, use_conversation
from skald_host.core.channels.router import ChannelRouter
from skald_host.core.files.paths import PathRefused, clean_relative, contain, open_dir_inside, open_inside, read_all
from skald_host.core.files.service import FileError, UploadTooLarge
from skald_host.core.folders import FolderAccess, FolderNotFound
from skald_host.core.folders.listing import listing
from skald_host.core.identity.access import allowed
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
            raise ChannelRequestError("the member may not use this plugin", code="forbidden")
        return member

    async def _runtime(self, source: str, member_id: Any) -> MemberRuntime:
        """The member's chat, for a role that may chat (checked at each call, as the web
        checks each request: a member demoted while their phone stays paired reaches no
        model)."""
        member = await self._member(source, member_id)
        if not allowed(member, "chat.use"):
            audit.denied(member.id, "action:chat.use", via="channel")
            raise ChannelRequestError("the member's role may not chat", code="forbidden")
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
        rows = await runtime.subagents.store.runs(conversation_id, limit=20, strip=True)
        titles = await self._agent_titles(source, member_id)
        return [
            {"id": r["id"], "agent_id": r["agent_id"], "title": titles.get(r["agent_id"]) or r["agent_id"], "status": r["status"],
             "task": r["task"][:200], "created_at": r["created_at"]}
            for r in rows
        ]

    async def _agent_titles(self, source: str, member_id: str) -> dict[str, str]:
        """Each helper's title in the member's language, as the web's Helpers page and
        task strip show it (the definition's own bundle, else the host's); none when
        the definitions cannot be read (the rows keep their ids)."""
        from skald_host.core.agent.subagents.catalog import GenerationRefused

        try:
            generation = self.core.chat.subagent_catalog.current()
        except GenerationRefused:
            return {}
        locale = await self.member_locale(source, member_id)
        return {
            agent_id: definition.summary(self.core.strings, locale, plugin=generation.owners.get(agent_id))["title"] or agent_id
            for agent_id, definition in generation.definitions.items()
        }

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

    async def _may_answer(self, runtime: MemberRuntime, source: str, question: Any) -> bool:
        """A question of this source's conversations (a channel answers what it was
        shown) or one this plugin's own tool asked (its page answers for it)."""
        if question is None:
            return False
        if question.plugin_id == source:
            return True
        conversation = await runtime.store.conversation(question.conversation_id)
        return conversation is not None and conversation["source"] == source

    async def member_questions(self, source: str, member_id: str) -> list[Mapping[str, Any]]:
        runtime = await self._runtime(source, member_id)
        out = []
        for public in runtime.questions.pending():
            if await self._may_answer(runtime, source, runtime.questions.get(public["question_id"])):
                out.append({k: public[k] for k in ("question_id", "conversation_id", "message", "fields")})
        return out

    async def answer_question(self, source: str, member_id: str, question_id: Any, action: Any, content: Any) -> None:
        from skald_host.core.agent.questions import QuestionError, QuestionGone

        runtime = await self._runtime(source, member_id)
        if not await self._may_answer(runtime, source, runtime.questions.get(question_id)):
            raise ChannelRequestError("no such question")
        try:
            runtime.questions.answer(question_id, action, content)
        except (QuestionGone, QuestionError) as exc:  # in the member's language: a channel shows it as it is
            raise ChannelRequestError(self.core.strings.refusal(exc, await self.member_locale(source, member_id)), code=exc.code) from None

    async def save_upload(
        self, source: str, member_id: str, filename: str, data: Any, conversation_id: str | None
    ) -> Mapping[str, Any]:
        """Into the given conversation's upload folder (one of this source's, refused like
        any other id otherwise), else the source's current one; for a locked member (whose conversations cannot be read) a folder named after
        the source, so a sealed message can carry the path. ``data`` is the file's bytes
        or (spec 1.12) an async iterable of its chunks, streamed to disk by the seam and
        pulled only once the checks passed; what the iterable raises reaches the caller
        (the seam removes the partial file)."""
        member = await self._member(source, member_id)
        streamed = not isinstance(data, (bytes, bytearray)) and hasattr(data, "__aiter__")
        if not (streamed or isinstance(data, (bytes, bytearray))) or not isinstance(filename, str):
            raise ChannelRequestError("save_upload takes a file name and the file's bytes (or an async iterable of them)")
        if conversation_id is not None:  # a conversation of this source in the member's own file, as every read
            await self._own_conversation(await self._runtime(source, member_id), source, conversation_id)
        else:
            runtime = self.core.chat.live_runtime(member.id)
            if runtime is None and self.core.users.is_unlocked(member.id):
                runtime = await self.core.chat.runtime(member)
            conversation_id = (await current_conversation(runtime, source) if runtime else None) or source
        try:
            saved = await self.core.files.save_upload(member.id, conversation_id, filename, _chunks_of(data) if streamed else bytes(data))
        except UploadTooLarge as exc:  # the kind and the sizes, for the plugin to word in its reader's language
            if exc.limit is not None:
                raise ChannelRequestError(str(exc), code="upload_too_large", values={"limit": exc.limit}) from None
            raise ChannelRequestError(str(exc), code="home_full", values={"left": exc.left}) from None
        except FileError as exc:
            raise ChannelRequestError(str(exc), code=exc.code or "", values=exc.values) from None
        return {"path": saved.path, "mime": saved.mime, "size": saved.size}

    # -- reading this source's conversations (spec 1.3) -----------------------------------

    async def conversations(self, source: str, member_id: str, limit: Any) -> list[dict[str, Any]]:
        runtime = await self._runtime(source, member_id)
        limit = max(1, min(int(limit), 200)) if isinstance(limit, int) else 50
        current = await current_conversation(runtime, source, create=False)
        rows = await runtime.store.db.run(
            lambda c: [
                dict(r)
                for r in c.execute(
                    "SELECT id, title, created_at, updated_at FROM conversations WHERE source = ? ORDER BY updated_at DESC LIMIT ?",
                    (source, limit),
                )
            ]
        )
        for row in rows:
            row["running"] = runtime.running(row["id"])
            row["current"] = row["id"] == current
        return rows

    async def _own_conversation(self, runtime: MemberRuntime, source: str, conversation_id: Any) -> dict[str, Any]:
        """A conversation of this source in the member's file; the same refusal for one
        of another source, of another member or of nobody."""
        conversation = await runtime.store.conversation(conversation_id) if isinstance(conversation_id, str) else None
        if conversation is None or conversation["source"] != source:
            raise ChannelRequestError("no such conversation")
        return conversation

    async def conversation_messages(self, source: str, member_id: str, conversation_id: Any) -> Mapping[str, Any]:
        runtime = await self._runtime(source, member_id)
        conversation = await self._own_conversation(runtime, source, conversation_id)
        # Answered cards are history too (as the web's reload shows them): a call's outcome
        # and the member's decision on it, by the call they were for.
        decisions = {a["tool_call_id"]: a["status"] for a in await runtime.store.resolved_approvals(conversation["id"])}
        messages = [
            # ``reason`` (since 1.10): the stored text is English, for the model; a screen
            # words a message that has one in its reader's language, as the web does.
            # ``attachments`` and ``tool_calls`` (since 1.16): a member's files, named on
            # the message after a reload; an answer's tool calls with their outcome.
            {
                "id": m["id"], "role": m["role"], "content": m["content"], "status": m["status"], "created_at": m["created_at"],
                "reason": {"code": m["reason"].get("code"), "values": m["reason"].get("values") or {}} if m.get("reason") else None,
                "idempotency_key": channel_key(source, m.get("idempotency_key")),
                "attachments": [
                    {"name": str(a.get("name") or a["path"].rsplit("/", 1)[-1]), "mime": a.get("mime"), "size": a.get("size")}
                    for a in m.get("attachments") or ()
                ],
                "tool_calls": [
                    {"id": c["id"], "tool": c["name"], "status": c["status"], "approval": decisions.get(c["id"])}
                    for c in m.get("tool_calls") or ()
                ],
            }
            for m in await runtime.store.transcript(conversation["id"])
            if m["role"] in ("user", "assistant", "note")
        ]
        approvals = [
            {"approval_id": a["id"], "tool": a.get("tool"), "arguments": a.get("arguments"), "expires_at": a.get("expires_at")}
            for a in await runtime.store.pending_approvals()
            if a["conversation_id"] == conversation["id"]
        ]
        return {
            "conversation": {k: conversation[k] for k in ("id", "title", "created_at", "updated_at")},
            "messages": messages,
            "approvals": approvals,
            "running": runtime.running(conversation["id"]),
        }

    async def use_conversation(self, source: str, member_id: str, conversation_id: Any) -> None:
        runtime = await self._runtime(source, member_id)
        conversation = await self._own_conversation(runtime, source, conversation_id)
        await use_conversation(runtime, source, conversation["id"])

    # -- the member's projects, read-only (spec 1.3) ---------------------------------------

    async def _unlocked(self, source: str, member_id: Any) -> Member:
        """As the web does: a member reaches projects with an open session, so a device
        of a locked member is told to log in first."""
        member = await self._member(source, member_id)
        if not self.core.users.is_unlocked(member.id):
            raise MemberLocked("log in on the web first: your private data is locked until you do", self.core.users.lock_reason(member.id))
        return member

    async def projects(self, source: str, member_id: str) -> list[dict[str, Any]]:
        member = await self._unlocked(source, member_id)
        return [
            {k: v for k, v in p.summary(member.id).items() if k in ("id", "title", "description", "can_write", "created_at")}
            for p in await self.core.folders.list_projects(member.id)
        ]

    async def _project_path(self, source: str, member_id: Any, project_id: Any, path: Any) -> tuple[FolderAccess, str, Any]:
        member = await self._unlocked(source, member_id)
        try:
            access = await self.core.folders.project_access(member.id, project_id) if isinstance(project_id, str) else None
        except FolderNotFound:
            access = None
        if access is None:
            raise ChannelRequestError("no such project")
        if path is not None and not isinstance(path, str):
            raise ChannelRequestError("path must be text")
        try:
            rel = clean_relative(path or "")
            rel_text = "" if str(rel) == "." else str(rel)
            return access, rel_text, contain(access.host_path, rel_text)
        except PathRefused as exc:
            raise ChannelRequestError(str(exc)) from None
        except OSError:  # a link changed under ``realpath`` while it read the path
            raise ChannelRequestError("no such file or folder") from None

    async def project_files(self, source: str, member_id: str, project_id: str, path: Any) -> Mapping[str, Any]:
        access, rel, folder = await self._project_path(source, member_id, project_id, path)
        # Listed and read through descriptors checked to be inside the project: its
        # members' sandboxes may turn a checked folder into a link out of it meanwhile.
        try:
            fd = await asyncio.to_thread(open_dir_inside, access.host_path, folder)
        except PathRefused as exc:
            raise ChannelRequestError(str(exc)) from None
        except OSError:
            raise ChannelRequestError("no such folder") from None
        try:
            return {"path": rel, "entries": await asyncio.to_thread(listing, fd, rel)}
        finally:
            os.close(fd)

    async def read_project_file(self, source: str, member_id: str, project_id: str, path: Any) -> Mapping[str, Any]:
        access, rel, file = await self._project_path(source, member_id, project_id, path)
        if not rel:
            raise ChannelRequestError("no such file")
        limit = self.core.settings.files.view_max_bytes
        return await asyncio.to_thread(_read_project_file, access.host_path, file, limit)

    async def member_locale(self, source: str, member_id: str) -> str:
        member = await self._member(source, member_id)
        return member.locale or await self.core.default_locale()

    async def member_name(self, source: str, member_id: str) -> Mapping[str, str]:
        member = await self._member(source, member_id)
        return {"username": member.username, "display_name": member.display_name or member.username}


def _read_project_file(base: Path, file: Path, limit: int) -> Mapping[str, Any]:
    """A project file's bytes, read from a descriptor checked to be a regular file
    inside ``base`` (blocking: run it in a thread)."""
    try:
        fd = open_inside(base, file, os.O_RDONLY)
    except PathRefused as exc:
        raise ChannelRequestError(str(exc)) from None
    except OSError:
        raise ChannelRequestError("no such file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ChannelRequestError("no such file")
        if info.st_size > limit:
            raise ChannelRequestError(f"the file is larger than the viewing limit of {limit} bytes")
        return {"name": file.name, "size": info.st_size, "data": read_all(fd, limit)}
    finally:
        os.close(fd)


async def _chunks_of(data: Any) -> Any:
    """A plugin's upload stream (spec 1.12), chunk by chunk, each one checked to be bytes:
    the seam writes them as they come and removes the partial file if this raises."""
    async for chunk in data:
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise ChannelRequestError("save_upload takes a file name and the file's bytes (or an async iterable of them)")
        yield chunk

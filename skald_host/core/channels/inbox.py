"""Inbound channel messages: into the member's conversation when they are unlocked,
sealed to their public key when they are not, and delivered from the sealed inbox at
their next unlock — each exactly once.

Exactly once across a crash: a sealed message carries its idempotency key inside the
box; at unlock it is stored in the member's file under that key and only then its
sealed row is deleted. A crash between the two re-delivers it at the next unlock, and
the key makes that second store a no-op.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any, Sequence

from skald_hookspecs.channels import Delivery
from skald_hookspecs.events import UserEvent
from skald_host.core import audit
from skald_host.core.agent.runtime import ChatError, MemberRuntime
from skald_host.core.i18n import plural_category
from skald_host.core.identity.access import allowed
from skald_host.core.identity.sealing import SealedBox, SealError, ensure_inbox_key, open_sealed, seal
from skald_host.core.identity.users import Member, MemberNotFound
from skald_host.core.storage import DiskFailure

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 100_000
MAX_ATTACHMENTS = 20
MAX_KEY_CHARS = 200
#: A locked member's backlog is bounded: past this, senders are refused, not queued.
MAX_SEALED_PER_MEMBER = 500
#: member_settings key naming the conversation a source's messages go to.
CURRENT_KEY = "channel.current.{source}"


def channel_key(source: str, stored: Any) -> str | None:
    """The idempotency key a channel sent a message with, as it sent it: the inbox stores
    it under the source's name (``<source>:<key>``, so two sources' keys never meet).
    None for a message another surface sent: its key is not the channel's to know."""
    prefix = f"{source}:"
    return stored[len(prefix):] if isinstance(stored, str) and stored.startswith(prefix) else None


def _dedupe_hash(member_id: str, key: str) -> str:
    return hashlib.sha256(f"skald-sealed-dedupe\n{member_id}\n{key}".encode()).hexdigest()


class SealedInbox:
    def __init__(self, core: "Skald") -> None:
        self.core = core
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def _lock(self, member_id: str) -> asyncio.Lock:
        """Serialises a member's inbound messages with their sealed-inbox delivery, so
        what was sealed earlier lands before what arrives right after the unlock."""
        return self._locks.setdefault(member_id, asyncio.Lock())

    # -- inbound ----------------------------------------------------------------------

    async def send(
        self, source: str, member_id: str, text: Any, attachments: Sequence[str], idempotency_key: str | None
    ) -> Delivery:
        problem = _check_message(text, attachments, idempotency_key)
        if problem:
            return Delivery("refused", reason=problem)
        try:
            member = await self.core.users.get(member_id) if isinstance(member_id, str) else None
        except MemberNotFound:
            member = None
        if member is None:
            return Delivery("refused", reason="no such member")
        if not member.active:
            return Delivery("refused", reason="the member is inactive")
        if not self.core.catalog.usable(member, source):
            audit.denied(member.id, f"plugin:{source}", via="channel")
            return Delivery("refused", reason="the member may not use this plugin")
        if not allowed(member, "chat.use"):  # as the web's send: a role without chat.use reaches no model
            audit.denied(member.id, "action:chat.use", via="channel")
            return Delivery("refused", reason="the member's role may not chat")
        key = f"{source}:{idempotency_key}" if idempotency_key else None  # read back by ``channel_key``
        try:
            return await self._store(source, member, text, attachments, key)
        except DiskFailure as exc:  # nothing kept: the sender is told, and may send it again
            log.error("member %s: a message from %s could not be stored: %s", member.id, source, exc)
            return Delivery("refused", reason=exc.member_text)

    async def _store(self, source: str, member: Member, text: str, attachments: Sequence[str], key: str | None) -> Delivery:
        async with self._lock(member.id):
            if self.core.users.is_unlocked(member.id):
                try:
                    runtime = await self.core.chat.runtime(member)
                    conversation_id = await deliver(runtime, source, text, list(attachments), key)
                except ChatError as exc:
                    if self.core.users.is_unlocked(member.id):  # a bad attachment, say
                        return Delivery("refused", reason=str(exc))
                    # locked this very moment (logout): nothing was stored, so seal it
                else:
                    return Delivery("accepted", conversation_id)
            return await self._seal(member.id, source, text, list(attachments), key)

    async def _seal(self, member_id: str, source: str, text: str, attachments: list[str], key: str | None) -> Delivery:
        sealed_id = uuid.uuid4().hex
        key = key or f"{source}:sealed:{sealed_id}"
        public = await self.core.registry.run(
            lambda c: c.execute("SELECT inbox_public_key FROM users WHERE id = ?", (member_id,)).fetchone()[0]
        )
        if public is None:  # created before the inbox and not logged in since
            return Delivery("refused", reason="the member must log in on the web once before messages can wait for them")
        payload = json.dumps({"text": text, "attachments": attachments, "key": key}).encode()
        box = seal(bytes(public), payload, member_id=member_id, sealed_id=sealed_id)
        dedupe = _dedupe_hash(member_id, key)

        def insert(conn: Any) -> str:
            if conn.execute("SELECT 1 FROM sealed_messages WHERE dedupe_hash = ?", (dedupe,)).fetchone():
                return "duplicate"
            waiting = conn.execute("SELECT count(*) FROM sealed_messages WHERE member_id = ?", (member_id,)).fetchone()[0]
            if waiting >= MAX_SEALED_PER_MEMBER:
                return "full"
            conn.execute(
                "INSERT INTO sealed_messages (id, member_id, source, dedupe_hash, version, ephemeral_public, nonce, ciphertext, size)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sealed_id, member_id, source, dedupe, box.version, box.ephemeral_public, box.nonce, box.ciphertext, len(box.ciphertext)),
            )
            return "sealed"

        outcome = await self.core.registry.transaction(insert)
        if outcome == "full":
            return Delivery("refused", reason=f"{MAX_SEALED_PER_MEMBER} messages already wait for this member to log in")
        if outcome == "sealed":
            log.info("member %s is locked: a message from %s was sealed for their next login", member_id, source)
        return Delivery("sealed", lock_reason=self.core.users.lock_reason(member_id))

    # -- at unlock ------------------------------------------------------------------------

    async def after_unlock(self, member_id: str) -> None:
        """Deliver in the background: the login answers without waiting for it."""
        task = asyncio.create_task(self.deliver_sealed(member_id), name=f"sealed-inbox:{member_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def deliver_sealed(self, member_id: str) -> int:
        """Everything sealed for the member, oldest first, into their conversations of
        each message's source; returns how many were delivered. Access is checked again
        here, as ``send`` checks it. What came from a source whose plugin is disabled
        stays sealed (the whole instance lost it, most likely for a while). What came
        from a source the member's access to was withdrawn is discarded, and the member
        is told so on the web: kept, it waited unseen for weeks and was then answered
        out of context when the grant came back, while the channel had promised an
        answer at the next login (probe 7)."""
        delivered = 0
        held: dict[str, int] = {}
        withdrawn: dict[str, int] = {}
        try:
            async with self._lock(member_id):
                db = self.core.users.owner_db(member_id)
                rows = await self.core.registry.run(
                    lambda c: c.execute(
                        "SELECT id, source, version, ephemeral_public, nonce, ciphertext FROM sealed_messages"
                        " WHERE member_id = ? ORDER BY seq",
                        (member_id,),
                    ).fetchall()
                )
                if db is None or not rows:
                    return 0
                pair = await ensure_inbox_key(db)
                member = await self.core.users.get(member_id)
                runtime = await self.core.chat.runtime(member)
                for row in rows:
                    sealed_id, source = row["id"], row["source"]
                    if not self.core.catalog.usable(member, source):
                        if self.core.plugins.is_enabled(source):  # the member's access was withdrawn
                            await self._forget(sealed_id)
                            withdrawn[source] = withdrawn.get(source, 0) + 1
                            continue
                        # The plugin is disabled: the message runs no turn now and waits
                        # (bounded by MAX_SEALED_PER_MEMBER) for it to be enabled again.
                        held[source] = held.get(source, 0) + 1
                        continue
                    box = SealedBox(bytes(row["ephemeral_public"]), bytes(row["nonce"]), bytes(row["ciphertext"]), row["version"])
                    try:
                        payload = json.loads(open_sealed(pair, box, member_id=member_id, sealed_id=sealed_id))
                    except (SealError, ValueError):
                        # Sealed to a key the member no longer has (an admin reset gave them
                        # a new file): nobody can open it, so keeping it helps no one.
                        log.warning("member %s: sealed message %s does not open with their key; discarded", member_id, sealed_id)
                        await self._forget(sealed_id)
                        continue
                    attachments = payload.get("attachments") or []
                    try:
                        await deliver(runtime, source, payload["text"], attachments, payload["key"])
                    except ChatError:
                        if runtime.closed or not attachments:
                            raise
                        # A file it named is gone since: the words still arrive.
                        log.warning("member %s: sealed message %s delivered without its attachments", member_id, sealed_id)
                        await deliver(runtime, source, payload["text"], [], payload["key"])
                    await self._forget(sealed_id)
                    delivered += 1
                for source, count in withdrawn.items():
                    await self._tell_withdrawn(member, runtime, source, count)
        except (ChatError, MemberNotFound) as exc:  # locked again meanwhile: the rest waits
            log.info("member %s: sealed-inbox delivery paused: %s", member_id, exc)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("member %s: sealed-inbox delivery failed", member_id)
        if delivered:
            log.info("member %s: %d sealed message(s) delivered", member_id, delivered)
        for source, count in held.items():
            log.info("member %s: %d sealed message(s) from %s kept: the member may not use it now", member_id, count, source)
        return delivered

    async def _tell_withdrawn(self, member: Member, runtime: MemberRuntime, source: str, count: int) -> None:
        """The member is told which messages will not be answered, where it lasts: a
        note in the source's current conversation on the web (the page the login opens
        may not listen yet), and on the open page; the channel may no longer reach them."""
        log.info("member %s: %d sealed message(s) from %s discarded: the member may no longer use it", member.id, count, source)
        locale = member.locale or await self.core.default_locale()
        status = self.core.plugins.status(source)
        declared = status.info.title if status is not None and status.info is not None else source
        channel = self.core.strings.plugin_text(source, "plugin.title", locale, declared)
        key = f"core.channels.sealed_withdrawn.{plural_category(locale, count)}"
        if self.core.strings.lookup(key, locale) is None:
            key = "core.channels.sealed_withdrawn.other"
        text = self.core.strings.translate(key, locale, count=count, channel=channel)
        # The source's conversation, made for it if it has none: where the member looks
        # for what became of those messages, and where the source goes on if it is theirs again.
        await runtime.notify(await current_conversation(runtime, source), text)
        self.core.buses.members.publish(UserEvent("notification", member.id, {"text": text}))

    async def _forget(self, sealed_id: str) -> None:
        await self.core.registry.transaction(lambda c: c.execute("DELETE FROM sealed_messages WHERE id = ?", (sealed_id,)))

    async def waiting(self, member_id: str) -> int:
        return await self.core.registry.run(
            lambda c: c.execute("SELECT count(*) FROM sealed_messages WHERE member_id = ?", (member_id,)).fetchone()[0]
        )

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _check_message(text: Any, attachments: Any, key: Any) -> str:
    if not isinstance(text, str):
        return "the message text must be text"
    if len(text) > MAX_TEXT_CHARS:
        return f"the message is longer than {MAX_TEXT_CHARS} characters"
    if not isinstance(attachments, (list, tuple)) or not all(isinstance(a, str) and 0 < len(a) <= 1024 for a in attachments):
        return "attachments must be a list of agent paths returned by save_upload"
    if len(attachments) > MAX_ATTACHMENTS:
        return f"at most {MAX_ATTACHMENTS} attachments per message"
    if not text.strip() and not attachments:
        return "the message is empty"
    if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS):
        return f"the idempotency key must be text of 1-{MAX_KEY_CHARS} characters"
    return ""


# -- the member's conversations of one source ---------------------------------------------------


async def _stored_under(runtime: MemberRuntime, key: str) -> str | None:
    """The conversation a message with this key already went to (a replay)."""
    row = await runtime.store.db.run(
        lambda c: c.execute(
            "SELECT conversation_id FROM messages WHERE idempotency_key = ?"
            " UNION ALL SELECT conversation_id FROM inbox WHERE idempotency_key = ?",
            (key, key),
        ).fetchone()
    )
    return row[0] if row else None


async def current_conversation(runtime: MemberRuntime, source: str, *, create: bool = True) -> str | None:
    """The conversation this source's messages go to: the one last started for it,
    else (none was ever named: a file from before the setting) its most recently used
    one, else (``create``) a new one with the member's default agent. The one named
    but deleted since (on the web) is followed by a new one, not by an older one: the
    member, who cannot see which it would be, would be answered in a context they
    threw away. A conversation with an agent the member's role no longer lets them
    talk with (their role changed) is left as it is and a new one starts: a channel has
    no screen to pick another conversation on, so refusing would refuse every message."""
    setting = CURRENT_KEY.format(source=source)

    def read(conn: Any) -> tuple[str, str] | None:
        row = conn.execute("SELECT value FROM member_settings WHERE key = ?", (setting,)).fetchone()
        if row is not None:
            chosen = json.loads(row[0])
            found = conn.execute("SELECT id, agent_id FROM conversations WHERE id = ? AND source = ?", (chosen, source)).fetchone()
            return (found[0], found[1]) if found else None
        row = conn.execute("SELECT id, agent_id FROM conversations WHERE source = ? ORDER BY updated_at DESC LIMIT 1", (source,)).fetchone()
        return (row[0], row[1]) if row else None

    found = await runtime.store.db.run(read)
    if found is not None and (not create or runtime.may_talk_with(found[1])):
        return found[0]
    if not create:
        return None
    return await start_conversation(runtime, source)


async def start_conversation(runtime: MemberRuntime, source: str) -> str:
    conversation = await runtime.create_conversation(source=source)
    await use_conversation(runtime, source, conversation["id"])
    return conversation["id"]


async def use_conversation(runtime: MemberRuntime, source: str, conversation_id: str) -> None:
    """Make ``conversation_id`` the one this source's next messages go to."""
    setting = CURRENT_KEY.format(source=source)
    await runtime.store.db.transaction(
        lambda c: c.execute(
            "INSERT INTO member_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET"
            " value = excluded.value, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
            (setting, json.dumps(conversation_id)),
        )
    )


async def deliver(runtime: MemberRuntime, source: str, text: str, attachments: list[str], key: str | None) -> str:
    """Store the message in the source's current conversation (a turn starts); a key
    already stored is acknowledged without storing it again."""
    if key is not None:
        earlier = await _stored_under(runtime, key)
        if earlier is not None:
            return earlier
    conversation_id = await current_conversation(runtime, source)
    assert conversation_id is not None
    await runtime.send(conversation_id, text, key, attachments=attachments)
    return conversation_id

"""Pairing a Telegram chat with a member, through one-time codes.

An unpaired private chat that writes gets a code. The member proves the chat is theirs by
entering that code while logged in to Skald (the plugin's page, or the
``telegram_pairing`` tool). The plugin's key-value store keeps only a SHA-256 of each
code, never the code, and the binding is kept twice: ``links`` (chat → member, which the
poller reads per message and the admin's roster lists) and the member's per-user config
(``linked``/``chat_id``/``chat_name``, which their page shows).

Codes: 10 symbols of the RFC 4648 base32 alphabet (50 bits), valid 10 minutes, single
use; a member who enters 5 wrong codes within an hour is locked out of pairing for the
rest of that hour (check A6).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from typing import Any, Callable

from skald_hookspecs import HostApi

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
CODE_LENGTH = 10
CODE_TTL_SECONDS = 600
REISSUE_AFTER_SECONDS = 60
MAX_FAILURES = 5
FAILURE_WINDOW_SECONDS = 3600
#: Look-alikes a member may type for symbols of the alphabet.
_CONFUSABLE = str.maketrans({"0": "O", "1": "I", "8": "B", "9": "G"})


class PairingError(ValueError):
    """A refused code; ``key`` names the string that tells the member why."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def display(code: str) -> str:
    half = len(code) // 2
    return f"{code[:half]}-{code[half:]}"


def normalise(typed: str) -> str:
    return "".join(ch for ch in typed.upper().translate(_CONFUSABLE) if ch in ALPHABET)


def digest(code: str) -> str:
    return hashlib.sha256(code.encode("ascii")).hexdigest()


class Pairing:
    """Codes, bindings and the attempt limit, kept in the plugin's key-value store.

    One lock serialises every read-modify-write of the store: the store has no
    compare-and-set, and two wrong codes racing must both count."""

    def __init__(self, host: HostApi, clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.clock = clock
        self.lock = asyncio.Lock()

    # -- the chat side ----------------------------------------------------------------

    async def issue(self, chat_id: int, chat_name: str) -> str | None:
        """A fresh code for this chat (replacing its previous one), or None when one was
        issued less than a minute ago (so a chatty stranger cannot mint codes)."""
        now = self.clock()
        async with self.lock:
            issued = await self.host.kv_get(f"issued:{chat_id}")
            if isinstance(issued, dict):
                if now - float(issued.get("at", 0)) < REISSUE_AFTER_SECONDS:
                    return None
                await self.host.kv_set(f"code:{issued.get('digest')}", None)
            code = new_code()
            key = digest(code)
            await self.host.kv_set(f"code:{key}", {"chat_id": chat_id, "chat_name": chat_name, "expires_at": now + CODE_TTL_SECONDS})
            await self.host.kv_set(f"issued:{chat_id}", {"digest": key, "at": now})
        return code

    async def links(self) -> dict[str, dict[str, Any]]:
        links = await self.host.kv_get("links")
        return links if isinstance(links, dict) else {}

    async def member_for_chat(self, chat_id: int) -> str | None:
        entry = (await self.links()).get(str(chat_id))
        return entry.get("member_id") if isinstance(entry, dict) else None

    async def chat_for_member(self, member_id: str) -> int | None:
        mine = await self.host.get_user_config(member_id)
        chat_id = mine.get("chat_id")
        return chat_id if mine.get("linked") and isinstance(chat_id, int) else None

    async def live_member_for_chat(self, chat_id: int) -> tuple[str | None, str | None]:
        """The chat's member, as ``member_for_chat``, when the member's own record of the
        link (their per-member config) still names this chat; else the link is stale
        and dropped here: ``(None, the member it named)``. The host deletes a member's
        per-member config with them, and a data-losing reset with their data, so a link
        the plugin was never told to drop (``member_deleted`` and ``member_reset``
        missed: an instance upgraded from before the hook, the plugin off meanwhile)
        heals at the chat's next message instead of failing every one for good."""
        member_id = await self.member_for_chat(chat_id)
        if member_id is None or await self.chat_for_member(member_id) == chat_id:
            return member_id, None
        async with self.lock:  # again under the lock: a pairing writes the link first, then the config
            links = await self.links()
            entry = links.get(str(chat_id))
            member_id = entry.get("member_id") if isinstance(entry, dict) else None
            if member_id is None or await self.chat_for_member(member_id) == chat_id:
                return member_id, None
            del links[str(chat_id)]
            await self.host.kv_set("links", links)
        return None, member_id

    # -- the member side --------------------------------------------------------------

    async def redeem(self, member_id: str, typed: str) -> dict[str, Any]:
        """Bind the chat the code was issued to; the binding as stored. Raises
        ``PairingError`` (wrong, expired, used, too many attempts)."""
        now = self.clock()
        async with self.lock:
            failures_key = f"failures:{member_id}"
            stored = await self.host.kv_get(failures_key)
            failures = [t for t in (stored if isinstance(stored, list) else []) if now - t < FAILURE_WINDOW_SECONDS]
            if len(failures) >= MAX_FAILURES:
                raise PairingError("too_many")

            async def fail(key: str) -> PairingError:
                failures.append(now)
                await self.host.kv_set(failures_key, failures)
                return PairingError(key)

            code = normalise(typed)
            entry = await self.host.kv_get(f"code:{digest(code)}") if len(code) == CODE_LENGTH else None
            if not isinstance(entry, dict):
                raise await fail("code_wrong")
            if entry.get("used"):
                raise await fail("code_used")
            if float(entry.get("expires_at", 0)) <= now:
                raise await fail("code_expired")
            # A tombstone until the code would have expired anyway, so a reuse says "used".
            await self.host.kv_set(f"code:{digest(code)}", {"used": True, "expires_at": entry["expires_at"]})
            await self.host.kv_set(f"issued:{entry['chat_id']}", None)
            return await self._bind(member_id, int(entry["chat_id"]), str(entry.get("chat_name", "")), now)

    async def _bind(self, member_id: str, chat_id: int, chat_name: str, now: float) -> dict[str, Any]:
        """The binding as stored, and in ``replaced_chat_id`` the member's previous chat
        when this one takes its place (the caller tells that chat; None otherwise)."""
        links = await self.links()
        replaced: int | None = None
        for key, link in list(links.items()):
            if key == str(chat_id) or link.get("member_id") == member_id:
                del links[key]
                if link.get("member_id") != member_id:  # the chat moves to a new member
                    await self.host.set_user_config(link["member_id"], {"linked": False})
                elif key != str(chat_id):  # the member's other chat: it loses the link
                    replaced = int(key)
        links[str(chat_id)] = {"member_id": member_id, "chat_name": chat_name, "linked_at": _iso(now)}
        await self.host.kv_set("links", links)
        binding = {"linked": True, "chat_id": chat_id, "chat_name": chat_name}
        await self.host.set_user_config(member_id, binding)
        return {**binding, "replaced_chat_id": replaced}

    async def unlink(self, member_id: str) -> int | None:
        """Forget the member's chat; the chat id it had, if any."""
        async with self.lock:
            links = await self.links()
            gone = [key for key, link in links.items() if link.get("member_id") == member_id]
            for key in gone:
                del links[key]
            await self.host.kv_set("links", links)
            await self.host.set_user_config(member_id, {"linked": False})
        return int(gone[0]) if gone else None


    async def forget_member(self, member_id: str) -> list[int]:
        """The member was deleted (``member_deleted``): their links and what the store
        keeps under their id go (their approval and question buttons, their flags,
        their failed attempts). Their per-member config is not written: the host
        deleted it with them. The chats they had linked."""
        async with self.lock:
            links = await self.links()
            gone = [key for key, link in links.items() if isinstance(link, dict) and link.get("member_id") == member_id]
            for key in gone:
                del links[key]
            if gone:
                await self.host.kv_set("links", links)
            for name in ("failures", "refused", "voice"):
                await self.host.kv_set(f"{name}:{member_id}", None)
            for prefix, card in (("button:", "card:"), ("qbutton:", "qcard:")):
                for key in await self.host.kv_keys(prefix):
                    entry = await self.host.kv_get(key)
                    if isinstance(entry, dict) and entry.get("member_id") == member_id:
                        await self.host.kv_set(key, None)
                        settled = entry.get("approval_id") if card == "card:" else entry.get("question_id")
                        if settled:
                            await self.host.kv_set(f"{card}{settled}", None)
        return [int(key) for key in gone if key.lstrip("-").isdigit()]

    async def forget_stored_jobs(self, member_id: str) -> None:
        """With the plugin off, what its outbox (``outbox:<chat>``) and its streamed
        answers (``relay:<chat>``) keep for the member goes from the store directly, as
        do the messages held for them while they were locked (``inbound:<member>``)."""
        await self.host.kv_set(f"inbound:{member_id}", None)
        for key in await self.host.kv_keys("relay:"):
            record = await self.host.kv_get(key)
            if isinstance(record, dict) and record.get("member_id") == member_id:
                await self.host.kv_set(key, None)
        for key in await self.host.kv_keys("outbox:"):
            record = await self.host.kv_get(key)
            if not isinstance(record, dict) or not isinstance(record.get("jobs"), list):
                continue
            jobs = [j for j in record["jobs"] if not (isinstance(j, dict) and j.get("member_id") == member_id)]
            if len(jobs) != len(record["jobs"]):
                await self.host.kv_set(key, {**record, "jobs": jobs} if jobs else None)


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))

"""Messages with attachments that arrived while their member was locked.

A locked member's files cannot be kept the way an unlocked member's are: the host
would write them under ``uploads/telegram/`` in clear (files are not encrypted at rest)
before the member ever logged in, so a photo sent to a server nobody has unlocked since
its restart would lie readable on its disk (checks A6 and B1). So the plugin keeps no
file then, only the message: its words and Telegram's reference to each file (file id,
name, size; the bytes stay on Telegram's side), sealed to the member's inbox key
(``HostApi.seal_for_member``, as the host seals a locked member's text) under
``inbound:<member>`` in the plugin's store. After the member logs in the plugin opens
each message, fetches its files as it does for an unlocked member, and delivers it
(``TelegramBot._deliver_held``).

Only the update id is stored in clear beside each sealed message: a replayed update
is held once, and a delivered one is taken out by it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from skald_hookspecs import HostApi

from skald_telegram.updates import FileRef, Inbound

PREFIX = "inbound:"


@dataclass(frozen=True)
class HeldMessage:
    """What a held message opens to: enough to deliver it as it would have been."""

    update_id: int
    text: str
    files: tuple[FileRef, ...]
    forwarded_from: str | None
    language_code: str | None

    @classmethod
    def of(cls, message: Inbound) -> "HeldMessage":
        return cls(message.update_id, message.text, message.files, message.forwarded_from, message.language_code)

    def sealable(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def opened(cls, data: bytes) -> "HeldMessage":
        """``ValueError`` (or ``KeyError``/``TypeError``) for a box that is not one."""
        raw = json.loads(data)
        files = tuple(
            FileRef(str(f["file_id"]), str(f["filename"]), f["size"] if isinstance(f.get("size"), int) else None)
            for f in raw["files"]
        )
        forwarded = raw.get("forwarded_from")
        language = raw.get("language_code")
        return cls(
            int(raw["update_id"]), str(raw["text"]), files,
            forwarded if isinstance(forwarded, str) else None, language if isinstance(language, str) else None,
        )


class HeldStore:
    """The sealed held messages of each member, oldest first."""

    def __init__(self, host: HostApi) -> None:
        self.host = host

    @staticmethod
    def key(member_id: str) -> str:
        return f"{PREFIX}{member_id}"

    async def hold(self, member_id: str, message: HeldMessage) -> str:
        """Seal and store the message (a replay of an update held already is stored
        once); the sealed string. ``ChannelRequestError`` when the member cannot be
        sealed for (see ``seal_for_member``)."""
        sealed = await self.host.seal_for_member(member_id, message.sealable())

        def add(entries: Any) -> list[dict[str, Any]]:
            entries = [e for e in entries if _is_entry(e)] if isinstance(entries, list) else []
            if not any(e["update_id"] == message.update_id for e in entries):
                entries.append({"update_id": message.update_id, "sealed": sealed})
            return entries

        await self.host.kv_update(self.key(member_id), add)
        return sealed

    async def entries(self, member_id: str) -> list[dict[str, Any]]:
        stored = await self.host.kv_get(self.key(member_id))
        return [e for e in stored if _is_entry(e)] if isinstance(stored, list) else []

    async def waiting(self, member_id: str) -> bool:
        return bool(await self.entries(member_id))

    async def drop(self, member_id: str, update_id: int) -> None:
        def without(entries: Any) -> list[dict[str, Any]] | None:
            kept = [e for e in entries if _is_entry(e) and e["update_id"] != update_id] if isinstance(entries, list) else []
            return kept or None

        await self.host.kv_update(self.key(member_id), without)

    async def forget(self, member_id: str) -> None:
        await self.host.kv_set(self.key(member_id), None)

    async def members(self) -> list[str]:
        return [key[len(PREFIX):] for key in await self.host.kv_keys(PREFIX)]


def _is_entry(entry: Any) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("update_id"), int) and isinstance(entry.get("sealed"), str)

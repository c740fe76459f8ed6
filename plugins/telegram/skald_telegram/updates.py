"""Raw Bot API updates as small values, parsed defensively.

Updates arrive as JSON from a server the plugin does not control (and, in webhook mode,
from anyone who knows the secret), so nothing here trusts a field to exist or to have
the right type: a malformed update parses to ``None`` or to an ``Inbound`` with fewer
parts, never to an exception that would stop the poller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class FileRef:
    """A file the member sent, still on Telegram's side."""

    file_id: str
    filename: str
    size: int | None = None


@dataclass(frozen=True)
class Inbound:
    """A message in a chat: who, where, what."""

    update_id: int
    chat_id: int
    chat_type: str
    from_id: int | None
    chat_name: str
    language_code: str | None
    text: str
    files: tuple[FileRef, ...] = ()
    unsupported: bool = False  # a sticker, a location, ...: something we cannot pass on
    #: Forwarded: who wrote it first, as Telegram names them ("" when it names nobody);
    #: None for the member's own words.
    forwarded_from: str | None = None
    #: An ``edited_message``: a change to a message that was already passed on.
    edited: bool = False


@dataclass(frozen=True)
class ButtonPress:
    """A press on an inline-keyboard button (a callback query)."""

    update_id: int
    query_id: str
    from_id: int
    chat_id: int | None
    chat_type: str | None
    message_id: int | None
    data: str
    language_code: str | None = None


@dataclass(frozen=True)
class Ignored:
    """An update with an id but nothing for us (another kind, or malformed)."""

    update_id: int
    why: str
    extra: Mapping[str, Any] = field(default_factory=dict)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def update_id_of(raw: Any) -> int | None:
    return _int(raw.get("update_id")) if isinstance(raw, Mapping) else None


def chat_name(chat: Mapping[str, Any]) -> str:
    """What the page shows as the linked chat: name, else @username, else the id."""
    name = " ".join(part for part in (_str(chat.get("first_name")), _str(chat.get("last_name"))) if part)
    username = _str(chat.get("username"))
    return (name or (f"@{username}" if username else "") or _str(chat.get("title")) or str(chat.get("id", "")))[:200]


def forwarded_from(message: Mapping[str, Any]) -> str | None:
    """Who wrote a forwarded message, by the Bot API's ``forward_origin`` (a user, a
    user who hides their account, a chat, a channel), or the older ``forward_from*``
    fields; "" for a forward that names nobody usable, None for one that is no forward.
    Passed on as the member's own words, someone else's text would be answered (and
    kept) as if the member had said it."""
    origin = message.get("forward_origin")
    if isinstance(origin, Mapping):
        kind = _str(origin.get("type"))
        if kind == "hidden_user":
            return _str(origin.get("sender_user_name"))[:200]
        for field_name in ("sender_user", "sender_chat", "chat"):
            named = origin.get(field_name)
            if isinstance(named, Mapping):
                name = chat_name({**named, "id": ""})
                signature = _str(origin.get("author_signature"))
                return f"{name} ({signature})"[:200] if name and signature else name
        return ""
    for field_name in ("forward_from", "forward_from_chat"):
        named = message.get(field_name)
        if isinstance(named, Mapping):
            return chat_name({**named, "id": ""})
    if "forward_sender_name" in message or "forward_date" in message:
        return _str(message.get("forward_sender_name"))[:200]
    return None


def _files(message: Mapping[str, Any], update_id: int) -> tuple[FileRef, ...]:
    files: list[FileRef] = []
    photos = message.get("photo")
    if isinstance(photos, list):
        sizes = [p for p in photos if isinstance(p, Mapping) and _str(p.get("file_id"))]
        if sizes:  # Telegram sends every size; the largest is the one worth keeping
            largest = max(sizes, key=lambda p: (_int(p.get("width")) or 0) * (_int(p.get("height")) or 0) or (_int(p.get("file_size")) or 0))
            files.append(FileRef(_str(largest["file_id"]), f"photo-{update_id}.jpg", _int(largest.get("file_size"))))
    document = message.get("document")
    if isinstance(document, Mapping) and _str(document.get("file_id")):
        files.append(FileRef(_str(document["file_id"]), _str(document.get("file_name")) or f"document-{update_id}", _int(document.get("file_size"))))
    voice = message.get("voice")
    if isinstance(voice, Mapping) and _str(voice.get("file_id")):
        files.append(FileRef(_str(voice["file_id"]), f"voice-{update_id}.ogg", _int(voice.get("file_size"))))
    return tuple(files)


def parse_update(raw: Any) -> Inbound | ButtonPress | Ignored | None:
    """``None`` when there is not even an ``update_id`` to acknowledge."""
    update_id = update_id_of(raw)
    if update_id is None:
        return None
    # Edits come as their own kind of update; the bot answers that they are not read.
    edited = not isinstance(raw.get("message"), Mapping) and isinstance(raw.get("edited_message"), Mapping)
    message = raw.get("edited_message") if edited else raw.get("message")
    if isinstance(message, Mapping):
        chat = message.get("chat")
        if not isinstance(chat, Mapping) or _int(chat.get("id")) is None:
            return Ignored(update_id, "message without a chat")
        sender = message.get("from") if isinstance(message.get("from"), Mapping) else {}
        files = _files(message, update_id)
        text = _str(message.get("text")) or _str(message.get("caption"))
        return Inbound(
            update_id=update_id,
            chat_id=_int(chat["id"]),  # type: ignore[arg-type]
            chat_type=_str(chat.get("type")),
            from_id=_int(sender.get("id")),
            chat_name=chat_name(chat),
            language_code=_str(sender.get("language_code")) or None,
            text=text,
            files=files,
            unsupported=not text and not files,
            forwarded_from=forwarded_from(message),
            edited=edited,
        )
    query = raw.get("callback_query")
    if isinstance(query, Mapping):
        sender = query.get("from") if isinstance(query.get("from"), Mapping) else {}
        if not _str(query.get("id")) or _int(sender.get("id")) is None:
            return Ignored(update_id, "callback query without id or sender")
        origin = query.get("message") if isinstance(query.get("message"), Mapping) else {}
        chat = origin.get("chat") if isinstance(origin.get("chat"), Mapping) else {}
        return ButtonPress(
            update_id=update_id,
            query_id=_str(query["id"]),
            from_id=_int(sender["id"]),  # type: ignore[arg-type]
            chat_id=_int(chat.get("id")),
            chat_type=_str(chat.get("type")) or None,
            message_id=_int(origin.get("message_id")),
            data=_str(query.get("data")),
            language_code=_str(sender.get("language_code")) or None,
        )
    return Ignored(update_id, "an update kind the bot does not handle")

"""Attachments of a member's message, and what a turn hands the model of them (seed 001
"Multimodal attachments").

A message carries agent paths of files the member attached. Every model sees a text
block naming them (so the agent can ``read_file`` them); a vision model also gets the
images of the *current turn* as ``image_url`` data URLs — only files under the home's
``uploads/`` folder, only a sniffed image type, only within the per-turn count and byte
budget. Older turns and anything else keep the text block alone.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import TYPE_CHECKING, Any, Sequence

from skald_host.core.files.paths import PathRefused, open_inside, read_all
from skald_host.core.files.service import UPLOADS_DIR, FileError
from skald_host.core.files.sniff import IMAGE_TYPES, sniff

if TYPE_CHECKING:
    from skald_host.core.host import Skald
    from skald_host.core.identity.users import Member

MAX_ATTACHMENTS = 20
SYSTEM_EXTRA_TAG = "system-extra"


async def describe_attachments(core: "Skald", member: "Member", paths: Any) -> list[dict[str, Any]]:
    """Validate the attachment paths of a message being sent: each must be an existing
    file in the member's home, shared folders or projects. Returns what is stored."""
    if paths is None:
        return []
    if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) for p in paths):
        raise FileError("'attachments' must be a list of file paths", code="field_type", field="attachments")
    if len(paths) > MAX_ATTACHMENTS:
        raise FileError(f"at most {MAX_ATTACHMENTS} attachments per message", code="attachments_too_many", limit=MAX_ATTACHMENTS)
    described = []
    for path in paths:
        resolved = await core.files.resolve(member, path, write=False)
        if resolved.kind != "host" or resolved.host_path is None:
            raise FileError(f"{path}: only files in your home, shared folders or projects can be attached", code="attachment_not_file", path=path)
        info = await asyncio.to_thread(_head, resolved.base, resolved.host_path)
        if info is None:
            raise FileError(f"{path}: no such file", code="no_such_file", path=path)
        size, head = info
        described.append(
            {"path": resolved.agent_path, "name": resolved.host_path.name, "mime": sniff(head, complete=size <= len(head)), "size": size}
        )
    return described


def _head(base: Any, path: Any) -> tuple[int, bytes] | None:
    try:
        fd = open_inside(base, path, os.O_RDONLY)
    except (OSError, PathRefused):
        return None
    try:
        info = os.fstat(fd)
        if not os.path.isfile(f"/proc/self/fd/{fd}"):
            return None
        return info.st_size, os.pread(fd, 8192, 0)
    finally:
        os.close(fd)


def parse_attachments(raw: Any) -> list[dict[str, Any]]:
    """A stored message's attachments (the column holds JSON; absent on old rows)."""
    if not raw:
        return []
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    return [a for a in value if isinstance(a, dict) and isinstance(a.get("path"), str)] if isinstance(value, list) else []


def attachments_block(attachments: Sequence[dict[str, Any]]) -> str:
    """The text every model gets for a message's attachments."""
    lines = [f"- {a['path']} ({a.get('mime') or 'unknown type'}, {a.get('size', '?')} bytes)" for a in attachments]
    return (
        f"<{SYSTEM_EXTRA_TAG}>\nThe member attached these files (read them with read_file):\n"
        + "\n".join(lines)
        + f"\n</{SYSTEM_EXTRA_TAG}>"
    )


def text_only(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same request for a model without vision: image parts dropped, the text (with
    its attachment block) kept — byte-identical to a projection without images."""
    if not any(isinstance(m.get("content"), list) for m in wire):
        return wire
    return [
        {**m, "content": "".join(p["text"] for p in m["content"] if p.get("type") == "text")} if isinstance(m.get("content"), list) else m
        for m in wire
    ]


def current_turn(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows after the last final assistant answer (tool rounds included)."""
    for index in range(len(history) - 1, -1, -1):  # from the end: a round costs its turn, not the conversation
        message = history[index]
        if message["role"] == "assistant" and message.get("status") == "complete" and not message.get("tool_calls"):
            return list(history[index + 1:])
    return list(history)


async def turn_images(core: "Skald", member_id: str, history: Sequence[dict[str, Any]]) -> dict[int, list[str]]:
    """Data URLs of the current turn's image uploads, per message id, within the budget.
    Empty (and no disk read at all) when the turn has no image attachments."""
    wanted = [
        (m["id"], a)
        for m in current_turn(history)
        if m["role"] == "user"
        for a in parse_attachments(m.get("attachments"))
        if a.get("mime") in IMAGE_TYPES and a["path"].startswith(UPLOADS_DIR + "/")
    ]
    if not wanted:
        return {}
    settings = core.settings.files
    home = core.files.home(member_id)
    images: dict[int, list[str]] = {}
    spent = count = 0
    for message_id, attachment in wanted:
        if count >= settings.turn_image_count:
            break
        data = await asyncio.to_thread(_read_upload, home, attachment["path"], settings.turn_image_bytes - spent)
        if data is None:
            continue
        mime = sniff(data[:64])
        if mime not in IMAGE_TYPES:
            continue
        spent += len(data)
        count += 1
        images.setdefault(message_id, []).append(f"data:{mime};base64,{base64.b64encode(data).decode()}")
    return images


def _read_upload(home: Any, agent_path: str, budget: int) -> bytes | None:
    """The file's bytes when it is inside the home's uploads folder and fits ``budget``."""
    from skald_host.core.files.paths import contain

    try:
        uploads = contain(home, UPLOADS_DIR)
        path = contain(home, agent_path)
    except PathRefused:
        return None
    if uploads not in path.parents:
        return None
    try:
        fd = open_inside(uploads, path, os.O_RDONLY)
    except (OSError, PathRefused):
        return None
    try:
        size = os.fstat(fd).st_size
        if size > budget or size == 0:
            return None
        data = read_all(fd, budget + 1)
        return data if len(data) <= budget else None
    finally:
        os.close(fd)

"""The type of a file from its first bytes, never from its name or the client's claim:
a ``.png`` that is not a PNG is not an image (seed 001 "Multimodal attachments")."""

from __future__ import annotations

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
TEXT = "text/plain"
UNKNOWN = "application/octet-stream"


def sniff(head: bytes, *, complete: bool = False) -> str:
    """``head`` is the first few KiB; ``complete`` says it is the whole file (so a
    multi-byte character cut at the end is not taken for broken UTF-8)."""
    if not head:
        return UNKNOWN  # nothing says it is text: an empty ``x.bin`` was labelled text/plain
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "application/zip"
    if b"\x00" in head:
        return UNKNOWN
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A character cut by the head's end is fine; a bad byte before it is not.
        if complete or exc.start < len(head) - 3:
            return UNKNOWN
    return TEXT

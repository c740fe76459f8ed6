"""Splitting a long answer into messages Telegram accepts.

Telegram counts a message's length in UTF-16 code units (4,096 at most), so an answer
full of emoji is shorter in Python characters than the limit suggests. Answers go out as
plain text (no ``parse_mode``): model output is never parsed as markup, so nothing in it
can break a message or inject formatting.
"""

from __future__ import annotations

MESSAGE_LIMIT = 4096


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _fits(text: str, limit: int) -> int:
    """The number of leading characters of ``text`` whose UTF-16 length is ≤ limit."""
    if utf16_len(text) <= limit:
        return len(text)
    count = units = 0
    for char in text:
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            break
        count += 1
    return count


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Pieces of at most ``limit`` UTF-16 units, cut at a paragraph break, else a line
    break, else a space, as late as possible (never in the first half of a piece), else
    hard. Blank pieces are dropped; nothing else is lost but the whitespace at a cut."""
    pieces: list[str] = []
    rest = text.strip()
    while rest:
        size = _fits(rest, limit)
        if size == len(rest):
            pieces.append(rest)
            break
        window = rest[:size]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at >= size // 2:
                cut = at
                break
        if cut <= 0:
            cut = size
        piece = rest[:cut].rstrip()
        if piece:
            pieces.append(piece)
        rest = rest[cut:].lstrip()
    return pieces

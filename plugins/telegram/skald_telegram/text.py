"""Answers as messages Telegram accepts: split at its length limit, Markdown shown as
its HTML subset.

Telegram counts a message's length in UTF-16 code units (4,096 at most, after its markup
is parsed), so an answer full of emoji is shorter in Python characters than the limit
suggests. The split runs on the Markdown and each piece is converted on its own, so no
tag is ever cut in half; model output is escaped before any tag is added, so nothing in
it can inject markup, and a piece Telegram still refuses is sent again as plain text.
"""

from __future__ import annotations

import html
import re

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


# -- Markdown to Telegram HTML ---------------------------------------------------------------

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", re.MULTILINE)


def to_telegram_html(markdown: str) -> str:
    """The common Markdown of model answers (fenced and inline code, ``**bold**``,
    ``~~strike~~``, ``[links](https://…)``, ``# headings``) as the HTML subset Telegram
    accepts. Everything is escaped first, so nothing in the text can become a tag of its
    own; code is set aside before the other rules run, so its content stays literal.
    A marker without its pair stays as typed."""
    escaped = html.escape(markdown, quote=False)
    kept: list[str] = []

    def keep(fragment: str) -> str:
        kept.append(fragment)
        return f"\x00{len(kept) - 1}\x00"

    text = _FENCE.sub(lambda m: keep(f"<pre>{m.group(1).rstrip()}</pre>"), escaped)
    text = _INLINE_CODE.sub(lambda m: keep(f"<code>{m.group(1)}</code>"), text)
    text = _LINK.sub(lambda m: keep(f'<a href="{m.group(2).replace(chr(34), "&quot;")}">{m.group(1)}</a>'), text)
    text = _HEADING.sub(lambda m: f"<b>{m.group(1)}</b>", text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1)}</b>", text)
    text = _STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], text)

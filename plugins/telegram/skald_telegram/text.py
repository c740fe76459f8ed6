"""Answers as messages Telegram accepts: split at its length limit, Markdown shown as
its HTML subset.

Telegram counts a message's length in UTF-16 code units (4,096 at most, after its markup
is parsed), so an answer full of emoji is shorter in Python characters than the limit
suggests. The split runs on the Markdown and each piece is converted on its own, so no
tag is ever cut in half (a fenced code block cut in two is closed at the end of one piece
and opened again at the start of the next: ``split_markdown``); model output is escaped before any tag is added, so nothing in
it can inject markup, and a piece Telegram still refuses is sent again as plain text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

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


def _cut(text: str, limit: int) -> int:
    """Where a piece of at most ``limit`` UTF-16 units ends: at a paragraph break, else
    a line break, else a space, as late as possible (never in the first half of the
    piece), else hard. ``len(text)`` when it all fits."""
    size = _fits(text, limit)
    if size == len(text):
        return size
    window = text[:size]
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at >= size // 2 and at > 0:
            return at
    return max(1, size)


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Pieces of at most ``limit`` UTF-16 units, cut as ``_cut`` says. Blank pieces are
    dropped; nothing else is lost but the whitespace at a cut. For plain text: a
    Markdown answer is split by ``split_markdown``."""
    pieces: list[str] = []
    rest = text.strip()
    while rest:
        cut = _cut(rest, limit)
        piece = rest[:cut].rstrip()
        if piece:
            pieces.append(piece)
        rest = rest[cut:].lstrip()
    return pieces


#: A sentence's end: its mark, any closing quote or bracket, then a space or line break.
_SENTENCE_END = re.compile(r"[.!?…。！？][\"')\]»”’]*\s")


def first_part(text: str, limit: int) -> str:
    """The beginning of ``text`` that fits ``limit`` characters, for a voice note of an
    answer longer than the host reads aloud: cut at a paragraph break, else after a
    sentence, else at a line break or a space (never in the first half), else hard.
    The whole text when it fits. Python characters, as the host counts them (not
    Telegram's UTF-16 units)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    window = text[: limit + 1]  # a break right after the limit still ends the part
    half = limit // 2
    at = window.rfind("\n\n")
    if at >= half:
        return text[:at].rstrip()
    ends = [match.end() for match in _SENTENCE_END.finditer(window)]
    if ends and ends[-1] > half:
        return text[: ends[-1]].rstrip()
    for separator in ("\n", " "):
        at = window.rfind(separator)
        if at >= half:
            return text[:at].rstrip()
    return text[:limit]


def opening_words(text: str, size: int = 40) -> str:
    """The first words of an answer, flat and without Markdown marks, at most about
    ``size`` characters: names which answer a line about it means."""
    words = re.sub(r"[*_`#>|~]", "", text).split()
    out = ""
    for word in words:
        if out and len(out) + 1 + len(word) > size:
            break
        out = f"{out} {word}" if out else word
    return out[: size * 2]


@dataclass(frozen=True)
class _Fence:
    opener: str  # the fence's first line as written: ```python
    closer: str  # what closes it: the same run of backticks or tildes
    start: int  # where its first line starts in the text
    content: int  # where its first line ends (its content starts after)
    closing: int  # where its closing line starts; the text's length when it is never closed
    end: int  # where its closing line ends; the text's length when it is never closed


def _fences(text: str) -> list[_Fence]:
    """The fenced code blocks at the top level of ``text``, as markdown-it reads them
    (a fence in a list or a quote is left alone: reopening it would lose its container)."""
    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    lines = text.split("\n")
    found = []
    for token in _MD.parse(text):
        if token.type != "fence" or token.level != 0 or not token.map:
            continue
        first, last = token.map
        marker = token.markup
        closing = lines[last - 1].strip() if last - 1 > first else ""
        closed = bool(closing) and set(closing) == {marker[0]} and len(closing) >= len(marker)
        closing_at, end = (starts[last - 1], starts[last] - 1) if closed else (len(text), len(text))
        found.append(_Fence(lines[first].rstrip(), marker, starts[first], starts[first] + len(lines[first]), closing_at, end))
    return found


def _open_at(fences: list[_Fence], cut: int) -> _Fence | None:
    """The fence a piece ending at ``cut`` would leave open."""
    return next((f for f in fences if f.start < cut < f.end), None)


def split_markdown(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """``split_message`` for Markdown, aware of fenced code blocks: each piece is
    converted to Telegram HTML on its own (``to_telegram_html``), so a piece that ends
    inside a fence closes it, and the next piece opens it again with the same fence and
    info string. Else the rest of the code would lose its block, and the prose after
    the block's end (whose closing fence would then open a new one) would become code.
    Inside a block the next piece keeps the code's indentation."""
    pieces: list[str] = []
    rest = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    while rest:
        if utf16_len(rest) <= limit:
            pieces.append(rest)
            break
        # A fence line too long to repeat in every piece (never in practice) is not reopened.
        fences = [f for f in _fences(rest) if utf16_len(f.opener) + utf16_len(f.closer) + 2 <= limit // 8]
        cut = _cut(rest, limit)
        fence = _open_at(fences, cut)
        if fence is not None:  # room for the closing line
            cut = _cut(rest, limit - utf16_len(fence.closer) - 1)
            fence = _open_at(fences, cut)
        if fence is not None and cut <= fence.content and fence.start > 0:
            cut, fence = fence.start, None  # not even one line of its code fits: it starts the next piece
        piece = rest[:cut].rstrip()
        if fence is not None:
            piece = f"{piece}\n{fence.closer}"
            if rest[cut:fence.closing].strip():
                rest = f"{fence.opener}\n{rest[cut:].lstrip(chr(10))}"
            else:  # only its closing line was left: nothing to reopen
                rest = rest[fence.end:].lstrip()
        else:
            rest = rest[cut:].lstrip()
        if piece.strip():
            pieces.append(piece)
    return pieces


# -- Markdown to Telegram HTML ---------------------------------------------------------------
#
# markdown-it-py (CommonMark, maintained by the Executable Books project) parses; this
# module only maps its token stream to the tag subset Telegram accepts. The parser's
# open/close tokens are balanced by construction, and every tag written here is closed
# by its own close token, so the output is well nested for any input (the crossed
# ``**bold ~~x** y~~`` of issue 25 parses to bold with literal tildes). Raw HTML in the
# text is disabled in the parser, so it stays text and is escaped like all text.

from markdown_it import MarkdownIt  # noqa: E402

_MD = MarkdownIt("commonmark", {"html": False}).enable("strikethrough")
_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}
_LINK_SCHEMES = ("http://", "https://", "mailto:", "tg://")
#: A fence's info word that can name a language in a class attribute (python, c++, c#,
#: objective-c, shell-session); anything else leaves the block without one.
_LANGUAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+#.-]{0,31}")


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _inline(children: list, out: list[str]) -> None:
    links: list[bool] = []
    for token in children:
        kind = token.type
        if kind == "text":
            out.append(_escape(token.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            out.append(f"<code>{_escape(token.content)}</code>")
        elif kind.endswith("_open") and kind[:-5] in _INLINE_TAGS:
            out.append(f"<{_INLINE_TAGS[kind[:-5]]}>")
        elif kind.endswith("_close") and kind[:-6] in _INLINE_TAGS:
            out.append(f"</{_INLINE_TAGS[kind[:-6]]}>")
        elif kind == "link_open":
            href = str(token.attrGet("href") or "")
            keep = href.lower().startswith(_LINK_SCHEMES)
            links.append(keep)
            if keep:
                out.append(f'<a href="{html.escape(href, quote=True)}">')
        elif kind == "link_close":
            if links and links.pop():
                out.append("</a>")
        elif kind == "image":  # Telegram shows no inline image: its description stays
            out.append(_escape(token.content))
        else:  # html_inline (as text: raw HTML is off), anything newer: its source
            out.append(_escape(token.content))


def to_telegram_html(markdown: str) -> str:
    """Markdown as the HTML subset Telegram accepts: ``**bold**``, ``*italic*``,
    ``~~strike~~``, inline and fenced code, http(s)/mailto links, headings (bold),
    lists (``•`` and numbers), block quotes and rules. Blocks keep the blank lines of
    the source between them; everything that is not markup is escaped, so nothing in
    the text can become a tag of its own; a marker without its pair stays as typed."""
    out: list[str] = []
    lists: list[list[Any]] = []  # [ordered?, next number] per open list
    quote_depth = 0
    last_line: int | None = None
    first_in_item = False
    lines = markdown.splitlines()
    for token in _MD.parse(markdown):
        kind = token.type
        if token.map and token.nesting >= 0 and token.level == 0:
            if last_line is not None:
                blank = token.map[0] > last_line or (0 < token.map[0] <= len(lines) and not lines[token.map[0] - 1].strip())
                out.append("\n\n" if blank else "\n")
            last_line = token.map[1]
        if kind in ("bullet_list_open", "ordered_list_open"):
            start = token.attrGet("start")
            lists.append([kind == "ordered_list_open", int(start) if start is not None else 1])
            if len(lists) > 1:  # a list inside an item starts on the item's next line
                out.append("\n")
                first_in_item = True
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop()
        elif kind == "list_item_open":
            if not first_in_item and out and not out[-1].endswith("\n"):
                out.append("\n")
            ordered, number = lists[-1]
            marker = f"{token.info or number}{token.markup} " if ordered else "• "
            lists[-1][1] = number + 1
            out.append("  " * (len(lists) - 1) + _escape(marker))
            first_in_item = True
        elif kind == "list_item_close":
            first_in_item = False
        elif kind == "paragraph_open":
            if lists and not first_in_item and not token.hidden:
                out.append("\n")
            first_in_item = False
        elif kind == "heading_open":
            out.append("<b>")
        elif kind == "heading_close":
            out.append("</b>")
        elif kind == "blockquote_open":
            quote_depth += 1
            if quote_depth == 1:  # Telegram nests no quotes: inner ones are just text
                out.append("<blockquote>")
        elif kind == "blockquote_close":
            quote_depth -= 1
            if quote_depth == 0:
                while out and out[-1] == "\n":
                    out.pop()
                out.append("</blockquote>")
        elif kind in ("fence", "code_block"):
            if lists and out and not out[-1].endswith("\n"):
                out.append("\n")
            # The fence's language as Telegram's code class, so the code is shown as
            # that language's (and a block split in two keeps it in both pieces).
            language = (token.info or "").split(maxsplit=1)[0] if kind == "fence" and (token.info or "").strip() else ""
            if language and _LANGUAGE.fullmatch(language):
                out.append(f'<pre><code class="language-{language}">{_escape(token.content.rstrip())}</code></pre>')
            else:
                out.append(f"<pre>{_escape(token.content.rstrip())}</pre>")
        elif kind == "hr":
            out.append("———")
        elif kind == "inline":
            _inline(token.children or [], out)
        elif kind == "html_block":
            out.append(_escape(token.content.rstrip("\n")))
        if quote_depth and kind == "paragraph_close":
            out.append("\n")
    return "".join(out).strip()

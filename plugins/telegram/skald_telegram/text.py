"""Answers as messages Telegram accepts: split at its length limit, Markdown shown as
its HTML subset.

Telegram counts a message's length in UTF-16 code units (4,096 at most, after its markup
is parsed), so an answer full of emoji is shorter in Python characters than the limit
suggests. The split runs on the Markdown and each piece is converted on its own, so no
tag is ever cut in half (a fenced code block cut in two is closed at the end of one piece
and opened again at the start of the next: ``split_markdown``); model output is escaped before any tag is added, so nothing in
it can inject markup, and a piece Telegram still refuses is sent again as plain text.
Telegram has no tables and draws no formulas: a table is a monospace block with its
columns lined up (written as a fence before the split, so it is measured as sent and cut
like code), TeX its source in monospace.
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
    rest = _tables_as_fences(text.replace("\r\n", "\n").replace("\r", "\n")).strip()
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

import unicodedata  # noqa: E402

from markdown_it import MarkdownIt  # noqa: E402

# -- math: the web's delimiters (web/lib/markdown.js), so the same text is math on both ----
#
# Telegram draws no formula: TeX is shown as its source in monospace (``<code>`` inline,
# ``<pre>`` for a display block), so it reads as a formula and not as prose with stray
# dollars and backslashes. What counts as math follows the web's rules exactly: "costs
# $5 and $10" is no formula (no space inside the dollars, no digit right after the
# closing one), and a dollar amount stays text on both.

_MATH_DISPLAY_INLINE = re.compile(r"\$\$(?!\$)((?:\\.|[^\\$])+?)\$\$(?!\$)")
_MATH_INLINE = re.compile(r"\$(?!\s)((?:\\.|[^\\\n$])+?)(?<!\s)\$(?!\d)")
_MATH_PAREN = re.compile(r"\\\(((?:\\.|[^\\\n])+?)\\\)")
_MATH_BLOCK = re.compile(r" {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n|$)")


def _math_inline(state: Any, silent: bool) -> bool:
    """``$x$``, ``\\(x\\)`` and ``$$x$$`` inside a line. Runs before the escape rule,
    which would otherwise read ``\\(`` as an escaped bracket, as marked does not."""
    if state.src[state.pos] not in "$\\":
        return False
    rest = state.src[state.pos:state.posMax]
    match = _MATH_DISPLAY_INLINE.match(rest)
    if match is None or not match.group(1).strip():
        match = _MATH_INLINE.match(rest) or _MATH_PAREN.match(rest)
    if match is None:
        return False
    if not silent:
        token = state.push("math_inline", "code", 0)
        token.content = match.group(1).strip()
        token.markup = match.group(0)[:2]
    state.pos += len(match.group(0))
    return True


def _math_block(state: Any, start_line: int, end_line: int, silent: bool) -> bool:
    """``$$ … $$`` and ``\\[ … \\]`` starting a line (at most three spaces in), over as
    many lines as it takes; it may interrupt a paragraph, as on the web."""
    if state.sCount[start_line] - state.blkIndent >= 4:
        return False
    first = state.src[state.bMarks[start_line] + state.tShift[start_line]:state.eMarks[start_line]]
    if not first.startswith(("$$", "\\[")):
        return False
    lines = [state.src[state.bMarks[line] + state.tShift[line]:state.eMarks[line]] for line in range(start_line, end_line)]
    match = _MATH_BLOCK.match("\n".join(lines))
    if match is None:
        return False
    if silent:
        return True
    used = match.group(0).rstrip("\n").count("\n") + 1
    token = state.push("math_block", "pre", 0)
    token.content = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
    token.map = [start_line, start_line + used]
    token.block = True
    state.line = start_line + used
    return True


_MD = MarkdownIt("commonmark", {"html": False}).enable(["strikethrough", "table"])
_MD.inline.ruler.before("escape", "math_inline", _math_inline)
_MD.block.ruler.before("code", "math_block", _math_block, {"alt": ["paragraph", "reference", "blockquote", "list"]})
_INLINE_TAGS = {"strong": "b", "em": "i", "s": "s"}
_LINK_SCHEMES = ("http://", "https://", "mailto:", "tg://")
#: A fence's info word that can name a language in a class attribute (python, c++, c#,
#: objective-c, shell-session); anything else leaves the block without one.
_LANGUAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+#.-]{0,31}")


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


# -- tables: a monospace block with its columns lined up ------------------------------------
#
# Telegram has no table and a proportional font: a Markdown table arrived as rows of
# pipes and dashes that line up nowhere. It becomes a ``<pre>`` block whose columns are
# padded to line up, each cell's markup flattened to its text. A phone shows about 40
# monospace characters a line and wraps the rest, which cuts every row in two: a cell
# too long for its share of ``TABLE_WIDTH`` wraps inside its column, and a table with
# too many columns for that becomes one block of "header: value" lines per row.

#: The widest a table's lines are made (columns narrowed, cells wrapped, to fit).
TABLE_WIDTH = 60
#: The narrowest a column is made to fit: narrower, and the table is shown row by row.
TABLE_COLUMN_MIN = 8
_COLUMN_GAP = " │ "


def _width(text: str) -> int:
    """Monospace columns ``text`` takes: East Asian wide characters two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns: at spaces, a longer word cut hard."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        while _width(word) > width:
            if line:
                lines.append(line)
                line = ""
            cut = 1
            while cut < len(word) and _width(word[: cut + 1]) <= width:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        if line and _width(line) + 1 + _width(word) <= width:
            line = f"{line} {word}"
        else:
            if line:
                lines.append(line)
            line = word
    if line or not lines:
        lines.append(line)
    return lines


def _pad(text: str, width: int, align: str) -> str:
    room = max(0, width - _width(text))
    if align == "right":
        return " " * room + text
    if align == "center":
        return " " * (room // 2) + text + " " * (room - room // 2)
    return text + " " * room


def _plain(children: list) -> str:
    """A cell's inline tokens as the text they show: marks dropped, code and TeX as written."""
    out = []
    for token in children:
        if token.type in ("softbreak", "hardbreak"):
            out.append(" ")
        elif token.type in ("text", "code_inline", "math_inline", "image", "html_inline", "entity"):
            out.append(token.content)
    return " ".join("".join(out).split())


def _table_text(rows: list[list[str]], aligns: list[str]) -> str:
    """A table's rows (the header first) as monospace lines that line up: see above."""
    count = max(len(row) for row in rows)
    rows = [row + [""] * (count - len(row)) for row in rows]
    aligns = aligns + ["left"] * (count - len(aligns))
    widths = [max(1, max(_width(row[column]) for row in rows)) for column in range(count)]
    room = TABLE_WIDTH - _width(_COLUMN_GAP) * (count - 1)
    while sum(widths) > room:
        widest = max(range(count), key=lambda column: widths[column])
        if widths[widest] <= TABLE_COLUMN_MIN:
            break
        widths[widest] -= 1
    if sum(widths) > room:  # too many columns to line up on a phone: one block per row
        header, blocks = rows[0], []
        for row in rows[1:]:
            blocks.append("\n".join(f"{name}: {value}" if name else value for name, value in zip(header, row) if name or value))
        return "\n\n".join(blocks) if blocks else " · ".join(header)
    lines = []
    for index, row in enumerate(rows):
        cells = [_wrap(cell, width) for cell, width in zip(row, widths)]
        for line in range(max(len(cell) for cell in cells)):
            parts = [_pad(cell[line] if line < len(cell) else "", width, align) for cell, width, align in zip(cells, widths, aligns)]
            lines.append(_COLUMN_GAP.join(parts).rstrip())
        if index == 0:
            lines.append("─┼─".join("─" * width for width in widths))
    return "\n".join(lines)


def _table(tokens: Any) -> str:
    """The rest of a table's tokens (after ``table_open``, up to its ``table_close``) as
    ``_table_text``."""
    rows: list[list[str]] = []
    aligns: list[str] = []
    for token in tokens:
        if token.type == "table_close":
            break
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "th_open":
            style = str(token.attrGet("style") or "")
            aligns.append(style.partition("text-align:")[2].strip() or "left")
        elif token.type == "inline" and rows:
            rows[-1].append(_plain(token.children or []))
    return _table_text(rows, aligns) if rows else ""


def _tables_as_fences(text: str) -> str:
    """``text`` with each table at its top level written as a fenced block of its lined-up
    text, for ``split_markdown``: the padding makes a table longer than its source, so
    it is measured as sent, and a table longer than a message is cut and reopened as a
    code block is (a table's second half would lose its header and be pipes again)."""
    tokens = _MD.parse(text)
    if not any(token.type == "table_open" and token.level == 0 for token in tokens):
        return text
    lines = text.split("\n")
    stream = iter(tokens)
    replaced: list[tuple[int, int, str]] = []
    for token in stream:
        if token.type == "table_open" and token.level == 0 and token.map:
            body = _table(stream)
            run = max((len(m) for m in re.findall(r"`+", body)), default=0)
            fence = "`" * max(3, run + 1)
            replaced.append((token.map[0], token.map[1], f"{fence}\n{body}\n{fence}"))
    for first, last, block in reversed(replaced):
        lines[first:last] = [block]
    return "\n".join(lines)


def _inline(children: list, out: list[str]) -> None:
    links: list[bool] = []
    for token in children:
        kind = token.type
        if kind == "text":
            out.append(_escape(token.content))
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind in ("code_inline", "math_inline"):
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
    tokens = iter(_MD.parse(markdown))
    for token in tokens:
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
        elif kind == "table_open":
            if lists and out and not out[-1].endswith("\n"):
                out.append("\n")
            out.append(f"<pre>{_escape(_table(tokens))}</pre>")
        elif kind == "math_block":
            out.append(f"<pre>{_escape(token.content)}</pre>")
        elif kind == "hr":
            out.append("———")
        elif kind == "inline":
            _inline(token.children or [], out)
        elif kind == "html_block":
            out.append(_escape(token.content.rstrip("\n")))
        if quote_depth and kind == "paragraph_close":
            out.append("\n")
    return "".join(out).strip()

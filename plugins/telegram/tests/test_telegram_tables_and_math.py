"""Tables and math in an answer, as Telegram can show them: a table as a monospace block
whose columns line up (it arrived as raw pipes and dashes in a proportional font), TeX
as its source in monospace (it was mixed into the prose), and dollar amounts as text,
by the web's rules (web/lib/markdown.js)."""

from __future__ import annotations

import html

from skald_telegram.text import MESSAGE_LIMIT, split_markdown, to_telegram_html, utf16_len
from telegram_standin import TelegramHtml

TABLE = """Prices:

| Fruit | **Price** | Note |
|-------|----------:|------|
| Äpfel | 5 | `cheap` & <good> |
| 東京 | 10 | [link](https://e.org) |
"""

#: The widest a table's lines may be (``text.TABLE_WIDTH``): wider, a phone wraps each row.
TABLE_WIDTH = 60


def pre_blocks(markup: str) -> list[str]:
    blocks = []
    for part in markup.split("<pre>")[1:]:
        blocks.append(html.unescape(part.split("</pre>")[0]))
    return blocks


def test_a_table_is_a_monospace_block_with_its_columns_lined_up():
    markup = to_telegram_html(TABLE)
    assert markup.startswith("Prices:\n\n<pre>") and markup.endswith("</pre>"), markup
    assert "|" not in markup and "---" not in markup and "**" not in markup and "<b>" not in markup
    assert "&lt;good&gt;" in markup and "&amp;" in markup  # the cells' text escaped
    assert TelegramHtml.check(markup)[0] is None
    lines = pre_blocks(markup)[0].split("\n")
    assert lines == [
        "Fruit │ Price │ Note",
        "──────┼───────┼───────────────",
        "Äpfel │     5 │ cheap & <good>",
        "東京  │    10 │ link",  # a wide character takes two columns
    ]


def test_a_wide_table_wraps_in_its_columns_or_goes_row_by_row():
    long = "| Step | What to do |\n|---|---|\n| 1 | " + "mix the flour with the water " * 6 + "|\n| 2 | bake |"
    lines = pre_blocks(to_telegram_html(long))[0].split("\n")
    assert all(len(line) <= TABLE_WIDTH for line in lines), lines
    assert lines[2].startswith("1    │ mix the flour") and lines[3].startswith("     │ ")  # wrapped inside its column
    assert " ".join(line.split("│")[1].strip() for line in lines[2:-1]) == ("mix the flour with the water " * 6).strip()

    many = "| " + " | ".join(f"h{i}" for i in range(10)) + " |\n|" + "---|" * 10 + "\n| " + " | ".join(f"value {i}" for i in range(10)) + " |"
    block = pre_blocks(to_telegram_html(many))[0]
    assert block.split("\n") == [f"h{i}: value {i}" for i in range(10)]


def test_a_table_longer_than_a_message_is_a_block_in_each_piece():
    rows = "\n".join(f"| row {i} | {'x' * 40} |" for i in range(200))
    pieces = split_markdown(f"Intro.\n\n| Name | Value |\n|---|---|\n{rows}\n\nThe end.")
    assert len(pieces) > 1
    for piece in pieces:
        markup = to_telegram_html(piece)
        assert TelegramHtml.check(markup)[0] is None
        assert "|" not in markup, markup[:200]  # no half of it falls back to pipes
        assert utf16_len(TelegramHtml.check(markup)[1]) <= MESSAGE_LIMIT
    shown = "".join(pre_blocks(to_telegram_html(piece))[0] for piece in pieces)
    assert all(f"row {i} " in shown for i in range(200))
    assert to_telegram_html(pieces[-1]).endswith("The end.")


def test_math_is_monospace_source_and_dollar_amounts_stay_text():
    assert to_telegram_html("It costs $5 and $10.") == "It costs $5 and $10."
    assert to_telegram_html("Between $ 5 $ and $6") == "Between $ 5 $ and $6"
    assert to_telegram_html("So $E=mc^2$, and \\(a<b\\) or $$\\sum_i x_i$$ here.") == (
        "So <code>E=mc^2</code>, and <code>a&lt;b</code> or <code>\\sum_i x_i</code> here."
    )
    assert to_telegram_html("The integral:\n\n$$\n\\int_0^1 x^2\\,dx = \\frac{1}{3}\n$$\n\nDone.") == (
        "The integral:\n\n<pre>\\int_0^1 x^2\\,dx = \\frac{1}{3}</pre>\n\nDone."
    )
    assert to_telegram_html("\\[ a^2 + b^2 \\]") == "<pre>a^2 + b^2</pre>"
    assert to_telegram_html("`$x$` stays code, \\$x\\$ stays text") == "<code>$x$</code> stays code, $x$ stays text"
    assert to_telegram_html("$x_1$ and *$y$*") == "<code>x_1</code> and <i><code>y</code></i>"

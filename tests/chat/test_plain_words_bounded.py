"""A conversation's title and a search snippet are Markdown read as words
(``plain_words``), on the event loop for a title. Some texts made that cost grow with
the square or worse of their length: 5 KB of backtick runs of 1, 2, 3… held every
member's requests for 7.6 s (a load probe), 100 KB would have held them for an hour,
and a line of "[" cost seconds. The work is now bounded whatever the member sends."""

from __future__ import annotations

import subprocess
import sys

import pytest

from skald_host.core.agent.store import plain_words, title_from

TICKS = "".join("`" * k + "a" for k in range(1, 1000) if sum(range(k)) < 100_000)[:100_000]
HOSTILE = {"backtick runs": TICKS, "brackets": "[" * 100_000, "images": "![" * 50_000, "escapes": "\\" * 100_000}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_100_kb_message_is_read_in_bounded_time(name):
    # In a child process the test can stop: the old code did not end for minutes. The
    # limit is thousands of times what the bounded code takes, not a speed check.
    script = (
        "from skald_host.core.agent.store import plain_words, title_from\n"
        f"from tests.chat.test_plain_words_bounded import HOSTILE\n"
        f"text = HOSTILE[{name!r}]\n"
        "plain_words(text); title_from(text)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_words_read_are_still_the_words_a_reader_sees():
    assert plain_words("use `a` and ``b`c`` and \\* and [the docs](http://x) ![img](y) [cut") == (
        "use a and b`c and * and the docs img cut"
    )
    # A run with no closing run of its length is text; its backticks go, its words stay.
    assert plain_words("```` b and `c`") == "b and c"
    assert title_from("# Hello **world**, `x_y` here\n\nmore") == "Hello world, x_y here more"
    assert title_from("`" * 5000) == "`" * 60  # nothing but marks: the text as written
    assert len(title_from(TICKS)) <= 60

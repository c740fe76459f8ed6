"""The bot token in no log line in any encoding, from any logger (issue 25, finding 2),
and Markdown that always becomes well-nested Telegram HTML (finding 4)."""

from __future__ import annotations

import logging
import traceback
from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from skald_host.testing import Reply, ToolCall
from skald_telegram import logsafe
from skald_telegram.text import split_message, to_telegram_html
from telegram_standin import TOKEN, TelegramHtml
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running

#: Every form in which the token (or its secret half) could reach a log line.
TOKEN_FORMS = (
    TOKEN,
    quote(TOKEN, safe=""),  # 4242424242%3AAAE-...
    quote(TOKEN, safe="").lower(),
    quote(quote(TOKEN, safe=""), safe=""),  # %253A
    TOKEN.split(":", 1)[1],  # the secret half alone
)


def log_lines(records: list[logging.LogRecord]) -> list[str]:
    lines = []
    for record in records:
        lines.append(record.getMessage())
        if record.exc_text:
            lines.append(record.exc_text)
        elif record.exc_info and record.exc_info[0] is not None:
            lines.append("".join(traceback.format_exception(*record.exc_info)))
    return lines


async def test_the_token_is_in_no_log_line_in_any_encoding(setup: Setup, caplog):
    caplog.set_level(logging.DEBUG)  # every logger at its most talkative: httpx, httpcore, the host's
    await running(setup)
    await paired_member(setup)
    # A file download (the Bot API's file URL), a flood wait, a button press, an answer.
    setup.api.add_file("doc-1", b"%PDF-1.4 a document")
    setup.model.script(MODEL, [Reply(tool_calls=[ToolCall("write_note", {"text": "x"})]), Reply("Read it.")])
    setup.api.flood["getFile"] = [1]
    setup.api.send(ALICE_CHAT, caption="Read this", document={"file_id": "doc-1", "file_name": "a.pdf"})
    card = await setup.api.wait_for(
        lambda: [c for c in setup.api.of("sendMessage", ALICE_CHAT) if c.params.get("reply_markup") and c.result], timeout=20
    )
    setup.api.press(ALICE_CHAT, card[0].result["message_id"], card[0].params["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
    await setup.api.wait_for(lambda: "Read it." in setup.api.shown(ALICE_CHAT), timeout=20, what="the answer")
    assert [c.method for c in setup.api.calls if c.method == "download"] == ["download"]
    # Any other library that logs a Bot API URL, encoded, while the bot runs.
    logging.getLogger("aiohttp.client").warning("GET %s failed", f"{setup.api.url}/bot{quote(TOKEN, safe='')}/getMe")
    try:
        raise RuntimeError(f"connection to {setup.api.url}/bot{TOKEN}/getMe reset")
    except RuntimeError:
        logging.getLogger("httpcore.connection").exception("a failure with the URL in its exception")
    await setup.enable(False)

    lines = log_lines(caplog.records)
    assert len(lines) > 20
    leaks = [(form, line) for line in lines for form in TOKEN_FORMS if form in line]
    assert leaks == []
    # The lines that carried the token are still there, masked: the download's included.
    assert any("/file/bot<bot-token>/documents/doc-1" in line for line in lines), "the download was not logged"
    assert any("/bot<bot-token>/getMe failed" in line for line in lines)
    assert any("/bot<bot-token>/getMe reset" in line for line in lines)


def test_redaction_covers_every_encoding_and_only_the_token():
    logsafe.guard(TOKEN)
    for form in TOKEN_FORMS:
        assert TOKEN.split(":", 1)[1] not in logsafe.redact(f"GET /bot{form}/x")
    assert logsafe.redact(f"/bot{TOKEN}/x") == "/bot<bot-token>/x"
    assert logsafe.redact(f"/bot{quote(TOKEN, safe='')}/x") == "/bot<bot-token>/x"
    assert logsafe.redact("nothing secret here: 4242424242") == "nothing secret here: 4242424242"


# -- the converter ----------------------------------------------------------------------------

FRAGMENTS = st.sampled_from([
    "**", "__", "*", "_", "~~", "`", "```", "```py\n", "\n```\n", "[", "]", "(", ")", "](https://e.org/a?b=1&c=2)",
    "](javascript:x)", "# ", "## ", "> ", ">> ", "- ", "* ", "1. ", "2) ", "    ", "\n", "\n\n", " ", "---\n",
    "a", "bold", "x y", "<b>", "</i>", "&", "&amp;", "<", "😀", "\\*", "![img](https://e.org/i.png)", "<https://e.org>",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(FRAGMENTS, max_size=40).map("".join))
def test_generated_markdown_always_yields_well_nested_telegram_html(markdown):
    html = to_telegram_html(markdown)
    error, _ = TelegramHtml.check(html)
    assert error is None, (markdown, html)
    for piece in split_message(markdown * 3, limit=60):  # pieces cut anywhere convert on their own
        error, _ = TelegramHtml.check(to_telegram_html(piece))
        assert error is None, (piece, to_telegram_html(piece))


def test_the_crossed_markers_of_the_issue_nest():
    assert to_telegram_html("**bold ~~x** y~~") == "<b>bold ~~x</b> y~~"
    assert TelegramHtml.check(to_telegram_html("~~a **b~~ c**"))[0] is None
    assert to_telegram_html("- one\n- **two**\n\n1. a") == "• one\n• <b>two</b>\n\n1. a"

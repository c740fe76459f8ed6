"""A conversation exported as a file: Markdown in the reader's language, JSON with its
structure (attachments a list, not text)."""

from __future__ import annotations

import datetime as dt
import json
import re

from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, new_conversation


async def test_the_markdown_export_speaks_the_readers_language_and_the_json_keeps_lists(chat):
    await configure_models(chat.admin, chat.server)
    bert = await chat.host.member("bert", locale="de")
    chat.server.script(MODEL_A, [Reply("Hallo Bert.")])
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert, title="Gruß")
        await sock.send(cid, "Hallo!")
        await sock.turn(cid)
    markdown = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "md"})).text
    assert markdown.startswith("# Gruß\n\nAus Skald exportiert · ")
    assert "## Du\n\nHallo!" in markdown and "## Assistent\n\nHallo Bert." in markdown
    assert "Exported" not in markdown and "## You" not in markdown
    exported = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "json"})).json()
    assert [m["attachments"] for m in exported["messages"]] == [[], []]

    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        other = await new_conversation(alice)
        chat.server.script(MODEL_A, [Reply("Hi.")])
        await sock.send(other, "Hi")
        await sock.turn(other)
    english = (await alice.get(f"/api/conversations/{other}/export")).text
    stamp = re.search(r"Exported from Skald · (\S+)", english).group(1)
    assert abs((dt.datetime.now(dt.UTC) - dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)).total_seconds()) < 120
    assert "Exported from Skald · " in english and "## You\n\nHi" in english and "## Assistant\n\nHi." in english


def test_a_code_block_left_open_is_closed_and_a_result_with_fences_cannot_break_out():
    """An answer stopped inside a code block, or a tool result holding ``` lines, turned
    every later section of the Markdown export into code (newcomer walk)."""
    from skald_host.web.routes.chat import closed_fences, fence

    stopped = "Here:\n\n```python\nprint('line"
    assert closed_fences(stopped) == stopped + "\n```"
    whole = "```\na\n```\ntext\n~~~~\nx\n~~~~"
    assert closed_fences(whole) == whole
    assert closed_fences("````md\n```\ninner\n```") == "````md\n```\ninner\n```\n````"
    assert fence("plain") == "```" and fence("a ``` b") == "````" and fence("`````x") == "``````"


async def test_the_markdown_export_lists_the_files_a_message_carried(chat):
    await configure_models(chat.admin, chat.server)
    bert = await chat.host.member("bert", locale="de")
    cid = await new_conversation(bert, title="Rechnung")
    uploaded = await bert.post(f"/api/conversations/{cid}/uploads", content=b"total: 12 EUR\n",
                               headers={"X-Filename": "rechnung.txt", "Content-Type": "text/plain"})
    assert uploaded.status_code == 201, uploaded.text
    path = uploaded.json()["path"]
    chat.server.script(MODEL_A, [Reply("12 Euro.")])
    async with ChatSocket(bert) as sock:
        await sock.command(type="send", conversation_id=cid, text="Wie viel?", attachments=[path])
        await sock.turn(cid)
    markdown = (await bert.get(f"/api/conversations/{cid}/export")).text
    assert f"## Du\n\nWie viel?\n\nAngehängte Dateien:\n\n- `rechnung.txt` (`{path}`)\n" in markdown, markdown


def test_a_file_name_with_backticks_stays_inline_code():
    from skald_host.web.routes.chat import code

    assert code("a.txt") == "`a.txt`" and code("a`b.txt") == "``a`b.txt``" and code("`x") == "`` `x ``"


async def test_the_markdown_export_says_the_hosts_own_results_in_the_readers_language(chat):
    """A declined call's result is the host's English line for the model ("the member
    declined."); the screen says it in the reader's language, and so does the export
    (a German member's export had the English line under "Werkzeugaufruf … (Abgelehnt)")."""
    from skald_host.testing import ToolCall

    await configure_models(chat.admin, chat.server)
    bert = await chat.host.member("bert", locale="de")
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("write_note", {"text": "geheim"})]), Reply("Gut, nicht geschrieben.")])
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert)
        await sock.send(cid, "Schreib eine Notiz.")
        card = await sock.wait_event(cid, "approval_required")
        assert (await sock.approve(card["approval_id"], "deny"))["decision"] == "denied"
        await sock.turn(cid)
    markdown = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "md"})).text
    assert "Werkzeugaufruf `write_note` (Abgelehnt)" in markdown, markdown
    assert "Abgelehnt." in markdown.split("Werkzeugaufruf", 1)[1]
    assert "declined" not in markdown, markdown
    # The JSON export keeps what the model read.
    exported = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "json"})).json()
    [call] = [c for m in exported["messages"] for c in m["tool_calls"]]
    assert call["status"] == "denied" and "declined" in call["result"]


async def test_a_turns_tool_rounds_and_its_reply_are_one_assistant_section(chat):
    """Each tool round is a message of its own: the export wrote one "## Assistant" with
    an empty body per round and the reply under another (newcomer walk). One turn is one
    section: its tool calls in order, then the reply."""
    from skald_host.testing import ToolCall

    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("write_note", {"text": "first"})]),
        Reply(tool_calls=[ToolCall("write_note", {"text": "second"})]),
        Reply("Neither was written."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice, title="Notes")
        await sock.send(cid, "Write two notes.")
        for text in ("first", "second"):
            card = await sock.wait_event(cid, "approval_required", arguments=json.dumps({"text": text}))
            assert (await sock.approve(card["approval_id"], "deny"))["decision"] == "denied"
        await sock.turn(cid)
    rounds = (await alice.get(f"/api/conversations/{cid}/export", params={"format": "json"})).json()["messages"]
    assert [m["role"] for m in rounds] == ["user", "assistant", "assistant", "assistant"]  # three rounds stored

    markdown = (await alice.get(f"/api/conversations/{cid}/export")).text
    assert markdown.count("## Assistant") == 1, markdown
    turn = markdown.split("## You\n\nWrite two notes.\n\n## Assistant\n\n", 1)[1]
    assert turn.startswith("Tool call `write_note` (Denied)\n\n```json\n"), turn  # no empty paragraph first
    first, second, reply = turn.index('"first"'), turn.index('"second"'), turn.index("Neither was written.")
    assert first < second < reply, turn
    assert turn.rstrip().endswith("Neither was written."), turn
    assert "\n\n\n" not in markdown, markdown

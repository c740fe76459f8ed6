"""A conversation exported as a file: Markdown in the reader's language, JSON with its
structure (attachments a list, not text)."""

from __future__ import annotations

import json
import re

from skald_host.testing import Reply

from .support import MODEL_A, MODEL_B, PROBE, ChatSocket, configure_models, new_conversation


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
    # The export's moment in the reader's format, in UTC for a member with no zone set, named.
    stamp = re.search(r"Exported from Skald · (.+)", english).group(1)
    assert stamp.endswith(" (UTC)") and re.match(r"[A-Z][a-z]{2} \d{1,2}, \d{4}, ", stamp), stamp
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


async def test_the_hosts_notes_and_failures_are_exported_in_the_readers_language_in_the_screens_order(chat):
    """A German member's export had the host's notes and failures as stored, in English
    ("## Hinweis" over "model-a did not answer; trying model-b.", "## Assistent
    (Fehlgeschlagen)" over "The model could not answer (HTTP 401: …)"), and the fallback
    note after the answer it led to (its row is written after that answer's). The screen
    words them from their code and puts the note first: so does the export."""
    from skald_host.testing import ScriptedError

    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    bert = await chat.host.member("bert", locale="de")
    chat.server.script(MODEL_A, [ScriptedError(500), ScriptedError(401, "bad key", should_retry=False)])
    chat.server.script(MODEL_B, [Reply("Antwort von B.")])
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert, title="Ausfall")
        await sock.send(cid, "Erste Frage")
        await sock.turn(cid)
        await sock.send(cid, "Zweite Frage")
        await sock.turn(cid)
    markdown = (await bert.get(f"/api/conversations/{cid}/export")).text
    fallback = f"## Hinweis\n\n{MODEL_A} hat nicht geantwortet; versuche {MODEL_B}.\n\n"
    assert f"## Du\n\nErste Frage\n\n{fallback}## Assistent\n\nAntwort von B.\n\n" in markdown, markdown
    assert "## Du\n\nZweite Frage\n\n## Assistent (Fehlgeschlagen)\n\nDas Modell hat die Anfrage abgelehnt (HTTP 401: bad key).\n" in markdown, markdown
    assert "did not answer" not in markdown and "could not answer" not in markdown, markdown
    # The JSON export keeps what is stored: the note after its answer, in the host's English.
    stored = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "json"})).json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant", "note", "user", "assistant"]
    assert stored[2]["content"] == f"{MODEL_A} did not answer; trying {MODEL_B}." and stored[4]["content"].startswith("The model could not answer (HTTP 401")

    # An English reader's export of the same kind of conversation stays English.
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [ScriptedError(500)])
    chat.server.script(MODEL_B, [Reply("Answer from B.")])
    async with ChatSocket(alice) as sock:
        other = await new_conversation(alice, title="Outage")
        await sock.send(other, "A question")
        await sock.turn(other)
    english = (await alice.get(f"/api/conversations/{other}/export")).text
    assert f"## You\n\nA question\n\n## Note\n\n{MODEL_A} did not answer; trying {MODEL_B}.\n\n## Assistant\n\nAnswer from B." in english, english


async def test_the_note_of_an_answer_a_restart_cut_off_is_exported_in_the_readers_language(chat, skald):
    """The note recovery writes after an answer a server stop cut off ("An answer here was
    cut off …") was exported in English to a German member."""
    from skald_host.testing import Hang

    await configure_models(chat.admin, chat.server)
    bert = await chat.host.member("bert", locale="de")
    chat.server.script(MODEL_A, [Hang(text="eine halbe Antwort", token_delay=0.01)])
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert, title="Neustart")
        await sock.send(cid, "Erzähl.")
        await sock.wait_event(cid, "token", delta=" Antwort")
    await chat.host.stop()

    chat.server.script(MODEL_A, [Reply("Die ganze Antwort.")])
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    bert = await host.member("bert")
    async with ChatSocket(bert) as sock:
        await sock.wait_event(cid, "turn_finished")
    markdown = (await bert.get(f"/api/conversations/{cid}/export")).text
    assert ("## Assistent (Unterbrochen)\n\neine halbe Antwort\n\n"
            "## Hinweis\n\nEine Antwort hier wurde unterbrochen, bevor sie fertig war") in markdown, markdown
    assert "## Assistent\n\nDie ganze Antwort." in markdown and "cut off" not in markdown, markdown


async def test_the_export_draws_what_the_screen_draws_of_stored_reasons(chat):
    """As web/pages/chat-transcript.js draws them: an answer a stop cut before its first
    word is not shown and the note after it says the answer had not begun; a turn the
    member stopped unanswered is "not answered", not "failed"; a reader who is no admin
    gets a code's member wording; a code no bundle has keeps its stored text."""
    from skald_host.web.routes.chat import _markdown_export

    def row(id_: int, role: str, content: str = "", status: str = "complete", reason: dict | None = None) -> dict:
        return {"id": id_, "role": role, "content": content, "status": status, "reason": reason, "reasoning": "", "tool_calls": [], "variant": 0}

    strings = chat.host.core.strings
    messages = [
        row(1, "user", "Frage"),
        row(2, "assistant", status="interrupted"),
        row(3, "note", "An answer here was cut off ...", reason={"code": "answer_resumed", "values": {}}),
        row(4, "assistant", "Antwort"),
        row(5, "user", "Noch eine"),
        row(6, "assistant", "Not answered: ...", status="error", reason={"code": "stopped_unanswered", "values": {}}),
        row(7, "user", "Und?"),
        row(8, "assistant", "unreachable", status="error", reason={"code": "model_unreachable", "values": {"detail": "x"}}),
        row(9, "note", "A newer host's own words.", reason={"code": "no_such_code_anywhere", "values": {}}),
    ]
    member = _markdown_export({"title": "T"}, messages, strings, "de", admin=False)
    assert "## Du\n\nFrage\n\n## Hinweis\n\nDer Server wurde angehalten (oder deine Sitzung endete), bevor die Antwort begann" in member, member
    assert "## Assistent (Unterbrochen)" not in member, member
    assert f"## Assistent (Nicht beantwortet)\n\n{strings.translate('core.error.stopped_unanswered', 'de')}\n" in member, member
    assert f"## Assistent (Fehlgeschlagen)\n\n{strings.translate('core.error.model_unreachable.member', 'de')}\n" in member, member
    assert "## Hinweis\n\nA newer host's own words." in member, member
    admin = _markdown_export({"title": "T"}, messages, strings, "de", admin=True)
    assert strings.translate("core.error.model_unreachable", "de", detail="x") in admin, admin

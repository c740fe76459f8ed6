"""The export as a browser probe read it: a title's umlauts lost from the file name
("Rezept-K-sekuchen-Tipps.md"), a title in another script saved as "conversation",
the reasoning quoted without a label, the answer's headings at the document title's
level, and a JSON export that did not say which version was on screen."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, new_conversation

ANSWER = "# Plan\n\nFirst the soil.\n\n## Soil\n\nDig.\n\n```md\n# not a heading, code\n```\n\n####### seven marks: text"
#: What the export makes of ANSWER's headings: under "## Assistant", two levels down.
SHIFTED = "### Plan\n\nFirst the soil.\n\n#### Soil\n\nDig.\n\n```md\n# not a heading, code\n```\n\n####### seven marks: text"


def disposition_names(header: str) -> tuple[str, str | None]:
    """The ASCII ``filename`` and the decoded ``filename*`` (None without one)."""
    plain = re.fullmatch(r'attachment; filename="([^"\\\r\n]*)"(?:; filename\*=UTF-8\'\'([A-Za-z0-9%!#$&+.^_`|~-]+))?', header)
    assert plain, header
    return plain.group(1), unquote(plain.group(2)) if plain.group(2) else None


async def test_the_file_name_keeps_letters_of_any_script_with_an_ascii_fallback(chat):
    await configure_models(chat.admin, chat.server)
    rosa = await chat.host.member("rosa")
    cases = {
        'Rezept "Käsekuchen" & <Tipps>': ("Rezept-Kasekuchen-Tipps.md", "Rezept-Käsekuchen-Tipps.md"),
        "Große Straße": ("Grosse-Strasse.md", "Große-Straße.md"),
        "Привет, мир": ("conversation.md", "Привет-мир.md"),
        "日本語のメモ": ("conversation.md", "日本語のメモ.md"),
        "Plain title": ("Plain-title.md", None),
        "../../etc/passwd": ("etc-passwd.md", None),
    }
    for title, (ascii_name, utf8_name) in cases.items():
        cid = await new_conversation(rosa, title=title)
        response = await rosa.get(f"/api/conversations/{cid}/export")
        assert response.status_code == 200, response.text
        assert disposition_names(response.headers["content-disposition"]) == (ascii_name, utf8_name), title
        as_json = await rosa.get(f"/api/conversations/{cid}/export", params={"format": "json"})
        assert disposition_names(as_json.headers["content-disposition"])[0] == ascii_name[:-3] + ".json"


def test_the_header_stays_safe_and_bounded_whatever_the_title():
    from skald_host.web.routes.chat import FILE_STEM_CHARS, content_disposition, file_stem

    for title in ('a"b', "a\r\nSet-Cookie: x=1", "a/b\\c", "tab\there", "nul\x00", "bidi\u202etxt.exe", "zero\u200bwidth", "é" * 500, "", "...", "-"):
        stem = file_stem(title)
        assert 0 < len(stem) <= FILE_STEM_CHARS, (title, stem)
        header = content_disposition(f"{stem}.md")
        assert header.isascii() and not any(c in header for c in "\r\n\x00\\/"), (title, header)
        assert re.fullmatch(r'attachment; filename="[A-Za-z0-9._-]+"(; filename\*=UTF-8\'\'[A-Za-z0-9%._-]+)?', header), (title, header)
        assert len(header) < 1000
    assert file_stem("") == file_stem("...") == "conversation"
    assert file_stem("हिन्दी शीर्षक") == "हिन्दी-शीर्षक"  # a script's vowel signs stay with their letters


async def test_the_markdown_labels_the_reasoning_and_nests_the_answers_headings(chat):
    await configure_models(chat.admin, chat.server)
    chat.server.script(MODEL_A, [Reply(ANSWER, reasoning="Soil first.\n\n# My own heading")])
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice, title="Garden")
        await sock.send(cid, "# Make me a plan")
        await sock.turn(cid)
    markdown = (await alice.get(f"/api/conversations/{cid}/export")).text
    assert markdown.startswith("# Garden\n")
    assert "## You\n\n### Make me a plan\n" in markdown, markdown
    assert f"## Assistant\n\n> **Reasoning**\n>\n> Soil first.\n>\n> ### My own heading\n\n{SHIFTED}\n" in markdown, markdown
    # The outline: one "#" (the title), then the sections, the messages' own headings under them.
    levels = [len(m) for m in re.findall(r"(?m)^(#{1,6}) ", markdown.split("```md")[0])]
    assert levels == [1, 2, 3, 2, 3, 4], levels

    chat.server.script(MODEL_A, [Reply("Gut.", reasoning="Kurz.")])
    bert = await chat.host.member("bert", locale="de")
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert, title="Kurz")
        await sock.send(cid, "Hallo")
        await sock.turn(cid)
    german = (await bert.get(f"/api/conversations/{cid}/export")).text
    assert "## Assistent\n\n> **Gedankengang**\n>\n> Kurz.\n\nGut." in german, german


def test_only_atx_headings_outside_code_fences_move():
    from skald_host.web.routes.chat import shifted_headings

    assert shifted_headings(ANSWER) == SHIFTED
    assert shifted_headings("#hashtag\n\\# escaped\n    # indented code\n   # three spaces") == "#hashtag\n\\# escaped\n    # indented code\n   ### three spaces"
    assert shifted_headings("##### five\n###### six\n#") == "###### five\n###### six\n###"
    assert shifted_headings("~~~\n# in tildes\n~~~\n# after") == "~~~\n# in tildes\n~~~\n### after"


async def test_the_json_export_marks_the_messages_on_screen(chat):
    await configure_models(chat.admin, chat.server)
    chat.server.script(MODEL_A, [Reply("Elephants never forget."), Reply("Elephants are large.")])
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Tell me about elephants")
        await sock.turn(cid)
        assert (await alice.post(f"/api/conversations/{cid}/regenerate")).status_code == 202
        await sock.turn(cid)
    exported = (await alice.get(f"/api/conversations/{cid}/export", params={"format": "json"})).json()
    rows = [(m["role"], m["content"], m["current"]) for m in exported["messages"]]
    assert rows == [
        ("user", "Tell me about elephants", True),
        ("assistant", "Elephants never forget.", False),
        ("assistant", "Elephants are large.", True),
    ], rows
    # Only added: every field an older consumer reads is still there.
    for message in exported["messages"]:
        assert {"id", "role", "content", "reasoning", "status", "model", "attachments", "variant", "branch_point", "created_at", "tool_calls"} <= set(message)
    assert json.dumps(exported, ensure_ascii=False)
    shown = await alice.get(f"/api/conversations/{cid}")
    assert [m["id"] for m in exported["messages"] if m["current"]] == [m["id"] for m in shown.json()["messages"] if not m.get("variant")]

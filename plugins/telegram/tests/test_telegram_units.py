"""The plugin's pure pieces: splitting long answers, parsing untrusted updates, and the
pairing codes' shape."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import skald_telegram
from skald_telegram.pairing import ALPHABET, CODE_LENGTH, display, new_code, normalise
from skald_telegram.text import MESSAGE_LIMIT, split_message, to_telegram_html, utf16_len
from skald_telegram.updates import ButtonPress, Ignored, Inbound, parse_update

PACKAGE = Path(skald_telegram.__file__).parent


def test_a_10000_character_reply_is_three_messages_none_over_the_limit():
    paragraph = ("word " * 19 + "end.\n") * 4 + "\n"  # 401 characters a paragraph
    text = (paragraph * 25)[:10_000]
    pieces = split_message(text)
    assert len(pieces) == 3
    assert all(0 < len(p) <= MESSAGE_LIMIT for p in pieces)
    assert "".join(pieces).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")
    assert all(p.endswith("end.") for p in pieces[:-1])  # cut at a line break, not mid-word


def test_text_without_breaks_is_cut_hard_and_emoji_count_twice():
    assert [len(p) for p in split_message("x" * 10_000)] == [4096, 4096, 1808]
    emoji = "😀" * 3000  # 6000 UTF-16 units
    pieces = split_message(emoji)
    assert [utf16_len(p) for p in pieces] == [4096, 1904]
    assert "".join(pieces) == emoji
    assert split_message("  \n ") == [] and split_message("short") == ["short"]


def test_markdown_becomes_telegram_html_and_nothing_in_the_text_becomes_a_tag():
    assert to_telegram_html("**Done**: `x < y` and ~~old~~") == "<b>Done</b>: <code>x &lt; y</code> and <s>old</s>"
    assert to_telegram_html("# Title\nSee [docs](https://e.org/?a=1&b=\"2\")") == (
        '<b>Title</b>\nSee <a href="https://e.org/?a=1&amp;b=%222%22">docs</a>'
    )
    assert to_telegram_html("```py\nif a < b and **c**:\n    pass\n```") == (
        '<pre><code class="language-py">if a &lt; b and **c**:\n    pass</code></pre>'  # the fence's language kept
    )
    assert to_telegram_html("```\nplain\n```") == "<pre>plain</pre>"
    assert to_telegram_html('```"><b>x\ncode\n```') == "<pre>code</pre>"  # no language: nothing of it in a tag
    assert to_telegram_html("<script>alert(1)</script> & <b>") == "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;"
    assert to_telegram_html("a ** b and `unclosed") == "a ** b and `unclosed"  # unpaired markers stay as typed
    assert to_telegram_html("[x](javascript:alert(1))") == "[x](javascript:alert(1))"  # only http(s) links


def test_malformed_updates_parse_to_nothing_or_ignored_never_raise():
    for raw in (None, [], "x", {}, {"update_id": "7"}, {"message": {"chat": {"id": 1}}}):
        assert parse_update(raw) is None
    for raw in (
        {"update_id": 1, "message": {"text": "no chat"}},
        {"update_id": 2, "message": {"chat": {"id": "not a number"}}},
        {"update_id": 3, "edited_message": {"chat": {"id": 1, "type": "private"}}},
        {"update_id": 4, "callback_query": {"data": "approve:x"}},
        {"update_id": 5, "message": "a string"},
    ):
        assert isinstance(parse_update(raw), (Ignored, Inbound)), raw
    weird = parse_update({"update_id": 6, "message": {"chat": {"id": 9, "type": "private"}, "photo": "nope", "voice": {"no": "id"}}})
    assert isinstance(weird, Inbound) and weird.files == () and weird.unsupported and weird.from_id is None


def test_the_largest_photo_and_documents_and_voice_notes_become_files():
    update = {
        "update_id": 10,
        "message": {
            "chat": {"id": 9, "type": "private", "first_name": "Al"},
            "from": {"id": 9, "language_code": "de"},
            "caption": "look",
            "photo": [
                {"file_id": "small", "width": 90, "height": 90},
                {"file_id": "big", "width": 1280, "height": 960, "file_size": 1000},
                {"file_id": "mid", "width": 320, "height": 240},
            ],
            "document": {"file_id": "doc", "file_name": "report.pdf"},
            "voice": {"file_id": "v", "file_size": 12},
        },
    }
    inbound = parse_update(update)
    assert isinstance(inbound, Inbound)
    assert inbound.text == "look" and inbound.language_code == "de" and inbound.chat_name == "Al"
    assert [(f.file_id, f.filename) for f in inbound.files] == [("big", "photo-10.jpg"), ("doc", "report.pdf"), ("v", "voice-10.ogg")]
    press = parse_update({"update_id": 11, "callback_query": {"id": "q", "from": {"id": 9}, "data": "deny:abc"}})
    assert isinstance(press, ButtonPress) and press.chat_id is None and press.data == "deny:abc"


def test_pairing_codes_carry_50_bits_and_forgive_how_they_are_typed():
    codes = {new_code() for _ in range(2000)}
    assert len(codes) == 2000
    assert all(len(c) == CODE_LENGTH and set(c) <= set(ALPHABET) for c in codes)
    assert len(ALPHABET) == 32 and CODE_LENGTH * 5 >= 40
    code = "ABCDE23456"
    assert display(code) == "ABCDE-23456"
    assert normalise(" abcde-23456 ") == code
    assert normalise("0I1B8") == "OIIBB"  # look-alikes of the alphabet's letters


def test_the_package_imports_only_the_contract_and_its_own_dependencies():
    """DESIGN.md boundary 1: a plugin depends on ``skald_hookspecs``, never ``skald_host``."""
    allowed = {"skald_hookspecs", "skald_telegram", "quart", "telegram", "httpx", "markdown_it", "babel", "__future__"} | set(sys.stdlib_module_names)
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_importing_the_plugin_is_cheap():
    """The host imports every installed plugin at boot: python-telegram-bot and Quart wait
    (what it imports is checked, not how long it took: a loaded machine is no defect)."""
    probe = (
        "import json, sys; import skald_telegram;"
        " print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'quart', 'skald_host', 'telegram', 'httpx', 'babel'})))"
    )
    heavy = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert heavy == []


def test_webhook_values_stored_before_the_fields_had_patterns_still_keep_the_bot_from_starting():
    """A data dir from before contract 1.8 may hold an http address or a bad secret: the
    save-time check never saw them, so the start refuses them, naming the setting."""
    import pytest

    from skald_hookspecs import NotReady
    from skald_telegram.bot import BotConfig

    base = {"bot_token": "1:x", "mode": "webhook"}
    for stored, key in (
        ({"webhook_url": "http://skald.example/api/plugin/telegram/webhook", "webhook_secret": "good_secret-1"}, "error.webhook_not_https"),
        ({"webhook_url": "https://skald.example/api/plugin/telegram/webhook", "webhook_secret": "bad secret!"}, "error.webhook_secret_invalid"),
    ):
        with pytest.raises(NotReady) as refused:
            BotConfig.from_config({**base, **stored})
        assert refused.value.key == key
    assert BotConfig.from_config({**base, "webhook_url": "https://skald.example/w", "webhook_secret": "good_secret-1"}).mode == "webhook"


def test_a_code_block_split_over_three_pieces_is_closed_and_reopened_and_the_prose_after_it_is_not_code():
    from skald_telegram.text import split_markdown

    code = "\n".join(f"    value_{i} = compute({i})  # step {i} of the long listing" for i in range(170))
    text = f"Here is the script:\n\n```python\n{code}\n```\n\nAnd after it, **bold** prose."
    pieces = split_markdown(text)
    assert len(pieces) == 3 and all(utf16_len(p) <= MESSAGE_LIMIT for p in pieces)
    assert pieces[0].startswith("Here is the script:\n\n```python\n") and pieces[0].endswith("\n```")
    assert pieces[1].startswith("```python\n    value_") and pieces[1].endswith("\n```")  # indentation kept
    assert pieces[2].startswith("```python\n    value_") and pieces[2].endswith("```\n\nAnd after it, **bold** prose.")
    html = [to_telegram_html(p) for p in pieces]
    block = '<pre><code class="language-python">'  # every piece's block says its language
    assert html[0].startswith(f"Here is the script:\n\n{block}") and html[0].endswith("</code></pre>")
    assert html[1].startswith(block) and html[1].endswith("</code></pre>") and html[1].count("<pre>") == 1
    assert html[2].startswith(block) and html[2].endswith("</code></pre>\n\nAnd after it, <b>bold</b> prose.")
    shown = "\n".join(h.split(block, 1)[1].split("</code></pre>", 1)[0] for h in html)
    assert shown == code.replace("<", "&lt;")  # every line of the code, once, in order
    assert not split_message(text)[1].startswith("```")  # plain text is split as it was: no fences added


def test_a_wait_in_minutes_takes_the_plural_form_of_the_members_language():
    """CLDR's rules, not `count == 1`: Polish says 2 and 5 minutes in different forms,
    Arabic 2 minutes in a form of its own; a form the language lacks reads as `.other`."""
    from types import SimpleNamespace

    from skald_telegram.bot import TelegramBot
    from skald_telegram.strings import plural_category

    table = {
        "en": {"core.error.wait": "Wait.", "core.error.wait.minutes.one": "en one {count}", "core.error.wait.minutes.other": "en other {count}"},
        "pl": {
            "core.error.wait.minutes.one": "pl one {count}", "core.error.wait.minutes.few": "pl few {count}",
            "core.error.wait.minutes.many": "pl many {count}",
        },
        "ar": {"core.error.wait.minutes.other": "ar other {count}"},
    }

    def translate(key, locale=None, **values):
        text = table.get(locale or "en", {}).get(key, table["en"].get(key, key))
        return text.format(**values) if values else text

    bot = SimpleNamespace(host=SimpleNamespace(translate=translate))
    said = lambda minutes, locale: TelegramBot._reason_words(bot, {"code": "wait", "values": {"seconds": minutes * 60}}, locale)  # noqa: E731
    assert [said(m, "pl") for m in (1, 2, 5, 22)] == ["pl one 1", "pl few 2", "pl many 5", "pl few 22"]
    assert [said(m, "en") for m in (1, 2)] == ["en one 1", "en other 2"]
    assert said(2, "ar") == "ar other 2"  # Arabic's `two` form missing: its `.other`
    assert said(3, "xx-unknown") == "en other 3"
    assert (plural_category("ar", 2), plural_category("pt-BR", 0), plural_category("pt_BR", 1)) == ("two", "one", "one")


def test_a_telegram_language_code_finds_a_region_locale_then_its_language(monkeypatch):
    from skald_telegram import strings

    monkeypatch.setattr(strings, "STRINGS", {"en": {}, "de": {}, "pt-BR": {}, "fr": {}})
    assert [strings.telegram_locale(c) for c in ("pt-BR", "pt-br", "de-AT", "fr-CA", "fr", "es", None, "")] == [
        "pt-BR", "pt-BR", "de", "fr", "fr", "en", "en", "en",
    ]


def test_the_first_part_of_a_long_answer_ends_at_a_paragraph_or_a_sentence():
    from skald_telegram.text import first_part

    assert first_part("Short.", 100) == "Short."
    paragraphs = "First paragraph ends here.\n\nSecond one is long enough to pass the limit."
    assert first_part(paragraphs, 40) == "First paragraph ends here."
    sentences = "One sentence here. Another sentence here. And a third that goes on."
    assert first_part(sentences, 50) == "One sentence here. Another sentence here."
    assert first_part("word " * 30, 23) == "word word word word"
    assert first_part("x" * 30, 10) == "x" * 10
    for text, limit in ((paragraphs, 40), (sentences, 50), ("word " * 30, 23)):
        assert len(first_part(text, limit)) <= limit

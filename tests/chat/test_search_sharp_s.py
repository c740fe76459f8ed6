"""Conversation search folds umlauts (the index's remove_diacritics) but not "ß": a
probe's "Strasse" did not find "Straße", nor "grosse" "Größe". A word with "ss" or
"ß" is searched in both spellings; the words stay quoted, never FTS syntax."""

from __future__ import annotations

from skald_host.testing import Reply

from .support import ChatSocket, configure_models, new_conversation
from .test_search import search


async def test_ss_finds_sharp_s_and_sharp_s_finds_ss(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice", locale="de")
    answers = {
        "Wo wohnst du?": "In der Schlossstraße am Fluss.",
        "Welche Größe?": "Die Grösse passt.",
        "Und sonst?": "Nichts weiter.",
    }
    chat.server.responder = lambda request: Reply(answers[request.last_user_text])
    ids = {}
    async with ChatSocket(alice) as sock:
        for question in answers:
            ids[question] = await new_conversation(alice)
            await sock.send(ids[question], question)
            await sock.turn(ids[question])
        titled = await new_conversation(alice, title="Große Straße")  # a title, no message

    where, size = ids["Wo wohnst du?"], ids["Welche Größe?"]
    found = lambda hits: sorted(c["id"] for c in hits)  # noqa: E731
    assert found(await search(alice, "Strasse")) == sorted([titled])  # the title; the message has "Schlossstraße"
    assert found(await search(alice, "schlossstrasse")) == [where]
    assert found(await search(alice, "SCHLOSSSTRASSE fluss")) == [where]  # every word, in any case
    assert found(await search(alice, "Schloßstraße")) == [where]
    assert found(await search(alice, "grosse")) == sorted([size, titled])  # "Größe" and "Grösse"
    assert size in found(await search(alice, "größe"))  # (a title's "o" for "ö" is another matter: LIKE folds neither)
    assert found(await search(alice, "GROSS")) == sorted([size, titled])  # a prefix, both spellings
    assert found(await search(alice, "grosse strasse")) == [titled]
    [hit] = await search(alice, "schlossstrasse")
    assert hit["snippet"] == "In der Schlossstraße am Fluss."
    assert await search(alice, "strassenbahn") == []
    # The spellings are quoted words, as every word: nothing typed is FTS syntax.
    for hostile in ('ss"', 'ß" OR "x', "(ss OR", "ss AND ß", 'ß"*', "NEAR(ss ß)", "ss*", "-ß", "col:ss", "ß ß ß ß ß ß ß ß ß ß ß ß ß ß",
                    "ssssssssssssssssssssssssssss"):
        assert isinstance(await search(alice, hostile), list), hostile


def test_the_spellings_of_a_word_are_bounded():
    from skald_host.core.agent.store import fts_words
    from skald_host.core.text import MAX_SHARP_S_SPELLINGS, sharp_s_spellings

    assert sharp_s_spellings("Strasse") == ["Strasse", "Straße"]
    assert sharp_s_spellings("Größe") == ["Größe", "Grösse"]
    assert sharp_s_spellings("plain") == ["plain"]
    assert set(sharp_s_spellings("schlossstrasse")) == {"schlossstrasse", "schloßstrasse", "schlossstraße", "schloßstraße"}
    assert len(sharp_s_spellings("s" * 40)) <= MAX_SHARP_S_SPELLINGS
    assert fts_words('Strasse "x"') == ['("Strasse"* OR "Straße"*)', '"""x"""*']
    assert len(fts_words(" ".join(["word"] * 30))) == 12

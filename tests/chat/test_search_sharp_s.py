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
    assert found(await search(alice, "größe")) == sorted([size, titled])
    assert found(await search(alice, "GROSS")) == sorted([size, titled])  # a prefix, both spellings
    assert found(await search(alice, "grosse strasse")) == [titled]
    [hit] = await search(alice, "schlossstrasse")
    assert hit["snippet"] == "In der Schlossstraße am Fluss."
    assert await search(alice, "strassenbahn") == []
    # The spellings are quoted words, as every word: nothing typed is FTS syntax.
    for hostile in ('ss"', 'ß" OR "x', "(ss OR", "ss AND ß", 'ß"*', "NEAR(ss ß)", "ss*", "-ß", "col:ss", "ß ß ß ß ß ß ß ß ß ß ß ß ß ß",
                    "ssssssssssssssssssssssssssss"):
        assert isinstance(await search(alice, hostile), list), hostile


async def test_a_title_matches_in_any_case_and_without_its_accents(chat):
    """A title was matched by SQLite's LIKE, which folds the case of ASCII letters only:
    "käse" did not find "Käsekuchen", nor "cafe" "Café" (the messages' index did)."""
    alice = await chat.host.member("alice", locale="de")
    cake = await new_conversation(alice, title="Käsekuchen im Café")
    sizes = await new_conversation(alice, title="GRÖSSEN-Tabelle")
    await new_conversation(alice, title="Kasse 100% _fertig_")
    found = lambda hits: sorted(c["id"] for c in hits)  # noqa: E731
    assert found(await search(alice, "käse")) == [cake]
    assert found(await search(alice, "KASEKUCHEN")) == [cake]
    assert found(await search(alice, "cafe")) == [cake]
    assert found(await search(alice, "im café")) == [cake]  # the search as one string, as typed
    assert found(await search(alice, "größen")) == [sizes]
    assert found(await search(alice, "grossen-tab")) == [sizes]
    assert await search(alice, "käse café") == []  # not one string of the title, nor in a message
    assert len(await search(alice, "100%")) == 1 and len(await search(alice, "_fertig_")) == 1  # literal
    assert await search(alice, "%") != [] and await search(alice, "1_0") == []


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

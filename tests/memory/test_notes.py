"""The note store on real database files: path classification, limits, FTS ranking."""

from __future__ import annotations

import os

import pytest

from skald_host.core.memory.notes import MAX_NOTE_BYTES, NoteError, NoteStore, classify_memory, note_key
from skald_host.core.schema import OWNER_MIGRATIONS, REGISTRY_MIGRATIONS
from skald_host.core.storage import Database


@pytest.mark.parametrize(
    "path, expected",
    [
        ("user-memory/index.md", ("user-memory", "index.md")),
        ("user-memory", ("user-memory", "")),
        ("user-memory/", ("user-memory", "")),
        ("shared-memory/a/b.md", ("shared-memory", "a/b.md")),
        ("~/user-memory/x", ("user-memory", "x")),
        ("./shared-memory", ("shared-memory", "")),
        ("/root/user-memory/x", ("user-memory", "x")),
        ("/home/member/user-memory/x", ("user-memory", "x")),
        ("~/./user-memory//a/./b", ("user-memory", "a/b")),
        # `..` clamps inside the store: it never escapes to the disk.
        ("user-memory/../../etc/passwd", ("user-memory", "etc/passwd")),
        ("shared-memory/a/../../..", ("shared-memory", "")),
        ("user-memory/a/../b", ("user-memory", "b")),
        # Unicode compatibility forms spell the same root (the approval matcher agrees).
        ("\uff55ser-memory/x", ("user-memory", "x")),
        # Not memory: the decision is the first component after the home spellings.
        ("notes/user-memory/x", None),
        ("../user-memory/x", None),
        ("/user-memory/x", None),
        ("user-memoryx/y", None),
        ("shared/x", None),
        ("", None),
    ],
)
def test_classify_memory(path: str, expected: tuple[str, str] | None) -> None:
    assert classify_memory(path) == expected


def test_classify_memory_refuses_nul() -> None:
    with pytest.raises(NoteError, match="NUL"):
        classify_memory("user-memory/a\x00b")


@pytest.fixture(params=["owner", "registry"])
async def store(request, tmp_path):
    """The same store on both buckets: an encrypted owner file and the plain registry."""
    if request.param == "owner":
        db = await Database.open(tmp_path / "m.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)
    else:
        db = await Database.open(tmp_path / "system.db", key=None, migrations=REGISTRY_MIGRATIONS, create=True)
    yield NoteStore(db, "user-memory")
    await db.close()


async def test_write_read_replace_delete(store: NoteStore) -> None:
    with pytest.raises(FileNotFoundError):
        await store.read("index.md")
    await store.write("index.md", "first")
    await store.write("index.md", "second")
    assert await store.read("index.md") == "second"
    assert [n.key for n in await store.list()] == ["index.md"]
    assert await store.delete("index.md") is True
    assert await store.delete("index.md") is False
    assert await store.list() == []
    assert await store.search("second") == []  # the index followed the delete


async def test_list_prefix_is_a_folder(store: NoteStore) -> None:
    for key in ("a", "a/x", "a/y/z", "ab", "b"):
        await store.write(key, key)
    assert [n.key for n in await store.list("a")] == ["a", "a/x", "a/y/z"]
    assert [n.key for n in await store.list("a/")] == ["a", "a/x", "a/y/z"]
    assert [n.key for n in await store.list()] == ["a", "a/x", "a/y/z", "ab", "b"]
    info = (await store.list("b"))[0]
    assert info.size == 1 and info.updated_at


async def test_limits_have_clear_errors(store: NoteStore) -> None:
    with pytest.raises(NoteError, match="at most 256 KiB"):
        await store.write("big.md", "x" * (MAX_NOTE_BYTES + 1))
    await store.write("exact.md", "x" * MAX_NOTE_BYTES)
    with pytest.raises(NoteError, match="at most 300 characters"):
        await store.write("k" * 301, "x")
    with pytest.raises(NoteError, match="needs a name"):
        await store.write("/", "x")
    with pytest.raises(NoteError, match="control"):
        await store.write("a\nb", "x")
    with pytest.raises(NoteError, match="text"):
        await store.write("a", b"bytes")  # type: ignore[arg-type]
    assert [n.key for n in await store.list()] == ["exact.md"]


async def test_a_note_stored_under_a_hidden_character_before_can_still_be_read_and_deleted(store: NoteStore) -> None:
    """Writing refuses the name; a note an older version stored under it is not
    stranded: it opens and deletes as before."""
    with pytest.raises(NoteError, match="invisible formatting characters \\(U\\+202E\\)") as refused:
        await store.write("\u202egnp.md", "x")
    assert refused.value.code == "note_key_hidden_character" and refused.value.values == {"char": "U+202E"}
    await store.db.transaction(lambda c: c.execute("INSERT INTO memory_docs (key, content) VALUES (?, 'old')", ("\u202egnp.md",)))
    assert await store.read("\u202egnp.md") == "old"
    assert await store.delete("\u202egnp.md") is True


async def test_search_ranks_more_and_closer_matches_first(store: NoteStore) -> None:
    await store.write("weak.md", "The garden needs water. " + "Unrelated filler words about the week. " * 20)
    await store.write("strong.md", "Garden plan: the garden beds, garden tools and garden water schedule.")
    await store.write("none.md", "Nothing about plants here.")
    hits = await store.search("garden water")
    assert [h.key for h in hits] == ["strong.md", "weak.md"]
    assert hits[0].rank < hits[1].rank
    assert "garden" in hits[0].snippet.lower()


async def test_search_prefix_and_key_and_diacritics(store: NoteStore) -> None:
    await store.write("recipes/bread.md", "Sourdough needs a starter.")
    await store.write("people.md", "Jürgen likes cafés.")
    assert [h.key for h in await store.search("sourd")] == ["recipes/bread.md"]
    assert [h.key for h in await store.search("recipes")] == ["recipes/bread.md"]
    assert [h.key for h in await store.search("jurgen cafe")] == ["people.md"]


async def test_search_finds_sharp_s_and_ss_either_way(store: NoteStore) -> None:
    """As the conversation search does: the index folds accents, not "ß" (member walk)."""
    await store.write("home.md", "We live on Schloßstraße.")
    await store.write("sizes.md", "Shoe Grösse 42.")
    assert [h.key for h in await store.search("schlossstrasse")] == ["home.md"]
    assert [h.key for h in await store.search("größe")] == ["sizes.md"]
    assert [h.key for h in await store.search('strasse" OR "x')] == []  # the spellings stay quoted words


@pytest.mark.parametrize("query", ['"', 'a"b', "NOT", "AND OR", "(x", "x*", "col:umn", "^start", "-", "NEAR(a b)"])
async def test_search_with_fts_syntax_does_not_raise(store: NoteStore, query: str) -> None:
    """Each term is quoted: syntax is searched for as words, or nothing is searched
    (no word left), never a raw sqlite error."""
    await store.write("a.md", 'a"b col:umn x start NEAR a b AND OR NOT')
    hits = await store.search(query)
    assert [h.key for h in hits] in ([], ["a.md"])


async def test_a_search_without_a_word_finds_nothing(store: NoteStore) -> None:
    """As the conversation search: no word to look for is no hit, not an error."""
    await store.write("a.md", 'quotes " stars * brackets ( percent % plus +')
    for query in ("", "   ", '""', "- ( )", "*", "(", "%", "+", "\x00"):
        assert await store.search(query) == [], query


async def test_search_finds_notes_with_every_word(store: NoteStore) -> None:
    await store.write("garden-only.md", "garden " * 30)
    await store.write("both.md", "A long note. " * 30 + "Gardening and watering, once each.")
    await store.write("water-only.md", "water")
    assert [h.key for h in await store.search("garden water")] == ["both.md"]  # prefixes: gardening, watering
    assert [h.key for h in await store.search("water")] == ["water-only.md", "both.md"]


async def test_search_limit_and_snippets_of_only_the_chosen_notes(store: NoteStore) -> None:
    for i in range(30):
        await store.write(f"n{i:02}.md", "apple " * (i + 1) + "pear")
    hits = await store.search("apple", limit=5)
    assert [h.key for h in hits] == ["n29.md", "n28.md", "n27.md", "n26.md", "n25.md"]  # most occurrences first
    assert all("apple" in h.snippet for h in hits)
    assert len(await store.search("apple pear", limit=50)) == 30
    assert await store.search("apple plum") == []


@pytest.mark.parametrize("key", ["..", ".", "../x.md", "../../x.md", "a/../b.md", "a/./b.md", "a/..", "./index.md", "a/\u2025/b", "\uff0e\uff0e/x"])
def test_a_key_with_a_dot_part_is_refused_not_clamped(key: str) -> None:
    """"a/../b.md" was stored as "b.md": a caller's key changed without notice."""
    with pytest.raises(NoteError, match="'.' or '..'") as refused:
        note_key(key)
    assert refused.value.code == "note_key_dot_segment"


@pytest.mark.parametrize("key", ["projects/garden.md", "a/.hidden", "..notes", "a/b..", "%2e%2e%2fx.md", "Grüße/übersicht.md", "a//b.md", "a/"])
def test_a_key_with_dots_inside_a_name_is_kept(key: str) -> None:
    assert note_key(key) == "/".join(part for part in key.split("/") if part)


async def test_a_dot_part_reaches_no_note(store: NoteStore) -> None:
    await store.write("b.md", "kept")
    for call in (store.read("a/../b.md"), store.write("a/../b.md", "over"), store.delete("a/../b.md"), store.list("a/..")):
        with pytest.raises(NoteError, match="'.' or '..'"):
            await call
    assert await store.read("b.md") == "kept"

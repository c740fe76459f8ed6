"""Memory notes over HTTP on a real server: own vs shared routing, another member's
keys (C1), capabilities enforced by the service, clear errors, and a private canary
that never reaches system.db, its WAL or a log line."""

from __future__ import annotations

import logging
import re
import uuid

import pytest

from skald_hookspecs import I18nBundle
from skald_host.builtins.strings import LOCALES
from skald_host.core.identity.users import OwnerDatabaseUnavailable
from skald_host.core.memory.notes import NoteAccessDenied
from skald_host.logs import FORMAT

MINE, SHARED = "/api/memory/user-memory", "/api/memory/shared-memory"


async def keys(client, base: str) -> list[str]:
    response = await client.get(f"{base}/notes")
    assert response.status_code == 200, response.text
    return [n["key"] for n in response.json()["notes"]]


async def test_private_notes_are_per_member_and_shared_notes_are_for_everyone(memhost):
    alice, bob = await memhost.host.member("alice"), await memhost.host.member("bob")
    response = await alice.put(f"{MINE}/notes/plans/garden.md", json={"content": "alice's private plan"})
    assert response.status_code == 200, response.text
    assert response.json()["key"] == "plans/garden.md" and response.json()["size"] == len("alice's private plan")
    assert (await alice.put(f"{SHARED}/notes/shopping.md", json={"content": "milk, bread"})).status_code == 200

    # The same key is a different place for bob: his own (empty) store, never alice's note.
    assert await keys(bob, MINE) == []
    response = await bob.get(f"{MINE}/notes/plans/garden.md")
    assert response.status_code == 404 and response.json() == {"error": "no such note", "code": "no_such_note"}
    assert (await bob.delete(f"{MINE}/notes/plans/garden.md")).status_code == 404
    assert (await bob.get(f"{MINE}/search", params={"q": "private plan"})).json()["hits"] == []
    assert (await bob.put(f"{MINE}/notes/plans/garden.md", json={"content": "bob's own"})).status_code == 200
    assert (await alice.get(f"{MINE}/notes/plans/garden.md")).json()["content"] == "alice's private plan"
    assert (await bob.get(f"{MINE}/notes/plans/garden.md")).json()["content"] == "bob's own"

    # The shared pool is one store for both.
    assert await keys(bob, SHARED) == ["shopping.md"]
    assert (await bob.get(f"{SHARED}/notes/shopping.md")).json()["content"] == "milk, bread"
    assert (await bob.put(f"{SHARED}/notes/shopping.md", json={"content": "milk, bread, eggs"})).status_code == 200
    assert (await alice.get(f"{SHARED}/notes/shopping.md")).json()["content"] == "milk, bread, eggs"
    hits = (await alice.get(f"{SHARED}/search", params={"q": "eggs"})).json()["hits"]
    assert [h["key"] for h in hits] == ["shopping.md"] and "eggs" in hits[0]["snippet"]

    # Deleting is the owner's own note only.
    assert (await bob.delete(f"{MINE}/notes/plans/garden.md")).json() == {"deleted": True}
    assert await keys(alice, MINE) == ["plans/garden.md"]


async def test_a_key_with_a_dot_or_dot_dot_part_is_refused_not_rewritten(memhost):
    """A probe's "%2e%2e/%2e%2e/x.md" was saved as "x.md" and answered 200: the caller's
    key changed without notice. A "." or ".." part (after the URL's own decoding, and
    NFKC: "\u2025" is "..") is a 400 with a code both bundles say, for every method;
    nothing is stored, and the caller's literal names still work as typed."""
    from urllib.parse import quote

    alice = await memhost.host.member("alice")
    strings = I18nBundle.from_folder("core", LOCALES).strings
    assert all("error.note_key_dot_segment" in strings[locale] for locale in ("en", "de"))
    # Encoded so the client sends the dots as written; the server decodes them once.
    for key in ("%2e%2e/%2e%2e/x.md", "a/%2E%2E/%2E%2E/%2E%2E/escape.md", "a/%2E%2E/b.md", "%2E/x.md", "a/%2E",
                "%2E%2E", quote("a/\u2025/b.md")):
        for method, body in (("PUT", {"content": "x"}), ("GET", None), ("DELETE", None)):
            response = await alice.request(method, f"{MINE}/notes/{key}", json=body)
            assert (response.status_code, response.json().get("code")) == (400, "note_key_dot_segment"), (method, key, response.text)
        response = await alice.put(f"{MINE}/notes/{key}?create=1", json={"content": "x"})
        assert (response.status_code, response.json().get("code")) == (400, "note_key_dot_segment"), (key, response.text)
    response = await alice.get(f"{MINE}/notes", params={"prefix": "a/../b"})
    assert (response.status_code, response.json().get("code")) == (400, "note_key_dot_segment"), response.text
    assert await keys(alice, MINE) == []

    # Legitimate keys keep their names: nested folders, dots inside a name, unicode, and
    # a key whose literal name is "%2e%2e%2fx.md" (sent as %252e…: decoded once, not twice).
    for key, stored in (
        ("projects/garden.md", "projects/garden.md"),
        ("a/.hidden/..notes.md", "a/.hidden/..notes.md"),
        (quote("Grüße/übersicht.md"), "Grüße/übersicht.md"),
        ("%252e%252e%252fx.md", "%2e%2e%2fx.md"),
    ):
        response = await alice.put(f"{MINE}/notes/{key}?create=1", json={"content": "x"})
        assert response.status_code == 200 and response.json()["key"] == stored, (key, response.text)
        assert (await alice.get(f"{MINE}/notes/{key}")).json()["key"] == stored
    assert sorted(await keys(alice, MINE)) == sorted(["projects/garden.md", "a/.hidden/..notes.md", "Grüße/übersicht.md", "%2e%2e%2fx.md"])


async def test_a_search_agrees_with_the_conversation_search(memhost):
    """A query with no searchable word (`"`, `*`, `(`, `%`, `+`, a NUL) finds nothing, as
    the conversation search does, instead of a generic http_400; a query over the
    conversation search's limit is refused with its code and limit, and one at it runs."""
    from skald_host.web.routes.chat import MAX_SEARCH_CHARS

    alice = await memhost.host.member("alice")
    assert (await alice.put(f"{MINE}/notes/a.md", json={"content": "quotes \" and stars * and (brackets)"})).status_code == 200
    for q in ('"', "*", "(", "%", "+", "\x00", '" ( ) -', "", "   "):
        for base in (MINE, SHARED):
            response = await alice.get(f"{base}/search", params={"q": q})
            assert response.status_code == 200 and response.json() == {"root": base.rsplit("/", 1)[1], "hits": []}, (q, response.text)
        assert (await alice.get("/api/conversations", params={"search": q})).status_code == 200

    assert MAX_SEARCH_CHARS == 200
    for q in ("w" * (MAX_SEARCH_CHARS + 1), "w " * 150):
        memory = await alice.get(f"{MINE}/search", params={"q": q})
        conversations = await alice.get("/api/conversations", params={"search": q})
        assert conversations.status_code == memory.status_code == 400, memory.text
        assert (memory.json()["code"], memory.json()["values"]) == (conversations.json()["code"], conversations.json()["values"]) \
            == ("too_long", {"limit": MAX_SEARCH_CHARS})
        assert memory.json()["field"] == "q"
    response = await alice.get(f"{MINE}/search", params={"q": "quotes " + "w" * (MAX_SEARCH_CHARS - 7)})
    assert response.status_code == 200 and response.json()["hits"] == [], response.text
    assert [h["key"] for h in (await alice.get(f"{MINE}/search", params={"q": "stars brackets"})).json()["hits"]] == ["a.md"]


async def test_bad_input_gets_a_clear_error_and_stores_nothing(memhost):
    alice = await memhost.host.member("alice")
    cases = [
        (f"{MINE}/notes/" + "k" * 301, {"content": "x"}, "at most 300 characters"),
        (f"{MINE}/notes/big.md", {"content": "x" * (256 * 1024 + 1)}, "at most 256 KiB"),
        (f"{MINE}/notes/a.md", {"content": 5}, "'content' must be text"),
        (f"{MINE}/notes/a.md", {}, "'content' is required"),
        (f"{MINE}/notes/a%09b.md", {"content": "x"}, "control characters"),
    ]
    for path, body, message in cases:
        response = await alice.put(path, json=body)
        assert response.status_code == 400 and message in response.json()["error"], (path, response.text)
    response = await alice.get("/api/memory/elsewhere/notes")
    assert response.status_code == 404 and "no memory root" in response.json()["error"]
    # A name starting with "/" is no note's: a JSON refusal, never an HTML redirect to
    # the doubled slash merged away ("etc/passwd"), which a client would follow and write.
    response = await alice.put(f"{MINE}/notes/%2Fetc%2Fpasswd", json={"content": "x"})
    assert response.status_code == 404 and response.json()["code"] == "not_found", response.text
    assert await keys(alice, MINE) == []


async def test_a_note_too_large_is_refused_with_a_code_whose_values_fill_its_strings(memhost):
    """A German member read "a note may be at most 256 KiB; this one is 292 KiB": the
    refusal has a code and values, and both bundles say it with every placeholder filled."""
    alice = await memhost.host.member("alice")
    response = await alice.put(f"{MINE}/notes/big.md", json={"content": "x" * (300 * 1000)})
    assert response.status_code == 400, response.text
    body = response.json()
    assert (body["code"], body["values"]) == ("note_too_large", {"limit": 256, "size": 293})
    strings = I18nBundle.from_folder("core", LOCALES).strings
    for locale in ("en", "de"):
        string = strings[locale]["error.note_too_large"]
        assert set(re.findall(r"\{(\w+)\}", string)) == set(body["values"]), (locale, string)
    assert await keys(alice, MINE) == []


async def test_a_note_name_with_a_bidi_override_or_an_invisible_character_is_refused(memhost):
    """"\u202egnp.md" shows as "dm.png": a name that hides characters, or reorders the
    ones around it, is refused with a code both bundles say; ordinary names in any
    language (umlauts, CJK, emoji, an emoji sequence, Persian with its joiner) are kept."""
    from urllib.parse import quote

    alice = await memhost.host.member("alice")
    strings = I18nBundle.from_folder("core", LOCALES).strings
    for hidden in ("\u202e", "\u2066", "\u200b", "\u2060", "\ufeff", "\u00ad", "\u2028", "\u2029", "\x85", "\ue000", "\U000e0041"):
        response = await alice.put(f"{MINE}/notes/" + quote(f"a{hidden}gnp.md"), json={"content": "t"})
        assert response.status_code == 400, (hidden, response.text)
        body = response.json()
        assert body["code"] == "note_key_hidden_character" and body["values"] == {"char": f"U+{ord(hidden):04X}"}, body
        assert "control characters" in body["error"]
    assert await keys(alice, MINE) == []
    for locale in ("en", "de"):
        assert set(re.findall(r"\{(\w+)\}", strings[locale]["error.note_key_hidden_character"])) == {"char"}

    names = ["Grüße/übersicht.md", "日本語のメモ.md", "🌱 garden.md", "👩\u200d💻 work.md", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.md"]
    for name in names:
        response = await alice.put(f"{MINE}/notes/" + quote(name), json={"content": "t"})
        assert response.status_code == 200 and response.json()["key"] == name, (name, response.text)
    assert sorted(await keys(alice, MINE)) == sorted(names)


async def test_the_restricted_role_may_not_read_or_write_shared_memory(memhost):
    alice = await memhost.host.member("alice")
    assert (await alice.put(f"{SHARED}/notes/index.md", json={"content": "for everyone"})).status_code == 200
    kid = await memhost.restricted("kid")
    for method, path, body in (
        ("GET", f"{SHARED}/notes", None),
        ("GET", f"{SHARED}/search?q=everyone", None),
        ("GET", f"{SHARED}/notes/index.md", None),
    ):
        response = await kid.request(method, path, json=body)
        assert response.status_code == 403 and response.json() == {"error": "you may not read shared memory", "code": "memory_shared_read_forbidden"}, path
    for method, path, body in (("PUT", f"{SHARED}/notes/index.md", {"content": "overwritten"}), ("DELETE", f"{SHARED}/notes/index.md", None)):
        response = await kid.request(method, path, json=body)
        assert response.status_code == 403 and response.json() == {"error": "you may not change shared memory", "code": "memory_shared_write_forbidden"}, path
    assert (await alice.get(f"{SHARED}/notes/index.md")).json()["content"] == "for everyone"
    # The file viewer's route says the same, with its code (the reader's language).
    response = await kid.get("/api/file", params={"path": "shared-memory/index.md"})
    assert (response.status_code, response.json().get("code")) == (403, "memory_shared_read_forbidden"), response.text
    # Their own notes work as for anyone.
    assert (await kid.put(f"{MINE}/notes/index.md", json={"content": "my pony"})).status_code == 200
    assert await keys(kid, MINE) == ["index.md"]

    # The service enforces it, not only the HTTP layer.
    shared = memhost.host.core.memory.notes(kid.member["id"], "shared-memory")
    with pytest.raises(NoteAccessDenied):
        await shared.read("index.md")
    with pytest.raises(NoteAccessDenied):
        await shared.write("index.md", "overwritten")
    memory = memhost.host.core.memory
    assert [h.path for h in await memory.search(kid.member["id"], "pony")] == ["user-memory/index.md"]
    assert await memory.search(kid.member["id"], "everyone") == []  # the shared note is not searched
    assert [h.path for h in await memory.search(alice.member["id"], "everyone")] == ["shared-memory/index.md"]


async def test_taking_the_write_capability_away_lands_on_the_next_call(memhost):
    """Capabilities are read fresh: a role that keeps read but loses write can still
    read shared notes and can no longer change them, with nothing restarted."""
    bob = await memhost.host.member("bob")
    assert (await bob.put(f"{SHARED}/notes/a.md", json={"content": "one"})).status_code == 200
    registry = memhost.host.core.registry
    await registry.transaction(
        lambda c: c.execute("DELETE FROM role_capabilities WHERE role_id = 'member' AND capability = 'memory.shared.write'")
    )
    response = await bob.put(f"{SHARED}/notes/a.md", json={"content": "two"})
    assert response.status_code == 403 and response.json() == {"error": "you may not change shared memory", "code": "memory_shared_write_forbidden"}
    assert (await bob.get(f"{SHARED}/notes/a.md")).json()["content"] == "one"


async def test_a_locked_members_notes_are_unreachable(memhost):
    alice = await memhost.host.member("alice")
    assert (await alice.put(f"{MINE}/notes/a.md", json={"content": "x"})).status_code == 200
    member_id = alice.member["id"]
    assert (await alice.post("/api/auth/logout")).status_code == 200
    with pytest.raises(OwnerDatabaseUnavailable):
        memhost.host.core.memory.notes(member_id, "user-memory")
    assert await memhost.host.core.memory.read_path(member_id, "user-memory/a.md") is None


def server_side(record: logging.LogRecord) -> bool:
    """The server runs in the test's process; the HTTP client's own logging (it plays
    the member's browser, which knows the note) is not the server's log."""
    return not record.name.startswith(("httpx", "httpcore"))


async def test_a_private_canary_reaches_no_registry_byte_and_no_log_line(memhost, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    log_file = tmp_path / "skald.log"
    file_handler = logging.FileHandler(log_file, encoding="utf-8")
    file_handler.setFormatter(logging.Formatter(FORMAT))
    file_handler.setLevel(logging.DEBUG)
    file_handler.addFilter(server_side)
    logging.getLogger().addHandler(file_handler)
    try:
        alice = await memhost.host.member("alice")
        canary = f"CANARY-{uuid.uuid4()}"
        key = f"diary-{canary}.md"
        response = await alice.put(f"{MINE}/notes/{key}", json={"content": f"today {canary} happened"})
        assert response.status_code == 200, response.text
        assert (await alice.put(f"{MINE}/notes/{key}", json={"content": f"and again {canary}"})).status_code == 200
        hits = (await alice.get(f"{MINE}/search", params={"q": canary})).json()["hits"]
        assert [h["key"] for h in hits] == [key]  # it was stored and indexed
        assert canary in (await alice.get(f"{MINE}/notes/{key}")).text
        # A failing request that names the canary must not log it either.
        assert (await alice.put(f"{MINE}/notes/{key}", json={"content": 1})).status_code == 400
        await memhost.host.core.registry.run(lambda c: c.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall())
    finally:
        logging.getLogger().removeHandler(file_handler)
        file_handler.close()

    database_dir = memhost.host.settings.database_dir
    for name in ("system.db", "system.db-wal"):
        path = database_dir / name
        if path.exists():
            assert canary.encode() not in path.read_bytes(), f"the canary reached {name}"
    for path in database_dir.glob(f"{alice.member['id']}.db*"):  # encrypted at rest
        assert canary.encode() not in path.read_bytes(), f"the canary is readable in {path.name}"
    assert log_file.exists() and canary not in log_file.read_text(encoding="utf-8")
    assert any(server_side(r) for r in caplog.records), "the server's logging was captured"
    assert all(canary not in record.getMessage() for record in caplog.records if server_side(record))


async def test_a_german_member_reads_each_bad_note_name_in_german(memhost):
    """These refusals went without a code ("a note needs a name", "at most 300
    characters", "control characters", a NUL): the answer was ``http_400`` and the shell
    showed the server's English. Each has a code now, with its values, in both bundles."""
    grete = await memhost.host.member("grete", locale="de")
    german = (await grete.get("/api/i18n?locale=de")).json()["strings"]
    english = I18nBundle.from_folder("core", LOCALES).strings["en"]
    cases = (
        (f"{MINE}/notes/%20", {"content": "x"}, "note_key_empty", {}),
        (f"{MINE}/notes/{'n' * 301}", {"content": "x"}, "note_key_too_long", {"limit": 300}),
        (f"{MINE}/notes/a%01b.md", {"content": "x"}, "note_key_hidden_character", {"char": "U+0001"}),
        (f"{MINE}/notes/fine.md", {"content": "a\u0000b"}, "note_nul_byte", {}),
    )
    for path, body, code, values in cases:
        response = await grete.put(path, json=body)
        assert (response.status_code, response.json()["code"], response.json().get("values", {})) == (400, code, values), (path, response.text)
        said = german[f"core.error.{code}"].format(**values)
        assert said and said != english[f"error.{code}"].format(**values)
    assert await keys(grete, MINE) == []

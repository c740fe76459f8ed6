"""A save from an old editor must not undo a newer one: a note's read answers its
``version``, and a write that names it (``"expected"``) is refused, 409, when the note
changed or was deleted since, with nothing written. Without it, a write is as before
(the agent's tools, API clients)."""

from __future__ import annotations

SHARED = "/api/memory/shared-memory/notes/einkauf.md"
MINE = "/api/memory/user-memory/notes/geheim.md"


async def test_a_stale_save_on_a_shared_note_is_refused_and_the_newer_text_kept(skald):
    host = await skald.start()
    await host.admin()
    alice, bob = await host.member("alice"), await host.member("bob")
    assert (await alice.put(SHARED, json={"content": "Milch"})).status_code == 200

    opened_by_alice = (await alice.get(SHARED)).json()
    opened_by_bob = (await bob.get(SHARED)).json()
    assert opened_by_alice["version"] == opened_by_bob["version"]
    saved = await bob.put(SHARED, json={"content": "Milch, Brot", "expected": opened_by_bob["version"]})
    assert saved.status_code == 200, saved.text

    stale = await alice.put(SHARED, json={"content": "Milch, Eier", "expected": opened_by_alice["version"]})
    assert stale.status_code == 409, stale.text
    assert stale.json()["code"] == "note_changed"
    assert (await bob.get(SHARED)).json()["content"] == "Milch, Brot"

    # Saved again from the version the save answered (the same editor's next save): fine.
    again = await bob.put(SHARED, json={"content": "Milch, Brot, Käse", "expected": saved.json()["version"]})
    assert again.status_code == 200, again.text
    fresh = (await alice.get(SHARED)).json()
    assert fresh["content"] == "Milch, Brot, Käse" and fresh["version"] == again.json()["version"]
    assert (await alice.put(SHARED, json={"content": "Käse", "expected": fresh["version"]})).status_code == 200
    assert (await bob.get(SHARED)).json()["content"] == "Käse"


async def test_a_save_from_an_editor_opened_before_a_delete_does_not_bring_the_note_back(skald):
    host = await skald.start()
    await host.admin()
    alice, bob = await host.member("alice"), await host.member("bob")
    assert (await bob.put(SHARED, json={"content": "Milch"})).status_code == 200
    opened = (await alice.get(SHARED)).json()
    assert (await bob.delete(SHARED)).status_code == 200

    stale = await alice.put(SHARED, json={"content": "Milch, Eier", "expected": opened["version"]})
    assert stale.status_code == 409, stale.text
    assert stale.json()["code"] == "note_gone"
    assert (await bob.get(SHARED)).status_code == 404
    assert (await bob.get("/api/memory/shared-memory/notes")).json()["notes"] == []


async def test_two_clients_of_one_member_and_a_write_without_a_version(skald):
    host = await skald.start()
    await host.admin()
    first, second = await host.member("alice"), await host.member("alice")
    assert (await first.put(MINE, json={"content": "Alt"})).status_code == 200
    opened = (await second.get(MINE)).json()
    assert (await first.put(MINE, json={"content": "Version aus Tab 1", "expected": opened["version"]})).status_code == 200
    stale = await second.put(MINE, json={"content": "Version aus Tab 2", "expected": opened["version"]})
    assert stale.status_code == 409 and stale.json()["code"] == "note_changed"
    assert (await first.get(MINE)).json()["content"] == "Version aus Tab 1"

    # No precondition: replaces, as before (what the agent's tools and API clients send).
    assert (await second.put(MINE, json={"content": "Version aus Tab 2"})).status_code == 200
    assert (await first.get(MINE)).json()["content"] == "Version aus Tab 2"

"""The search index is written by the commit that finishes a message, not by the search:
every search was a write transaction (BEGIN IMMEDIATE) on the member's one database
thread, indexing what had finished since the last one, and a send queued behind it
(a scale probe). What another path finished (a crash's recovery) is caught up before
a search in small transactions, none of them the search's own read."""

from __future__ import annotations


from skald_host.core.agent import store as store_module
from skald_host.core.storage import Database


def counting(db: Database) -> list[str]:
    """Which of the file's jobs run: ``transaction`` (a write lock), ``run``, ``read``."""
    jobs: list[str] = []
    for name in ("transaction", "run", "read"):
        method = getattr(db, name)

        async def job(fn, _method=method, _name=name):
            jobs.append(_name)
            return await _method(fn)

        setattr(db, name, job)
    return jobs


async def test_messages_are_indexed_in_the_commit_that_writes_them_and_a_search_only_reads(owner_store, monkeypatch):
    store = owner_store
    db = store.db
    cid, _ = await store.create_conversation("assistant")
    frame = await store.root_frame(cid)
    jobs = counting(db)
    await store.add_member_message(frame, "what about rhubarb?", None, queued=False)
    await store.finish_assistant(await store.start_assistant(frame, "m"), content="Plant it in spring.", reasoning="", model="m", calls=[])
    assert jobs == ["transaction"] * 3  # no commit more than the messages' own
    indexed = await db.read(lambda c: c.execute("SELECT count(*) FROM messages_fts").fetchone()[0])
    assert indexed == 2  # both in the index already, by those commits
    jobs.clear()
    assert [c["id"] for c in await store.conversations(search="rhubarb spring")] == [cid]
    assert "transaction" not in jobs and jobs[-1] == "read"  # the search held no write lock

    # Rows finished elsewhere (recovery marks a cut answer interrupted) are caught up
    # before the search, a few rows per transaction.
    for n in range(5):
        await store.add_member_message(frame, f"question {n}", None, queued=False)
        message_id = await store.start_assistant(frame, "m")
        await store.checkpoint(message_id, f"partial tomato {n}", "")
    await store.mark_interrupted_streams()
    monkeypatch.setattr(store_module, "INDEX_BATCH", 2)
    jobs.clear()
    assert [c["id"] for c in await store.conversations(search="tomato")] == [cid]
    assert jobs.count("transaction") == 3  # 5 rows, 2 a batch
    jobs.clear()
    assert [c["id"] for c in await store.conversations(search="tomato")] == [cid]
    assert "transaction" not in jobs


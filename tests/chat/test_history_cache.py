"""The history a round reads is kept in memory (``ConversationStore``), spliced from the
rows each write re-reads in its own transaction. Whatever happens — queued messages
drained, streams checkpointed and finished, tool calls and approvals, summaries, notes,
sub-agent frames, a recovery after a restart, a deleted conversation — the copy equals a
fresh read of the member's file, and so does its projection to the wire."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skald_host.core.agent.projection import ProjectionMemo, project
from skald_host.core.agent.runtime import COMPACT_PROMPT
from skald_host.core.agent.store import ConversationStore, Frame
from skald_host.core.llm.client import wire_json
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, new_conversation

OPERATIONS = st.lists(
    st.sampled_from(
        ["member", "queued", "duplicate", "drain", "start", "checkpoint", "finish", "finish_with_calls", "finish_round", "call_done", "calls_done",
         "call_running", "approval", "summary", "note", "interrupt", "restart", "subframe", "delete_other", "read_other"]
    ),
    min_size=1,
    max_size=40,
)


def plain(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "tool_calls": [dict(c) for c in row["tool_calls"]]} for row in rows]


MEMOS: dict[str, ProjectionMemo] = {}


async def assert_fresh(store: ConversationStore, db: Database, frames: list[Frame]) -> None:
    fresh_store = ConversationStore(db)  # a store that has read nothing yet: a fresh read
    for frame in frames:
        kept, fresh = await store.history(frame.id), await fresh_store.history(frame.id)
        assert plain(kept) == plain(fresh), f"the kept history of frame {frame.depth} differs from a fresh read"
        # Projected through a memo kept across every step, as the kernel does per frame,
        # and encoded from the JSON it keeps of the entries it kept.
        memo = MEMOS.setdefault(frame.id, ProjectionMemo())
        projected = project("system", kept, memo=memo)
        assert projected == project("system", fresh)
        assert memo.wire_json(projected) == wire_json(project("system", fresh))


async def run_operations(path: Path, operations: list[str]) -> None:
    db = await Database.open(path, key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)
    try:
        store = ConversationStore(db)
        conversation_id, _ = await store.create_conversation("assistant")
        other_id, _ = await store.create_conversation("assistant")
        root = await store.root_frame(conversation_id)
        frames = [root, await store.root_frame(other_id)]
        # A new conversation's root, empty history and lack of sub-agents are known without a read.
        assert root == await ConversationStore(db).root_frame(conversation_id)
        assert store.settled_history(root) == [] and await store.open_frames(conversation_id) == []
        streaming: list[int] = []
        calls: list[str] = []
        keys: list[str] = []
        await assert_fresh(store, db, frames)  # every frame is kept from here on, so each write must splice
        for index, operation in enumerate(operations):
            subframes = [f for f in frames if f.depth > 0]
            frame = subframes[-1] if subframes and index % 2 else root  # assistant rows land in sub-agent frames too
            if operation in ("member", "queued"):
                keys.append(f"key-{index}")
                await store.add_member_message(root, f"message {index}", keys[-1], queued=operation == "queued", title=f"t{index}")
            elif operation == "duplicate" and keys:
                await store.add_member_message(root, "again", keys[0], queued=False)
            elif operation == "drain":
                await store.drain_inbox(root)
                assert await store.queued(conversation_id) == []  # an inbox answered "empty" without a read is empty
            elif operation == "start":
                streaming.append(await store.start_assistant(frame, "m"))
            elif operation == "checkpoint" and streaming:
                await store.checkpoint(streaming[-1], f"partial {index}", "thinking")
            elif operation in ("finish", "finish_with_calls") and streaming:
                wanted = 2 if operation == "finish_with_calls" else 0
                calls += await store.finish_assistant(
                    streaming.pop(), content=f"answer {index}", reasoning="", model="m",
                    calls=[(f"model-call-{index}-{n}", "notify", "{}", "rerun") for n in range(wanted)],
                )
            elif operation == "finish_round" and streaming:  # calls that already ran, and the next placeholder
                written, placeholder_id = await store.finish_round(
                    streaming.pop(), content="", reasoning="", model="m",
                    calls=[(f"model-call-{index}-{n}", "notify", "{}", "rerun") for n in range(2)],
                    results=[("done", f"ran {index}"), ("error", "failed")], request_log=None, placeholder=(frame, "m"),
                )
                calls += written
                streaming.append(placeholder_id)
            elif operation == "calls_done" and calls:
                await store.set_calls([(call, "done", f"batch {index}") for call in calls[-2:]])
            elif operation in ("call_done", "call_running") and calls:
                await store.set_call(calls[index % len(calls)], operation.removeprefix("call_"), f"result {index}")
            elif operation == "approval" and calls:
                await store.request_approval(calls[-1], conversation_id, "notify", "hash", "2999-01-01T00:00:00Z")
            elif operation == "summary":
                await store.add_summary(frame, f"summary {index}")
            elif operation == "note":
                await store.add_note(frame, f"note {index}")
            elif operation in ("interrupt", "restart"):
                if operation == "restart":  # a restart is a new runtime: a new store, then recovery
                    store = ConversationStore(db)
                    await assert_fresh(store, db, frames)
                await store.mark_interrupted_streams()  # (resumed, given up): not looked at here
                streaming.clear()
            elif operation == "subframe":
                sub = await store.open_subframe(root, calls[-1] if calls else "", "researcher")
                await store.add_user_message(sub, f"task {index}", None)
                frames.append(sub)
            elif operation == "delete_other" and other_id:
                await store.delete(other_id)
                frames = [f for f in frames if f.conversation_id != other_id]
                other_id = ""
            elif operation == "read_other" and other_id:
                await store.add_user_message(frames[1], f"elsewhere {index}", None)
            await assert_fresh(store, db, frames)
        assert await store.open_frames(conversation_id) == await ConversationStore(db).open_frames(conversation_id)
        await store.drain_inbox(root)
        assert await store.drain_inbox(root) == await ConversationStore(db).drain_inbox(root) == []
    finally:
        await db.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_the_kept_history_always_equals_a_fresh_read(tmp_path_factory, operations):
    asyncio.run(run_operations(tmp_path_factory.mktemp("owner") / "member.db", operations))


async def test_a_queued_message_a_compaction_and_the_next_rounds_are_sent_as_a_fresh_read_projects_them(chat):
    """End to end: after each turn the request the model got is the projection of a
    fresh read of the member's file, with the copy kept in the runtime in between."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    release = asyncio.Event()
    answers = iter(["First answer.", "Second answer.", "The summary.", "After the summary."])

    async def responder(request):
        if request.last_user_text == "First question.":
            await release.wait()
        return Reply(next(answers))

    chat.server.responder = responder
    db = chat.host.core.users.owner_db(alice.member["id"])

    async def sent_as_fresh_read(cid: str) -> None:
        fresh = await ConversationStore(db).history((await ConversationStore(db).root_frame(cid)).id)
        last = chat.server.requests_for(MODEL_A)[-1].messages
        assert fresh[-1]["role"] == "assistant"  # the answer to that request, the history's last row
        assert last == project(last[0]["content"], fresh[:-1])

    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First question.")
        await chat.server.wait_for_requests(1)
        assert (await sock.send(cid, "A second thought."))["queued"] is True  # coalesced into the next turn
        release.set()
        await sock.turn(cid)
        await sock.turn(cid)
        await sent_as_fresh_read(cid)
        assert (await alice.post(f"/api/conversations/{cid}/compact")).status_code == 200
        await sock.send(cid, "And now?")
        await sock.turn(cid)
        await sent_as_fresh_read(cid)
    runtime = chat.host.core.chat.live_runtime(alice.member["id"])
    frame = await runtime.store.root_frame(cid)
    assert plain(await runtime.store.history(frame.id)) == plain(await ConversationStore(db).history(frame.id))
    assert [m["role"] for m in await runtime.store.history(frame.id)] == ["summary", "user", "assistant"]

    # The request log keeps each body as what it adds to the one before; joined back
    # together, every body is exactly what the model was sent.
    await runtime.flush_logs()
    logged = await db.run(lambda c: c.execute("SELECT request_id, request FROM llm_request_payloads ORDER BY rowid").fetchall())
    sent = [r for r in chat.server.requests_for(MODEL_A) if r.messages[-1]["content"] != COMPACT_PROMPT]
    assert len(logged) == len(sent) == 3
    assert '"continues"' in logged[1][1]  # the second request was logged as its new messages only
    assert sent[1].body.get("tools") and '"tools"' not in logged[1][1]  # and without the tools, the same as before
    for (request_id, _), request in zip(logged, sent):
        body = await runtime.store.request_body(request_id)
        assert body is not None and body["messages"] == request.messages
        assert body["tools"] == (request.body.get("tools") or [])


def test_a_memoised_projection_follows_a_new_system_prompt_and_images_coming_and_going():
    """The memo reuses the previous call's entries only for the same prompt and only
    for rows that were shown without images."""
    rows: list[Mapping[str, Any]] = [
        {"id": 1, "role": "user", "content": "hi", "attachments": "[]", "status": "complete", "tool_calls": ()},
        {"id": 2, "role": "assistant", "content": "hello", "status": "complete", "tool_calls": ()},
        {"id": 3, "role": "user", "content": "look", "attachments": "[]", "status": "complete", "tool_calls": ()},
    ]
    memo = ProjectionMemo()
    steps = [
        ("one", {}),
        ("two", {}),  # a rebuilt prompt (20 minutes idle)
        ("two", {3: ["data:image/png;base64,AAAA"]}),
        ("two", {3: ["data:image/png;base64,AAAA"], 1: ["data:image/png;base64,BBBB"]}),
        ("two", {}),  # the images' turn is over: the rows are text again
        ("two", {}),
    ]
    for system, images in steps:
        projected = project(system, rows, images, memo)
        assert projected == project(system, rows, images), (system, images)
        assert memo.wire_json(projected) == wire_json(project(system, rows, images)), (system, images)
    assert memo.wire_json(list(projected)) is not None  # the same entries in another list: still its JSON
    assert memo.wire_json(project("two", rows, {})) is None  # entries the memo did not project: not its JSON


async def test_the_remembered_idempotency_keys_stay_bounded(tmp_path, monkeypatch):
    """The keys a member's clients submit are remembered so a retry is known without a
    read, but only the newest ones: a soak of thousands of turns must not grow the
    host's memory by a key per message (check H2). An older key still stores once."""
    from skald_host.core.agent import store as conversation_store

    monkeypatch.setattr(conversation_store, "RECENT_KEYS", 5)
    db = await Database.open(tmp_path / "owner.db", key=os.urandom(32), migrations=OWNER_MIGRATIONS, create=True)
    try:
        store = ConversationStore(db)
        conversation_id, _ = await store.create_conversation("assistant", title="keys")
        frame = await store.root_frame(conversation_id)
        await store.remember_keys()
        for index in range(30):
            await store.add_member_message(frame, f"message {index}", f"key-{index:04d}", queued=False)
        assert len(store._keys) == 10  # 2 x RECENT_KEYS, the newest
        assert not store.key_surely_new("key-0029") and store.key_surely_new("key-0000")
        again = await store.add_member_message(frame, "message 0", "key-0000", queued=False)
        assert again["duplicate"] is True
        assert len([r for r in await store.history(frame.id) if r["role"] == "user"]) == 30
    finally:
        await db.close()

"""Check G4, disk full: a running host on a real, small tmpfs that fills up.

Requests that need the disk fail with 507 and say why, nothing is acknowledged that
was not stored, no half-made database file is left behind, and once space is freed
the same requests succeed without a restart. The tmpfs is real (mounting one needs
root; without it the tests are skipped and say so: tests/disk.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest_asyncio

from skald_host.core.agent.runtime import RESEND_LAST_SECONDS
from skald_host.testing import Reply, RunningHost, ScriptedModelServer, SkaldClient, ToolCall
from tests.chat.support import (
    ALL_MODELS,
    API_KEY,
    MODEL_A,
    PROBE,
    ChatProbe,
    ChatSocket,
    allow_tool,
    assert_well_formed,
    configure_models,
    eventually,
    messages,
    new_conversation,
    write_probe_agents,
)
from tests.channels.support import CHANNEL, RecordingChannel
from tests.disk import fill
from tests.durability.helpers import free_port, refused_serve


@dataclass
class OnSmallDisk:
    host: RunningHost
    admin: SkaldClient
    server: ScriptedModelServer
    probe: ChatProbe
    channel: RecordingChannel


@pytest_asyncio.fixture
async def on_small_disk(skald, tmp_path, small_disk) -> AsyncIterator[OnSmallDisk]:
    """A host whose data directory is on the small disk, with the chat probe, a test
    channel and the scripted model."""
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        probe, channel = ChatProbe(write_probe_agents(tmp_path / "agents")), RecordingChannel()
        try:
            host = await skald.start(plugins=[probe, channel], enable=[PROBE, CHANNEL], settings=skald.settings("disk/data"))
            admin = await host.admin()
            await configure_models(admin, server)
            yield OnSmallDisk(host, admin, server, probe, channel)
        finally:
            await skald.close()


def database_files(host) -> set[str]:
    return {p.name for p in host.settings.database_dir.iterdir()}


async def test_a_full_disk_refuses_writes_with_507_and_everything_works_again_once_space_is_freed(on_small_disk, small_disk):
    host, admin, server = on_small_disk.host, on_small_disk.admin, on_small_disk.server
    alice = await host.member("alice")
    conversation_id = await new_conversation(alice)
    server.script(MODEL_A, [Reply("First answer.")])
    async with ChatSocket(alice) as socket:
        assert (await socket.send(conversation_id, "before the disk filled", key="key-before-0001"))["type"] == "ack"
        await socket.turn(conversation_id)
        files_before = database_files(host)

        asked = len(server.requests_for(MODEL_A))
        filler = fill(small_disk)
        # Its commit appends to the write-ahead log: a frame the full disk has no page for.
        text = "written while the disk is full"
        response = await alice.post(f"/api/conversations/{conversation_id}/messages", json={"text": text})
        assert response.status_code == 507, response.text
        assert "disk is full" in response.json()["error"] and "not saved" in response.json()["error"]

        photo = b"\x89PNG\r\n\x1a\n" + b"\0" * 200_000
        upload = {"content": photo, "headers": {"X-Filename": "photo.png", "Content-Type": "image/png"}}
        response = await alice.post(f"/api/conversations/{conversation_id}/uploads", **upload)
        assert response.status_code == 507, response.text
        home = host.core.files.home(alice.member["id"])
        assert [p.name for p in home.rglob("*") if p.is_file()] == []  # no partial file left

        refused = await socket.send(conversation_id, text, key="key-while-full-01")
        assert refused["type"] == "error" and refused["code"] == "disk_full" and refused["retry_after"] > 0
        assert refused["idempotency_key"] == "key-while-full-01"
        for n in range(4):  # fresh messages on a settled history, the turn's fast path
            assert (await socket.send(conversation_id, f"also refused {n}", key=f"key-while-full-1{n}"))["code"] == "disk_full"
        # Nothing that was not stored reached the (paid) model.
        assert len(server.requests_for(MODEL_A)) == asked

        response = await admin.post("/api/admin/members", json={"username": "bob", "password": "a long enough password 1"})
        assert response.status_code == 507, response.text
        assert database_files(host) == files_before  # no 0-byte or half-made file of bob's
        assert (await host.client().get("/health")).status_code == 200

        filler.unlink()
        server.script(MODEL_A, [Reply("Second answer.")])
        # The client sends it again with the same key, as its outbox does: stored once.
        assert (await socket.send(conversation_id, text, key="key-while-full-01"))["type"] == "ack"
        await socket.turn(conversation_id)
        assert (await socket.send(conversation_id, text, key="key-while-full-01"))["type"] == "ack"

    transcript = await messages(alice, conversation_id)
    assert [(m["role"], m["content"]) for m in transcript] == [
        ("user", "before the disk filled"), ("assistant", "First answer."), ("user", text), ("assistant", "Second answer."),
    ]
    response = await admin.post("/api/admin/members", json={"username": "bob", "password": "a long enough password 1"})
    assert response.status_code == 201, response.text
    response = await alice.post(f"/api/conversations/{conversation_id}/uploads", **upload)
    assert response.status_code == 201, response.text
    core = host.core
    assert await core.registry.integrity_check() == "ok"
    assert await core.users.owner_db(alice.member["id"]).integrity_check() == "ok"


async def test_a_turn_whose_round_cannot_be_written_ends_saying_why_and_the_next_turn_works(on_small_disk, small_disk):
    host, admin, server, probe = on_small_disk.host, on_small_disk.admin, on_small_disk.server, on_small_disk.probe
    await allow_tool(admin, "wait_read")
    alice = await host.member("alice")
    conversation_id = await new_conversation(alice)
    server.script(MODEL_A, [Reply(tool_calls=[ToolCall("wait_read", {"text": "slow"})])])
    async with ChatSocket(alice) as socket:
        assert (await socket.send(conversation_id, "start a long read"))["type"] == "ack"
        await eventually(probe.waiting.is_set, what="the tool to start")
        filler = fill(small_disk)
        probe.release.set()
        events = await socket.turn(conversation_id)
        [error] = [e for e in events if e["type"] == "error"]
        assert error["code"] == "disk_full" and "disk is full" in error["error"], error
        # The next round's request waits for its placeholder's commit, which the full
        # disk refused: no request the provider would bill with no row to count it by.
        assert len(server.requests_for(MODEL_A)) == 1

        filler.unlink()
        server.script(MODEL_A, [Reply("Back to normal.")])
        assert (await socket.send(conversation_id, "and now?"))["type"] == "ack"
        events = await socket.turn(conversation_id)
        assert [e for e in events if e["type"] == "done"][-1]["content"] == "Back to normal."
    transcript = await messages(alice, conversation_id)
    assert_well_formed(transcript)
    assert [m["content"] for m in transcript if m["role"] == "user"] == ["start a long read", "and now?"]
    assert await host.core.users.owner_db(alice.member["id"]).integrity_check() == "ok"


async def test_a_channel_message_the_full_disk_refused_is_not_kept_and_the_sender_is_told(on_small_disk, small_disk):
    host, server, channel = on_small_disk.host, on_small_disk.server, on_small_disk.channel
    unlocked = (await host.member("alice")).member["id"]
    locked = (await host.create_member("bob"))["id"]  # never logged in: sealed for later
    api = channel.api

    filler = fill(small_disk)
    for member_id in (unlocked, locked):
        refused = await api.send_message(member_id, "sent while the disk is full", idempotency_key="update-7")
        assert refused.status == "refused" and "disk is full" in refused.reason, refused
    assert await host.core.channels.inbox.waiting(locked) == 0

    filler.unlink()
    # The first try may have reached the model before its commit failed (a turn's
    # opening); that answer was dropped, so the one shown is the second.
    server.script(MODEL_A, [Reply("Stored now."), Reply("Stored now.")])
    assert (await api.send_message(unlocked, "sent while the disk is full", idempotency_key="update-7")).status == "accepted"
    assert (await channel.wait_for("answer")).text == "Stored now."
    assert (await api.send_message(locked, "sent while the disk is full", idempotency_key="update-7")).status == "sealed"
    assert await host.core.channels.inbox.waiting(locked) == 1
    store = host.core.chat.live_runtime(unlocked).store
    [conversation] = await store.conversations()
    rows = await store.history((await store.root_frame(conversation["id"])).id)
    assert [(m["role"], m["content"]) for m in rows] == [("user", "sent while the disk is full"), ("assistant", "Stored now.")]


async def test_a_server_started_on_a_full_disk_says_so_in_one_line_and_never_blames_the_key(skald, small_disk):
    """Opening a database in WAL mode needs room for its -shm file; on a full disk that
    fails as an I/O error, which read as "wrong key, or the file is corrupt: quarantine
    it" (crash probe): advice that would set a healthy file aside."""
    host = await skald.start(settings=skald.settings("disk/data"))
    data_dir = host.settings.data_dir
    await skald.close()
    filler = fill(small_disk)
    line, output = refused_serve(data_dir, free_port())
    assert "the disk is full" in line and "free space" in line, line
    assert "wrong key" not in output and "quarantine" not in output
    filler.unlink()


async def test_a_server_killed_then_started_on_a_full_disk_starts_and_says_the_disk_is_full(small_disk):
    """After a kill -9 the databases' -shm files are still there, so the files open on a
    full disk; the start then saved a member's uid map again, unchanged, which failed,
    and the server exited with a traceback (crash probe). It starts, says the disk is
    full, refuses what would write with "disk full", and works once space is freed."""
    from tests.durability.helpers import ADMIN_PASSWORD, ServerProcess, create_member, setup_admin

    data_dir = small_disk / "data"
    server = await ServerProcess(data_dir, small_disk.parent, "before-the-kill").start()
    try:
        admin = await setup_admin(server)
        await create_member(admin, "alice", "alice's passphrase on a small disk")
    finally:
        server.kill()
    filler = fill(small_disk)
    server = await ServerProcess(data_dir, small_disk.parent, "on-a-full-disk").start()
    try:
        assert "Traceback" not in server.output, server.output
        assert "the disk is full: " in server.output, server.output
        refused = await server.client().login("admin", ADMIN_PASSWORD)
        assert refused.status_code == 507 and refused.json()["code"] == "disk_full", refused.text
        assert "Traceback" not in server.output, server.output  # said in a line, not a stack per login
        filler.unlink()
        assert (await server.client().login("admin", ADMIN_PASSWORD)).status_code == 200
    finally:
        server.kill()


async def test_an_answer_a_full_disk_cut_ends_failed_with_its_reason_once_space_is_freed_without_a_new_send(on_small_disk, small_disk):
    """Crash probe (G4, "no half-written state"): the turn's settling write was refused
    too, and the cut answer stayed ``streaming`` with no reason until the member's next
    send (or ``interrupted`` after a restart), so a page said "Interrupted", never that
    the disk was full. Once space is freed it is ended by itself: failed, with the
    disk-full reason, written, then announced, once."""
    host, server = on_small_disk.host, on_small_disk.server
    alice = await host.member("alice")
    conversation_id = await new_conversation(alice)
    server.script(MODEL_A, [Reply(" ".join(f"t{n}" for n in range(300)), token_delay=0.02)])

    async def answers() -> list[dict]:
        return [m for m in await messages(alice, conversation_id) if m["role"] == "assistant"]

    store = host.core.chat.live_runtime(alice.member["id"]).store

    async def checkpointed() -> bool:  # its partial text is in the file (a read shows the live text), as the probe found it
        return bool(await store.db.run(lambda c: c.execute(
            "SELECT 1 FROM messages WHERE conversation_id = ? AND role = 'assistant' AND status = 'streaming' AND content != ''",
            (conversation_id,),
        ).fetchall()))

    async with ChatSocket(alice) as socket:
        assert (await socket.send(conversation_id, "talk slowly"))["type"] == "ack"
        await eventually(checkpointed, what="the answer's first checkpoint")
        filler = fill(small_disk)
        try:
            events = await socket.turn(conversation_id, timeout=60)
            [error] = [e for e in events if e["type"] == "error"]
            assert error["code"] == "disk_full", error
            [cut] = await answers()
            assert cut["status"] == "streaming" and cut["content"], f"the settling write was not refused: the test proves nothing ({cut})"
        finally:
            filler.unlink()

        async def ended() -> bool:
            return [(m["id"], m["status"]) for m in await answers()] == [(cut["id"], "error")]

        await eventually(ended, timeout=30, what=f"the cut answer to end failed, not {await answers()}")
        [answer] = await answers()
        assert answer["reason"]["code"] == "disk_full", answer
        assert answer["content"] == cut["content"], answer  # its text kept
        changed = await socket.wait_event(conversation_id, "branch_changed", start=len(events))
        assert changed["reason"] == "settled", changed
        await asyncio.sleep(RESEND_LAST_SECONDS / 2)  # a second settling or announcement would show by now
        later = [e for e in socket.events if e.get("conversation_id") == conversation_id][len(events):]
        assert [e["type"] for e in later] == ["branch_changed"], later

    transcript = await messages(alice, conversation_id)
    assert [(m["role"], m["status"]) for m in transcript] == [("user", "complete"), ("assistant", "error")], transcript
    assert len(server.requests_for(MODEL_A)) == 1  # ended, not asked again
    assert await host.core.users.owner_db(alice.member["id"]).integrity_check() == "ok"

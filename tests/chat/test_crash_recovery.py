"""Crash mid-turn (check G2; seed 001 "Restart recovery"): the server runs as a
subprocess and is SIGKILLed mid-stream, mid side-effecting tool call and while an
approval is pending. After a restart and the member's login, every conversation is
well-formed, continues as the seed prescribes, and no side-effecting call ran twice.

The tools come from a throwaway distribution found through the ``skald.plugins``
entry point, as a real plugin would be: its package and ``.dist-info`` are written to a
directory only the server subprocess has on ``PYTHONPATH``, and the admin enables it.
Its tools append one JSON line per run to marker files, so "ran once" is counted
outside the process that died. The scripted model server runs in the test process.
"""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from durability.helpers import Servers, create_member, install_distribution, setup_admin
from skald_host.core.agent.runtime import RESUME_LIMIT, RESUMED_NOTE
from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall

from .support import MODEL_A, ChatSocket, allow_tool, assert_well_formed, configure_models, eventually, messages, new_conversation, stored_messages

PLUGIN = "crashprobe"
PASSWORD = "alice's passphrase for crash tests"

PLUGIN_SOURCE = '''
"""Tools with a visible effect: each run appends a line to a marker file."""
import asyncio
import json
from pathlib import Path

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool

MARKERS = Path({markers!r})
SCHEMA = {{"type": "object", "properties": {{"text": {{"type": "string"}}, "block": {{"type": "boolean"}}}}}}


def _append(name, ctx, args):
    with open(MARKERS / name, "a", encoding="utf-8") as out:
        out.write(json.dumps({{"member": ctx.member_id, "conversation": ctx.conversation_id, "args": dict(args)}}) + "\\n")
        out.flush()


async def append_marker(args, ctx):
    _append("side_effects.jsonl", ctx, args)
    if args.get("block"):
        await asyncio.Event().wait()  # until the process dies
    return "appended " + str(args.get("text"))


async def read_probe(args, ctx):
    first = not (MARKERS / "reads.jsonl").exists()
    _append("reads.jsonl", ctx, args)
    if first:
        await asyncio.Event().wait()
    return "read " + str(args.get("text"))


@hookimpl
def plugin_info():
    return PluginInfo(id="crashprobe", title="Crash probe", spec=">=1.0,<2")


@hookimpl
def register_tools(register):
    register(Tool("append_marker", "Append a line (a side effect).", SCHEMA, append_marker, restart="mark_interrupted"))
    register(Tool("read_probe", "Read something (no side effect).", SCHEMA, read_probe, concurrency_safe=True, restart="rerun"))
'''


@pytest.fixture
def distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin distribution, importable by the server subprocess only; the marker
    directory its tools write to."""
    site, markers = tmp_path / "site", tmp_path / "markers"
    markers.mkdir()
    install_distribution(site, "crashprobe", PLUGIN, textwrap.dedent(PLUGIN_SOURCE.format(markers=str(markers))))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return markers


async def first_run(servers: Servers, model: ScriptedModelServer):
    """A server with the plugin enabled by the admin, the scripted model configured,
    and alice logged in."""
    server = await servers.start()
    admin = await setup_admin(server)
    response = await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})
    assert response.status_code == 200, response.text
    await configure_models(admin, model)
    await create_member(admin, "alice", PASSWORD)
    return server, admin, await server.login("alice", PASSWORD)


async def restart(servers: Servers, server) -> Any:
    server.kill()
    again = await servers.start()
    return again, await again.login("alice", PASSWORD)


def interrupted_rows(data_dir: Path) -> int:
    """Request log rows of requests cut short, read beside the running server."""
    import sqlite3

    conn = sqlite3.connect(f"{(data_dir / 'database' / 'system.db').absolute().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM llm_requests WHERE status = 'interrupted'").fetchone()[0]
    finally:
        conn.close()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def all_well_formed(client) -> None:
    for item in (await client.get("/api/conversations")).json()["conversations"]:
        assert_well_formed(await messages(client, item["id"]))


async def test_kill_mid_stream_keeps_the_partial_as_interrupted_and_the_turn_continues_in_every_frame(servers, model, distribution):
    server, _, alice = await first_run(servers, model)

    def before_the_kill(request):
        last = request.messages[-1]
        if last["content"] == "Delegate it.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Research slowly."})])
        return Hang(text="the partial answer", token_delay=0.02)  # the root's answer, and the researcher's

    model.responder = before_the_kill
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Tell me everything.")
        delegating = await new_conversation(alice)
        await sock.send(delegating, "Delegate it.")
        await sock.wait_event(delegating, "token", depth=1, delta=" answer")

    async def checkpointed() -> bool:
        last = (await stored_messages(alice, cid))[-1]
        return last["status"] == "streaming" and last["content"] == "the partial answer"

    await eventually(checkpointed, what="the partial answer to be checkpointed")

    def after_the_restart(request):
        last = request.messages[-1]
        if last["role"] == "tool":
            return Reply("The researcher found: " + last["content"])
        return Reply("Research result." if last["content"] == "Research slowly." else "A complete answer.")

    model.responder = after_the_restart
    server, alice = await restart(servers, server)
    async with ChatSocket(alice) as sock:  # connecting resumes the member's chat
        await sock.wait_event(cid, "turn_finished")
        await sock.wait_event(delegating, "turn_finished")

    transcript = await messages(alice, cid)
    assert [(m["role"], m["status"], m["content"]) for m in transcript] == [
        ("user", "complete", "Tell me everything."),
        ("assistant", "interrupted", "the partial answer"),
        ("note", "complete", RESUMED_NOTE),  # the second request for the message, never silent
        ("assistant", "complete", "A complete answer."),
    ]
    assert transcript[2]["reason"] == {"code": "answer_resumed", "values": {}}
    assert "resuming 2 interrupted conversation(s) (a restart, or their file locked), 2 with an answer cut off that is asked for again" in server.output
    # The two requests the kill cut are rows of the request log, as their repeats are (a
    # provider may bill both): recovery writes them, nothing could before the kill.
    await eventually(lambda: interrupted_rows(servers.data_dir) == 2, what="the cut requests' rows")
    assert [m["role"] for m in await messages(alice, delegating)].count("note") == 1  # cut in its sub-agent's frame
    retried = [r for r in model.requests_for(MODEL_A)[3:] if r.messages[-1]["content"] == "Tell me everything."]
    assert [r.messages[1:] for r in retried] == [[{"role": "user", "content": "Tell me everything."}]]  # no partial
    # The sub-agent's frame was resumed as itself (its own prompt, no tools), not re-spawned.
    child = [r for r in model.requests_for(MODEL_A)[3:] if r.messages[-1]["content"] == "Research slowly."]
    assert len(child) == 1 and "tools" not in child[0].body
    assert child[0].messages[0]["content"].startswith("You are a focused research helper")
    delegated = await messages(alice, delegating)
    assert delegated[1]["tool_calls"][0]["status"] == "done" and delegated[1]["tool_calls"][0]["result"] == "Research result."
    assert delegated[-1]["content"] == "The researcher found: Research result."
    await all_well_formed(alice)


def interrupted_dates(data_dir: Path) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(f"{(data_dir / 'database' / 'system.db').absolute().as_uri()}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT created_at FROM llm_requests WHERE status = 'interrupted'")]
    finally:
        conn.close()


async def test_a_request_cut_by_a_crash_is_logged_at_recovery_dated_when_it_was_sent(servers, model, distribution):
    """Recovery writes the cut request's row at the member's next sign-in, maybe the next
    day: the row says when the request was sent (its answer's row), so the usage page
    counts it on that day, not on the day the member came back."""
    server, _, alice = await first_run(servers, model)
    model.responder = lambda request: Hang(text="the partial answer", token_delay=0.02)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Tell me everything.")

        async def checkpointed() -> bool:
            return (await stored_messages(alice, cid))[-1]["content"] == "the partial answer"

        await eventually(checkpointed, what="the partial answer to be checkpointed")
    sent_at = (await stored_messages(alice, cid))[-1]["created_at"]
    server.kill()
    await asyncio.sleep(1.2)  # the member comes back later
    model.responder = lambda request: Reply("A complete answer.")
    server = await servers.start()
    alice = await server.login("alice", PASSWORD)
    async with ChatSocket(alice) as sock:
        await sock.wait_event(cid, "turn_finished")
    await eventually(lambda: len(interrupted_dates(servers.data_dir)) == 1, what="the cut request's row")
    assert interrupted_dates(servers.data_dir) == [sent_at]


async def test_an_answer_cut_off_at_every_start_is_asked_for_three_times_then_fails_with_retry(servers, model, distribution):
    """A crash loop (a server killed while it writes the same answer, start after start)
    must not bill the provider on every start: recovery asks again RESUME_LIMIT times,
    then the turn fails, saying why, and the member's Retry asks again."""
    server, _, alice = await first_run(servers, model)
    model.responder = lambda request: Hang(text="a partial", token_delay=0.01)

    def asked() -> int:
        return sum(1 for r in model.requests_for(MODEL_A) if r.messages[-1]["content"] == "Answer this.")

    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Answer this.")
        await eventually(lambda: asked() == 1, what="the first request")
    for times in range(2, RESUME_LIMIT + 2):
        server, alice = await restart(servers, server)
        async with ChatSocket(alice):  # connecting resumes the member's chat
            await eventually(lambda: asked() == times, what=f"request {times}, asked for again")

    async def checkpointed() -> bool:
        return (await stored_messages(alice, cid))[-1]["content"] == "a partial"

    await eventually(checkpointed, what="the third partial answer to be checkpointed")
    server, alice = await restart(servers, server)
    async with ChatSocket(alice):
        await eventually(lambda: "are not asked for again (Retry asks)" in server.output, what="recovery giving up")
    transcript = await messages(alice, cid)
    assert asked() == RESUME_LIMIT + 1
    assert [(m["role"], m["status"]) for m in transcript] == [("user", "complete")] + [
        ("assistant", "interrupted"), ("note", "complete")] * RESUME_LIMIT + [("assistant", "interrupted"), ("assistant", "error")]
    assert transcript[-2]["content"] == "a partial"  # the third cut's partial answer is kept too
    assert transcript[-1]["reason"] == {"code": "resume_limit", "values": {"times": RESUME_LIMIT + 1}}
    assert_well_formed(transcript)

    model.responder = lambda request: Reply("At last.")
    async with ChatSocket(alice) as sock:
        response = await alice.post(f"/api/conversations/{cid}/retry")
        assert response.status_code == 202, response.text
        await sock.wait_event(cid, "turn_finished")
    assert asked() == RESUME_LIMIT + 2
    assert [(m["role"], m["status"], m["content"]) for m in await messages(alice, cid)] == [
        ("user", "complete", "Answer this."), ("assistant", "complete", "At last.")]


async def test_a_message_queued_behind_an_answer_given_up_waits_for_its_retry(servers, model, distribution):
    """The crash loop above with a message queued behind the cut answer: recovery gave
    up, then answered the queued message at once, so the failure was no longer the
    last turn and its Retry was refused (crash-kill probe: the first question was never
    answered). The queued message now waits; Retry answers the first, then it."""
    server, _, alice = await first_run(servers, model)
    model.responder = lambda request: Hang(text="a partial", token_delay=0.01)

    def asked(text: str) -> int:
        return sum(1 for r in model.requests_for(MODEL_A) if r.messages[-1]["content"] == text)

    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First question.")
        await eventually(lambda: asked("First question.") == 1, what="the first request")
        ack = await sock.send(cid, "Second question.")
        assert ack["queued"], ack
    for times in range(2, RESUME_LIMIT + 2):
        server, alice = await restart(servers, server)
        async with ChatSocket(alice):
            await eventually(lambda: asked("First question.") == times, what=f"request {times}, asked for again")

    async def checkpointed() -> bool:
        return (await stored_messages(alice, cid))[-1]["content"] == "a partial"

    await eventually(checkpointed, what="the last partial answer to be checkpointed")
    server, alice = await restart(servers, server)
    async with ChatSocket(alice):
        await eventually(lambda: "are not asked for again (Retry asks)" in server.output, what="recovery giving up")
        await asyncio.sleep(0.5)  # time for a wrongly started turn to ask
    assert asked("Second question.") == 0  # waiting behind the failure, not answered past it
    transcript = await messages(alice, cid)
    assert transcript[-1]["reason"] == {"code": "resume_limit", "values": {"times": RESUME_LIMIT + 1}}

    model.responder = lambda request: Reply(f"Answer to: {request.last_user_text}")
    async with ChatSocket(alice) as sock:
        response = await alice.post(f"/api/conversations/{cid}/retry")
        assert response.status_code == 202, response.text
        await eventually(lambda: asked("Second question.") == 1, what="the queued message's turn after the retried one")
        await sock.wait_event(cid, "turn_finished")
    await eventually(lambda: messages_done(alice, cid), what="both answers stored")
    assert [(m["role"], m["content"]) for m in await messages(alice, cid)] == [
        ("user", "First question."), ("assistant", "Answer to: First question."),
        ("user", "Second question."), ("assistant", "Answer to: Second question.")]


async def messages_done(client, conversation_id: str) -> bool:
    rows = await messages(client, conversation_id)
    return bool(rows) and rows[-1]["role"] == "assistant" and rows[-1]["status"] == "complete" and len(rows) >= 4


async def test_a_sub_agents_answer_cut_off_at_every_start_is_given_up_like_the_top_frames(servers, model, distribution):
    """The crash loop of the test above, inside a delegation: the researcher's answer
    is asked for again RESUME_LIMIT times, then the turn fails with Retry. Each start
    used to bill the provider for the researcher again, without end."""
    server, _, alice = await first_run(servers, model)

    def respond(request):
        if request.messages[-1]["content"] == "Delegate it.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Research slowly."})])
        return Hang(text="the partial research", token_delay=0.01)

    model.responder = respond

    def asked() -> int:
        return sum(1 for r in model.requests_for(MODEL_A) if r.messages[-1]["content"] == "Research slowly.")

    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Delegate it.")
        await eventually(lambda: asked() == 1, what="the researcher's first request")
    for times in range(2, RESUME_LIMIT + 2):
        server, alice = await restart(servers, server)
        async with ChatSocket(alice):
            await eventually(lambda: asked() == times, what=f"the researcher's request {times}, asked for again")
    server, alice = await restart(servers, server)
    async with ChatSocket(alice):
        await eventually(lambda: "are not asked for again (Retry asks)" in server.output, what="recovery giving up")
    transcript = await messages(alice, cid)
    assert asked() == RESUME_LIMIT + 1
    assert transcript[-1]["role"] == "assistant" and transcript[-1]["status"] == "error"
    assert transcript[-1]["reason"] == {"code": "resume_limit", "values": {"times": RESUME_LIMIT + 1}}
    delegations = [c for m in transcript for c in (m.get("tool_calls") or []) if c["name"] == "execute_task"]
    assert delegations and all(c["status"] == "interrupted" for c in delegations), transcript
    assert not (await alice.get(f"/api/conversations/{cid}")).json()["running"]
    assert_well_formed(transcript)
    server, alice = await restart(servers, server)  # and nothing is asked at the next start either
    async with ChatSocket(alice):
        await alice.get(f"/api/conversations/{cid}")  # the member's chat is up: recovery has run
        await asyncio.sleep(1)  # what it would have started had a second to ask
    assert asked() == RESUME_LIMIT + 1
    assert "resuming" not in server.output


async def test_kill_mid_side_effecting_call_marks_it_interrupted_never_reruns_it_and_reruns_a_read(servers, model, distribution):
    server, admin, alice = await first_run(servers, model)
    await allow_tool(admin, "read_probe")
    write = Reply(tool_calls=[ToolCall("append_marker", {"text": "once", "block": True})])
    read = Reply(tool_calls=[ToolCall("read_probe", {"text": "weather"})])
    model.script(MODEL_A, [write, read])
    async with ChatSocket(alice) as sock:
        writer = await new_conversation(alice)
        await sock.send(writer, "Append once.")
        card = await sock.wait_event(writer, "approval_required")
        await sock.approve(card["approval_id"])
        await sock.wait_event(writer, "tool_start")
        reader = await new_conversation(alice)
        await sock.send(reader, "Read the weather.")
        await sock.wait_event(reader, "tool_start")
    await eventually(lambda: len(lines(distribution / "side_effects.jsonl")) == 1 and len(lines(distribution / "reads.jsonl")) == 1)

    # The recovered turns run concurrently, so the model tells them apart by their history.
    def after_restart(request):
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        return Reply("I will not repeat the write." if results[0].startswith("Interrupted") else "It is sunny.")

    model.responder = after_restart
    server, alice = await restart(servers, server)
    async with ChatSocket(alice) as sock:
        await sock.wait_event(writer, "turn_finished")
        await sock.wait_event(reader, "turn_finished")

    assert len(lines(distribution / "side_effects.jsonl")) == 1  # never re-run
    assert len(lines(distribution / "reads.jsonl")) == 2  # a pure read is
    written = await messages(alice, writer)
    call = written[1]["tool_calls"][0]
    assert call["status"] == "interrupted" and "not run again" in call["result"]
    assert written[-1]["content"] == "I will not repeat the write."
    read_back = await messages(alice, reader)
    assert read_back[1]["tool_calls"][0]["status"] == "done" and read_back[1]["tool_calls"][0]["result"] == "read weather"
    assert read_back[-1]["content"] == "It is sunny."
    assert (await alice.get("/api/approvals")).json()["approvals"] == []
    await all_well_formed(alice)


async def test_kill_while_an_approval_is_pending_keeps_it_pending_and_approving_runs_it_in_the_members_context(
    servers, model, distribution
):
    server, _, alice = await first_run(servers, model)
    model.script(MODEL_A, [Reply(tool_calls=[ToolCall("append_marker", {"text": "after restart"})]), Reply("Appended.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Append after restart.")
        card = await sock.wait_event(cid, "approval_required")
    server, alice = await restart(servers, server)

    async with ChatSocket(alice) as sock:
        again = await sock.wait_event(cid, "approval_required")  # the card reappears on connecting
        assert (again["approval_id"], again["call_id"]) == (card["approval_id"], card["call_id"])
        pending = (await alice.get("/api/approvals")).json()["approvals"]
        assert [(p["id"], p["tool"], p["status"]) for p in pending] == [(card["approval_id"], "append_marker", "pending")]
        assert lines(distribution / "side_effects.jsonl") == []
        response = await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})
        assert response.status_code == 200
        await sock.wait_event(cid, "turn_finished")

    [line] = lines(distribution / "side_effects.jsonl")
    assert line == {"member": alice.member["id"], "conversation": cid, "args": {"text": "after restart"}}
    transcript = await messages(alice, cid)
    assert transcript[1]["tool_calls"][0]["status"] == "done"
    assert transcript[-1]["content"] == "Appended."
    assert model.requests_for(MODEL_A)[1].messages[-1]["content"] == "appended after restart"
    assert (await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})).status_code == 409
    await all_well_formed(alice)


async def test_kill_after_the_message_and_its_placeholder_commit_answers_the_message_once(servers, model, distribution):
    """The member's message and the turn's streaming placeholder are one commit, acked
    before the model is asked. Killed while the model has the request and no token yet
    (the durable state is that commit's), the restart marks the empty placeholder
    interrupted, keeps it out of the model's view, and answers the message once."""
    server, _, alice = await first_run(servers, model)
    model.responder = lambda request: Hang()
    before = len(model.requests_for(MODEL_A))
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        ack = await sock.send(cid, "Are you there?", key="placeholder-commit-1")
        assert ack["queued"] is False and ack["message_id"]
        await eventually(lambda: len(model.requests_for(MODEL_A)) > before, what="the model to get the request")
    stored = await messages(alice, cid)
    assert [(m["role"], m["status"], m["content"]) for m in stored] == [("user", "complete", "Are you there?"), ("assistant", "streaming", "")]

    model.responder = lambda request: Reply("Yes, here.")
    server, alice = await restart(servers, server)
    async with ChatSocket(alice) as sock:  # connecting resumes the member's chat
        await sock.wait_event(cid, "turn_finished")
        again = await sock.send(cid, "Are you there?", key="placeholder-commit-1")  # the retry of an acked send
        assert again.get("duplicate") is True

    transcript = await messages(alice, cid)
    assert [(m["role"], m["status"], m["content"]) for m in transcript] == [
        ("user", "complete", "Are you there?"),
        ("assistant", "interrupted", ""),
        ("note", "complete", RESUMED_NOTE),  # the model had the request: it is sent again, and said
        ("assistant", "complete", "Yes, here."),
    ]
    answered = model.requests_for(MODEL_A)[before + 1:]
    assert [r.messages[1:] for r in answered] == [[{"role": "user", "content": "Are you there?"}]]
    await all_well_formed(alice)

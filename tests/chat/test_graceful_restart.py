"""A graceful stop (SIGTERM, or the member's file locking at logout) cancels the running
turns, but it is not the member's /stop: it must lose no more than a crash does. The
partial answer is kept as interrupted, a pending approval stays pending, a running
side-effecting call is not re-run, and the next start continues each conversation."""

from __future__ import annotations

import asyncio

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.core.agent.runtime import RESUMED_NOTE
from skald_host.testing import Hang, Reply, ToolCall

from .support import PROBE, ChatSocket, allow_tool, assert_well_formed, configure_models, eventually, messages, new_conversation


async def test_graceful_restart_keeps_partial_answers_pending_approvals_and_running_calls_for_recovery(chat, skald):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait")
    alice = await chat.host.member("alice")

    def first_run(request):
        asked = request.last_user_text
        if asked == "Stream.":
            return Hang(text="half an answer", token_delay=0.01)
        if asked == "Approve later.":
            return Reply(tool_calls=[ToolCall("write_note", {"text": "later"})])
        return Reply(tool_calls=[ToolCall("wait", {"text": "long"})])

    chat.server.responder = first_run
    async with ChatSocket(alice) as sock:
        streaming = await new_conversation(alice)
        approving = await new_conversation(alice)
        waiting = await new_conversation(alice)
        await sock.send(streaming, "Stream.")
        await sock.send(approving, "Approve later.")
        await sock.send(waiting, "Wait.")
        await sock.wait_event(streaming, "token", delta=" answer")
        card = await sock.wait_event(approving, "approval_required")
        await asyncio.wait_for(chat.probe.waiting.wait(), 10)
    await chat.host.stop()
    assert chat.probe.wait_cancelled == 1

    def second_run(request):
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        if results:
            return Reply("Noted: " + results[-1])
        return Reply("The whole answer.")

    chat.server.responder = second_run
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        await sock.wait_event(streaming, "turn_finished")
        await sock.wait_event(waiting, "turn_finished")
        assert (await sock.wait_event(approving, "approval_required"))["approval_id"] == card["approval_id"]
        pending = (await alice.get("/api/approvals")).json()["approvals"]
        assert [p["id"] for p in pending] == [card["approval_id"]]
        assert (await alice.post(f"/api/approvals/{card['approval_id']}", json={"decision": "approve"})).status_code == 200
        await sock.wait_event(approving, "turn_finished")

    stream = await messages(alice, streaming)
    # Asked for again after the restart, and said so in the conversation, as after a crash.
    assert [(m["role"], m["status"], m["content"]) for m in stream[1:]] == [
        ("assistant", "interrupted", "half an answer"),
        ("note", "complete", RESUMED_NOTE),
        ("assistant", "complete", "The whole answer."),
    ]
    assert stream[2]["reason"] == {"code": "answer_resumed", "values": {}}
    approved = await messages(alice, approving)
    assert approved[1]["tool_calls"][0]["status"] == "done" and chat.probe.writes == [{"text": "later"}]
    waited = await messages(alice, waiting)
    assert waited[1]["tool_calls"][0]["status"] == "interrupted"
    assert chat.probe.wait_cancelled == 1 and not chat.probe.release.is_set()  # "wait" was not run again
    for transcript in (stream, approved, waited):
        assert_well_formed(transcript)
    # The request the stop cut is in the request log as interrupted (recovery writes it,
    # as after a crash): the one it made again is a repeat to see, never a silent one.
    async def interrupted() -> list[str]:
        statuses = await host.core.registry.run(lambda c: [r[0] for r in c.execute("SELECT status FROM llm_requests")])
        return statuses if "interrupted" in statuses else []

    statuses = await eventually(interrupted, what="the cut request's row")
    assert statuses.count("interrupted") == 1 and "stopped" not in statuses


async def test_a_graceful_stop_during_a_foreground_run_takes_the_run_up_again_after_the_restart(chat, skald):
    """A stop while the caller waits on a foreground sub-agent cancels the run, but the
    member did not: the caller's call must not be answered "cancelled" (terminal, and
    the caller would answer from it). After the restart the run is taken up, as after
    a crash, and the caller answers from its real result."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")

    def before_the_stop(request):
        if request.last_user_text == "Delegate it.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Research slowly."})])
        return Hang(text="the partial research", token_delay=0.02)

    chat.server.responder = before_the_stop
    async with ChatSocket(alice) as sock:
        delegating = await new_conversation(alice)
        await sock.send(delegating, "Delegate it.")
        await sock.wait_event(delegating, "token", depth=1, delta=" research")
    await chat.host.stop()

    def after_the_restart(request):
        last = request.messages[-1]
        if last["role"] == "tool":
            return Reply("The researcher found: " + last["content"])
        return Reply("Research result." if last["content"] == "Research slowly." else "A complete answer.")

    chat.server.responder = after_the_restart
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        await sock.wait_event(delegating, "turn_finished")
    delegated = await messages(alice, delegating)
    call = delegated[1]["tool_calls"][0]
    assert (call["status"], call["result"]) == ("done", "Research result."), call
    assert delegated[-1]["content"] == "The researcher found: Research result."
    assert not any("cancelled" in (m["content"] or "") for m in delegated)
    assert_well_formed(delegated)


class SessionTool:
    """Like a connector: its tool runs on a session the plugin's shutdown closes, and a
    call in flight then fails with the session's own error."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.running = asyncio.Event()
        self.after_stop: list[str] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="session", title="Session", spec=">=1.2,<2")

    @hookimpl
    def register_tools(self, register) -> None:
        async def remote(args, ctx):
            self.running.set()
            await self.closed.wait()
            raise RuntimeError("the session was closed under the call")

        register(Tool("remote_call", "A call on a session.", {"type": "object", "properties": {}}, remote))

    @hookimpl
    def shutdown(self) -> None:
        self.closed.set()


async def test_a_graceful_stop_interrupts_a_call_before_its_plugin_stops(chat, skald):
    """Turns are cut before plugins stop: a connector's shutdown closing the session of
    a call in flight made the call the tool's failure (an error id on the plugin's page,
    and one more model round during the stop), where kill -9 left it interrupted."""
    session = SessionTool()
    await configure_models(chat.admin, chat.server)
    await chat.host.stop()
    host = await skald.start(plugins=[chat.probe, session], settings=chat.host.settings, enable=[PROBE, "session"])
    await allow_tool(await host.admin(), "remote_call")
    alice = await host.member("alice")
    chat.server.responder = lambda request: Reply("After the call.") if request.messages[-1]["role"] == "tool" else Reply(
        tool_calls=[ToolCall("remote_call", {})])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Call it.")
        await asyncio.wait_for(session.running.wait(), 10)
    asked = len(chat.server.requests)
    status = host.core.plugins.status("session")
    await host.stop()
    assert len(chat.server.requests) == asked  # no model round during the stop
    assert list(status.failures) == []
    host = await skald.start(plugins=[chat.probe, SessionTool()], settings=chat.host.settings, enable=[PROBE, "session"])
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        await sock.wait_event(cid, "turn_finished")
    call = (await messages(alice, cid))[1]["tool_calls"][0]
    assert call["status"] == "interrupted", call

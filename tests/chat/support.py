"""Shared pieces of the chat end-to-end tests: configuring models as the admin does,
a member's WebSocket that collects chat events turn by turn, a background sub-agent run
to cancel or stop and readers of the runs and their inbox, a throwaway plugin with
tools and agent directories, and readers of a conversation's stored state.

Every test talks to a real host over HTTP and WebSocket; the host talks to a
``ScriptedModelServer`` through the real ``openai`` SDK, so what the model was sent is
asserted on the wire (``server.requests``), never on an internal call.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import yaml

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool, ToolContext
from skald_host.core.agent.subagents.coordinator import SubagentCoordinator
from skald_host.testing import Hang, Reply, ScriptedModelServer, SkaldClient, ToolCall

API_KEY = "sk-scripted-chat-tests"
PROBE = "chatprobe"
TIMEOUT = 10.0

#: The model every unpinned agent gets first, and the one fallback goes to.
MODEL_A, MODEL_B = "model-a", "model-b"
#: Models the pinned task agents of ``ChatProbe`` use (one script each, so children
#: running concurrently cannot take each other's answers).
PINNED = {"alpha": "m-alpha", "beta": "m-beta", "gamma": "m-gamma"}
ALL_MODELS = (MODEL_A, MODEL_B, *PINNED.values())


# -- models ------------------------------------------------------------------------------


async def configure_models(
    admin: SkaldClient,
    server: ScriptedModelServer,
    models: Sequence[str] = (MODEL_A,),
    *,
    api_key: str | None = API_KEY,
    name: str = "scripted",
) -> dict[str, str]:
    """One provider at the scripted server and ``models`` in fallback order (the first
    has priority 1), as the admin's Models page does it; model name → row id."""
    response = await admin.post("/api/admin/models/providers", json={"name": name, "base_url": server.base_url, "api_key": api_key})
    assert response.status_code == 201, response.text
    provider = response.json()
    assert provider["api_key"] != api_key  # write-only: it comes back masked
    ids = {}
    for priority, model in enumerate(models, start=1):
        body = {"provider_id": provider["id"], "model": model, "priority": priority, "strength": 60}
        response = await admin.post("/api/admin/models/entries", json=body)
        assert response.status_code == 201, response.text
        ids[model] = response.json()["id"]
    return ids


async def allow_tool(admin: SkaldClient, tool: str) -> int:
    response = await admin.post("/api/admin/approval-rules", json={"tool_pattern": tool, "action": "allow", "priority": 50})
    assert response.status_code == 201, response.text
    return response.json()["id"]


# -- conversations over HTTP -----------------------------------------------------------------


async def member_with_models(
    server: Any, model: ScriptedModelServer, password: str, *, rule: Mapping[str, Any] | None = None, plugin: str | None = None,
) -> tuple[SkaldClient, str]:
    """alice on a newly set-up server (a ``durability.helpers`` subprocess, one the test
    may kill): its admin enabled ``plugin``, configured the scripted models and added
    ``rule`` (an approval rule) when given. Her signed-in client and her id."""
    from durability.helpers import create_member, setup_admin

    admin = await setup_admin(server)
    if plugin is not None:
        response = await admin.put(f"/api/admin/plugins/{plugin}/enabled", json={"enabled": True})
        assert response.status_code == 200, response.text
    await configure_models(admin, model)
    if rule is not None:
        response = await admin.post("/api/admin/approval-rules", json=dict(rule))
        assert response.status_code == 201, response.text
    alice_id = await create_member(admin, "alice", password)
    return await server.login("alice", password), alice_id


async def new_conversation(client: SkaldClient, agent: str | None = None, title: str = "") -> str:
    body: dict[str, Any] = {"title": title}
    if agent is not None:
        body["agent"] = agent
    response = await client.post("/api/conversations", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def conversation(client: SkaldClient, conversation_id: str) -> dict[str, Any]:
    """The whole conversation (``all=1``): the tests check every row, not the page's part."""
    response = await client.get(f"/api/conversations/{conversation_id}?all=1")
    assert response.status_code == 200, response.text
    return response.json()


async def messages(client: SkaldClient, conversation_id: str) -> list[dict[str, Any]]:
    return (await conversation(client, conversation_id))["messages"]


async def stored_messages(client: SkaldClient, conversation_id: str) -> list[dict[str, Any]]:
    """The messages as the member's file holds them (the JSON export reads the file), an
    answer still streaming as last checkpointed: a read of the conversation gives its
    live text instead, which a kill then would not leave behind."""
    response = await client.get(f"/api/conversations/{conversation_id}/export", params={"format": "json"})
    assert response.status_code == 200, response.text
    return response.json()["messages"]


async def eventually(check: Callable[[], Any], *, timeout: float = TIMEOUT, what: str = "the condition") -> Any:
    """Poll an async or sync ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        await asyncio.sleep(0.02)


def assert_well_formed(transcript: list[dict[str, Any]]) -> None:
    """Nothing half-done is left: no message still streaming, every tool call of every
    assistant message in a terminal state."""
    for message in transcript:
        assert message["status"] != "streaming", message
        for call in message["tool_calls"]:
            assert call["status"] in ("done", "error", "denied", "cancelled", "interrupted"), call


# -- the member's socket ---------------------------------------------------------------------


class ChatSocket:
    """A member's WebSocket. Every frame is kept; chat events (the ``data`` of each
    ``{"type": "event", "event": {"kind": "chat", ...}}``, or of each in an ``events``
    burst) in ``events``, command replies
    in order in a queue, so ``command`` returns the reply to the command it sent."""

    def __init__(self, client: SkaldClient) -> None:
        self.client = client
        self.raw: list[str] = []
        self.events: list[dict[str, Any]] = []
        self._replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._cursor: dict[str, int] = {}

    async def __aenter__(self) -> "ChatSocket":
        self._connection = self.client.ws()
        self.ws = await self._connection.__aenter__()
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        await self._connection.__aexit__(*exc)

    async def _read(self) -> None:
        async for raw in self.ws:
            self.raw.append(raw)
            frame = json.loads(raw)
            if frame.get("type") in ("event", "events"):
                for event in frame["events"] if frame["type"] == "events" else [frame["event"]]:  # a burst comes as one
                    if event["kind"] == "chat":
                        self.events.append({**event["data"], "_at": time.monotonic()})
            else:
                self._replies.put_nowait(frame)
            self._changed.set()

    async def command(self, **message: Any) -> dict[str, Any]:
        await self.ws.send(json.dumps(message))
        return await asyncio.wait_for(self._replies.get(), TIMEOUT)

    async def send(self, conversation_id: str, text: str, key: str | None = None) -> dict[str, Any]:
        message = {"type": "send", "conversation_id": conversation_id, "text": text}
        if key is not None:
            message["idempotency_key"] = key
        return await self.command(**message)

    async def stop(self, conversation_id: str) -> dict[str, Any]:
        return await self.command(type="stop", conversation_id=conversation_id)

    async def approve(self, approval_id: str, decision: str = "approve") -> dict[str, Any]:
        return await self.command(type="approve", approval_id=approval_id, decision=decision)

    async def wait_event(
        self, conversation_id: str | None = None, type: str | None = None, *, start: int = 0, timeout: float = TIMEOUT, **match: Any
    ) -> dict[str, Any]:
        """The first chat event at index ≥ ``start`` with these fields."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[start:]:
                if conversation_id is not None and event.get("conversation_id") != conversation_id:
                    continue
                if type is not None and event.get("type") != type:
                    continue
                if all(event.get(k) == v for k, v in match.items()):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen = [(e.get("type"), e.get("conversation_id", "")[:6]) for e in self.events[start:]]
                raise AssertionError(f"no {type or 'chat'} event {match or ''} within {timeout} s; saw {seen}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                pass

    async def turn(self, conversation_id: str, *, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
        """This conversation's events from the end of the last turn collected here up
        to and including the next ``turn_finished``."""
        start = self._cursor.get(conversation_id, 0)
        finished = await self.wait_event(conversation_id, "turn_finished", start=start, timeout=timeout)
        end = self.events.index(finished) + 1
        self._cursor[conversation_id] = end
        return [e for e in self.events[start:end] if e.get("conversation_id") == conversation_id]


def types(events: Iterable[Mapping[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


# -- sub-agents ------------------------------------------------------------------------------

#: How a continuation turn's hidden trigger (the background results it delivers) begins.
TRIGGER = "[Background updates."
#: The task ``delegate_a_slow_task`` hands to the researcher in the background.
SLOW_TASK = "Slow task."


def last(request: Any) -> dict[str, Any]:
    return request.messages[-1]


def offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.tools or []}


async def runs(client: SkaldClient, cid: str, strip: bool = False) -> list[dict[str, Any]]:
    response = await client.get(f"/api/conversations/{cid}/runs" + ("?strip=1" if strip else ""))
    assert response.status_code == 200, response.text
    return response.json()["runs"]


async def run(client: SkaldClient, run_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/agent-runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()


def coordinator(chat: Any, member: SkaldClient) -> SubagentCoordinator:
    runtime = chat.host.core.chat.live_runtime(member.member["id"])
    assert runtime is not None
    return runtime.subagents


def delegate_a_slow_task(request: Any) -> Reply | Hang:
    """A responder: the root delegates ``SLOW_TASK`` to the researcher in the background
    and says "Started." once the call returns; the run's request streams "thinking" and
    never ends, so the run is still running when the test cancels or stops it."""
    if last(request)["content"] == SLOW_TASK:
        return Hang(text="thinking")
    if last(request)["role"] == "tool":
        return Reply("Started.")
    return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": SLOW_TASK, "mode": "background"})])


async def start_a_slow_task(chat: Any, member: SkaldClient, sock: ChatSocket) -> tuple[str, dict[str, Any]]:
    """"Go." in a new conversation of ``member``'s, answered by a responder built on
    ``delegate_a_slow_task``; returns once that turn has ended, the run has started and
    its request is at the model: the conversation's id and the run's ``agent_start``."""
    cid = await new_conversation(member)
    await sock.send(cid, "Go.")
    await sock.turn(cid)
    started = await sock.wait_event(cid, "agent_start")
    await eventually(lambda: any(last(r)["content"] == SLOW_TASK for r in chat.server.requests_for(MODEL_A)), what="the run's request")
    return cid, started


async def cancel_run(member: SkaldClient, sock: ChatSocket, cid: str, run_id: str) -> dict[str, Any]:
    """The member's Cancel on a run's box, and the ``agent_done`` that announces its end."""
    response = await member.post(f"/api/agent-runs/{run_id}/cancel")
    assert response.json() == {"cancelled": True}
    return await sock.wait_event(cid, "agent_done", run_id=run_id)


async def inbox_statuses(chat: Any, member: SkaldClient) -> list[str]:
    """The status of each of the member's sub-agent inbox events."""
    db = coordinator(chat, member).store.db
    return await db.run(lambda c: [r[0] for r in c.execute("SELECT status FROM agent_inbox_events")])


async def inbox_counters(chat: Any, member: SkaldClient) -> tuple[int, int]:
    """The session's pending events and reserved completion slots: (0, 0) once nothing
    is left to deliver."""
    db = coordinator(chat, member).store.db
    row = await db.run(lambda c: c.execute("SELECT pending_event_count, reserved_completion_slots FROM agent_session_state").fetchone())
    return tuple(row)


#: The task ``member_whose_helper_waits`` delegates in the background.
WAITING_TASK = "Wait for it."


async def member_whose_helper_waits(chat: Any) -> SkaldClient:
    """Alice, whose "Go." delegates ``WAITING_TASK`` in the background to "waiter", a task
    agent whose one call is the probe's ``wait`` (allowed, running until released): the
    background run a restart or a sign-out then cuts mid-call, in the tests of what
    that cut leaves behind."""
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "wait")
    write_agent(chat.probe.agents_dir, "waiter", "You wait.", title="Waiter", kind="task", allow_tools=True, tools=["wait"])
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")

    def respond(request: Any) -> Reply:
        if request.messages[1].get("content") == WAITING_TASK:  # the run's own frame
            return Reply(tool_calls=[ToolCall("wait", {"text": "long"})])
        if last(request)["role"] == "tool":
            return Reply("Started.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "waiter", "task": WAITING_TASK, "mode": "background"})])

    chat.server.responder = respond
    return alice


async def start_a_waiting_run(chat: Any, member: SkaldClient, sock: ChatSocket) -> tuple[str, dict[str, Any]]:
    """"Go." in a new conversation of the member ``member_whose_helper_waits`` made;
    returns once the turn has ended and the waiter's ``wait`` runs: the conversation's
    id and its one run's row."""
    cid = await new_conversation(member)
    await sock.send(cid, "Go.")
    await sock.turn(cid)
    await asyncio.wait_for(chat.probe.waiting.wait(), 10)
    [row] = await runs(member, cid)
    return cid, row


# -- a turn's call cut by a sign-out ---------------------------------------------------------


async def alice_back_after_a_sign_out_cut_her_call(
    chat: Any, asked: str, tool: str, arguments: str, answer: str,
) -> tuple[SkaldClient, str]:
    """Alice signed in again after a sign-out cut her turn's ``tool`` call (a ``rerun``
    call with ``arguments``, written straight into her file as running, after her
    message ``asked``), once recovery has finished that turn with the scripted
    ``answer``: her new client and the conversation's id."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    member = await chat.host.core.users.get(alice.member["id"])
    runtime = await chat.host.core.chat.runtime(member)
    frame = await runtime.store.root_frame(cid)
    await runtime.store.add_user_message(frame, asked, None)
    placeholder = await runtime.store.start_assistant(frame, MODEL_A)
    await runtime.store.finish_assistant(
        placeholder, content="", reasoning="", model=MODEL_A, calls=[("call_1", tool, arguments, "rerun")], running=1
    )
    assert (await alice.post("/api/auth/logout")).status_code == 200

    chat.server.script(MODEL_A, [Reply(answer)])
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        await sock.wait_event(cid, "turn_finished")
    return alice, cid


async def alice_back_after_a_sign_out_cut_her_wiki_call(chat: Any) -> tuple[SkaldClient, str]:
    """The cut call of ``alice_back_after_a_sign_out_cut_her_call`` is ``wiki__search``,
    a tool no plugin offers, answered "The wiki was not reachable; ask me again.": the
    probes of what such a cut call says and of a call whose tool is gone start here."""
    return await alice_back_after_a_sign_out_cut_her_call(
        chat, "Look it up in the wiki.", "wiki__search", '{"q": "x"}', "The wiki was not reachable; ask me again."
    )


# -- a throwaway plugin ----------------------------------------------------------------------


def write_agent(root: Path, agent_id: str, prompt: str, **meta: Any) -> None:
    directory = root / agent_id
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "AGENT.md").write_text(prompt, encoding="utf-8")
    (directory / "meta.yaml").write_text(yaml.safe_dump(meta), encoding="utf-8")


def write_probe_agents(root: Path) -> Path:
    """A tool-less chat agent, a task agent that may delegate (to test the depth
    limit), and three tool-less task agents pinned to models of their own."""
    write_agent(root, "quiet", "You answer without tools.", title="Quiet", kind="chat", allow_tools=False, tools=["*"])
    # A chain of distinct nesters (an agent never delegates to itself or an ancestor,
    # seed 004 §2.2), each allowed any target, to reach the depth limit.
    for level in range(1, 7):
        write_agent(root, f"nester{level}", "You delegate.", title=f"Nester {level}", kind="task", allow_tools=True,
                    tools=["execute_task"], delegates=["*"])
    for agent_id, model in PINNED.items():
        write_agent(root, agent_id, f"You are {agent_id}.", title=agent_id.title(), kind="task", allow_tools=False, model=model)
    return root


class ChatProbe:
    """Tools a test can watch: ``write_note`` has a side effect (recorded in
    ``writes``), ``lookup`` is a pure read, ``wait`` runs until released or stopped, and
``wait_read`` does the same as a read (safe to run again after a crash).
    None is allowed by a default rule, so each asks for approval unless a test adds a
    rule."""

    def __init__(self, agents_dir: Path) -> None:
        self.agents_dir = agents_dir
        self.writes: list[dict[str, Any]] = []
        self.contexts: list[ToolContext] = []
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()
        self.wait_cancelled = 0

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=PROBE, title="Chat probe", spec=">=1.0,<2")

    @hookimpl
    def register_tools(self, register) -> None:
        obj = {"type": "object", "properties": {"text": {"type": "string"}}}
        register(Tool("write_note", "Write a note.", obj, self._write, restart="mark_interrupted"))
        register(Tool("lookup", "Look something up.", obj, self._lookup, concurrency_safe=True, restart="rerun"))
        register(Tool("wait", "Wait until released.", obj, self._wait, restart="mark_interrupted"))
        register(Tool("wait_read", "Wait until released, then read.", obj, self._wait, restart="rerun"))

    @hookimpl
    def register_agent_dirs(self, register) -> None:
        register(self.agents_dir)

    async def _write(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        self.writes.append(dict(args))
        self.contexts.append(ctx)
        return f"wrote {args.get('text')!r}"

    async def _lookup(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        return f"result for {args.get('text')}"

    async def _wait(self, args: Mapping[str, Any], ctx: ToolContext) -> str:
        self.waiting.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.wait_cancelled += 1
            raise
        return "released"

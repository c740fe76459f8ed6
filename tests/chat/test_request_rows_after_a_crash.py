"""Every request the model received is a row of the request log after a crash (README
"Models and chat": a request cut short included, ``interrupted``, written by the
recovery that asks again, which counts the answers left streaming). The server is a
real subprocess, SIGKILLed the moment the scripted model server (in the test process)
receives a given request; after a restart and the member's sign-in the registry holds
a row for every request the model received, across both lives of the server.

A crash-kill probe found the model server with more requests than ``llm_requests``
had rows. A tool round's next request went out before the write of its placeholder
(the streaming row recovery counts a cut request by) had committed, or even started; a
sub-agent's first request went out beside the commit that wrote its frame; and a
background run's cut request was not counted, the runs' own recovery having closed its
frame before the chat's recovery looked for open frames' streaming rows. A compaction's
request was never a row at all.

To make "before the placeholder committed" exact rather than a matter of luck, the
test process holds the write lock of the member's own file (SQLCipher, opened with the
member's key, as a backup tool could) while the round's write is due: a request the
model receives meanwhile left ahead of its row."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from durability.helpers import Servers, WriteLock, create_member, install_distribution, member_dek, owner_file, request_entries, request_log, setup_admin
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall

from .support import MODEL_A, ChatSocket, allow_tool, assert_well_formed, configure_models, eventually, messages, new_conversation

PASSWORD = "alice's passphrase for request-row crash tests"
TASK = "Find the capital of Norway."
PLUGIN = "heldprobe"
#: How long a request may take to leave once its round's write is held up: well past
#: the moment it leaves when nothing holds it (a few milliseconds).
HELD_SECONDS = 1.5

PLUGIN_SOURCE = '''
"""A tool that runs until the test says go (a file appears), then returns."""
import asyncio
from pathlib import Path

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool

MARKERS = Path({markers!r})


async def wait_for_go(args, ctx):
    (MARKERS / "started").write_text("1")
    while not (MARKERS / "go").exists():
        await asyncio.sleep(0.01)
    return "went"


@hookimpl
def plugin_info():
    return PluginInfo(id="heldprobe", title="Held probe", spec=">=1.0,<2")


@hookimpl
def register_tools(register):
    register(Tool("wait_for_go", "Wait for the go.", {{"type": "object", "properties": {{}}}}, wait_for_go, restart="mark_interrupted"))
'''


@pytest.fixture
def markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin's distribution, on the server subprocess's path only; the directory
    its tool and the test talk through."""
    site, markers = tmp_path / "site", tmp_path / "markers"
    markers.mkdir()
    install_distribution(site, "heldprobe", PLUGIN, textwrap.dedent(PLUGIN_SOURCE.format(markers=str(markers))))
    monkeypatch.setenv("PYTHONPATH", str(site))
    return markers


def last(request: Any) -> dict[str, Any]:
    return request.messages[-1]


class Life:
    """alice's first server, the scripted model's answers, and the SIGKILL that comes
    the moment a request ``kill_at`` picks arrives (it is left hanging)."""

    def __init__(self, servers: Servers, model: ScriptedModelServer) -> None:
        self.servers, self.model = servers, model
        self.killed = asyncio.Event()

    async def start(self, respond: Callable[[Any], Any], kill_at: Callable[[Any], bool], *, plugin: bool = False) -> Any:
        self.server = await self.servers.start()
        admin = await setup_admin(self.server)
        if plugin:
            response = await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})
            assert response.status_code == 200, response.text
            await allow_tool(admin, "wait_for_go")
        await configure_models(admin, self.model)
        await create_member(admin, "alice", PASSWORD)
        self.alice = await self.server.login("alice", PASSWORD)

        def responder(request):
            if not self.killed.is_set() and kill_at(request):
                self.server.kill()
                self.killed.set()
                return Hang()
            return respond(request)

        self.model.responder = responder
        return self.alice

    async def owner_db(self) -> Database:
        """alice's own file, opened beside the server with her key."""
        dek = await member_dek(self.servers.data_dir, self.alice.member["id"], PASSWORD)
        return await Database.open(owner_file(self.servers.data_dir, self.alice.member["id"]), key=dek, migrations=OWNER_MIGRATIONS)

    async def killed_while_held(self, lock: WriteLock) -> bool:
        """Whether the request to kill at reached the model while ``lock`` held the
        round's write up; then let go, and wait for it to arrive."""
        try:
            await asyncio.wait_for(self.killed.wait(), HELD_SECONDS)
            early = True
        except TimeoutError:
            early = False
        await lock.release()
        await asyncio.wait_for(self.killed.wait(), 10)
        return early

    async def send_holding_the_write(
        self, text: str, *, before_holding: Callable[[], Awaitable[Any]] | None = None, while_holding: Callable[[], Any] | None = None
    ) -> tuple[str, bool]:
        """alice sends ``text`` in a new conversation, and the test takes her file's write
        lock (after ``before_holding``; ``while_holding`` runs once it is taken) so the
        round's write is held up: the conversation's id, once the server is killed, and
        whether the request to kill at left while the write was held."""
        db = await self.owner_db()
        try:
            cid = await new_conversation(self.alice)
            async with ChatSocket(self.alice) as sock:
                await sock.send(cid, text)  # acknowledged: the message and its placeholder are written
                if before_holding is not None:
                    await before_holding()
                lock = WriteLock(db)
                await lock.take()
                if while_holding is not None:
                    while_holding()
                return cid, await self.killed_while_held(lock)
        finally:
            await db.close()


async def restarted(servers: Servers, model: ScriptedModelServer, cid: str, respond: Callable[[Any], Any]) -> Any:
    """The server started again, alice signed in and her chat connected (which recovers
    it); once the interrupted turn is answered, alice's client."""
    model.responder = respond
    server = await servers.start()
    alice = await server.login("alice", PASSWORD)

    async def settled() -> bool:
        conversation = (await alice.get(f"/api/conversations/{cid}")).json()
        shown = conversation["messages"]
        return not conversation["running"] and shown[-1]["role"] == "assistant" and shown[-1]["status"] == "complete"

    async with ChatSocket(alice):  # connecting resumes her chat
        await eventually(settled, timeout=20, what="the interrupted turns to be answered")
    assert_well_formed(await messages(alice, cid))
    return alice


async def every_request_a_row(servers: Servers, model: ScriptedModelServer) -> None:
    received = len(model.requests_for(MODEL_A))
    try:
        await eventually(lambda: len(request_log(servers.data_dir)) == received, what="a row for each request")
    except AssertionError:
        raise AssertionError(f"the model received {received} requests; the request log has {request_log(servers.data_dir)}") from None


def tool_round(tool: str, arguments: dict[str, Any] | None = None, *, delay: float = 0.0) -> Callable[[Any], Any]:
    """The model calls ``tool`` (after ``delay``), then answers once its result is in."""

    def respond(request):
        if last(request)["role"] == "tool":
            return Reply("Done.")
        return Reply(tool_calls=[ToolCall(tool, arguments or {})], first_token_delay=delay)

    return respond


async def test_a_tool_rounds_next_request_leaves_only_once_its_placeholder_is_written(servers, model, markers):
    """The plain way: the call is written running with its message, runs, and its result
    is written with the next round's placeholder — before that round's request leaves."""
    respond = tool_round("wait_for_go")
    life = Life(servers, model)
    await life.start(respond, lambda r: last(r)["role"] == "tool", plugin=True)
    cid, early = await life.send_holding_the_write(
        "Wait for it.",
        before_holding=lambda: eventually(lambda: (markers / "started").exists(), what="the tool to run"),
        while_holding=lambda: (markers / "go").write_text("1"),
    )
    assert not early, "the next request left before its placeholder was written"
    await restarted(servers, model, cid, respond)
    await every_request_a_row(servers, model)
    assert (MODEL_A, "interrupted") in request_log(servers.data_dir)


async def test_an_overlapped_rounds_next_request_leaves_only_once_its_round_is_written(servers, model):
    """``list_agents`` (allowed, ``rerun``) runs before its round is written; message,
    result and the next placeholder are one commit, and the next request follows it."""
    respond = tool_round("list_agents", delay=0.8)
    life = Life(servers, model)
    await life.start(respond, lambda r: last(r)["role"] == "tool")
    cid, early = await life.send_holding_the_write("List them.")  # held before the model's answer (0.8 s) brings the call
    assert not early, "the next request left before its round was written"
    await restarted(servers, model, cid, respond)
    await every_request_a_row(servers, model)
    assert (MODEL_A, "interrupted") in request_log(servers.data_dir)


def delegating(mode: str, *, delay: float = 0.0) -> Callable[[Any], Any]:
    def respond(request):
        if last(request)["content"] == TASK:
            return Reply("Oslo.")
        if last(request)["role"] == "tool":
            return Reply("Done.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK, "mode": mode})], first_token_delay=delay)

    return respond


async def test_a_sub_agents_first_request_leaves_only_once_its_frame_is_written(servers, model):
    """A foreground delegation whose run, frame and first placeholder ride in the
    caller's round write: the sub-agent's first request waits for that commit."""
    respond = delegating("foreground", delay=0.8)
    life = Life(servers, model)
    await life.start(respond, lambda r: last(r)["content"] == TASK)
    cid, early = await life.send_holding_the_write("Delegate it.")
    assert not early, "the sub-agent's request left before its frame was written"
    await restarted(servers, model, cid, respond)
    await every_request_a_row(servers, model)
    assert (MODEL_A, "interrupted") in request_log(servers.data_dir)


async def test_a_background_runs_request_cut_by_a_crash_is_a_row(servers, model):
    """The runs' recovery closes a background run's frame as interrupted before the
    chat's recovery counts the cut requests: the run's cut request counts all the same.
    The caller's turn has ended when the crash comes: the run's is the one request cut."""
    answer = delegating("background")
    life = Life(servers, model)
    alice = await life.start(lambda r: Hang(text="thinking") if last(r)["content"] == TASK else answer(r), lambda r: False)
    cid = await new_conversation(alice)
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "Research it in the background.")
        await sock.wait_event(cid, "done", content="Done.")
        await sock.wait_event(cid, "token", depth=1, delta="thinking")  # the run's answer streams
    life.server.kill()
    await restarted(servers, model, cid, answer)  # the run's interruption is delivered in a continuation turn
    await every_request_a_row(servers, model)
    assert [status for _, status in request_log(servers.data_dir)].count("interrupted") == 1


async def test_a_compactions_request_is_a_row_and_so_is_one_a_crash_cut(servers, model):
    """A compaction asks the model too; no streaming row stands for its request, so its
    row is written into the member's file before it is sent."""
    script = [Reply("Paris."), Reply("We talked about Paris."), Reply("Lyon.")]
    life = Life(servers, model)
    alice = await life.start(lambda r: script.pop(0) if script else Hang(), lambda r: False)
    cid = await new_conversation(alice)
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "Capital of France?")
        await sock.wait_event(cid, "done", content="Paris.")
        compacted = await alice.post(f"/api/conversations/{cid}/compact")
        assert compacted.status_code == 200 and compacted.json() == {"compacted": True}
        await sock.send(cid, "And the second city?")
        await sock.wait_event(cid, "done", content="Lyon.")
    await eventually(lambda: len(request_log(servers.data_dir)) == 3, what="the rows of the first three requests")
    compacting = asyncio.ensure_future(alice.post(f"/api/conversations/{cid}/compact"))  # the model never answers
    await eventually(lambda: len(model.requests_for(MODEL_A)) == 4, what="the second compaction's request")
    life.server.kill()
    await asyncio.gather(compacting, return_exceptions=True)
    await restarted(servers, model, cid, lambda r: Reply("unused"))
    await every_request_a_row(servers, model)
    assert [status for _, status in request_log(servers.data_dir)] == ["ok", "ok", "ok", "interrupted"]


async def test_a_request_a_crash_cut_names_the_catalog_entry_it_went_to(servers, model):
    """Two providers may serve one model name: the cut request's row names the catalog
    entry (so the provider that bills it), as the answered request's row does."""
    life = Life(servers, model)
    alice = await life.start(lambda r: Reply("Oslo."), lambda r: True)  # the first request: killed as it arrives
    cid = await new_conversation(alice)
    async with ChatSocket(alice) as sock:
        await sock.send(cid, TASK)
        await asyncio.wait_for(life.killed.wait(), 10)
    await restarted(servers, model, cid, lambda r: Reply("Oslo."))
    await every_request_a_row(servers, model)
    rows = request_entries(servers.data_dir)
    assert [status for status, _ in rows] == ["interrupted", "ok"]
    assert rows[0][1] is not None and rows[0][1] == rows[1][1], rows

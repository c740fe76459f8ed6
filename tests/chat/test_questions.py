"""``TurnApi.ask`` (spec 1.3) end to end: a tool's question reaches its member as a
``question`` event and with the conversation, is answered through the chat's route
with the answer checked against the fields (a bad one keeps the question open), is
refused to another member and to a plugin that neither asked it nor owns the
conversation, ends as ``cancel`` when it times out, and is kept nowhere: not in the
member's file in clear, not in the registry, not in a log line."""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator, Mapping

import pytest
import pytest_asyncio

from skald_hookspecs import ChannelRequestError, PluginInfo, Tool, ToolContext, hookimpl
from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply, ScriptedModelServer, SkaldHarness, ToolCall

from .conftest import Chat
from .support import (ALL_MODELS, API_KEY, MODEL_A, PROBE, ChatProbe, ChatSocket, allow_tool, configure_models, messages, new_conversation, write_agent,
                      write_probe_agents)

ASKER = "askprobe"
CANARY = "Quokka-51f2-answer"
FIELDS = [
    {"name": "city", "type": "string", "title": "City", "required": True},
    {"name": "nights", "type": "integer", "title": "Nights"},
    {"name": "late", "type": "boolean"},
    {"name": "room", "type": "string", "enum": ["single", "double"]},
]


class AskProbe:
    def __init__(self) -> None:
        self.timeout = 30.0
        self.bad_fields = False

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=ASKER, title="Question probe", spec=">=1.3,<2")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def ask(args: Mapping[str, Any], ctx: ToolContext) -> str:
            fields = [{"name": "x", "type": "object"}] if self.bad_fields else FIELDS
            answer = await ctx.turn.ask("Where to?", fields, timeout=self.timeout)
            return f"{answer['action']} {sorted(dict(answer.get('content') or {}).items())}"

        register(Tool("ask_trip", "Ask the member about the trip.", {"type": "object", "properties": {}}, ask))


@pytest_asyncio.fixture
async def asking(skald: SkaldHarness, tmp_path) -> AsyncIterator[tuple[Chat, AskProbe]]:
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        probe = ChatProbe(write_probe_agents(tmp_path / "agents"))
        asker = AskProbe()
        try:
            host = await skald.start(plugins=[probe, asker], enable=[PROBE, ASKER])
            yield Chat(host, await host.admin(), server, probe), asker
        finally:
            await skald.close()


def results(transcript: list[dict[str, Any]]) -> list[str]:
    return [c.get("result") for m in transcript for c in (m.get("tool_calls") or [])]


async def test_a_question_is_asked_answered_checked_and_kept_nowhere(asking, caplog):
    caplog.set_level(logging.DEBUG)
    chat, asker = asking
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "ask_trip")
    alice = await chat.host.member("alice")
    bob = await chat.host.member("bob")
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("ask_trip", {})]), Reply("Booked.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Plan my trip.")
        asked = await sock.wait_event(cid, "question")
        assert asked["message"] == "Where to?" and asked["plugin"] == ASKER
        assert [(f["name"], f["type"], f["required"]) for f in asked["fields"]][:2] == [("city", "string", True), ("nights", "integer", False)]
        qid = asked["question_id"]
        listed = (await alice.get(f"/api/conversations/{cid}")).json()["questions"]
        assert [q["question_id"] for q in listed] == [qid]

        # Not bob's, through the route or any plugin; a plugin that neither asked nor
        # owns the conversation cannot answer it either.
        assert (await bob.post(f"/api/questions/{qid}", json={"action": "decline"})).status_code == 404
        with pytest.raises(ChannelRequestError):
            await chat.host.core.host_api(PROBE).answer_question(alice.member["id"], qid, "decline")
        assert await chat.host.core.host_api(PROBE).member_questions(alice.member["id"]) == []
        assert [q["question_id"] for q in await chat.host.core.host_api(ASKER).member_questions(alice.member["id"])] == [qid]

        for bad, words, code in (({"action": "accept", "content": {}}, "City is required", "question_required"),
                                 ({"action": "accept", "content": {"city": "x", "nights": "two"}}, "Nights must be of type integer", "question_integer"),
                                 ({"action": "accept", "content": {"city": "x", "nights": 2.5}}, "Nights must be of type integer", "question_integer"),
                                 ({"action": "accept", "content": {"city": "x", "room": "suite"}}, "must be one of single, double", "question_choice"),
                                 ({"action": "accept", "content": {"city": 123}}, "City must be text", "question_text"),  # not "at most 4096 characters"
                                 ({"action": "accept", "content": {"city": "x", "pool": True}}, "not asked for: pool", "question_unknown")):
            response = await alice.post(f"/api/questions/{qid}", json=bad)
            assert response.status_code == 400 and words in response.text, (bad, response.text)
            assert response.json()["code"] == code  # the card says it in the reader's language
        response = await alice.post(f"/api/questions/{qid}", json={"action": "accept", "content": {"city": CANARY, "nights": "3", "late": True, "room": "double"}})
        assert response.status_code == 200, response.text
        await sock.wait_event(cid, "question_resolved", question_id=qid, status="accept")
        await sock.turn(cid)
    assert results(await messages(alice, cid))[0] == f"accept [('city', '{CANARY}'), ('late', True), ('nights', 3), ('room', 'double')]"
    settled = await alice.post(f"/api/questions/{qid}", json={"action": "decline"})
    assert (settled.status_code, settled.json()["code"]) == (404, "question_gone")

    # The answer reached the tool, and through its result the model; the question
    # itself and the answer as such were written nowhere else, nor logged.
    def registry_values(conn) -> str:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return repr([conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables])

    assert CANARY not in await chat.host.core.registry.run(registry_values)
    assert not [r for r in caplog.records if CANARY in r.getMessage()]


async def test_an_unanswered_question_ends_as_cancel_and_bad_fields_are_the_tools_error(asking):
    chat, asker = asking
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "ask_trip")
    alice = await chat.host.member("alice")
    asker.timeout = 1.0
    chat.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("ask_trip", {})]), Reply("Nobody answered."),
                                 Reply(tool_calls=[ToolCall("ask_trip", {})]), Reply("Broken.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Plan it.")
        asked = await sock.wait_event(cid, "question")
        await sock.wait_event(cid, "question_resolved", question_id=asked["question_id"], status="cancel")
        await sock.turn(cid)
        assert results(await messages(alice, cid)) == ["cancel []"]
        assert (await alice.get(f"/api/conversations/{cid}")).json()["questions"] == []

        asker.bad_fields = True
        await sock.send(cid, "Again.")
        await sock.turn(cid)
    assert results(await messages(alice, cid))[-1].startswith("Error: the tool failed")


async def test_a_background_helpers_question_is_refused_at_once_as_its_approvals_are(asking):
    """A background run has nobody to answer it: its approvals are refused (the
    ``unattended`` result), and so is its question — at once, with a result telling the
    helper to go on without it, never waiting (up to an hour) in the run's slot."""
    chat, asker = asking
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "ask_trip")
    write_agent(chat.probe.agents_dir, "tripper", "You are tripper.", title="Tripper", kind="task", allow_tools=True, tools=["ask_trip"])
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")
    asker.timeout = 3600.0  # as long as a question may wait: the run must not

    def respond(request: Any) -> Reply:
        last = request.messages[-1]
        if request.messages[0]["content"].startswith("You are tripper."):  # the helper's own rounds
            return Reply("Went on without asking.") if last["role"] == "tool" else Reply(tool_calls=[ToolCall("ask_trip", {})])
        if last["role"] == "tool":
            return Reply("Started.")
        if last["content"] == "Plan my trip in the background.":
            return Reply(tool_calls=[ToolCall("execute_task", {"agent": "tripper", "task": "Plan the trip.", "mode": "background"})])
        return Reply("Noted.")  # the run's completion, delivered to the conversation

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Plan my trip in the background.")
        await sock.turn(cid)
        started = await sock.wait_event(cid, "agent_start")
        done = await sock.wait_event(cid, "agent_done", run_id=started["run_id"])
        assert not [e for e in sock.events if e.get("type") == "question"]
    assert done["status"] == "completed"
    detail = (await alice.get(f"/api/agent-runs/{started['run_id']}")).json()
    [call] = [c for m in detail["transcript"] for c in m["tool_calls"]]
    assert (call["name"], call["status"], call["result"]) == ("ask_trip", "error", HOST_RESULTS["unattended_question"])
    assert "without asking" in call["result"]
    assert detail["run"]["result"] == "Went on without asking."
    helper_saw = [m["content"] for r in chat.server.requests_for(MODEL_A) if r.messages[0]["content"].startswith("You are tripper.")
                  for m in r.messages if m["role"] == "tool"]
    assert helper_saw == [HOST_RESULTS["unattended_question"]]
    assert (await alice.get(f"/api/conversations/{cid}")).json()["questions"] == []

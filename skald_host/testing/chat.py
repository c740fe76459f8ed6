"""The model half of the test kit: one idea per line for an end-to-end tool test.

::

    async def test_greet_runs_through_the_agent(skald):
        host = await skald.start(plugins=[skald_hello], enable=["hello"])
        await host.use_model(await skald.model_server(Reply(tool_calls=[ToolCall("hello_greet", {"name": "Ada"})]), Reply("Done.")))
        await host.allow_tool("hello_greet")
        turn = await (await host.member("alice")).chat("Greet Ada")
        assert turn.result("hello_greet") == "Hello, Ada!"

``skald.model_server(*replies)`` starts a ``ScriptedModelServer`` whose one model answers
with ``replies`` in order (stopped with the hosts at teardown); ``host.use_model(server)``
configures it as the admin's Models page does; ``host.allow_tool(name)`` adds an approval
rule that allows the tool without asking; ``client.chat(text)`` sends a message over plain
HTTP and returns the ``Turn`` once the agent has finished (or waits for an approval).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skald_host.testing.client import SkaldClient

TURN_TIMEOUT = 30.0
FINAL_CALL_STATES = ("done", "error", "denied", "cancelled", "interrupted")


@dataclass(frozen=True)
class ToolResult:
    """One tool call of a turn: what the model asked for and what it got back."""

    name: str
    arguments: dict[str, Any]
    status: str  # done, error, denied, cancelled, interrupted (or awaiting_approval)
    result: str | None


@dataclass(frozen=True)
class Turn:
    """The finished turn of ``client.chat(text)``: the messages after the member's own,
    the assistant's last text, every tool call with its result, and any approval card
    still waiting (then the turn is not finished: ``waiting`` is true)."""

    conversation_id: str
    messages: list[dict[str, Any]]
    tool_results: list[ToolResult]
    approvals: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The assistant's last words in this turn ("" when it said nothing)."""
        said = [m for m in self.messages if m["role"] == "assistant" and m["content"]]
        return said[-1]["content"] if said else ""

    @property
    def error(self) -> str | None:
        """Why the turn ended in an error (no model, the provider failed), or None."""
        failed = [m for m in self.messages if m["status"] == "error"]
        return failed[-1]["content"] if failed else None

    @property
    def waiting(self) -> bool:
        return bool(self.approvals)

    def result(self, tool: str) -> str | None:
        """The result text of the first call of ``tool`` (AssertionError if it was never called)."""
        for call in self.tool_results:
            if call.name == tool:
                return call.result
        raise AssertionError(f"the model never called {tool!r} in this turn; calls: {[c.name for c in self.tool_results]}")


async def chat(client: "SkaldClient", text: str, *, conversation: str | None = None, agent: str | None = None,
               timeout: float = TURN_TIMEOUT) -> Turn:
    if conversation is None:
        body = {"title": text[:40]} | ({"agent": agent} if agent else {})
        created = await client.post("/api/conversations", json=body)
        assert created.status_code == 201, created.text
        conversation = created.json()["id"]
    before = await _state(client, conversation)
    seen = max((m["id"] for m in before["messages"]), default=0)
    sent = await client.post(f"/api/conversations/{conversation}/messages", json={"text": text})
    assert sent.status_code == 202, sent.text
    return await wait_for_turn(client, conversation, after=seen, timeout=timeout)


async def wait_for_turn(client: "SkaldClient", conversation: str, *, after: int = 0, timeout: float = TURN_TIMEOUT) -> Turn:
    """The turn after message id ``after`` once it has finished or waits for an approval."""
    deadline = time.monotonic() + timeout
    calm = 0
    while True:
        state = await _state(client, conversation)
        fresh = [m for m in state["messages"] if m["id"] > after]
        calm = calm + 1 if not state["running"] and not state["queued"] and _finished(fresh) else 0
        if calm >= 2 or state["approvals"]:  # seen finished twice: no next round was on its way
            calls = [
                ToolResult(c["name"], json.loads(c["arguments"] or "{}"), c["status"], c["result"])
                for m in fresh for c in m.get("tool_calls", [])
            ]
            after_own = fresh[1:] if fresh and fresh[0]["role"] == "user" else fresh  # the member's own message aside
            return Turn(conversation, after_own, calls, state["approvals"])
        if time.monotonic() > deadline:
            raise AssertionError(f"the turn did not finish within {timeout:g} s; messages so far: {fresh}")
        await asyncio.sleep(0.02)


def _finished(fresh: list[dict[str, Any]]) -> bool:
    """The member's message was answered and nothing is left to come: no message still
    streaming, every tool call in a final state, and the last assistant message is not a
    round of tool calls the model has not seen the results of yet."""
    spoken = [m for m in fresh if m["role"] == "assistant"]
    if not spoken and not any(m["role"] == "note" for m in fresh):
        return False
    if any(m["status"] == "streaming" for m in fresh):
        return False
    calls = [c for m in fresh for c in m.get("tool_calls", [])]
    if any(c["status"] not in FINAL_CALL_STATES for c in calls):
        return False
    last = spoken[-1] if spoken else None
    if last is None or last["status"] != "complete" or not last.get("tool_calls"):
        return True
    return all(c["status"] in ("cancelled", "interrupted") for c in last["tool_calls"])  # stopped: no next round


async def _state(client: "SkaldClient", conversation: str) -> dict[str, Any]:
    response = await client.get(f"/api/conversations/{conversation}")
    assert response.status_code == 200, response.text
    return response.json()

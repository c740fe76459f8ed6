"""Two gaps between what the Helpers page and the task strip said and what the runtime
does (seed 004), each fixed and kept fixed:

- the Helpers page said a helper "may hand work to" the general-purpose helper (or any
  helper) when the runtime never offers it ``execute_task``: no such tool in its
  ``tools``, ``allow_tools: false``, or the depth limit. The page now reads the runtime's
  one rule (``ChatService.offers_delegation``) as ``may_delegate``;
- a run the member cancelled stayed on the task strip for a day, as a failed one does.
  It now leaves after ``STRIP_CANCELLED_SECONDS``; the run stays readable by its id.

A real host and the scripted model server."""

from __future__ import annotations

import pytest

from skald_host.core.agent.subagents.runs import STRIP_CANCELLED_SECONDS, STRIP_FAILED_HOURS

from .support import ChatSocket, cancel_run, configure_models, coordinator, delegate_a_slow_task, run, runs, start_a_slow_task, write_agent


def helpers(listed: dict) -> dict[str, bool]:
    return {d["id"]: d["may_delegate"] for d in listed["definitions"] if d["kind"] == "task"}


async def test_the_helpers_page_says_a_helper_delegates_only_when_the_runtime_offers_it_execute_task(chat):
    # Each names someone to delegate to; only "lead" is given the tool to do it with.
    write_agent(chat.probe.agents_dir, "lead", "You lead.", title="Lead", kind="task", allow_tools=True, tools=["execute_task"], delegates=["*"])
    write_agent(chat.probe.agents_dir, "toolless", "You think.", title="Toolless", kind="task", allow_tools=False, tools=["*"], delegates=["*"])
    write_agent(chat.probe.agents_dir, "looker", "You look.", title="Looker", kind="task", allow_tools=True, tools=["lookup"], delegates=["*"])
    write_agent(chat.probe.agents_dir, "defaulted", "You help.", title="Defaulted", kind="task", allow_tools=True, tools=["lookup"])
    chat.host.core.chat.subagent_catalog.reload()
    alice = await chat.host.member("alice")
    response = await alice.get("/api/agent-definitions")
    assert response.status_code == 200, response.text
    may = helpers(response.json())
    assert (may["lead"], may["toolless"], may["looker"], may["defaulted"]) == (True, False, False, False)
    assert may["researcher"] is False  # the shipped one: no tools at all, its delegates absent
    assert may["general-purpose"] is False  # delegates: [] — nobody
    assert may["nester1"] is True
    # The same rule the rounds use: a helper the conversation's agent calls (depth 1).
    rule = chat.host.core.chat.offers_delegation
    generation = chat.host.core.chat.subagent_catalog.current()
    assert all(may[agent_id] == rule(generation.definitions[agent_id], 1) for agent_id in may)


@pytest.mark.parametrize("chat_settings", [{"subagents": {"max_tree_depth": 1}}], ids=["depth-1"])
async def test_with_one_level_allowed_no_helper_is_said_to_delegate(chat):
    """At ``max_tree_depth: 1`` a helper is the deepest level: the runtime offers none
    of them ``execute_task``, and the page says each may hand work to nobody."""
    alice = await chat.host.member("alice")
    may = helpers((await alice.get("/api/agent-definitions")).json())
    assert may["nester1"] is False and not any(may.values())


async def test_a_cancelled_run_leaves_the_task_strip_soon_and_stays_readable(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.responder = delegate_a_slow_task
    async with ChatSocket(alice) as sock:
        cid, started = await start_a_slow_task(chat, alice, sock)
        await cancel_run(alice, sock, cid, started["run_id"])
    # Just cancelled: on the strip as "cancelled", and the strip says when it reads again.
    response = await alice.get(f"/api/conversations/{cid}/runs?strip=1")
    assert [r["status"] for r in response.json()["runs"]] == ["cancelled"]
    assert response.json()["cancelled_seconds"] == STRIP_CANCELLED_SECONDS
    db = coordinator(chat, alice).store.db

    async def ended_ago(seconds: int, status: str) -> None:
        await db.transaction(lambda c: c.execute(
            "UPDATE agent_runs SET status = ?, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?) WHERE id = ?",
            (status, f"-{seconds} seconds", started["run_id"])))

    # Cancelled a little longer ago than the window: gone from the strip (it stayed a day).
    await ended_ago(STRIP_CANCELLED_SECONDS + 5, "cancelled")
    assert await runs(alice, cid, strip=True) == []
    assert [r["id"] for r in await runs(alice, cid)] == [started["run_id"]]  # still listed in full
    assert (await run(alice, started["run_id"]))["run"]["status"] == "cancelled"  # and readable from the transcript's link
    # A failed run as long ago keeps its day on the strip (the member may have been away).
    await ended_ago(STRIP_CANCELLED_SECONDS + 5, "failed")
    assert [r["id"] for r in await runs(alice, cid, strip=True)] == [started["run_id"]]
    await ended_ago(STRIP_FAILED_HOURS * 3600 + 5, "failed")
    assert await runs(alice, cid, strip=True) == []

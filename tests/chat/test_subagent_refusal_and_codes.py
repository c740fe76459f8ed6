"""What a second probe of helpers found (seed 004), each fixed and kept fixed:

- with the helper definitions refused (no good generation), ``execute_task`` and
  ``list_agents`` answered the member and the model with the refusal's reasons, which
  name files on the server (the Helpers page shows them to the admin alone), and the
  admin's status said "no warnings";
- a failed run kept its error as English text only: the task strip and the helper's
  box could not word it in the reader's language. A run now keeps the code and values
  a turn's failure has (``agent_runs.reason``, an additive column: an older member
  file opens, its runs without one).

A real host and the scripted model server; responders keyed on what each request asks."""

from __future__ import annotations

import os

from durability.helpers import upgraded_from
from skald_host.core.agent.store import HOST_RESULTS
from skald_host.core.agent.subagents.runs import RunStore
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.testing import Reply, ScriptedError, ToolCall

from .support import MODEL_A, ChatSocket, configure_models, last, messages, new_conversation, run, runs, write_agent


async def test_refused_definitions_reach_the_member_and_the_model_without_the_servers_paths_and_warn_the_admin(chat, tmp_path):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    folder = tmp_path / "host-agents"
    write_agent(folder, "broken", "You help.", kind="task", allow_tool=True)  # a typo of allow_tools
    catalog = chat.host.core.chat.subagent_catalog
    # As at a start that refused the host's own folder: no good generation to keep, and
    # no plugin's folder to leave out.
    catalog.agents.add_directory(folder, None)
    catalog.good = None
    catalog.reload()
    assert catalog.good is None and any("allow_tool" in e for e in catalog.refused.errors)

    def respond(request):
        if last(request)["role"] == "tool":
            return Reply("No helpers today.")
        if last(request)["content"] == "Who can help?":
            return Reply(tool_calls=[ToolCall("list_agents", {})])
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": "Look it up."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask a helper.")
        first = await sock.turn(cid)
        await sock.send(cid, "Who can help?")
        second = await sock.turn(cid)
    neutral = HOST_RESULTS["definitions_refused"]
    for events in (first, second):
        done = next(e for e in events if e["type"] in ("tool_done", "tool_error") and e.get("call_id"))
        assert (done["result"], done["result_code"]) == (neutral, "definitions_refused")
    calls = [c for m in await messages(alice, cid) for c in m.get("tool_calls") or ()]
    assert [(c["name"], c["result"], c["result_code"]) for c in calls] == [
        ("execute_task", neutral, "definitions_refused"), ("list_agents", neutral, "definitions_refused")]
    sent = [m["content"] for r in chat.server.requests_for(MODEL_A) for m in r.messages if m["role"] == "tool"]
    assert sent and all(text == neutral for text in sent)
    assert not any(str(folder) in text or "meta.yaml" in text for text in sent)
    # The member's Helpers page says only that they were refused; the admin sees why,
    # and the status says so.
    member_view = (await alice.get("/api/agent-definitions")).json()
    assert member_view["refused"]["errors"] == [] and member_view["refused"]["count"] == 1
    admin_view = (await chat.admin.get("/api/agent-definitions")).json()
    assert any("allow_tool" in e for e in admin_view["refused"]["errors"])
    status = (await chat.admin.get("/api/admin/status")).json()
    assert [w["id"] for w in status["warnings"] if w["id"] == "agent_definitions_refused"] == ["agent_definitions_refused"]
    german = (await chat.admin.get("/api/admin/status", headers={"Accept-Language": "de"})).json()
    assert any(w["id"] == "agent_definitions_refused" and w["text"] for w in german["warnings"])


async def test_a_failed_run_keeps_its_code_and_values_for_the_strip_and_the_box(chat):
    """A helper whose model answers HTTP 500, and one whose rounds run out: each run
    keeps its English error (the caller's model reads it) and the code + values a
    turn's failure has; the helper's ``agent_done`` carries them too."""
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    write_agent(chat.probe.agents_dir, "looper", "You look around.", title="Looper", kind="task", allow_tools=True, tools=["list_agents"])
    chat.host.core.chat.subagent_catalog.reload()

    def respond(request):
        asked = [m["content"] for m in request.messages if m["role"] == "user"]
        if "Fail." in asked:
            return ScriptedError(500, "scripted failure", should_retry=False)
        if "Loop." in asked:
            return Reply(tool_calls=[ToolCall("list_agents", {})])
        if last(request)["role"] == "tool":
            return Reply("Done.")
        return Reply(tool_calls=[ToolCall("execute_task", {"tasks": [{"agent": "researcher", "task": "Fail."},
                                                                     {"agent": "looper", "task": "Loop."}],
                                                           "limits": {"max_iterations": 1}})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Two parts.")
        events = await sock.turn(cid)
    rows = {r["task"]: r for r in await runs(alice, cid)}
    failed, looped = rows["Fail."], rows["Loop."]
    assert failed["status"] == looped["status"] == "failed"
    assert "HTTP 500" in failed["error"] and failed["reason"]["code"].startswith("model_")
    assert looped["reason"]["code"] == "round_limit"
    assert looped["error"] == f"Stopped after {looped['reason']['values']['rounds']} rounds without a final answer."
    done = next(e for e in events if e["type"] == "agent_done" and e["run_id"] == failed["id"])
    assert (done["code"], done["values"]) == (failed["reason"]["code"], failed["reason"]["values"])
    assert (await run(alice, failed["id"]))["run"]["reason"] == failed["reason"]


async def test_an_owner_file_from_before_run_reasons_opens_and_its_runs_have_none(tmp_path):
    """The column is additive: a member file of the schema before it, with a failed
    run in it, opens with this version; the run keeps its English error, no reason."""
    ours = next(step for step in OWNER_MIGRATIONS.steps if step.description.startswith("why a sub-agent run failed"))

    def older_rows(c):
        c.execute("INSERT INTO conversations (id, agent_id) VALUES ('c1', 'assistant')")
        c.execute(
            "INSERT INTO agent_runs (id, execution_id, runtime_generation, conversation_id, tree_id, caller_agent_id, caller_scope_id,"
            " agent_id, definition_hash, mode, depth, task, status, error)"
            " VALUES ('r1', 'e1', 'g1', 'c1', 't1', 'assistant', 's1', 'researcher', 'h', 'foreground', 1, 'Look.', 'failed',"
            " 'The model could not answer (HTTP 500: boom).')"
        )

    async with upgraded_from(tmp_path / "member.db", OWNER_MIGRATIONS, ours.version, older_rows, key=os.urandom(32)) as db:
        row = await RunStore(db, "g2").run("r1")
    assert (row["status"], row["error"], row["reason"]) == ("failed", "The model could not answer (HTTP 500: boom).", None)

"""SIGKILL during a background run and during its continuation turn (seed 004 §4, §6):
the server is a real subprocess, killed outright; after a restart and the member's
login, the run's outcome reaches the member exactly once — one hidden trigger in the
model's history, one answer on the member's screen, the inbox event consumed once.

The scripted model server runs in the test process, so what the model was sent
across both lives of the server is counted from outside the process that died."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any


from durability.helpers import Servers, member_dek, owner_file
from skald_host.core.schema import OWNER_MIGRATIONS
from skald_host.core.storage import Database
from skald_host.core.agent.subagents.limits import CONTINUATION_TOOLS
from skald_host.testing import Hang, Reply, ScriptedModelServer, ToolCall

from .support import (
    MODEL_A, ChatSocket, assert_well_formed, eventually, member_with_models, messages, new_conversation, stored_messages, write_agent,
)

PASSWORD = "alice's passphrase for sub-agent crash tests"
TRIGGER = "[Background updates."
TASK = "Find the capital of Norway."


def last(request: Any) -> dict[str, Any]:
    return request.messages[-1]


def triggers_in(request: Any) -> int:
    return sum(1 for m in request.messages if m["role"] == "user" and m["content"].startswith(TRIGGER))


async def start_background(servers: Servers, model: ScriptedModelServer, respond) -> tuple[Any, Any, str]:
    server = await servers.start()
    alice, _ = await member_with_models(server, model, PASSWORD)
    model.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Research it in the background.")
        await sock.turn(cid)
    return server, alice, cid


def before(on_task, on_trigger):
    def respond(request):
        content = last(request)["content"]
        if content == TASK:
            return on_task()
        if content.startswith(TRIGGER):
            return on_trigger()
        if last(request)["role"] == "tool":
            return Reply("Started; I'll tell you.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK, "mode": "background"})])

    return respond


async def after_restart(servers: Servers, server: Any, model: ScriptedModelServer, cid: str) -> tuple[Any, list[dict[str, Any]]]:
    server.kill()
    model.responder = before(lambda: Reply("Oslo."), lambda: Reply("Here is what came back."))
    again = await servers.start()
    alice = await again.login("alice", PASSWORD)
    async with ChatSocket(alice) as sock:  # connecting resumes the member's chat
        await sock.wait_event(cid, "turn_finished", timeout=20)
    return alice, await messages(alice, cid)


async def test_sigkill_during_a_background_run_delivers_its_interruption_exactly_once(servers, model):
    server, alice, cid = await start_background(servers, model, before(lambda: Hang(text="thinking"), lambda: Reply("unused")))
    await eventually(lambda: any(last(r)["content"] == TASK for r in model.requests_for(MODEL_A)), what="the run's request")
    seen_before = len(model.requests_for(MODEL_A))
    alice, transcript = await after_restart(servers, server, model, cid)

    after = model.requests_for(MODEL_A)[seen_before:]
    continuation = [r for r in after if last(r)["content"].startswith(TRIGGER)]
    assert len(continuation) == 1 and triggers_in(continuation[0]) == 1
    assert "status interrupted" in last(continuation[0])["content"]
    assert not any(last(r)["content"] == TASK for r in after)  # interrupted, not run again
    assert {t["function"]["name"] for t in continuation[0].tools or []} <= set(CONTINUATION_TOOLS)
    assert [m["content"] for m in transcript if m["role"] == "assistant"][-1] == "Here is what came back."
    assert sum(m["content"] == "Here is what came back." for m in transcript) == 1
    assert not any(m["content"].startswith(TRIGGER) for m in transcript)
    assert_well_formed(transcript)
    [run] = (await alice.get(f"/api/conversations/{cid}/runs")).json()["runs"]
    assert run["status"] == "interrupted"


async def test_sigkill_during_the_continuation_turn_answers_its_trigger_once_after_the_restart(servers, model):
    server, alice, cid = await start_background(servers, model, before(lambda: Reply("Oslo."), lambda: Hang(text="Here is wh")))
    await eventually(lambda: any(last(r)["content"].startswith(TRIGGER) for r in model.requests_for(MODEL_A)), what="the continuation's request")

    async def checkpointed() -> bool:  # the partial answer is on disk before the kill
        rows = await stored_messages(alice, cid)
        return rows[-1]["status"] == "streaming" and rows[-1]["content"] == "Here is wh"

    await eventually(checkpointed, what="the continuation's partial answer to be checkpointed")
    seen_before = len(model.requests_for(MODEL_A))
    alice, transcript = await after_restart(servers, server, model, cid)

    after = model.requests_for(MODEL_A)[seen_before:]
    assert len(after) == 1  # the trigger answered again, nothing delivered anew
    assert triggers_in(after[0]) == 1 and "Oslo." in last(after[0])["content"]
    assert {t["function"]["name"] for t in after[0].tools or []} <= set(CONTINUATION_TOOLS)
    answers = [(m["status"], m["content"]) for m in transcript if m["role"] == "assistant"]
    assert answers[-2:] == [("interrupted", "Here is wh"), ("complete", "Here is what came back.")]
    assert not any(m["content"].startswith(TRIGGER) for m in transcript)
    assert_well_formed(transcript)
    [run] = (await alice.get(f"/api/conversations/{cid}/runs")).json()["runs"]
    assert run["status"] == "completed"


# -- the steer lane (seed 004 §4.3/§4.4, §8.5) --------------------------------------------

WATCH = "Watch."
STEER_PLUGIN = '''"""A throwaway plugin, found through its entry point like an installed one: a task
agent whose signal contract steers into the running turn."""
from pathlib import Path

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo


@hookimpl
def plugin_info():
    return PluginInfo(id="steerprobe", title="Steer probe", spec=">=1.0,<2")


@hookimpl
def register_agent_dirs(register):
    register(Path(__file__).with_name("steerprobe_agents"))
'''


def steer_plugin(root: Path) -> dict[str, str]:
    """The plugin as a distribution on the server's ``PYTHONPATH`` (no install into the
    environment); the server's environment that finds it."""
    site = root / "site"
    (site / "steerprobe-0.1.dist-info").mkdir(parents=True)
    (site / "steerprobe-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: steerprobe\nVersion: 0.1\n")
    (site / "steerprobe-0.1.dist-info" / "entry_points.txt").write_text("[skald.plugins]\nsteerprobe = steerprobe\n")
    (site / "steerprobe.py").write_text(STEER_PLUGIN)
    write_agent(
        site / "steerprobe_agents", "watcher", "You watch.", title="Watcher", kind="task", tools=["emit_signal"],
        signal={"delivery": "steer", "cooldown_secs": 3600, "severities": ["info"]},
    )
    return {"PYTHONPATH": str(site)}


def signal_triggers(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user" and m["content"].startswith(TRIGGER) and "half way" in m["content"]]


async def owner_events(servers: Servers, member_id: str) -> list[dict[str, Any]]:
    """The member's inbox rows, read from their file while no server runs."""
    dek = await member_dek(servers.data_dir, member_id, PASSWORD)
    db = await Database.open(owner_file(servers.data_dir, member_id), key=dek, migrations=OWNER_MIGRATIONS)
    try:
        return await db.run(lambda c: [dict(r) for r in c.execute("SELECT * FROM agent_inbox_events ORDER BY id")])
    finally:
        await db.close()


async def test_sigkill_with_a_signal_admitted_into_the_running_turn_delivers_it_exactly_once(servers, model, tmp_path):
    """§8.5: the server process is SIGKILLed the moment the steer signal's admission
    into the running turn commits (before the turn takes it). The file then holds it
    admitted, bound to a turn that died; startup recovery gives it back and it reaches
    the model exactly once, in one trigger, answered once on the member's screen."""
    env = steer_plugin(tmp_path)
    life = 1

    def respond(request):
        if request.messages[1]["content"] == WATCH:  # the watcher's own frame
            if last(request)["role"] == "tool":
                return Reply("watched")
            return Reply(tool_calls=[ToolCall("emit_signal", {"key": "k", "severity": "info", "summary": "half way"})])
        if last(request)["content"].startswith(TRIGGER):
            return Reply("Noted.")
        if last(request)["role"] == "tool":
            return Hang(text="thinking") if life == 1 else Reply("Done after the restart.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "watcher", "task": WATCH, "mode": "background"})])

    server = await servers.start(crash_at="subagents.steer_admitted", extra_env=env)
    alice, member_id = await member_with_models(server, model, PASSWORD, plugin="steerprobe")
    model.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Watch it.")
        await eventually(lambda: not server.running, timeout=20, what="the SIGKILL at the admission")
    assert server.proc.returncode == -signal.SIGKILL
    [signal_row] = [e for e in await owner_events(servers, member_id) if e["event_type"] == "signal"]
    assert signal_row["status"] == "admitted" and signal_row["admitted_turn_id"]  # into a turn that died with the process
    assert not any(signal_triggers(r) for r in model.requests_for(MODEL_A))
    seen_before = len(model.requests_for(MODEL_A))

    life = 2
    again = await servers.start(extra_env=env)
    alice = await again.login("alice", PASSWORD)
    async with ChatSocket(alice):  # connecting resumes the member's chat

        async def answered() -> bool:
            return sum(m["content"] == "Noted." for m in await messages(alice, cid)) >= 1 and not (
                await alice.get(f"/api/conversations/{cid}")
            ).json()["running"]

        await eventually(answered, timeout=20, what="the signal's delivery after the restart")
    transcript = await messages(alice, cid)
    again.kill()

    after = model.requests_for(MODEL_A)[seen_before:]
    told = [r for r in after if last(r)["content"].startswith(TRIGGER) and "half way" in last(r)["content"]]
    assert len(told) == 1  # the moment the model was told, once
    assert len(signal_triggers(after[-1])) <= 1 and all(len(signal_triggers(r)) <= 1 for r in after)  # never twice in one history
    assert sum(m["content"] == "Noted." for m in transcript) == 1
    assert not any(m["content"].startswith(TRIGGER) for m in transcript)
    assert_well_formed(transcript)
    [signal_row] = [e for e in await owner_events(servers, member_id) if e["event_type"] == "signal"]
    assert (signal_row["status"], signal_row["admitted_turn_id"]) == ("consumed", None)

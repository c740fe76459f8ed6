"""Shared pieces of the HTTP security tests: the route enumeration every sweep starts
from, a throwaway plugin that gives the plugin-catalog routes something real to act
on, a WebSocket close helper, and the chat objects (a model, a conversation, a pending
approval, a rule and a security group) the id-bearing chat and model routes act on."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from websockets.exceptions import ConnectionClosed

from skald_hookspecs import PUBLIC_ATTRIBUTE, SystemAgent, hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet, PluginInfo
from skald_host.testing import Reply, ScriptedError, ScriptedModelServer, ToolCall

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PARAM = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
POLICY_VIOLATION = 1008

PROBE = "probe"
ASK_TOOL = "ask_sweep"
ASKS = "Ask me something (a question card)."
PROBE_SET = "probe-set"
PROBE_AGENT = "probe_agent"


class Probe:
    """A plugin with an instance config (one secret field), a per-member config and a
    general settings set, so every catalog route has a valid request to answer; and a
    system agent whose interval may be set per member (off: it never runs), for the
    member-interval routes."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(
            id=PROBE,
            title="Probe",
            spec=">=1.0,<2",
            config_schema=(ConfigField("greeting"), ConfigField("api_key", secret=True)),
            user_config_schema=(ConfigField("nickname"),),
        )

    @hookimpl
    def register_tools(self, register) -> None:
        """A tool that asks the member (``TurnApi.ask``), so the question route has a
        real question to answer; it waits until answered or its turn ends."""
        from skald_hookspecs.types import Tool

        async def ask(args, ctx) -> str:
            answer = await ctx.turn.ask("Swept?", [{"name": "word", "type": "string"}], timeout=600)
            return str(answer["action"])

        register(Tool(ASK_TOOL, "Ask the member a question.", {"type": "object", "properties": {}}, ask))

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet(PROBE_SET, "Probe settings", (ConfigField("level", "integer"), ConfigField("token", secret=True))))
        register(ConfigSet(PROBE_AGENT, "Probe agent", (
            ConfigField("enabled", "boolean", default=False), ConfigField("interval", "integer", default=5),
        ), owner=PROBE_AGENT))

    @hookimpl
    def register_system_agents(self, register) -> None:
        async def idle(ctx) -> bool:
            return False

        register(SystemAgent(PROBE_AGENT, "Probe agent", 300, run=idle, has_work=idle, per_member_interval=True))


def fill(rule: str, **values: str) -> str:
    """A concrete path for a rule: ``/api/admin/members/<member_id>`` → ``…/<values['member_id']>``."""
    return PARAM.sub(lambda m: values[m.group(1)], rule)


def is_public(app: Any, endpoint: str) -> bool:
    return bool(getattr(app.view_functions[endpoint], PUBLIC_ATTRIBUTE, False))


def route_methods(app: Any) -> set[tuple[str, str]]:
    """Every (rule, method) the app answers, HEAD/OPTIONS aside; WebSocket rules as "WS"."""
    found = set()
    for rule in app.url_map.iter_rules():
        if getattr(rule, "websocket", False):
            found.add((rule.rule, "WS"))
        else:
            found |= {(rule.rule, method) for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
    return found


def endpoint_of(app: Any, rule_text: str, method: str) -> str:
    for rule in app.url_map.iter_rules():
        if rule.rule == rule_text and (method == "WS" or method in (rule.methods or set())):
            return rule.endpoint
    raise KeyError((rule_text, method))


async def registry_dump(host: Any) -> str:
    """The whole of system.db as SQL text, to show a request changed nothing."""
    await host.core.chat.request_log.flush()  # an earlier turn's metadata row, gathered for a moment
    return "\n".join(await host.core.registry.run(lambda conn: list(conn.iterdump())))


async def close_code(ws: Any, timeout: float = 1.0) -> int | None:
    """The close code the server sent within ``timeout`` seconds (frames before the
    close, such as events, are skipped); fails the test if the socket stays open."""

    async def drain() -> int | None:
        try:
            while True:
                await ws.recv()
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None

    try:
        return await asyncio.wait_for(drain(), timeout)
    except TimeoutError:
        raise AssertionError(f"the WebSocket is still open {timeout:.2f} s later") from None


# -- chat objects -----------------------------------------------------------------------

NEEDS_APPROVAL = "Schedule something (this needs an approval)."
FAILS = "Fail this turn (the model refuses)."
MODEL = "sweep-model"
#: Answers no test will ever get: the fixed id of an object that does not exist.
NO_SUCH_ID = "0" * 32


def sweep_responder(request: Any) -> Reply | ScriptedError:
    """The model of the sweeps: asked ``NEEDS_APPROVAL``, it calls a tool no rule allows
    (so an approval card is raised); asked ``FAILS``, it refuses (401: no fallback, the
    turn fails); anything else it answers in a word."""
    last = request.messages[-1]
    if last.get("role") == "user" and last.get("content") == NEEDS_APPROVAL:
        return Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": "swept", "in_minutes": 60})])
    if last.get("role") == "user" and last.get("content") == ASKS:
        return Reply(tool_calls=[ToolCall(ASK_TOOL, {})])
    if last.get("role") == "user" and last.get("content") == FAILS:
        return ScriptedError(401)
    return Reply("ok")


async def ended_turn(client: Any, text: str) -> tuple[str, int, list[dict[str, Any]]]:
    """A new conversation of ``client``'s whose one message's turn has ended: its id,
    the message's id and the transcript."""
    response = await client.post("/api/conversations", json={})
    assert response.status_code == 201, response.text
    conversation_id = response.json()["id"]
    response = await client.post(f"/api/conversations/{conversation_id}/messages", json={"text": text})
    assert response.status_code == 202, response.text
    return (conversation_id, response.json()["message_id"], await settled(client, conversation_id))


async def settled(client: Any, conversation_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while True:
        data = (await client.get(f"/api/conversations/{conversation_id}")).json()
        if not data["running"] and data["messages"] and data["messages"][-1]["role"] == "assistant":
            return data["messages"]
        assert time.monotonic() < deadline, "the turn did not end"
        await asyncio.sleep(0.02)


async def version_objects(client: Any) -> dict[str, Any]:
    """Conversations of ``client``'s for the routes that change a conversation's
    versions, each in the state its route needs: answered (regenerate, edit), with an
    earlier version (version), failed (retry)."""
    regenerate, _, _ = await ended_turn(client, "answer me")
    edit, edit_message, _ = await ended_turn(client, "answer me")
    version, _, _ = await ended_turn(client, "answer me")
    response = await client.post(f"/api/conversations/{version}/regenerate")
    assert response.status_code == 202, response.text
    await settled(client, version)
    failed, _, messages = await ended_turn(client, FAILS)
    assert messages[-1]["status"] == "error", messages
    return {"regenerate_conversation_id": regenerate, "edit_conversation_id": edit, "edit_message_id": edit_message,
            "version_conversation_id": version, "failed_conversation_id": failed}


async def admin_chat_objects(admin: Any, server: ScriptedModelServer) -> dict[str, str]:
    """A provider at the scripted server with one model, a rule and a security group:
    what the admin's model and approval routes act on."""
    response = await admin.post("/api/admin/models/providers", json={"name": "Sweep", "base_url": server.base_url})
    assert response.status_code == 201, response.text
    provider_id = response.json()["id"]
    response = await admin.post("/api/admin/models/entries", json={"provider_id": provider_id, "model": MODEL})
    assert response.status_code == 201, response.text
    model_id = response.json()["id"]
    response = await admin.post("/api/admin/security-groups", json={"id": "sweepers", "label": "Sweepers"})
    assert response.status_code == 201, response.text
    body = {"tool_pattern": "sweep_*", "action": "deny", "priority": 10, "group_id": "sweepers"}
    response = await admin.post("/api/admin/approval-rules", json=body)
    assert response.status_code == 201, response.text
    return {"provider_id": provider_id, "model_id": model_id, "rule_id": str(response.json()["id"]), "group_id": "sweepers"}


async def member_chat_objects(client: Any, title: str = "") -> dict[str, str]:
    """A conversation of ``client``'s whose turn waits on an approval (a model must be
    configured): what the member's id-bearing chat routes act on."""
    response = await client.post("/api/conversations", json={"title": title})
    assert response.status_code == 201, response.text
    conversation_id = response.json()["id"]
    response = await client.post(f"/api/conversations/{conversation_id}/messages", json={"text": NEEDS_APPROVAL})
    assert response.status_code == 202, response.text
    deadline = time.monotonic() + 10
    while True:
        approvals = (await client.get("/api/approvals")).json()["approvals"]
        mine = [a for a in approvals if a["conversation_id"] == conversation_id]
        if mine:
            break
        assert time.monotonic() < deadline, "no approval card was raised"
        await asyncio.sleep(0.02)
    # A recurring prompt delivered into that conversation: what the schedule routes act on.
    response = await client.post("/api/schedules", json={"prompt": "Swept daily.", "every": "every day at 8", "conversation_id": conversation_id})
    assert response.status_code == 201, response.text
    return {"conversation_id": conversation_id, "approval_id": mine[0]["id"], "job_id": response.json()["id"]}


async def question_objects(admin: Any, client: Any) -> dict[str, str]:
    """A conversation of ``client``'s whose turn waits on a question of the probe's tool
    (the probe plugin enabled, a model configured): the question route's object."""
    response = await admin.post("/api/admin/approval-rules", json={"tool_pattern": ASK_TOOL, "action": "allow", "priority": 60})
    assert response.status_code in (201, 409), response.text
    response = await client.post("/api/conversations", json={})
    assert response.status_code == 201, response.text
    conversation_id = response.json()["id"]
    response = await client.post(f"/api/conversations/{conversation_id}/messages", json={"text": ASKS})
    assert response.status_code == 202, response.text
    deadline = time.monotonic() + 10
    while True:
        questions = (await client.get(f"/api/conversations/{conversation_id}")).json()["questions"]
        if questions:
            return {"question_id": questions[0]["question_id"], "question_conversation_id": conversation_id}
        assert time.monotonic() < deadline, "no question was asked"
        await asyncio.sleep(0.02)


async def folder_objects(admin: Any, client: Any) -> dict[str, str]:
    """A shared folder of the admin's and a project of ``client``'s holding one file:
    what the folder and project routes act on (``target``: a name an upload may use)."""
    response = await admin.post("/api/admin/shared-folders", json={"slug": "routes", "title": "Routes"})
    assert response.status_code == 201, response.text
    folder_id = response.json()["id"]
    response = await client.post("/api/projects", json={"slug": "routes", "title": "Routes"})
    assert response.status_code == 201, response.text
    project_id = response.json()["id"]
    response = await client.post(f"/api/projects/{project_id}/files/upload/plan.txt", content=b"a plan")
    assert response.status_code == 201, response.text
    return {"folder_id": folder_id, "project_id": project_id, "target": "swept.txt"}


async def owner_dump(host: Any, member_id: str) -> dict[str, list[tuple]]:
    """Every row of every table of a member's own (encrypted) file, while it is open."""
    db = host.core.users.owner_db(member_id)
    assert db is not None, "the member's file is locked"

    def read(conn: Any) -> dict[str, list[tuple]]:
        # An FTS index's WITHOUT ROWID shadow tables have no rowid; their key orders them.
        tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
        order = {t: "" if "WITHOUT ROWID" in (sql or "").upper() else " ORDER BY rowid" for t, sql in tables}
        return {t: [tuple(r) for r in conn.execute(f'SELECT * FROM "{t}"{order[t]}')] for t in order}

    return await db.run(read)


async def own_report(host: Any, member_id: str) -> str:
    """A report in the member's own file, as a system agent files one; its id."""
    from skald_host.core.system_agents import store

    return await host.core.users.owner_db(member_id).transaction(
        lambda c: store.insert_report(c, kind="test", audience="self", agent_id="test", title="Private", summary="s", body="b")
    )


async def a_live_run(host, client, conversation_id: str) -> str:
    """A queued sub-agent run in the member's own file, written by the run store the
    coordinator uses (a delegation would need a scripted model turn of its own)."""
    from skald_host.core.agent.subagents.runs import NewRun

    runtime = await host.core.chat.runtime(await host.core.users.get(client.member["id"]))
    [accepted] = await runtime.subagents.store.accept(
        conversation_id, "sweep-tree", None, (), "root", "sweep-frame", [NewRun("researcher", "0" * 64, None, "foreground", 1, "a task", {}, None, None)],
        max_runs_per_tree=16, max_pending=128,
    )
    return accepted.run_id

"""A German member's tool cards and export read the host's own tool errors in German
(German-member probe): a schedule the scheduled-prompt tools cannot read, and a helper
whose model failed, kept their English only (the code was dropped on the way to the
ToolError). The model still reads the English. The export's tool arguments read as
written ("Prüfe", not "Pr\\u00fcfe")."""

from __future__ import annotations

import json
from typing import Any

from skald_host.testing import Reply, ScriptedError, ToolCall

from .support import MODEL_A, ChatSocket, allow_tool, configure_models, messages, new_conversation

TASK = "Prüfe die Hauptstadt von Norwegen."


async def test_a_schedule_the_tool_cannot_read_is_worded_in_german_in_the_card_data_and_the_export(chat):
    await configure_models(chat.admin, chat.server)
    await allow_tool(chat.admin, "schedule_prompt")
    bert = await chat.host.member("bert", locale="de")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("schedule_prompt", {"prompt": "Gießen", "every": "alle blaumond"})]),
        Reply("Geht nicht."),
    ])
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert, title="Plan")
        await sock.send(cid, "Plane etwas")
        events = await sock.turn(cid)

    [sent] = [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"]
    assert sent.startswith("Error: cannot read 'alle blaumond' as a schedule"), sent  # the model reads the English
    reason = {"code": "recurrence_invalid", "values": {}}
    assert [e.get("reason") for e in events if e["type"] == "tool_error"] == [reason]
    [call] = [c for m in await messages(bert, cid) for c in m["tool_calls"]]
    assert call["reason"] == reason

    markdown = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "md"})).text
    assert "Dieser Zeitplan ist nicht lesbar." in markdown, markdown
    assert "cannot read" not in markdown, markdown
    assert '{"prompt": "Gießen", "every": "alle blaumond"}' in markdown and "\\u00df" not in markdown, markdown


async def test_a_failed_helper_is_worded_in_german_in_the_card_data_and_the_export(chat):
    await configure_models(chat.admin, chat.server)
    bert = await chat.host.member("bert", locale="de")
    seen: dict[str, Any] = {}

    async def respond(request):
        if request.messages[1].get("content") == TASK:  # the helper's own frame
            return ScriptedError(401, "bad key", should_retry=False)
        if request.messages[-1]["role"] == "tool":
            seen["result"] = request.messages[-1]["content"]
            return Reply("Der Helfer ist gescheitert.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "researcher", "task": TASK, "mode": "foreground"})])

    chat.server.responder = respond
    async with ChatSocket(bert) as sock:
        cid = await new_conversation(bert, title="Helfer")
        await sock.send(cid, "Frag den Helfer")
        events = await sock.turn(cid)

    assert " of agent researcher failed: " in seen["result"], seen  # the model reads the English
    [event] = [e for e in events if e["type"] == "tool_error"]
    assert event["reason"]["code"] == "agent_run_failed", event
    assert event["reason"]["values"]["agent"] == "researcher"
    [call] = [c for m in await messages(bert, cid) for c in m["tool_calls"]]
    assert call["reason"] == event["reason"]

    markdown = (await bert.get(f"/api/conversations/{cid}/export", params={"format": "md"})).text
    assert "Der Helfer researcher ist gescheitert: " in markdown, markdown
    assert "of agent researcher failed" not in markdown, markdown
    # The task as written, not escaped.
    assert json.dumps({"agent": "researcher", "task": TASK, "mode": "foreground"}, ensure_ascii=False) in markdown, markdown
    assert "\\u00fc" not in markdown, markdown

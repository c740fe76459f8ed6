"""Tool arguments a model may send that are JSON but no text, or JSON too deep to
read (hostile-input probe): a lone surrogate (``{"path": "\\ud800\\u0000"}``) left the
call ``requested`` for ever (the approval's hash could not encode it) and the turn
failed with nothing to retry; arguments nested 10,000 deep failed the turn with a
RecursionError. Each is the call's error, which the model reads as it reads an unknown
tool's, and the turn goes on — live, and when a restart finds such a call stored."""

from __future__ import annotations

import pytest

from skald_host.testing import Reply, ToolCall

from .support import MODEL_A, ChatSocket, alice_back_after_a_sign_out_cut_her_call, assert_well_formed, configure_models, messages, new_conversation, types

NOT_TEXT = "Error: the arguments are not valid text (a lone surrogate?); send them again as UTF-8 JSON."
TOO_DEEP = "Error: the arguments are nested deeper than 32 levels; send flatter JSON."

HOSTILE = [
    pytest.param('{"path": "\\ud800\\u0000"}', NOT_TEXT, id="escaped-lone-surrogate"),
    pytest.param('{"path": "\ud800x"}', NOT_TEXT, id="raw-lone-surrogate-in-the-stream"),
    pytest.param("[" * 10_000 + "]" * 10_000, TOO_DEEP, id="nested-10000-deep"),
    pytest.param('{"path": ' + "[" * 10_000 + "]" * 10_000 + "}", TOO_DEEP, id="nested-object-10000-deep"),
]


@pytest.mark.parametrize(("arguments", "result"), HOSTILE)
async def test_arguments_that_are_no_text_or_too_deep_are_the_calls_error_and_the_turn_goes_on(chat, arguments, result):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("read_file", arguments), ToolCall("read_file", {"path": "notes.txt"})]),
        Reply("I could not read it."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Read it")
        events = await sock.turn(cid)
    assert "turn_failed" not in types(events)
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    first, second = transcript[1]["tool_calls"]
    assert (first["status"], first["result"]) == ("error", result)
    assert second["status"] in ("done", "error") and second["result"] != result
    assert transcript[-1]["content"] == "I could not read it." and transcript[-1]["status"] == "complete"
    sent = [m["content"] for m in chat.server.requests_for(MODEL_A)[-1].messages if m["role"] == "tool"]
    assert sent[0] == result


@pytest.mark.parametrize(("arguments", "result"), [HOSTILE[0], HOSTILE[2]])
async def test_a_stored_running_call_with_such_arguments_ends_as_its_error_after_a_restart(chat, arguments, result):
    """Recovery runs a ``rerun`` call that was running again: with arguments that are
    no text, or too deep, it ends as the call's error, never as a recovery that fails."""
    alice, cid = await alice_back_after_a_sign_out_cut_her_call(chat, "Read it.", "read_file", arguments, "I could not read it.")
    transcript = await messages(alice, cid)
    assert_well_formed(transcript)
    call = transcript[1]["tool_calls"][0]
    assert (call["status"], call["result"]) == ("error", result)
    assert transcript[-1]["content"] == "I could not read it."

"""Compaction at the edges of a turn: an automatic one that fails after a complete
answer, a /compact after a failed turn, and Regenerate after an automatic one."""

from __future__ import annotations

import logging

import pytest

from skald_host.core.agent.projection import SUMMARY_PREFIX
from skald_host.core.agent.runtime import COMPACT_PROMPT
from skald_host.testing import Reply, ScriptedError

from .support import MODEL_A, ChatSocket, configure_models, conversation, messages, new_conversation

AUTOMATIC = [{"chat": {"compact_after_tokens": 20}}]


@pytest.mark.parametrize("chat_settings", AUTOMATIC)
async def test_a_failed_automatic_compaction_keeps_the_answer_and_the_queued_message_gets_its_turn(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply("A slow but complete answer.", token_delay=0.1, usage=(100, 6)),
        ScriptedError(500, "summaries are down", should_retry=False),
        Reply("The queued one, answered.", usage=(5, 4)),  # under the limit: no compaction
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First.")
        await sock.wait_event(cid, "token")
        await sock.send(cid, "Queued meanwhile.")
        first = await sock.turn(cid)
        second = await sock.turn(cid)
    assert "error" not in [e["type"] for e in first + second]
    assert [e["content"] for e in first if e["type"] == "done"] == ["A slow but complete answer."]
    assert [e["content"] for e in second if e["type"] == "done"] == ["The queued one, answered."]
    state = await conversation(alice, cid)
    assert state["running"] is False and state["queued"] == []
    shown = [(m["role"], m["status"], m["content"]) for m in await messages(alice, cid)]
    assert shown == [
        ("user", "complete", "First."), ("assistant", "complete", "A slow but complete answer."),
        ("user", "complete", "Queued meanwhile."), ("assistant", "complete", "The queued one, answered."),
    ]
    requests = chat.server.requests_for(MODEL_A)
    assert requests[1].messages[-1] == {"role": "user", "content": COMPACT_PROMPT}
    assert requests[2].messages[-1] == {"role": "user", "content": "Queued meanwhile."}
    assert (await alice.post(f"/api/conversations/{cid}/retry")).status_code == 409  # nothing failed


@pytest.mark.parametrize("chat_settings", AUTOMATIC)
async def test_a_failed_automatic_compaction_logs_its_status_not_the_providers_words(chat, caplog):
    """A provider's error body may quote the messages it was asked to summarise: the
    log (which the admin reads) says the failure's status, never those words."""
    caplog.set_level(logging.INFO)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply("Answered.", usage=(100, 6)),
        ScriptedError(400, "context too long; your messages: ZQXMARK-cf1 hello", type="invalid_request_error"),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "ZQXMARK-cf1 hello")
        assert [e["content"] for e in await sock.turn(cid) if e["type"] == "done"] == ["Answered."]
    assert chat.server.requests_for(MODEL_A)[1].messages[-1] == {"role": "user", "content": COMPACT_PROMPT}
    said = [r.getMessage() for r in caplog.records]
    assert any("automatic compaction failed (HTTP 400)" in line for line in said), said
    assert not [line for line in said if "ZQXMARK" in line or "context too long" in line]


async def test_compact_after_a_failed_turn_leaves_it_out_and_its_retry_stays(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    too_long = ScriptedError(400, "maximum context length exceeded", type="invalid_request_error", code="context_length_exceeded")
    chat.server.script(MODEL_A, [Reply("Hello back."), too_long, Reply("We greeted each other."), Reply("Now answered.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello.")
        await sock.turn(cid)
        await sock.send(cid, "A very long question.")
        assert "error" in [e["type"] for e in await sock.turn(cid)]

        response = await alice.post(f"/api/conversations/{cid}/compact")
        assert response.status_code == 200 and response.json() == {"compacted": True}
        summarise = chat.server.requests_for(MODEL_A)[2]
        assert summarise.messages[1:] == [
            {"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hello back."},
            {"role": "user", "content": COMPACT_PROMPT},
        ]
        shown = [(m["role"], m["status"]) for m in await messages(alice, cid) if m["role"] != "note"]
        assert shown[-3:] == [("summary", "complete"), ("user", "complete"), ("assistant", "error")]

        response = await alice.post(f"/api/conversations/{cid}/retry")
        assert response.status_code == 202, response.text
        done = [e["content"] for e in await sock.turn(cid) if e["type"] == "done"]
    assert done == ["Now answered."]
    assert chat.server.requests_for(MODEL_A)[3].messages[1:] == [
        {"role": "user", "content": SUMMARY_PREFIX + "We greeted each other."},
        {"role": "user", "content": "A very long question."},
    ]


@pytest.mark.parametrize("chat_settings", AUTOMATIC)
async def test_regenerate_works_on_the_last_answer_after_an_automatic_compaction(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [
        Reply("Answer one.", usage=(100, 2)), Reply("Summary one."),
        Reply("Answer two.", usage=(100, 2)), Reply("Summary two."),
        Reply("Answer two, again.", usage=(100, 3)), Reply("Summary two, again."),
    ])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        for text in ("One.", "Two."):
            await sock.send(cid, text)
            await sock.wait_event(cid, "compacted", start=len(sock.events))
            await sock.turn(cid)
        assert [m["role"] for m in await messages(alice, cid) if not m["variant"]][-1] == "summary"

        start = len(sock.events)
        response = await alice.post(f"/api/conversations/{cid}/regenerate")
        assert response.status_code == 202, response.text
        await sock.wait_event(cid, "compacted", start=start)
        await sock.turn(cid)
    again = chat.server.requests_for(MODEL_A)[4]
    assert again.messages[1:] == [  # the summary made before "Two.", not the one that summarised the old answer
        {"role": "user", "content": SUMMARY_PREFIX + "Summary one."},
        {"role": "user", "content": "Two."},
    ]
    shown = [(m["role"], m["content"]) for m in await messages(alice, cid) if not m["variant"]]
    assert shown[-3:] == [("user", "Two."), ("assistant", "Answer two, again."), ("summary", "Summary two, again.")]
    kept = [(m["role"], m["content"]) for m in await messages(alice, cid) if m["variant"]]
    assert kept == [("assistant", "Answer two."), ("summary", "Summary two.")]

    # Flipping back to the first version brings its summary back with it.
    response = await alice.put(f"/api/conversations/{cid}/version", json={"variant": 1})
    assert response.status_code == 200, response.text
    shown = [(m["role"], m["content"]) for m in await messages(alice, cid) if not m["variant"]]
    assert shown[-3:] == [("user", "Two."), ("assistant", "Answer two."), ("summary", "Summary two.")]

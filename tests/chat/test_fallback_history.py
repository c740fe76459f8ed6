"""A model fallback is history, not only an event: its note is stored (before it is
announced) and names the answer it led to, the failed answer names the model that
failed live as stored, and the log says what happened to each model."""

from __future__ import annotations

import logging
import socket

from skald_host.testing import Hang, ScriptedError

from .support import MODEL_A, MODEL_B, ChatSocket, configure_models, messages, new_conversation, types


async def test_a_fallback_from_an_unreachable_model_is_a_stored_note_and_every_failure_is_logged(chat, caplog):
    caplog.set_level(logging.WARNING, logger="skald_host")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nowhere = await chat.admin.post("/api/admin/models/providers", json={"name": "nowhere", "base_url": f"http://127.0.0.1:{port}/v1"})
    assert nowhere.status_code == 201, nowhere.text
    entry = {"provider_id": nowhere.json()["id"], "model": "gone", "label": "Gone model", "priority": 1}
    assert (await chat.admin.post("/api/admin/models/entries", json=entry)).status_code == 201
    await configure_models(chat.admin, chat.server, ())  # the scripted provider, its model tried second:
    scripted = (await chat.admin.get("/api/admin/models")).json()["providers"][-1]["id"]
    entry = {"provider_id": scripted, "model": MODEL_B, "priority": 2}
    assert (await chat.admin.post("/api/admin/models/entries", json=entry)).status_code == 201
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_B, [ScriptedError(500)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Anyone there?")
        events = await sock.turn(cid)

    fallback = next(e for e in events if e["type"] == "model_fallback")
    error = next(e for e in events if e["type"] == "error")
    assert types(events).index("model_fallback") < types(events).index("error")
    assert error["model"] == MODEL_B  # live as stored: "Failed <model>"

    transcript = await messages(alice, cid)
    answer = next(m for m in transcript if m["role"] == "assistant")
    note = next(m for m in transcript if m["role"] == "note")
    assert (answer["status"], answer["model"]) == ("error", MODEL_B)
    assert note["id"] == fallback["note_id"]
    assert note["reason"] == {"code": "model_fallback", "values": {"failed": "Gone model", "next": MODEL_B, "message_id": answer["id"]}}
    assert note["content"] == f"Gone model did not answer; trying {MODEL_B}."

    said = [r.getMessage() for r in caplog.records]
    # Named by catalog entry (label, model, provider): two providers may serve one model name.
    assert any(f"model 'Gone model' (gone at nowhere) failed (could not be reached); the request goes to '{MODEL_B}' ({MODEL_B} at scripted)"
               in line for line in said), said
    assert any(f"model '{MODEL_B}' ({MODEL_B} at scripted) failed (HTTP 500); no other model is left to try" in line for line in said), said
    assert not any("HTTP None" in line for line in said)


async def test_a_stop_after_a_fallback_names_the_model_that_was_answering(chat):
    """The stopped answer is the second model's: stored and announced with it, so the
    screen reads "Stopped <model-b>" live and after a reload (it named the first entry,
    the one that had failed, before)."""
    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [ScriptedError(500)])
    chat.server.script(MODEL_B, [Hang(text="half of it", token_delay=0.05)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Go on, at length.")
        await sock.wait_event(cid, "token", delta=" it")
        assert (await sock.stop(cid))["stopped"] is True
        events = await sock.turn(cid)

    stopped = next(e for e in events if e["type"] == "answer_cancelled")
    assert stopped["model"] == MODEL_B
    answer = next(m for m in await messages(alice, cid) if m["role"] == "assistant")
    assert (answer["status"], answer["model"], answer["content"]) == ("cancelled", MODEL_B, "half of it")

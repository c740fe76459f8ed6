"""Two providers may serve the same model name (two bills): the catalog entry that
answered is recorded — on the answer (so it is labelled by that entry, live and after a
reload), in the request log (the usage page and API group by entry and name its label
and provider, an entry deleted since said so) and in the server's log line."""

from __future__ import annotations

import logging
import socket

from skald_host.testing import Reply

from .support import API_KEY, MODEL_A, ChatSocket, eventually, messages, new_conversation

MODEL = MODEL_A  # the one name both providers serve


async def _two_providers_one_model_name(chat) -> tuple[dict, dict]:
    """"Modell A" (priority 10) at a provider where nothing listens, "Modell B" (20) at
    the scripted server, both ``model-a``: the entries as the admin API returns them."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    entries = []
    for name, url, label, priority in (
        ("Provider A", f"http://127.0.0.1:{port}/v1", "Modell A", 10),
        ("Provider B", chat.server.base_url, "Modell B", 20),
    ):
        provider = await chat.admin.post("/api/admin/models/providers", json={"name": name, "base_url": url, "api_key": API_KEY})
        assert provider.status_code == 201, provider.text
        body = {"provider_id": provider.json()["id"], "model": MODEL, "label": label, "priority": priority}
        entry = await chat.admin.post("/api/admin/models/entries", json=body)
        assert entry.status_code == 201, entry.text
        entries.append({**entry.json(), "provider_name": name})
    return entries[0], entries[1]


async def test_an_answer_from_the_second_of_two_providers_serving_one_model_name_is_labelled_and_billed_by_its_entry(chat, caplog):
    caplog.set_level(logging.WARNING, logger="skald_host")
    a, b = await _two_providers_one_model_name(chat)
    chat.server.script(MODEL, [Reply("B's answer.", usage=(7, 3))])
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello?")
        events = await sock.turn(cid)

    fallback = next(e for e in events if e["type"] == "model_fallback")
    assert (fallback["failed"], fallback["next"]) == ("Modell A", "Modell B")
    done = next(e for e in events if e["type"] == "done")
    assert (done["model"], done["model_id"]) == (MODEL, b["id"])  # live: the entry that answered

    # After a reload: the stored answer names B's entry (its model name is A's too).
    answer = next(m for m in await messages(alice, cid) if m["role"] == "assistant")
    assert (answer["content"], answer["model"], answer["model_id"]) == ("B's answer.", MODEL, b["id"])
    status = (await alice.get("/api/chat/status")).json()
    labels = {m["id"]: m["label"] for m in status["models"]}
    assert labels[answer["model_id"]] == "Modell B"

    said = [r.getMessage() for r in caplog.records]
    assert any("model 'Modell A' (model-a at Provider A) failed (could not be reached);"
               " the request goes to 'Modell B' (model-a at Provider B)" in line for line in said), said

    async def logged() -> bool:  # the log is written in the background
        return await chat.host.core.registry.run(lambda c: c.execute("SELECT count(*) FROM llm_requests").fetchone()[0]) >= 2

    await eventually(logged, what="2 request rows")
    usage = (await chat.admin.get("/api/admin/usage")).json()
    entry_a = {"id": a["id"], "label": "Modell A", "provider_id": a["provider_id"], "provider_name": "Provider A", "deleted": False}
    entry_b = {"id": b["id"], "label": "Modell B", "provider_id": b["provider_id"], "provider_name": "Provider B", "deleted": False}
    # One row per entry, not one "test-model" row for both bills.
    assert sorted(((m["model"], m["entry"]["label"], m["requests"], m["tokens_in"]) for m in usage["models"]), key=str) == [
        (MODEL, "Modell A", {"error": 1}, 0),
        (MODEL, "Modell B", {"ok": 1}, 7),
    ]
    assert {m["entry"]["id"]: m["entry"] for m in usage["models"]} == {a["id"]: entry_a, b["id"]: entry_b}
    assert [(r["status"], r["entry"]) for r in usage["requests"]] == [("ok", entry_b), ("error", entry_a)]

    # B's entry deleted since: its rows keep its model name and say it is gone.
    assert (await chat.admin.delete(f"/api/admin/models/entries/{b['id']}")).status_code in (200, 204)
    usage = (await chat.admin.get("/api/admin/usage")).json()
    gone = {"id": b["id"], "label": None, "provider_id": None, "provider_name": None, "deleted": True}
    assert usage["requests"][0]["model"] == MODEL and usage["requests"][0]["entry"] == gone
    assert {m["entry"]["id"]: m["entry"] for m in usage["models"]}[b["id"]] == gone

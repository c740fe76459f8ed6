"""Models: fallback keyed on the real HTTP status (429, 5xx and a broken stream fall
back, 401 never does), request metadata in the registry and bodies only in the
member's file, and the chat saying so when no model is configured."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import skald_host
from skald_host.testing import BrokenStream, Reply, ScriptedError

from .support import API_KEY, MODEL_A, MODEL_B, PROBE, ChatSocket, configure_models, eventually, messages, new_conversation, types


async def test_rate_limited_model_falls_back_to_the_next_and_so_does_a_broken_stream(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [ScriptedError(429, retry_after=30), BrokenStream(after_chunks=2)])
    chat.server.script(MODEL_B, [Reply("Model B answers."), Reply("Model B again.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello?")
        first = await sock.turn(cid)
        await sock.send(cid, "Once more?")
        second = await sock.turn(cid)

    fallback = next(e for e in first if e["type"] == "model_fallback")
    assert (fallback["failed"], fallback["next"], fallback["status"]) == (MODEL_A, MODEL_B, 429)
    assert types(first).index("model_fallback") < types(first).index("done")
    assert next(e for e in first if e["type"] == "done")["content"] == "Model B answers."

    broken = next(e for e in second if e["type"] == "model_fallback")
    assert (broken["failed"], broken["next"], broken["status"]) == (MODEL_A, MODEL_B, None)
    # Tokens of the broken stream came before the fallback; the answer is B's alone.
    assert types(second).index("token") < types(second).index("model_fallback")
    assert next(e for e in second if e["type"] == "done")["content"] == "Model B again."

    transcript = await messages(alice, cid)
    assert [(m["role"], m["status"], m["model"], m["content"]) for m in transcript if m["role"] == "assistant"] == [
        ("assistant", "complete", MODEL_B, "Model B answers."),
        ("assistant", "complete", MODEL_B, "Model B again."),
    ]
    assert len(chat.server.requests_for(MODEL_A)) == len(chat.server.requests_for(MODEL_B)) == 2
    # The fallback model got the same conversation the failed one was sent.
    assert chat.server.requests_for(MODEL_B)[1].messages == chat.server.requests_for(MODEL_A)[1].messages

    # Metadata in the registry, attributed to alice; no message text there.
    async def logged() -> list:  # written in the background: nothing the member sees waits for it
        rows = await chat.host.core.registry.run(
            lambda c: c.execute("SELECT member_id, model, status, http_status FROM llm_requests ORDER BY created_at, rowid").fetchall()
        )
        return rows if len(rows) == 4 else []

    rows = await eventually(logged, what="four request rows")
    assert [tuple(r) for r in rows] == [
        (alice.member["id"], MODEL_A, "error", 429),
        (alice.member["id"], MODEL_B, "ok", 200),
        (alice.member["id"], MODEL_A, "error", None),
        (alice.member["id"], MODEL_B, "ok", 200),
    ]
    dump = "\n".join(await chat.host.core.registry.run(lambda c: list(c.iterdump())))
    assert "Model B answers." not in dump and "Once more?" not in dump


async def test_unauthorized_model_does_not_fall_back_and_the_conversation_shows_the_error(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [ScriptedError(401)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello?")
        events = await sock.turn(cid)
    assert "model_fallback" not in types(events) and "done" not in types(events)
    error = next(e for e in events if e["type"] == "error")
    assert "401" in error["error"]
    assert chat.server.requests_for(MODEL_B) == []
    assistant = (await messages(alice, cid))[-1]
    assert (assistant["role"], assistant["status"]) == ("assistant", "error") and "401" in assistant["content"]
    # Why, as a code and values the member's screen words in their language (live and stored alike).
    assert error["code"] == "model_refused" and error["values"]["status"] == 401 and "401" in error["values"]["detail"]
    assert assistant["reason"] == {"code": "model_refused", "values": error["values"]}


async def test_wrong_api_key_is_a_401_from_the_provider_and_the_key_is_never_shown(chat):
    await configure_models(chat.admin, chat.server, api_key="sk-wrong-key")
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello?")
        events = await sock.turn(cid)
    assert "401" in next(e for e in events if e["type"] == "error")["error"]
    assert chat.server.requests_for(MODEL_A)[0].headers["authorization"] == "Bearer sk-wrong-key"
    overview = await chat.admin.get("/api/admin/models")
    assert overview.status_code == 200 and "sk-wrong-key" not in overview.text
    provider = overview.json()["providers"][0]
    test = await chat.admin.post(f"/api/admin/models/providers/{provider['id']}/test")
    assert test.status_code == 200 and test.json()["ok"] is False and test.json()["status"] == 401
    assert test.json()["code"] == "model_refused"


async def test_testing_a_provider_where_nothing_listens_says_unreachable_at_once_not_timeout(chat):
    """A refused connection is said as such (the SDK's transport calls it a timeout),
    with a code the page words in the admin's language."""
    import socket
    import time

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    created = await chat.admin.post("/api/admin/models/providers", json={"name": "nowhere", "base_url": f"http://127.0.0.1:{port}/v1"})
    assert created.status_code == 201, created.text
    started = time.monotonic()
    test = await chat.admin.post(f"/api/admin/models/providers/{created.json()['id']}/test")
    assert time.monotonic() - started < 9  # not the 10 s timeout
    body = test.json()
    assert (body["ok"], body["code"], body["status"]) == (False, "model_connection_refused", None), body
    assert "timeout" not in body["error"].lower()


async def test_a_404_from_the_model_list_says_the_address_may_lack_its_api_path(chat):
    """A base URL without /v1 was "refused (HTTP 404)", with nothing on the address to
    check (newcomer report 7, point 4): the page now says, in en and de, that the
    address may be missing its API path."""
    bare = chat.server.base_url.removesuffix("/v1")
    created = await chat.admin.post("/api/admin/models/providers", json={"name": "no path", "base_url": bare, "api_key": API_KEY})
    assert created.status_code == 201, created.text
    body = (await chat.admin.post(f"/api/admin/models/providers/{created.json()['id']}/test")).json()
    assert (body["ok"], body["code"], body["status"]) == (False, "model_list_not_found", 404), body
    locales = Path(skald_host.__file__).parent / "builtins" / "locales"
    english, german = (json.loads((locales / f"{lang}.json").read_text()) for lang in ("en", "de"))
    for key in ("models.test_error.model_list_not_found", "error.model_list_not_found"):
        said = english[key].format(reason=body["values"]["reason"])
        assert said.startswith("The provider has no model list at this address (HTTP 404") and "/v1" in said, said
        assert "API-Pfad" in german[key] and "/v1" in german[key], german[key]


async def test_without_a_model_the_chat_says_none_is_configured(chat):
    alice = await chat.host.member("alice")
    status = await alice.get("/api/chat/status")
    assert status.status_code == 200
    assert status.json()["models_configured"] is False and status.json()["default_agent"] == "assistant"
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Hello?")
        events = await sock.turn(cid)
    error = next(e for e in events if e["type"] == "error")
    assert error["code"] == "no_model" and "No model is configured" in error["error"]
    failed = (await messages(alice, cid))[-1]
    assert (failed["role"], failed["status"], failed["id"]) == ("assistant", "error", error["message_id"])
    assert "No model is configured" in failed["content"] and "Models page" in failed["content"]
    assert failed["reason"] == {"code": "no_model", "values": {}}  # shown in the reader's language after a reload
    assert chat.server.requests == []

    await configure_models(chat.admin, chat.server)
    assert (await alice.get("/api/chat/status")).json()["models_configured"] is True
    test = await chat.admin.post(f"/api/admin/models/providers/{(await chat.admin.get('/api/admin/models')).json()['providers'][0]['id']}/test")
    assert test.json()["ok"] is True and MODEL_A in test.json()["models"]


async def test_model_admin_api_answers_mistakes_with_a_400_that_says_what_was_wrong(chat):
    ids = await configure_models(chat.admin, chat.server)
    other = await chat.admin.post("/api/admin/models/providers", json={"name": "other", "base_url": "http://127.0.0.1:9/v1"})
    assert other.status_code == 201
    rename = await chat.admin.patch(f"/api/admin/models/providers/{other.json()['id']}", json={"name": "scripted"})
    assert rename.status_code == 400 and "exists already" in rename.json()["error"]
    for body in ({"model_id": "x"}, {"self": 1}, {"priority": True}):
        response = await chat.admin.patch(f"/api/admin/models/entries/{ids[MODEL_A]}", json=body)
        assert response.status_code == 400, (body, response.text)
    provider_id = (await chat.admin.get("/api/admin/models")).json()["models"][0]["provider_id"]
    response = await chat.admin.post("/api/admin/models/entries", json={"provider_id": provider_id, "model": "m", "self": 1})
    assert response.status_code == 400 and "self" in response.json()["error"]
    assert [p["name"] for p in (await chat.admin.get("/api/admin/models")).json()["providers"]] == ["other", "scripted"]


async def test_a_model_disabled_or_added_on_the_models_api_takes_effect_on_the_next_turn(chat):
    """The enabled models are kept in memory between turns; every change made through
    the admin API must still reach the very next turn (the kept copy is dropped)."""
    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("A answers.")])
    chat.server.script(MODEL_B, [Reply("B answers."), Reply("B again.")])
    entries = (await chat.admin.get("/api/admin/models")).json()["models"]
    model_a = next(m for m in entries if m["model"] == MODEL_A)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First?")
        first = await sock.turn(cid)
        response = await chat.admin.patch(f"/api/admin/models/entries/{model_a['id']}", json={"enabled": False})
        assert response.status_code == 200, response.text
        await sock.send(cid, "Second?")
        second = await sock.turn(cid)
        response = await chat.admin.delete(f"/api/admin/models/entries/{next(m for m in entries if m['model'] == MODEL_B)['id']}")
        assert response.status_code in (200, 204), response.text
        await sock.send(cid, "Third?")
        third = await sock.turn(cid)

    assert next(e for e in first if e["type"] == "done")["content"] == "A answers."
    assert next(e for e in second if e["type"] == "done")["content"] == "B answers."
    # Nothing enabled is left: the chat says so instead of using a kept copy.
    assert any(e["type"] == "error" and e.get("code") == "no_model" for e in third), third
    assert len(chat.server.requests_for(MODEL_A)) == 1 and len(chat.server.requests_for(MODEL_B)) == 1


async def test_a_turn_that_failed_without_a_model_stays_failed_after_a_restart_until_the_member_retries(chat, skald):
    """Issue 19, bug 1: recovery resumes only interrupted turns; a failure is shown and
    offered for Retry, which answers the message once."""
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        for text in ("One?", "Two?"):
            await sock.send(cid, text)
            await sock.turn(cid)
        assert (await alice.post(f"/api/conversations/{cid}/retry")).status_code == 202  # still no model: fails again
        await sock.turn(cid)
    await configure_models(chat.admin, chat.server)
    chat.server.responder = lambda request: Reply("Answered " + request.last_user_text)
    await chat.host.stop()

    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        await asyncio.sleep(0.5)  # recovery runs at the member's first login; nothing may start
        assert chat.server.requests == []
        transcript = await messages(alice, cid)
        assert [(m["role"], m["status"]) for m in transcript] == [
            ("user", "complete"), ("assistant", "error"), ("user", "complete"), ("assistant", "error"),
        ]
        response = await alice.post(f"/api/conversations/{cid}/retry")
        assert response.status_code == 202, response.text
        await sock.turn(cid)
        again = await alice.post(f"/api/conversations/{cid}/retry")
        assert again.status_code == 409 and "did not fail" in again.json()["error"]
    transcript = await messages(alice, cid)
    assert [(m["role"], m["status"], m["content"]) for m in transcript[2:]] == [
        ("user", "complete", "Two?"), ("assistant", "complete", "Answered Two?"),
    ]
    assert len(chat.server.requests) == 1


async def test_retry_works_after_every_model_of_the_fallback_chain_failed(chat):
    """The fallback's note is written after the failed answer's row (the row exists
    before the request), so the history ends in the note: Retry refused 'did not fail'
    beside an answer marked Failed (rewalk probe)."""
    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [ScriptedError(503)])
    chat.server.script(MODEL_B, [ScriptedError(503)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Anyone?")
        assert "model_fallback" in types(await sock.turn(cid))
        assert [m["role"] for m in await messages(alice, cid)][-2:] == ["assistant", "note"]  # the shape that was refused
        chat.server.responder = lambda request: Reply("Here now.")
        response = await alice.post(f"/api/conversations/{cid}/retry")
        assert response.status_code == 202, response.text
        await sock.turn(cid)
    assert [(m["role"], m["status"], m["content"]) for m in await messages(alice, cid)] == [
        ("user", "complete", "Anyone?"), ("assistant", "complete", "Here now.")]


async def test_recovery_leaves_alone_a_failure_an_earlier_version_recorded_as_a_note(chat, skald):
    """Data written before failed turns became failed answers: the member's message
    followed by an error note is a failed turn, not an interrupted one."""
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    runtime = await chat.host.core.chat.runtime(await chat.host.core.users.find("alice"))
    frame = await runtime.store.root_frame(cid)
    await runtime.store.add_user_message(frame, "Old message?", None)
    await runtime.store.add_note(frame, "No model is configured yet.", status="error")
    await configure_models(chat.admin, chat.server)
    chat.server.responder = lambda request: Reply("should not be asked")
    await chat.host.stop()
    host = await skald.start(plugins=[chat.probe], settings=chat.host.settings, enable=[PROBE])
    alice = await host.member("alice")
    async with ChatSocket(alice) as sock:
        await asyncio.sleep(0.5)
        assert chat.server.requests == []
        assert (await alice.post(f"/api/conversations/{cid}/retry")).status_code == 202
        await sock.turn(cid)
    assert [(m["role"], m["status"]) for m in await messages(alice, cid)] == [("user", "complete"), ("assistant", "complete")]
    assert len(chat.server.requests) == 1


async def test_connection_test_lists_names_a_server_gives_without_ids_and_never_null(chat):
    """Issue 19, bug 4: a provider whose model list has entries without an ``id`` (or a
    null one) lists the names it does give; "null" is never a model name."""
    body = json.dumps({"object": "list", "data": [{"id": None, "name": "llama3"}, {"model": "qwen"}, {"id": "phi"}, {}]}).encode()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        provider = await chat.admin.post("/api/admin/models/providers", json={"name": "odd", "base_url": f"http://127.0.0.1:{port}/v1"})
        assert provider.status_code == 201, provider.text
        test = await chat.admin.post(f"/api/admin/models/providers/{provider.json()['id']}/test")
    finally:
        server.close()
        await server.wait_closed()
    assert test.status_code == 200 and test.json() == {"ok": True, "models": ["llama3", "phi", "qwen"]}


async def test_a_conversation_uses_the_model_its_member_picked_the_others_stay_fallbacks(chat):
    ids = await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply(f"{request.model} answers")
    status = (await alice.get("/api/chat/status")).json()
    assert [m["id"] for m in status["models"]] == [ids[MODEL_A], ids[MODEL_B]]
    async with ChatSocket(alice) as sock:
        picked, other = await new_conversation(alice), await new_conversation(alice)
        response = await alice.patch(f"/api/conversations/{picked}", json={"model": ids[MODEL_B]})
        assert response.status_code == 200 and response.json()["model"] == ids[MODEL_B]
        for cid in (picked, other):
            await sock.send(cid, "Who answers?")
            await sock.turn(cid)
        response = await alice.patch(f"/api/conversations/{picked}", json={"model": None})
        assert response.status_code == 200 and response.json()["model"] is None
        await sock.send(picked, "And now?")
        await sock.turn(picked)
    answers = {cid: [m["content"] for m in await messages(alice, cid) if m["role"] == "assistant"] for cid in (picked, other)}
    assert answers == {picked: [f"{MODEL_B} answers", f"{MODEL_A} answers"], other: [f"{MODEL_A} answers"]}
    wrong = await alice.patch(f"/api/conversations/{picked}", json={"model": "no-such-model"})
    assert wrong.status_code == 400 and wrong.json()["error"] == "no such model is enabled"
    assert (await alice.patch(f"/api/conversations/{picked}", json={})).status_code == 400
    bob = await chat.host.member("bob")
    assert (await bob.patch(f"/api/conversations/{picked}", json={"model": ids[MODEL_B]})).status_code == 404


async def test_a_conversation_created_with_a_model_uses_it_and_a_model_not_enabled_creates_nothing(chat):
    """The fresh composer's picker: the model goes with the create, one request."""
    ids = await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    chat.server.responder = lambda request: Reply(f"{request.model} answers")
    created = await alice.post("/api/conversations", json={"model": ids[MODEL_B]})
    assert created.status_code == 201 and created.json()["model"] == ids[MODEL_B], created.text
    default = await alice.post("/api/conversations", json={"model": None})
    assert default.status_code == 201 and default.json()["model"] is None
    async with ChatSocket(alice) as sock:
        for cid in (created.json()["id"], default.json()["id"]):
            await sock.send(cid, "Who answers?")
            await sock.turn(cid)
    assert [m["content"] for m in await messages(alice, created.json()["id"]) if m["role"] == "assistant"] == [f"{MODEL_B} answers"]
    assert [m["content"] for m in await messages(alice, default.json()["id"]) if m["role"] == "assistant"] == [f"{MODEL_A} answers"]
    wrong = await alice.post("/api/conversations", json={"model": "no-such-model"})
    assert wrong.status_code == 400 and wrong.json()["code"] == "model_not_enabled", wrong.text
    assert (await alice.post("/api/conversations", json={"model": 7})).status_code == 400
    assert len((await alice.get("/api/conversations")).json()["conversations"]) == 2  # the refused ones stored nothing

"""/compact (seed 001 "Compaction", "Context size"): a summary made on demand stands in
for the history it replaces; never while a turn runs; nothing compacts on its own
unless the admin configures a threshold."""

from __future__ import annotations

from openai._utils._json import openapi_dumps

from skald_host.core.agent.projection import SUMMARY_PREFIX
from skald_host.core.agent.runtime import COMPACT_PROMPT
from skald_host.testing import Hang, Reply

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation


async def test_compact_stores_a_summary_that_opens_the_next_request(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("Paris is the capital."), Reply("We talked about Paris."), Reply("Lyon is second.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Capital of France?")
        await sock.turn(cid)

        response = await alice.post(f"/api/conversations/{cid}/compact")
        assert response.status_code == 200 and response.json() == {"compacted": True}
        summarise = chat.server.requests_for(MODEL_A)[1]
        assert "tools" not in summarise.body
        assert summarise.raw == openapi_dumps(summarise.body)  # a body encoded whole: the SDK's bytes too
        assert summarise.messages[-1] == {"role": "user", "content": COMPACT_PROMPT}
        assert {"role": "assistant", "content": "Paris is the capital."} in summarise.messages
        compacted = await sock.wait_event(cid, "compacted")
        assert compacted["conversation_id"] == cid

        transcript = await messages(alice, cid)
        assert [(m["role"], m["content"]) for m in transcript][-1] == ("summary", "We talked about Paris.")

        await sock.send(cid, "And the second city?")
        await sock.turn(cid)
    after = chat.server.requests_for(MODEL_A)[2]
    assert after.messages[1:] == [
        {"role": "user", "content": SUMMARY_PREFIX + "We talked about Paris."},
        {"role": "user", "content": "And the second city?"},
    ]


async def test_compact_is_refused_while_a_turn_runs(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("One."), Hang(text="still going", token_delay=0.01)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "First.")
        await sock.turn(cid)
        await sock.send(cid, "Second.")
        await sock.wait_event(cid, "token", delta=" going")
        response = await alice.post(f"/api/conversations/{cid}/compact")
        assert response.status_code == 409 and "running" in response.json()["error"]
        await sock.stop(cid)
        await sock.turn(cid)
    assert [m["role"] for m in await messages(alice, cid)] == ["user", "assistant", "user", "assistant"]
    assert len(chat.server.requests_for(MODEL_A)) == 2


async def test_automatic_compaction_is_off_by_default_even_past_any_size(chat):
    assert chat.host.settings.chat.compact_after_tokens is None
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("Huge.", usage=(5_000_000, 1)), Reply("Still whole.", usage=(5_000_001, 2))])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        for text in ("One.", "Two."):
            await sock.send(cid, text)
            await sock.turn(cid)
    assert len(chat.server.requests_for(MODEL_A)) == 2
    assert "summary" not in [m["role"] for m in await messages(alice, cid)]
    assert len(chat.server.requests_for(MODEL_A)[1].messages) == 4  # system + the whole history


async def test_automatic_compaction_runs_only_when_configured(skald, tmp_path):
    from skald_host.testing import ScriptedModelServer

    from .support import API_KEY

    async with ScriptedModelServer(models=(MODEL_A,), api_key=API_KEY) as server:
        host = await skald.start(settings=skald.settings(chat={"compact_after_tokens": 1000}))
        try:
            admin = await host.admin()
            await configure_models(admin, server)
            alice = await host.member("alice")
            server.script(MODEL_A, [Reply("Long.", usage=(1500, 1)), Reply("Summary of it."), Reply("Next.")])
            async with ChatSocket(alice) as sock:
                cid = await new_conversation(alice)
                await sock.send(cid, "Something long.")
                await sock.wait_event(cid, "compacted")
                await sock.turn(cid)
                await sock.send(cid, "Go on.")
                await sock.turn(cid)
            requests = server.requests_for(MODEL_A)
            assert len(requests) == 3  # the answer, the summary, the next answer: no round of its own
            assert requests[2].messages[1] == {"role": "user", "content": SUMMARY_PREFIX + "Summary of it."}
            assert requests[2].messages[-1] == {"role": "user", "content": "Go on."}
            roles = [m["role"] for m in await messages(alice, cid)]
            assert roles == ["user", "assistant", "summary", "user", "assistant"]
        finally:
            await skald.close()

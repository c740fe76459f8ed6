"""A model fallback inside a sub-agent is shown to the member as in their own turn
(README "Models": a fallback "is shown in the conversation"): the run's drill-in
transcript holds the note, before the answer the fallback model wrote."""

from __future__ import annotations

from typing import Any

from skald_host.testing import Reply, ScriptedError

from .support import MODEL_A, MODEL_B, ChatSocket, configure_models, new_conversation
from .test_subagent_failure import delegating, run_detail, runs


async def test_a_fallback_inside_a_run_is_a_note_in_the_runs_transcript(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice")
    seen: dict[str, Any] = {}

    def helper(request):
        if request.model == MODEL_A:
            return ScriptedError(503, "model-a is overloaded", should_retry=False)
        return Reply("Oslo.")

    chat.server.responder = delegating(seen, helper)
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the researcher.")
        await sock.turn(cid)

    [row] = await runs(alice, cid)
    detail = await run_detail(alice, row["id"])
    assert detail["run"]["status"] == "completed", detail["run"]
    notes = [m for m in detail["transcript"] if m["role"] == "note"]
    assert len(notes) == 1, detail["transcript"]
    [note] = notes
    assert note["reason"]["code"] == "model_fallback"
    assert MODEL_B in note["content"] or "trying" in note["content"], note
    answer = next(m for m in detail["transcript"] if m["role"] == "assistant" and m["content"] == "Oslo.")
    assert note["reason"]["values"]["message_id"] == answer["id"]
    # The task itself is still the run's first message.
    assert detail["transcript"][0]["role"] == "user"

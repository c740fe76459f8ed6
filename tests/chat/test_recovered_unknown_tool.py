"""A call that was running when the server stopped, whose tool is not back when the
conversation resumes (a connector's tools come only once it has started again; crash
probe): it ends interrupted and not run again, as any call that may have had its
effect — never 'there is no tool named …', the model's mistake. The stop is the
member's logout, which ends their runtime as a restart does; recovery runs at login
(and says the member's data locked: the server never restarted)."""

from __future__ import annotations

from skald_host.core.agent.store import HOST_RESULTS

from .support import MODEL_A, alice_back_after_a_sign_out_cut_her_wiki_call, messages


async def test_a_running_call_whose_tool_is_gone_after_a_restart_ends_interrupted(chat):
    alice, cid = await alice_back_after_a_sign_out_cut_her_wiki_call(chat)
    transcript = await messages(alice, cid)
    call = transcript[1]["tool_calls"][0]
    assert (call["status"], call["result"]) == ("interrupted", HOST_RESULTS["locked"])
    assert "no tool named" not in str(chat.server.requests_for(MODEL_A)[-1].messages)
    assert transcript[-1]["content"] == "The wiki was not reachable; ask me again."

"""A call that was running when the server stopped, whose tool is not back when the
conversation resumes (a connector's tools come only once it has started again; crash
probe): it ends interrupted and not run again, as any call that may have had its
effect — never 'there is no tool named …', the model's mistake. The stop is the
member's logout, which ends their runtime as a restart does; recovery runs at login
(and says the member's data locked: the server never restarted)."""

from __future__ import annotations

from skald_host.core.agent.store import HOST_RESULTS
from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation


async def test_a_running_call_whose_tool_is_gone_after_a_restart_ends_interrupted(chat):
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    cid = await new_conversation(alice)
    member = await chat.host.core.users.get(alice.member["id"])
    runtime = await chat.host.core.chat.runtime(member)
    frame = await runtime.store.root_frame(cid)
    await runtime.store.add_user_message(frame, "Look it up in the wiki.", None)
    answer = await runtime.store.start_assistant(frame, MODEL_A)
    await runtime.store.finish_assistant(
        answer, content="", reasoning="", model=MODEL_A, calls=[("call_1", "wiki__search", '{"q": "x"}', "rerun")], running=1
    )
    assert (await alice.post("/api/auth/logout")).status_code == 200

    chat.server.script(MODEL_A, [Reply("The wiki was not reachable; ask me again.")])
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        await sock.wait_event(cid, "turn_finished")
    transcript = await messages(alice, cid)
    call = transcript[1]["tool_calls"][0]
    assert (call["status"], call["result"]) == ("interrupted", HOST_RESULTS["locked"])
    assert "no tool named" not in str(chat.server.requests_for(MODEL_A)[-1].messages)
    assert transcript[-1]["content"] == "The wiki was not reachable; ask me again."

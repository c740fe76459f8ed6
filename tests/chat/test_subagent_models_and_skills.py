"""A definition's inline provider + model and its skills (seed 004 §2.1, §2.2), end to
end: a real host, the real openai SDK against the scripted model server, and what the
model was sent asserted on the wire."""

from __future__ import annotations

from typing import Any

from skald_host.testing import Reply, ToolCall

from .support import MODEL_A, ChatSocket, configure_models, messages, new_conversation, write_agent

BOUND_MODEL = "m-beta"  # one of the scripted server's models, not the root's


def last(request: Any) -> dict[str, Any]:
    return request.messages[-1]


def offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.tools or []}


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


async def runs(client: Any, cid: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/conversations/{cid}/runs")
    assert response.status_code == 200, response.text
    return response.json()["runs"]


def reload(chat: Any):
    catalog = chat.host.core.chat.subagent_catalog
    catalog.reload()
    return catalog


async def test_an_inline_provider_and_model_is_the_only_model_its_runs_use_and_a_disabled_one_refuses_the_run(chat):
    ids = await configure_models(chat.admin, chat.server, (MODEL_A, BOUND_MODEL))
    write_agent(chat.probe.agents_dir, "bound", "You are bound.", title="Bound", kind="task", allow_tools=False,
                provider="scripted", model=BOUND_MODEL)
    alice = await chat.host.member("alice")

    def respond(request):
        if last(request)["content"] == "Bound task.":
            return Reply("bound answer")
        if last(request)["role"] == "tool":
            return Reply("said: " + last(request)["content"])
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "bound", "task": "Bound task."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Ask the bound one.")
        await sock.turn(cid)
    bound_requests = [r for r in chat.server.requests if last(r)["content"] == "Bound task."]
    assert [r.model for r in bound_requests] == [BOUND_MODEL]  # its own model, and no other
    assert all(r.model == MODEL_A for r in chat.server.requests if r not in bound_requests)
    assert (await messages(alice, cid))[-1]["content"] == "said: bound answer"

    # The admin disables the model: the definition still names a known model (the
    # generation stays good), but the instance does not offer it, so the delegation is
    # refused before any run row is written, saying why, and never falls back.
    response = await chat.admin.patch(f"/api/admin/models/entries/{ids[BOUND_MODEL]}", json={"enabled": False})
    assert response.status_code == 200, response.text
    before = len(await runs(alice, cid))
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "Again.")
        await sock.turn(cid)
    refusal = (await messages(alice, cid))[-1]["content"]
    assert "said: Error:" in refusal and f"model '{BOUND_MODEL}' of provider 'scripted', which is not enabled" in refusal
    assert len(await runs(alice, cid)) == before
    assert [r.model for r in chat.server.requests if last(r)["content"] == "Bound task."] == [BOUND_MODEL]


async def test_an_inline_pair_the_model_catalog_does_not_hold_refuses_the_generation_until_the_admin_adds_it(chat):
    """Fail closed at load (§2.2): the pair is checked against the instance's model
    catalog, and a change of the catalog is a new look at the definitions."""
    await configure_models(chat.admin, chat.server, (MODEL_A,))
    assert reload(chat).refused is None
    write_agent(chat.probe.agents_dir, "bound", "You are bound.", title="Bound", kind="task", allow_tools=False,
                provider="scripted", model=BOUND_MODEL)
    catalog = reload(chat)
    assert catalog.refused is not None
    assert any(f"provider 'scripted' has no model '{BOUND_MODEL}'" in e for e in catalog.refused.errors)
    assert catalog.current().active("bound") is None  # the last good generation, without it
    provider_id = (await chat.admin.get("/api/admin/models")).json()["providers"][0]["id"]
    response = await chat.admin.post("/api/admin/models/entries", json={"provider_id": provider_id, "model": BOUND_MODEL})
    assert response.status_code == 201, response.text
    catalog = reload(chat)
    assert catalog.refused is None and catalog.current().active("bound") is not None


async def test_a_definitions_skills_are_listed_in_its_system_prompt_and_get_skill_reads_only_those(chat):
    """§2.1: ``skills`` scope ``get_skill``. The run's system prompt names its skills;
    get_skill returns a listed skill's whole text and refuses one outside the list; an
    agent without skills is offered no get_skill."""
    await configure_models(chat.admin, chat.server)
    skills = chat.probe.agents_dir / "skills"
    skills.mkdir()
    (skills / "summarize.md").write_text(
        "---\ndescription: How to write a three-line summary\n---\nWrite exactly three lines. Start each with a verb.\n", encoding="utf-8",
    )
    (skills / "secret-recipe.md").write_text("Not for the summarizer.\n", encoding="utf-8")
    write_agent(chat.probe.agents_dir, "summarizer", "You summarise.", title="Summarizer", kind="task", tools=[], skills=["summarize"])
    alice = await chat.host.member("alice")

    def respond(request):
        task = request.messages[1]["content"] if len(request.messages) > 1 else ""
        if task == "Summarise it." and last(request)["role"] == "user":
            return Reply(tool_calls=[ToolCall("get_skill", {"name": "summarize"}), ToolCall("get_skill", {"name": "secret-recipe"})])
        if task == "Summarise it.":
            return Reply("Three lines.")
        if last(request)["role"] == "tool":
            return Reply("Done.")
        return Reply(tool_calls=[ToolCall("execute_task", {"agent": "summarizer", "task": "Summarise it."})])

    chat.server.responder = respond
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Summarise.")
        await sock.turn(cid)
    sub = [r for r in chat.server.requests_for(MODEL_A) if len(r.messages) > 1 and r.messages[1]["content"] == "Summarise it."]
    first, second = sub
    system = first.messages[0]["content"]
    assert system.startswith("You summarise.")
    assert "## Skills" in system and "- summarize: How to write a three-line summary" in system
    assert "secret-recipe" not in system and "Start each with a verb" not in system  # the text is read when needed
    assert offered(first) == {"get_skill"}
    whole, refused = tool_results(second)
    assert whole == "Write exactly three lines. Start each with a verb."
    assert refused == "Error: no skill named 'secret-recipe' here; this agent's skills: summarize"
    root = chat.server.requests_for(MODEL_A)[0]
    assert "get_skill" not in offered(root) and "## Skills" not in root.messages[0]["content"]
    assert [r["status"] for r in await runs(alice, cid)] == ["completed"]

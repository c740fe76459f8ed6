"""Memory in real chat turns: notes injected into the system prompt the scripted model
receives (and frozen with it), ranked ``memory_search`` through the tool loop, and the
approval defaults for memory paths — own notes free, shared reads free, shared writes
asked."""

from __future__ import annotations

import json

import pytest

from chat.support import MODEL_A, ChatSocket, new_conversation, types
from skald_host.core.agent.approvals import RuleStore, decide
from skald_host.testing import Reply, ToolCall

MINE, SHARED = "/api/memory/user-memory", "/api/memory/shared-memory"


async def put(client, base: str, key: str, content: str) -> None:
    response = await client.put(f"{base}/notes/{key}", json={"content": content})
    assert response.status_code == 200, response.text


async def test_index_notes_are_injected_into_the_system_prompt_and_frozen_with_it(memhost):
    alice = await memhost.host.member("alice")
    await put(alice, MINE, "index.md", "Alice prefers tea. PRIVATE-MARK-1")
    await put(alice, SHARED, "index.md", "The wifi password is on the fridge. SHARED-MARK-1")
    await put(alice, MINE, "other.md", "NOT-INJECTED-MARK")
    memhost.server.script(MODEL_A, [Reply("Noted."), Reply("Still noted.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice, "assistant")
        await sock.send(cid, "Hello")
        await sock.turn(cid)
        # Changed after the conversation started: the frozen prompt keeps the old copy.
        await put(alice, MINE, "index.md", "Alice now prefers coffee. PRIVATE-MARK-2")
        await sock.send(cid, "Hello again")
        await sock.turn(cid)

    first, second = memhost.server.requests_for(MODEL_A)
    system = first.messages[0]
    assert system["role"] == "system"
    prompt = system["content"]
    assert "### user-memory/index.md\nAlice prefers tea. PRIVATE-MARK-1" in prompt
    assert "### shared-memory/index.md\nThe wifi password is on the fridge. SHARED-MARK-1" in prompt
    assert "loaded when this conversation started" in prompt and "may be stale" in prompt
    assert "NOT-INJECTED-MARK" not in prompt
    assert second.messages[0] == system  # frozen: the provider's cache key is unchanged
    assert "PRIVATE-MARK-2" not in second.messages[0]["content"]


async def test_missing_notes_are_skipped_and_the_restricted_role_gets_only_its_own(memhost):
    alice = await memhost.host.member("alice")
    await put(alice, SHARED, "index.md", "SHARED-MARK")
    await put(alice, MINE, "index.md", "ALICE-MARK")
    kid = await memhost.restricted("kid")
    memhost.server.script(MODEL_A, [Reply("Hi!"), Reply("Hi again!")])
    async with ChatSocket(kid) as sock:
        cid = await new_conversation(kid)  # the restricted role's agent: the companion
        await sock.send(cid, "Hi")
        await sock.turn(cid)
    prompt = memhost.server.requests_for(MODEL_A)[0].messages[0]["content"]
    assert "friendly, patient companion" in prompt
    assert "Memory notes" not in prompt  # the kid has no index yet: nothing, not an empty header
    assert "SHARED-MARK" not in prompt and "ALICE-MARK" not in prompt

    await put(kid, MINE, "index.md", "Likes dinosaurs. KID-MARK")
    async with ChatSocket(kid) as sock:
        cid = await new_conversation(kid)
        await sock.send(cid, "Hi")
        await sock.turn(cid)
    prompt = memhost.server.requests_for(MODEL_A)[1].messages[0]["content"]
    assert "### user-memory/index.md\nLikes dinosaurs. KID-MARK" in prompt
    assert "SHARED-MARK" not in prompt and "ALICE-MARK" not in prompt


async def test_memory_search_runs_without_approval_ranked_and_labelled_with_full_paths(memhost):
    alice = await memhost.host.member("alice")
    await put(alice, MINE, "garden.md", "Garden plan: the garden beds, garden tools and the garden water schedule.")
    await put(alice, MINE, "week.md", "The garden needs water. " + "Unrelated filler about the week. " * 20)
    await put(alice, SHARED, "rota.md", "Who waters the garden: everyone, in turn.")
    await put(alice, MINE, "cooking.md", "Nothing about plants here.")
    memhost.server.script(
        MODEL_A, [Reply(tool_calls=[ToolCall("memory_search", {"query": "garden water"})]), Reply("Found them.")]
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice, "assistant")
        await sock.send(cid, "What do my notes say about the garden?")
        events = await sock.turn(cid)
    assert "approval_required" not in types(events)
    first, second = memhost.server.requests_for(MODEL_A)
    assert "memory_search" in {t["function"]["name"] for t in first.tools}
    result = second.messages[-1]
    assert result["role"] == "tool"
    lines = [line for line in result["content"].splitlines() if line.startswith("- ")]
    paths = [line[2:].split(":", 1)[0] for line in lines]
    assert set(paths) == {"user-memory/garden.md", "user-memory/week.md", "shared-memory/rota.md"}
    assert paths.index("user-memory/garden.md") < paths.index("user-memory/week.md")


async def test_memory_search_for_the_restricted_role_never_reads_the_shared_pool(memhost):
    alice = await memhost.host.member("alice")
    await put(alice, SHARED, "secret-plans.md", "dinosaur birthday surprise")
    kid = await memhost.restricted("kid")
    await put(kid, MINE, "dinos.md", "my favourite dinosaur is the stegosaurus")
    memhost.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("memory_search", {"query": "dinosaur"})]), Reply("Yes!")])
    async with ChatSocket(kid) as sock:
        cid = await new_conversation(kid)
        await sock.send(cid, "What do you know about dinosaurs?")
        events = await sock.turn(cid)
    assert "approval_required" not in types(events)
    result = memhost.server.requests_for(MODEL_A)[1].messages[-1]["content"]
    assert "user-memory/dinos.md" in result
    assert "shared-memory" not in result and "surprise" not in result


@pytest.mark.parametrize(
    "tool, arguments, expected",
    [
        ("write_file", {"path": "user-memory/x.md", "content": "."}, "allow"),
        ("edit_file", {"path": "~/user-memory/x.md"}, "allow"),
        ("write_file", {"path": "/root/user-memory/a/b.md", "content": "."}, "allow"),
        ("list_files", {"path": "user-memory"}, "allow"),
        ("read_file", {"path": "shared-memory/x.md"}, "allow"),
        ("list_files", {"path": "./shared-memory"}, "allow"),
        ("search_file", {"path": "shared-memory/x.md"}, "allow"),
        ("write_file", {"path": "shared-memory/x.md", "content": "."}, "require"),
        ("edit_file", {"path": "shared-memory/x.md"}, "require"),
        # `..` clamps inside the store: still the shared note, still asked.
        ("write_file", {"path": "shared-memory/../x.md", "content": "."}, "require"),
        ("write_file", {"path": "user-memory/../../shared-memory/x.md", "content": "."}, "allow"),  # = user-memory/shared-memory/x.md
        ("memory_search", {"query": "anything"}, "allow"),
        ("write_file", {"path": "shared-memory\x00/x", "content": "."}, "require"),
    ],
)
async def test_approval_defaults_for_memory_paths(memhost, tool, arguments, expected):
    rules = await RuleStore(memhost.host.core.registry).rules()
    assert decide(rules, tool, arguments, frozenset()) == expected


async def test_a_broad_allow_for_writes_does_not_open_shared_memory(memhost):
    """An admin rule allowing every write_file (priority after the memory rules) leaves
    the shared-memory require in force, however the path is spelled."""
    store = RuleStore(memhost.host.core.registry)
    await store.create({"tool_pattern": "write_file", "action": "allow", "priority": 500})
    rules = await store.rules()
    for path in ("shared-memory/x.md", "~/shared-memory/x.md", "shared-memory/a/../../x.md", "\uff53hared-memory/x.md"):
        assert decide(rules, "write_file", {"path": path, "content": "."}, frozenset()) == "require", path
    assert decide(rules, "write_file", {"path": "notes/x.md", "content": "."}, frozenset()) == "allow"


def _write_file_exists() -> bool:
    """Whether a built-in registers ``write_file`` (the fs tools are built separately)."""
    import importlib

    from skald_host.builtins import BUILTIN_PLUGINS

    modules = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    return any(getattr(t, "name", None) == "write_file" for m in modules for t in getattr(m, "TOOLS", ()))


@pytest.mark.skipif(not _write_file_exists(), reason="the write_file fs tool is not registered in this build (the files work adds it)")
async def test_write_file_to_shared_memory_asks_first_and_to_own_memory_does_not(memhost):
    alice = await memhost.host.member("alice")
    memhost.server.script(
        MODEL_A,
        [
            Reply(tool_calls=[ToolCall("write_file", {"path": "user-memory/today.md", "content": "private thought"})]),
            Reply(tool_calls=[ToolCall("write_file", {"path": "shared-memory/plan.md", "content": "picnic on sunday"})]),
            Reply("Both written."),
        ],
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice, "assistant")
        await sock.send(cid, "Remember today, and tell everyone about the picnic.")
        card = await sock.wait_event(cid, "approval_required")
        assert card["name"] == "write_file" and json.loads(card["arguments"])["path"] == "shared-memory/plan.md"
        # The private write ran without a card; the shared one waits for the member.
        assert (await alice.get(f"{MINE}/notes/today.md")).json()["content"] == "private thought"
        assert (await alice.get(f"{SHARED}/notes/plan.md")).status_code == 404
        assert (await sock.approve(card["approval_id"]))["decision"] == "approved"
        events = await sock.turn(cid)
    assert types(events).count("approval_required") == 1
    assert (await alice.get(f"{SHARED}/notes/plan.md")).json()["content"] == "picnic on sunday"
    bob = await memhost.host.member("bob")
    assert (await bob.get(f"{SHARED}/notes/plan.md")).json()["content"] == "picnic on sunday"
    assert (await bob.get(f"{MINE}/notes/today.md")).status_code == 404


async def test_notes_are_read_as_the_conversation_is_created_not_on_its_first_messages_path(memhost):
    """The frozen prompt is built when the conversation is created, so the first
    message's request goes out without reading notes first: a note changed in between
    shows from the next conversation (or after 20 minutes idle), like any later change."""
    alice = await memhost.host.member("alice")
    await put(alice, MINE, "index.md", "CREATED-MARK")
    memhost.server.script(MODEL_A, [Reply("Noted.")])
    cid = await new_conversation(alice, "assistant")
    await put(alice, MINE, "index.md", "EDITED-MARK")
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "Hello")
        await sock.turn(cid)
    prompt = memhost.server.requests_for(MODEL_A)[0].messages[0]["content"]
    assert "CREATED-MARK" in prompt and "EDITED-MARK" not in prompt


async def test_a_role_without_shared_memory_is_told_so_plainly_not_as_the_tool_s_failure(memhost):
    """read_file or list_files on shared-memory by a role without memory.shared.read:
    a refusal the model can read, not 'the tool failed (error id …)' with a traceback
    recorded as the plugin's failure (security probe)."""
    alice = await memhost.host.member("alice")
    await put(alice, SHARED, "rota.md", "SHARED-ROTA")
    kid = await memhost.restricted("kid")
    memhost.server.script(MODEL_A, [
        Reply(tool_calls=[ToolCall("read_file", {"path": "shared-memory/rota.md"}), ToolCall("list_files", {"path": "shared-memory"})]),
        Reply("I cannot."),
    ])
    async with ChatSocket(kid) as sock:
        cid = await new_conversation(kid)
        await sock.send(cid, "Read the shared rota")
        await sock.turn(cid)
    results = [m["content"] for m in memhost.server.requests_for(MODEL_A)[1].messages if m["role"] == "tool"]
    assert len(results) == 2
    for result in results:
        assert "you may not read shared memory" in result and "error id" not in result and "SHARED-ROTA" not in result
    assert [f for f in memhost.host.core.plugins.status("fs-tools").failures] == []

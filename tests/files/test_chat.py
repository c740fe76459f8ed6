"""The fs tools and attachments in a real turn: the host talks to the scripted model
server through the ``openai`` SDK, so what the model was sent is asserted on the wire."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from skald_host.testing import Reply, ToolCall
from tests.chat.support import ChatSocket, allow_tool, configure_models, messages, new_conversation

from .conftest import PLAIN, VISION
from .test_uploads import PNG, upload


async def vision_models(files, *models: str, vision: tuple[str, ...] = (VISION,)) -> None:
    ids = await configure_models(files.admin, files.server, models)
    for model in vision:
        response = await files.admin.patch(f"/api/admin/models/entries/{ids[model]}", json={"vision": True})
        assert response.status_code == 200, response.text


async def test_the_model_writes_then_reads_a_file_and_sees_each_result(files):
    await vision_models(files, PLAIN, vision=())
    for tool in ("write_file", "read_file", "list_files"):
        await allow_tool(files.admin, tool)
    files.server.script(
        PLAIN,
        [
            Reply("Saving.", tool_calls=[ToolCall("write_file", {"path": "notes/list.md", "content": "- milk\n- bread\n"})]),
            Reply("Checking.", tool_calls=[ToolCall("read_file", {"path": "~/notes/list.md"}), ToolCall("list_files", {"path": "notes"})]),
            Reply("Your list has milk and bread."),
        ],
    )
    async with ChatSocket(files.alice) as sock:
        cid = await new_conversation(files.alice)
        await sock.send(cid, "Make me a shopping list")
        await sock.turn(cid, timeout=20)
    first, second, third = files.server.requests_for(PLAIN)
    offered = {t["function"]["name"] for t in first.tools}
    assert {"read_file", "write_file", "edit_file", "list_files", "search_file", "grep_files", "show_file_to_user"} <= offered
    assert second.messages[-1] == {"role": "tool", "tool_call_id": second.messages[-2]["tool_calls"][0]["id"], "content": "Created notes/list.md (15 bytes)."}
    read, listing = third.messages[-2:]
    assert read["content"] == "- milk\n- bread\n"
    assert listing["content"] == "notes/list.md (15 bytes)"
    alice = await files.member("alice")
    assert (files.core.files.home(alice.id) / "notes" / "list.md").read_text() == "- milk\n- bread\n"
    assert (await messages(files.alice, cid))[-1]["content"] == "Your list has milk and bread."


async def test_a_read_only_membership_refuses_the_tools_write_with_a_clear_result(files):
    await vision_models(files, PLAIN, vision=())
    await allow_tool(files.admin, "write_file")
    team = await files.core.folders.create_shared("team")
    await files.core.folders.add_shared_member(team.id, "alice", can_write=False)
    files.server.script(PLAIN, [Reply("", tool_calls=[ToolCall("write_file", {"path": "shared/team/x.md", "content": "x"})]), Reply("Could not.")])
    async with ChatSocket(files.alice) as sock:
        cid = await new_conversation(files.alice)
        await sock.send(cid, "write there")
        await sock.turn(cid, timeout=20)
    result = files.server.requests_for(PLAIN)[1].messages[-1]["content"]
    assert "read-only" in result
    assert not (files.core.folders.shared_path("team") / "x.md").exists()


async def test_an_image_reaches_a_vision_model_as_a_data_url_and_a_plain_model_as_a_path(files):
    await vision_models(files, VISION, PLAIN)  # the vision model first; the plain one is the fallback
    cid = await new_conversation(files.alice)
    image = (await upload(files.alice, cid, "cat.png", PNG)).json()
    text = (await upload(files.alice, cid, "notes.txt", b"hello")).json()
    files.server.script(VISION, [Reply("A cat.")])
    async with ChatSocket(files.alice) as sock:
        ack = await sock.command(type="send", conversation_id=cid, text="What is this?", attachments=[image["path"], text["path"]])
        assert ack["type"] == "ack", ack
        await sock.turn(cid, timeout=20)
    (request,) = files.server.requests_for(VISION)
    content = request.messages[-1]["content"]
    assert isinstance(content, list)
    assert content[0]["type"] == "text" and content[0]["text"].startswith("What is this?")
    assert f"- {image['path']} (image/png, {len(PNG)} bytes)" in content[0]["text"]
    assert f"- {text['path']} (text/plain, 5 bytes)" in content[0]["text"]
    assert content[1:] == [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}]
    stored = (await messages(files.alice, cid))[0]
    assert [a["path"] for a in stored["attachments"]] == [image["path"], text["path"]]

    # The next turn: the image belongs to an older turn now, so only the path block goes.
    files.server.script(VISION, [Reply("Still a cat.")])
    async with ChatSocket(files.alice) as sock:
        await sock.send(cid, "And now?")
        await sock.turn(cid, timeout=20)
    later = files.server.requests_for(VISION)[-1]
    assert all(isinstance(m["content"], str) for m in later.messages if m["role"] == "user")


async def test_a_model_without_vision_gets_the_path_block_only(files):
    await vision_models(files, PLAIN, vision=())
    cid = await new_conversation(files.alice)
    image = (await upload(files.alice, cid, "cat.png", PNG)).json()
    files.server.script(PLAIN, [Reply("I can read it with read_file.")])
    async with ChatSocket(files.alice) as sock:
        await sock.command(type="send", conversation_id=cid, text="Look", attachments=[image["path"]])
        await sock.turn(cid, timeout=20)
    (request,) = files.server.requests_for(PLAIN)
    assert request.messages[-1] == {
        "role": "user",
        "content": f"Look\n\n<system-extra>\nThe member attached these files (read them with read_file):\n"
        f"- {image['path']} (image/png, {len(PNG)} bytes)\n</system-extra>",
    }
    assert "data:image" not in json.dumps(request.messages)


async def test_attachments_must_be_the_members_own_existing_files(files):
    cid = await new_conversation(files.alice)
    bob = await files.member("bob")
    bob_cid = await new_conversation(files.bob)
    theirs = (await upload(files.bob, bob_cid, "private.png", PNG)).json()
    for attachments, fragment in (
        ([theirs["path"]], "no such file"),  # the same path is alice's own (missing) file
        (["../" + bob.id + "/" + theirs["path"]], "leaves its folder"),
        (["/etc/passwd"], "only files in your home"),
        ("uploads/x", "must be a list"),
        ([1], "must be a list"),
    ):
        response = await files.alice.post(f"/api/conversations/{cid}/messages", json={"text": "hi", "attachments": attachments})
        assert response.status_code == 400 and fragment in response.json()["error"], (attachments, response.text)
    assert await messages(files.alice, cid) == []


HOSTILE_WRITES = [
    "../escape.txt",
    "../../../../etc/skald-owned",
    "~/../../outside.txt",
    "notes/../../x.txt",
    "link-out/owned.txt",
    "link-out",
    "x" * 300,
    "a\x00b",
    "/home/member/../../etc/owned",
]


async def test_a_hostile_turn_writes_nothing_outside_the_members_home(files, tmp_path):
    """Check F3's fs-diff: the model tries every spelling of "outside" through the real
    tools in a real turn; the data dir outside alice's home and a decoy beside it are
    byte-identical afterwards, and each call's result says why it was refused."""
    from .test_paths import snapshot

    await vision_models(files, PLAIN, vision=())
    for tool in ("write_file", "edit_file"):
        await allow_tool(files.admin, tool)
    alice = await files.member("alice")
    home = files.core.files.home(alice.id)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "keep.txt").write_text("untouched")
    (home / "link-out").symlink_to(decoy)
    data_dir = files.core.settings.data_dir
    watched = lambda: (  # noqa: E731
        {k: v for k, v in snapshot(data_dir).items() if not k.startswith((str(home), str(data_dir / "database")))},
        snapshot(decoy),
        sorted(os.listdir("/etc")),
    )
    before = watched()
    calls = [ToolCall("write_file", {"path": p, "content": "owned"}) for p in HOSTILE_WRITES]
    calls.append(ToolCall("edit_file", {"path": "link-out/keep.txt", "old_text": "untouched", "new_text": "owned"}))
    files.server.script(PLAIN, [Reply("", tool_calls=calls), Reply("Nothing worked.")])
    async with ChatSocket(files.alice) as sock:
        cid = await new_conversation(files.alice)
        await sock.send(cid, "escape")
        await sock.turn(cid, timeout=30)
    results = [m["content"] for m in files.server.requests_for(PLAIN)[1].messages if m["role"] == "tool"]
    assert len(results) == len(calls)
    assert all(r.startswith("Error: ") for r in results), results
    assert sum("leaves its folder" in r for r in results) >= 6
    assert watched() == before
    assert not Path("/etc/skald-owned").exists() and not Path("/etc/owned").exists()


async def test_show_file_to_user_puts_the_file_in_the_conversation(files):
    await vision_models(files, PLAIN, vision=())
    await allow_tool(files.admin, "show_file_to_user")
    await allow_tool(files.admin, "write_file")
    files.server.script(
        PLAIN,
        [
            Reply("", tool_calls=[ToolCall("write_file", {"path": "out/report.txt", "content": "the report"})]),
            Reply("", tool_calls=[ToolCall("show_file_to_user", {"path": "out/report.txt"}),
                                  ToolCall("show_file_to_user", {"path": "out/missing.txt"})]),
            Reply("There it is."),
        ],
    )
    async with ChatSocket(files.alice) as sock:
        cid = await new_conversation(files.alice)
        await sock.send(cid, "make a report and show it")
        events = await sock.turn(cid, timeout=20)
    notes = [e for e in events if e["type"] == "notification"]
    assert [n["content"] for n in notes] == ["\U0001f4ce out/report.txt"]
    shown, missing = [m["content"] for m in files.server.requests_for(PLAIN)[2].messages if m["role"] == "tool"][-2:]
    assert shown == "Shown to the member: out/report.txt (text/plain, 10 bytes)."
    assert missing.startswith("Error: ") and "does not exist" in missing
    # The note is stored with the conversation and the path opens in the viewer.
    assert any(m["role"] == "note" and m["content"].endswith("out/report.txt") for m in await messages(files.alice, cid))
    response = await files.alice.get("/api/file", params={"path": "out/report.txt"})
    assert response.status_code == 200 and response.text == "the report"


async def test_images_beyond_the_turns_budget_stay_path_blocks(files):
    """Four images at most, and no more bytes than the budget (seed: 4 files / 10 MiB per
    turn; the byte budget is lowered here so a small file crosses it)."""
    import dataclasses

    files.core.settings = files.core.settings.replace(
        files=dataclasses.replace(files.core.settings.files, turn_image_bytes=len(PNG) * 3 + 10)
    )
    await vision_models(files, VISION)
    cid = await new_conversation(files.alice)
    paths = [(await upload(files.alice, cid, f"p{n}.png", PNG)).json()["path"] for n in range(5)]
    files.server.script(VISION, [Reply("Five pictures.")])
    async with ChatSocket(files.alice) as sock:
        await sock.command(type="send", conversation_id=cid, text="Look at these", attachments=paths)
        await sock.turn(cid, timeout=20)
    content = files.server.requests_for(VISION)[0].messages[-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "image_url", "image_url"]
    assert all(f"- {p} (image/png" in content[0]["text"] for p in paths)  # every one is still named

    files.core.settings = files.core.settings.replace(
        files=dataclasses.replace(files.core.settings.files, turn_image_bytes=10 * 1024 * 1024)
    )
    cid = await new_conversation(files.alice)
    paths = [(await upload(files.alice, cid, f"q{n}.png", PNG)).json()["path"] for n in range(6)]
    files.server.script(VISION, [Reply("Six pictures.")])
    async with ChatSocket(files.alice) as sock:
        await sock.command(type="send", conversation_id=cid, text="And these", attachments=paths)
        await sock.turn(cid, timeout=20)
    content = files.server.requests_for(VISION)[-1].messages[-1]["content"]
    assert [p["type"] for p in content].count("image_url") == files.core.settings.files.turn_image_count == 4


async def test_a_turn_with_an_image_prefers_a_model_that_sees_it(files):
    """The admin's first choice cannot see images: a message with one goes to the
    vision model (inline), a message without one stays with the first choice."""
    await vision_models(files, PLAIN, VISION)  # PLAIN has the higher priority
    cid = await new_conversation(files.alice)
    image = (await upload(files.alice, cid, "cat.png", PNG)).json()
    files.server.script(VISION, [Reply("A cat.")])
    async with ChatSocket(files.alice) as sock:
        await sock.command(type="send", conversation_id=cid, text="What is this?", attachments=[image["path"]])
        await sock.turn(cid, timeout=20)
    (request,) = files.server.requests_for(VISION)
    assert request.messages[-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert files.server.requests_for(PLAIN) == []

    files.server.script(PLAIN, [Reply("Words only.")])
    async with ChatSocket(files.alice) as sock:
        await sock.send(cid, "And without a picture?")
        await sock.turn(cid, timeout=20)
    assert len(files.server.requests_for(PLAIN)) == 1 and len(files.server.requests_for(VISION)) == 1


async def test_a_message_queued_during_a_turn_shows_its_attachments_while_it_waits(files):
    await configure_models(files.admin, files.server, (PLAIN,))
    cid = await new_conversation(files.alice)
    image = (await upload(files.alice, cid, "cat.png", PNG)).json()
    files.server.script(PLAIN, [Reply("First.", first_token_delay=1.0), Reply("Second.")])
    async with ChatSocket(files.alice) as sock:
        assert (await sock.send(cid, "First question."))["queued"] is False
        await files.server.wait_for_requests(1)
        ack = await sock.command(type="send", conversation_id=cid, text="And this photo?", attachments=[image["path"]])
        assert ack["type"] == "ack" and ack["queued"] is True, ack
        [queued] = (await files.alice.get(f"/api/conversations/{cid}")).json()["queued"]
        assert [a["path"] for a in queued["attachments"]] == [image["path"]]
        await sock.turn(cid, timeout=20)
        await sock.turn(cid, timeout=20)
    stored = await messages(files.alice, cid)
    assert [a["path"] for a in stored[2]["attachments"]] == [image["path"]]


async def test_a_reloaded_conversation_gives_attachments_as_a_list_like_the_export(files):
    """GET /api/conversations/<id> answers each message's attachments as a list of
    objects (empty when none), as the live ``user_message`` event and the JSON export
    do: never the JSON text the column stores."""
    await configure_models(files.admin, files.server, (PLAIN,))
    cid = await new_conversation(files.alice)
    image = (await upload(files.alice, cid, "cat.png", PNG)).json()
    files.server.script(PLAIN, [Reply("A cat.")])
    async with ChatSocket(files.alice) as sock:
        await sock.command(type="send", conversation_id=cid, text="Look", attachments=[image["path"]])
        await sock.turn(cid, timeout=20)
    question, answer = await messages(files.alice, cid)
    assert question["attachments"] == [{"path": image["path"], "name": "cat.png", "mime": "image/png", "size": len(PNG)}]
    assert answer["attachments"] == []
    exported = json.loads((await files.alice.get(f"/api/conversations/{cid}/export", params={"format": "json"})).text)
    assert [m["attachments"] for m in exported["messages"]] == [question["attachments"], answer["attachments"]]
    schema = (await files.alice.get("/api/openapi.json")).json()["components"]["schemas"]
    assert schema["Message"]["properties"]["attachments"]["items"] == {"$ref": "#/components/schemas/Attachment"}

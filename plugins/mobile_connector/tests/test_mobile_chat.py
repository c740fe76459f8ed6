"""The mobile API end to end against a real host and the scripted model: chat with a
streamed answer, approve and deny, stop, upload, the outbox a sleeping phone reads by
cursor, and the locked member told plainly (another member's ids: test_mobile_sweep.py)."""

from __future__ import annotations

import asyncio
import json
import shutil

from skald_hookspecs import ChannelEvent
from skald_host.testing import Hang, Reply, ToolCall
from mobile_support import BASE, MODEL, EventStream, paired_device, project_with_a_file


async def _new_conversation(device) -> str:
    response = await device.post(f"{BASE}/conversations")
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def test_chat_streams_the_answer_and_lists_the_conversation(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    setup.model.script(MODEL, [Reply("Hello from your phone assistant, streamed in many small pieces.", token_delay=0.15)])
    conversation = await _new_conversation(phone)
    async with EventStream(phone) as stream:
        sent = await phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "hi", "idempotency_key": "phone-msg-0001"})
        assert sent.status_code == 202 and sent.json() == {"status": "accepted", "conversation_id": conversation, "reason": ""}
        await stream.wait_for("partial", conversation_id=conversation)
        answer = await stream.wait_for("answer", conversation_id=conversation)
    assert answer["text"] == "Hello from your phone assistant, streamed in many small pieces."
    assert stream.kinds().index("typing") < stream.kinds().index("partial") < stream.kinds().index("answer")
    # The same key again stores nothing twice.
    replay = await phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "hi", "idempotency_key": "phone-msg-0001"})
    assert replay.status_code == 202
    read = (await phone.get(f"{BASE}/conversations/{conversation}")).json()
    assert [(m["role"], m["content"]) for m in read["messages"]] == [("user", "hi"), ("assistant", answer["text"])]
    listed = (await phone.get(f"{BASE}/conversations")).json()["conversations"]
    assert [c["id"] for c in listed] == [conversation]
    # The web's conversations are not the phone's.
    web = await alice.post("/api/conversations", json={})
    assert (await phone.get(f"{BASE}/conversations/{web.json()['id']}")).status_code == 404


async def test_approval_waits_in_the_outbox_is_approved_from_the_phone_and_a_turn_stops(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("write_note", {"text": "milk"}),)), Reply("Noted."), Hang("thinking")])
    conversation = await _new_conversation(phone)
    # No stream open: the phone sleeps. The approval waits in its outbox.
    await phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "note milk"})
    for _ in range(200):
        waiting = (await phone.get(f"{BASE}/notifications")).json()["notifications"]
        if any(n["kind"] == "approval" for n in waiting):
            break
        await asyncio.sleep(0.05)
    approval = next(n for n in waiting if n["kind"] == "approval")
    assert approval["tool"] == "write_note" and approval["arguments"] == {"text": "milk"} and approval["conversation_id"] == conversation
    shown = (await phone.get(f"{BASE}/conversations/{conversation}")).json()["approvals"]
    assert [a["approval_id"] for a in shown] == [approval["approval_id"]]
    async with EventStream(phone) as stream:
        decided = await phone.post(f"{BASE}/approvals/{approval['approval_id']}", json={"approve": True})
        assert decided.status_code == 200 and decided.json()["decision"] == "approved"
        await stream.wait_for("approval_resolved")
        await stream.wait_for("answer", text="Noted.")
        assert setup.probe.notes == ["milk"]
        again = await phone.post(f"{BASE}/approvals/{approval['approval_id']}", json={"approve": False})
        assert again.status_code == 409, again.text  # answered once, not twice
        # A turn that hangs: stop it from the phone.
        await phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "think hard"})
        await stream.wait_for("typing", conversation_id=conversation)
        await stream.wait_for("partial", conversation_id=conversation, text="thinking")
        for _ in range(100):
            if (await phone.get(f"{BASE}/conversations/{conversation}")).json()["running"]:
                break
            await asyncio.sleep(0.05)
        stopped = await phone.post(f"{BASE}/conversations/{conversation}/stop")
        assert stopped.status_code == 200 and stopped.json() == {"stopped": True}
        # No answer follows a stop: the stream says it stopped, with what it had said.
        await stream.wait_for("stopped", conversation_id=conversation, text="thinking")
    for _ in range(100):
        if not (await phone.get(f"{BASE}/conversations/{conversation}")).json()["running"]:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the turn still runs after stop")


async def test_partials_name_their_round_and_the_words_before_a_tool_call_reach_the_phone(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    await setup.host.allow_tool("ring")
    setup.model.script(MODEL, [
        Reply("Let me ring you.", tool_calls=(ToolCall("ring", {"text": "Ring ring."}),)),
        Reply("I rang you just now, as you asked me to.", token_delay=0.15),
    ])
    conversation = await _new_conversation(phone)
    async with EventStream(phone) as stream:
        await phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "ring me"})
        await stream.wait_for("answer", conversation_id=conversation)
    partials = [e for e in stream.events if e["kind"] == "partial"]
    first = next(e for e in partials if e["text"] == "Let me ring you.")
    later = [e for e in partials if e["text"].startswith("I rang")]
    assert first["data"]["message_id"] and later
    assert {e["data"]["message_id"] for e in later} == {later[0]["data"]["message_id"]} != {first["data"]["message_id"]}


async def test_the_stream_says_when_the_member_s_data_is_unlocked_and_locked_again(setup):
    """A phone on the locked screen has nothing else to wait on: a fresh hello tells it
    that the member logged in on the web (and, the other way, that they logged out)."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    assert (await alice.post("/api/auth/logout")).status_code == 200
    async with EventStream(phone) as stream:
        assert stream.events[0]["locked"] is True
        seen = len(stream.events)
        assert (await alice.login("alice", "member password for tests")).status_code == 200
        await stream.wait_for("hello", after=seen, locked=False)
        seen = len(stream.events)
        assert (await alice.post("/api/auth/logout")).status_code == 200
        await stream.wait_for("hello", after=seen, locked=True)


async def test_outbox_is_per_device_and_acknowledged_by_cursor(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice, "Phone")
    tablet = await paired_device(setup, alice, "Tablet")
    setup.model.script(MODEL, [Reply(tool_calls=(ToolCall("ring", {"text": "The laundry is done."}),)), Reply("Told you.")])
    await setup.host.allow_tool("ring")
    # A background note of a web conversation reaches the member's home source.
    home = await alice.put("/api/me/home-source", json={"home_source": "mobile-connector"})
    assert home.status_code == 200, home.text
    assert home.json()["titles"] == {"mobile-connector": "Mobile app"}
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    # The account page offers it in the member's language, as the catalog names it.
    assert (await alice.get("/api/me/home-source")).json()["titles"] == {"mobile-connector": "Mobile App"}
    await alice.chat("ring me")
    for _ in range(200):
        waiting = (await phone.get(f"{BASE}/notifications")).json()["notifications"]
        if any(n["kind"] == "notification" for n in waiting):
            break
        await asyncio.sleep(0.05)
    note = next(n for n in waiting if n["kind"] == "notification")
    assert note["text"] == "The laundry is done." and note["cursor"] > 0
    acked = await phone.post(f"{BASE}/notifications/ack", json={"cursor": note["cursor"]})
    assert acked.json() == {"cursor": note["cursor"]}
    assert (await phone.get(f"{BASE}/notifications")).json()["notifications"] == []
    # The tablet has not seen it: its own cursor.
    assert [n["text"] for n in (await tablet.get(f"{BASE}/notifications")).json()["notifications"] if n["kind"] == "notification"] == ["The laundry is done."]
    # A cursor never goes back.
    assert (await phone.post(f"{BASE}/notifications/ack", json={"cursor": 0})).json() == {"cursor": note["cursor"]}
    # Pruned once every paired device acknowledged it, not before.
    alice_id = (await phone.get(f"{BASE}/me")).json()["member"]["id"]
    plugin_api = setup.host.core.host_api("mobile-connector")

    async def kept() -> list[int]:
        return [e["id"] for e in await plugin_api.member_events(alice_id, limit=1000)]

    assert note["cursor"] in await kept()
    assert (await tablet.post(f"{BASE}/notifications/ack", json={"cursor": note["cursor"]})).status_code == 200
    assert note["cursor"] not in await kept() and all(i > note["cursor"] for i in await kept())
    await setup.service.deliver(alice_id, ChannelEvent(kind="notification", text="The dryer too."))
    latest = max(await kept())
    await phone.post(f"{BASE}/notifications/ack", json={"cursor": latest})
    assert latest in await kept()  # the tablet has not read it yet
    # Unlinking the tablet leaves the phone as the only reader: what it read goes.
    assert (await alice.delete(f"{BASE}/devices/{tablet.device_id}")).status_code == 200
    assert [i for i in await kept() if i <= latest] == []
    # What waits is in the member's own file: nothing of it in the registry or its WAL.
    database = setup.host.settings.data_dir / "database"
    for name in ("system.db", "system.db-wal"):
        if (database / name).exists():
            assert b"laundry" not in (database / name).read_bytes(), name


async def test_upload_from_the_phone_is_attached_to_a_message(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    setup.model.script(MODEL, [Reply("Nice photo.")])
    conversation = await _new_conversation(phone)
    png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4f50000000049454e44ae426082")
    uploaded = await phone.post(f"{BASE}/uploads?name=photo.png&conversation_id={conversation}", content=png, headers={"Content-Type": "application/octet-stream"})
    assert uploaded.status_code == 201, uploaded.text
    saved = uploaded.json()
    assert saved["mime"] == "image/png" and saved["size"] == len(png)
    async with EventStream(phone) as stream:
        sent = await phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": "look", "attachments": [saved["path"]]})
        assert sent.status_code == 202, sent.text
        await stream.wait_for("answer", text="Nice photo.")


async def test_a_locked_member_is_told_so_plainly(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    assert (await alice.post("/api/auth/logout")).status_code == 200  # her last session: her file closes
    refused = await phone.get(f"{BASE}/conversations")
    assert refused.status_code == 423 and refused.json()["code"] == "locked"
    assert "Log in to Skald on the web" in refused.json()["error"]
    me = (await phone.get(f"{BASE}/me")).json()
    assert me["locked"] is True and me["lock_message"]
    # Logging in on the web again opens it for the phone too.
    assert (await alice.login("alice", "member password for tests")).status_code == 200
    assert (await phone.get(f"{BASE}/conversations")).status_code == 200


async def test_speech_speaks_with_the_members_voice_when_an_engine_is_installed(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    spoken = await phone.post(f"{BASE}/speech", json={"text": "Hello from the phone."})
    if shutil.which("espeak-ng") is None:
        assert spoken.status_code == 404 and spoken.json()["code"] == "no_voice"
        return
    assert spoken.status_code == 200 and spoken.headers["content-type"] == "audio/wav"
    assert spoken.content[:4] == b"RIFF" and len(spoken.content) > 1000


async def test_speech_takes_a_reply_whose_code_and_links_are_over_the_old_cut(setup):
    """The route refused a text over 5,000 characters (and the app cut it there) while
    the host reads at most 4,000: the host's limit alone counts, on what is read aloud,
    so a short answer with a long script is read, and one too long says why."""
    from importlib.resources import files

    app = files("skald_mobile_connector").joinpath("app/app.js").read_text(encoding="utf-8")
    speak = app.split("async function speak(text)", 1)[1].split("\n}\n", 1)[0]
    assert "JSON.stringify({ text })" in speak and ".slice(" not in speak  # the app cuts nothing either
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    code = "```python\n" + "print('never read aloud')\n" * 300 + "```"
    spoken = await phone.post(f"{BASE}/speech", json={"text": "Here is the script.\n\n" + code})
    if shutil.which("espeak-ng") is None:
        assert spoken.status_code == 404
        return
    assert spoken.status_code == 200 and spoken.content[:4] == b"RIFF", spoken.text
    refused = await phone.post(f"{BASE}/speech", json={"text": "A sentence read aloud. " * 200})
    assert refused.status_code == 400 and "4000" in refused.json()["error"], refused.text


async def test_the_locked_words_name_the_reason_the_host_gives(setup):
    """Probe 7, finding 7: the 423 and /me carried ``lock_reason`` yet said "the server
    restarted or you logged out everywhere"; the Telegram bot names the one it was."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    assert (await alice.post("/api/auth/logout")).status_code == 200
    refused = (await phone.get(f"{BASE}/conversations")).json()
    me = (await phone.get(f"{BASE}/me")).json()
    for said in (refused["error"], me["lock_message"]):
        assert "you logged out of Skald everywhere" in said and "restarted" not in said, said
    strings = setup.host.core.strings
    assert strings.translate("mobile-connector.locked_restarted", "en").startswith("Your data is locked since the server restarted")
    assert "Neustart" in strings.translate("mobile-connector.locked_restarted", "de")
    assert "abgemeldet" in strings.translate("mobile-connector.locked_logged_out", "de")


async def test_every_route_but_sending_answers_423_with_one_reason_while_locked(setup):
    """The README promises 423 while the member's data is locked, but speech (200 with
    audio) and uploads (201) worked; and the push route said ``lock_reason`` "" where
    the others said why."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    alice_id = (await phone.get(f"{BASE}/me")).json()["member"]["id"]
    assert (await alice.post("/api/auth/logout")).status_code == 200  # her last session: her file closes
    answers = {
        "conversations": await phone.get(f"{BASE}/conversations"),
        "speech": await phone.post(f"{BASE}/speech", json={"text": "Hello while locked."}),
        "uploads": await phone.post(f"{BASE}/uploads", params={"name": "x.txt"}, content=b"hi",
                                    headers={"Content-Type": "application/octet-stream"}),
        "push": await phone.delete(f"{BASE}/push"),
    }
    for route, answer in answers.items():
        assert answer.status_code == 423, (route, answer.status_code, answer.text)
        assert (answer.json()["code"], answer.json()["lock_reason"]) == ("locked", "logged_out"), (route, answer.json())
    assert not (setup.host.core.files.home(alice_id) / "uploads").exists() or not any((setup.host.core.files.home(alice_id) / "uploads").rglob("x*.txt"))


async def test_projects_are_readable_from_the_phone_and_nothing_outside_them(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    project_id = await project_with_a_file(alice)
    projects = (await phone.get(f"{BASE}/projects")).json()["projects"]
    assert [(p["id"], p["title"], p["description"]) for p in projects] == [(project_id, "Garden", "Plans")]
    top = (await phone.get(f"{BASE}/projects/{project_id}/files")).json()
    assert [(e["name"], e["is_dir"]) for e in top["entries"]] == [("plans", True)]
    inner = (await phone.get(f"{BASE}/projects/{project_id}/files", params={"path": "plans"})).json()
    assert [(e["name"], e["size"]) for e in inner["entries"]] == [("beds.md", 21)]
    content = await phone.get(f"{BASE}/projects/{project_id}/file", params={"path": "plans/beds.md"})
    assert content.status_code == 200 and content.content == b"# Beds\nTomatoes left."
    assert content.headers["content-type"] == "application/octet-stream" and content.headers["content-disposition"] == "attachment"
    for bad in ("../../system.db", "/etc/passwd", "plans/../../x", "plans/%2e%2e/x"):
        refused = await phone.get(f"{BASE}/projects/{project_id}/file", params={"path": bad})
        assert refused.status_code in (400, 404), (bad, refused.status_code)
    assert (await phone.get(f"{BASE}/projects/{project_id}/file", params={"path": "plans"})).status_code == 404
    assert (await alice.post("/api/auth/logout")).status_code == 200
    assert (await phone.get(f"{BASE}/projects")).status_code == 423


async def test_a_message_sent_while_locked_is_sealed_and_delivered_once_at_login(setup):
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    alice_id = (await phone.get(f"{BASE}/me")).json()["member"]["id"]
    conversation = await _new_conversation(phone)  # the app's current conversation from now on
    assert (await alice.post("/api/auth/logout")).status_code == 200  # her file closes
    canary = "canary-3b7f written on the phone while locked"
    setup.model.script(MODEL, [Reply("Read it after your login.")])
    for _ in range(2):  # a retry with the same key is sealed once
        sent = await phone.post(f"{BASE}/conversations/{conversation}/messages", json={"text": canary, "idempotency_key": "phone-locked-0001"})
        assert sent.status_code == 202, sent.text
        assert sent.json()["status"] == "sealed" and "next sign in on the web" in sent.json()["notice"]
    registry = setup.host.core.registry
    waiting = await registry.run(lambda c: c.execute("SELECT count(*) FROM sealed_messages WHERE member_id = ?", (alice_id,)).fetchone()[0])
    assert waiting == 1
    # Nothing of the words in the registry's files, in clear.
    files = list(setup.host.settings.database_dir.rglob("system.db*"))
    assert files and all(b"canary-3b7f" not in path.read_bytes() for path in files)
    # Still locked: reading is refused, so the message is not yet anywhere readable.
    assert (await phone.get(f"{BASE}/conversations/{conversation}")).status_code == 423

    assert (await alice.login("alice", "member password for tests")).status_code == 200
    for _ in range(300):
        read = (await phone.get(f"{BASE}/conversations/{conversation}")).json()
        if any(m["role"] == "assistant" and m["content"] for m in read["messages"]):
            break
        await asyncio.sleep(0.05)
    assert [(m["role"], m["content"]) for m in read["messages"]] == [("user", canary), ("assistant", "Read it after your login.")]
    assert await registry.run(lambda c: c.execute("SELECT count(*) FROM sealed_messages").fetchone()[0]) == 0
    # A later unlock delivers nothing again.
    assert await setup.host.core.channels.inbox.deliver_sealed(alice_id) == 0
    again = (await phone.get(f"{BASE}/conversations/{conversation}")).json()
    assert [m["content"] for m in again["messages"]].count(canary) == 1


async def test_the_outbox_is_bounded_even_when_a_phone_never_acknowledges(setup, monkeypatch):
    from skald_mobile_connector import service as service_module

    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)  # a phone that never acknowledges anything
    alice_id = (await phone.get(f"{BASE}/me")).json()["member"]["id"]
    for n in range(5):
        await setup.service.deliver(alice_id, ChannelEvent(kind="notification", text=f"note {n}"))
    plugin_api = setup.host.core.host_api("mobile-connector")
    assert len(await plugin_api.member_events(alice_id, limit=1000)) == 5
    monkeypatch.setattr(service_module, "OUTBOX_MAX_PER_MEMBER", 3)
    assert await setup.service.prune(alice_id) == 2
    assert [e["data"]["text"] for e in await plugin_api.member_events(alice_id, limit=1000)] == ["note 2", "note 3", "note 4"]
    # What the phone reads is what is left, oldest first.
    assert [n["text"] for n in (await phone.get(f"{BASE}/notifications")).json()["notifications"]] == ["note 2", "note 3", "note 4"]


async def test_a_browser_sessions_outbox_cursor_is_its_members_own(setup):
    alice = await setup.host.member("alice")
    bob = await setup.host.member("bob")
    bob_id = (await bob.get(f"{BASE}/me")).json()["member"]["id"]
    cursor = await setup.host.core.host_api("mobile-connector").append_member_event(bob_id, "outbox", {"kind": "notification", "text": "hi"})
    assert (await bob.post(f"{BASE}/notifications/ack", json={"cursor": cursor})).json() == {"cursor": cursor}
    assert (await alice.get(f"{BASE}/notifications")).json()["cursor"] == 0  # Bob's reading is not hers


async def test_a_cursor_past_the_newest_notification_cannot_hide_those_to_come(setup):
    """An acknowledged cursor from the future was stored as it was: every notification
    made after it had a smaller cursor, and the device was offered none of them."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    alice_id = (await phone.get(f"{BASE}/me")).json()["member"]["id"]
    # Nothing in the outbox: the cursor stays where it is.
    start = (await phone.get(f"{BASE}/notifications")).json()["cursor"]
    assert (await phone.post(f"{BASE}/notifications/ack", json={"cursor": 1_000_000_000_000})).json() == {"cursor": start}
    await setup.service.deliver(alice_id, ChannelEvent(kind="notification", text="The laundry is done."))
    waiting = (await phone.get(f"{BASE}/notifications")).json()["notifications"]
    assert [n["text"] for n in waiting] == ["The laundry is done."]
    # Past the newest: taken as the newest, and the next one is offered.
    acked = await phone.post(f"{BASE}/notifications/ack", json={"cursor": 1_000_000_000_000})
    assert acked.json() == {"cursor": waiting[-1]["cursor"]}
    await setup.service.deliver(alice_id, ChannelEvent(kind="notification", text="The dryer too."))
    assert [n["text"] for n in (await phone.get(f"{BASE}/notifications")).json()["notifications"]] == ["The dryer too."]
    # While her file is closed the outbox cannot be read: the phone is told so, nothing is stored.
    assert (await alice.post("/api/auth/logout")).status_code == 200
    refused = await phone.post(f"{BASE}/notifications/ack", json={"cursor": 1_000_000_000_000})
    assert refused.status_code == 423 and refused.json()["code"] == "locked"
    assert await setup.service.cursor(phone.device_id) == waiting[-1]["cursor"]


async def test_a_project_folder_swapped_for_a_link_after_the_check_shows_nothing_outside(setup, monkeypatch, tmp_path):
    """The phone's project viewer reads through a descriptor re-checked after opening:
    a member's sandbox turning ``plans`` into a link out of the project right after the
    host's containment check (deterministic here by wrapping the check; the swap is
    real files) lists and reads nothing outside."""
    from skald_host.core.channels import service
    from skald_host.core.files import paths

    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    project_id = await project_with_a_file(alice)
    folder = setup.host.settings.data_dir / "projects" / alice.member["id"] / "garden"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "beds.md").write_text("not yours")
    swapped: list[str] = []

    def contain_then_swap(base, relative, **kwargs):
        found = paths.contain(base, relative, **kwargs)
        if relative.startswith("plans") and not (folder / "plans").is_symlink():
            (folder / "plans").rename(folder / "plans-real")
            (folder / "plans").symlink_to(outside)
            swapped.append(relative)
        return found

    monkeypatch.setattr(service, "contain", contain_then_swap)
    for url, params in ((f"{BASE}/projects/{project_id}/files", {"path": "plans"}), (f"{BASE}/projects/{project_id}/file", {"path": "plans/beds.md"})):
        response = await phone.get(url, params=params)
        assert swapped, "the swap did not happen: the test proves nothing"
        assert response.status_code in (400, 404), (url, response.status_code, response.text)
        assert "not yours" not in response.text and "beds.md" not in response.text
        (folder / "plans").unlink()
        (folder / "plans-real").rename(folder / "plans")
        swapped.clear()


async def test_a_phone_uploads_what_the_web_takes_and_is_told_the_limit_past_it(setup):
    """A phone's file may be as large as a web upload (``files.upload_max_bytes``), not
    the general body limit (``server.max_body_bytes``, 10 MiB): the route declares a
    file body (contract 1.10). Past the upload limit it gets the web's own refusal,
    with the limit named."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    conversation = await _new_conversation(phone)
    settings = setup.host.core.settings
    size = 11 * 1024 * 1024
    assert settings.server.max_body_bytes < size < settings.files.upload_max_bytes
    headers = {"Content-Type": "application/octet-stream"}
    uploaded = await phone.post(f"{BASE}/uploads?name=big.bin&conversation_id={conversation}", content=b"\0" * size, headers=headers)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["size"] == size
    web = await alice.post(f"/api/conversations/{(await alice.post('/api/conversations', json={})).json()['id']}/uploads",
                           content=b"\0" * size, headers={**headers, "X-Filename": "big.bin"})
    assert web.status_code == 201, web.text  # the same file, the same answer on the web

    limit = settings.files.upload_max_bytes
    status, refused = await _announce_only(setup, phone, f"{BASE}/uploads?name=huge.bin&conversation_id={conversation}", limit + 1)
    assert status == 413, refused
    assert refused["code"] == "upload_too_large"
    assert refused["values"] == {"limit": limit, "size": "256 MiB", "size_bytes": limit}  # the bytes: a reader words the size in its own number format
    assert "256 MiB" in refused["error"]


async def _announce_only(setup, device, path: str, length: int) -> tuple[int, dict]:
    """Send a request head announcing ``length`` bytes and no body; the status and the
    JSON answer (a server that waited for the body would never answer)."""
    host, port = setup.host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = {"Host": f"{host}:{port}", "Content-Length": str(length), "Content-Type": "application/octet-stream", **device.headers("POST")}
    writer.write((f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    await writer.drain()
    try:
        status = int((await asyncio.wait_for(reader.readline(), 10)).split()[1])
        answer = await asyncio.wait_for(reader.read(), 10)  # the server closes: the body it announced never came
    finally:
        writer.close()
    return status, json.loads(answer.split(b"\r\n\r\n", 1)[1])


async def test_a_role_that_may_not_chat_is_refused_403_on_the_phone(setup):
    """Refused as the host's own routes refuse it: 403, not a 400 "bad_request" that a
    client reads as its own malformed request (an authorization sweep)."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    admin = await setup.host.admin()
    made = await admin.post("/api/admin/roles", json={"id": "readonly", "label": "Read only", "capabilities": []})
    assert made.status_code == 201, made.text
    assert (await admin.patch(f"/api/admin/members/{alice.member['id']}", json={"role": "readonly"})).status_code == 200
    for method, path in (("GET", f"{BASE}/conversations"), ("POST", f"{BASE}/conversations")):
        refused = await phone.request(method, path)
        assert refused.status_code == 403, (method, refused.text)
        assert refused.json()["code"] == "refused"

"""A channel end to end, host side (issue 6): a test channel plugin hands messages to
``HostApi.send_message`` and receives what happens through ``Channel.deliver``, against
a real server, real SQLCipher files and the scripted model."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from skald_hookspecs.channels import ChannelEvent, ChannelRequestError, MemberLocked
from skald_host.core.channels import router as router_module
from skald_host.testing import Hang, Reply, ToolCall
from tests.chat.support import MODEL_A, PROBE, ChatSocket, assert_well_formed, eventually, messages, new_conversation

from .support import CHANNEL


async def transcript(channels, member_id: str, conversation_id: str) -> list[tuple[str, str]]:
    runtime = channels.host.core.chat.live_runtime(member_id)
    frame = await runtime.store.root_frame(conversation_id)
    return [(m["role"], m["content"]) for m in await runtime.store.history(frame.id)]


async def test_unlocked_member_is_accepted_answered_on_the_channel_and_a_replay_is_stored_once(channels):
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Reply("Hello from the model."), Reply("Second answer."), Reply("Fresh start.")])

    delivery = await api.send_message(member_id, "Hi there", idempotency_key="update-1")
    assert delivery.status == "accepted" and delivery.conversation_id
    answer = await channels.channel.wait_for("answer")
    assert answer.text == "Hello from the model." and answer.conversation_id == delivery.conversation_id
    kinds = channels.channel.kinds(member_id)
    assert kinds[0] == "typing" and kinds.index("answer") > 0
    conversation = await channels.host.core.chat.live_runtime(member_id).store.conversation(delivery.conversation_id)
    assert conversation["source"] == CHANNEL

    # The same update again (a poller's retry): acknowledged, stored once, no second turn.
    replay = await api.send_message(member_id, "Hi there", idempotency_key="update-1")
    assert (replay.status, replay.conversation_id) == ("accepted", delivery.conversation_id)
    # The next message goes to the same (current) conversation.
    follow_up = await api.send_message(member_id, "And again", idempotency_key="update-2")
    assert follow_up.conversation_id == delivery.conversation_id
    await channels.channel.wait_for("answer", text="Second answer.")
    assert await transcript(channels, member_id, delivery.conversation_id) == [
        ("user", "Hi there"), ("assistant", "Hello from the model."), ("user", "And again"), ("assistant", "Second answer."),
    ]

    # /new: a fresh conversation becomes current; an old update replayed stays where it went.
    fresh = await api.new_conversation(member_id)
    assert fresh != delivery.conversation_id
    assert (await api.send_message(member_id, "Start over", idempotency_key="update-3")).conversation_id == fresh
    assert (await api.send_message(member_id, "Hi there", idempotency_key="update-1")).conversation_id == delivery.conversation_id
    await channels.channel.wait_for("answer", text="Fresh start.")
    assert await transcript(channels, member_id, fresh) == [("user", "Start over"), ("assistant", "Fresh start.")]
    assert await api.member_locale(member_id) == "en"
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    assert await api.member_locale(member_id) == "de"
    # The account's name, for a channel to say which account a chat went to (spec 1.14).
    assert await api.member_name(member_id) == {"username": "alice", "display_name": alice.member["display_name"]}


async def test_approval_card_reaches_the_channel_and_resolving_it_there_runs_the_call(channels):
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("write_note", {"text": "buy milk"})]), Reply("Noted.")])

    delivery = await api.send_message(member_id, "Remember milk")
    card = await channels.channel.wait_for("approval")
    assert card.tool == "write_note" and dict(card.arguments) == {"text": "buy milk"} and card.conversation_id == delivery.conversation_id
    assert channels.probe.writes == []
    with pytest.raises(ChannelRequestError):
        await api.resolve_approval(member_id, "no-such-approval", True)
    with pytest.raises(ChannelRequestError):
        await api.resolve_approval(member_id, card.approval_id, "yes")

    assert (await api.resolve_approval(member_id, card.approval_id, True))["decision"] == "approved"
    resolved = await channels.channel.wait_for("approval_resolved")
    assert resolved.approval_id == card.approval_id and resolved.data["status"] == "approved"
    assert (await channels.channel.wait_for("answer")).text == "Noted."
    assert channels.probe.writes == [{"text": "buy milk"}]
    with pytest.raises(ChannelRequestError, match="already answered"):
        await api.resolve_approval(member_id, card.approval_id, True)

    # A card of a web conversation is not the channel's to answer.
    channels.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("write_note", {"text": "web"})]), Reply("Web done.")])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Write from the web")
        web_card = await sock.wait_event(cid, "approval_required")
        with pytest.raises(ChannelRequestError, match="no such approval"):
            await api.resolve_approval(member_id, web_card["approval_id"], True)
        assert channels.channel.kinds().count("approval") == 1  # the web card was not sent to the channel
        await sock.approve(web_card["approval_id"], "deny")
        await sock.wait_event(cid, "turn_finished")


async def test_approving_from_the_channel_after_the_tools_plugin_was_disabled_says_denied_withdrawn(channels):
    """The channel was told "approved" for a call the kernel then refused: a channel
    showing "Approved ✓" for a call that never ran."""
    api = channels.channel.api
    member_id = (await channels.host.member("alice")).member["id"]
    channels.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("write_note", {"text": "buy milk"})]), Reply("Understood.")])
    await api.send_message(member_id, "Remember milk")
    card = await channels.channel.wait_for("approval")
    assert (await channels.admin.put(f"/api/admin/plugins/{PROBE}/enabled", json={"enabled": False})).status_code == 200
    answer = await api.resolve_approval(member_id, card.approval_id, True)
    assert dict(answer) == {"approval_id": card.approval_id, "decision": "denied", "reason": "withdrawn"}
    settled = await channels.channel.wait_for("approval_resolved", approval_id=card.approval_id)
    assert settled.data == {"status": "denied", "reason": "withdrawn"}
    await channels.channel.wait_for("answer")
    assert channels.probe.writes == []


async def test_member_without_grant_inactive_or_unknown_is_refused_and_nothing_is_written(channels):
    bob = await channels.host.member("bob")
    member_id, api = bob.member["id"], channels.channel.api
    response = await channels.admin.put(f"/api/admin/members/{member_id}/plugins", json={"plugins": []})
    assert response.status_code == 200, response.text

    refused = await api.send_message(member_id, "let me in")
    assert refused.status == "refused" and "may not use" in refused.reason and refused.conversation_id is None
    assert not await api.member_has_grant(member_id)
    runtime = await channels.host.core.chat.runtime(await channels.host.core.users.get(member_id))
    assert await runtime.store.conversations() == []
    with pytest.raises(ChannelRequestError):
        await api.new_conversation(member_id)
    with pytest.raises(ChannelRequestError):
        await api.save_upload(member_id, "photo.jpg", b"\xff\xd8\xff")
    with pytest.raises(ChannelRequestError):
        await api.member_name(member_id)
    with pytest.raises(ChannelRequestError):
        await api.member_name("0" * 32)
    assert await api.member_has_grant("0" * 32) is False  # an unknown id has none (it raised MemberNotFound)

    assert (await api.send_message("0" * 32, "hello")).reason == "no such member"
    assert (await api.send_message("../../etc", "hello")).status == "refused"
    assert (await api.send_message(member_id, "")).reason == "the message is empty"
    assert (await api.send_message(member_id, "x" * 100_001)).status == "refused"
    assert (await api.send_message(member_id, "hi", attachments="uploads/a.jpg")).status == "refused"

    carol = await channels.host.member("carol")
    response = await channels.admin.patch(f"/api/admin/members/{carol.member['id']}", json={"active": False})
    assert response.status_code == 200, response.text
    assert (await api.send_message(carol.member["id"], "hello")).reason == "the member is inactive"


async def test_message_for_a_locked_member_is_sealed_without_plaintext_and_delivered_once_at_login(channels, caplog):
    caplog.set_level(logging.DEBUG)
    canary = "CANARY-sealed-7f3a9c"
    await channels.host.member("dora")  # registered and logged in once, then the host restarts
    host = await channels.restart()
    core, api = host.core, channels.channel.api
    member = await core.users.find("dora")
    assert not core.users.is_unlocked(member.id)

    first = await api.send_message(member.id, f"{canary} please remember", idempotency_key="update-9")
    replay = await api.send_message(member.id, f"{canary} please remember", idempotency_key="update-9")
    assert (first.status, replay.status) == ("sealed", "sealed") and first.conversation_id is None
    assert await core.channels.inbox.waiting(member.id) == 1
    with pytest.raises(MemberLocked):
        await api.new_conversation(member.id)
    with pytest.raises(MemberLocked):
        await api.stop_turn(member.id)
    row = await core.registry.run(lambda c: dict(c.execute("SELECT * FROM sealed_messages").fetchone()))
    assert row["member_id"] == member.id and row["source"] == CHANNEL and row["size"] == len(row["ciphertext"])

    database_dir = host.settings.database_dir
    for name in ("system.db", "system.db-wal"):
        path = database_dir / name
        if path.exists():
            data = path.read_bytes()
            assert canary.encode() not in data and b"update-9" not in data, name
    assert canary not in caplog.text

    channels.server.script(MODEL_A, [Reply("Remembered.")])
    dora = await host.member("dora")
    answer = await channels.channel.wait_for("answer")
    assert answer.text == "Remembered."
    runtime = core.chat.live_runtime(member.id)
    [conversation] = await runtime.store.conversations()
    assert conversation["source"] == CHANNEL and answer.conversation_id == conversation["id"]
    async def drained() -> bool:
        return await core.channels.inbox.waiting(member.id) == 0

    await eventually(drained, what="the sealed row to go")
    assert [(m["role"], m["content"]) for m in await messages(dora, conversation["id"])] == [
        ("user", f"{canary} please remember"), ("assistant", "Remembered."),
    ]

    # A crash after the durable insert but before the row was deleted: the row is back,
    # and delivering it again stores nothing twice.
    await core.registry.transaction(
        lambda c: c.execute(
            f"INSERT INTO sealed_messages ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values())
        )
    )
    await core.channels.inbox.deliver_sealed(member.id)
    assert await core.channels.inbox.waiting(member.id) == 0
    # And the update replayed now that dora is unlocked: acknowledged, not stored again.
    again = await api.send_message(member.id, f"{canary} please remember", idempotency_key="update-9")
    assert (again.status, again.conversation_id) == ("accepted", conversation["id"])
    assert len(await messages(dora, conversation["id"])) == 2
    assert canary not in caplog.text


async def test_a_grant_revoked_after_sealing_discards_the_message_and_says_so_on_the_web(channels):
    """Probe 7, finding 3: kept sealed, the message waited unseen and was answered out of
    context when the grant came back, weeks later, while the channel had promised an
    answer at the next login. It is discarded at that login, and a note in the source's
    conversation says how many were not delivered and why."""
    await channels.host.member("gus")
    host = await channels.restart()
    core, api = host.core, channels.channel.api
    member = await core.users.find("gus")
    assert (await api.send_message(member.id, "canary-g71 sealed while allowed", idempotency_key="u-1")).status == "sealed"
    assert (await api.send_message(member.id, "canary-g72 also sealed", idempotency_key="u-2")).status == "sealed"
    response = await channels.admin.put(f"/api/admin/members/{member.id}/plugins", json={"plugins": []})
    assert response.status_code == 200, response.text

    gus = await host.member("gus")
    async def listed():
        return (await gus.get("/api/conversations")).json()["conversations"]

    [conversation] = await eventually(listed, what="the note's conversation")
    assert await core.channels.inbox.deliver_sealed(member.id) == 0 and await core.channels.inbox.waiting(member.id) == 0
    assert conversation["source"] == CHANNEL
    [note] = [m["content"] for m in await messages(gus, conversation["id"])]
    assert note == (
        "2 messages you sent through Test channel while you were logged out were not delivered and will not be answered:"
        " you may no longer use Test channel."
    )
    assert "canary-g7" not in json.dumps(await messages(gus, conversation["id"]))
    assert channels.channel.kinds(member.id) == [] and channels.server.requests == []

    # The grant back: nothing old arrives out of context at the next login.
    response = await channels.admin.put(f"/api/admin/members/{member.id}/plugins", json={"plugins": [CHANNEL]})
    assert response.status_code == 200, response.text
    host = await channels.restart()
    gus = await host.member("gus")
    await asyncio.sleep(0.5)
    assert channels.server.requests == [] and await host.core.channels.inbox.waiting(member.id) == 0
    de = host.core.strings.translate("core.channels.sealed_withdrawn.one", "de", count=1, channel="Telegram")
    assert de.startswith("1 Nachricht") and "Telegram" in de


async def test_members_created_before_the_inbox_get_their_key_pair_at_the_next_login(channels):
    erin = await channels.host.member("erin")
    core, member_id = channels.host.core, erin.member["id"]
    public = await core.registry.run(lambda c: c.execute("SELECT inbox_public_key FROM users WHERE id = ?", (member_id,)).fetchone()[0])
    private_row = await core.users.owner_db(member_id).run(lambda c: c.execute("SELECT public_key FROM inbox_key").fetchone())
    assert public is not None and bytes(private_row[0]) == bytes(public)

    # What a member from before this feature looks like: no key anywhere.
    await core.registry.transaction(lambda c: c.execute("UPDATE users SET inbox_public_key = NULL WHERE id = ?", (member_id,)))
    await core.users.owner_db(member_id).transaction(lambda c: c.execute("DELETE FROM inbox_key"))
    host = await channels.restart()
    refused = await channels.channel.api.send_message(member_id, "hello")
    assert refused.status == "refused" and "log in on the web once" in refused.reason

    await host.member("erin")
    fresh = await host.core.registry.run(lambda c: c.execute("SELECT inbox_public_key FROM users WHERE id = ?", (member_id,)).fetchone()[0])
    assert fresh is not None and bytes(fresh) != bytes(public)
    host = await channels.restart()
    assert (await channels.channel.api.send_message(member_id, "hello")).status == "sealed"


async def test_stop_turn_stops_the_channel_conversation_and_typing_repeats_while_it_runs(channels, monkeypatch):
    monkeypatch.setattr(router_module, "TYPING_INTERVAL_SECONDS", 0.1)
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    assert await api.stop_turn(member_id) is False  # no conversation of this source yet
    channels.server.script(MODEL_A, [Hang(text="thinking")])
    await api.send_message(member_id, "Take your time")
    await eventually(lambda: channels.channel.kinds(member_id).count("typing") >= 3, what="repeated typing")
    assert await api.stop_turn(member_id) is True
    assert await api.stop_turn(member_id) is False
    settled = len(channels.channel.events)
    await asyncio.sleep(0.4)
    assert channels.channel.kinds()[settled:] == []  # typing stopped with the turn


async def test_the_read_back_gives_a_message_the_host_wrote_its_reason_code(channels):
    """A Stop leaves a queued message unanswered under an English answer; the read-back
    names its reason, so a channel's screen words it in its reader's language (the phone
    showed the English sentence, with the web's "Retry", in a German app)."""
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Hang(text="thinking")])
    first = await api.send_message(member_id, "Take your time", idempotency_key="reason-1")
    await channels.channel.wait_for("typing")
    await api.send_message(member_id, "and then this", idempotency_key="reason-2")  # queued behind the turn
    assert await api.stop_turn(member_id) is True
    read = {}

    async def unanswered() -> bool:
        read["messages"] = (await api.conversation_messages(member_id, first.conversation_id))["messages"]
        return any(m["reason"] for m in read["messages"])

    await eventually(unanswered, what="the unanswered answer")
    messages = read["messages"]
    assert [m["reason"] for m in messages if m["role"] == "user"] == [None, None]
    failed = [m for m in messages if m["reason"]]
    assert [(m["role"], m["status"], m["reason"]) for m in failed] == [("assistant", "error", {"code": "stopped_unanswered", "values": {}})]
    assert failed[0]["content"].startswith("Not answered")  # the English text stays, for the model


async def test_home_source_brings_notes_and_scheduled_results_to_the_channel(channels):
    alice = await channels.host.member("alice")
    member_id = alice.member["id"]
    assert (await alice.get("/api/me/home-source")).json() == {
        "home_source": "web", "choices": ["web", CHANNEL], "titles": {CHANNEL: "Test channel"}, "fallback": None,
    }
    response = await alice.put("/api/me/home-source", json={"home_source": "carrier-pigeon"})
    assert response.status_code == 400 and "web" in response.json()["error"]
    response = await alice.put("/api/me/home-source", json={"home_source": CHANNEL})
    assert response.status_code == 200 and response.json()["home_source"] == CHANNEL

    channels.server.script(
        MODEL_A,
        [Reply(tool_calls=[ToolCall("notify", {"message": "Tea is ready"})]), Reply("I told you."), Reply("Water them now."),
         Reply("Jetzt gießen.")],
    )
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Tell me when tea is ready")
        await sock.wait_event(cid, "turn_finished")
        note = await channels.channel.wait_for("notification")
        assert note.text == "Tea is ready"
        assert "answer" not in channels.channel.kinds()  # a web conversation's answers stay on the web

        runtime = channels.host.core.chat.live_runtime(member_id)
        await runtime.store.schedule(cid, "Water the plants.", "2000-01-01T00:00:00.000000Z")
        await runtime.deliver_due_jobs()
        result = await channels.channel.wait_for("notification", text="Water them now.")
        assert result.conversation_id == cid
        # A German member's scheduled prompt reads "[Geplant] …": its answer goes home all the same.
        admin = await channels.host.admin()
        assert (await admin.patch(f"/api/admin/members/{member_id}", json={"locale": "de"})).status_code == 200
        await runtime.store.schedule(cid, "Gieß die Pflanzen.", "2000-01-01T00:00:00.000000Z")
        await runtime.deliver_due_jobs()
        result = await channels.channel.wait_for("notification", text="Jetzt gießen.")
        assert result.conversation_id == cid
        assert channels.server.requests_for(MODEL_A)[-1].last_user_text.startswith("[Geplant] ")

    # Back to the web: nothing more reaches the channel.
    assert (await alice.put("/api/me/home-source", json={"home_source": "web"})).status_code == 200
    before = len(channels.channel.events)
    channels.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("notify", {"message": "Second tea"})]), Reply("Done.")])
    async with ChatSocket(alice) as sock:
        await sock.send(cid, "Again")
        await sock.wait_event(cid, "notification")
        await sock.wait_event(cid, "turn_finished", start=len(sock.events) - 1)
    await asyncio.sleep(0.2)
    assert channels.channel.events[before:] == []


async def failures_of_the_channel(channels) -> dict:
    return (await channels.admin.get(f"/api/admin/plugins/{CHANNEL}")).json()


async def test_a_channel_that_raises_is_listed_on_its_page_once_and_does_not_break_the_turn(channels, caplog):
    alice = await channels.host.member("alice")
    member_id = alice.member["id"]
    channels.channel.fail = True
    channels.server.script(MODEL_A, [Reply("Still answered."), Reply("Answered again.")])
    delivery = await channels.channel.api.send_message(member_id, "Are you there?")
    assert delivery.status == "accepted"
    await channels.channel.wait_for("answer")
    conversation = await messages(alice, delivery.conversation_id)
    assert [(m["role"], m["content"]) for m in conversation] == [("user", "Are you there?"), ("assistant", "Still answered.")]
    assert_well_formed(conversation)

    # Every event failed (typing, answer, ...): the page lists it once, with an error id
    # and the channel's own line, the log says the same id; the card counts the repeats.
    await eventually(lambda: "channel deliver failed, error id" in caplog.text, what="the log")
    page = await failures_of_the_channel(channels)
    [failure] = page["failures"]
    assert failure["where"] == "channel deliver" and failure["error_id"] in caplog.text
    assert "raise RuntimeError(\"the channel's far end is down\")" in failure["traceback"]
    assert failure["traceback"].endswith("RuntimeError (message withheld: it may hold a member's data)")
    before = page["problems"]
    assert before == 1 + failure.get("repeats", 0) >= 2

    start = len(channels.channel.events)
    await channels.channel.api.send_message(member_id, "Still there?")
    await channels.channel.wait_for("answer", start=start)
    page = await failures_of_the_channel(channels)
    assert [f["error_id"] for f in page["failures"]] == [failure["error_id"]] and page["problems"] > before
    assert caplog.text.count("channel deliver failed, error id") == 1
    # The channel's own words may quote the member: its line of code is shown, its message is not.
    assert "RuntimeError: the channel's far end is down" not in caplog.text + failure["traceback"]


async def test_a_channel_that_hangs_is_cut_off_and_listed_with_the_line_it_hung_at(channels, monkeypatch):
    monkeypatch.setattr(router_module, "DELIVER_TIMEOUT_SECONDS", 0.3)
    alice = await channels.host.member("alice")
    member_id = alice.member["id"]
    never = asyncio.Event()

    async def hang(member_id, event) -> None:
        await never.wait()  # the far end never answers

    monkeypatch.setattr(channels.channel, "deliver", hang)
    await channels.host.core.channels.router.deliver(CHANNEL, member_id, ChannelEvent("notification", None, text="hi"))
    [failure] = (await failures_of_the_channel(channels))["failures"]
    assert failure["where"] == "channel deliver"
    assert "await never.wait()" in failure["traceback"]
    assert failure["traceback"].endswith(f"TimeoutError: channel {CHANNEL} did not deliver a notification event within 0.3 s")


def attached(message: dict) -> list[str]:
    attachments = message.get("attachments") or []
    return [a["path"] for a in (json.loads(attachments) if isinstance(attachments, str) else attachments)]


PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\x00" * 32


async def test_save_upload_goes_through_the_one_seam_into_the_sources_conversation(channels):
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    conversation_id = await api.new_conversation(member_id)
    saved = await api.save_upload(member_id, "../holiday photo.png", PNG)
    assert saved["path"].startswith(f"uploads/{conversation_id}/") and saved["path"].endswith(".png")
    assert (saved["mime"], saved["size"]) == ("image/png", len(PNG))
    home = channels.host.core.files.home(member_id)
    assert (home / saved["path"]).read_bytes() == PNG
    with pytest.raises(ChannelRequestError):
        await api.save_upload(member_id, "x.png", "not bytes")

    # A locked member's file lands in a folder named after the source, for a sealed message to carry.
    host = await channels.restart()
    locked = await channels.channel.api.save_upload(member_id, "later.png", PNG)
    assert locked["path"].startswith(f"uploads/{CHANNEL}/")
    delivery = await channels.channel.api.send_message(member_id, "look", attachments=[locked["path"]])
    assert delivery.status == "sealed"
    assert host.core.files.home(member_id).joinpath(locked["path"]).exists()


async def test_an_admin_reset_drops_what_was_sealed_to_the_old_key_and_seals_to_the_new_one(channels):
    await channels.host.member("fay")
    host = await channels.restart()
    core, api = host.core, channels.channel.api
    member = await core.users.find("fay")
    old_key = await core.registry.run(lambda c: c.execute("SELECT inbox_public_key FROM users WHERE id = ?", (member.id,)).fetchone()[0])
    assert (await api.send_message(member.id, "sealed to the old key")).status == "sealed"

    new_password = "a brand new password 42"
    response = await channels.admin.post(
        f"/api/admin/members/{member.id}/reset-password", json={"new_password": new_password, "confirm_data_loss": True}
    )
    assert response.status_code == 200, response.text
    assert await core.channels.inbox.waiting(member.id) == 0
    new_key = await core.registry.run(lambda c: c.execute("SELECT inbox_public_key FROM users WHERE id = ?", (member.id,)).fetchone()[0])
    assert new_key is not None and bytes(new_key) != bytes(old_key)

    assert (await api.send_message(member.id, "sealed to the new key")).status == "sealed"
    channels.server.script(MODEL_A, [Reply("Welcome back.")])
    fay = await host.member("fay", password=new_password)
    assert (await channels.channel.wait_for("answer")).text == "Welcome back."
    [conversation] = await core.chat.live_runtime(member.id).store.conversations()
    assert [(m["role"], m["content"]) for m in await messages(fay, conversation["id"])] == [
        ("user", "sealed to the new key"), ("assistant", "Welcome back."),
    ]


async def test_attachments_travel_with_the_message_unlocked_and_inside_the_sealed_box(channels):
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Reply("Nice photo."), Reply("Saw the late one.")])
    saved = await api.save_upload(member_id, "photo.png", PNG)
    delivery = await api.send_message(member_id, "look at this", attachments=[saved["path"]])
    assert delivery.status == "accepted"
    await channels.channel.wait_for("answer", text="Nice photo.")
    [stored] = [m for m in await messages(alice, delivery.conversation_id) if m["role"] == "user"]
    assert attached(stored) == [saved["path"]]
    assert saved["path"] in str(channels.server.requests[-1].messages)  # the model was told about it
    refused = await api.send_message(member_id, "ghost", attachments=["uploads/nope/ghost.png"])
    assert refused.status == "refused" and "attachment" in refused.reason

    host = await channels.restart()
    later = await channels.channel.api.save_upload(member_id, "late.png", PNG)
    gone = await channels.channel.api.save_upload(member_id, "gone.png", PNG)
    assert (await channels.channel.api.send_message(member_id, "late photo", attachments=[later["path"]])).status == "sealed"
    assert (await channels.channel.api.send_message(member_id, "gone photo", attachments=[gone["path"]])).status == "sealed"
    host.core.files.home(member_id).joinpath(gone["path"]).unlink()  # deleted before the member came back
    alice = await host.member("alice")
    await channels.channel.wait_for("answer", text="Saw the late one.")
    runtime = host.core.chat.live_runtime(member_id)

    async def both_stored() -> list:
        users = [m for m in await messages(alice, delivery.conversation_id) if m["role"] == "user"]
        return users if len(users) == 3 else []

    users = await eventually(both_stored, what="both sealed messages")
    assert [(m["content"], attached(m)) for m in users[1:]] == [
        ("late photo", [later["path"]]), ("gone photo", []),
    ]
    assert await host.core.channels.inbox.waiting(member_id) == 0
    assert runtime is host.core.chat.live_runtime(member_id)


async def test_a_role_change_moves_the_channel_to_a_new_conversation_with_an_agent_the_role_allows(channels):
    """A channel has no screen to pick another conversation on: after the member's role
    stops allowing the current conversation's agent, their next message starts a new
    conversation with the role's default agent instead of failing every time."""
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Reply("As the assistant."), Reply("As the companion.")])
    first = await api.send_message(member_id, "Hello", idempotency_key="u-1")
    await channels.channel.wait_for("answer", text="As the assistant.")
    runtime = channels.host.core.chat.live_runtime(member_id)
    assert (await runtime.store.conversation(first.conversation_id))["agent_id"] == "assistant"

    demoted = await channels.admin.patch(f"/api/admin/members/{member_id}", json={"role": "restricted"})
    assert demoted.status_code == 200, demoted.text
    second = await api.send_message(member_id, "Still there?", idempotency_key="u-2")
    assert second.status == "accepted" and second.conversation_id != first.conversation_id
    await channels.channel.wait_for("answer", text="As the companion.")
    runtime = channels.host.core.chat.live_runtime(member_id)
    assert (await runtime.store.conversation(second.conversation_id))["agent_id"] == "companion"
    # The earlier conversation is kept as it was, and the next message stays in the new one.
    assert await transcript(channels, member_id, first.conversation_id) == [("user", "Hello"), ("assistant", "As the assistant.")]
    third = await api.send_message(member_id, "And now?", idempotency_key="u-3")
    assert third.conversation_id == second.conversation_id


async def test_a_failure_reaches_the_channel_with_its_code_and_values(channels):
    """The ``error`` event carried the host's English words only: a channel could not say
    a German member's failure in German (a probe's Telegram chat read "Etwas ist
    schiefgegangen: The model could not answer (...)"). Since 1.12 it carries the cause
    the web words it by, ``core.error.<code>`` with its values."""
    from skald_host.testing import ScriptedError as Error

    alice = await channels.host.member("alice", locale="de")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Error(404, "no such model")])
    await api.send_message(member_id, "Hallo", idempotency_key="update-err")
    failed = await channels.channel.wait_for("error")
    code, values = failed.data["code"], failed.data["values"]
    assert code == "model_refused" and isinstance(values, dict), failed.data
    said = api.translate(f"core.error.{code}", "de", **values)
    assert said != f"core.error.{code}" and "The model" not in said, said
    assert failed.text and failed.text != said  # the English words stay, for a channel of an older kind


async def test_a_message_after_the_current_conversation_was_deleted_starts_a_new_one(channels):
    """Probe 7, finding 6: with the source's current conversation deleted on the web, the
    next message went into an older conversation of the source, the model reading a
    context the member had left. It starts a new one."""
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Reply("Old answer."), Reply("Current answer."), Reply("Fresh answer."), Reply("On.")])
    older = (await api.send_message(member_id, "canary-o61 old context", idempotency_key="d-1")).conversation_id
    await channels.channel.wait_for("answer", text="Old answer.")
    current = await api.new_conversation(member_id)
    assert (await api.send_message(member_id, "the current one", idempotency_key="d-2")).conversation_id == current
    await channels.channel.wait_for("answer", text="Current answer.")

    assert (await alice.delete(f"/api/conversations/{current}")).status_code == 200
    fresh = (await api.send_message(member_id, "after the deletion", idempotency_key="d-3")).conversation_id
    assert fresh not in (older, current)
    await channels.channel.wait_for("answer", text="Fresh answer.")
    assert [m["content"] for m in channels.server.requests[-1].messages if m["role"] == "user"] == ["after the deletion"]
    assert (await api.send_message(member_id, "and on", idempotency_key="d-4")).conversation_id == fresh

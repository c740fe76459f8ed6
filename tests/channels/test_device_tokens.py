"""Device tokens (spec 1.3): a binding-managed plugin pairs a device and hands it a bearer
token; the host authenticates it in its one path, on that plugin's routes only, and ends
it with every revocation of the member (check A2's mobile-token row, C2's parity)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from quart import Blueprint

from skald_hookspecs import current_caller, hookimpl
from skald_hookspecs.channels import ChannelRequestError, MemberLocked
from skald_hookspecs.types import PluginInfo
from tests.chat.support import MODEL_A
from skald_host.testing import Reply

DEVICES = "devplug"


class DevicePlugin:
    def __init__(self) -> None:
        self.api = None

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=DEVICES, title="Devices", spec=">=1.3,<2", manages_own_access=True, grant_by_default=False)

    @hookimpl
    def startup(self, host) -> None:
        self.api = host

    @hookimpl
    def register_routes(self, register, host) -> None:
        bp = Blueprint("devplug", __name__)

        @bp.get("/whoami")
        async def whoami() -> dict:
            caller = current_caller()
            return {"id": caller.id, "device_id": caller.device_id}

        @bp.post("/poke")
        async def poke() -> dict:
            return {"ok": True}

        register(bp)


@pytest.fixture
async def devices(channels):
    plugin = DevicePlugin()
    settings = channels.host.settings
    await channels.host.stop()
    channels.host = await channels.skald.start(plugins=[channels.probe, channels.channel, plugin], settings=settings, enable=[DEVICES])
    channels.admin = await channels.host.admin()
    return channels, plugin


async def _paired(channels, plugin, username="alice"):
    member = await channels.host.member(username)
    issued = await plugin.api.issue_device_token(member.member["id"], {"name": "Pixel", "platform": "android"})
    device = channels.host.client()
    device.bearer = issued["token"]
    return member, issued, device


async def test_device_token_reaches_its_plugin_only_and_is_stored_hashed(devices):
    channels, plugin = devices
    member, issued, device = await _paired(channels, plugin)
    who = await device.get(f"/api/plugin/{DEVICES}/whoami")
    assert who.status_code == 200 and who.json() == {"id": member.member["id"], "device_id": issued["id"]}
    assert (await device.post(f"/api/plugin/{DEVICES}/poke")).status_code == 200  # no CSRF: no ambient credential
    # Nowhere else: not the host's API, not another plugin's routes.
    assert (await device.get("/api/me")).status_code == 401
    assert (await device.get("/api/conversations")).status_code == 401
    assert (await device.get(f"/api/plugin/{DEVICES}x/whoami")).status_code in (401, 404)
    listed = await plugin.api.device_tokens(member.member["id"])
    assert [d["id"] for d in listed] == [issued["id"]] and listed[0]["label"] == {"name": "Pixel", "platform": "android"}
    assert listed[0]["last_seen_at"]
    registry = sqlite3.connect(channels.host.settings.data_dir / "database" / "system.db")
    try:
        dump = "\n".join(registry.iterdump())
    finally:
        registry.close()
    assert issued["token"] not in dump and hashlib.sha256(issued["token"].encode()).hexdigest() in dump
    assert "Pixel" not in dump  # the phone's name (often its owner's) is sealed like the registry's secrets
    # Another member's device id cannot be revoked by naming it under another member.
    bob = await channels.host.member("bob")
    assert await plugin.api.revoke_device_token(bob.member["id"], issued["id"]) is False
    assert await plugin.api.revoke_device_token(member.member["id"], issued["id"]) is True
    assert (await device.get(f"/api/plugin/{DEVICES}/whoami")).status_code == 401


@pytest.mark.parametrize("event", ["password change", "admin reset", "deactivate", "end sessions", "plugin disabled"])
async def test_every_revocation_ends_the_device_on_its_next_request(devices, event):
    channels, plugin = devices
    member, issued, device = await _paired(channels, plugin)
    member_id = member.member["id"]
    assert (await device.get(f"/api/plugin/{DEVICES}/whoami")).status_code == 200
    admin = channels.admin
    if event == "password change":
        response = await member.post("/api/auth/password", json={"current_password": "member password for tests", "new_password": "a brand new password 42"})
    elif event == "admin reset":
        response = await admin.post(f"/api/admin/members/{member_id}/reset-password", json={"new_password": "an admin chosen password 7", "confirm_data_loss": True})
    elif event == "deactivate":
        response = await admin.patch(f"/api/admin/members/{member_id}", json={"active": False})
    elif event == "end sessions":
        response = await admin.post(f"/api/admin/members/{member_id}/end-sessions")
    else:
        response = await admin.put(f"/api/admin/plugins/{DEVICES}/enabled", json={"enabled": False})
    assert response.status_code == 200, response.text
    answer = await device.get(f"/api/plugin/{DEVICES}/whoami")
    assert answer.status_code == (404 if event == "plugin disabled" else 401)
    if event != "plugin disabled":
        assert await plugin.api.device_tokens(member_id) == []


async def test_channel_reads_back_its_own_conversations_only(devices):
    channels, plugin = devices
    member, _, _ = await _paired(channels, plugin)
    member_id = member.member["id"]
    channels.server.script(MODEL_A, [Reply("First answer."), Reply("Second answer.")])
    web = await member.post("/api/conversations", json={})
    assert web.status_code == 201
    api = channels.channel.api  # the test channel speaks as its own source
    first = await api.send_message(member_id, "hello", idempotency_key="k1")
    await channels.channel.wait_for("answer", text="First answer.")
    listed = await api.conversations(member_id)
    assert [c["id"] for c in listed] == [first.conversation_id] and listed[0]["current"] is True
    read = await api.conversation_messages(member_id, first.conversation_id)
    assert [(m["role"], m["content"]) for m in read["messages"]] == [("user", "hello"), ("assistant", "First answer.")]
    with pytest.raises(ChannelRequestError):
        await api.conversation_messages(member_id, web.json()["id"])  # the web's, not this source's
    with pytest.raises(ChannelRequestError):
        await plugin.api.conversation_messages(member_id, first.conversation_id)  # another plugin's source
    fresh = await api.new_conversation(member_id)
    await api.use_conversation(member_id, first.conversation_id)
    assert (await api.send_message(member_id, "again", idempotency_key="k2")).conversation_id == first.conversation_id
    await channels.channel.wait_for("answer", text="Second answer.")
    assert {c["id"] for c in await api.conversations(member_id)} == {first.conversation_id, fresh}
    with pytest.raises(ChannelRequestError):
        await api.use_conversation(member_id, web.json()["id"])
    assert (await member.post("/api/auth/logout")).status_code == 200
    with pytest.raises(MemberLocked):
        await api.conversations(member_id)

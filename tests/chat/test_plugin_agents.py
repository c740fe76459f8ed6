"""A plugin's agent directories follow the plugin: its agents reach a member only while
the plugin is enabled and usable by that member (check D1: a disabled plugin's agents
reach no one)."""

from __future__ import annotations

from .support import PROBE, new_conversation


async def test_a_plugins_agents_disappear_while_it_is_disabled_or_not_granted(chat):
    alice = await chat.host.member("alice")
    status = (await alice.get("/api/chat/status")).json()
    assert "quiet" in [a["id"] for a in status["agents"]]
    assert await new_conversation(alice, agent="quiet")

    await chat.admin.put(f"/api/admin/plugins/{PROBE}/enabled", json={"enabled": False})
    assert "quiet" not in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]
    refused = await alice.post("/api/conversations", json={"agent": "quiet"})
    assert refused.status_code == 400 and "quiet" in refused.json()["error"]

    await chat.admin.put(f"/api/admin/plugins/{PROBE}/enabled", json={"enabled": True})
    assert "quiet" in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]
    await chat.admin.put(f"/api/admin/members/{alice.member['id']}/plugins", json={"plugins": []})
    assert "quiet" not in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]
    # The host's own agents never depend on a plugin.
    assert "assistant" in [a["id"] for a in (await alice.get("/api/chat/status")).json()["agents"]]

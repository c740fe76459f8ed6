"""``POST /api/conversations {"agent_id": "companion"}`` answered 201 with the role's
default agent: the field is ``agent`` (the answer names it ``agent_id``), and an unknown
one was ignored. It is refused, naming the field, as the other routes do."""

from __future__ import annotations


async def test_an_unknown_field_is_refused_not_ignored(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    refused = await alice.post("/api/conversations", json={"agent_id": "companion"})
    assert refused.status_code == 400, refused.text
    # The schema's refusal (``@accepts``), as every ``extra=False`` route answers it.
    assert (refused.json()["code"], refused.json()["field"]) == ("field_invalid", "agent_id")
    assert "unknown field(s): agent_id" in refused.json()["error"]
    assert (await alice.get("/api/conversations")).json()["conversations"] == []
    created = await alice.post("/api/conversations", json={"agent": "companion"})
    assert created.status_code == 201 and created.json()["agent_id"] == "companion", created.text

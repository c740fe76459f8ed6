"""A server started in safe mode (a restored copy looked at beside the live one, README
"Backups") starts no unattended work: a member's due scheduled prompts, recurring and
one-shot, are not sent to the model — they stay due and run at the next normal start —
nor do the system agents or scheduled backups run; the member and the admin are told.
A copy ran its member's 08:00 prompt beside the live server: the provider was asked
twice, and the copy's conversation parted from the original's (operator probe)."""

from __future__ import annotations

import datetime as dt

import pytest

from skald_host.core import schedules
from skald_host.core.schedules import service

UTC = dt.timezone.utc


@pytest.fixture(autouse=True)
def reset_clock():
    yield
    schedules.clock.set(None)


async def test_safe_mode_sends_no_due_scheduled_prompt_and_a_normal_start_does(skald):
    model = await skald.model_server("Good morning, Alice.", "Done.")
    backups = {"every_hours": 1}  # a backup would be due at once
    # The live server, before the backup: Alice's prompts are due later this morning.
    schedules.clock.set(dt.datetime(2026, 7, 1, 7, 50, tzinfo=UTC))
    host = await skald.start(settings=skald.settings("data", backup=backups))
    await host.use_model(model)
    alice = await host.member("alice")
    conversation = (await alice.post("/api/conversations", json={"title": "mornings"})).json()
    body = {"prompt": "remind alice", "conversation_id": conversation["id"], "every": "0 8 * * *", "timezone": "UTC"}
    created = await alice.post("/api/schedules", json=body)
    assert created.status_code == 201, created.text
    runtime = await host.core.chat.runtime(await host.core.users.get(alice.member["id"]))
    await service.create(runtime.store, conversation["id"], "remind alice once", at="2026-07-01T08:30:00Z")  # as the agent's tool does
    await host.stop()

    # The copy, in safe mode, past both times: Alice signs in to look at her data.
    schedules.clock.set(dt.datetime(2026, 7, 1, 9, 0, tzinfo=UTC))
    host = await skald.start(settings=skald.settings("data", backup=backups, plugins={"safe_mode": True}))
    alice = await host.member("alice")
    runtime = await host.core.chat.runtime(await host.core.users.get(alice.member["id"]))
    assert await runtime.deliver_due_jobs() == 0  # the scheduler's own check, driven now
    jobs = (await alice.get("/api/schedules")).json()["jobs"]
    assert [(job["status"], job["runs"]) for job in jobs] == [("pending", 0), ("pending", 0)]
    assert all(job["next_run"] <= "2026-07-01T08:30:00.000000Z" for job in jobs)  # still due
    assert model.requests == []
    assert not {"scheduled-backups", "system-agents"} & set(host.core.supervisor.names)

    session = (await alice.get("/api/auth/session")).json()
    assert session["safe_mode"] is True  # the shell's notice: en and de say it
    admin = await host.admin()
    warnings = (await admin.get("/api/admin/status")).json()["warnings"]
    assert "safe_mode" in [warning["id"] for warning in warnings]
    for locale in ("en", "de"):
        assert host.core.strings.lookup("core.warning.safe_mode", locale)
    await host.stop()

    # Running normally again: each prompt runs once at Alice's sign-in (the catch-up rule).
    host = await skald.start(settings=skald.settings("data", backup=backups))
    alice = await host.member("alice")
    await model.wait_for_requests(2, timeout=15)
    assert not (await alice.get("/api/auth/session")).json()["safe_mode"]
    assert "scheduled-backups" in host.core.supervisor.names
    asked = [str(request.messages[-1].get("content")) for request in model.requests]
    assert any("remind alice once" in text for text in asked), asked  # the one-shot
    assert any(text.endswith("remind alice") for text in asked), asked  # the 08:00 run, once

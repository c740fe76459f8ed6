"""Event triage and the memory lints, against the scripted model."""

from __future__ import annotations

from skald_host.testing import Reply, ToolCall

from skald_system_agents import PLUGIN_ID


def no_tools_on_the_wire(request) -> bool:
    return not request.tools and "tools" not in request.body


async def test_the_registry_and_the_settings_sets_agree(setup):
    """One enumeration: every agent the scheduler runs has its settings set, and every
    set the plugin owns by an agent id is an agent's."""
    entries = setup.core.system_agents.registry.entries
    assert [e.id for e in entries] == ["event_triage", "memory_lint_private", "memory_lint_shared", "conversation_review"]
    owned = {c.value.owner for c in setup.core.config_sets if c.plugin_id == PLUGIN_ID}
    assert owned == {e.id for e in entries}
    for entry in entries:
        names = {f.name for f in entry.config_set.fields}
        assert "enabled" in names and ("interval" in names) == (entry.agent.scope != "per_subject")


async def test_event_triage_tells_the_member_on_their_home_source(setup, skald):
    server = await skald.model_server(Reply("Your build failed on main; the release is blocked."))
    await setup.host.use_model(server)
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    member = await setup.core.users.get(alice_id)
    await setup.core.channels.router.set_home_source(member, "capture")
    api = setup.core.host_api("capture")
    # Nothing new: idle, no run row, no model call.
    assert [o.result for o in await setup.tick() if o.agent_id == "event_triage" and o.member_id == alice_id] == ["idle"]
    await api.append_member_event(alice_id, "mcp.notification", {"server": "ci", "text": "build failed on main"})
    setup.clock.advance(minutes=6)
    outcomes = [o.result for o in await setup.tick() if o.agent_id == "event_triage" and o.member_id == alice_id]
    assert outcomes == ["ran"]
    assert setup.channel.notifications(alice_id) == ["Your build failed on main; the release is blocked."]
    [request] = server.requests
    assert "build failed on main" in request.last_user_text and no_tools_on_the_wire(request)
    # The cursor moved: the same event is not triaged twice.
    setup.clock.advance(minutes=6)
    assert [o.result for o in await setup.tick() if o.agent_id == "event_triage" and o.member_id == alice_id] == ["idle"]
    runs = await setup.core.system_agents.runs_of(alice_id, "event_triage")
    assert [(r["status"], r["stats"]) for r in runs] == [("done", {"events": 1, "notified": 1})]
    # The pass's own conversation is gone, and was never listed.
    assert (await alice.get("/api/conversations")).json()["conversations"] == []


async def test_a_per_member_triage_interval_is_kept_and_used(setup, skald):
    admin = await setup.host.admin()
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    put = await admin.put(f"/api/admin/members/{alice_id}/agent-intervals", json={"agent_id": "event_triage", "interval": 30})
    assert put.status_code == 200, put.text
    assert put.json()["intervals"] == [
        {"agent_id": "event_triage", "title": "Event triage", "interval_unit": "minutes", "interval": 30, "instance_interval": 5,
         "plugin_enabled": True}
    ]
    assert (await alice.get(f"/api/admin/members/{alice_id}/agent-intervals")).status_code == 403
    await setup.tick()
    setup.clock.advance(minutes=10)  # due for everyone else, not for alice
    outcomes = {o.member_id: o.result for o in await setup.tick() if o.agent_id == "event_triage"}
    assert outcomes[alice_id] == "not_due" and outcomes[admin.member["id"]] == "idle"
    cleared = await admin.put(f"/api/admin/members/{alice_id}/agent-intervals", json={"agent_id": "event_triage", "interval": None})
    assert cleared.json()["intervals"][0]["interval"] is None
    assert {o.member_id: o.result for o in await setup.tick() if o.agent_id == "event_triage"}[alice_id] == "idle"


async def test_the_private_memory_lint_reports_and_never_repairs(setup, skald):
    """The model tries to fix a note: no tool is on the wire, the call is refused, the
    note is unchanged, and the report is filed in the member's own file."""
    server = await skald.model_server(
        Reply(
            "# Two notes disagree\n\nYour diet notes contradict each other.\n\n- user-memory/diet.md",
            tool_calls=[ToolCall("write_file", {"path": "user-memory/diet.md", "content": "fixed"})],
        ),
    )
    await setup.host.use_model(server)
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    notes = setup.core.memory.notes(alice_id, "user-memory")
    assert [o.result for o in await setup.tick() if o.agent_id == "memory_lint_private" and o.member_id == alice_id] == ["idle"]
    await notes.write("diet.md", "Alice is vegetarian.\n\nAlice's favourite dish is steak.")
    setup.clock.advance(days=8)
    assert [o.result for o in await setup.tick() if o.agent_id == "memory_lint_private" and o.member_id == alice_id] == ["ran"]
    [request] = server.requests
    assert no_tools_on_the_wire(request) and "Alice is vegetarian" in request.last_user_text
    assert await notes.read("diet.md") == "Alice is vegetarian.\n\nAlice's favourite dish is steak."
    reports = (await alice.get("/api/reports")).json()["reports"]
    assert [(r["where"], r["title"], r["summary"]) for r in reports] == [("own", "Two notes disagree", "Your diet notes contradict each other.")]
    admin = await setup.host.admin()
    assert (await admin.get("/api/reports")).json()["reports"] == []  # the member's own, in their own file


async def test_the_shared_memory_lint_runs_once_as_the_first_admin_and_files_for_admins(setup, skald):
    server = await skald.model_server(Reply("# A private detail in shared memory\n\nOne note holds a health detail.\n"))
    await setup.host.use_model(server)
    admin = await setup.host.admin()
    alice = await setup.host.member("alice")
    await setup.core.memory.notes(admin.member["id"], "shared-memory").write("family.md", "Bob takes medication X.")
    outcomes = [o for o in await setup.tick() if o.agent_id == "memory_lint_shared"]
    assert [(o.member_id, o.result) for o in outcomes] == [(admin.member["id"], "ran")]
    [report] = (await admin.get("/api/reports")).json()["reports"]
    assert report["where"] == "shared" and report["title"] == "A private detail in shared memory"
    assert (await alice.get("/api/reports")).json()["reports"] == []
    runs = (await admin.get("/api/system-agents/runs?agent=memory_lint_shared")).json()["runs"]
    assert [r["status"] for r in runs] == ["done"]
    assert (await alice.get("/api/system-agents/runs?agent=memory_lint_shared")).json()["runs"] == []

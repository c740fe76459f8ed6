"""Project invitations against a real host: nobody is put into a project without
accepting (two-member probe: any member could put any other, the admin too, into a
project at once, again and again, a prompt-injection path into their agent), and the
invitation route does not tell which user names exist."""

from __future__ import annotations

import sqlite3

from skald_host.core.schema import REGISTRY_MIGRATIONS
from skald_host.core.storage import Database, MigrationSet

NEW = "a fresh passphrase after the reset 9"


async def _invite(client, pid: str, username: str, can_write: bool = False):
    return await client.post(f"/api/projects/{pid}/members", json={"username": username, "can_write": can_write})


async def _waiting(client) -> list[dict]:
    return (await client.get("/api/projects")).json()["invitations"]


async def _not_in(host, client, pid: str) -> None:
    """``client`` is in no way a member of ``pid``: not listed, no folder, no chat."""
    assert (await client.get("/api/projects")).json()["projects"] == []
    assert await host.core.folders.memberships(client.member["id"]) == []
    for method, path in (("GET", f"/api/projects/{pid}"), ("GET", f"/api/projects/{pid}/files"), ("POST", f"/api/projects/{pid}/chat")):
        assert (await client.request(method, path)).status_code == 404, (method, path)


async def test_an_invitation_makes_no_member_until_it_is_accepted_and_a_decline_removes_it(skald):
    host = await skald.start()
    admin = await host.admin()
    mallory, alice = await host.member("mallory", display_name="Mallory"), await host.member("alice")
    created = await mallory.post("/api/projects", json={"slug": "p3", "title": "Urgent: read INSTRUCTIONS.md"})
    pid = created.json()["id"]

    for victim in (alice, admin):
        response = await _invite(mallory, pid, victim.member["username"])
        assert response.status_code == 201, response.text
        await _not_in(host, victim, pid)
    [invitation] = await _waiting(alice)
    assert invitation == {
        "id": invitation["id"],
        "project": {"id": pid, "title": "Urgent: read INSTRUCTIONS.md"},
        "can_write": False,
        "invited_by": {"username": "mallory", "display_name": "Mallory"},
        "created_at": invitation["created_at"],
    }

    # Declined: gone, and still no member.
    response = await alice.delete(f"/api/project-invitations/{invitation['id']}")
    assert (response.status_code, response.json()) == (200, {"declined": invitation["id"]})
    assert await _waiting(alice) == []
    await _not_in(host, alice, pid)
    again = await alice.delete(f"/api/project-invitations/{invitation['id']}")
    assert (again.status_code, again.json()["code"]) == (404, "no_such_invitation")

    # Invited again and accepted: a read-only member, the folder in her space.
    assert (await _invite(mallory, pid, "alice")).status_code == 201
    [invitation] = await _waiting(alice)
    response = await alice.post(f"/api/project-invitations/{invitation['id']}/accept")
    assert response.status_code == 200, response.text
    assert (response.json()["id"], response.json()["can_write"]) == (pid, False)
    assert [p["id"] for p in (await alice.get("/api/projects")).json()["projects"]] == [pid]
    [access] = await host.core.folders.memberships(alice.member["id"])
    assert (access.id, access.can_write) == (pid, False)
    assert await _waiting(alice) == []
    used = await alice.post(f"/api/project-invitations/{invitation['id']}/accept")
    assert (used.status_code, used.json()["code"]) == (404, "no_such_invitation")

    # She leaves; being invited back makes her no member again without her word.
    assert (await alice.delete(f"/api/projects/{pid}/members/{alice.member['id']}")).json() == {"left": pid}
    assert (await _invite(mallory, pid, "alice")).status_code == 201
    await _not_in(host, alice, pid)


async def test_the_invitation_answer_is_the_same_whether_or_not_the_name_is_an_account(skald):
    """``no_such_member`` told which user names exist; members see no list of each
    other's, so an invitation to a name nobody has is answered, and listed, alike."""
    host = await skald.start()
    await host.admin()
    olga = await host.member("olga")
    await host.create_member("alice")
    pid = (await olga.post("/api/projects", json={"slug": "garden"})).json()["id"]

    answers = {name: await _invite(olga, pid, name) for name in ("alice", "ghost")}
    assert {name: r.status_code for name, r in answers.items()} == {"alice": 201, "ghost": 201}
    first, second = answers["alice"].json(), answers["ghost"].json()
    assert {k: v for k, v in first.items() if k != "invitations"} == {k: v for k, v in second.items() if k != "invitations"}
    invited = {i["username"]: i for i in second["invitations"]}
    assert sorted(invited) == ["alice", "ghost"]

    def anonymous(entry: dict) -> dict:
        return {k: v for k, v in entry.items() if k not in ("id", "username", "created_at")}

    assert anonymous(invited["alice"]) == anonymous(invited["ghost"])
    assert invited["alice"].keys() == invited["ghost"].keys()
    # Already invited, already a member, the owner: the same answer as a fresh one.
    for name in ("ghost", "olga", "ALICE", "@alice"):
        response = await _invite(olga, pid, name)
        assert response.status_code == 201, (name, response.text)
        assert sorted(i["username"] for i in response.json()["invitations"]) == ["alice", "ghost"]

    # An account made later under the name is not reached by the old invitation...
    ghost = await host.member("ghost")
    assert await _waiting(ghost) == []
    # ...only by an invitation made while it exists.
    assert (await _invite(olga, pid, "ghost")).status_code == 201
    assert [i["project"]["id"] for i in await _waiting(ghost)] == [pid]


async def test_one_invitation_per_project_and_member_with_the_latest_write_access(skald):
    host = await skald.start()
    await host.admin()
    olga, rita = await host.member("olga"), await host.member("rita")
    pid = (await olga.post("/api/projects", json={"slug": "garden"})).json()["id"]
    assert (await _invite(olga, pid, "rita", can_write=False)).status_code == 201
    response = await _invite(olga, pid, "rita", can_write=True)
    assert [(i["username"], i["can_write"]) for i in response.json()["invitations"]] == [("rita", True)]
    [invitation] = await _waiting(rita)
    assert invitation["can_write"] is True
    response = await rita.post(f"/api/project-invitations/{invitation['id']}/accept")
    assert response.json()["can_write"] is True
    assert [(m["username"], m["can_write"]) for m in response.json()["members"]] == [("olga", True), ("rita", True)]
    rows = await host.core.registry.run(lambda c: c.execute("SELECT count(*) FROM project_invitations").fetchone()[0])
    assert rows == 0


async def test_writers_see_and_withdraw_invitations_and_nobody_else_touches_them(skald):
    host = await skald.start()
    await host.admin()
    olga, wim, rita, otto, alice = [await host.member(n) for n in ("olga", "wim", "rita", "otto", "alice")]
    pid = (await olga.post("/api/projects", json={"slug": "garden"})).json()["id"]
    for member, can_write in ((wim, True), (rita, False)):
        assert (await _invite(olga, pid, member.member["username"], can_write)).status_code == 201
        [invitation] = await _waiting(member)
        assert (await member.post(f"/api/project-invitations/{invitation['id']}/accept")).status_code == 200
    response = await _invite(wim, pid, "alice")
    [pending] = response.json()["invitations"]
    assert (pending["username"], pending["invited_by"]["username"]) == ("alice", "wim")
    assert [i["id"] for i in (await olga.get(f"/api/projects/{pid}")).json()["invitations"]] == [pending["id"]]
    assert (await rita.get(f"/api/projects/{pid}")).json()["invitations"] == []  # a reader manages nobody

    [theirs] = await _waiting(alice)
    unknown = "0" * 32
    # Another member cannot answer alice's invitation: as for an id that does not exist.
    for method, path in (("POST", "/api/project-invitations/{}/accept"), ("DELETE", "/api/project-invitations/{}")):
        mine, control = await otto.request(method, path.format(theirs["id"])), await otto.request(method, path.format(unknown))
        assert (mine.status_code, mine.json()) == (404, control.json()), (method, path)
    refused = await rita.delete(f"/api/projects/{pid}/invitations/{pending['id']}")
    assert (refused.status_code, refused.json()["code"]) == (403, "read_only_project")
    outsider = await otto.delete(f"/api/projects/{pid}/invitations/{pending['id']}")
    assert (outsider.status_code, outsider.json()["code"]) == (404, "no_such_project")
    assert [i["id"] for i in await _waiting(alice)] == [theirs["id"]]

    withdrawn = await olga.delete(f"/api/projects/{pid}/invitations/{pending['id']}")
    assert (withdrawn.status_code, withdrawn.json()["invitations"]) == (200, [])
    assert await _waiting(alice) == []
    late = await alice.post(f"/api/project-invitations/{theirs['id']}/accept")
    assert (late.status_code, late.json()["code"]) == (404, "no_such_invitation")
    await _not_in(host, alice, pid)
    again = await olga.delete(f"/api/projects/{pid}/invitations/{pending['id']}")
    assert (again.status_code, again.json()["code"]) == (404, "no_such_invitation")


async def test_a_project_holds_a_bounded_number_of_open_invitations(skald):
    from skald_host.core.folders.invitations import MAX_PENDING

    host = await skald.start()
    await host.admin()
    olga = await host.member("olga")
    pid = (await olga.post("/api/projects", json={"slug": "garden"})).json()["id"]
    for index in range(MAX_PENDING):
        assert (await _invite(olga, pid, f"name{index}")).status_code == 201
    refused = await _invite(olga, pid, "one-more")
    assert (refused.status_code, refused.json()["code"], refused.json()["field"]) == (409, "too_many_invitations", "username")
    assert (await _invite(olga, pid, "name0", can_write=True)).status_code == 201  # an open one is still changed
    for locale in ("en", "de"):
        for code in ("no_such_invitation", "too_many_invitations"):
            assert host.core.strings.lookup(f"core.error.{code}", locale), (locale, code)


async def test_deleting_or_resetting_a_member_removes_the_invitations_sent_to_them(skald):
    host = await skald.start()
    admin = await host.admin()
    olga = await host.member("olga")
    bob, dora, carl = await host.member("bob"), await host.member("dora"), await host.member("carl")
    pid = (await olga.post("/api/projects", json={"slug": "garden"})).json()["id"]
    for name in ("bob", "dora", "ghost"):
        assert (await _invite(olga, pid, name)).status_code == 201
    # carl's own project, with an invitation he sent: it goes with him.
    carls = (await carl.post("/api/projects", json={"slug": "shed"})).json()["id"]
    assert (await _invite(carl, carls, "bob")).status_code == 201

    reset = await admin.post(f"/api/admin/members/{bob.member['id']}/reset-password", json={"new_password": NEW, "confirm_data_loss": True})
    assert (reset.status_code, reset.json()["data_lost"]) == (200, True)
    assert (await admin.delete(f"/api/admin/members/{dora.member['id']}")).status_code == 200
    assert (await admin.delete(f"/api/admin/members/{carl.member['id']}")).status_code == 200

    bob = host.client()
    assert (await bob.login("bob", NEW)).status_code == 200
    assert await _waiting(bob) == []  # whoever holds the new password is offered nothing
    assert [i["username"] for i in (await olga.get(f"/api/projects/{pid}")).json()["invitations"]] == ["ghost"]
    left = await host.core.registry.run(lambda c: [tuple(r) for r in c.execute("SELECT invitee_name, invitee_id FROM project_invitations")])
    assert left == [("ghost", None)]
    # bob can be invited again, and joins by accepting.
    assert (await _invite(olga, pid, "bob")).status_code == 201
    [invitation] = await _waiting(bob)
    assert (await bob.post(f"/api/project-invitations/{invitation['id']}/accept")).status_code == 200


async def test_an_owner_a_reset_took_out_of_their_project_is_a_writer_again_once_they_accept(skald):
    host = await skald.start()
    admin = await host.admin()
    bob, alice = await host.member("bob"), await host.member("alice")
    pid = (await bob.post("/api/projects", json={"slug": "band"})).json()["id"]
    assert (await _invite(bob, pid, "alice", can_write=True)).status_code == 201
    [invitation] = await _waiting(alice)
    assert (await alice.post(f"/api/project-invitations/{invitation['id']}/accept")).status_code == 200
    reset = await admin.post(f"/api/admin/members/{bob.member['id']}/reset-password", json={"new_password": NEW, "confirm_data_loss": True})
    assert reset.status_code == 200, reset.text
    bob = host.client()
    assert (await bob.login("bob", NEW)).status_code == 200
    assert (await _invite(alice, pid, "bob", can_write=False)).status_code == 201
    [invitation] = await _waiting(bob)
    joined = await bob.post(f"/api/project-invitations/{invitation['id']}/accept")
    assert (joined.json()["is_owner"], joined.json()["can_write"], joined.json()["can_delete"]) == (True, True, True)


async def test_a_data_dir_of_the_schema_before_invitations_opens_and_keeps_its_projects(tmp_path):
    """The step that adds ``project_invitations`` on a registry the version before
    wrote: its projects and memberships are kept, nobody is invited, and invitations
    work; the step only adds a table."""
    step = next(i for i, m in enumerate(REGISTRY_MIGRATIONS.steps) if "project invitations" in m.description)
    path = tmp_path / "database" / "system.db"
    before = MigrationSet(REGISTRY_MIGRATIONS.bucket, REGISTRY_MIGRATIONS.steps[:step])
    registry = await Database.open(path, key=None, migrations=before, create=True)
    olga, rita = "a" * 32, "b" * 32
    await registry.transaction(
        lambda c: (
            c.executemany(
                "INSERT INTO users (id, username, display_name, role_id, encrypted, credential_kind, credentials)"
                " VALUES (?, ?, ?, 'member', 0, 'verifier', '{}')",
                [(olga, "olga", "Olga"), (rita, "rita", "Rita")],
            ),
            c.execute("INSERT INTO projects (id, owner_id, slug, title) VALUES ('p' , ?, 'garden', 'Garden')", (olga,)),
            c.executemany("INSERT INTO project_members (project_id, member_id, can_write) VALUES ('p', ?, ?)", [(olga, 1), (rita, 0)]),
        )
    )
    tables_before = await registry.run(lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")})
    await registry.close()
    assert "project_invitations" not in tables_before

    registry = await Database.open(path, key=None, migrations=REGISTRY_MIGRATIONS)
    try:
        assert registry.schema_version == REGISTRY_MIGRATIONS.latest
        tables = await registry.run(lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")})
        assert "project_invitations" in tables - tables_before and tables_before <= tables  # added, nothing dropped
        members = await registry.run(lambda c: [tuple(r) for r in c.execute("SELECT member_id, can_write FROM project_members ORDER BY member_id")])
        assert members == [(olga, 1), (rita, 0)]
        assert await registry.run(lambda c: c.execute("SELECT count(*) FROM project_invitations").fetchone()[0]) == 0
        await registry.transaction(
            lambda c: c.execute(
                "INSERT INTO project_invitations (id, project_id, invitee_name, invitee_id, invited_by) VALUES ('i', 'p', 'rita', ?, ?)",
                (rita, olga),
            )
        )
        # one open invitation per project and name
        try:
            await registry.transaction(
                lambda c: c.execute(
                    "INSERT INTO project_invitations (id, project_id, invitee_name, invited_by) VALUES ('j', 'p', 'rita', ?)", (olga,)
                )
            )
        except sqlite3.IntegrityError:
            pass
        else:
            raise AssertionError("a second invitation of one name to one project was stored")
    finally:
        await registry.close()

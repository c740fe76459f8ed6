"""The admin API: members, roles and the plugin list, including the guards that keep
an instance administrable (never zero active admins) and errors that name the field."""

from __future__ import annotations

import asyncio


PASSWORD = "member password 42"


async def _create(admin, **body):
    return await admin.post("/api/admin/members", json={"password": PASSWORD, **body})


# -- members -------------------------------------------------------------------------------


async def test_create_member_with_profile_fields_and_read_it_back(skald):
    host = await skald.start()
    admin = await host.admin()
    response = await _create(
        admin,
        username="Alice",
        display_name="Alice Liddell",
        locale="de-CH",
        birthdate="2012-05-04",
        sex="female",
        notes="likes rabbits",
        role="restricted",
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["username"] == "alice"  # user names are stored lower-case
    expected = {
        "display_name": "Alice Liddell",
        "locale": "de-CH",
        "birthdate": "2012-05-04",
        "sex": "female",
        "notes": "likes rabbits",
        "role": "restricted",
        "is_admin": False,
        "active": True,
        "encrypted": True,
        "unlocked": False,
        "sessions": 0,
    }
    assert {k: created[k] for k in expected} == expected
    # No credentials: only whether the password is still the one the admin chose.
    assert created.pop("password_set_by_admin") is True
    assert "password" not in str(created).lower()

    fetched = (await admin.get(f"/api/admin/members/{created['id']}")).json()
    assert {k: fetched[k] for k in expected} == expected
    listed = (await admin.get("/api/admin/members")).json()["members"]
    assert sorted(m["username"] for m in listed) == ["admin", "alice"]
    assert (await host.client().login("ALICE", PASSWORD)).status_code == 200


INVALID_MEMBER_FIELDS = [
    ({"birthdate": "1990-13-01"}, "birthdate"),
    ({"birthdate": "yesterday"}, "birthdate"),
    ({"birthdate": "2999-01-01"}, "birthdate"),  # in the future whenever this runs (a "tomorrow" fixed at collection was today after midnight)
    ({"birthdate": "1899-12-31"}, "birthdate"),
    ({"locale": "not a locale"}, "locale"),
    ({"display_name": "x" * 101}, "display_name"),
    ({"notes": "x" * 4001}, "notes"),
    ({"display_name": 42}, "display_name"),
    ({"encrypted": "yes"}, "encrypted"),
    ({"username": "has space"}, "user name"),
    ({"username": ""}, "user name"),
    ({"username": ".."}, "user name"),
    ({"username": "."}, "user name"),
    ({"username": None}, "username"),
    ({"password": None}, "password"),
    ({"role": "overlord"}, "role"),
    ({"role": 7}, "role"),
]


async def test_invalid_member_fields_are_refused_naming_the_field(skald):
    host = await skald.start()
    admin = await host.admin()
    for body, field in INVALID_MEMBER_FIELDS:
        response = await _create(admin, **{"username": "carol", **body})
        assert response.status_code == 400, (body, response.text)
        assert field in response.json()["error"], (body, response.text)
    assert await host.core.users.find("carol") is None


async def test_create_member_refuses_unknown_fields_naming_them(skald):
    host = await skald.start()
    admin = await host.admin()
    response = await _create(admin, username="carol", birth_date="2001-01-01")
    assert response.status_code == 400
    assert "birth_date" in response.json()["error"]


async def test_update_member_refuses_unknown_fields_and_bad_values_naming_them(skald):
    host = await skald.start()
    admin = await host.admin()
    carol = (await _create(admin, username="carol")).json()
    path = f"/api/admin/members/{carol['id']}"
    for body, field in (
        ({"birth_date": "2001-01-01"}, "birth_date"),
        ({"username": "renamed"}, "username"),
        ({"birthdate": "2001-02-30"}, "birthdate"),
        ({"birthdate": "2999-01-01"}, "birthdate"),
        ({"role": "overlord"}, "role"),
        ({"active": "no"}, "active"),
    ):
        response = await admin.patch(path, json=body)
        assert response.status_code == 400, body
        assert field in response.json()["error"], body
    assert (await admin.get(path)).json()["birthdate"] is None

    response = await admin.patch(path, json={"birthdate": "2001-02-28", "display_name": "Carol C."})
    assert response.status_code == 200
    assert (response.json()["birthdate"], response.json()["display_name"]) == ("2001-02-28", "Carol C.")
    assert (await admin.patch(f"/api/admin/members/{'0' * 32}", json={"notes": "x"})).status_code == 404
    assert (await admin.patch("/api/admin/members/../../etc", json={"notes": "x"})).status_code == 404


async def test_user_names_are_unique_regardless_of_case(skald):
    host = await skald.start()
    admin = await host.admin()
    assert (await _create(admin, username="bob")).status_code == 201
    for name in ("bob", "BOB", "Bob", " bob "):
        response = await _create(admin, username=name)
        assert response.status_code == 400, name
        assert "taken" in response.json()["error"]
    assert [m.username for m in await host.core.users.list()] == ["admin", "bob"]


async def test_an_admin_cannot_delete_themselves(skald):
    host = await skald.start()
    admin = await host.admin()
    second = await _create(admin, username="second", role="admin")
    assert second.status_code == 201
    response = await admin.delete(f"/api/admin/members/{admin.member['id']}")
    assert response.status_code == 400
    assert "your own account" in response.json()["error"]
    assert await host.core.users.find("admin") is not None


async def test_the_last_active_admin_cannot_be_deactivated_or_demoted(skald):
    host = await skald.start()
    admin = await host.admin()
    path = f"/api/admin/members/{admin.member['id']}"
    for body in ({"active": False}, {"role": "member"}, {"role": "restricted", "active": False}):
        response = await admin.patch(path, json=body)
        assert response.status_code == 400, body
        assert "without an active admin" in response.json()["error"]
    me = (await admin.get(path)).json()
    assert (me["role"], me["active"]) == ("admin", True)
    assert (await admin.get("/api/admin/members")).status_code == 200


async def test_with_a_second_admin_one_may_step_down_and_the_other_then_is_last(skald):
    host = await skald.start()
    admin = await host.admin()
    second = await _create(admin, username="second", role="admin")
    second_id = second.json()["id"]
    second_client = host.client()
    assert (await second_client.login("second", PASSWORD)).status_code == 200

    assert (await admin.patch(f"/api/admin/members/{admin.member['id']}", json={"role": "member"})).status_code == 200
    assert (await admin.get("/api/admin/members")).status_code == 403  # the demotion applies at once
    response = await second_client.patch(f"/api/admin/members/{second_id}", json={"active": False})
    assert response.status_code == 400
    assert "without an active admin" in response.json()["error"]
    # An inactive admin does not count: deleting the other (now a member) is fine.
    assert (await second_client.delete(f"/api/admin/members/{admin.member['id']}")).status_code == 200


async def test_two_admins_demoting_each_other_at_once_leave_one_admin(skald):
    host = await skald.start()
    admin = await host.admin()
    second_id = (await _create(admin, username="second", role="admin")).json()["id"]
    second = host.client()
    assert (await second.login("second", PASSWORD)).status_code == 200
    responses = await asyncio.gather(
        admin.patch(f"/api/admin/members/{second_id}", json={"role": "member"}),
        second.patch(f"/api/admin/members/{admin.member['id']}", json={"role": "member"}),
    )
    assert sorted(r.status_code for r in responses) in ([200, 400], [200, 403])
    admins = [m for m in await host.core.users.list() if m.is_admin and m.active]
    assert len(admins) == 1


async def test_deleting_a_member_removes_them_and_unknown_ids_are_404(skald):
    host = await skald.start()
    admin = await host.admin()
    bob = (await _create(admin, username="bob")).json()
    assert (await admin.delete(f"/api/admin/members/{bob['id']}")).status_code == 200
    assert (await admin.get(f"/api/admin/members/{bob['id']}")).status_code == 404
    assert (await admin.delete(f"/api/admin/members/{bob['id']}")).status_code == 404
    assert (await admin.post(f"/api/admin/members/{bob['id']}/end-sessions")).status_code == 404
    assert (await host.client().login("bob", PASSWORD)).status_code == 401


async def test_member_view_reports_sessions_and_unlock_state_but_no_content(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    await alice.put("/api/me/settings", json={"diary": "private words"})
    view = (await admin.get(f"/api/admin/members/{alice.member['id']}")).json()
    assert (view["unlocked"], view["sessions"]) == (True, 1)
    assert "private words" not in str(view)
    ended = await admin.post(f"/api/admin/members/{alice.member['id']}/end-sessions")
    assert ended.json() == {"ended": 1}
    view = (await admin.get(f"/api/admin/members/{alice.member['id']}")).json()
    assert (view["unlocked"], view["sessions"]) == (False, 0)


async def test_a_preset_role_label_is_answered_in_the_readers_language_not_as_its_key(skald):
    """Preset role labels are stored as ``core.seed.role.*`` keys; every answer that shows
    a member's ``role_label`` says it in the reader's words (the create answer said the key)."""
    host = await skald.start()
    admin = await host.admin()
    created = (await _create(admin, username="alice", role="member")).json()
    assert created["role_label"] == "Member"
    assert (await admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    assert (await _create(admin, username="bert", role="restricted")).json()["role_label"] == "Kinder"
    assert (await admin.get(f"/api/admin/members/{created['id']}")).json()["role_label"] == "Mitglied"
    patched = await admin.patch(f"/api/admin/members/{created['id']}", json={"role": "restricted"})
    assert patched.json()["role_label"] == "Kinder"
    listed = {m["username"]: m["role_label"] for m in (await admin.get("/api/admin/members")).json()["members"]}
    assert listed == {"admin": "Administrator", "alice": "Kinder", "bert": "Kinder"}
    assert (await admin.get("/api/auth/session")).json()["member"]["role_label"] == "Administrator"
    # The roles API keeps the key: its label is what the admin edits and sends back.
    roles = {r["id"]: r["label"] for r in (await admin.get("/api/admin/roles")).json()["roles"]}
    assert roles["member"] == "core.seed.role.member"
    # An admin's own wording is shown as written.
    assert (await admin.patch("/api/admin/roles/member", json={"label": "Erwachsene"})).status_code == 200
    assert (await _create(admin, username="carl", role="member")).json()["role_label"] == "Erwachsene"


# -- roles ---------------------------------------------------------------------------------


async def test_roles_crud_with_capabilities_and_attributes(skald):
    host = await skald.start()
    admin = await host.admin()
    presets = {r["id"]: r for r in (await admin.get("/api/admin/roles")).json()["roles"]}
    assert {"admin", "member", "restricted"} <= set(presets)
    assert all(presets[p]["builtin"] for p in ("admin", "member", "restricted"))

    created = await admin.post(
        "/api/admin/roles",
        json={"id": "teen", "label": "Teenager", "capabilities": ["chat.use", "projects.create"], "attrs": {"ui_mode": "simple"}},
    )
    assert created.status_code == 201, created.text
    role = created.json()
    assert role["capabilities"] == ["chat.use", "projects.create"]
    assert (role["builtin"], role["attrs"]["ui_mode"], role["attrs"]["auto_grant"]) == (False, "simple", True)

    updated = await admin.patch("/api/admin/roles/teen", json={"attrs": {"auto_grant": False}, "label": "Teens"})
    assert updated.status_code == 200
    assert (updated.json()["attrs"]["auto_grant"], updated.json()["label"]) == (False, "Teens")
    assert updated.json()["attrs"]["ui_mode"] == "simple"  # attrs merge, they do not reset
    assert updated.json()["capabilities"] == ["chat.use", "projects.create"]

    updated = await admin.patch("/api/admin/roles/teen", json={"capabilities": []})
    assert updated.json()["capabilities"] == []
    listed = {r["id"]: r for r in (await admin.get("/api/admin/roles")).json()["roles"]}
    assert listed["teen"]["attrs"]["auto_grant"] is False

    assert (await admin.delete("/api/admin/roles/teen")).status_code == 200
    assert (await admin.patch("/api/admin/roles/teen", json={"label": "x"})).status_code == 404
    assert (await admin.delete("/api/admin/roles/teen")).status_code == 404


INVALID_ROLES = [
    ({"id": "x", "label": "X"}, "id must be"),
    ({"id": "Teen", "label": "X"}, "id must be"),
    ({"id": "teen", "label": ""}, "label"),
    ({"id": "teen", "label": "X", "capabilities": ["telepathy"]}, "unknown or admin-only capability: telepathy"),
    ({"id": "teen", "label": "X", "capabilities": ["members.manage"]}, "members.manage"),
    ({"id": "teen", "label": "X", "capabilities": ["chat.use", "roles.manage"]}, "roles.manage"),
    ({"id": "teen", "label": "X", "capabilities": "chat.use"}, "capabilities"),
    ({"id": "teen", "label": "X", "attrs": {"colour": "red"}}, "colour"),
    ({"id": "teen", "label": "X", "attrs": {"auto_grant": "yes"}}, "auto_grant"),
    ({"id": "teen", "label": "X", "attrs": {"ui_mode": "fancy"}}, "ui_mode"),
    ({"id": "member", "label": "Again"}, "exists already"),
]


async def test_invalid_roles_are_refused_saying_why(skald):
    host = await skald.start()
    admin = await host.admin()
    for body, fragment in INVALID_ROLES:
        response = await admin.post("/api/admin/roles", json=body)
        assert response.status_code == 400, (body, response.text)
        assert fragment in response.json()["error"], (body, response.text)
    assert "teen" not in [r["id"] for r in (await admin.get("/api/admin/roles")).json()["roles"]]


async def test_preset_roles_and_roles_in_use_cannot_be_deleted(skald):
    host = await skald.start()
    admin = await host.admin()
    for preset in ("admin", "member", "restricted"):
        response = await admin.delete(f"/api/admin/roles/{preset}")
        assert response.status_code == 400
        assert "preset" in response.json()["error"]
    assert (await admin.post("/api/admin/roles", json={"id": "teen", "label": "Teen"})).status_code == 201
    carol = (await _create(admin, username="carol", role="teen")).json()
    response = await admin.delete("/api/admin/roles/teen")
    assert response.status_code == 400
    assert "still has members" in response.json()["error"]
    assert (await admin.patch(f"/api/admin/members/{carol['id']}", json={"role": "member"})).status_code == 200
    assert (await admin.delete("/api/admin/roles/teen")).status_code == 200


async def test_the_admin_role_takes_no_capabilities_and_grants_nothing_admin_only(skald):
    host = await skald.start()
    admin = await host.admin()
    response = await admin.patch("/api/admin/roles/admin", json={"capabilities": ["chat.use"]})
    assert response.status_code == 400
    assert "implicitly" in response.json()["error"]
    response = await admin.patch("/api/admin/roles/member", json={"capabilities": ["members.manage"]})
    assert response.status_code == 400
    alice = await host.member("alice")
    assert (await alice.get("/api/admin/members")).status_code == 403


async def test_role_updates_refuse_unknown_fields(skald):
    host = await skald.start()
    admin = await host.admin()
    response = await admin.patch("/api/admin/roles/member", json={"builtin": False})
    assert response.status_code == 400
    assert "builtin" in response.json()["error"]
    assert (await admin.delete("/api/admin/roles/member")).status_code == 400


# -- plugins -------------------------------------------------------------------------------


async def test_plugin_list_shows_the_builtin_strings_plugin_loaded(skald):
    host = await skald.start()
    admin = await host.admin()
    for path in ("/api/admin/plugins", "/api/admin/plugins.json"):
        response = await admin.get(path)
        assert response.status_code == 200
        plugins = {p["id"]: p for p in response.json()["plugins"]}
        assert "strings" in plugins, path
        strings = plugins["strings"]
        assert (strings["builtin"], strings["state"], strings["healthy"], strings["error"]) == (True, "loaded", True, None)
    # Built-ins cannot be switched off.
    response = await admin.put("/api/admin/plugins/strings/enabled", json={"enabled": False})
    assert response.status_code == 400
    assert (await admin.get("/api/i18n")).json()["strings"]["core.app.name"] == "Skald"


async def test_a_member_is_refused_an_admin_route_before_its_body_is_judged(skald):
    """403 whatever the body: a non-admin learned nothing of what an admin route wants
    (security probe: an empty body answered 400 naming the missing field)."""
    host = await skald.start()
    await host.admin()
    member = await host.member("kid", role="restricted")
    for method, path in (("POST", "/api/admin/members"), ("PUT", "/api/admin/plugins/x0/enabled"), ("POST", "/api/admin/roles")):
        for body in ({}, {"username": 5}, []):
            response = await member.request(method, path, json=body)
            assert response.status_code == 403 and response.json()["code"] == "forbidden", (path, body, response.text)


async def test_a_role_start_agent_must_be_an_existing_chat_agent(skald):
    """A typo or a task agent as a role's start agent was saved (200), and then no member
    of the role could start a conversation: the save says what is wrong instead."""
    host = await skald.start()
    admin = await host.admin()
    member = await host.member("mia")
    for agent_id, code in (("nosuch", "role_chat_agent_unknown"), ("researcher", "role_chat_agent_not_chat")):
        for response in (
            await admin.patch("/api/admin/roles/member", json={"attrs": {"chat_agent": agent_id, "chat_agents": ["*"]}}),
            await admin.post("/api/admin/roles", json={"id": "teen", "label": "Teens", "attrs": {"chat_agent": agent_id, "chat_agents": ["*"]}}),
        ):
            assert response.status_code == 400, response.text
            assert (response.json()["code"], response.json()["field"]) == (code, "chat_agent")
            assert agent_id in response.json()["error"]
    roles = {r["id"]: r for r in (await admin.get("/api/admin/roles")).json()["roles"]}
    assert "teen" not in roles and roles["member"]["attrs"]["chat_agent"] == "assistant"
    assert (await member.post("/api/conversations", json={})).status_code == 201
    # A real chat agent is still taken.
    assert (await admin.patch("/api/admin/roles/member", json={"attrs": {"chat_agent": "companion", "chat_agents": ["*"]}})).status_code == 200

"""Shared folders and projects over HTTP against a real host: the admin's CRUD and its
validation, and the project permission table — owner, write-member, read-member and
non-member on every project route (a non-member always gets 404, never 403)."""

from __future__ import annotations

import asyncio

import pytest

from skald_host.core.folders import MEMBERSHIP_CHANGED
from tests.folders.support import join_project


def _changed(subscription) -> list[str]:
    return sorted(e.subject_id for e in subscription.drain() if e.kind == MEMBERSHIP_CHANGED)


async def test_admin_creates_renames_shares_and_deletes_a_shared_folder(skald):
    host = await skald.start()
    admin = await host.admin()
    ann = await host.create_member("ann")
    events = host.core.buses.system.subscribe()
    try:
        response = await admin.post("/api/admin/shared-folders", json={"slug": "recipes", "title": "Recipes"})
        assert response.status_code == 201, response.text
        folder = response.json()
        assert (folder["slug"], folder["title"], folder["agent_path"], folder["members"]) == ("recipes", "Recipes", "shared/recipes", [])
        on_disk = host.settings.data_dir / "shared" / "recipes"
        assert on_disk.is_dir()

        response = await admin.patch(f"/api/admin/shared-folders/{folder['id']}", json={"title": "Family recipes"})
        assert response.json()["title"] == "Family recipes"

        response = await admin.post(f"/api/admin/shared-folders/{folder['id']}/members", json={"username": "ann"})
        assert response.status_code == 201, response.text
        assert [(m["username"], m["can_write"]) for m in response.json()["members"]] == [("ann", False)]
        assert _changed(events) == [ann["id"]]

        response = await admin.patch(f"/api/admin/shared-folders/{folder['id']}/members/{ann['id']}", json={"can_write": True})
        assert response.json()["members"][0]["can_write"] is True
        assert _changed(events) == [ann["id"]]
        [access] = await host.core.folders.memberships(ann["id"])
        assert access.can_write

        response = await admin.delete(f"/api/admin/shared-folders/{folder['id']}/members/{ann['id']}")
        assert response.json()["members"] == []
        assert _changed(events) == [ann["id"]]
        assert await host.core.folders.memberships(ann["id"]) == []

        await admin.post(f"/api/admin/shared-folders/{folder['id']}/members", json={"username": "ann", "can_write": True})
        (on_disk / "menu.txt").write_text("soup")
        _changed(events)
        response = await admin.delete(f"/api/admin/shared-folders/{folder['id']}")
        assert response.json() == {"deleted": folder["id"], "content_moved_to_trash": True}
        assert _changed(events) == [ann["id"]]
        assert not on_disk.exists()
        [trashed] = (host.settings.data_dir / "trash").iterdir()
        assert (trashed / "menu.txt").read_text() == "soup"  # moved aside, not destroyed
        assert (await admin.get("/api/admin/shared-folders")).json() == {"folders": []}
        assert (await admin.get(f"/api/admin/shared-folders/{folder['id']}")).status_code == 404
    finally:
        events.close()


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"slug": "Upper"}, 400, "slug"),
        ({"slug": "-dash-first"}, 400, "slug"),
        ({"slug": "a" * 65}, 400, "slug"),
        ({"slug": "../etc"}, 400, "slug"),
        ({"slug": "with space"}, 400, "slug"),
        ({"slug": 7}, 400, "slug"),
        ({}, 400, "slug"),
        ({"slug": "ok", "title": "   "}, 400, "title"),
        ({"slug": "ok", "title": "x" * 201}, 400, "title"),
        ({"slug": "ok", "title": "line\nbreak"}, 400, "title"),
    ],
)
async def test_shared_folder_input_is_validated_with_the_field_named(skald, body, status, field):
    host = await skald.start()
    admin = await host.admin()
    response = await admin.post("/api/admin/shared-folders", json=body)
    assert response.status_code == status, response.text
    assert response.json()["field"] == field
    assert (await admin.get("/api/admin/shared-folders")).json() == {"folders": []}
    assert not (host.settings.data_dir / "shared").exists() or not any((host.settings.data_dir / "shared").iterdir())


async def test_shared_folder_conflicts_and_unknown_members_are_clear_errors(skald):
    host = await skald.start()
    admin = await host.admin()
    await host.create_member("ann")
    folder = (await admin.post("/api/admin/shared-folders", json={"slug": "docs"})).json()
    assert folder["title"] == "docs"
    response = await admin.post("/api/admin/shared-folders", json={"slug": "docs"})
    assert (response.status_code, response.json()["field"]) == (409, "slug")
    response = await admin.post(f"/api/admin/shared-folders/{folder['id']}/members", json={"username": "nobody"})
    assert (response.status_code, response.json()["field"]) == (400, "username")
    assert "nobody" in response.json()["error"]
    await admin.post(f"/api/admin/shared-folders/{folder['id']}/members", json={"username": "ann"})
    response = await admin.post(f"/api/admin/shared-folders/{folder['id']}/members", json={"username": "ann"})
    assert (response.status_code, response.json()["field"]) == (409, "username")
    response = await admin.patch(f"/api/admin/shared-folders/{folder['id']}/members/ffff", json={"can_write": True})
    assert response.status_code == 404
    response = await admin.patch(f"/api/admin/shared-folders/{folder['id']}", json={"slug": "renamed"})
    assert response.status_code == 400 and "slug" in response.json()["error"]  # the slug is immutable


async def test_members_cannot_touch_shared_folders(skald):
    host = await skald.start()
    admin = await host.admin()
    ann = await host.member("ann")
    folder = (await admin.post("/api/admin/shared-folders", json={"slug": "docs"})).json()
    calls = [
        ("GET", "/api/admin/shared-folders", None),
        ("POST", "/api/admin/shared-folders", {"slug": "mine"}),
        ("GET", f"/api/admin/shared-folders/{folder['id']}", None),
        ("PATCH", f"/api/admin/shared-folders/{folder['id']}", {"title": "x"}),
        ("POST", f"/api/admin/shared-folders/{folder['id']}/members", {"username": "ann", "can_write": True}),
        ("PATCH", f"/api/admin/shared-folders/{folder['id']}/members/{ann.member['id']}", {"can_write": True}),
        ("DELETE", f"/api/admin/shared-folders/{folder['id']}/members/{ann.member['id']}", None),
        ("DELETE", f"/api/admin/shared-folders/{folder['id']}", None),
    ]
    for method, path, body in calls:
        response = await ann.request(method, path, json=body)
        assert (response.status_code, response.json()) == (403, {"error": "forbidden", "code": "forbidden"}), (method, path)
    assert [f["id"] for f in (await admin.get("/api/admin/shared-folders")).json()["folders"]] == [folder["id"]]
    assert await host.core.folders.memberships(ann.member["id"]) == []


# -- projects --------------------------------------------------------------------------------


async def _project_with_four_roles(host):
    """owner, a write-member, a read-member and an outsider around one project."""
    owner, writer, reader, outsider = [await host.member(n) for n in ("olga", "wim", "rita", "otto")]
    response = await owner.post("/api/projects", json={"slug": "garden", "title": "Garden", "description": "Raised beds"})
    assert response.status_code == 201, response.text
    project = response.json()
    for member, can_write in ((writer, True), (reader, False)):
        await join_project(owner, member, project["id"], can_write=can_write)
    return project, owner, writer, reader, outsider


async def test_project_permissions_for_owner_write_member_read_member_and_outsider(skald):
    host = await skald.start()
    await host.admin()
    project, owner, writer, reader, outsider = await _project_with_four_roles(host)
    pid = project["id"]
    assert (project["agent_path"], project["is_owner"], project["can_write"]) == ("projects/olga/garden", True, True)

    # listing shows the caller's projects only
    for client, expected in ((owner, [pid]), (writer, [pid]), (reader, [pid]), (outsider, [])):
        assert [p["id"] for p in (await client.get("/api/projects")).json()["projects"]] == expected

    # the outsider: 404 on every route, the same answer as for an id that does not exist
    routes = [
        ("GET", f"/api/projects/{pid}", None),
        ("PATCH", f"/api/projects/{pid}", {"title": "mine now"}),
        ("DELETE", f"/api/projects/{pid}", None),
        ("POST", f"/api/projects/{pid}/members", {"username": "otto", "can_write": True}),
        ("PATCH", f"/api/projects/{pid}/members/{reader.member['id']}", {"can_write": True}),
        ("DELETE", f"/api/projects/{pid}/members/{reader.member['id']}", None),
        ("DELETE", f"/api/projects/{pid}/invitations/{'1' * 32}", None),
        ("POST", f"/api/projects/{pid}/chat", None),
        ("GET", f"/api/projects/{pid}/files", None),
        ("GET", f"/api/projects/{pid}/files/content?path=a.txt", None),
        ("POST", f"/api/projects/{pid}/files/folder", {"path": "x"}),
        ("POST", f"/api/projects/{pid}/files/rename", {"from": "a", "to": "b"}),
        ("POST", f"/api/projects/{pid}/files/delete", {"path": "a.txt"}),
    ]
    for method, path, body in routes:
        response = await outsider.request(method, path, json=body)
        control = await outsider.request(method, path.replace(pid, "0" * 32), json=body)
        assert response.status_code == 404, (method, path, response.status_code)
        assert response.json() == control.json(), (method, path)
    response = await outsider.post(f"/api/projects/{pid}/files/upload/x.txt", content=b"x")
    assert response.status_code == 404

    # the read-member: reads, and 403 on every change
    assert (await reader.get(f"/api/projects/{pid}")).json()["can_write"] is False
    for method, path, body in routes:
        if method == "GET" or path.endswith("/chat"):
            continue
        if path.endswith(f"/members/{reader.member['id']}") and method == "DELETE":
            continue  # leaving is allowed: checked below
        response = await reader.request(method, path, json=body)
        assert response.status_code == 403, (method, path, response.status_code, response.text)
    response = await reader.post(f"/api/projects/{pid}/files/upload/x.txt", content=b"x")
    assert response.status_code == 403
    response = await reader.patch(f"/api/projects/{pid}/members/{writer.member['id']}", json={"can_write": False})
    assert response.status_code == 403

    # the write-member manages members and metadata, but cannot delete or demote the owner
    response = await writer.patch(f"/api/projects/{pid}", json={"description": "Beds and a pond"})
    assert response.json()["description"] == "Beds and a pond"
    response = await writer.post(f"/api/projects/{pid}/members", json={"username": "otto"})
    assert response.status_code == 201
    await join_project(writer, outsider, pid)
    response = await writer.patch(f"/api/projects/{pid}/members/{outsider.member['id']}", json={"can_write": True})
    assert [m["can_write"] for m in response.json()["members"] if m["username"] == "otto"] == [True]
    response = await writer.delete(f"/api/projects/{pid}/members/{outsider.member['id']}")
    assert "otto" not in [m["username"] for m in response.json()["members"]]
    response = await writer.patch(f"/api/projects/{pid}/members/{owner.member['id']}", json={"can_write": False})
    assert (response.status_code, response.json()["field"]) == (400, "can_write")
    response = await writer.delete(f"/api/projects/{pid}/members/{owner.member['id']}")
    assert response.status_code == 400
    response = await writer.delete(f"/api/projects/{pid}")
    assert (response.status_code, response.json()["error"]) == (403, "only the project's owner can delete it")

    # a read-member may leave
    response = await reader.delete(f"/api/projects/{pid}/members/{reader.member['id']}")
    assert response.json() == {"left": pid}
    assert (await reader.get(f"/api/projects/{pid}")).status_code == 404

    # only the owner deletes; the folder goes to the trash
    folder = host.settings.data_dir / "projects" / owner.member["id"] / "garden"
    assert folder.is_dir()
    response = await owner.delete(f"/api/projects/{pid}")
    assert response.status_code == 200
    assert not folder.exists()
    for client in (owner, writer):
        assert (await client.get(f"/api/projects/{pid}")).status_code == 404


async def test_project_membership_changes_announce_each_affected_member(skald):
    host = await skald.start()
    await host.admin()
    events = host.core.buses.system.subscribe()
    try:
        project, owner, writer, reader, outsider = await _project_with_four_roles(host)
        ids = {c.member["username"]: c.member["id"] for c in (owner, writer, reader, outsider)}
        assert _changed(events) == sorted([ids["olga"], ids["wim"], ids["rita"]])
        pid = project["id"]
        await owner.patch(f"/api/projects/{pid}/members/{ids['rita']}", json={"can_write": True})
        assert _changed(events) == [ids["rita"]]
        await owner.patch(f"/api/projects/{pid}", json={"title": "Garden 2"})
        assert _changed(events) == []  # metadata is no membership change
        await owner.delete(f"/api/projects/{pid}/members/{ids['wim']}")
        assert _changed(events) == [ids["wim"]]
        await owner.delete(f"/api/projects/{pid}")
        assert _changed(events) == sorted([ids["olga"], ids["rita"]])
    finally:
        events.close()


async def test_project_creation_is_validated_and_needs_the_capability(skald):
    host = await skald.start()
    admin = await host.admin()
    ann = await host.member("ann")
    assert (await ann.post("/api/projects", json={"slug": "a"})).status_code == 201
    response = await ann.post("/api/projects", json={"slug": "a"})
    assert (response.status_code, response.json()["field"]) == (409, "slug")
    response = await ann.post("/api/projects", json={"slug": "Nope!"})
    assert (response.status_code, response.json()["field"]) == (400, "slug")
    response = await ann.post("/api/projects", json={"slug": "b", "description": "x" * 4001})
    assert (response.status_code, response.json()["field"]) == (400, "description")
    response = await ann.post("/api/projects", json={"slug": "b", "colour": "red"})
    assert response.status_code == 400 and "colour" in response.json()["error"]
    # another member may use the same slug: slugs are unique per owner
    bob = await host.member("bob")
    assert (await bob.post("/api/projects", json={"slug": "a"})).status_code == 201

    await host.create_member("kid", role="restricted")  # the restricted preset lacks projects.create
    kid = await host.member("kid")
    response = await kid.post("/api/projects", json={"slug": "mine"})
    assert response.status_code == 403
    assert (await kid.get("/api/projects")).json() == {"projects": [], "can_create": False, "invitations": []}
    assert (await ann.get("/api/projects")).json()["can_create"] is True
    assert admin  # the admin set the instance up


async def test_deleting_an_owner_trashes_their_projects_and_tells_the_members(skald):
    host = await skald.start()
    admin = await host.admin()
    olga, rita = await host.member("olga"), await host.member("rita")
    project = (await olga.post("/api/projects", json={"slug": "garden"})).json()
    await join_project(olga, rita, project["id"])
    folder = host.settings.data_dir / "projects" / olga.member["id"] / "garden"
    (folder / "plan.txt").write_text("beds")
    events = host.core.buses.system.subscribe()
    try:
        assert (await admin.delete(f"/api/admin/members/{olga.member['id']}")).status_code == 200
        for _ in range(200):
            if rita.member["id"] in [e.subject_id for e in events.drain() if e.kind == MEMBERSHIP_CHANGED]:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("rita was not told that her memberships changed")
    finally:
        events.close()
    assert await host.core.folders.memberships(rita.member["id"]) == []
    assert (await rita.get(f"/api/projects/{project['id']}")).status_code == 404
    assert not (host.settings.data_dir / "projects" / olga.member["id"]).exists()
    [trashed] = (host.settings.data_dir / "trash").iterdir()
    assert (trashed / "garden" / "plan.txt").read_text() == "beds"


async def test_a_member_named_as_the_lists_show_them_with_an_at_sign_is_found(skald):
    host = await skald.start()
    await host.admin()
    carl, berta = await host.member("carl"), await host.member("berta")
    pid = (await carl.post("/api/projects", json={"slug": "shed", "title": "Shed"})).json()["id"]
    response = await carl.post(f"/api/projects/{pid}/members", json={"username": " @berta", "can_write": False})
    assert response.status_code == 201, response.text
    assert [i["username"] for i in response.json()["invitations"]] == ["berta"]
    assert [i["project"]["id"] for i in (await berta.get("/api/projects")).json()["invitations"]] == [pid]
    # No account can be called "" : refused for its form (which says nothing of who exists).
    response = await carl.post(f"/api/projects/{pid}/members", json={"username": "@", "can_write": False})
    assert (response.status_code, response.json()["code"], response.json()["field"]) == (400, "field_required", "username")


async def test_a_project_that_is_not_there_is_refused_with_a_code_the_page_translates(skald):
    host = await skald.start()
    await host.admin()
    carl = await host.member("carl")
    response = await carl.get(f"/api/projects/{'0' * 32}")
    assert (response.status_code, response.json()["code"]) == (404, "no_such_project")
    assert host.core.strings.lookup("core.error.no_such_project", "de").startswith("Dieses Projekt gibt es nicht")


async def test_a_blank_or_unreadable_title_is_refused_with_values_for_every_placeholder(skald):
    """A title of two spaces read "{field} must not be empty": the refusal names its
    field, and its values fill every placeholder of its English and German strings."""
    import re

    from skald_hookspecs import I18nBundle
    from skald_host.builtins.strings import LOCALES

    host = await skald.start()
    admin = await host.admin()
    ann = await host.member("ann")
    strings = I18nBundle.from_folder("core", LOCALES).strings
    project = (await ann.post("/api/projects", json={"slug": "garden", "title": "Garden"})).json()
    refusals = [
        await ann.post("/api/projects", json={"slug": "plans", "title": "  "}),
        await ann.patch(f"/api/projects/{project['id']}", json={"title": "  "}),
        await ann.patch(f"/api/projects/{project['id']}", json={"description": "bell \x07"}),
        await admin.post("/api/admin/shared-folders", json={"slug": "docs", "title": "  "}),
        await admin.post("/api/admin/shared-folders", json={"slug": "docs", "title": "tab\x1b"}),
    ]
    for response in refusals:
        body = response.json()
        assert response.status_code == 400 and body["code"] in ("field_required", "control_characters"), body
        assert body["field"] in ("title", "description") and body["values"]["field"] == body["field"], body
        for locale in ("en", "de"):
            string = strings[locale][f"error.{body['code']}"]
            assert set(re.findall(r"\{(\w+)\}", string)) <= set(body["values"]), (locale, string, body)
    assert [p["slug"] for p in (await ann.get("/api/projects")).json()["projects"]] == ["garden"]
    assert (await ann.get(f"/api/projects/{project['id']}")).json()["title"] == "Garden"

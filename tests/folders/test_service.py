"""The folder service as the sandbox and file namespace use it: ``memberships`` read
fresh, and ``folders.membership_changed`` announced once per affected member."""

from __future__ import annotations

import pytest

from skald_host.core.folders import (
    MEMBERSHIP_CHANGED,
    FolderError,
    FolderForbidden,
    FolderNotFound,
)


def _changed(subscription) -> list[str]:
    return sorted(e.subject_id for e in subscription.drain() if e.kind == MEMBERSHIP_CHANGED)


async def test_memberships_follow_every_change_and_each_is_announced(skald):
    host = await skald.start()
    await host.admin()
    ann = (await host.create_member("ann"))["id"]
    bob = (await host.create_member("bob"))["id"]
    folders = host.core.folders
    events = host.core.buses.system.subscribe()
    try:
        shared = await folders.create_shared("family-photos", "Photos")
        assert (folders.data_dir / "shared" / "family-photos").is_dir()
        assert _changed(events) == []
        await folders.add_shared_member(shared.id, "ann", can_write=False)
        assert _changed(events) == [ann]
        [access] = await folders.memberships(ann)
        assert (access.kind, access.agent_prefix, access.can_write, access.title, access.id) == (
            "shared", "shared/family-photos", False, "Photos", shared.id,
        )
        assert access.host_path == host.settings.data_dir / "shared" / "family-photos"

        await folders.set_shared_member_write(shared.id, ann, True)
        assert _changed(events) == [ann]
        assert (await folders.memberships(ann))[0].can_write is True
        await folders.set_shared_member_write(shared.id, ann, True)  # no change, no event
        assert _changed(events) == []

        project = await folders.create_project(bob, "garden", "Garden", "Raised beds")
        assert _changed(events) == [bob]
        await folders.invite_to_project(project.id, bob, "ann")
        assert _changed(events) == []  # an invitation is no membership
        assert [a.kind for a in await folders.memberships(ann)] == ["shared"]
        [invitation] = await folders.invitations_for(ann)
        await folders.accept_invitation(invitation.id, ann)
        assert _changed(events) == [ann]
        by_kind = {a.kind: a for a in await folders.memberships(ann)}
        assert by_kind["project"].agent_prefix == "projects/bob/garden"
        assert by_kind["project"].host_path == host.settings.data_dir / "projects" / bob / "garden"
        assert by_kind["project"].can_write is False

        with pytest.raises(FolderForbidden):
            await folders.delete_project(project.id, ann)
        await folders.delete_project(project.id, bob)
        assert _changed(events) == sorted([ann, bob])
        assert [a.kind for a in await folders.memberships(ann)] == ["shared"]
        trashed = list((host.settings.data_dir / "trash").iterdir())
        assert [p.name.split("-", 1)[1] for p in trashed] == [f"project-garden-{project.id[:8]}"]

        await folders.delete_shared(shared.id)
        assert _changed(events) == [ann]
        assert await folders.memberships(ann) == []
        with pytest.raises(FolderNotFound):
            await folders.project_access(ann, project.id)
        with pytest.raises(FolderError):
            await folders.create_shared("Bad Slug")
    finally:
        events.close()


async def test_an_owner_named_dot_dot_does_not_climb_out_of_the_projects_path(skald):
    host = await skald.start()
    admin = await host.admin()
    refused = await admin.post("/api/admin/members", json={"username": "..", "password": "a long enough password 1"})
    assert refused.status_code == 400 and "besides dots" in refused.json()["error"]
    # A name of only dots from before that rule: the project path uses the owner's id.
    owner = (await host.create_member("dots"))["id"]
    await host.core.registry.transaction(lambda c: c.execute("UPDATE users SET username = '..' WHERE id = ?", (owner,)))
    project = await host.core.folders.create_project(owner, "plans")
    [access] = await host.core.folders.memberships(owner)
    assert access.agent_prefix == project.agent_path == f"projects/{owner}/plans"

"""An admin reset that loses an encrypted member's data takes away everything the old
password's holder could reach, not only the database: the home (uploads, the agent's
files) goes to the quarantine beside the old database, and the account's shared
folders and projects end. The admin chooses the new password and could sign in with
it: nothing of the member's, or of anyone who shared with them, may be shown then.
A reset without data loss (a member without encryption) keeps everything."""

from __future__ import annotations

import errno
import os
from urllib.parse import quote

from skald_hookspecs.types import ConfigField
from skald_host.core.files.service import FileService
from skald_host.core.identity.users import UserManager
from skald_host.core.storage.errors import DiskFull
from skald_host.testing.host import MEMBER_PASSWORD

from tests.catalog.support import Routed
from tests.chat.support import new_conversation
from tests.folders.support import join_project

NEW = "a fresh passphrase after the reset 9"


async def _started(skald, *usernames: str):
    """A host, its admin, and a signed-in client of each of ``usernames`` (encrypted
    members: a reset loses their data)."""
    host = await skald.start()
    return host, await host.admin(), [await host.member(username) for username in usernames]


async def _signed_in(host, username: str, password: str = NEW):
    client = host.client()
    assert (await client.login(username, password)).status_code == 200
    return client


async def _upload(client, name: str, body: bytes) -> str:
    """``body`` uploaded into a new conversation of the client's: its path in their home."""
    conversation_id = await new_conversation(client)
    response = await client.post(
        f"/api/conversations/{conversation_id}/uploads",
        content=body,
        headers={"X-Filename": quote(name), "Content-Type": "text/plain"},
    )
    assert response.status_code == 201, response.text
    return response.json()["path"]


async def _reset(admin, member_id: str):
    return await admin.post(
        f"/api/admin/members/{member_id}/reset-password", json={"new_password": NEW, "confirm_data_loss": True}
    )


async def _starts_over(host, admin, member):
    """The admin resets ``member``'s password, confirming the data loss; the client they
    then sign in with, with the new password."""
    assert (await _reset(admin, member.member["id"])).status_code == 200
    return await _signed_in(host, member.member["username"])


async def _project(owner, slug: str, file_body: bytes, *, share_with=None) -> str:
    response = await owner.post("/api/projects", json={"slug": slug, "title": slug})
    assert response.status_code == 201, response.text
    pid = response.json()["id"]
    assert (await owner.post(f"/api/projects/{pid}/files/upload/secret.txt", content=file_body)).status_code == 201
    if share_with is not None:  # a signed-in client, who accepts the invitation
        await join_project(owner, share_with, pid, can_write=True)
    return pid


def _quarantine(host, member_id: str, what: str) -> list:
    return sorted((host.settings.data_dir / "database" / "quarantine").glob(f"{member_id}.*.admin-reset.{what}"))


async def test_a_data_losing_reset_sets_the_home_aside_beside_the_old_database(skald):
    host, admin, [bob] = await _started(skald, "bob")
    bob_id = bob.member["id"]
    upload = await _upload(bob, "diary.txt", b"dear diary")
    (host.core.files.home(bob_id) / "agent-notes.txt").write_text("written by the agent")
    assert (await bob.get(f"/api/file?path={quote(upload)}")).status_code == 200

    response = await _reset(admin, bob_id)
    assert response.status_code == 200, response.text
    assert response.json()["data_lost"] is True

    bob = await _signed_in(host, "bob")
    assert (await bob.get(f"/api/file?path={quote(upload)}")).status_code == 404
    assert (await bob.get("/api/file?path=agent-notes.txt")).status_code == 404
    home = host.core.files.home(bob_id)
    assert list(home.iterdir()) == [] and home.stat().st_mode & 0o777 == 0o700
    if os.geteuid() == 0:  # fresh, and the member's sandbox uid's, as a new member's home
        assert home.stat().st_uid == host.core.files.uid_for(bob_id)

    [database] = _quarantine(host, bob_id, "db")
    [old_home] = _quarantine(host, bob_id, "home")
    assert old_home.name == database.name.removesuffix(".db") + ".home"  # one reset, one name
    assert (old_home / upload).read_bytes() == b"dear diary"  # kept for the operator, out of reach
    assert (old_home / "agent-notes.txt").read_text() == "written by the agent"


async def test_a_data_losing_reset_ends_the_accounts_shared_folders_and_others_projects(skald):
    host, admin, [alice, bob] = await _started(skald, "alice", "bob")
    bob_id = bob.member["id"]
    pid = await _project(alice, "garden", b"alice's secret", share_with=bob)
    folder = (await admin.post("/api/admin/shared-folders", json={"slug": "recipes", "title": "Recipes"})).json()
    assert (await admin.post(f"/api/admin/shared-folders/{folder['id']}/members", json={"username": "bob"})).status_code in (200, 201)
    (host.settings.data_dir / "shared" / "recipes" / "soup.txt").write_text("grandma's soup")
    assert (await bob.get(f"/api/projects/{pid}/files/content?path=secret.txt")).status_code == 200
    assert (await bob.get("/api/file?path=shared/recipes/soup.txt")).status_code == 200

    bob = await _starts_over(host, admin, bob)
    # He is told why his account is empty (the start page says it), not left to guess.
    assert (await bob.get("/api/auth/session")).json()["member"]["data_reset_at"] is not None
    assert (await alice.get("/api/auth/session")).json()["member"]["data_reset_at"] is None
    assert (await bob.get("/api/projects")).json()["projects"] == []
    assert (await bob.get(f"/api/projects/{pid}")).status_code == 404
    assert (await bob.get(f"/api/projects/{pid}/files/content?path=secret.txt")).status_code in (403, 404)
    assert (await bob.get("/api/file?path=shared/recipes/soup.txt")).status_code == 404
    assert await host.core.folders.memberships(bob_id) == []
    # Alice keeps her project; bob can be invited again.
    assert (await alice.get(f"/api/projects/{pid}/files/content?path=secret.txt")).status_code == 200
    members = [m["username"] for m in (await alice.get(f"/api/projects/{pid}")).json()["members"]]
    assert members == ["alice"]
    response = await alice.post(f"/api/projects/{pid}/members", json={"username": "bob"})
    assert response.status_code == 201, response.text


async def test_a_data_losing_reset_leaves_the_accounts_own_projects_to_their_other_members(skald):
    host, admin, [alice, bob] = await _started(skald, "alice", "bob")
    bob_id = bob.member["id"]
    shared = await _project(bob, "band", b"our setlist", share_with=alice)
    private = await _project(bob, "letters", b"bob's letters")

    bob = await _starts_over(host, admin, bob)
    assert (await bob.get("/api/projects")).json()["projects"] == []
    for pid in (shared, private):
        assert (await bob.get(f"/api/projects/{pid}/files/content?path=secret.txt")).status_code in (403, 404)
    # What alice shares with the account stays hers to share: she keeps the project.
    assert (await alice.get(f"/api/projects/{shared}/files/content?path=secret.txt")).status_code == 200
    # The project only bob was in is gone from the registry; its folder is with the home.
    [old_projects] = _quarantine(host, bob_id, "projects")
    assert (old_projects / "letters" / "secret.txt").read_bytes() == b"bob's letters"
    assert not (host.settings.data_dir / "projects" / bob_id / "letters").exists()
    # The new account starts over: the old slug is free, in a new, empty folder.
    response = await bob.post("/api/projects", json={"slug": "letters", "title": "Letters"})
    assert response.status_code == 201, response.text
    assert (await bob.get(f"/api/projects/{response.json()['id']}/files")).json()["entries"] == []
    # The shared one still holds its name: said as such, not "you already have" a
    # project he cannot see (an admin probe met the bare conflict).
    taken = await bob.post("/api/projects", json={"slug": "band", "title": "Band"})
    assert (taken.status_code, taken.json()["code"], taken.json()["field"]) == (409, "project_exists_withdrawn", "slug")
    assert "ask one of them to invite you back" in taken.json()["error"]


async def test_a_project_its_owner_lost_to_a_reset_can_be_deleted_by_its_writers_and_goes_with_its_last_member(skald):
    """After a reset the owner is out of the project; its other members kept it, but only
    the owner could delete it, and the last one could leave it: nobody was in it any
    more, its files stayed on disk for ever and its name stayed taken with a message
    naming "its other members" (two-member probe)."""
    host, admin, [alice, carl, bob] = await _started(skald, "alice", "carl", "bob")
    bob_id = bob.member["id"]
    band = await _project(bob, "band", b"our setlist", share_with=alice)
    await join_project(bob, carl, band, can_write=False)
    choir = await _project(bob, "choir", b"the choir's notes", share_with=alice)
    bob = await _starts_over(host, admin, bob)

    # Ownerless: a member who writes may delete it (the API says so), a reader may not.
    seen = (await alice.get(f"/api/projects/{band}")).json()
    assert (seen["is_owner"], seen["can_delete"]) == (False, True)
    assert (await carl.get(f"/api/projects/{band}")).json()["can_delete"] is False
    refused = await carl.delete(f"/api/projects/{band}")
    assert (refused.status_code, refused.json()["code"]) == (403, "owner_only")
    assert (await alice.delete(f"/api/projects/{band}")).status_code == 200
    assert (await carl.get(f"/api/projects/{band}")).status_code == 404
    assert not (host.settings.data_dir / "projects" / bob_id / "band").exists()

    # The last member leaving deletes it, its folder with it: the name is free again.
    folder = host.settings.data_dir / "projects" / bob_id / "choir"
    assert folder.exists()
    assert (await alice.delete(f"/api/projects/{choir}/members/{alice.member['id']}")).status_code == 200
    assert not folder.exists()
    assert await host.core.registry.run(lambda c: c.execute("SELECT count(*) FROM projects WHERE id = ?", (choir,)).fetchone()[0]) == 0
    again = await bob.post("/api/projects", json={"slug": "choir", "title": "Choir"})
    assert again.status_code == 201, again.text
    assert (await bob.get(f"/api/projects/{again.json()['id']}/files")).json()["entries"] == []
    # The owner themself, while in it, still cannot be the last to leave.
    refused = await bob.delete(f"/api/projects/{again.json()['id']}/members/{bob_id}")
    assert (refused.status_code, refused.json()["code"]) == (400, "owner_stays")


async def test_a_project_left_with_only_readers_after_its_owners_reset_lets_its_longest_member_write(skald):
    """Nobody could manage it any more (rename, members, delete): the member who joined
    first may write it now; a project with a writer left is not changed."""
    host, admin, [alice, carl, dora, bob] = await _started(skald, "alice", "carl", "dora", "bob")
    band = await _project(bob, "band", b"our setlist")
    await join_project(bob, carl, band, can_write=False)
    await join_project(bob, alice, band, can_write=False)
    choir = await _project(bob, "choir", b"the choir's notes", share_with=dora)
    await join_project(bob, alice, choir, can_write=False)
    await _starts_over(host, admin, bob)

    writers = {m["username"]: m["can_write"] for m in (await carl.get(f"/api/projects/{band}")).json()["members"]}
    assert writers == {"carl": True, "alice": False}
    assert (await carl.delete(f"/api/projects/{band}/members/{alice.member['id']}")).status_code == 200
    writers = {m["username"]: m["can_write"] for m in (await dora.get(f"/api/projects/{choir}")).json()["members"]}
    assert writers == {"dora": True, "alice": False}


async def test_a_memberless_project_an_earlier_version_left_gives_its_name_back_and_shows_nothing_of_it(skald):
    """Before the fix the last member could leave an ownerless project: such a row, with
    nobody in it, may be in a data dir. Its owner's new project of that name starts
    empty; the old folder goes to the trash first."""
    host, admin, [alice, bob] = await _started(skald, "alice", "bob")
    bob_id = bob.member["id"]
    old = await _project(bob, "band", b"our setlist", share_with=alice)
    assert (await _reset(admin, bob_id)).status_code == 200
    # As the earlier version left it: the last member's row deleted, nothing else.
    await host.core.registry.run(lambda c: c.execute("DELETE FROM project_members WHERE project_id = ?", (old,)))
    bob = await _signed_in(host, "bob")
    response = await bob.post("/api/projects", json={"slug": "band", "title": "Band"})
    assert response.status_code == 201, response.text
    assert (await bob.get(f"/api/projects/{response.json()['id']}/files")).json()["entries"] == []
    trashed = list((host.settings.data_dir / "trash").glob("*-project-band-*"))
    assert [(t / "secret.txt").read_bytes() for t in trashed] == [b"our setlist"]


async def test_only_a_data_losing_reset_takes_the_files_one_without_data_loss_keeps_them(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    clients = {"carl": await host.member("carl", encrypted=False), "dora": await host.member("dora")}
    pid = await _project(alice, "garden", b"alice's plan", share_with=clients["carl"])
    await join_project(alice, clients["dora"], pid)
    uploads = {}
    for name, client in clients.items():
        uploads[name] = await _upload(client, "list.txt", f"{name}'s list".encode())
        response = await _reset(admin, client.member["id"])
        assert response.status_code == 200, response.text
        assert response.json()["data_lost"] is (name == "dora")

    seen = {}
    for name in clients:
        client = await _signed_in(host, name)
        upload = await client.get(f"/api/file?path={quote(uploads[name])}")
        projects = [p["id"] for p in (await client.get("/api/projects")).json()["projects"]]
        content = await client.get(f"/api/projects/{pid}/files/content?path=secret.txt")
        seen[name] = (upload.status_code, upload.content if upload.status_code == 200 else None, projects, content.status_code)
    assert seen["carl"] == (200, b"carl's list", [pid], 200)  # not encrypted: nothing was lost
    assert seen["dora"] == (404, None, [], 404)
    reset_at = {m["username"]: m["data_reset_at"] for m in (await admin.get("/api/admin/members")).json()["members"]}
    assert reset_at["carl"] is None and reset_at["dora"] is not None  # only a reset that lost data is said
    assert _quarantine(host, clients["carl"].member["id"], "home") == []
    assert len(_quarantine(host, clients["dora"].member["id"], "home")) == 1


async def test_a_data_losing_reset_clears_the_accounts_plugin_settings_and_keeps_its_supervisors(skald):
    """Per-member plugin settings were chosen by the old password's holder (a webhook
    that receives the member's notes, say): the account starting over must not send
    there. A password change, or a reset without data loss, keeps them; supervision
    is the admin's and stays either way."""
    hook = Routed("hook", user_config_schema=(ConfigField("webhook_url", "string"),))
    host = await skald.start(plugins=[hook], enable=["hook"])
    admin = await host.admin()
    alice = await host.member("alice")
    clients = {"carl": await host.member("carl", encrypted=False), "dora": await host.member("dora"), "eve": await host.member("eve")}
    for name, client in clients.items():
        saved = await client.put("/api/plugins/hook/my-config", json={"config": {"webhook_url": f"https://{name}.example/in"}})
        assert saved.status_code == 200, saved.text
        supervised = await admin.put(f"/api/admin/members/{client.member['id']}/supervisors", json={"supervisors": [alice.member["id"]]})
        assert supervised.status_code == 200, supervised.text

    for name in ("carl", "dora"):
        assert (await _reset(admin, clients[name].member["id"])).json()["data_lost"] is (name == "dora")
    changed = await clients["eve"].post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": NEW})
    assert changed.status_code == 200, changed.text

    seen = {}
    for name in clients:
        client = await _signed_in(host, name)
        mine = {p["id"]: p for p in (await client.get("/api/plugins/mine")).json()["plugins"]}["hook"]
        supervisors = (await admin.get(f"/api/admin/members/{clients[name].member['id']}/supervisors")).json()["supervisors"]
        seen[name] = (mine["user_config"], mine["configured"], supervisors)
    assert seen["dora"] == ({"webhook_url": None}, False, [alice.member["id"]])
    assert await host.core.host_api("hook").get_user_config(clients["dora"].member["id"]) == {}
    for name in ("carl", "eve"):
        assert seen[name] == ({"webhook_url": f"https://{name}.example/in"}, True, [alice.member["id"]]), name


async def test_a_reset_whose_home_cannot_be_set_aside_says_so_and_keeps_the_files_out_of_reach(skald, monkeypatch):
    host, admin, [bob] = await _started(skald, "bob")
    bob_id = bob.member["id"]
    upload = await _upload(bob, "diary.txt", b"dear diary")
    original = FileService.set_aside_home

    def failing(self, member_id, stem):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(FileService, "set_aside_home", failing)
    response = await _reset(admin, bob_id)
    assert response.status_code >= 400
    assert response.json()["code"] == "reset_incomplete"
    assert "home" in response.json()["error"]

    # Until the home is set aside the new password opens nothing (and the old one is gone).
    for password in (NEW, "member password for tests"):
        client = host.client()
        assert (await client.login("bob", password)).status_code in (401, 409)
        assert (await client.get(f"/api/file?path={quote(upload)}")).status_code == 401

    # Once the disk lets it, the member's next sign-in completes the reset.
    monkeypatch.setattr(FileService, "set_aside_home", original)
    bob = await _signed_in(host, "bob")
    assert (await bob.get(f"/api/file?path={quote(upload)}")).status_code == 404
    [old_home] = _quarantine(host, bob_id, "home")
    assert (old_home / upload).read_bytes() == b"dear diary"


async def test_a_reset_refuses_before_changing_anything_when_the_home_is_on_another_disk(skald, monkeypatch):
    host, admin, [bob] = await _started(skald, "bob")
    bob_id = bob.member["id"]
    upload = await _upload(bob, "diary.txt", b"dear diary")
    home = host.core.files.home(bob_id)
    real_stat = os.stat

    def other_disk(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if os.fspath(path) == os.fspath(home):
            values = list(result)
            values[2] = result.st_dev + 1  # st_dev
            return os.stat_result(values)
        return result

    monkeypatch.setattr(os, "stat", other_disk)
    response = await _reset(admin, bob_id)
    monkeypatch.setattr(os, "stat", real_stat)
    assert response.status_code == 400
    assert response.json()["code"] == "reset_set_aside_impossible"
    # Nothing changed: the old password still opens the data and the files.
    bob = await _signed_in(host, "bob", "member password for tests")
    assert (await bob.get(f"/api/file?path={quote(upload)}")).content == b"dear diary"
    assert _quarantine(host, bob_id, "db") == [] and _quarantine(host, bob_id, "home") == []


async def test_a_reset_refuses_with_a_reason_when_the_quarantine_folder_cannot_be_made(skald):
    """A plain file where the quarantine folder goes (an operator's mistake) once made the
    reset a 500; it is a refusal that names the folder, and nothing changes."""
    host, admin, [bob] = await _started(skald, "bob")
    bob_id = bob.member["id"]
    upload = await _upload(bob, "diary.txt", b"dear diary")
    quarantine = host.settings.data_dir / "database" / "quarantine"
    if quarantine.is_dir():
        quarantine.rmdir()
    quarantine.write_text("not a folder")
    response = await _reset(admin, bob_id)
    assert response.status_code == 400
    assert response.json()["code"] == "quarantine_unavailable"
    assert "database/quarantine" in response.json()["error"]
    bob = await _signed_in(host, "bob", "member password for tests")
    assert (await bob.get(f"/api/file?path={quote(upload)}")).content == b"dear diary"


async def test_a_reset_the_full_disk_refuses_while_preparing_leaves_the_member_signed_in(skald, monkeypatch):
    """The new file cannot be made (the disk is full): the reset answers 507 and costs
    the member nothing — the session they had still reaches their files, and their
    unchanged password still signs them in."""
    host, admin, [bob] = await _started(skald, "bob")
    bob_id = bob.member["id"]
    upload = await _upload(bob, "diary.txt", b"dear diary")
    original = UserManager._open_member_file

    async def full(self, member_id, path, dek, *args, create=False, **kwargs):
        if create:
            raise DiskFull("the disk is full: (test) the new database could not be written")
        return await original(self, member_id, path, dek, *args, create=create, **kwargs)

    monkeypatch.setattr(UserManager, "_open_member_file", full)
    response = await _reset(admin, bob_id)
    monkeypatch.setattr(UserManager, "_open_member_file", original)
    assert response.status_code == 507, response.text
    assert response.json()["code"] == "disk_full"
    assert (await bob.get(f"/api/file?path={quote(upload)}")).content == b"dear diary"  # still signed in
    assert (await bob.get("/api/conversations")).status_code == 200
    assert (await host.client().login("bob", NEW)).status_code == 401
    again = await _signed_in(host, "bob", "member password for tests")
    assert (await again.get(f"/api/file?path={quote(upload)}")).content == b"dear diary"
    assert _quarantine(host, bob_id, "db") == []
    assert not host.core.users.reset_path(bob_id).exists()


async def test_a_reset_that_loses_the_race_with_the_members_own_password_change_signs_no_one_out(skald, monkeypatch):
    """The member changes her password while the admin's reset is being prepared (after
    it read her credentials, before it signs her out): the reset answers 400 try_again
    and changes nothing — the session her own change gave her still works, and her new
    password signs her in (a crash probe found her signed out by the reset that failed)."""
    host, admin, [bob] = await _started(skald, "bob")
    bob_id = bob.member["id"]
    upload = await _upload(bob, "diary.txt", b"dear diary")
    own = "bob's own new passphrase 7"
    kdf = host.core.users.kdf
    original = kdf.seal_new
    changed = []

    async def member_changes_first(*args, **kwargs):
        # The reset has read the credentials it will replace; the member's change lands now.
        response = await bob.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": own})
        changed.append(response.status_code)
        return await original(*args, **kwargs)

    monkeypatch.setattr(kdf, "seal_new", member_changes_first)
    response = await _reset(admin, bob_id)
    monkeypatch.setattr(kdf, "seal_new", original)
    assert changed == [200]
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "try_again"
    assert (await bob.get(f"/api/file?path={quote(upload)}")).content == b"dear diary"  # still signed in
    assert (await bob.get("/api/conversations")).status_code == 200
    assert (await host.client().login("bob", NEW)).status_code == 401
    again = await _signed_in(host, "bob", own)
    assert (await again.get(f"/api/file?path={quote(upload)}")).content == b"dear diary"
    assert _quarantine(host, bob_id, "db") == []
    assert not host.core.users.reset_path(bob_id).exists()

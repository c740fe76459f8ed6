"""The project file explorer over HTTP: browse, upload, new folder, rename, delete —
and every hostile path (``../``, absolute, encoded traversal, NUL bytes, symlinks
planted in the folder pointing outside) refused with nothing written outside."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import httpx
import pytest

from tests.folders.support import join_project


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for folders and links)."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            out[rel] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return out


@pytest.fixture
async def project(skald, tmp_path):
    host = await skald.start(settings=skald.settings(files={"upload_max_bytes": 64 * 1024}))
    await host.admin()
    owner = await host.member("olga")
    response = await owner.post("/api/projects", json={"slug": "notes", "title": "Notes"})
    assert response.status_code == 201, response.text
    pid = response.json()["id"]
    folder = host.settings.data_dir / "projects" / owner.member["id"] / "notes"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours")
    return host, owner, pid, folder, outside


async def test_browse_upload_mkdir_rename_download_and_delete(project):
    _, owner, pid, folder, _ = project
    base = f"/api/projects/{pid}/files"
    listing = (await owner.get(base)).json()
    assert listing == {"path": "", "agent_path": "projects/olga/notes", "can_write": True, "entries": [], "truncated": False}

    assert (await owner.post(f"{base}/folder", json={"path": "drafts"})).status_code == 201
    response = await owner.post(f"{base}/upload/drafts/plan.txt", content=b"step one\n")
    assert response.status_code == 201, response.text
    assert response.json() == {"path": "drafts/plan.txt", "size": 9}
    assert (folder / "drafts" / "plan.txt").read_bytes() == b"step one\n"
    # group-shared, as the sandboxes of the project's members need them; no one else's
    assert (folder / "drafts").stat().st_mode & 0o777 == 0o770
    assert (folder / "drafts" / "plan.txt").stat().st_mode & 0o777 == 0o660
    response = await owner.post(f"{base}/upload/Ünïcode name.md", content=b"# hi")
    assert response.status_code == 201
    (folder / "agent.txt").write_text("made by the agent")  # written behind the API's back

    entries = (await owner.get(base)).json()["entries"]
    assert [(e["name"], e["kind"]) for e in entries] == [("drafts", "dir"), ("agent.txt", "file"), ("Ünïcode name.md", "file")]
    sub = (await owner.get(f"{base}?path=drafts")).json()
    assert [(e["path"], e["size"]) for e in sub["entries"]] == [("drafts/plan.txt", 9)]
    assert sub["agent_path"] == "projects/olga/notes/drafts"

    response = await owner.get(f"{base}/content?path=drafts/plan.txt")
    assert response.status_code == 200 and response.content == b"step one\n"
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"].startswith("attachment;")

    response = await owner.post(f"{base}/upload/drafts/plan.txt", content=b"overwrite?")
    assert (response.status_code, response.json()["field"]) == (409, "target")
    assert (folder / "drafts" / "plan.txt").read_bytes() == b"step one\n"

    response = await owner.post(f"{base}/rename", json={"from": "drafts/plan.txt", "to": "plan-v2.txt"})
    assert response.status_code == 200, response.text
    assert (folder / "plan-v2.txt").read_bytes() == b"step one\n" and not (folder / "drafts" / "plan.txt").exists()
    response = await owner.post(f"{base}/rename", json={"from": "plan-v2.txt", "to": "agent.txt"})
    assert (response.status_code, response.json()["field"]) == (409, "to")
    response = await owner.post(f"{base}/rename", json={"from": "drafts", "to": "drafts/inner"})
    assert response.status_code == 400

    (folder / "drafts" / "deep").mkdir()
    (folder / "drafts" / "deep" / "x").write_text("x")
    assert (await owner.post(f"{base}/delete", json={"path": "drafts"})).status_code == 200
    assert (await owner.post(f"{base}/delete", json={"path": "plan-v2.txt"})).status_code == 200
    assert sorted(os.listdir(folder)) == ["agent.txt", "Ünïcode name.md"]
    assert (await owner.post(f"{base}/delete", json={"path": "plan-v2.txt"})).status_code == 404
    response = await owner.post(f"{base}/delete", json={"path": ""})  # the project folder itself
    assert response.status_code == 400 and folder.is_dir()


async def test_upload_cap_is_enforced_while_streaming_and_leaves_nothing(project):
    _, owner, pid, folder, _ = project
    response = await owner.post(f"/api/projects/{pid}/files/upload/big.bin", content=b"x" * (64 * 1024 + 1))
    assert response.status_code == 413
    assert "upload limit" in response.json()["error"]

    async def chunks():  # no Content-Length: the cap must hold while streaming
        for _ in range(40):
            yield b"y" * 4096

    # The server answers 413 as soon as the cap is passed and stops reading; a client
    # still sending then sees the connection closed instead of the answer.
    try:
        response = await owner.post(f"/api/projects/{pid}/files/upload/streamed.bin", content=chunks())
        assert response.status_code == 413
    except httpx.TransportError:
        pass
    assert os.listdir(folder) == []

    async def small():
        yield b"a" * 1000
        yield b"b" * 1000

    response = await owner.post(f"/api/projects/{pid}/files/upload/ok.bin", content=small())
    assert response.status_code == 201 and (folder / "ok.bin").stat().st_size == 2000


@pytest.mark.parametrize("change", ["removed", "read_only"])
async def test_an_upload_still_streaming_when_its_sender_loses_write_access_is_not_kept(project, change):
    """Access was checked once, before the body: what a slow upload sent after its
    sender was removed (or made read-only) was linked into the project."""
    host, owner, pid, folder, _ = project
    writer = await host.member("wim")
    await join_project(owner, writer, pid, can_write=True)
    first_sent, changed = asyncio.Event(), asyncio.Event()

    async def slow():
        yield b"a" * 1000
        first_sent.set()
        await changed.wait()
        yield b"b" * 1000

    upload = asyncio.ensure_future(writer.post(f"/api/projects/{pid}/files/upload/late.txt", content=slow()))
    await first_sent.wait()
    if change == "removed":
        assert (await owner.delete(f"/api/projects/{pid}/members/{writer.member['id']}")).status_code == 200
    else:
        assert (await owner.patch(f"/api/projects/{pid}/members/{writer.member['id']}", json={"can_write": False})).status_code == 200
    changed.set()
    response = await upload
    assert response.status_code == (404 if change == "removed" else 403), response.text
    assert os.listdir(folder) == []


HOSTILE = ["../x", "../../etc/passwd", "/etc/passwd", "a/../../x", "a\x00b", "x" * 300, "%2e%2e/x"]


async def test_hostile_paths_are_refused_on_every_route_and_nothing_is_written_outside(project):
    host, owner, pid, folder, outside = project
    data_dir = host.settings.data_dir
    (folder / "inside.txt").write_text("inside")
    # links planted from inside the sandbox, pointing off the folder
    os.symlink(outside, folder / "escape")
    os.symlink(outside / "secret.txt", folder / "secret-link.txt")
    os.symlink("/etc", folder / "etc")
    os.symlink(data_dir / "database", folder / "db")
    before_outside, before_data = _tree(outside), _tree(data_dir)
    base = f"/api/projects/{pid}/files"
    from urllib.parse import quote

    paths = HOSTILE + ["escape", "escape/secret.txt", "secret-link.txt", "etc/passwd", "db", "db/system.db"]
    for raw in paths:
        q = quote(raw, safe="")
        # %2e%2e arrives decoded once ("%2e%2e/x" → literal name, harmless) — either way never outside
        for method, url, body in (
            ("GET", f"{base}?path={q}", None),
            ("GET", f"{base}/content?path={q}", None),
            ("POST", f"{base}/folder", {"path": f"{raw}/new"}),
            ("POST", f"{base}/upload/{q}/dropped.txt", None),
            ("POST", f"{base}/delete", {"path": f"{raw}/secret.txt"}),
            ("POST", f"{base}/rename", {"from": "inside.txt", "to": f"{raw}/moved.txt"}),
            ("POST", f"{base}/rename", {"from": f"{raw}/secret.txt", "to": "stolen.txt"}),
        ):
            kwargs = {"json": body} if body is not None else {"content": b"payload"} if method == "POST" else {}
            response = await owner.request(method, url, **kwargs)
            if response.status_code == 308:  # "//" in a URL path: the router's redirect merges slashes
                assert "/upload/" in url and response.headers["location"].endswith(url.replace("%2F", "/").replace("//", "/").split("/upload/", 1)[1])
                continue
            assert response.status_code in (400, 404), (method, url, body, response.status_code, response.text)
            assert "not yours" not in response.text and "root:" not in response.text
    for raw in ("../x", "/etc/passwd", "a\x00b", "escape/secret.txt", "etc/passwd"):
        response = await owner.post(f"{base}/delete", json={"path": raw})
        assert response.status_code in (400, 404), (raw, response.status_code)
    for target in ("../up.txt", "..", ".", "x\x00y", "/etc/up.txt", "escape/up.txt", "db/up.txt"):
        encoded = "".join(f"%{b:02X}" for b in target.encode())  # every byte, dots too: no client may normalise it
        response = await owner.post(f"{base}/upload/{encoded}", content=b"payload")
        assert response.status_code in (308, 400, 404), (target, response.status_code, response.text)

    assert _tree(outside) == before_outside
    assert _tree(data_dir) == before_data  # the whole data dir: nothing written anywhere
    assert (outside / "secret.txt").read_text() == "not yours"

    # Deleting or renaming a planted link acts on the link itself, never its target.
    assert (await owner.post(f"{base}/rename", json={"from": "escape", "to": "renamed-link"})).status_code == 200
    assert (folder / "renamed-link").is_symlink() and (outside / "secret.txt").exists()
    assert (await owner.post(f"{base}/delete", json={"path": "renamed-link"})).status_code == 200
    assert (await owner.post(f"{base}/delete", json={"path": "secret-link.txt"})).status_code == 200
    assert not os.path.lexists(folder / "renamed-link") and not os.path.lexists(folder / "secret-link.txt")
    assert _tree(outside) == before_outside


async def test_a_read_only_member_changes_nothing(project):
    host, owner, pid, folder, _ = project
    rita = await host.member("rita")
    await join_project(owner, rita, pid, can_write=False)
    (folder / "doc.txt").write_text("original")
    before = _tree(folder)
    base = f"/api/projects/{pid}/files"
    assert [e["name"] for e in (await rita.get(base)).json()["entries"]] == ["doc.txt"]
    assert (await rita.get(f"{base}/content?path=doc.txt")).content == b"original"
    for method, url, kwargs in (
        ("POST", f"{base}/upload/new.txt", {"content": b"x"}),
        ("POST", f"{base}/folder", {"json": {"path": "dir"}}),
        ("POST", f"{base}/rename", {"json": {"from": "doc.txt", "to": "moved.txt"}}),
        ("POST", f"{base}/delete", {"json": {"path": "doc.txt"}}),
    ):
        response = await rita.request(method, url, **kwargs)
        assert response.status_code == 403, (method, url, response.text)
        assert response.json()["error"] == "you can read this project but not change its files"
    assert _tree(folder) == before


async def test_an_upload_larger_than_the_json_body_cap_streams_to_disk(skald):
    """The app-wide body cap (10 MiB) is for JSON; an upload has its own."""
    host = await skald.start(settings=skald.settings(files={"upload_max_bytes": 32 * 1024 * 1024}))
    await host.admin()
    owner = await host.member("olga")
    pid = (await owner.post("/api/projects", json={"slug": "big"})).json()["id"]
    size = host.settings.server.max_body_bytes + 2 * 1024 * 1024
    response = await owner.post(f"/api/projects/{pid}/files/upload/big.bin", content=b"z" * size)
    assert response.status_code == 201, response.text
    assert response.json()["size"] == size
    assert (host.settings.data_dir / "projects" / owner.member["id"] / "big" / "big.bin").stat().st_size == size


def _swap_after_check(monkeypatch, module, folder: Path, outside: Path) -> list[str]:
    """The race a project member can run from their sandbox (renameat2 RENAME_EXCHANGE
    in a loop), won every time: right after the route's containment check of a path
    through ``a/``, ``a`` becomes a link out of the project. Deterministic here by
    wrapping the check; the swap itself is real files. Returns the checked paths."""
    from skald_host.core.files import paths

    checked: list[str] = []

    def contain_then_swap(base, relative, **kwargs):
        found = paths.contain(base, relative, **kwargs)
        checked.append(relative)
        if relative.split("/")[0] == "a" and not (folder / "a").is_symlink():
            os.rename(folder / "a", folder / "a-real")
            os.symlink(outside, folder / "a")
        return found

    monkeypatch.setattr(module, "contain", contain_then_swap)
    return checked


def _restore(folder: Path) -> None:
    if (folder / "a").is_symlink():
        os.unlink(folder / "a")
        os.rename(folder / "a-real", folder / "a")


async def test_a_folder_swapped_for_a_link_after_the_check_leads_nowhere_outside(project, monkeypatch):
    """Every explorer route uses what it checked through a descriptor re-checked after
    opening, so winning the check/use race reads, writes, lists, renames and deletes
    nothing outside the project (a security probe read the instance key this way)."""
    from skald_host.web.routes import folders as routes

    host, owner, pid, folder, outside = project
    (outside / "victim").mkdir()
    (outside / "victim" / "keep.txt").write_text("keep")
    (outside / "movable.txt").write_text("stay put")
    before_outside = _tree(outside)
    base = f"/api/projects/{pid}/files"
    checked = _swap_after_check(monkeypatch, routes, folder, outside)
    for method, url, kwargs in (
        ("GET", f"{base}?path=a", {}),
        ("GET", f"{base}/content?path=a/secret.txt", {}),
        ("POST", f"{base}/upload/a/PWNED.txt", {"content": b"written outside"}),
        ("POST", f"{base}/folder", {"json": {"path": "a/made-outside"}}),
        ("POST", f"{base}/rename", {"json": {"from": "a/movable.txt", "to": "stolen.txt"}}),
        ("POST", f"{base}/rename", {"json": {"from": "inside.txt", "to": "a/moved.txt"}}),
        ("POST", f"{base}/delete", {"json": {"path": "a/victim"}}),
        ("POST", f"{base}/delete", {"json": {"path": "a/secret.txt"}}),
    ):
        (folder / "a").mkdir()
        (folder / "a" / "secret.txt").write_text("decoy inside")
        (folder / "inside.txt").write_text("inside")
        checked.clear()
        response = await owner.request(method, url, **kwargs)
        assert checked and (folder / "a").is_symlink(), (url, "the swap did not happen: the test proves nothing")
        assert response.status_code in (400, 404), (method, url, kwargs, response.status_code, response.text)
        assert "not yours" not in response.text and "secret.txt" not in response.text
        assert _tree(outside) == before_outside, (method, url, kwargs)
        _restore(folder)
        shutil.rmtree(folder / "a")
    assert not (folder / "stolen.txt").exists()


async def test_an_upload_a_killed_server_left_is_hidden_and_removed_at_the_next_start(skald, tmp_path):
    """A project upload is written beside its target under a temporary name; kill -9
    mid-upload left it there for good, listed to every member (crash probe)."""
    host = await skald.start()
    await host.admin()
    owner = await host.member("olga")
    pid = (await owner.post("/api/projects", json={"slug": "notes", "title": "Notes"})).json()["id"]
    assert (await owner.post(f"/api/projects/{pid}/files/folder", json={"path": "drafts"})).status_code == 201
    folder = host.settings.data_dir / "projects" / owner.member["id"] / "notes"
    left = folder / "drafts" / ".part-0123456789abcdef"
    left.write_bytes(b"half an upload")
    (folder / "drafts" / ".part-notes.txt").write_text("a member's own file, not ours")
    listed = (await owner.get(f"/api/projects/{pid}/files", params={"path": "drafts"})).json()["entries"]
    assert [e["name"] for e in listed] == [".part-notes.txt"]
    settings = host.settings
    await host.stop()
    await skald.start(settings=settings)
    assert not left.exists() and (folder / "drafts" / ".part-notes.txt").exists()


async def test_a_name_the_server_keeps_for_uploads_being_written_is_refused(skald):
    """An upload, a new folder or a rename to ``.part-<16 hex>`` was accepted, listed to
    nobody and removed at the next start as a crashed upload (two-member probe). A name
    that only starts like one is a member's own."""
    host = await skald.start()
    await host.admin()
    owner = await host.member("olga")
    pid = (await owner.post("/api/projects", json={"slug": "notes", "title": "Notes"})).json()["id"]
    assert (await owner.post(f"/api/projects/{pid}/files/upload/kept.txt", content=b"mine")).status_code == 201
    reserved = ".part-0000000000000000"
    for response, field in (
        (await owner.post(f"/api/projects/{pid}/files/upload/{reserved}", content=b"lost at the next start"), "target"),
        (await owner.post(f"/api/projects/{pid}/files/folder", json={"path": f"sub/{reserved}"}), "path"),
        (await owner.post(f"/api/projects/{pid}/files/rename", json={"from": "kept.txt", "to": reserved}), "to"),
    ):
        assert (response.status_code, response.json()["code"], response.json()["field"]) == (400, "name_reserved", field), response.text
    folder = host.settings.data_dir / "projects" / owner.member["id"] / "notes"
    assert sorted(p.name for p in folder.iterdir()) == ["kept.txt"]
    for own in (".part-notes.txt", ".part-0123", ".part-0000000000000000.txt"):
        assert (await owner.post(f"/api/projects/{pid}/files/upload/{own}", content=b"x")).status_code == 201, own
    listed = {e["name"] for e in (await owner.get(f"/api/projects/{pid}/files")).json()["entries"]}
    assert listed == {"kept.txt", ".part-notes.txt", ".part-0123", ".part-0000000000000000.txt"}


async def test_a_new_name_with_a_backslash_is_refused(skald):
    """"..\\..\\x.txt" was stored as one file's name (an authorization sweep): harmless on
    the server, a path out of the folder to a system that reads "\\" as a separator (a
    download, an export on Windows)."""
    host = await skald.start()
    await host.admin()
    owner = await host.member("olga")
    pid = (await owner.post("/api/projects", json={"slug": "notes", "title": "Notes"})).json()["id"]
    assert (await owner.post(f"/api/projects/{pid}/files/upload/kept.txt", content=b"mine")).status_code == 201
    for response, field in (
        (await owner.post(f"/api/projects/{pid}/files/upload/..%5C..%5Cx.txt", content=b"out"), "target"),
        (await owner.post(f"/api/projects/{pid}/files/folder", json={"path": "sub\\dir"}), "path"),
        (await owner.post(f"/api/projects/{pid}/files/rename", json={"from": "kept.txt", "to": "a\\b.txt"}), "to"),
    ):
        assert (response.status_code, response.json()["code"], response.json()["field"]) == (400, "name_backslash", field), response.text
    listed = (await owner.get(f"/api/projects/{pid}/files")).json()["entries"]
    assert [e["name"] for e in listed] == ["kept.txt"]

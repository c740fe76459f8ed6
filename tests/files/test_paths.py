"""Every host path stays inside its base or fails closed (check F3, seed 001
"Filesystem & containers"): ``../``, absolute paths, percent-encoded traversal through
``/api/file``, NUL bytes, over-long names, and symlinks planted in the home pointing at
``/etc``, at another member's home and at a decoy outside the data dir. The fs tools
and the viewer share one router (``MemberFiles``), so both are driven here."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from skald_host.core.files.ops import MemberFiles
from skald_host.core.files.service import FileError


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with a digest of its content."""
    seen: dict[str, str] = {}
    for folder, dirs, names in os.walk(root, followlinks=False):
        for name in dirs + names:
            path = Path(folder) / name
            if path.is_symlink():
                seen[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[str(path)] = "dir"
    return seen


async def tools(files, username: str) -> MemberFiles:
    return MemberFiles(files.core, await files.member(username))


async def test_the_viewer_serves_the_callers_own_files_with_safe_types(files):
    alice = await tools(files, "alice")
    await alice.write_text("notes/today.txt", "buy milk\n")
    await alice.write_text("page.html", "<script>alert(1)</script>")
    response = await files.alice.get("/api/file", params={"path": "notes/today.txt"})
    assert response.status_code == 200 and response.text == "buy milk\n"
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in response.headers["content-security-policy"]
    # HTML is never served as HTML: it is text, and cannot run.
    response = await files.alice.get("/api/file", params={"path": "~/page.html"})
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    # Anything not text or an image is a download.
    home = files.core.files.home((await files.member("alice")).id)
    (home / "blob.bin").write_bytes(bytes(range(256)))
    response = await files.alice.get("/api/file", params={"path": "blob.bin"})
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"].startswith("attachment;")
    # The same path routes to the note store when it names a memory root.
    await alice.write_text("user-memory/plan.md", "the plan")
    response = await files.alice.get("/api/file", params={"path": "~/user-memory/plan.md"})
    assert response.status_code == 200 and response.text == "the plan"
    assert not (home / "user-memory").exists()  # a note, never a file beside the store
    # A note that is not there is a plain answer, as a missing file is, not a tool failure.
    for read in (alice.read_text, alice.read_blob):
        with pytest.raises(FileError, match=r"user-memory/nowhere\.md does not exist"):
            await read("user-memory/nowhere.md")
    response = await files.alice.get("/api/file", params={"path": "~/user-memory/nowhere.md"})
    assert response.status_code == 404, response.text


HOSTILE_QUERIES = [
    "../x",
    "../../etc/passwd",
    "..%2f..%2fetc%2fpasswd",
    "%2e%2e/%2e%2e/etc/passwd",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "notes/../../../etc/passwd",
    "~/../../etc/passwd",
    "/home/member/../../etc/shadow",
    "a%00.txt",
    "x" * 300,
    ("d/" * 2100) + "f",
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=lambda q: q[:40])
async def test_traversal_through_the_viewer_fails_closed(files, query):
    shadow = Path("/etc/shadow").read_bytes() if os.access("/etc/shadow", os.R_OK) else b"root:"
    response = await files.alice.get(f"/api/file?path={query}")
    assert response.status_code in (400, 404, 503) or response.status_code == 200 and shadow not in response.content, (
        query, response.status_code, response.text[:200]
    )
    if response.status_code != 200:
        assert "error" in response.json()
    assert b"root:" not in response.content


async def test_traversal_through_the_tools_fails_closed_and_the_message_says_why(files):
    alice = await tools(files, "alice")
    for path in ("../x", "../../etc/passwd", "~/../../etc/passwd", "notes/../../x"):
        with pytest.raises(FileError, match="leaves its folder"):
            await alice.read_text(path)
        with pytest.raises(FileError, match="leaves its folder"):
            await alice.write_text(path, "owned")
    with pytest.raises(FileError, match="NUL"):
        await alice.read_text("a\x00b")
    with pytest.raises(FileError, match="longer than"):
        await alice.write_text("x" * 300, "long")


async def test_an_empty_file_reads_as_empty_text_not_as_a_binary_one(files):
    """A file written empty (or uploaded so) is read back as nothing, for the tool to say
    "is empty"; it was refused as binary, since no bytes name no type (memory probe)."""
    alice = await tools(files, "alice")
    await alice.write_text("empty.txt", "")
    assert await alice.read_text("empty.txt") == ""
    await alice.write_text("binary.bin", "")
    (files.core.files.home((await files.member("alice")).id) / "binary.bin").write_bytes(b"\x00\x01")
    with pytest.raises(FileError, match="binary file"):
        await alice.read_text("binary.bin")


async def test_planted_symlinks_are_never_followed_out_of_the_home(files, tmp_path):
    alice, bob = await files.member("alice"), await files.member("bob")
    alice_fs, bob_fs = await tools(files, "alice"), await tools(files, "bob")
    await bob_fs.write_text("secret.txt", "bob's secret")
    decoy = tmp_path / "outside"
    decoy.mkdir()
    (decoy / "target.txt").write_text("outside the data dir")
    home = files.core.files.home(alice.id)
    bob_home = files.core.files.home(bob.id)
    (home / "etc").symlink_to("/etc")
    (home / "bob").symlink_to(bob_home)
    (home / "passwd").symlink_to("/etc/passwd")
    (home / "decoy").symlink_to(decoy)
    (home / "decoy.txt").symlink_to(decoy / "target.txt")
    (home / "inside").mkdir()
    (home / "inside" / "ok.txt").write_text("fine")
    (home / "alias.txt").symlink_to(home / "inside" / "ok.txt")  # a link that stays inside is fine
    data_dir = files.core.settings.data_dir
    before_decoy, before_etc = snapshot(decoy), sorted(os.listdir("/etc"))
    # The databases change on their own (sessions); every other file of the data dir must not.
    outside_home = lambda: {  # noqa: E731
        k: v for k, v in snapshot(data_dir).items() if not k.startswith((str(home), str(data_dir / "database")))
    }
    before_data = outside_home()

    for path in ("etc/passwd", "passwd", "bob/secret.txt", "decoy/target.txt", "decoy.txt", "etc"):
        with pytest.raises(FileError, match="leaves its folder"):
            await alice_fs.read_text(path)
        response = await files.alice.get("/api/file", params={"path": path})
        assert response.status_code == 400, (path, response.text)
        assert b"root:" not in response.content and b"secret" not in response.content
    for path in ("etc/evil.conf", "passwd", "bob/secret.txt", "bob/new.txt", "decoy/new.txt", "decoy.txt", "decoy/deep/er/x"):
        with pytest.raises(FileError, match="leaves its folder"):
            await alice_fs.write_text(path, "owned")
        with pytest.raises(FileError):
            await alice_fs.edit(path, "secret", "owned")
    with pytest.raises(FileError, match="leaves its folder"):
        await alice_fs.list("decoy")
    with pytest.raises(FileError, match="leaves its folder"):
        await alice_fs.grep("secret", "bob")
    # A recursive grep and listing of the whole home do not descend through the links.
    matches, _ = await alice_fs.grep("secret|outside|root:", ".")
    assert matches == []
    listed = {e["path"] for e in await alice_fs.list(".", recursive=True)}
    assert "bob" in listed and not any(p.startswith(("bob/", "etc/", "decoy/")) for p in listed)
    assert await alice_fs.read_text("alias.txt") == "fine"

    assert snapshot(decoy) == before_decoy
    assert sorted(os.listdir("/etc")) == before_etc
    assert outside_home() == before_data  # nothing outside alice's home changed, bob's included
    assert (bob_home / "secret.txt").read_text() == "bob's secret"


async def test_a_link_swapped_in_after_the_check_is_refused_by_the_open(files, tmp_path):
    """The TOCTOU guard: ``contain`` saw a plain path, then the final component became a
    link before the open. O_NOFOLLOW and the descriptor re-check refuse it."""
    from skald_host.core.files.paths import PathRefused, open_inside

    alice = await files.member("alice")
    home = files.core.files.home(alice.id)
    checked = home / "swap.txt"
    checked.symlink_to("/etc/passwd")
    with pytest.raises(PathRefused, match="symbolic link"):
        open_inside(home, checked, os.O_RDONLY)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "file.txt").write_text("outside")
    (home / "sub").symlink_to(folder)  # a folder above the file swapped for a link
    with pytest.raises(PathRefused, match="leaves its folder"):
        open_inside(home, home / "sub" / "file.txt", os.O_RDONLY)
    with pytest.raises(PathRefused, match="symbolic link"):
        open_inside(home, home / "sub", os.O_RDONLY | os.O_DIRECTORY)


async def test_folders_made_for_a_write_never_land_where_a_swapped_link_points(files, tmp_path, monkeypatch):
    """The race a sandbox can run on the agent's write: right after the path was
    checked, a folder on the way becomes a link out of the home. Before, the missing
    folders were made by name (outside, and handed to the member's uid); now they are
    made by descriptor from the home's own, and the link is refused."""
    from skald_host.core.files import paths

    alice = await files.member("alice")
    home = files.core.files.home(alice.id)
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / "a").mkdir()
    checked = home / "a" / "new" / "deeper"
    opened = paths.open_dir_inside

    def swap_then_open(base, path):  # the last check passed; the walk starts: the sandbox wins
        (home / "a").rename(home / "a-real")
        (home / "a").symlink_to(outside)
        return opened(base, path)

    monkeypatch.setattr(paths, "open_dir_inside", swap_then_open)
    made: list[int] = []
    with pytest.raises(paths.PathRefused, match="a is not a folder"):
        paths.open_dirs_inside(home, checked, made.append)
    assert list(outside.iterdir()) == [] and made == []
    monkeypatch.setattr(paths, "open_dir_inside", opened)
    (home / "a").unlink()
    (home / "a-real").rename(home / "a")
    fd = paths.open_dirs_inside(home, checked, made.append)
    os.close(fd)
    assert (home / "a" / "new" / "deeper").is_dir() and len(made) == 2


async def test_a_listing_never_names_what_a_swapped_link_points_at(files, tmp_path, monkeypatch):
    """list_files checks the folder, then lists it: a sandbox swapping it for a link in
    between got the names and sizes of a folder outside listed. It is now listed
    through a descriptor re-checked after opening."""
    from skald_host.core.files import ops

    alice = await tools(files, "alice")
    home = files.core.files.home((await files.member("alice")).id)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "not-yours.txt").write_text("x")
    await alice.write_text("a/mine.txt", "mine")
    opened = ops.open_dir_inside

    def swap_then_open(base, path):
        if path.name == "a" and not (home / "a").is_symlink():
            (home / "a").rename(home / "a-real")
            (home / "a").symlink_to(outside)
        return opened(base, path)

    monkeypatch.setattr(ops, "open_dir_inside", swap_then_open)
    listed = await alice.list("a")
    assert (home / "a").is_symlink(), "the swap did not happen: the test proves nothing"
    assert not any("not-yours" in entry["path"] for entry in listed), listed


async def test_a_folder_on_the_way_swapped_for_a_link_is_not_even_opened_through(files, tmp_path, monkeypatch):
    """open_inside used to open the whole path and check what it got: a folder on the
    way swapped for a link had the server open whatever it pointed at (a device's open
    alone can act), then refuse. It now walks from the base, following no link."""
    from skald_host.core.files import paths

    home = files.core.files.home((await files.member("alice")).id)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text("outside")
    (home / "sub").symlink_to(outside)  # swapped in after the path was checked
    real_open = os.open
    reached: list[str] = []

    def watching_open(path, flags, mode=0o777, *, dir_fd=None):
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        where = os.readlink(f"/proc/self/fd/{fd}")
        if where.startswith(str(outside)):
            reached.append(where)
        return fd

    monkeypatch.setattr(paths.os, "open", watching_open)
    with pytest.raises(paths.PathRefused, match="leaves its folder"):
        paths.open_inside(home, home / "sub" / "canary.txt", os.O_RDONLY)
    monkeypatch.setattr(paths.os, "open", real_open)
    assert reached == []


async def test_one_member_cannot_reach_anothers_home(files):
    alice, bob = await files.member("alice"), await files.member("bob")
    bob_fs = await tools(files, "bob")
    await bob_fs.write_text("diary.txt", "bob's diary")
    alice_fs = await tools(files, "alice")
    for path in (f"../{bob.id}/diary.txt", f"~/../{bob.id}/diary.txt", f"/home/member/../{bob.id}/diary.txt"):
        response = await files.alice.get("/api/file", params={"path": path})
        assert b"bob's diary" not in response.content and response.status_code != 200, path
        try:
            text = await alice_fs.read_text(path)
        except FileError:
            continue
        assert "bob's diary" not in text
    # The same relative name is each member's own file.
    response = await files.alice.get("/api/file", params={"path": "diary.txt"})
    assert response.status_code == 404
    response = await files.bob.get("/api/file", params={"path": "diary.txt"})
    assert response.status_code == 200 and response.text == "bob's diary"
    assert files.core.files.home(alice.id) != files.core.files.home(bob.id)
    if os.geteuid() == 0:
        assert files.core.files.uid_for(alice.id) != files.core.files.uid_for(bob.id)
        assert (files.core.files.home(alice.id).stat().st_mode & 0o777) == 0o700


async def test_memberships_route_and_a_read_only_one_refuses_writes(files):
    folders = files.core.folders
    team = await folders.create_shared("team")
    await folders.add_shared_member(team.id, "alice", can_write=False)
    await folders.add_shared_member(team.id, "bob", can_write=True)
    bob_fs, alice_fs = await tools(files, "bob"), await tools(files, "alice")
    assert "Created" in await bob_fs.write_text("shared/team/plan.md", "the plan")
    assert await alice_fs.read_text("shared/team/plan.md") == "the plan"
    assert await alice_fs.read_text("/home/member/shared/team/plan.md") == "the plan"
    for attempt in (
        alice_fs.write_text("shared/team/plan.md", "mine now"),
        alice_fs.edit("shared/team/plan.md", "the", "my"),
        alice_fs.write_text("shared/team/new.md", "x"),
    ):
        with pytest.raises(FileError, match="read-only"):
            await attempt
    assert await bob_fs.read_text("shared/team/plan.md") == "the plan"
    listing = await alice_fs.list("shared")
    assert listing == [{"path": "shared/team", "is_dir": True, "size": None, "read_only": True, "title": team.title}]
    # Not a member: the same answer as a folder that does not exist.
    carol_fs = MemberFiles(files.core, await files.core.users.get((await files.host.create_member("carol"))["id"]))
    for path in ("shared/team/plan.md", "shared/nothing/plan.md"):
        with pytest.raises(FileError, match="no such folder"):
            await carol_fs.read_text(path)
    mounts = await files.core.files.sandbox_mounts((await files.member("alice")).id)
    assert [(m.target, m.read_only) for m in mounts] == [("/home/member", False), ("/home/member/shared/team", True)]


async def test_a_fifo_planted_in_the_home_is_refused_without_hanging(files):
    """A sandbox command can ``mkfifo``; opening one for reading would block a host
    thread forever. Reads open non-blocking and accept only regular files."""
    import asyncio

    alice = await files.member("alice")
    alice_fs = await tools(files, "alice")
    home = files.core.files.home(alice.id)
    os.mkfifo(home / "pipe")
    (home / "plain.txt").write_text("needle")
    with pytest.raises(FileError, match="not a regular file"):
        await asyncio.wait_for(alice_fs.read_text("pipe"), 5)
    response = await asyncio.wait_for(files.alice.get("/api/file", params={"path": "pipe"}), 5)
    assert response.status_code == 400
    matches, _ = await asyncio.wait_for(alice_fs.grep("needle", "."), 5)
    assert matches == [("plain.txt", 1, "needle")]


async def test_a_long_file_is_read_by_line_ranges_even_past_the_read_cap(files):
    """read_file on a big log: the whole-file read is refused past the cap with a clear
    message, a line range is streamed, and a long text is cut with a pointer."""
    from skald_host.builtins.fs_tools import read_file
    from skald_hookspecs.types import ToolContext

    alice = await files.member("alice")
    home = files.core.files.home(alice.id)
    lines = [f"line {n} " + "x" * 40 for n in range(1, 60_001)]
    (home / "big.log").write_text("\n".join(lines) + "\n")
    ctx = ToolContext(member_id=alice.id, host=files.core.host_api("fs-tools"))
    with pytest.raises(FileError, match="more than the"):
        await read_file({"path": "big.log"}, ctx)
    text = await read_file({"path": "big.log", "start_line": 50_000, "end_line": 50_002}, ctx)
    assert text == "big.log, lines 50000-50002:\n" + "\n".join(lines[49_999:50_002])
    text = await read_file({"path": "big.log", "start_line": 59_999}, ctx)
    assert text == "big.log, lines 59999-60000 of 60000:\n" + "\n".join(lines[-2:])
    assert (await read_file({"path": "big.log", "start_line": 70_000}, ctx)) == "big.log has only 60000 lines."
    (home / "medium.txt").write_text("\n".join(lines[:2000]))
    text = await read_file({"path": "medium.txt"}, ctx)
    assert text.startswith(lines[0]) and text.endswith("Read more with start_line/end_line.]") and len(text) < 50_000


async def test_overwriting_a_file_keeps_its_permission_bits_but_never_setuid_or_setgid(files):
    """A member's file made setuid from the sandbox and overwritten by the agent: in a
    shared folder the new file is root's, so it must not carry the bit (probe)."""
    alice = await tools(files, "alice")
    home = files.core.files.home((await files.member("alice")).id)
    await alice.write_text("tool.sh", "echo one")
    os.chmod(home / "tool.sh", 0o6755)
    await alice.write_text("tool.sh", "echo two")
    assert (home / "tool.sh").read_text() == "echo two"
    assert (home / "tool.sh").stat().st_mode & 0o7777 == 0o755

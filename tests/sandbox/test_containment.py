"""Check E4 from inside the sandbox, on both backends: commands run as the member's own
non-root uid; another member's home, the host's secrets and the Docker socket are out
of reach; a read-only membership and the memory signposts refuse writes; no network."""

from __future__ import annotations

import os
import secrets

import pytest

from .support import Box


async def test_commands_run_as_the_members_own_uid_in_their_home(box: Box):
    result = await box.run(box.alice, "id -u; id -g; pwd; echo $HOME")
    uid = box.uid(box.alice)
    assert uid >= 20000 and uid != box.uid(box.bob)
    assert result.exit_code == 0, result.output
    assert result.output.split() == [str(uid), str(uid), "/home/member", "/home/member"]


async def test_files_written_in_the_sandbox_land_in_the_home_owned_by_the_member(box: Box):
    result = await box.run(box.alice, "mkdir -p notes && echo from-the-sandbox > notes/a.txt")
    assert result.exit_code == 0, result.output
    written = box.core.files.home(box.alice) / "notes" / "a.txt"
    assert written.read_text() == "from-the-sandbox\n"
    assert written.stat().st_uid == box.uid(box.alice)


async def test_a_member_cannot_reach_another_members_home(box: Box):
    canary = f"canary-{secrets.token_hex(8)}"
    assert (await box.run(box.bob, f"echo {canary} > secret.txt")).exit_code == 0
    bob_home = box.core.files.home(box.bob)
    assert (bob_home / "secret.txt").read_text().strip() == canary
    attempts = " ; ".join(
        f"cat {path} 2>&1"
        for path in (bob_home / "secret.txt", "/home/*/secret.txt", f"/home/{box.bob}/secret.txt", "/proc/1/root" + str(bob_home / "secret.txt"))
    )
    result = await box.run(box.alice, f"{attempts}; ls -a /home; grep -rs {canary} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; true")
    assert canary not in result.output
    assert result.output.split()[-3:] == [".", "..", "member"]  # `ls -a /home`: nobody else is there


async def test_the_hosts_secrets_and_the_docker_socket_are_out_of_reach(box: Box):
    data_dir = box.core.settings.data_dir
    probe = (
        "for p in /etc/shadow /var/run/docker.sock /run/docker.sock " + str(data_dir / "database/system.db") + "; do"
        '  if [ -e "$p" ]; then echo "present $p"; cat "$p" >/dev/null 2>&1 && echo "readable $p"; else echo "absent $p"; fi;'
        " done;"
        " python3 -c \"import socket; s = socket.socket(socket.AF_UNIX);"
        " s.connect('/var/run/docker.sock'); print('connected')\" 2>&1 | tail -1"
    )
    result = await box.run(box.alice, probe)
    assert "readable" not in result.output and "connected" not in result.output.splitlines()
    assert "present /var/run/docker.sock" not in result.output and "present /run/docker.sock" not in result.output
    assert f"present {data_dir}" not in result.output
    assert "No such file or directory" in result.output or "FileNotFoundError" in result.output


async def test_there_is_no_network_but_loopback(box: Box):
    result = await box.run(
        box.alice,
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ';"
        " python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)\" 2>&1 | tail -1",
    )
    interfaces = result.output.splitlines()[:-1]
    assert interfaces == ["lo"], result.output
    assert "unreachable" in result.output.lower() or "OSError" in result.output


async def test_a_read_only_membership_refuses_writes_and_a_writable_one_takes_them(box: Box):
    folders = box.core.folders
    reading = await folders.create_shared("reference", "Reference")
    writing = await folders.create_shared("drafts", "Drafts")
    await folders.add_shared_member(reading.id, "alice", can_write=False)
    await folders.add_shared_member(writing.id, "alice", can_write=True)
    result = await box.run(
        box.alice,
        "echo x > shared/reference/new.txt; echo read-only=$?; echo y > shared/drafts/new.txt; echo writable=$?; ls shared",
    )
    assert "Read-only file system" in result.output, result.output
    assert "read-only=0" not in result.output and "writable=0" in result.output, result.output
    # Docker hands stdout and stderr over as two streams: the listing and the error
    # above may come in either order.
    assert {"drafts", "reference"} <= set(result.output.split()), result.output
    accesses = {a.agent_prefix: a.host_path for a in await folders.memberships(box.alice)}
    assert not (accesses["shared/reference"] / "new.txt").exists()
    written = accesses["shared/drafts"] / "new.txt"
    assert written.read_text() == "y\n"
    # Group-writable in a setgid folder: another write-member can change it too.
    assert written.stat().st_mode & 0o020 and written.stat().st_gid == written.parent.stat().st_gid
    # The same folder is closed to a member who does not belong to it.
    assert (await box.run(box.bob, "ls shared/reference 2>&1; echo $?")).output.strip().endswith("2")


async def test_what_the_server_put_in_a_folder_before_its_first_mount_is_the_members_too(box: Box, tmp_path):
    """A project's web page uploads as the server (root, 0660, a folder of its own
    0700) before any sandbox mounted the folder: the first mount gives it to the
    folders' group, so members' sandboxes read and add to it. Found by a security
    probe: "cat: Permission denied" on a file uploaded through the project page. A link
    inside is never followed while doing so."""
    folders = box.core.folders
    shared = await folders.create_shared("library", "Library")
    await folders.add_shared_member(shared.id, "alice", can_write=True)
    path = {a.agent_prefix: a.host_path for a in await folders.memberships(box.alice)}["shared/library"]
    (path / "plans").mkdir(mode=0o700)
    (path / "plans" / "beds.md").write_text("raised beds")
    os.chmod(path / "plans" / "beds.md", 0o660)
    outside = tmp_path / "outside.txt"
    outside.write_text("not shared")
    os.chmod(outside, 0o600)
    (path / "plans" / "link").symlink_to(outside)

    result = await box.run(box.alice, "cat shared/library/plans/beds.md; echo; echo more > shared/library/plans/new.txt; echo wrote=$?")
    assert "raised beds" in result.output and "wrote=0" in result.output, result.output
    info = os.stat(outside)
    assert (info.st_mode & 0o777, info.st_gid) == (0o600, 0)  # the link's target: untouched

    # Written by the server after the mount (the agent's write_file): the members' at once.
    from skald_host.core.files.ops import MemberFiles

    await MemberFiles(box.core, await box.core.users.get(box.alice)).write_text("shared/library/later/notes.md", "by the agent")
    result = await box.run(box.alice, "cat shared/library/later/notes.md; echo; echo x > shared/library/later/mine.txt; echo wrote=$?")
    assert "by the agent" in result.output and "wrote=0" in result.output, result.output


async def test_the_memory_roots_are_read_only_signposts_naming_the_tools(box: Box):
    result = await box.run(
        box.alice,
        "exec 2>&1; cat user-memory/README.md; echo note > user-memory/x.md; echo write=$?;"
        " mkdir -p shared-memory/deeper; echo mkdir=$?; ls -A user-memory shared-memory",
    )
    assert "memory_search" in result.output and "read_file user-memory/" in result.output
    assert "Read-only file system" in result.output
    assert "write=0" not in result.output and "mkdir=0" not in result.output
    assert result.output.split()[-4:] == ["shared-memory:", "README.md", "user-memory:", "README.md"]
    assert not (box.core.sandbox.signposts / "user-memory" / "x.md").exists()


async def test_an_agent_path_picks_the_working_directory(box: Box):
    folders = box.core.folders
    folder = await folders.create_shared("team", "Team")
    await folders.add_shared_member(folder.id, "alice", can_write=True)
    home = box.core.files.home(box.alice)
    os.makedirs(home / "work" / "deep", exist_ok=True)
    box.core.files.own(home / "work", box.alice)
    box.core.files.own(home / "work" / "deep", box.alice)
    for workdir, expected in (("~/work/deep", "/home/member/work/deep"), ("work", "/home/member/work"),
                              ("shared/team", "/home/member/shared/team"), ("/tmp", "/tmp"), (None, "/home/member")):
        result = await box.run(box.alice, "pwd", workdir=workdir)
        assert result.output.strip() == expected, (workdir, result.output)


async def test_a_bad_working_directory_is_a_clear_error_not_another_folder(box: Box):
    for workdir, message in (("~/missing", "is not a folder"), ("user-memory", "memory notes are not files"),
                             ("../..", "leaves its folder"), ("shared/not-mine", "no such folder")):
        with pytest.raises(ValueError, match=message):
            await box.run(box.alice, "pwd", workdir=workdir)
    result = await box.run(box.alice, "pwd", workdir="/no/such/place")
    assert result.exit_code not in (0, None) and "/no/such/place" in result.output


async def test_a_symlink_planted_where_a_membership_mounts_is_refused_not_followed(box: Box, tmp_path):
    """Check F3 for mounts: ``~/shared`` made a link to a host path from inside the
    sandbox must not make the host create (or mount) anything there. Both backends
    resolve such a link safely on this machine (runc inside the container, bwrap 0.8
    fails the mkdir); the host refuses before either is asked, with what to do."""
    outside = tmp_path / f"outside-{secrets.token_hex(4)}"
    planted = await box.run(box.alice, f"ln -s {outside} shared && ln -s /oldroot{outside} projects; ls -l")
    assert planted.exit_code == 0, planted.output
    folders = box.core.folders
    folder = await folders.create_shared("pictures", "Pictures")
    await folders.add_shared_member(folder.id, "alice", can_write=True)
    from skald_hookspecs.sandbox import SandboxUnavailable

    with pytest.raises(SandboxUnavailable, match="~/shared in your home is not a folder"):
        await box.run(box.alice, "ls shared")
    assert not outside.exists() and not (tmp_path / "oldroot").exists()
    # Moving the link away (from the sandbox) is enough: the next command mounts normally.
    box.core.files.home(box.alice).joinpath("shared").unlink()
    result = await box.run(box.alice, "ls -d shared/pictures")
    assert result.output == "shared/pictures\n"


async def test_the_file_viewer_reads_a_sandbox_that_is_up_and_never_starts_one(box):
    """``GET /api/file`` changes nothing (SECURITY-CHECKS A4): a sandbox path is read
    from a sandbox the member's commands started, never by starting one."""
    alice = await box.host.member("alice")
    response = await alice.get("/api/file", params={"path": "/etc/hostname"})
    assert response.status_code == 404 and "not running" in response.json()["error"], response.text
    assert not box.core.sandbox.is_up(box.alice)
    _, backend = await box.core.sandbox.backend()
    assert box.alice not in await backend.existing(box.core.sandbox.instance)
    await box.run(box.alice, "echo shown > /tmp/out.txt")
    response = await alice.get("/api/file", params={"path": "/tmp/out.txt"})
    if box.backend == "docker":
        assert response.status_code == 200 and response.content == b"shown\n", response.text
    else:  # bubblewrap's sandbox is one per command: read from, it has no /tmp of before
        assert response.status_code == 404 and response.json()["error"] == "/tmp/out.txt does not exist", response.text

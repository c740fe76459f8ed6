"""A command already running loses a folder as its member does (check C5, "access at
the moment of use"). Bubblewrap fixes a command's mounts when it starts, so a member
removed from a project, or made read-only in it, kept writing it (and reading what
its owner wrote later) for as long as the command ran, and a spawned server for
ever. Now the member's commands that started with the wider access are stopped before
the change's call returns, their result says why, and their spawned processes are
killed; what another member runs, or what runs in an unaffected folder, goes on, and
widening access stops nothing. Commands wait for a file the test writes, never for
time; the test waits for a command to start by reading the disk."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from .support import Box, start_box

STARTED_WITHIN = 20.0  # generous: the machine is shared; bwrap starts in well under a second


@pytest.fixture
async def box(skald, bwrap_ready) -> Box:
    return await start_box(skald, "bubblewrap")


async def project_with_bob(box: Box, *, can_write: bool = True) -> Any:
    folders = box.core.folders
    project = await folders.create_project(box.alice, "proj1")
    await folders.invite_to_project(project.id, box.alice, "bob", can_write=can_write)
    [invitation] = await folders.invitations_for(box.bob)
    await folders.accept_invitation(invitation.id, box.bob)
    return project


def waiting_command(folder: str, name: str) -> str:
    """Marks itself started in ``folder``, waits for ``~/go``, then writes ``name`` in
    ``folder`` and prints the owner's later secret, as the probe's command did."""
    return (
        f"touch {folder}/{name}.started; while [ ! -e ~/go-{name} ]; do sleep 0.05; done;"
        f" date > {folder}/{name}.txt; cat {folder}/secret_later.txt"
    )


async def started(folder: Path, name: str, task: asyncio.Task[Any]) -> None:
    deadline = time.monotonic() + STARTED_WITHIN
    while not (folder / f"{name}.started").exists():
        assert not task.done(), f"{name} ended before it started: {task.result()}"
        assert time.monotonic() < deadline, f"{name} did not start"
        await asyncio.sleep(0.05)


def release(box: Box, member_id: str, name: str) -> None:
    (box.core.files.home(member_id) / f"go-{name}").write_text("go")


async def test_a_running_command_stops_when_its_member_is_removed_from_the_project(box: Box):
    # Every command of a member mounts all their folders: only one Bob started before
    # he joined the project cannot reach it, and that one goes on.
    await box.core.folders.create_project(box.bob, "own")
    own_path = box.core.folders.project_path(box.bob, "own")
    (own_path / "secret_later.txt").write_text("bob's own\n")
    unaffected = asyncio.ensure_future(box.run(box.bob, waiting_command("~/projects/bob/own", "own")))
    bobs = alices = unaffected
    try:
        await started(own_path, "own", unaffected)
        project = await project_with_bob(box)
        proj1 = box.core.folders.project_path(box.alice, "proj1")
        bobs = asyncio.ensure_future(box.run(box.bob, waiting_command("~/projects/alice/proj1", "bob")))
        alices = asyncio.ensure_future(box.run(box.alice, waiting_command("~/projects/alice/proj1", "alice")))
        await started(proj1, "bob", bobs)
        await started(proj1, "alice", alices)

        await box.core.folders.remove_project_member(project.id, box.alice, box.bob)
        (proj1 / "secret_later.txt").write_text("written after bob left\n")
        for member_id, name in ((box.bob, "bob"), (box.alice, "alice"), (box.bob, "own")):
            release(box, member_id, name)
        result = await asyncio.wait_for(bobs, STARTED_WITHIN)
        assert result.access_changed and result.cancelled and result.exit_code is None, result
        assert "~/projects/alice/proj1" in result.access_changed and "no longer reach" in result.access_changed
        assert "written after bob left" not in result.output
        assert not (proj1 / "bob.txt").exists()

        # Alice's command in the same project, and Bob's in his own, went on.
        theirs = await asyncio.wait_for(alices, STARTED_WITHIN)
        assert (theirs.exit_code, theirs.access_changed) == (0, None), theirs
        assert "written after bob left" in theirs.output and (proj1 / "alice.txt").exists()
        his = await asyncio.wait_for(unaffected, STARTED_WITHIN)
        assert (his.exit_code, his.access_changed) == (0, None), his
        assert "bob's own" in his.output and (own_path / "own.txt").exists()
    finally:
        for task in (bobs, alices, unaffected):
            task.cancel()


async def test_a_running_command_stops_when_its_member_is_made_read_only_and_not_when_made_writable(box: Box):
    project = await project_with_bob(box, can_write=False)
    proj1 = box.core.folders.project_path(box.alice, "proj1")
    (proj1 / "secret_later.txt").write_text("readable\n")
    reader = asyncio.ensure_future(box.run(box.bob, "cat ~/projects/alice/proj1/secret_later.txt; touch ~/reader.started;"
                                           " while [ ! -e ~/go-reader ]; do sleep 0.05; done; echo read on"))
    try:
        home = box.core.files.home(box.bob)
        await started(home, "reader", reader)
        await box.core.folders.set_project_member_write(project.id, box.alice, box.bob, True)  # wider: stops nothing
        release(box, box.bob, "reader")
        kept = await asyncio.wait_for(reader, STARTED_WITHIN)
        assert (kept.exit_code, kept.access_changed) == (0, None), kept
        assert "read on" in kept.output

        writer = asyncio.ensure_future(box.run(box.bob, waiting_command("~/projects/alice/proj1", "bob")))
        await started(proj1, "bob", writer)
        await box.core.folders.set_project_member_write(project.id, box.alice, box.bob, False)
        (proj1 / "secret_later.txt").write_text("written after bob was made read-only\n")
        release(box, box.bob, "bob")
        result = await asyncio.wait_for(writer, STARTED_WITHIN)
        assert result.access_changed and result.cancelled, result
        assert "~/projects/alice/proj1" in result.access_changed and "only read it" in result.access_changed
        assert not (proj1 / "bob.txt").exists()
        assert "made read-only" not in result.output
    finally:
        reader.cancel()


async def test_execute_cmd_says_why_a_command_whose_access_shrank_was_stopped(box: Box):
    from skald_hookspecs.sandbox import ExecResult
    from skald_host.builtins.exec_tool import execute_cmd

    class Turn:
        async def run_command(self, command: str, **_: Any) -> ExecResult:
            return ExecResult(None, "partial", cancelled=True, access_changed="The command was stopped: your access to ~/x changed")

    class Context:
        turn = Turn()

        def mark_untrusted(self, source: str = "") -> None:
            pass

    said = await execute_cmd({"command": "true"}, Context())  # type: ignore[arg-type]
    assert said.splitlines()[0] == "The command was stopped: your access to ~/x changed"


async def test_a_spawned_process_in_the_member_s_sandbox_is_killed_when_their_access_shrinks(box: Box):
    elsewhere = await box.core.sandbox.spawn(box.bob, ["/bin/cat"])  # before he joined: the project is not in it
    project = await project_with_bob(box)
    in_project = await box.core.sandbox.spawn(box.bob, ["/bin/cat"])  # mounts the project, whatever its workdir
    alices = await box.core.sandbox.spawn(box.alice, ["/bin/cat"], workdir="projects/alice/proj1")
    try:
        for process in (in_project, elsewhere, alices):  # all three answer
            process.stdin.write(b"ping\n")
            await process.stdin.drain()
            assert await asyncio.wait_for(process.stdout.readline(), STARTED_WITHIN) == b"ping\n"

        await box.core.folders.remove_project_member(project.id, box.alice, box.bob)
        await asyncio.wait_for(in_project.wait(), STARTED_WITHIN)
        assert await in_project.stdout.read() == b""

        # Bob's server that started with no more than he has now, and Alice's, go on.
        for process in (elsewhere, alices):
            assert process.returncode is None
            process.stdin.write(b"still\n")
            await process.stdin.drain()
            assert await asyncio.wait_for(process.stdout.readline(), STARTED_WITHIN) == b"still\n"
    finally:
        for process in (in_project, elsewhere, alices):
            process.kill()

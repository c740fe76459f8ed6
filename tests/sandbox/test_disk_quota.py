"""Check E4's "write 10 GB", in the home: the per-member disk limit
(``sandbox.home_quota_mib``) holds on both backends — one big file stops at the file
size limit, many files are killed by the watchdog, a home already over its limit can
only shrink, the file tools and uploads obey the same limit, and normal commands and
the host go on as before. The quota is small (50 MiB) so each test takes seconds."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from chat.support import MODEL_A, ChatSocket, new_conversation

from skald_host.core.files.ops import MemberFiles
from skald_host.core.files.service import FileError, UploadTooLarge
from skald_host.core.sandbox.quota import KILLED, MIB, home_usage
from skald_host.testing import Reply, SkaldHarness, ToolCall

from .support import Box, start_box
from .test_execute_cmd import chatting, tool_result

QUOTA_MIB = 50
#: What may pass the limit: the watchdog measures every 0.25 s, and ``head`` in a
#: loop writes some tens of MiB in that time on this machine.
WATCHDOG_SLACK_MIB = 64


@pytest_asyncio.fixture
async def box(skald: SkaldHarness, backend: str) -> AsyncIterator[Box]:
    yield await start_box(skald, backend, home_quota_mib=QUOTA_MIB)


def used_mib(box: Box, member_id: str) -> float:
    return home_usage(box.core.files.home(member_id)) / MIB


def fill_from_the_host(box: Box, member_id: str, mib: int) -> None:
    """Puts the home over its limit without the sandbox (allocated blocks, not a
    sparse file: the limit counts what is on disk)."""
    path = box.core.files.home(member_id) / "filler"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, mib * MIB)
    finally:
        os.close(fd)
    box.core.files.own(path, member_id)


async def assert_healthy(box: Box, member_id: str) -> None:
    result = await box.run(member_id, "echo still-here")
    assert (result.exit_code, result.output, result.disk_limit, result.over_limit) == (0, "still-here\n", False, False)
    assert (await box.host.client().get("/api/health")).status_code < 500


async def test_one_big_file_stops_at_the_file_size_limit(box: Box):
    result = await box.run(box.alice, f"dd if=/dev/zero of=big bs=1M count={QUOTA_MIB + 100} 2>&1; echo status=$?")
    assert "status=0" not in result.output, result.output
    assert used_mib(box, box.alice) <= QUOTA_MIB + 1
    assert os.path.getsize(box.core.files.home(box.alice) / "big") <= QUOTA_MIB * MIB
    await box.run(box.alice, "rm -f big")
    await assert_healthy(box, box.alice)


async def test_many_files_are_killed_by_the_watchdog_at_the_limit(box: Box):
    started = time.monotonic()
    # Paced at about 100 MiB/s at most: the watchdog kills 0.1-0.3 s after the home is
    # over, and unpaced a fast disk wrote past the slack in that time (the bound below
    # is what the README promises, not a race with the machine's speed).
    result = await box.run(box.alice, "for i in $(seq 1000); do head -c 1M /dev/zero > f$i; sleep 0.01; done; echo finished")
    elapsed = time.monotonic() - started
    assert result.disk_limit and result.exit_code is None and not result.timed_out, result
    assert "finished" not in result.output
    used = used_mib(box, box.alice)
    assert QUOTA_MIB < used <= QUOTA_MIB + WATCHDOG_SLACK_MIB, used
    assert elapsed < 15
    # Over its limit now: the next command is told so and may only shrink the home.
    result = await box.run(box.alice, "rm -f f*; echo removed")
    assert result.over_limit and "over its disk limit" in result.output and "removed" in result.output
    assert used_mib(box, box.alice) < 1
    await assert_healthy(box, box.alice)


async def test_a_home_over_its_limit_refuses_writes_with_a_message(box: Box):
    fill_from_the_host(box, box.alice, QUOTA_MIB + 10)
    result = await box.run(box.alice, "head -c 1M /dev/zero > more; echo status=$?; ls")
    assert result.over_limit
    assert result.output.startswith(f"[Refused to write: your home (~) uses {QUOTA_MIB + 10} MiB, over its disk limit of {QUOTA_MIB} MiB.")
    assert "status=0" not in result.output and "filler" in result.output
    assert used_mib(box, box.alice) <= QUOTA_MIB + 10 + 1
    # Many small files cannot get round the cap on each one: the home may not grow.
    # (Paced and long, so the kill, not the loop's end, finishes it — a fast machine once
    # wrote 2,000 files before the kill landed — and the growth until the kill stays
    # inside the slack below.)
    result = await box.run(box.alice, "mkdir -p many; for i in $(seq 100000); do echo x > many/f$i; sleep 0.001; done; echo finished")
    assert result.disk_limit and "finished" not in result.output
    # 1 MiB of folders and links allowed, then what is written until the kill lands.
    assert used_mib(box, box.alice) <= QUOTA_MIB + 10 + 1 + 8
    # The way out works: remove files, and commands are as before.
    assert (await box.run(box.alice, "rm -rf filler more many")).over_limit
    await assert_healthy(box, box.alice)
    # Another member's home was never limited by alice's.
    assert (await box.run(box.bob, "head -c 10M /dev/zero > ten; echo $?")).output == "0\n"


async def test_normal_commands_are_unaffected(box: Box):
    result = await box.run(box.alice, "head -c 5M /dev/zero > five; du -m five | cut -f1; python3 -c 'print(6*7)'; rm five")
    assert (result.exit_code, result.output, result.disk_limit, result.over_limit) == (0, "5\n42\n", False, False)
    await assert_healthy(box, box.alice)


async def test_the_file_tools_and_uploads_obey_the_limit(box: Box):
    member = await box.core.users.get(box.alice)
    files = MemberFiles(box.core, member)
    await files.write_text("notes.txt", "x" * 1000)
    fill_from_the_host(box, box.alice, QUOTA_MIB - 1)
    with pytest.raises(FileError, match="disk limit"):
        await files.write_text("big.txt", "y" * (2 * MIB))
    assert not (box.core.files.home(box.alice) / "big.txt").exists()
    with pytest.raises(UploadTooLarge, match="disk limit"):
        await box.core.files.save_upload(box.alice, "c1", "photo.bin", b"z" * (2 * MIB))
    # Shrinking a file is always allowed: the way out from the file tools.
    assert "Overwrote" in await files.write_text("notes.txt", "")


async def test_execute_cmd_tells_the_assistant_the_disk_limit_killed_the_command(skald, backend):
    loop = "for i in $(seq 1000); do head -c 1M /dev/zero > f$i; done"
    async with chatting(skald, backend, home_quota_mib=QUOTA_MIB) as (_box, server, alice):
        server.script(MODEL_A, [
            Reply(tool_calls=[ToolCall("execute_cmd", {"command": loop})]),
            Reply(tool_calls=[ToolCall("execute_cmd", {"command": "rm -f f*; echo freed"})]),
            Reply("Done."),
        ])
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Fill the disk.")
            # The first command's output is outside text (check E2): the second, which
            # the rules allow, asks first.
            card = await sock.wait_event(cid, "approval_required", timeout=60)
            await sock.approve(card["approval_id"])
            await sock.turn(cid, timeout=60)
        assert tool_result(server, 1).startswith(KILLED)
        freed = [m["content"] for m in server.requests_for(MODEL_A)[2].messages if m["role"] == "tool"][-1]
        assert freed.startswith("Exit code: 0\n[Refused to write: your home (~) uses") and freed.endswith("freed\n")

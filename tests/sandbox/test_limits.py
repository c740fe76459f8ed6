"""Check E4's runaway commands, on both backends: a fork bomb, a CPU spin meant to run
for 60 s and a ``sleep infinity`` are killed at their limit or timeout, leave no
process behind, and the sandbox and the host go on answering."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time

import docker
import psutil

from skald_host.builtins.sandbox_docker import container_name

from .support import Box, command_processes


async def assert_gone(box: Box, member_id: str, marker: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while command_processes(box.uid(member_id), marker):
        assert time.monotonic() < deadline, f"processes of {marker!r} survived: {command_processes(box.uid(member_id), marker)}"
        await asyncio.sleep(0.1)


async def assert_healthy(box: Box, member_id: str, within: float = 5.0) -> None:
    """The sandbox answers within ``within`` seconds, and so does the host over HTTP.
    (After a fork bomb the killed processes count against the member's process limit
    until the kernel has reaped them, so the first command may wait a moment.)"""
    started = time.monotonic()
    while True:
        result = await box.run(member_id, "echo still-here")
        if (result.exit_code, result.output) == (0, "still-here\n"):
            break
        assert time.monotonic() - started < within, result
        await asyncio.sleep(0.2)
    response = await box.host.client().get("/api/health")
    assert response.status_code < 500


async def test_sleep_infinity_is_killed_at_its_timeout(box: Box):
    marker = f"sleep-{secrets.token_hex(4)}"
    started = time.monotonic()
    result = await box.run(box.alice, f"bash -c 'exec -a {marker} sleep infinity'", timeout=1.5)
    assert result.timed_out and result.exit_code is None
    assert 1.4 < time.monotonic() - started < 8
    await assert_gone(box, box.alice, marker)
    await assert_healthy(box, box.alice)


async def test_a_sixty_second_cpu_spin_is_killed_at_its_timeout_with_what_it_started(box: Box):
    marker = f"spin-{secrets.token_hex(4)}"
    spin = f"python3 -c 'import time\nend = time.time() + 60\nwhile time.time() < end: pass' {marker}"
    started = time.monotonic()
    result = await box.run(box.alice, f"{spin} & {spin}; wait", timeout=2)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 10
    await assert_gone(box, box.alice, marker)
    await assert_healthy(box, box.alice)


async def test_a_fork_bomb_meets_the_pid_limit_and_is_killed(box: Box):
    marker = f"bomb-{secrets.token_hex(4)}"
    load_before = psutil.getloadavg()[0]
    result = await box.run(box.alice, f"bash -c 'bomb() {{ bomb | bomb & }}; bomb' {marker}", timeout=4)
    assert result.timed_out or result.exit_code is not None
    await assert_gone(box, box.alice, marker, within=15)
    # The limit held: the member's uid never owned more than the sandbox's pid budget.
    assert len(psutil.pids()) < 5000
    await assert_healthy(box, box.alice)
    assert (await box.run(box.bob, "echo bob-unaffected")).output == "bob-unaffected\n"
    assert psutil.getloadavg()[0] < load_before + 50


async def test_the_output_cap_holds_and_says_so(box: Box):
    result = await box.run(box.alice, "head -c 100000 /dev/zero | tr '\\0' x; echo; echo done")
    assert result.exit_code == 0
    assert result.truncated and len(result.output) == 4096 and set(result.output) == {"x"}


async def test_a_command_past_the_instance_timeout_is_capped(box: Box):
    """``timeout`` asks for 60 s; the instance allows 20 (LIMITS) — the cap wins."""
    started = time.monotonic()
    result = await box.run(box.alice, "sleep 1; echo ok", timeout=60)
    assert result.output == "ok\n" and time.monotonic() - started < 10
    box.core.sandbox.settings = dataclasses.replace(box.core.sandbox.settings, exec_timeout_seconds=1.0)
    result = await box.run(box.alice, "sleep 30", timeout=60)
    assert result.timed_out and time.monotonic() - started < 15


async def test_tmp_is_size_capped(box: Box):
    """/tmp is memory: a 10 GB write there must stop at the cap (a quarter of the
    sandbox's memory, 64 MiB here), not fill the host."""
    result = await box.run(box.alice, "head -c 200M /dev/zero > /tmp/big; echo status=$?; du -m /tmp/big | cut -f1; rm -f /tmp/big")
    assert "No space left on device" in result.output and "status=0" not in result.output
    assert int(result.output.split()[-1]) <= 64


async def test_a_command_holding_every_pid_is_still_killed_at_its_timeout(box: Box):
    """Sleepers forked until the pid limit is reached and kept there: the Docker
    backend's killer exec cannot even start (no pid left), so it restarts the
    container; bubblewrap's pid namespace dies with it."""
    marker = f"hog-{secrets.token_hex(4)}"
    started_at = lambda: docker.from_env().api.inspect_container(container_name(box.alice))["State"]["StartedAt"]  # noqa: E731
    await box.run(box.alice, "true")
    before = started_at() if box.backend == "docker" else None
    result = await box.run(box.alice, f"bash -c 'while :; do (exec -a {marker} sleep 1000) & done' 2>/dev/null", timeout=3)
    assert result.timed_out
    await assert_gone(box, box.alice, marker, within=15)
    await assert_healthy(box, box.alice)
    if box.backend == "docker":
        assert started_at() != before  # the escalation ran: the container was restarted

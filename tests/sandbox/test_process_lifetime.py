"""What a command starts ends with it (check E4's last part, issue 17 point 3), on both
backends: a ``setsid``, a daemon's double fork and a ``nohup`` — each made to leave the
command's process group, session or both — are gone after the command finishes, after
Stop, after its timeout and when the member logs out; a member's container goes when
they are locked and when the server stops, and one a crashed run left is removed at the
next boot. Absence is read from the machine itself: the host's process table (Docker's
containers share it) and ``docker top``, never from the tool's own answer."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest

from chat.support import MODEL_A, ChatSocket, new_conversation, types
from skald_host.builtins.sandbox_docker import LABEL_INSTANCE, container_name
from skald_host.testing import Reply, ToolCall

from .support import Box, command_processes, member_processes, start_box
from .test_execute_cmd import chatting

GONE_WITHIN = 15.0  # generous: the machine is shared; a kill lands in well under a second


def escapes(tag: str) -> tuple[str, list[str]]:
    """A shell snippet starting three long sleepers that try to outlive the command,
    and the marker each one's command line carries (``exec -a``)."""
    marks = [f"{tag}-{kind}-{secrets.token_hex(3)}" for kind in ("setsid", "daemon", "nohup")]
    sleeper = "bash -c 'exec -a {} sleep 777'"
    daemon = (
        "python3 -c \"import os, sys; os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0);"
        f" os.execvp('bash', ['bash', '-c', 'exec -a {marks[1]} sleep 777'])\" </dev/null >/dev/null 2>&1"
    )
    snippet = (
        f"setsid {sleeper.format(marks[0])} </dev/null >/dev/null 2>&1 & "  # a new session and group
        f"{daemon}; "  # fork, setsid, fork: reparented to the container's init
        f"nohup setsid {sleeper.format(marks[2])} </dev/null >/dev/null 2>&1 & "  # ignores SIGHUP, own session
    )
    return snippet, marks


async def running(uid: int, marks: list[str]) -> None:
    deadline = time.monotonic() + GONE_WITHIN
    while not all(command_processes(uid, m) for m in marks):
        assert time.monotonic() < deadline, f"not all started: {[m for m in marks if not command_processes(uid, m)]}"
        await asyncio.sleep(0.1)


async def gone(uid: int, marks: list[str], what: str) -> float:
    """Waits until no process carries a marker; returns how long that took."""
    started = time.monotonic()
    while left := [p.info["cmdline"] for m in marks for p in command_processes(uid, m)]:
        assert time.monotonic() - started < GONE_WITHIN, f"{what} left {left} running"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def container_processes(docker_engine: Any, member_id: str) -> list[str]:
    top = docker_engine.api.top(container_name(member_id), ps_args="-o pid,args")
    return [row[-1] for row in top["Processes"]]


def assert_only_init_left(box: Box, docker_engine: Any, member_id: str) -> None:
    """Docker: ``docker top`` shows tini and its idle child, nothing else. Bubblewrap:
    no process of the member's uid exists on the host at all."""
    if box.backend == "docker":
        assert sorted(container_processes(docker_engine, member_id)) == ["/usr/bin/tini -- sleep infinity", "sleep infinity"]
    else:
        assert member_processes(box.uid(member_id)) == []


@pytest.fixture
def engine(request: pytest.FixtureRequest, backend: str) -> Any:
    return request.getfixturevalue("docker_engine") if backend == "docker" else None


async def test_nothing_a_finished_command_started_outlives_it(box: Box, engine):
    snippet, marks = escapes("finished")
    result = await box.run(box.alice, f"{snippet} sleep 0.5; echo done")
    assert result.exit_code == 0 and result.output == "done\n", result
    await gone(box.uid(box.alice), marks, "a finished command")
    assert_only_init_left(box, engine, box.alice)
    # A sleeper that keeps the command's output open does not hold the answer back.
    started = time.monotonic()
    result = await box.run(box.alice, "setsid sleep 778 & echo quick", timeout=15)
    assert result.exit_code == 0 and not result.timed_out and result.output == "quick\n", result
    assert time.monotonic() - started < 10
    assert_only_init_left(box, engine, box.alice)


async def test_a_timeout_kills_what_the_command_started(box: Box, engine):
    snippet, marks = escapes("timeout")
    started = time.monotonic()
    result = await box.run(box.alice, f"{snippet} echo started; sleep 1000", timeout=3)
    print(f"\n{box.backend}: a 3 s timeout returned after {time.monotonic() - started:.2f} s")
    assert result.timed_out and result.exit_code is None and "started" in result.output, result
    await gone(box.uid(box.alice), marks, "a timeout")
    assert_only_init_left(box, engine, box.alice)


async def test_a_stop_kills_what_the_command_started(box: Box, engine):
    snippet, marks = escapes("stop")
    stop = asyncio.Event()
    task = asyncio.ensure_future(box.run(box.alice, f"{snippet} sleep 1000", cancelled=stop))
    await running(box.uid(box.alice), marks)
    stop.set()
    result = await asyncio.wait_for(task, 30)
    assert result.cancelled and result.exit_code is None, result
    await gone(box.uid(box.alice), marks, "a stop")
    assert_only_init_left(box, engine, box.alice)


async def test_a_stopped_command_does_not_kill_the_members_other_running_command(box: Box, engine):
    """The sweep waits for the member's last command: another one running meanwhile is
    left alone, and what the stopped one left is killed when that one ends."""
    snippet, marks = escapes("pair")
    other = f"other-{secrets.token_hex(3)}"
    uid = box.uid(box.alice)
    stop = asyncio.Event()
    stopped = asyncio.ensure_future(box.run(box.alice, f"{snippet} sleep 1000", cancelled=stop))
    survivor = asyncio.ensure_future(box.run(box.alice, f"bash -c 'exec -a {other} sleep 4'; echo survived"))
    await running(uid, [*marks, other])
    stop.set()
    assert (await asyncio.wait_for(stopped, 30)).cancelled
    result = await asyncio.wait_for(survivor, 30)
    assert result.exit_code == 0 and result.output == "survived\n", result
    await gone(uid, marks, "the end of the member's last command")
    assert_only_init_left(box, engine, box.alice)


async def test_stop_from_the_chat_kills_what_the_command_started(skald, backend, request):
    snippet, marks = escapes("chatstop")
    async with chatting(skald, backend) as (box, server, alice):
        server.script(MODEL_A, [Reply(tool_calls=[ToolCall("execute_cmd", {"command": f"{snippet} sleep 1000"})])])
        uid = box.uid(box.alice)
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Start some daemons.")
            await running(uid, marks)
            stopping = time.monotonic()
            assert (await sock.stop(cid))["stopped"] is True
            events = await sock.turn(cid, timeout=30)
            took = await gone(uid, marks, "/stop")
            print(f"\n{backend}: /stop to every escaped process gone: {time.monotonic() - stopping:.2f} s (after the turn ended: {took:.2f} s)")
        assert "tool_cancelled" in types(events)
        engine = request.getfixturevalue("docker_engine") if backend == "docker" else None
        assert_only_init_left(box, engine, box.alice)


async def test_logout_kills_a_running_command_and_everything_it_started(skald, backend, request):
    snippet, marks = escapes("logout")
    async with chatting(skald, backend) as (box, server, alice):
        server.script(MODEL_A, [Reply(tool_calls=[ToolCall("execute_cmd", {"command": f"{snippet} sleep 1000"})])])
        uid = box.uid(box.alice)
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Start some daemons.")
            await running(uid, marks)
            logging_out = time.monotonic()
            response = await alice.post("/api/auth/logout")
            assert response.status_code == 200, response.text
            await gone(uid, marks, "the logout")
            print(f"\n{backend}: logout to every process gone: {time.monotonic() - logging_out:.2f} s")
        assert not box.core.users.is_unlocked(box.alice)
        assert member_processes(uid) == []  # the container went with them
        if backend == "docker":
            import docker.errors

            with pytest.raises(docker.errors.NotFound):
                request.getfixturevalue("docker_engine").containers.get(container_name(box.alice))


async def test_the_container_goes_when_the_member_is_locked_and_returns_on_use(skald, docker_engine):
    box = await start_box(skald, "docker")
    alice = await box.host.member("alice")
    assert (await box.run(box.alice, "true")).exit_code == 0
    assert docker_engine.containers.get(container_name(box.alice)).status == "running"
    started = time.monotonic()
    assert (await alice.post("/api/auth/logout")).status_code == 200
    took = time.monotonic() - started
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(container_name(box.alice))
    await box.host.member("alice")
    started = time.monotonic()
    assert (await box.run(box.alice, "echo back")).output == "back\n"
    print(f"\ndocker: logout removing the container {took:.2f} s; first command after, rebuilding it {time.monotonic() - started:.2f} s")


async def test_the_containers_go_when_the_server_stops(skald, docker_engine):
    box = await start_box(skald, "docker")
    snippet, marks = escapes("serverstop")
    for member in (box.alice, box.bob):
        assert (await box.run(member, "true")).exit_code == 0
    task = asyncio.ensure_future(box.run(box.alice, f"{snippet} sleep 1000"))
    await running(box.uid(box.alice), marks)
    instance, uids = box.core.sandbox.instance, (box.uid(box.alice), box.uid(box.bob))
    stopping = time.monotonic()
    await box.host.stop()
    print(f"\ndocker: server stop with two containers: {time.monotonic() - stopping:.2f} s")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    names = {c.name for c in docker_engine.containers.list(all=True, filters={"label": f"{LABEL_INSTANCE}={instance}"})}
    assert names == set()
    assert [member_processes(uid) for uid in uids] == [[], []]


async def test_a_container_a_crashed_run_left_is_removed_at_the_next_boot(skald, docker_engine):
    """A crash (SIGKILL) removes nothing; at the next boot nobody is unlocked, so the
    reconcile removes every container of this instance that was not used since."""
    box = await start_box(skald, "docker")
    manager = box.core.sandbox
    backend = (await manager.backend())[1]
    await backend.ensure(await manager.spec_for(box.bob))  # as a previous run left it, bob locked
    assert (await box.run(box.alice, "true")).exit_code == 0  # alice's: in use since this boot
    await manager.reconcile()
    import docker.errors

    with pytest.raises(docker.errors.NotFound):
        docker_engine.containers.get(container_name(box.bob))
    assert docker_engine.containers.get(container_name(box.alice)).status == "running"


async def test_a_sweep_touches_only_the_members_own_sandbox(box: Box, engine):
    """Another member's running command and a process of the host itself outlive the
    end of alice's command and its sweep."""
    bobs = f"bobs-{secrets.token_hex(3)}"
    stop = asyncio.Event()
    running_for_bob = asyncio.ensure_future(box.run(box.bob, f"bash -c 'exec -a {bobs} sleep 1000'", cancelled=stop))
    hosts = await asyncio.create_subprocess_exec("sleep", "1000")
    try:
        await running(box.uid(box.bob), [bobs])
        snippet, marks = escapes("mine")
        assert (await box.run(box.alice, f"{snippet} true")).exit_code == 0
        await gone(box.uid(box.alice), marks, "alice's command")
        assert command_processes(box.uid(box.bob), bobs) and hosts.returncode is None
    finally:
        stop.set()
        hosts.kill()
        await hosts.wait()
        await asyncio.wait_for(running_for_bob, 30)


async def test_without_a_view_of_the_hosts_processes_the_sweeper_runs_in_the_container(skald, docker_engine, monkeypatch):
    """An unprivileged host or a remote engine cannot sweep through ``/proc``: the
    bash sweeper does it from inside the container, with the same result."""
    import skald_host.builtins.sandbox_docker as sandbox_docker

    used = []
    monkeypatch.setattr(sandbox_docker, "sweep_from_host", lambda api, name: used.append(name) and False)
    box = await start_box(skald, "docker")
    snippet, marks = escapes("inside")
    result = await box.run(box.alice, f"{snippet} echo done")
    assert result.output == "done\n" and used, result
    await gone(box.uid(box.alice), marks, "the in-container sweeper")
    assert_only_init_left(box, docker_engine, box.alice)


async def test_an_engine_that_hangs_holds_a_logout_and_a_stop_only_for_their_bounds(skald, docker_engine, monkeypatch):
    """Removal runs on a thread and is waited for within a bound: an engine that never
    answers delays a logout by ``RETIRE_SECONDS`` and a server stop by ``CLOSE_SECONDS``,
    and the event loop serves meanwhile."""
    import threading

    import skald_host.core.sandbox.manager as manager_module

    monkeypatch.setattr(manager_module, "RETIRE_SECONDS", 1.0)
    monkeypatch.setattr(manager_module, "CLOSE_SECONDS", 1.0)
    box = await start_box(skald, "docker")
    alice = await box.host.member("alice")
    assert (await box.run(box.alice, "true")).exit_code == 0
    backend = (await box.core.sandbox.backend())[1]
    release, calls = threading.Event(), []
    monkeypatch.setattr(backend, "_remove", lambda member_id: calls.append(member_id) or release.wait(60))
    try:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        ticking = asyncio.ensure_future(tick())
        started = time.monotonic()
        assert (await alice.post("/api/auth/logout")).status_code == 200
        logout = time.monotonic() - started
        started = time.monotonic()
        await box.host.stop()
        stop = time.monotonic() - started
        ticking.cancel()
        assert calls and logout < 10 and stop < 10, (calls, logout, stop)
        assert ticks >= 10  # the loop ran while both waited
        print(f"\nhanging engine: logout {logout:.2f} s, server stop {stop:.2f} s")
    finally:
        release.set()
        # The stand-in removal removed nothing: take the container away here, so no
        # later test meets it (its processes run as the uid the next member gets).
        import docker.errors

        try:
            docker_engine.containers.get(container_name(box.alice)).remove(force=True)
        except (docker.errors.NotFound, docker.errors.APIError):
            pass

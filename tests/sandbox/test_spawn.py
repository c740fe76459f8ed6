"""``HostApi.sandbox_spawn`` (contract 1.2) on each backend: a long-lived command in the
member's sandbox with its standard streams — as the member's uid, in their home, with
the given environment, never through a shell — that answers line by line until it is
killed, and whose kill takes it down; bad arguments are refused with a message."""

from __future__ import annotations

import asyncio

import pytest

from .support import member_processes

ECHO = "import os, sys\nprint(os.getuid(), os.getcwd(), os.environ.get('SPAWN_TOKEN'), flush=True)\nfor line in sys.stdin:\n    print('got ' + line.strip(), flush=True)\n"


async def test_spawned_command_streams_as_the_member_and_dies_when_killed(box):
    api = box.core.host_api("sandbox-test")
    process = await api.sandbox_spawn(box.alice, ["/usr/bin/python3", "-c", ECHO, "; touch /tmp/not-a-shell"], env={"SPAWN_TOKEN": "t-1"})
    first = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().split()
    spec = await box.core.sandbox.spec_for(box.alice)
    assert first == [str(spec.uid), spec.home, "t-1"]
    for word in ("one", "two"):
        process.stdin.write(f"{word}\n".encode())
        await process.stdin.drain()
        assert (await asyncio.wait_for(process.stdout.readline(), 10)).decode() == f"got {word}\n"
    assert process.returncode is None
    process.kill()
    await asyncio.wait_for(process.wait(), 20)

    async def gone() -> bool:
        return not [p for p in member_processes(box.uid(box.alice)) if "SPAWN_TOKEN" in " ".join(p.info["cmdline"] or ()) or ECHO[:20] in " ".join(p.info["cmdline"] or ())]

    for _ in range(100):
        if await gone():
            break
        await asyncio.sleep(0.1)
    assert await gone()
    result = await box.run(box.alice, "ls /tmp/not-a-shell 2>&1 || true")
    assert "No such file" in result.output  # the argument was an argument, not shell text


async def test_spawn_refuses_bad_arguments(box):
    api = box.core.host_api("sandbox-test")
    for argv, env in (([], None), (["x\x00y"], None), ("python3", None), (["python3"], {"A=B": "1"}), (["python3"], {"A": 1})):
        with pytest.raises(ValueError):
            await api.sandbox_spawn(box.alice, argv, env=env)

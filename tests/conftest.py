"""The host's tests use the same ``skald`` fixture plugin authors get (pytest11),
checked here for one thing more: what its hosts' sandboxes leave behind."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from durability.helpers import Servers
from skald_host.core.files import service as files_service
from skald_host.testing import SkaldHarness

# ``small_disk``: a real small tmpfs for check G4 (tests/disk.py).
pytest_plugins = ["tests.disk"]


def _worker(config: pytest.Config) -> str:
    """This process's pytest-xdist worker id ("gw0", "gw1"), or "" when not one."""
    return getattr(config, "workerinput", {}).get("workerid", "")


def pytest_configure(config: pytest.Config) -> None:
    """`make test` runs two pytest-xdist workers on one machine. Each host gives its
    members sandbox uids from FIRST_UID up, so both workers' first members would share
    a uid, and a test that counts a member's processes by uid would count the other
    worker's too: each worker's hosts take their own range."""
    worker = _worker(config)
    if worker.startswith("gw") and worker[2:].isdigit():
        files_service.FIRST_UID += 10_000 * int(worker[2:])


#: A removal past the server's own bound (``CLOSE_SECONDS``) still finishes.
LEFT_CONTAINER_WAIT = 30.0


@pytest_asyncio.fixture
async def skald(skald: SkaldHarness) -> AsyncIterator[SkaldHarness]:
    """The kit's harness; once its hosts are stopped, no Docker container of theirs may
    be left (``auto`` picks Docker wherever an engine answers, so any test running a
    command builds one). A leaked container runs on under a uid the next test's first
    member gets too, and would fail that test instead of the one that leaked it."""
    sandboxes: list[Any] = []
    start = skald.start

    async def start_recorded(*args: Any, **kwargs: Any) -> Any:
        host = await start(*args, **kwargs)
        sandboxes.append(host.core.sandbox)
        return host

    skald.start = start_recorded  # type: ignore[method-assign]
    yield skald
    await skald.close()
    docker_backends = [s for s in sandboxes if s._chosen is not None and s._chosen[0] == "docker" and s.instance]
    if not docker_backends:
        return
    from skald_host.builtins.sandbox_docker import LABEL_INSTANCE

    client = docker_backends[0]._chosen[1]._docker()
    deadline = time.monotonic() + LEFT_CONTAINER_WAIT
    while True:
        left = [
            container.name
            for sandbox in docker_backends
            for container in client.containers.list(all=True, filters={"label": f"{LABEL_INSTANCE}={sandbox.instance}"})
        ]
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert not left, f"the stopped hosts left these sandbox containers: {left}"


@pytest_asyncio.fixture
async def servers(tmp_path) -> AsyncIterator[Servers]:
    """Start ``skald serve`` subprocesses on ``tmp_path / "data"``; every one still
    running at teardown is SIGKILLed (the crash and upgrade tests' real servers)."""
    factory = Servers(tmp_path)
    try:
        yield factory
    finally:
        await factory.close()


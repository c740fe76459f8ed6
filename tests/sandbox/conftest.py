"""Fixtures of the sandbox tests: a real Docker engine (started here when none
answers), the sandbox image (built from ``sandbox/image/build-rootfs.sh`` when
missing), real bubblewrap, and hosts whose sandbox runs on either backend with small
limits so a limit is reached in seconds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
import pytest_asyncio

from skald_host.builtins.sandbox_bwrap import BubblewrapBackend
from skald_host.builtins.sandbox_docker import LABEL_MEMBER
from skald_host.testing import SkaldHarness

from .support import BACKENDS, Box, start_box

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "skald-sandbox:2"
ENGINE_WAIT_SECONDS = 30


def _skip(reason: str) -> None:
    print(f"\nSKIPPING sandbox tests on this backend: {reason}", file=sys.stderr)
    pytest.skip(reason)


def _ping() -> Any:
    import docker

    try:
        client = docker.from_env(timeout=5)
        client.ping()
        return client
    except Exception:
        return None


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A Docker client whose engine answers and has the sandbox image. Containers the
    tests create are removed at the end; a dockerd started here is stopped again."""
    client = _ping()
    started: subprocess.Popen[bytes] | None = None
    # Under pytest-xdist (`make test`) the workers share the machine's engine: none may
    # start one of its own (two would fight over the socket), and none may remove at its
    # end the containers the other is still using (the ``skald`` fixture checks each
    # test left none of its own).
    parallel = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    if client is None:
        if parallel:
            _skip("no Docker engine answers; a parallel run does not start one (start dockerd first, as .ci/run does)")
        if shutil.which("dockerd") is None:
            _skip("no Docker engine answers and dockerd is not installed (apt-get install docker.io)")
        if os.geteuid() != 0:
            _skip("no Docker engine answers and only root can start dockerd here")
        log = tempfile.NamedTemporaryFile(prefix="dockerd-", suffix=".log", delete=False)
        started = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + ENGINE_WAIT_SECONDS
        while client is None and time.monotonic() < deadline and started.poll() is None:
            time.sleep(0.5)
            client = _ping()
        if client is None:
            started.terminate()
            _skip(f"dockerd did not answer within {ENGINE_WAIT_SECONDS} s (log: {log.name})")
    import docker.errors

    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        if parallel:  # both workers would build it at once
            _skip(f"the sandbox image {IMAGE} is not built; a parallel run does not build it (make sandbox-image first)")
        subprocess.run([str(ROOT / "sandbox/image/build-rootfs.sh"), IMAGE], check=True, timeout=1200)
    before = {c.id for c in client.containers.list(all=True, filters={"label": LABEL_MEMBER})}
    yield client
    for container in [] if parallel else client.containers.list(all=True, filters={"label": LABEL_MEMBER}):
        if container.id not in before:
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as error:
                # A removal the server began (one a test left past its bound) still runs.
                if error.status_code != 409:
                    raise
    client.close()
    if started is not None:
        started.terminate()
        started.wait(30)


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    reason = BubblewrapBackend().available()
    if reason is not None:
        _skip(f"bubblewrap cannot run here: {reason}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each test using this runs once per backend; a backend that cannot run here is
    skipped with its reason."""
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    else:
        request.getfixturevalue("bwrap_ready")
    return request.param


@pytest_asyncio.fixture
async def box(skald: SkaldHarness, backend: str) -> AsyncIterator[Box]:
    yield await start_box(skald, backend)

"""``execute_cmd``'s round trip in each backend against the bare tool running the same
command (issue 5's target: at most 1.2x). The host side is the real path —
``SandboxManager.execute``: spec, ensure (the drift check), the session wrapper, the
capture — on a real host; the baseline is the same ``true`` through the Docker SDK's
plain exec on the same container, and a bare ``bwrap`` with the same namespaces."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from skald_host.builtins.sandbox_docker import container_name
from skald_host.testing import SkaldHarness

ROUNDS = 40
TARGET_RATIO = 1.2


def _summary(name: str, ours: list[float], bare: list[float]) -> None:
    ours_ms, bare_ms = statistics.median(ours) * 1000, statistics.median(bare) * 1000
    ratio = ours_ms / bare_ms
    verdict = "ok" if ratio <= TARGET_RATIO else f"over the {TARGET_RATIO}x target"
    print(f"{name:<11} execute_cmd p50 {ours_ms:7.1f} ms   bare p50 {bare_ms:7.1f} ms   ratio {ratio:4.2f}x  {verdict}")


async def _time(fn, rounds: int = ROUNDS) -> list[float]:
    await fn()  # warm: the first call builds the container
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - started)
    return samples


async def _docker(harness: SkaldHarness) -> None:
    import docker

    host = await harness.start(settings=harness.settings("docker", sandbox={"backend": "docker"}))
    member = (await host.create_member("bench"))["id"]
    ours = await _time(lambda: host.core.sandbox.execute(member, "true"))
    api = docker.from_env().api
    uid = host.core.files.uid_for(member)

    def bare_exec() -> None:
        exec_id = api.exec_create(container_name(member), ["/bin/sh", "-c", "true"], user=f"{uid}:{uid}")["Id"]
        api.exec_start(exec_id)
        api.exec_inspect(exec_id)

    bare = await _time(lambda: asyncio.to_thread(bare_exec))
    await host.core.sandbox.remove(member)
    _summary("docker", ours, bare)


async def _bwrap(harness: SkaldHarness) -> None:
    host = await harness.start(settings=harness.settings("bwrap", sandbox={"backend": "bubblewrap"}))
    member = (await host.create_member("bench"))["id"]
    ours = await _time(lambda: host.core.sandbox.execute(member, "true"))
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/bin/sh", "-c", "true"]

    async def bare_bwrap() -> None:
        process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        await process.communicate()

    bare = await _time(bare_bwrap)
    _summary("bubblewrap", ours, bare)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        harness = SkaldHarness(Path(tmp))
        try:
            for name, run in (("docker", _docker), ("bubblewrap", _bwrap)):
                try:
                    await run(harness)
                except Exception as exc:  # a backend this machine lacks: say so, go on
                    print(f"{name:<11} not measured: {exc}")
        finally:
            await harness.close()


if __name__ == "__main__":
    asyncio.run(main())

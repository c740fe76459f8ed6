"""Helpers of the sandbox tests: a host on one backend with two members, and the
host-side view of a member's processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skald_host.testing import RunningHost, SkaldHarness

BACKENDS = ("docker", "bubblewrap")
#: Small on purpose: a fork bomb meets its pid limit and a spin its timeout quickly.
LIMITS = {"pids": 64, "memory_mib": 256, "cpus": 0.5, "exec_timeout_seconds": 20.0, "output_limit_bytes": 4096}


@dataclass
class Box:
    """A running host whose sandbox uses ``backend``, and two members."""

    backend: str
    host: RunningHost
    alice: str
    bob: str

    @property
    def core(self) -> Any:
        return self.host.core

    async def run(self, member_id: str, command: str, **options: Any) -> Any:
        return await self.core.sandbox.execute(member_id, command, **options)

    def uid(self, member_id: str) -> int:
        return self.core.files.uid_for(member_id)


async def start_box(skald: SkaldHarness, backend: str, **sandbox: Any) -> Box:
    settings = skald.settings(sandbox={"backend": backend, **LIMITS, **sandbox})
    host = await skald.start(settings=settings)
    alice = (await host.create_member("alice"))["id"]
    bob = (await host.create_member("bob"))["id"]
    return Box(backend, host, alice, bob)


def member_processes(uid: int) -> list[Any]:
    """Every process on this machine running as ``uid`` — the sandbox's, whichever
    backend (Docker's containers share the host's process table)."""
    import psutil

    found = []
    for process in psutil.process_iter(["uids", "cmdline", "status"]):
        try:
            if process.info["uids"] and process.info["uids"].real == uid and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def command_processes(uid: int, marker: str) -> list[Any]:
    return [p for p in member_processes(uid) if marker in " ".join(p.info["cmdline"] or [])]

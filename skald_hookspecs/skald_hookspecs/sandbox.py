"""The sandbox contract: where a member's shell commands run.

A backend is registered through ``register_sandbox_backends`` (``register(name,
backend)``). The host picks one by the ``sandbox.backend`` setting or, when that is
``auto``, the first available in preference order (docker, then bubblewrap); with none
available ``execute_cmd`` is refused with a message saying what to install. A member's
command never runs on the bare host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from skald_hookspecs.types import ToolError


class SandboxUnavailable(RuntimeError, ToolError):
    """No sandbox can run a member's command here (no backend available, or the chosen
    one failed to build it). The message says what to install or fix; it is shown to
    the agent and the member as it is (it is a ``ToolError``, since 1.2)."""


@dataclass(frozen=True)
class Mount:
    """One host folder made visible inside a member's sandbox.

    ``source`` is an absolute, canonical host path the host has already checked;
    ``target`` is the absolute path inside the sandbox (``/home/member/...``).
    """

    source: Path
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class SandboxSpec:
    """Everything a backend needs to build (or reuse) one member's sandbox.

    ``uid``/``gid`` are the non-root ids commands run as, with the supplementary
    ``groups`` and umask 002 (so members writing one shared folder can change each
    other's files); ``home`` is the target of the member's home mount; ``image`` names
    the root filesystem for backends that have one (Docker); ``instance`` names the
    Skald instance that owns the sandbox (several may share one Docker engine);
    ``network`` is off unless the instance configured it. The backend must rebuild the
    sandbox when any field differs from the running one (self-healing on drift: image
    tag, user, mounts, limits).
    """

    member_id: str
    instance: str
    uid: int
    gid: int
    home: str
    groups: tuple[int, ...] = ()
    mounts: tuple[Mount, ...] = ()
    image: str = ""
    network: bool = False
    memory_bytes: int = 1024 * 1024 * 1024
    cpus: float = 1.0
    pids: int = 256
    env: Mapping[str, str] = field(default_factory=dict)
    #: ``RLIMIT_FSIZE`` for a command, in bytes (no file it writes may grow past it),
    #: set by the host per command to the room left in the member's home; None: no cap.
    #: A per-command limit, not part of what the sandbox is built from.
    file_size_bytes: int | None = None


@dataclass(frozen=True)
class ExecResult:
    """What a finished (or killed) command left: its exit code (None when it was killed
    by a timeout or a stop), its output (stdout and stderr interleaved, truncated to the
    cap with ``truncated`` set), and why it ended early if it did."""

    exit_code: int | None
    output: str
    truncated: bool = False
    timed_out: bool = False
    cancelled: bool = False
    #: Killed by the host because the member's home passed its disk limit.
    disk_limit: bool = False
    #: The home was over its disk limit when the command started, so it ran without
    #: the right to write (the output begins with a notice saying so).
    over_limit: bool = False
    #: Stopped by the host because the member's access to a folder the command could
    #: reach was withdrawn or made read-only while it ran (its mounts were fixed when
    #: it started): the sentence saying which, for the model and the member (since 1.12).
    access_changed: str | None = None


@runtime_checkable
class SandboxProcess(Protocol):
    """A long-lived command in a member's sandbox with its standard streams (since
    1.2): ``stdin`` is written to (``write``, ``drain``, ``close``, as an
    ``asyncio.StreamWriter``), ``stdout`` read from (an ``asyncio.StreamReader``);
    stderr is discarded. ``kill`` ends the command and everything it started."""

    stdin: Any
    stdout: Any

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def kill(self) -> None: ...


@runtime_checkable
class SandboxBackend(Protocol):
    """Where members' commands run. Besides the methods below, a backend may implement
    (since 1.2) ``async spawn(spec, argv, *, workdir, env) -> SandboxProcess``: start
    ``argv`` (no shell) as ``spec.uid`` in ``workdir`` with ``env`` added, with its
    standard input and output connected, under the sandbox's limits but without a
    time limit, living until it exits or is killed (``remove`` kills it too). Without
    it, ``HostApi.sandbox_spawn`` is refused with ``SandboxUnavailable``.

    A sandbox's mounts may be fixed when a command starts (bubblewrap) or when the
    sandbox is built (Docker): when a member's folder access shrinks, the host stops
    the commands and kills the long-lived processes that started with the wider
    access (since 1.12), so a backend need not remount anything live."""

    name: str

    def available(self) -> str | None:
        """None when this backend can run here, else a one-line reason with what to
        install (shown when ``execute_cmd`` is refused). Must be cheap and not block
        for long: the host calls it from a worker thread at startup."""

    async def ensure(self, spec: SandboxSpec) -> None:
        """Make the member's sandbox exist and match ``spec`` (create, reuse or rebuild)."""

    async def execute(
        self,
        spec: SandboxSpec,
        command: str,
        *,
        workdir: str,
        timeout: float,
        output_limit: int,
        cancelled: object | None = None,
    ) -> ExecResult:
        """Run ``command`` with ``/bin/sh -c`` as ``spec.uid`` in ``workdir`` (a sandbox
        path). When ``timeout`` passes or ``cancelled`` (an ``asyncio.Event``) is set,
        kill everything the command started and return what was captured. Nothing it
        started may outlive it: kill by what a process cannot leave (a pid namespace, a
        container), not by a process group or session, which ``setsid`` leaves."""

    async def remove(self, member_id: str) -> None:
        """Tear the member's sandbox down with everything running in it: called when the
        member is locked (logout of their last session, revocation, expiry), deactivated
        or deleted, and at server stop; the next ``ensure`` builds it again."""

    async def existing(self, instance: str) -> list[str]:
        """The member ids that have a sandbox of ``instance`` right now (long-lived
        ones, e.g. a container; ``[]`` for a backend that keeps nothing between
        commands). The host reconciles these at boot: what a previous run left (a
        crash removes nothing) is removed, unless its member is unlocked. Another
        instance's sandboxes are never listed."""

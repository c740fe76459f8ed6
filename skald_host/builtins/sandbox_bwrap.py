"""The bubblewrap sandbox backend, for machines without a Docker engine.

Each command gets a fresh ``bwrap`` sandbox: every namespace unshared, the network one
always (sharing it would hand commands the host's loopback services and there is no
egress filter here, so ``sandbox.network`` needs the Docker backend; a command run with
it on says so), its own pid namespace (killing bwrap kills everything inside),
the host's ``/usr`` read-only and nothing else of the host but the member's folders —
home read-write, memberships read-only where the membership is, memory signposts
read-only. When the host runs as root the command is dropped to the member's uid with
``setpriv`` before bwrap starts, so it is that uid on the host too (another member's
0700 home is closed to it by plain permissions). Limits for the whole sandbox (memory,
processes, CPUs, as Docker's) come from a cgroup per member where the host lets the
server make one (``sandbox_cgroups``); ``prlimit`` adds its per-process limits
(processes, address space, CPU seconds, file size) everywhere, and is all there is
where no cgroup can be made — the plugin then says so on the admin status page.

Nothing outlives its command, whatever it does (``setsid``, a double fork, ``nohup``):
bwrap's init is pid 1 of the command's pid namespace and exits when the command's
shell does, and the kernel then kills every process left in that namespace, which no
process can leave. A timeout or a stop kills bwrap's process group; ``--die-with-parent``
takes the namespace's init, and so the namespace, with it. ``remove`` (the member
locked, deactivated or deleted, the server stopping) does the same to every command
the member still has running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
from typing import Any

from skald_hookspecs import hookimpl
from skald_hookspecs.sandbox import ExecResult, SandboxSpec, SandboxUnavailable
from skald_hookspecs.types import PluginInfo

from .sandbox_cgroups import Cgroups, CgroupsUnavailable, Limits

HOST_DIRS = ("/usr",)
USR_LINKS = (("usr/bin", "/bin"), ("usr/sbin", "/sbin"), ("usr/lib", "/lib"), ("usr/lib64", "/lib64"))
ETC_FILES = ("/etc/ld.so.cache", "/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/localtime")
PATH = "/usr/local/bin:/usr/bin:/bin"
READ_CHUNK = 65536
NO_NETWORK_NOTE = "(sandbox.network is on, but the bubblewrap sandbox has no network: network access needs the Docker backend)\n"


class BubblewrapBackend:
    name = "bubblewrap"

    def __init__(self) -> None:
        self._running: dict[str, set[asyncio.subprocess.Process]] = {}
        self.cgroups, self.cgroups_refusal = _detect_cgroups()

    def _join_cgroup(self, spec: SandboxSpec) -> list[str]:
        """The prefix that runs the command in the member's cgroup (nothing where no
        cgroup can be made). Fails closed: a cgroup that cannot be set up refuses the
        command rather than run it without its whole-sandbox limits."""
        if self.cgroups is None:
            return []
        try:
            return self.cgroups.place(spec.instance, spec.member_id, Limits(spec.memory_bytes, spec.pids, spec.cpus))
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox's cgroup could not be set up: {exc}") from None

    def available(self) -> str | None:
        missing = [tool for tool in ("bwrap", "prlimit") + (("setpriv",) if os.geteuid() == 0 else ()) if not shutil.which(tool)]
        if missing:
            return f"{', '.join(missing)} not found; install bubblewrap and util-linux"
        probe = self._argv_prefix(65534, 65534, pids=64, memory=256 * 1024 * 1024, cpu_seconds=5)
        try:
            done = subprocess.run(
                [*probe, "--chdir", "/", *self._argv_command(65534, 65534, (), "exit 0")],
                capture_output=True, timeout=10, env={"PATH": PATH},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap cannot start a sandbox here ({exc})"
        if done.returncode != 0:
            reason = done.stderr.decode(errors="replace").strip().splitlines()
            return f"bwrap cannot start a sandbox here ({reason[-1] if reason else done.returncode}); user namespaces may be off"
        return None

    def _argv_prefix(
        self, uid: int, gid: int, *, pids: int, memory: int, cpu_seconds: int, file_size: int | None = None,
    ) -> list[str]:
        fsize = [] if file_size is None else [f"--fsize={file_size}"]
        argv = ["prlimit", f"--nproc={pids}", f"--as={memory}", f"--cpu={cpu_seconds}", "--core=0", *fsize, "--", "bwrap"]
        argv += ["--unshare-net", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        argv += ["--die-with-parent", "--new-session"]
        if os.geteuid() == 0:
            # Privileged bwrap makes the mounts, then keeps only what setpriv needs to
            # become the member; setpriv drops even that before the command starts.
            argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        else:
            argv += ["--unshare-user", "--uid", str(uid), "--gid", str(gid)]
        for folder in HOST_DIRS:
            argv += ["--ro-bind", folder, folder]
        for target, link in USR_LINKS:
            if os.path.exists("/" + target):
                argv += ["--symlink", target, link]
        for path in ETC_FILES:
            argv += ["--ro-bind-try", path, path]
        tmp_bytes = max(16 * 1024 * 1024, memory // 4)  # as the Docker backend's /tmp
        argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
        argv += ["--clearenv", "--setenv", "PATH", PATH]
        return argv

    def _argv_command(self, uid: int, gid: int, groups: tuple[int, ...], command: str) -> list[str]:
        drop = []
        if os.geteuid() == 0:
            drop = [
                "setpriv", f"--reuid={uid}", f"--regid={gid}",
                f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
            ]
        return [*drop, "/bin/sh", "-c", command]

    async def ensure(self, spec: SandboxSpec) -> None:
        """Nothing lives between commands; only check the mounts can be made."""
        for mount in spec.mounts:
            if not mount.source.is_dir():
                raise SandboxUnavailable(f"a folder for the sandbox is missing: {mount.target}")

    async def execute(
        self,
        spec: SandboxSpec,
        command: str,
        *,
        workdir: str,
        timeout: float,
        output_limit: int,
        cancelled: asyncio.Event | None = None,
    ) -> ExecResult:
        argv = self._argv_prefix(
            spec.uid, spec.gid, pids=spec.pids, memory=spec.memory_bytes,
            cpu_seconds=max(1, int(timeout) + 1), file_size=spec.file_size_bytes,
        )
        # The folders are opened here, by the host, and handed over as descriptors: the
        # dropped uid could not even traverse the data dir, and a descriptor cannot be
        # swapped for a symlink between the check and the mount.
        above_home = os.path.dirname(spec.home.rstrip("/"))
        if above_home not in ("", "/"):
            argv += ["--perms", "0755", "--dir", above_home]  # bwrap makes new folders 0700 for root
        fds: list[int] = []
        try:
            made: set[str] = set()
            for mount in sorted(spec.mounts, key=lambda m: m.target.count("/")):
                fd = os.open(mount.source, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                fds.append(fd)
                ancestor = os.path.dirname(mount.target)
                while ancestor.startswith(spec.home + "/") and ancestor not in made:
                    made.add(ancestor)
                    argv += ["--perms", "0755", "--dir", ancestor]  # e.g. ~/shared above ~/shared/X
                    ancestor = os.path.dirname(ancestor)
                argv += ["--ro-bind-fd" if mount.read_only else "--bind-fd", str(fd), mount.target]
            for key, value in spec.env.items():
                argv += ["--setenv", key, value]
            argv += ["--chdir", workdir, *self._argv_command(spec.uid, spec.gid, spec.groups, command)]
            argv = [*self._join_cgroup(spec), *argv]
            spawning = asyncio.ensure_future(asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True, env={"PATH": PATH}, pass_fds=fds,
                umask=0o002,  # as in every backend: write-members of a shared folder share its files
            ))
            try:
                process = await asyncio.shield(spawning)
            except asyncio.CancelledError:
                # Stopped while bwrap was being started: it may be running already.
                with contextlib.suppress(Exception):
                    _kill_group(await spawning)
                raise
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox could not be started: {exc}") from None
        finally:
            for fd in fds:
                os.close(fd)
        running = self._running.setdefault(spec.member_id, set())
        running.add(process)
        parts: list[bytes] = []
        state = {"size": 0, "truncated": False}

        async def read() -> None:
            assert process.stdout is not None
            while chunk := await process.stdout.read(READ_CHUNK):
                room = output_limit - state["size"]
                if len(chunk) > room:
                    chunk, state["truncated"] = chunk[: max(room, 0)], True
                if chunk:
                    parts.append(chunk)
                    state["size"] += len(chunk)
            await process.wait()

        reader = asyncio.ensure_future(read())
        stop = asyncio.ensure_future(cancelled.wait()) if cancelled is not None else None
        try:
            done, _ = await asyncio.wait({reader, *([stop] if stop else [])}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            _kill_group(process)
            reader.cancel()
            running.discard(process)
            raise
        finally:
            if stop is not None:
                stop.cancel()
        note = NO_NETWORK_NOTE if spec.network else ""
        output = lambda: note + b"".join(parts).decode("utf-8", errors="replace")  # noqa: E731
        if reader in done:
            running.discard(process)
            return ExecResult(process.returncode, output(), state["truncated"])
        _kill_group(process)
        try:
            await asyncio.wait_for(reader, 5.0)
        except asyncio.TimeoutError:
            reader.cancel()
        running.discard(process)
        was_cancelled = stop is not None and stop in done
        return ExecResult(None, output(), state["truncated"], timed_out=not was_cancelled, cancelled=was_cancelled)

    async def spawn(self, spec: SandboxSpec, argv: list[str], *, workdir: str, env: dict[str, str]) -> "_Spawned":
        """A long-lived command with its streams (contract 1.2): the same sandbox as
        ``execute`` (namespaces, mounts, uid, process and memory limits) but no CPU-time
        limit, stdin and stdout connected, stderr discarded."""
        argv_prefix = self._argv_prefix(spec.uid, spec.gid, pids=spec.pids, memory=spec.memory_bytes, cpu_seconds=0)
        argv_prefix = [a for a in argv_prefix if a != "--cpu=0"]
        fds: list[int] = []
        full = list(argv_prefix)
        above_home = os.path.dirname(spec.home.rstrip("/"))
        if above_home not in ("", "/"):
            full += ["--perms", "0755", "--dir", above_home]
        try:
            made: set[str] = set()
            for mount in sorted(spec.mounts, key=lambda m: m.target.count("/")):
                fd = os.open(mount.source, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                fds.append(fd)
                ancestor = os.path.dirname(mount.target)
                while ancestor.startswith(spec.home + "/") and ancestor not in made:
                    made.add(ancestor)
                    full += ["--perms", "0755", "--dir", ancestor]
                    ancestor = os.path.dirname(ancestor)
                full += ["--ro-bind-fd" if mount.read_only else "--bind-fd", str(fd), mount.target]
            for key, value in {**spec.env, **env}.items():
                full += ["--setenv", key, value]
            drop = self._argv_command(spec.uid, spec.gid, spec.groups, "")[:-3]  # setpriv ... -- (root only)
            full += ["--chdir", workdir, *drop, *argv]
            full = [*self._join_cgroup(spec), *full]
            process = await asyncio.create_subprocess_exec(
                *full, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True, env={"PATH": PATH}, pass_fds=fds, umask=0o002,
                limit=16 * 1024 * 1024,  # one JSON-RPC line may be large
            )
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox could not be started: {exc}") from None
        finally:
            for fd in fds:
                os.close(fd)
        self._running.setdefault(spec.member_id, set()).add(process)
        return _Spawned(process, lambda: self._running.get(spec.member_id, set()).discard(process))

    async def remove(self, member_id: str) -> None:
        for process in self._running.pop(member_id, set()):
            _kill_group(process)
        if self.cgroups is not None:
            # The killed processes leave their cgroup as the kernel reaps them.
            for _ in range(50):
                if self.cgroups.remove(member_id):
                    break
                await asyncio.sleep(0.1)

    async def existing(self, instance: str) -> list[str]:
        return []


def _detect_cgroups() -> tuple[Cgroups | None, str | None]:
    try:
        return Cgroups.detect(), None
    except CgroupsUnavailable as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"cgroups cannot be read here ({exc})"


class _Spawned:
    """A ``SandboxProcess`` over a bwrap child."""

    def __init__(self, process: asyncio.subprocess.Process, forget: Any) -> None:
        self._process = process
        self._forget = forget
        self.stdin = process.stdin
        self.stdout = process.stdout

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        try:
            return await self._process.wait()
        finally:
            self._forget()

    def kill(self) -> None:
        _kill_group(self._process)
        self._forget()


def _kill_group(process: Any) -> None:
    """bwrap leads its own process group; killing it takes its pid namespace's init
    with it (``--die-with-parent``), and the kernel then kills every process inside."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="sandbox-bubblewrap",
        title="Bubblewrap sandbox",
        description="Runs members' commands with bubblewrap where no Docker engine is available.",
        icon="box",
        spec=">=1.0,<2",
    )


@hookimpl
def startup(host: Any) -> None:
    """Where no cgroup can be made, the memory, CPU and process limits hold per process
    only (one command's processes together may use several times the memory limit):
    the admin reads that on the status page rather than believing they hold as Docker's."""
    if not shutil.which("bwrap"):
        return
    _, refusal = _detect_cgroups()
    if refusal is not None:
        host.set_degraded(
            f"memory, CPU and process limits apply per process only, not to the whole sandbox: {refusal}",
            key="warning.per_process_limits", values={"reason": refusal},
        )


@hookimpl
def register_sandbox_backends(register) -> None:
    register("bubblewrap", BubblewrapBackend())

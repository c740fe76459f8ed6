"""The Docker sandbox backend: one long-lived container per member (seed 001
"Filesystem & containers"), registered through ``register_sandbox_backends``.

The container runs as the member's own uid with tini as pid 1 (it reaps what a
killed command leaves), no capabilities, ``no-new-privileges``, a read-only root with
a size-capped ``/tmp``, pids/memory/CPU limits and no network unless configured. Its
spec hash and image id are compared on every ``ensure``: any drift recreates it.

With ``sandbox.network`` on, the container joins the ``skald-sbx`` bridge network and
the host's iptables keep it to the public internet (checks E4, F2): ``DOCKER-USER``
rejects what it sends to loopback, private, link-local (metadata), CGNAT and multicast
ranges and to other sandboxes, and ``INPUT`` rejects everything arriving from its bridge
— a packet for any of the host's own addresses (the gateway included) is delivered
locally and never passes ``FORWARD``. If the rules cannot be installed, no networked
container starts.

A command runs under ``setsid`` so it leads a session of its own; the session id is
written to a pidfile, and a timeout or a stop kills every process of that session
from a second ``docker exec``. What a finished command left running in its process
group is killed by the wrapper itself as the command ends. A session and a process
group can be left (``setsid``, a double fork), so neither is what the last word rests
on: whenever a member's last running command ends (finished, stopped or timed out),
every process in the container but tini (pid 1) and the idle process it was started
with is killed — a process cannot leave its container. The host does that through its
own ``/proc`` when it can (root, the engine on this kernel), else ``SWEEPER`` does it
from inside the container. Nothing a member started survives the last of their
running commands; while another of their commands still runs, what an ended or
stopped one left outside its group or session lives until that one ends too. If the
sweep cannot finish (a fork bomb holding every pid), the container is restarted:
killing more than asked beats leaving it running. The container itself is removed
when the member is locked (logout of their last session, revocation, expiry) and when
the server stops (``SandboxManager.before_lock`` / ``close``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Awaitable, Callable

from skald_hookspecs import hookimpl
from skald_hookspecs.sandbox import ExecResult, SandboxSpec, SandboxUnavailable
from skald_hookspecs.types import PluginInfo

log = logging.getLogger(__name__)

#: Why it cannot run here, for a person (the core bundle's ``plugin.reason.docker_not_running``
#: words it in the reader's language on the Plugins page).
NOT_RUNNING = "no Docker engine is running on this machine (install docker.io and start dockerd)"
PREFIX = "skald-sbx-"
LABEL_MEMBER = "org.skald.member"
LABEL_SPEC = "org.skald.spec"
LABEL_INSTANCE = "org.skald.instance"
LABEL_NETWORK = "org.skald.sandbox-network"
#: Bumped whenever the way a container is created changes, so every box rebuilds.
REVISION = 1
ENTRYPOINT = ["/usr/bin/tini", "--"]
IDLE = ["sleep", "infinity"]
#: The bridge network of networked sandboxes. The subnet is in the RFC 2544 benchmarking
#: range, which LANs, VPNs and clouds rarely hand out, so collisions are unlikely.
NETWORK = "skald-sbx"
BRIDGE = "skald-sbx0"
SUBNET = "198.18.92.0/24"
GATEWAY = "198.18.92.1"
#: Bumped whenever the egress rules change, so networked containers rebuild.
EGRESS_REVISION = 1
RULE_COMMENT = "skald-sbx"
BLOCKED_DESTINATIONS = (
    "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
    "100.64.0.0/10", "0.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4", SUBNET,
)
KILL_GRACE_SECONDS = 5.0
#: How long a removal that found another one of the same container under way waits for
#: it to finish before it fails as the other would.
REMOVAL_WAIT_SECONDS = 30.0
#: How long a checked container is trusted before the next command checks it again; a
#: changed spec is checked at once, and a vanished or stopped one on the failed exec.
TRUST_SECONDS = 30.0
# The session leader is a bash whose own stderr (job notices, setsid's complaints) goes
# to /dev/null; the command gets the real stderr back on fd 3. $0 is the pidfile, $1
# the member's command, $2 its file size limit in KiB (``ulimit -f``; bash's unit): all
# positional, so quotes or $(…) in a command are data for the inner shell, never syntax
# of this one. With job control (set -m) the command is
# a process group of its own, and once it exits, whatever it left in that group is
# killed with the builtin kill — no fork, so it works even when every pid is taken.
WRAPPER = (
    'echo $$ >"$0"; umask 002; ulimit -f "$2" || exit 125; set -m; /bin/sh -c "$1" 2>&3 3>&- & job=$!; wait $job; status=$?;'
    ' kill -KILL -- -$job; rm -f "$0"; exit $status'
)
LAUNCH = 'exec setsid -w /bin/bash -c "$0" "$1" "$2" "$3" 3>&2 2>/dev/null'
KILLER = (
    'i=0; while [ ! -s "$0" ] && [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done; '
    'sid=$(cat "$0" 2>/dev/null); [ -n "$sid" ] || exit 0; '
    'i=0; while pkill -KILL -s "$sid" && [ $i -lt 200 ]; do i=$((i+1)); done; '
    'rm -f "$0"; pgrep -s "$sid" >/dev/null && exit 3; exit 0'
)
# Run by bash as the member while none of their commands runs: SIGKILL to every
# process in the container but pid 1 (tini), the idle process (tini's child that
# started first: nothing a member starts can be older) and itself, pass after pass
# until a pass finds nothing alive (zombies are tini's to reap). Builtins only: no fork,
# so it works when every pid is taken, as long as its own exec could start.
SWEEPER = r"""
idle=; first=
read -r -a kids < /proc/1/task/1/children
for p in "${kids[@]}"; do
  read -r line < "/proc/$p/stat" || continue
  set -- ${line##*) }
  if [ -z "$first" ] || [ "${20}" -lt "$first" ]; then first=${20}; idle=$p; fi
done
pass=0
while [ $pass -lt 200 ]; do
  found=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1|"$idle"|"$$") continue;; esac
    read -r line < "$d/stat" 2>/dev/null || continue
    set -- ${line##*) }
    [ "$1" = Z ] && continue
    kill -KILL "$p" 2>/dev/null && found=1
  done
  [ $found = 0 ] && exit 0
  pass=$((pass+1))
done
exit 3
"""

#: A long-lived command with its streams (``spawn``): the session leader writes its pid
#: (the session id KILLER takes), then becomes the command itself.
SPAWN_WRAPPER = 'echo $$ >"$0"; umask 002; exec "$@"'
SPAWN = 'exec setsid -w /bin/bash -c "$0" "$@" 2>/dev/null'


# Threads of their own: a command's output is read by a thread blocked for as long as
# the command runs, and a few long commands must not take the default executor every
# other part of the host shares. One pool per process, however many hosts it starts.
_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="sandbox-docker")


def container_name(member_id: str) -> str:
    return PREFIX + member_id


def spec_hash(spec: SandboxSpec) -> str:
    """What the container was built from; any change (image tag, user, mounts,
    limits, network, environment) makes a different hash and a rebuild."""
    data = {
        "revision": REVISION,
        "member": spec.member_id,
        "instance": spec.instance,
        "user": [spec.uid, spec.gid, sorted(spec.groups)],
        "home": spec.home,
        "image": spec.image,
        "mounts": sorted([str(m.source), m.target, m.read_only] for m in spec.mounts),
        "network": f"{NETWORK}/{EGRESS_REVISION}" if spec.network else False,
        "limits": [spec.memory_bytes, spec.cpus, spec.pids],
        "env": sorted(spec.env.items()),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class DockerBackend:
    name = "docker"

    def __init__(self) -> None:
        self._client: Any = None
        self._lock = threading.Lock()
        self._checked: dict[str, tuple[str, float]] = {}  # member -> (spec hash, when)
        self._gates: dict[str, _Gate] = {}

    def _blocking(self, fn: Any, *args: Any) -> "asyncio.Future[Any]":
        return asyncio.get_running_loop().run_in_executor(_THREADS, fn, *args)

    def _docker(self) -> Any:
        with self._lock:
            if self._client is None:
                import docker  # imported on first use: a host without Docker never pays for it

                self._client = docker.from_env(timeout=30)
            return self._client

    def available(self) -> str | None:
        try:
            import docker

            client = docker.from_env(timeout=3)
            client.ping()
            client.close()
        except Exception as exc:
            # The engine's own words (a Python exception's repr) go to the log only: the
            # Plugins page showed "ConnectionRefusedError(111, ...)" to a person.
            detail = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            log.info("docker sandbox: no Docker engine answers (%s)", detail)
            return NOT_RUNNING
        return None

    # -- the member's container ------------------------------------------------------------

    async def ensure(self, spec: SandboxSpec) -> None:
        wanted = spec_hash(spec)
        checked = self._checked.get(spec.member_id)
        if checked and checked[0] == wanted and time.monotonic() - checked[1] < TRUST_SECONDS:
            return
        await self._blocking(self._ensure, spec)
        self._checked[spec.member_id] = (wanted, time.monotonic())

    def _ensure(self, spec: SandboxSpec) -> Any:
        import docker.errors
        from docker.types import Mount as DockerMount

        client = self._docker()
        try:
            image = client.images.get(spec.image)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(
                f"the sandbox image {spec.image} is missing; build it with `make sandbox-image`"
            ) from None
        if spec.network:
            with self._lock:
                _sandbox_network(client)
                install_egress_rules()
        name = container_name(spec.member_id)
        wanted = spec_hash(spec)
        try:
            container = client.containers.get(name)
        except docker.errors.NotFound:
            container = None
        if container is not None:
            if container.labels.get(LABEL_SPEC) == wanted and container.attrs.get("Image") == image.id:
                if container.status != "running":
                    container.start()
                return container
            log.info("sandbox container %s drifted from its spec; recreating it", name)
            container.remove(force=True)
        tmpfs_mib = max(16, spec.memory_bytes // (4 * 1024 * 1024))
        container = client.containers.create(
            spec.image,
            command=IDLE,
            entrypoint=ENTRYPOINT,
            name=name,
            hostname="sandbox",
            user=f"{spec.uid}:{spec.gid}",
            group_add=[str(g) for g in spec.groups],
            working_dir=spec.home,
            environment=dict(spec.env),
            labels={LABEL_MEMBER: spec.member_id, LABEL_INSTANCE: spec.instance, LABEL_SPEC: wanted},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={tmpfs_mib}m,mode=1777"},
            pids_limit=spec.pids,
            mem_limit=spec.memory_bytes,
            memswap_limit=spec.memory_bytes,
            nano_cpus=int(spec.cpus * 1e9),
            network=NETWORK if spec.network else None,
            network_mode=None if spec.network else "none",
            mounts=[DockerMount(m.target, str(m.source), type="bind", read_only=m.read_only) for m in spec.mounts],
            restart_policy={"Name": "unless-stopped"},
        )
        container.start()
        return container

    async def remove(self, member_id: str) -> None:
        self._checked.pop(member_id, None)
        await self._blocking(self._remove, member_id)

    def _remove(self, member_id: str) -> None:
        import docker.errors

        name = container_name(member_id)
        try:
            self._docker().containers.get(name).remove(force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # Two paths removing it at once (a deactivation locks the member while their
            # sandbox is being removed): the engine answers the second 409 "removal ...
            # is already in progress". Done once that one is: an ERROR with a traceback
            # said a failure where there was none (upgrade probe).
            if exc.status_code != 409 or "already in progress" not in str(exc):
                raise
            deadline = time.monotonic() + REMOVAL_WAIT_SECONDS
            while time.monotonic() < deadline:
                try:
                    self._docker().containers.get(name)
                except docker.errors.NotFound:
                    return
                time.sleep(0.1)
            raise

    async def existing(self, instance: str) -> list[str]:
        def listed() -> list[str]:
            containers = self._docker().containers.list(all=True, filters={"label": f"{LABEL_INSTANCE}={instance}"})
            return [c.labels[LABEL_MEMBER] for c in containers if c.name == container_name(c.labels[LABEL_MEMBER])]

        return await self._blocking(listed)

    # -- commands --------------------------------------------------------------------------

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
        """Run the command, then, once no other command of the member runs, sweep the
        container: what the command started ends with it, wherever it went."""
        gate = self._gates.setdefault(spec.member_id, _Gate())
        async with gate.lock:  # never while a sweep runs: it would kill the new command
            gate.running += 1
        try:
            return await self._execute(
                spec, command, workdir=workdir, timeout=timeout, output_limit=output_limit, cancelled=cancelled,
            )
        finally:
            # Shielded: a stopped turn's command is swept all the same.
            await asyncio.shield(self._leave(spec, gate))

    async def _leave(self, spec: SandboxSpec, gate: "_Gate") -> None:
        async with gate.lock:
            gate.running -= 1
            if gate.running:
                return
            user = f"{spec.uid}:{spec.gid}"
            try:
                await self._blocking(self._sweep, self._docker().api, container_name(spec.member_id), user)
            except Exception:
                log.exception("sandbox %s: sweeping the container failed", container_name(spec.member_id))

    async def _execute(
        self,
        spec: SandboxSpec,
        command: str,
        *,
        workdir: str,
        timeout: float,
        output_limit: int,
        cancelled: asyncio.Event | None = None,
    ) -> ExecResult:
        name = container_name(spec.member_id)
        pidfile = f"/tmp/.skald-exec-{secrets.token_hex(16)}"
        user = f"{spec.uid}:{spec.gid}"
        api = self._docker().api
        import docker.errors

        fsize = "unlimited" if spec.file_size_bytes is None else str(max(4, spec.file_size_bytes // 1024))
        start = (self._start, api, name, user, workdir, dict(spec.env), pidfile, command, fsize)

        async def launch() -> tuple[str, Any]:
            try:
                try:
                    return await self._blocking(*start)
                except (docker.errors.NotFound, docker.errors.APIError) as exc:
                    if isinstance(exc, docker.errors.APIError) and exc.status_code not in (404, 409):
                        raise
                    # Removed or stopped behind our back: check it now, once.
                    self._checked.pop(spec.member_id, None)
                    await self.ensure(spec)
                    return await self._blocking(*start)
            except docker.errors.APIError as exc:
                raise SandboxUnavailable(f"the sandbox did not accept the command: {exc.explanation or exc}") from None

        launching = asyncio.ensure_future(launch())
        try:
            exec_id, sock = await asyncio.shield(launching)
        except asyncio.CancelledError:
            # Stopped while the command was being started: it may be running already.
            with contextlib.suppress(Exception):
                _, sock = await launching
                await self._kill_and_drain(api, name, user, pidfile, None, sock)
            raise
        capture = _Capture(output_limit)
        reader = asyncio.ensure_future(self._blocking(capture.read_frames, sock))
        stop = asyncio.ensure_future(cancelled.wait()) if cancelled is not None else None
        try:
            done, _ = await asyncio.wait({reader, *([stop] if stop else [])}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The turn's task was cancelled (a /stop, or the chat's tool timeout):
            # kill the group before letting the cancellation go on.
            await asyncio.shield(self._kill_and_drain(api, name, user, pidfile, reader, sock))
            raise
        finally:
            if stop is not None:
                stop.cancel()
        if reader in done:
            reader.result()
            info = await self._blocking(api.exec_inspect, exec_id)
            _close(sock)
            return ExecResult(info.get("ExitCode"), capture.text(), capture.truncated)
        was_cancelled = stop is not None and stop in done
        await self._kill_and_drain(api, name, user, pidfile, reader, sock)
        return ExecResult(None, capture.text(), capture.truncated, timed_out=not was_cancelled, cancelled=was_cancelled)

    async def spawn(self, spec: SandboxSpec, argv: list[str], *, workdir: str, env: dict[str, str]) -> "_DockerSpawned":
        """A long-lived command with its streams (contract 1.2): ``docker exec`` with
        stdin attached, in its own session so ``kill`` takes everything it started."""
        name = container_name(spec.member_id)
        pidfile = f"/tmp/.skald-exec-{secrets.token_hex(16)}"
        user = f"{spec.uid}:{spec.gid}"
        api = self._docker().api
        import docker.errors

        # A spawned command counts as running for as long as it lives, so the sweep
        # after another command's end never takes it (it runs when the last one ends).
        gate = self._gates.setdefault(spec.member_id, _Gate())
        async with gate.lock:
            gate.running += 1
        try:
            spawned = await self._spawn(spec, api, name, user, pidfile, argv, workdir=workdir, env=env)
        except BaseException:
            await asyncio.shield(self._leave(spec, gate))
            raise
        spawned.on_end(lambda: self._leave(spec, gate))
        return spawned

    async def _spawn(
        self, spec: SandboxSpec, api: Any, name: str, user: str, pidfile: str, argv: list[str], *, workdir: str, env: dict[str, str],
    ) -> "_DockerSpawned":
        import docker.errors

        def start() -> tuple[str, Any]:
            exec_id = api.exec_create(
                name, ["/bin/sh", "-c", SPAWN, SPAWN_WRAPPER, pidfile, *argv],
                stdout=True, stderr=False, stdin=True, user=user, workdir=workdir, environment={**spec.env, **env},
            )["Id"]
            return exec_id, api.exec_start(exec_id, socket=True)

        try:
            try:
                exec_id, sock = await self._blocking(start)
            except (docker.errors.NotFound, docker.errors.APIError) as exc:
                if isinstance(exc, docker.errors.APIError) and exc.status_code not in (404, 409):
                    raise
                self._checked.pop(spec.member_id, None)
                await self.ensure(spec)
                exec_id, sock = await self._blocking(start)
        except docker.errors.APIError as exc:
            raise SandboxUnavailable(f"the sandbox did not accept the command: {exc.explanation or exc}") from None
        return _DockerSpawned(self, api, name, user, pidfile, exec_id, sock)

    def _start(
        self, api: Any, name: str, user: str, workdir: str, env: dict[str, str], pidfile: str, command: str, fsize: str,
    ) -> tuple[str, Any]:
        exec_id = api.exec_create(
            name, ["/bin/sh", "-c", LAUNCH, WRAPPER, pidfile, command, fsize],
            stdout=True, stderr=True, stdin=False, user=user, workdir=workdir, environment=env,
        )["Id"]
        return exec_id, api.exec_start(exec_id, socket=True)

    async def _kill_and_drain(self, api: Any, name: str, user: str, pidfile: str, reader: asyncio.Future[Any] | None, sock: Any) -> None:
        try:
            await self._blocking(self._kill_session, api, name, user, pidfile)
        except Exception:
            log.exception("sandbox %s: killing a command failed", name)
        if reader is None:
            _close(sock)
            return
        try:
            await asyncio.wait_for(asyncio.shield(reader), KILL_GRACE_SECONDS)
        except (asyncio.TimeoutError, Exception):
            _close(sock)  # something outside the session holds the stream open: stop reading

    def _kill_session(self, api: Any, name: str, user: str, pidfile: str) -> None:
        self._kill_or_restart(api, name, user, ["/bin/sh", "-c", KILLER, pidfile], "the command's session")

    def _sweep(self, api: Any, name: str, user: str) -> None:
        """Kill every process in the container but its init and idle process: from the
        host when it can see them (root, the engine on this kernel; a few ms), else
        with the sweeper inside the container (a second exec, ~70 ms)."""
        if sweep_from_host(api, name):
            return
        self._kill_or_restart(api, name, user, ["/bin/bash", "-c", SWEEPER], "what the member's commands left")

    def _kill_or_restart(self, api: Any, name: str, user: str, argv: list[str], what: str) -> None:
        """Run a killer in the container; if it cannot run or cannot finish, restart the
        container, which kills everything in it (tini and the idle process return)."""
        import docker.errors

        try:
            exec_id = api.exec_create(name, argv, stdout=True, stderr=True, user=user)["Id"]
            api.exec_start(exec_id)
            code = api.exec_inspect(exec_id).get("ExitCode")
        except docker.errors.APIError as exc:
            code, reason = None, exc
        else:
            reason = f"killer exit code {code}"
        if code == 0:
            return
        try:
            container = self._docker().containers.get(name)
            if container.status != "running":
                return  # removed, rebuilt or stopped meanwhile: nothing of the session is left
            log.warning("sandbox %s: %s could not be killed (%s); restarting the container", name, what, reason)
            container.restart(timeout=0)
        except docker.errors.NotFound:
            return


def sweep_from_host(api: Any, name: str) -> bool:
    """The sweeper's work done from the host, through its own ``/proc``: every process in
    the container's pid namespace but the init and its idle child gets SIGKILL. Each is
    opened as a pidfd, checked to be in that namespace, then signalled through the
    pidfd, so a pid reused by a host process meanwhile is never hit. False when this
    host cannot do it (not root, or the engine runs elsewhere): the caller falls back."""
    import docker.errors

    if os.geteuid() != 0 or not hasattr(os, "pidfd_open"):
        return False
    try:
        attrs = api.inspect_container(name)
        init, container_id = int(attrs["State"]["Pid"] or 0), attrs["Id"]
    except docker.errors.NotFound:
        return True  # removed meanwhile: nothing is left to sweep
    if not init:
        return True  # not running: nothing is left either
    try:
        anchor = os.pidfd_open(init)  # holds the init's identity while its /proc is read
    except OSError:
        return False
    try:
        namespace = os.readlink(f"/proc/{init}/ns/pid")
        # It must be the container's (its cgroup names it: a server that itself runs in
        # a container sees other pids than the engine reports) and pid 1 of a namespace
        # other than ours, never the host's own.
        with open(f"/proc/{init}/cgroup", encoding="utf-8", errors="replace") as cgroup:
            if container_id not in cgroup.read():
                return False
        nspid = _nspid(init)
        if namespace == os.readlink("/proc/self/ns/pid") or len(nspid) < 2 or nspid[-1] != "1":
            return False
        idle = _idle_process(init)
        for _ in range(200):
            found = False
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) in (init, idle):
                    continue
                found = _kill_if_in(int(entry.name), namespace) or found
            if not found:
                return True
        return False
    except OSError:
        return False
    finally:
        os.close(anchor)


def _nspid(pid: int) -> list[str]:
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return line.split()[1:]
    return []


def _stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the command name: [state, ppid, …, starttime at 19]."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _idle_process(init: int) -> int | None:
    """The init's child that started first: the idle process it was created with
    (nothing a member starts later can be older)."""
    try:
        with open(f"/proc/{init}/task/{init}/children", encoding="ascii") as listing:
            pids = [int(p) for p in listing.read().split()]
        return min(pids, key=lambda p: int(_stat_fields(p)[19]), default=None)
    except (OSError, ValueError, IndexError):
        return None


def _kill_if_in(pid: int, namespace: str) -> bool:
    try:
        if os.readlink(f"/proc/{pid}/ns/pid") != namespace:
            return False
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        # Checked again through the pidfd's process: the pid cannot change hands now.
        if os.readlink(f"/proc/{pid}/ns/pid") != namespace or _stat_fields(pid)[0] == "Z":
            return False  # another process now, or a zombie for tini to reap
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except (OSError, IndexError):
        return False
    finally:
        os.close(fd)


class _Gate:
    """How many commands of one member run now; the sweep runs under ``lock`` when
    that falls to zero, and a command starts only under it."""

    def __init__(self) -> None:
        self.running = 0
        self.lock = asyncio.Lock()


def _sandbox_network(client: Any) -> Any:
    """The bridge networked sandboxes share: created once, with a fixed subnet, a
    known bridge name (the INPUT rule names it) and no traffic between containers."""
    import docker.errors
    from docker.types import IPAMConfig, IPAMPool

    try:
        network = client.networks.get(NETWORK)
    except docker.errors.NotFound:
        try:
            network = client.networks.create(
                NETWORK, driver="bridge", check_duplicate=True, labels={LABEL_NETWORK: "egress-filtered"},
                ipam=IPAMConfig(pool_configs=[IPAMPool(subnet=SUBNET, gateway=GATEWAY)]),
                options={"com.docker.network.bridge.name": BRIDGE, "com.docker.network.bridge.enable_icc": "false"},
            )
        except docker.errors.APIError as error:
            # Another process on this engine (a second instance, or one starting beside
            # this one) created it between the two calls: theirs is used, and checked.
            if error.status_code != 409:
                raise
            network = client.networks.get(NETWORK)
        network.reload()
    subnets = [c.get("Subnet") for c in (network.attrs.get("IPAM") or {}).get("Config") or []]
    bridge = (network.attrs.get("Options") or {}).get("com.docker.network.bridge.name")
    if subnets != [SUBNET] or bridge != BRIDGE:
        raise SandboxUnavailable(
            f"the Docker network {NETWORK} exists with subnet {subnets} and bridge {bridge}, not {SUBNET} on {BRIDGE};"
            f" remove it (docker network rm {NETWORK}) so the sandbox can recreate it"
        )
    return network


def egress_rules() -> list[tuple[str, list[str]]]:
    """(chain, rule) pairs, in the order they must end up from the top of each chain.
    The host's own DNS resolvers stay reachable on port 53 when they sit in a blocked
    range: Docker's embedded DNS forwards from inside the container's namespace."""
    tag = ["-m", "comment", "--comment", RULE_COMMENT]
    rules = [("DOCKER-USER", ["-s", SUBNET, "-d", ip, "-p", proto, "--dport", "53", *tag, "-j", "RETURN"])
             for ip in _blocked_resolvers() for proto in ("udp", "tcp")]
    rules += [("DOCKER-USER", ["-s", SUBNET, "-d", net, *tag, "-j", "REJECT", "--reject-with", "icmp-net-prohibited"])
              for net in BLOCKED_DESTINATIONS]
    rules.append(("INPUT", ["-i", BRIDGE, *tag, "-j", "REJECT", "--reject-with", "icmp-host-prohibited"]))
    return rules


def install_egress_rules() -> None:
    """Idempotent: a rule already there (``iptables -C``) is left alone; a missing one is
    inserted at the top, last rule first. Any failure refuses the networked sandbox."""
    try:
        for chain, rule in reversed(egress_rules()):
            if _iptables("-C", chain, *rule).returncode != 0:
                done = _iptables("-I", chain, "1", *rule)
                if done.returncode != 0:
                    raise OSError(done.stderr.strip() or f"exit code {done.returncode}")
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(
            f"sandbox.network is on but the egress filter could not be installed ({exc}); the host needs iptables"
            " and root. No networked sandbox starts without it: set sandbox.network to false or fix iptables"
        ) from None


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-w", "5", *args], capture_output=True, text=True, timeout=15, check=False)


def _blocked_resolvers() -> list[str]:
    try:
        lines = Path("/etc/resolv.conf").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                ip = ipaddress.IPv4Address(parts[1])
            except ValueError:
                continue
            if not ip.is_loopback and any(ip in ipaddress.ip_network(net) for net in BLOCKED_DESTINATIONS):
                found.append(str(ip))
    return found


class _Capture:
    """Output up to ``limit`` bytes; the rest is read and dropped so the command
    never blocks on a full pipe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.truncated = False

    def add(self, data: bytes) -> None:
        room = self.limit - self.size
        if room <= 0:
            self.truncated = self.truncated or bool(data)
            return
        if len(data) > room:
            data, self.truncated = data[:room], True
        self.parts.append(data)
        self.size += len(data)

    def read_frames(self, sock: Any) -> None:
        from docker.utils.socket import frames_iter

        try:
            for _stream, data in frames_iter(sock, tty=False):
                self.add(data)
        except (OSError, ValueError):
            return  # the socket was closed under us after a kill

    def text(self) -> str:
        return b"".join(self.parts).decode("utf-8", errors="replace")


class _DockerSpawned:
    """A ``SandboxProcess`` over an attached ``docker exec``: stdout's frames are read by
    a thread into an ``asyncio.StreamReader``; stdin is written to the socket."""

    def __init__(self, backend: DockerBackend, api: Any, name: str, user: str, pidfile: str, exec_id: str, sock: Any) -> None:
        self._backend, self._api, self._name, self._user, self._pidfile = backend, api, name, user, pidfile
        self._exec_id, self._sock = exec_id, sock
        self._raw = getattr(sock, "_sock", sock)
        self._returncode: int | None = None
        self._killing: asyncio.Future[Any] | None = None
        self._ended: asyncio.Future[Any] | None = None
        loop = asyncio.get_running_loop()
        self.stdout = asyncio.StreamReader(limit=16 * 1024 * 1024, loop=loop)
        self.stdin = _SocketWriter(backend, self._raw)
        self._reading = backend._blocking(self._read, loop)

    def on_end(self, callback: Callable[[], Awaitable[Any]]) -> None:
        """Run ``callback`` once the command's output has ended (it exited or was killed)
        and a ``kill`` under way has finished: the sweep it may lead to would otherwise
        kill the killer itself."""

        async def ended() -> None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._reading)
            if self._killing is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._killing)
            await callback()

        self._ended = asyncio.ensure_future(ended())

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        from docker.utils.socket import frames_iter

        try:
            for _stream, data in frames_iter(self._sock, tty=False):
                loop.call_soon_threadsafe(self.stdout.feed_data, data)
        except (OSError, ValueError):
            pass
        finally:
            loop.call_soon_threadsafe(self.stdout.feed_eof)

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def wait(self) -> int:
        await asyncio.shield(self._reading)
        if self._returncode is None:
            try:
                info = await self._backend._blocking(self._api.exec_inspect, self._exec_id)
                self._returncode = info.get("ExitCode")
            except Exception:
                self._returncode = -1
        return self._returncode if self._returncode is not None else -1

    def kill(self) -> None:
        def kill() -> None:
            try:
                self._backend._kill_session(self._api, self._name, self._user, self._pidfile)
            except Exception:
                log.exception("sandbox %s: killing a spawned command failed", self._name)
            _close(self._sock)

        self._killing = self._backend._blocking(kill)


class _SocketWriter:
    """stdin of an attached exec, as much of ``asyncio.StreamWriter`` as a stream
    client needs: ``write`` queues, ``drain`` sends in a thread, in order."""

    def __init__(self, backend: DockerBackend, raw: Any) -> None:
        self._backend, self._raw = backend, raw
        self._pending = bytearray()
        self._lock = asyncio.Lock()

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        async with self._lock:
            data, self._pending = bytes(self._pending), bytearray()
            if data:
                await self._backend._blocking(self._raw.sendall, data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._raw.shutdown(socket.SHUT_WR)


def _close(sock: Any) -> None:
    raw = getattr(sock, "_sock", sock)
    try:
        raw.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="sandbox-docker",
        title="Docker sandbox",
        description="Runs each member's commands in a container of their own.",
        icon="box",
        spec=">=1.0,<2",
    )


@hookimpl
def register_sandbox_backends(register) -> None:
    register("docker", DockerBackend())

"""``SandboxManager`` (``Skald.sandbox``): one backend chosen for the instance, one
sandbox per member built lazily on first use and kept matching its spec."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import stat
import threading
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from skald_hookspecs.events import SystemEvent
from skald_hookspecs.sandbox import ExecResult, Mount, SandboxBackend, SandboxProcess, SandboxSpec, SandboxUnavailable
from skald_host.core.files.service import MEMORY_ROOTS, SANDBOX_HOME, FileError
from skald_host.core.folders.service import MEMBERSHIP_CHANGED
from skald_host.core.identity.users import MemberNotFound
from skald_host.core.plugins.manager import Contribution, PluginError
from skald_host.core.sandbox.quota import (
    MIB, MIN_FILE_SIZE, OVER_LIMIT, OVER_LIMIT_SLACK, WATCH_COST, WATCH_INTERVAL, home_usage, mib,
)

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

#: ``backend: auto`` tries these in order; the first whose ``available()`` is None wins.
AUTO_ORDER = ("docker", "bubblewrap")
#: Where no command may run from (``sandbox_path``).
PSEUDO_FILESYSTEMS = ("/proc", "/sys", "/dev")
INSTANCE_KEY = "sandbox.instance"
#: The group every sandbox user with a membership has: shared folders and projects are
#: ``root:FOLDERS_GID 2770``, so each member's own uid can work in the ones mounted
#: into their sandbox (and in no other: an unmounted folder is simply not there).
FOLDERS_GID = 19999
_REMOVING_EVENTS = ("member_deleted",)
#: How long a lock waits for the member's sandbox to go, and a server stop for all of
#: them; past that the removal goes on in its thread and the lock (or stop) moves on.
RETIRE_SECONDS = 10.0
CLOSE_SECONDS = 15.0

SIGNPOST = """# {root}/ is not a folder

`{root}/` holds {what}. They live in the database, not on this disk, so nothing
here can read or change them: this folder is read-only on purpose, and writing
files beside it would create notes that no one ever reads.

Use the tools instead:

- `memory_search` to find notes by words,
- `read_file {root}/<name>.md` to read one,
- `write_file {root}/<name>.md` / `edit_file` to write or change one,
- `list_files {root}/` to see what exists.
"""
_SIGNPOST_WHAT = {
    "user-memory": "your private memory notes",
    "shared-memory": "the memory notes shared by the whole group",
}


#: The first line of a command's result when the host stopped it because the member's
#: access to one of its folders shrank while it ran (``ExecResult.access_changed``).
ACCESS_CHANGED = (
    "The command was stopped: your access to {path} changed while it ran ({how})."
    " Run it again if it is still needed: it will see your folders as they are now."
)
_ACCESS_HOW = {"withdrawn": "you can no longer reach it", "read_only": "you may now only read it"}


@dataclasses.dataclass(eq=False)
class _Running:
    """A command or long-lived process of a member's sandbox, with the mounts it
    started with: bubblewrap fixes them at its start, Docker when the container is
    built, so a membership taken away later would stay reachable from it."""

    mounts: tuple[Mount, ...]
    stop: Any  # called with the sentence saying why
    #: Set by ``stop``: why the host stopped it.
    reason: str | None = None
    process: SandboxProcess | None = None
    #: Set once it ended and was forgotten.
    ended: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


def validate_backend(plugin_id: str, args: tuple[Any, ...]) -> tuple[str, SandboxBackend]:
    """The ``register(name, backend)`` check of ``register_sandbox_backends``."""
    if len(args) != 2 or not isinstance(args[0], str) or not args[0].strip():
        raise PluginError("register() expects (name, backend)")
    name, backend = args
    missing = [m for m in ("available", "ensure", "execute", "remove", "existing") if not callable(getattr(backend, m, None))]
    if missing:
        raise PluginError(f"sandbox backend {name!r} lacks {', '.join(missing)}")
    return name, backend


class SandboxManager:
    def __init__(self, core: "Skald", backends: list[Contribution]) -> None:
        self._reach = lambda: core
        self.settings = core.settings.sandbox
        self.signposts = core.settings.data_dir / ".memory-signpost"
        self._backends: dict[str, Contribution] = {c.value[0]: c for c in backends}
        self._chosen: tuple[str, SandboxBackend] | None = None
        self._refusal: str | None = None
        #: Backends the last choice found unable to run here, and why (their ``available()``).
        self._unavailable: dict[str, str] = {}
        self._choosing = asyncio.Lock()
        self._member_locks: dict[str, asyncio.Lock] = {}
        self._ensured: dict[str, SandboxSpec] = {}
        #: Members whose sandbox is being built right now (``close`` removes theirs too).
        self._building: set[str] = set()
        #: Membership folders whose contents were given to the folders' group this run.
        self._shared: set[Path] = set()
        self._closing = False
        self.instance = ""
        #: What runs in each member's sandbox now, with the mounts it started with.
        self._running: dict[str, set[_Running]] = {}
        #: How many times each member's folders changed this run: a command whose
        #: spec was read before a change that was checked before it was registered
        #: checks its mounts itself (``_started_with_access``).
        self._access_changes: dict[str, int] = {}
        self._followers: set[asyncio.Task[None]] = set()

    @property
    def _core(self) -> "Skald":
        return self._reach()

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Write the signposts, then reconcile and follow member events in the
        background: a slow or absent engine must never hold up the boot."""
        await asyncio.to_thread(self._write_signposts)
        self.instance = await self._core.registry.transaction(_instance_id)
        events = self._core.buses.system.subscribe()
        self._core.supervisor.spawn("sandbox-reconcile", self._reconcile_then_follow(events))

    async def _reconcile_then_follow(self, events: Any) -> None:
        try:
            try:
                await self.reconcile()
            except Exception:
                log.exception("sandbox reconcile failed")
            async for event in events.until(self._core.stopping):
                try:
                    await self.on_event(event)
                except Exception:
                    log.exception("sandbox: handling %s failed", event.kind)
        finally:
            events.close()

    def _write_signposts(self) -> None:
        """Rewritten on every start, so a README edited (or deleted) on disk heals."""
        for root in MEMORY_ROOTS:
            folder = self.signposts / root
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(self.signposts, 0o755)
            os.chmod(folder, 0o755)
            readme = folder / "README.md"
            readme.write_text(SIGNPOST.format(root=root, what=_SIGNPOST_WHAT[root]), encoding="utf-8")
            os.chmod(readme, 0o644)

    # -- choosing the backend ---------------------------------------------------------------

    async def backend(self) -> tuple[str, SandboxBackend]:
        """The instance's backend, chosen once it is found. Raises
        ``SandboxUnavailable`` with what to install when none can run here; that is
        asked again next time, so an engine started later (or a backend plugin
        enabled later) is picked up without a restart."""
        async with self._choosing:
            if self._chosen is None:
                self._chosen, refusal = await self._choose()
                if self._chosen:
                    log.info("sandbox backend: %s", self._chosen[0])
                elif refusal != self._refusal:
                    log.warning("no sandbox backend: %s", refusal)
                self._refusal = refusal
        if self._chosen is None:
            raise SandboxUnavailable(self._refusal or "no sandbox backend")
        return self._chosen

    async def in_use(self) -> tuple[str | None, str | None]:
        """For the instance's status (two backends' cards are both green, and only one
        runs commands): the plugin whose backend it is, or why none can run here."""
        try:
            name, _ = await self.backend()
        except SandboxUnavailable as exc:
            return None, str(exc)
        return self._backends[name].plugin_id, None

    async def standby(self) -> dict[str, tuple[str, dict[str, str]]]:
        """For the plugins' cards (a loaded backend plugin read "Running" beside the one
        that runs the commands, or on a machine it cannot run on): each enabled backend
        plugin that does not run commands here, and why. ``("unavailable", {"reason"})``
        when its check said it cannot run here, ``("unused", {"plugin"})`` when another
        backend's plugin runs them."""
        chosen, _ = await self.in_use()
        out: dict[str, tuple[str, dict[str, str]]] = {}
        for name, contribution in self._backends.items():
            if contribution.plugin_id == chosen or not self._core.plugins.is_enabled(contribution.plugin_id):
                continue
            if name in self._unavailable:
                out[contribution.plugin_id] = ("unavailable", {"reason": self._unavailable[name]})
            elif chosen is not None:
                out[contribution.plugin_id] = ("unused", {"plugin": chosen})
        return out

    async def _choose(self) -> tuple[tuple[str, SandboxBackend] | None, str | None]:
        wanted = self.settings.backend.strip().lower()
        if wanted == "none":
            return None, (
                "Commands cannot run here: the sandbox is switched off (sandbox.backend: none)."
                " Install Docker (docker.io) or bubblewrap and set sandbox.backend to auto."
            )
        names = AUTO_ORDER if wanted == "auto" else (wanted,)
        reasons: list[str] = []
        self._unavailable = {}
        for name in names:
            contribution = self._backends.get(name)
            if contribution is None or not self._core.plugins.is_enabled(contribution.plugin_id):
                reasons.append(f"{name}: no such sandbox backend is installed")
                continue
            backend = contribution.value[1]
            try:
                reason = await asyncio.to_thread(backend.available)
            except Exception as exc:
                reason = f"its availability check failed: {exc}"
            if reason is None:
                return (name, backend), None
            self._unavailable[name] = reason
            reasons.append(f"{name}: {reason}")
        return None, "Commands cannot run here: no sandbox is available. " + "; ".join(reasons)

    # -- one member's sandbox ---------------------------------------------------------------

    async def spec_for(self, member_id: str) -> SandboxSpec:
        files = self._core.files
        uid = files.uid_for(member_id)
        mounts = list(await files.sandbox_mounts(member_id))
        folders = [m.source for m in mounts if m.target != SANDBOX_HOME]
        if folders:
            await asyncio.to_thread(_share_with_sandboxes, folders, self._shared)
        for root in MEMORY_ROOTS:
            mounts.append(Mount(Path(os.path.realpath(self.signposts / root)), f"{SANDBOX_HOME}/{root}", read_only=True))
        home = next(m.source for m in mounts if m.target == SANDBOX_HOME)
        await asyncio.to_thread(_prepare_mountpoints, home, [m.target for m in mounts if m.target != SANDBOX_HOME])
        box = self.settings
        return SandboxSpec(
            member_id=member_id,
            instance=self.instance,
            uid=uid,
            gid=uid,
            home=SANDBOX_HOME,
            groups=(FOLDERS_GID,) if folders else (),
            mounts=tuple(mounts),
            image=box.image,
            network=box.network,
            memory_bytes=box.memory_mib * 1024 * 1024,
            cpus=box.cpus,
            pids=box.pids,
            env={"HOME": SANDBOX_HOME, "USER": "member", "LANG": "C.UTF-8"},
        )

    async def ensure(self, member_id: str, spec: SandboxSpec | None = None) -> SandboxSpec:
        """Make the member's sandbox match its current spec (built from scratch each
        call, so a membership change lands on the next command at the latest)."""
        _, backend = await self.backend()
        spec = spec or await self.spec_for(member_id)
        lock = self._member_locks.setdefault(member_id, asyncio.Lock())
        async with lock:
            self._building.add(member_id)
            try:
                await _to_the_end(asyncio.ensure_future(backend.ensure(spec)))
            except SandboxUnavailable:
                raise
            except Exception as exc:
                log.error("sandbox of a member could not be built: %s", exc)
                raise SandboxUnavailable(f"the sandbox could not be started: {exc}") from exc
            finally:
                self._building.discard(member_id)
            self._ensured[member_id] = spec
        return spec

    async def execute(
        self,
        member_id: str,
        command: str,
        *,
        workdir: str | None = None,
        timeout: float | None = None,
        cancelled: asyncio.Event | None = None,
        spec: SandboxSpec | None = None,
    ) -> ExecResult:
        """Run ``command`` in the member's sandbox. ``workdir`` is an agent path or an
        absolute sandbox path; ``timeout`` is capped by ``sandbox.exec_timeout_seconds``."""
        if not isinstance(command, str) or not command.strip():
            raise ValueError("'command' must be non-empty text")
        if "\x00" in command:
            raise ValueError("'command' contains a NUL byte")
        limit = self.settings.exec_timeout_seconds
        if timeout is None:
            timeout = limit
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError("'timeout' must be a positive number of seconds")
        timeout = min(float(timeout), limit)
        changes = self._access_changes.get(member_id, 0)
        _, backend = await self.backend()
        target = await self.sandbox_path(member_id, workdir)
        home = self._core.files.home(member_id)
        quota = self.settings.home_quota_mib * MIB
        used = await asyncio.to_thread(home_usage, home, quota)
        over = used > quota
        if over:
            # Measured in full, for the message and as the line it must not grow past.
            used = await asyncio.to_thread(home_usage, home)
        spec = await self.ensure(member_id, spec)
        # Over the limit the command still runs, to let the member free space (rm), but
        # it may not write: files are capped at MIN_FILE_SIZE and the home at its size.
        room = MIN_FILE_SIZE if over else max(quota - used, MIN_FILE_SIZE)
        spec = dataclasses.replace(spec, file_size_bytes=room)
        stop = asyncio.Event()
        running = _Running(spec.mounts, lambda reason: stop.set())
        if not await self._started_with_access(member_id, running, changes):
            return ExecResult(None, "", cancelled=True, access_changed=running.reason)
        watchdog = _Watchdog(home, used + OVER_LIMIT_SLACK if over else quota, stop)
        relay = asyncio.ensure_future(_relay(cancelled, stop)) if cancelled is not None else None
        watchdog.start()
        try:
            result = await backend.execute(
                spec, command, workdir=target, timeout=timeout,
                output_limit=self.settings.output_limit_bytes, cancelled=stop,
            )
        finally:
            watchdog.stop()
            self._forget(member_id, running)
            if relay is not None:
                relay.cancel()
        if running.reason is not None:
            return dataclasses.replace(result, exit_code=None, cancelled=True, timed_out=False, access_changed=running.reason)
        if watchdog.hit.is_set() and not (cancelled is not None and cancelled.is_set()):
            result = dataclasses.replace(result, cancelled=False, timed_out=False, disk_limit=True)
        if over:
            notice = OVER_LIMIT.format(used=mib(used), limit=self.settings.home_quota_mib)
            result = dataclasses.replace(result, output=f"{notice}\n{result.output}", over_limit=True)
        return result

    async def spawn(
        self, member_id: str, argv: Sequence[str], *, workdir: str | None = None, env: Mapping[str, str] | None = None
    ) -> SandboxProcess:
        """Start a long-lived ``argv`` with its streams in the member's sandbox (a
        plugin's per-member server; ``HostApi.sandbox_spawn``). No time limit: the
        caller kills it; ``remove`` (member deleted or deactivated) kills it too."""
        if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv must be a non-empty list of strings")
        if any("\x00" in a for a in argv) or len(argv) > 256:
            raise ValueError("argv must have at most 256 items and no NUL byte")
        extra = dict(env or {})
        for key, value in extra.items():
            if not isinstance(key, str) or not key or "=" in key or "\x00" in key or not isinstance(value, str) or "\x00" in value:
                raise ValueError("env must map names to strings without NUL bytes")
        _, backend = await self.backend()
        spawn = getattr(backend, "spawn", None)
        if not callable(spawn):
            raise SandboxUnavailable(f"the {backend.name} sandbox cannot run a long-lived command with its streams")
        changes = self._access_changes.get(member_id, 0)
        target = await self.sandbox_path(member_id, workdir)
        spec = await self.ensure(member_id)
        process = await spawn(spec, list(argv), workdir=target, env=extra)
        running = _Running(spec.mounts, lambda reason: process.kill(), process=process)
        if not await self._started_with_access(member_id, running, changes):
            raise SandboxUnavailable(running.reason or "")
        return process

    # -- when a member's folders change -----------------------------------------------------
    # A running command keeps the mounts it started with (bubblewrap makes them per
    # command, Docker per container), so remounting on the next command would leave a
    # member removed from a project, or made read-only in it, writing it for as long as
    # a command already running lasts (up to ``exec_timeout_seconds``), and a spawned
    # server for ever. Widened access (a folder added, made writable) stops nothing.

    async def after_membership_change(self, member_id: str) -> None:
        """``FolderService.after_membership_change``: stop what the member runs with
        access they no longer have: a command ends with ``ExecResult.access_changed``
        saying why, a spawned process is killed (its owner sees its output end and
        spawns it again). A direct call before the change's request answers, so once
        the owner's "remove" returned, nothing of the member writes the project."""
        self._access_changes[member_id] = self._access_changes.get(member_id, 0) + 1
        running = self._running.get(member_id)
        if not running:
            return
        stopped = await self._stop_outgrown(member_id, list(running))
        if stopped:
            # Ended, not only told to: the owner writing the project next must not race
            # a kill still on its way (bounded, as a lock's removal is).
            waits = [asyncio.ensure_future(item.ended.wait()) for item in stopped]
            try:
                _, pending = await asyncio.wait(waits, timeout=RETIRE_SECONDS)
            finally:
                for wait in waits:
                    wait.cancel()
            if pending:
                log.warning("sandbox: a command whose access shrank takes over %.0f s to end; going on", RETIRE_SECONDS)

    async def _stop_outgrown(self, member_id: str, running: list[_Running]) -> list[_Running]:
        now = {m.target: m for m in await self._core.files.sandbox_mounts(member_id)}
        stopped: list[_Running] = []
        for item in running:
            reason = self._outgrown(item.mounts, now)
            if reason is None or item.reason is not None:
                continue
            item.reason = reason
            kind = "spawned process" if item.process is not None else "command"
            log.info("sandbox: stopped a %s of member %s: its folder access shrank while it ran", kind, member_id)
            try:
                item.stop(reason)
            except Exception:
                log.exception("sandbox: stopping a %s whose access shrank failed", kind)
            stopped.append(item)
        return stopped

    def _outgrown(self, started_with: Sequence[Mount], now: Mapping[str, Mount]) -> str | None:
        """The sentence saying which folder a command started with ``started_with`` may
        no longer reach as it could, or None when it lost nothing. The memory
        signposts are the same for everyone and never change."""
        signposts = {f"{SANDBOX_HOME}/{root}" for root in MEMORY_ROOTS}
        for mount in started_with:
            if mount.target in signposts:
                continue
            current = now.get(mount.target)
            if current is None or current.source != mount.source:
                how = "withdrawn"
            elif current.read_only and not mount.read_only:
                how = "read_only"
            else:
                continue
            path = "~" + mount.target.removeprefix(SANDBOX_HOME)
            return ACCESS_CHANGED.format(path=path, how=_ACCESS_HOW[how])
        return None

    async def _started_with_access(self, member_id: str, running: _Running, changes: int) -> bool:
        """Register ``running``; False (and it stopped) when the member's folders
        changed after its spec was read and before it was registered, and it lost
        access by that: the change's check did not see it, so it checks itself."""
        self._running.setdefault(member_id, set()).add(running)
        if self._access_changes.get(member_id, 0) != changes:
            try:
                await self._stop_outgrown(member_id, [running])
            except BaseException:
                running.stop("")
                self._forget(member_id, running)
                raise
        if running.reason is None:
            if running.process is not None:
                self._forget_when_ended(member_id, running)
            return True
        self._forget(member_id, running)
        return False

    def _forget(self, member_id: str, running: _Running) -> None:
        running.ended.set()
        left = self._running.get(member_id)
        if left is not None:
            left.discard(running)
            if not left:
                self._running.pop(member_id, None)

    def _forget_when_ended(self, member_id: str, running: _Running) -> None:
        """A spawned process is forgotten once it ended, however it ended (its owner
        killed it, it exited, the sandbox was removed)."""
        process = running.process

        async def follow() -> None:
            try:
                await process.wait()  # type: ignore[union-attr]
            except Exception:
                pass
            finally:
                self._forget(member_id, running)

        task = asyncio.ensure_future(follow())
        self._followers.add(task)
        task.add_done_callback(self._followers.discard)

    async def sandbox_path(self, member_id: str, workdir: str | None) -> str:
        """The sandbox path of an agent path (seed: ``UserFs::to_container``): the home,
        a membership under it, or an absolute path inside the sandbox as it is."""
        if workdir is None or not str(workdir).strip():
            return SANDBOX_HOME
        member = await self._core.users.get(member_id)
        try:
            resolved = await self._core.files.resolve(member, str(workdir), write=False)
        except FileError as exc:
            raise ValueError(f"workdir: {exc}") from None
        if resolved.kind == "memory":
            raise ValueError("workdir: memory notes are not files in the sandbox; use the memory tools")
        if resolved.kind == "sandbox":
            target = resolved.sandbox_path or SANDBOX_HOME
            if any(target == root or target.startswith(root + "/") for root in PSEUDO_FILESYSTEMS):
                # A working directory in /proc is how CVE-2024-21626 (runc < 1.1.12) let a
                # process out of its container: refused whatever runc the host has.
                raise ValueError(f"workdir: {target} is not a folder to work in")
            return target
        if resolved.kind == "host" and resolved.host_path is not None and not resolved.host_path.is_dir():
            raise ValueError(f"workdir: {workdir} is not a folder")
        if resolved.agent_path in ("", "~", "."):
            return SANDBOX_HOME
        return f"{SANDBOX_HOME}/{resolved.agent_path}"

    def is_up(self, member_id: str) -> bool:
        """Whether the member's sandbox was built and not removed since: what may be
        read from it without starting it."""
        return member_id in self._ensured

    async def remove(self, member_id: str) -> None:
        self._ensured.pop(member_id, None)
        try:
            _, backend = await self.backend()
        except SandboxUnavailable:
            return
        await backend.remove(member_id)

    # -- when a sandbox stops ---------------------------------------------------------------
    # A member's sandbox lives while they are unlocked: it is built on first use and
    # removed, with everything running in it, when they are locked (logout of their last
    # session, revocation, expiry, deactivation, deletion) and when the server stops.

    async def before_lock(self, member_id: str) -> None:
        """``UserManager.before_lock``: after the chat has cancelled the member's turns
        (so their commands were killed), remove the sandbox itself. Bounded: a slow
        engine delays a logout by at most ``RETIRE_SECONDS``."""
        if self._closing or self._chosen is None:
            return  # close() removes them all at once; with no backend chosen, none was built
        try:
            await asyncio.wait_for(asyncio.shield(self._retire(member_id)), RETIRE_SECONDS)
        except asyncio.TimeoutError:
            log.warning("sandbox: removing a locked member's sandbox takes over %.0f s; going on", RETIRE_SECONDS)

    async def _retire(self, member_id: str) -> None:
        lock = self._member_locks.setdefault(member_id, asyncio.Lock())
        async with lock:
            try:
                await self.remove(member_id)
            except Exception:
                log.exception("sandbox: removing a locked member's sandbox failed")

    async def close(self) -> None:
        """At server stop, after the chat has closed: remove every sandbox of this
        instance, all at once, within ``CLOSE_SECONDS`` (the removals run in threads;
        one that takes longer is logged and left to finish, never waited for)."""
        self._closing = True
        for follower in list(self._followers):
            follower.cancel()
        if self._chosen is None:
            return  # no backend was ever chosen: nothing was built
        _, backend = self._chosen
        members = set(self._ensured) | self._building
        try:
            members |= set(await asyncio.wait_for(backend.existing(self.instance), CLOSE_SECONDS))
        except Exception as exc:
            log.warning("sandbox: listing the sandboxes to stop failed (%s)", exc)
        if not members:
            return
        removals = [asyncio.ensure_future(self._retire(m)) for m in members]
        done, pending = await asyncio.wait(removals, timeout=CLOSE_SECONDS)
        if pending:
            log.warning("sandbox: %d sandbox(es) still being removed after %.0f s; not waiting", len(pending), CLOSE_SECONDS)
        log.info("sandbox: %d sandbox(es) removed at stop", len(done))

    # -- reconciliation ---------------------------------------------------------------------

    async def reconcile(self) -> None:
        """At boot nobody is unlocked, so nothing is built here (sandboxes are made on
        first use). What a previous run left (it crashed, or its removals timed out) is
        removed: every sandbox of a member who is gone, inactive or locked, unless it
        was used since this boot. Under the member's lock, so a login racing the
        reconcile gets a fresh sandbox, never a half-removed one."""
        try:
            _, backend = await self.backend()
        except SandboxUnavailable:
            return
        existing = await backend.existing(self.instance)
        for member_id in existing:
            try:
                member = await self._core.users.get(member_id)
            except MemberNotFound:
                member = None
            async with self._member_locks.setdefault(member_id, asyncio.Lock()):
                if member is not None and member.active and (
                    member_id in self._ensured or self._core.users.is_unlocked(member_id)
                ):
                    continue
                state = "deleted" if member is None else "deactivated" if not member.active else "locked"
                log.info("removing the sandbox of a %s member", state)
                await backend.remove(member_id)

    async def on_event(self, event: SystemEvent) -> None:
        member_id = event.subject_id
        if not member_id:
            return
        if event.kind in _REMOVING_EVENTS or (event.kind == "member_active_changed" and not event.data.get("active", True)):
            await self.remove(member_id)
        elif event.kind == MEMBERSHIP_CHANGED and member_id in self._ensured:
            # Remount now rather than at the next command, so the explorer and the
            # sandbox agree at once (seed: refresh_user_mounts without a re-login).
            await self.ensure(member_id)


async def _to_the_end(build: "asyncio.Future[Any]") -> Any:
    """Awaits ``build`` until it ended even when the caller is cancelled meanwhile (a
    Stop, a logout, the server stopping), then passes the cancellation on. A build runs
    in a thread that no cancellation stops: were the member's lock let go before it
    ended, a removal taking the lock next would find nothing yet, and the container the
    thread then made would outlive its member's session and the server."""
    cancelled = False
    while not build.done():
        try:
            await asyncio.wait({build})
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not build.cancelled():
            build.exception()  # retrieved, so a failure after the cancel is not reported as lost
        raise asyncio.CancelledError
    return build.result()


class _Watchdog:
    """Measures the home every ``WATCH_INTERVAL`` seconds or so while a command runs, on a
    thread of its own (a walk is blocking I/O, and the shared executor must not be
    held for a command's whole run); once the home is over ``quota`` it sets ``stop``,
    which makes the backend kill the command's process group."""

    def __init__(self, home: Path, quota: int, stop: asyncio.Event) -> None:
        self.home, self.quota, self._stop = home, quota, stop
        self.hit = threading.Event()
        self._done = threading.Event()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._watch, name="sandbox-disk-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        interval = WATCH_INTERVAL[0]
        while not self._done.wait(interval):
            started = time.monotonic()
            try:
                over = home_usage(self.home, self.quota) > self.quota
            except Exception:
                log.exception("sandbox: measuring a home failed")
                continue
            # Measured as often as costs at most 1/WATCH_COST of a core: a small home
            # every 50 ms (a tight bound on what passes the limit), a big one less often.
            lo, hi = WATCH_INTERVAL
            interval = min(hi, max(lo, (time.monotonic() - started) * WATCH_COST))
            if over and not self._done.is_set():
                self.hit.set()
                try:
                    self._loop.call_soon_threadsafe(self._stop.set)
                except RuntimeError:
                    pass  # the loop closed meanwhile: nothing is waiting any more
                return


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


def _instance_id(conn: Any) -> str:
    """A random id for this instance, made once: it tells this instance's sandboxes
    from another's on a shared engine, so a reconcile never removes a stranger's."""
    row = conn.execute("SELECT value FROM config WHERE key = ?", (INSTANCE_KEY,)).fetchone()
    if row:
        return str(json.loads(row[0]))
    value = secrets.token_hex(8)
    conn.execute("INSERT INTO config (key, value) VALUES (?, ?)", (INSTANCE_KEY, json.dumps(value)))
    return value


def _share_with_sandboxes(folders: list[Path], walked: set[Path]) -> None:
    """Give membership folders to ``FOLDERS_GID`` with the setgid bit, so files made in
    them keep that group, and what is already inside to the group too: a file the web
    page uploaded before the folder was first mounted was the server's alone, and the
    members' sandboxes could not read it. The contents once per folder and process
    (``walked``): from then on what the server makes there is made the members' (0660,
    0770 setgid), and the sandboxes work with umask 002. Only root can, and only root
    needs to: an unprivileged host runs every sandbox as itself. Links are never followed."""
    if os.geteuid() != 0:
        return
    for folder in folders:
        info = os.stat(folder, follow_symlinks=False)
        if info.st_gid != FOLDERS_GID:
            os.chown(folder, info.st_uid, FOLDERS_GID, follow_symlinks=False)
        if (info.st_mode & 0o7777) != 0o2770:
            os.chmod(folder, 0o2770)
        if folder in walked:
            continue
        # By descriptor, never by path: a sandbox can swap an entry for a link meanwhile.
        for _, dirs, files, dir_fd in os.fwalk(folder, follow_symlinks=False):
            for name in dirs + files:
                _share_entry(dir_fd, name)
        walked.add(folder)


def _share_entry(dir_fd: int, name: str) -> None:
    """One entry of a membership folder: the folders' group, and the owner's access
    for it (a folder setgid, so what is made in it keeps the group)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:  # a link (ELOOP), gone meanwhile, or not openable: left as it is
        return
    try:
        info = os.fstat(fd)
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            return
        if info.st_gid != FOLDERS_GID:
            os.fchown(fd, info.st_uid, FOLDERS_GID)
        mode = stat.S_IMODE(info.st_mode)
        wanted = mode | ((mode & 0o700) >> 3) | (stat.S_ISGID if stat.S_ISDIR(info.st_mode) else 0)
        if wanted != mode:
            os.fchmod(fd, wanted)
    finally:
        os.close(fd)


def _prepare_mountpoints(home: Path, targets: list[str]) -> None:
    """Make the folders that mounts inside the home land on, and refuse a symlink on
    the way. The member can plant ``~/shared -> /somewhere`` from inside the sandbox;
    a backend creating ``~/shared/X`` as root through it would write outside the home
    (bubblewrap resolves destinations with the host's view while it sets up). Walked
    by descriptor from the home's own: checking each name and then making the next one
    by path let a sandbox swapping a link in between have root make folders anywhere
    (a security probe hit it once every 4 s)."""
    for target in targets:
        relative = PurePosixPath(target).relative_to(SANDBOX_HOME)
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            done: list[str] = []
            for part in relative.parts:
                done.append(part)
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:  # there already, or a command starting at the same moment made it
                    pass
                try:
                    inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:  # a link (ELOOP) or not a folder (ENOTDIR)
                    shown = "~/" + "/".join(done)
                    raise SandboxUnavailable(
                        f"{shown} in your home is not a folder, but {target.replace(SANDBOX_HOME, '~', 1)} is mounted there;"
                        f" move {shown} away and try again"
                    ) from None
                os.close(fd)
                fd = inner
        finally:
            os.close(fd)

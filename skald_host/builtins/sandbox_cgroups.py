"""Whole-sandbox limits for the bubblewrap backend: one cgroup per member.

``prlimit`` limits each process on its own: ``--as`` caps one process's address space,
so four processes of one command could hold four times the member's memory (check E4
found 3.6 GiB under a 1 GiB limit), and ``--nproc`` counts the uid on the host, not
the command. Docker puts the whole container in a cgroup (Memory, NanoCpus,
PidsLimit); here each member's commands share ``<root>/skald/<instance>-<member>``
with the same three limits, so together they can use no more than one member may.

A command joins its cgroup before anything of the member runs: the host's ``/bin/sh``
(as root, before ``prlimit``, ``bwrap`` and ``setpriv``) writes its own pid into
``cgroup.procs`` and then ``exec``\\s the sandbox, so every process the command starts
is born inside. Writing a pid after the spawn would race bwrap's first fork.

cgroup v2 (``/sys/fs/cgroup`` a cgroup2 mount, its ``memory``, ``pids`` and ``cpu``
controllers enabled down to ``skald/``) comes first; v1 (separate ``memory``,
``pids`` and ``cpu`` hierarchies) is the fallback. Where neither can be made (not
root, nothing delegated) the backend keeps its per-process limits and says so.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
SKALD_GROUP = "skald"
CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_MICROSECONDS = 100_000
#: The shell that joins the cgroup, then becomes the sandbox: ``$1`` lists the
#: ``cgroup.procs`` files (paths made here, without spaces), the rest is the command.
JOIN_SCRIPT = 'for procs in $1; do echo $$ > "$procs" || exit 125; done; shift; exec "$@"'


class CgroupsUnavailable(Exception):
    """No cgroup can be made here; the message says why."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    pids: int
    cpus: float


class Cgroups:
    """The cgroups of one backend: created per member on first use, limits rewritten
    on every command (settings may have changed), removed with the member."""

    def __init__(self, version: int, bases: tuple[Path, ...]) -> None:
        self.version = version
        self._bases = bases  # v2: (root/skald,); v1: memory, pids, cpu bases
        self._made: dict[str, tuple[Path, ...]] = {}

    @classmethod
    def detect(cls, root: Path = ROOT) -> "Cgroups":
        """The cgroups this host lets the server make, or ``CgroupsUnavailable``."""
        if (root / "cgroup.controllers").exists():
            return cls._detect_v2(root)
        return cls._detect_v1(root)

    @classmethod
    def _detect_v2(cls, root: Path) -> "Cgroups":
        available = set((root / "cgroup.controllers").read_text().split())
        missing = [name for name in CONTROLLERS if name not in available]
        if missing:
            raise CgroupsUnavailable(f"cgroup v2 lacks the {', '.join(missing)} controller(s)")
        base = root / SKALD_GROUP
        try:
            _enable(root)
            base.mkdir(exist_ok=True)
            _enable(base)
        except OSError as exc:
            raise CgroupsUnavailable(f"cannot create cgroups under {root} ({exc.strerror or exc})") from None
        return cls(2, (base,))

    @classmethod
    def _detect_v1(cls, root: Path) -> "Cgroups":
        probes = {"memory": "memory.limit_in_bytes", "pids": "pids.max", "cpu": "cpu.cfs_quota_us"}
        bases = []
        for name in CONTROLLERS:
            if not (root / name / "cgroup.procs").exists():
                raise CgroupsUnavailable(f"no cgroup v2 and no cgroup v1 {name} hierarchy at {root}")
            base = root / name / SKALD_GROUP
            try:
                base.mkdir(exist_ok=True)
            except OSError as exc:
                raise CgroupsUnavailable(f"cannot create cgroups under {root / name} ({exc.strerror or exc})") from None
            if not (base / probes[name]).exists():  # the root group lacks some of them
                raise CgroupsUnavailable(f"the cgroup v1 {name} hierarchy at {root / name} has no {probes[name]}")
            bases.append(base)
        return cls(1, tuple(bases))

    def place(self, instance: str, member_id: str, limits: Limits) -> list[str]:
        """The command prefix that puts what follows into the member's cgroup, made
        (and its limits written) here. ``OSError`` when it cannot be."""
        name = _safe_name(f"{instance}-{member_id}")
        groups = tuple(base / name for base in self._bases)
        for group in groups:
            group.mkdir(exist_ok=True)
        self._made[member_id] = groups
        # No pids.max: ``prlimit --nproc`` already caps the member's uid, which only
        # their sandbox uses, and a cgroup cap also counted the root wrapper and
        # processes of a killed command not yet reaped ("Cannot fork" in the next one).
        memory = str(limits.memory_bytes)
        cpus = max(1000, int(limits.cpus * CPU_PERIOD_MICROSECONDS))  # the kernel's smallest quota
        if self.version == 2:
            (group,) = groups
            _write(group / "memory.max", memory)
            _write_if_there(group / "memory.swap.max", "0")  # swap is memory too, as Docker counts it
            _write(group / "cpu.max", f"{cpus} {CPU_PERIOD_MICROSECONDS}")
        else:
            memory_group, pids_group, cpu_group = groups
            swap = memory_group / "memory.memsw.limit_in_bytes"
            # memsw may never be below the plain limit: lower it in the order that keeps that.
            if swap.exists() and int(swap.read_text()) < limits.memory_bytes:
                _write(swap, memory)
                _write(memory_group / "memory.limit_in_bytes", memory)
            else:
                _write(memory_group / "memory.limit_in_bytes", memory)
                _write_if_there(swap, memory)
            _write(cpu_group / "cpu.cfs_period_us", str(CPU_PERIOD_MICROSECONDS))
            _write(cpu_group / "cpu.cfs_quota_us", str(cpus))
        return ["/bin/sh", "-c", JOIN_SCRIPT, "skald-cgroup", " ".join(str(g / "cgroup.procs") for g in groups)]

    def remove(self, member_id: str) -> bool:
        """Remove the member's cgroups once empty; False while a process is still in one."""
        groups = self._made.get(member_id, ())
        for group in groups:
            try:
                group.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                return False
        self._made.pop(member_id, None)
        return True

    def groups_of(self, member_id: str) -> tuple[Path, ...]:
        return self._made.get(member_id, ())


def _enable(group: Path) -> None:
    wanted = [name for name in CONTROLLERS if name not in (group / "cgroup.subtree_control").read_text().split()]
    if wanted:
        _write(group / "cgroup.subtree_control", " ".join(f"+{name}" for name in wanted))


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        _write(path, value)


def _safe_name(name: str) -> str:
    """A cgroup folder name from an instance and member id: kept when it is plain,
    else hashed (no ``/``, spaces or ``..`` reach the path)."""
    if re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", name) and ".." not in name:
        return name
    return hashlib.sha256(name.encode()).hexdigest()[:32]

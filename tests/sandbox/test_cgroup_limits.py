"""Check E4 on bubblewrap: the memory limit holds for the whole sandbox, not per
process. ``prlimit --as`` alone let four processes of one command hold ~930 MB each
under a 1 GiB limit; in the member's cgroup their sum meets the limit. Skipped, with
the reason, where the host lets no cgroup be made (then the plugin says so itself)."""

from __future__ import annotations

import pytest

from skald_host.builtins.sandbox_bwrap import BubblewrapBackend
from skald_host.testing import SkaldHarness

from .support import Box, start_box

#: Three processes of 70 MB: each fits the per-process address-space limit of 160 MiB,
#: together they are well past the sandbox's memory.
MEMORY_MIB = 160
HOG = "python3 -c 'import time; a = bytearray(70 * 1024 * 1024); time.sleep(3); print(\"alive\")'"


@pytest.fixture
async def cgroup_box(skald: SkaldHarness, bwrap_ready: None) -> Box:
    refusal = BubblewrapBackend().cgroups_refusal
    if refusal is not None:
        pytest.skip(f"no cgroup can be made here: {refusal}")
    return await start_box(skald, "bubblewrap", memory_mib=MEMORY_MIB)


async def bwrap_backend(box: Box) -> BubblewrapBackend:
    _, backend = await box.core.sandbox.backend()
    assert isinstance(backend, BubblewrapBackend)
    return backend


async def test_processes_of_one_command_together_cannot_pass_the_memory_limit(cgroup_box: Box):
    result = await cgroup_box.run(cgroup_box.alice, f"for i in 1 2 3; do {HOG} & done; wait; echo done", timeout=15)
    assert result.output.endswith("done\n"), result
    # Each alone fits; three together would hold 210 MB of a 160 MiB sandbox.
    assert result.output.count("alive") < 3, result.output


async def test_the_member_cgroup_has_the_sandbox_limits_and_goes_with_the_member(cgroup_box: Box):
    box = cgroup_box
    result = await box.run(box.alice, "cat /proc/self/cgroup")
    assert result.exit_code == 0, result
    backend = await bwrap_backend(box)
    groups = backend.cgroups.groups_of(box.alice)
    assert groups and all(group.is_dir() for group in groups)
    if backend.cgroups.version == 2:
        (group,) = groups
        assert (group / "memory.max").read_text().strip() == str(MEMORY_MIB * 1024 * 1024)
        assert (group / "cpu.max").read_text().split() == ["50000", "100000"]
    else:
        memory, _, cpu = groups  # the pids group holds them, uncapped (prlimit --nproc caps the uid)
        assert (memory / "memory.limit_in_bytes").read_text().strip() == str(MEMORY_MIB * 1024 * 1024)
        assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "50000"
    await box.core.sandbox.remove(box.alice)
    assert not any(group.exists() for group in groups)


async def test_without_cgroups_the_status_says_the_limits_are_per_process(skald: SkaldHarness, bwrap_ready: None, monkeypatch):
    from skald_host.builtins import sandbox_cgroups

    def refuse(cls, root=sandbox_cgroups.ROOT):
        raise sandbox_cgroups.CgroupsUnavailable("not root here")

    monkeypatch.setattr(sandbox_cgroups.Cgroups, "detect", classmethod(refuse))
    host = await skald.start(settings=skald.settings(sandbox={"backend": "bubblewrap"}))
    status = (await (await host.admin()).get("/api/admin/status")).json()
    said = [w["text"] for w in status["warnings"] if w["id"] == "plugin_degraded"]
    assert any("per process only" in text and "not root here" in text for text in said), status["warnings"]

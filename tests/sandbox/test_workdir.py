"""A command's working directory (``SandboxManager.sandbox_path``): the home, a folder
the member belongs to, or an absolute path in the sandbox, but never one in /proc,
/sys or /dev. A working directory of /proc/self/fd/N is how CVE-2024-21626 (runc before
1.1.12) let a process out of its container; refused whatever runc the host runs. No
engine is needed: the path is decided before any command starts."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("workdir", ["/proc/self/fd/7", "/proc", "/sys/fs/cgroup", "/dev/shm", "//proc/self/cwd", "/home/member/../../proc/1/root"])
async def test_a_workdir_in_a_pseudo_filesystem_is_refused(skald, workdir):
    host = await skald.start()
    member = await host.create_member("alice")
    with pytest.raises(ValueError, match="is not a folder to work in"):
        await host.core.sandbox.sandbox_path(member["id"], workdir)


async def test_ordinary_working_directories_are_kept(skald):
    host = await skald.start()
    member = await host.create_member("alice")
    assert await host.core.sandbox.sandbox_path(member["id"], None) == "/home/member"
    assert await host.core.sandbox.sandbox_path(member["id"], "/tmp/build") == "/tmp/build"
    assert await host.core.sandbox.sandbox_path(member["id"], "/home/member") == "/home/member"
    assert await host.core.sandbox.sandbox_path(member["id"], "/devices") == "/devices"  # not /dev itself

"""The Docker backend's container, as ``docker inspect`` shows it (check E4's list),
and its life: reused while it matches its spec, recreated on drift (image, mounts,
user), removed when its member is deleted or deactivated, remounted when a
membership changes — and another instance's containers are never touched."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

from skald_hookspecs.events import SystemEvent
from skald_hookspecs.sandbox import Mount
from skald_host.builtins.sandbox_docker import LABEL_INSTANCE, container_name

from .support import Box, start_box


@pytest.fixture
async def docker_box(skald, docker_engine) -> Box:
    return await start_box(skald, "docker")


def inspect(docker_engine, member_id: str) -> dict:
    return docker_engine.api.inspect_container(container_name(member_id))


async def eventually_gone(docker_engine, member_id: str, within: float = 10.0) -> None:
    import docker.errors

    for _ in range(int(within * 10)):
        try:
            docker_engine.containers.get(container_name(member_id))
        except docker.errors.NotFound:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the container of {member_id} is still there")


async def test_the_container_is_locked_down_as_check_e4_lists(docker_box: Box, docker_engine):
    assert (await docker_box.run(docker_box.alice, "true")).exit_code == 0
    attrs = inspect(docker_engine, docker_box.alice)
    config, host = attrs["Config"], attrs["HostConfig"]
    uid = docker_box.uid(docker_box.alice)
    assert config["User"] == f"{uid}:{uid}" and uid != 0
    assert config["Entrypoint"] == ["/usr/bin/tini", "--"]
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["ReadonlyRootfs"] is True
    assert host["Tmpfs"] == {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
    assert host["PidsLimit"] == 64 and host["Memory"] == 256 * 1024 * 1024 and host["NanoCpus"] == 500_000_000
    assert host["NetworkMode"] == "none" and host["Privileged"] is False
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert all("docker.sock" not in m["Source"] for m in attrs["Mounts"])
    assert mounts["/home/member"]["RW"] is True
    assert Path(mounts["/home/member"]["Source"]) == docker_box.core.files.home(docker_box.alice).resolve()
    assert mounts["/home/member/user-memory"]["RW"] is False and mounts["/home/member/shared-memory"]["RW"] is False
    # pid 1 is tini: a killed command's orphans are reaped, never left as zombies.
    assert (await docker_box.run(docker_box.alice, "cat /proc/1/comm")).output == "tini\n"


async def test_a_matching_container_is_reused_and_any_drift_recreates_it(docker_box: Box, docker_engine, tmp_path):
    manager, alice = docker_box.core.sandbox, docker_box.alice
    spec = await manager.ensure(alice)
    first = inspect(docker_engine, alice)["Id"]
    await manager.ensure(alice)
    assert inspect(docker_engine, alice)["Id"] == first  # unchanged spec: the same container

    docker_engine.images.get(spec.image).tag("skald-sandbox", "drift-test")
    retagged = dataclasses.replace(spec, image="skald-sandbox:drift-test")
    await manager.ensure(alice, retagged)
    second = inspect(docker_engine, alice)
    assert second["Id"] != first and second["Config"]["Image"] == "skald-sandbox:drift-test"

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "seen.txt").write_text("mounted\n")
    remounted = dataclasses.replace(spec, mounts=spec.mounts + (Mount(extra, "/home/member/extra", read_only=True),))
    result = await manager.execute(alice, "cat extra/seen.txt", spec=remounted)
    third = inspect(docker_engine, alice)
    assert third["Id"] != second["Id"] and result.output == "mounted\n"

    other_user = dataclasses.replace(spec, uid=spec.uid + 500, gid=spec.gid + 500)
    result = await manager.execute(alice, "id -u", spec=other_user)
    assert inspect(docker_engine, alice)["Id"] != third["Id"] and result.output == f"{spec.uid + 500}\n"

    # A container stopped behind the host's back is started again, not rebuilt.
    await manager.ensure(alice)
    fourth = inspect(docker_engine, alice)["Id"]
    docker_engine.containers.get(container_name(alice)).stop(timeout=0)
    assert (await docker_box.run(alice, "echo back")).output == "back\n"
    assert inspect(docker_engine, alice)["Id"] == fourth
    docker_engine.images.remove("skald-sandbox:drift-test")


async def test_a_deleted_or_deactivated_members_container_is_removed(docker_box: Box, docker_engine):
    await docker_box.run(docker_box.alice, "true")
    await docker_box.run(docker_box.bob, "true")
    admin = await docker_box.host.admin()
    response = await admin.patch(f"/api/admin/members/{docker_box.bob}", json={"active": False})
    assert response.status_code == 200, response.text
    await eventually_gone(docker_engine, docker_box.bob)
    response = await admin.delete(f"/api/admin/members/{docker_box.alice}")
    assert response.status_code in (200, 204), response.text
    await eventually_gone(docker_engine, docker_box.alice)


async def test_two_removals_of_one_container_at_once_both_succeed(docker_box: Box, docker_engine, caplog):
    """The engine refuses the second with 409 "removal ... is already in progress": the
    upgrade probe saw it as an ERROR with a traceback on a deactivation, for a container
    that was removed all the same. The second waits for the first instead."""
    await docker_box.run(docker_box.alice, "true")
    _, backend = await docker_box.core.sandbox.backend()
    outcomes = await asyncio.gather(*(backend.remove(docker_box.alice) for _ in range(4)), return_exceptions=True)
    assert [o for o in outcomes if isinstance(o, BaseException)] == []
    await eventually_gone(docker_engine, docker_box.alice, within=1.0)


async def test_reconcile_removes_only_this_instances_orphans(docker_box: Box, docker_engine):
    manager = docker_box.core.sandbox
    await docker_box.run(docker_box.alice, "true")
    backend = (await manager.backend())[1]
    orphan = dataclasses.replace(await manager.spec_for(docker_box.alice), member_id="0" * 32)
    stranger = dataclasses.replace(orphan, member_id="f" * 32, instance="another-instance")
    await backend.ensure(orphan)
    await backend.ensure(stranger)
    try:
        assert set(await backend.existing(manager.instance)) == {docker_box.alice, "0" * 32}
        await manager.reconcile()
        await eventually_gone(docker_engine, "0" * 32)
        assert inspect(docker_engine, docker_box.alice)["State"]["Running"]
        stranger_attrs = inspect(docker_engine, "f" * 32)
        assert stranger_attrs["Config"]["Labels"][LABEL_INSTANCE] == "another-instance"
    finally:
        await backend.remove("f" * 32)


async def test_a_membership_change_remounts_the_running_sandbox(docker_box: Box, docker_engine):
    alice = docker_box.alice
    await docker_box.run(alice, "true")
    before = inspect(docker_engine, alice)["Id"]
    folders = docker_box.core.folders
    folder = await folders.create_shared("garden", "Garden")
    await folders.add_shared_member(folder.id, "alice", can_write=False)  # announces folders.membership_changed
    import docker.errors

    for _ in range(100):
        await asyncio.sleep(0.1)
        try:
            attrs = inspect(docker_engine, alice)
        except docker.errors.NotFound:
            continue  # between the removal and the new container
        if attrs["Id"] != before and attrs["State"]["Running"]:
            break
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert attrs["Id"] != before, "the membership change did not reach the sandbox"
    assert mounts["/home/member/shared/garden"]["RW"] is False
    docker_box.core.buses.system.publish(SystemEvent("folders.membership_changed", alice))
    await asyncio.sleep(0.5)
    assert inspect(docker_engine, alice)["Id"] == attrs["Id"]  # nothing changed: nothing rebuilt


@pytest.mark.parametrize("ending", ["stop", "logout"])
async def test_a_container_still_being_built_when_the_command_is_cancelled_does_not_outlive_it(
    docker_box: Box, docker_engine, monkeypatch, ending: str
):
    """The build runs in a thread no cancellation stops. A command cancelled while its
    container is being made (a Stop, the member's logout, the server stopping) keeps the
    member's lock until the build ended, so the removal that follows finds the container
    instead of letting it appear afterwards and outlive the member's session and the
    server (it did, and later tests saw its processes under a reused uid). The build is
    slowed in its thread so the cancel lands inside it every time."""
    import threading

    backend = (await docker_box.core.sandbox.backend())[1]
    building = threading.Event()
    original = backend._ensure

    def slow_ensure(spec):
        building.set()
        time.sleep(2.0)
        return original(spec)

    monkeypatch.setattr(backend, "_ensure", slow_ensure)
    command = asyncio.ensure_future(docker_box.run(docker_box.alice, "true"))
    while not building.is_set():
        await asyncio.sleep(0.02)
    command.cancel()
    if ending == "stop":
        await docker_box.host.stop()
    else:
        await docker_box.core.sandbox.before_lock(docker_box.alice)
    with pytest.raises(asyncio.CancelledError):
        await command
    await asyncio.sleep(2.5)  # past the build, had anything been left to it
    await eventually_gone(docker_engine, docker_box.alice, within=1.0)

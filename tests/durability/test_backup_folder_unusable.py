"""A folder for backups that cannot be made (``backup.dir: /proc/skald-b``, found by an
operations probe) is a ``BackupError`` naming it like any failed backup: the schedule
logs it and tries again at its next slot instead of dying for good, the API answers it
without an internal error, and the control socket answers ``skald backup`` and stays up."""

from __future__ import annotations

import asyncio
import logging

import pytest

from skald_host.control import ask, start_control_socket
from skald_host.core.backups import BackupBusy, BackupError
from skald_host.core.backups.service import BackupFolderUnusable

UNUSABLE = "/proc/skald-b"


async def test_taking_a_backup_into_a_folder_that_cannot_be_made_is_a_backup_error_naming_it(skald):
    host = await skald.start(settings=skald.settings(backup={"dir": UNUSABLE}))
    with pytest.raises(BackupError, match=rf"^the folder for backups {UNUSABLE} cannot be made: .*backup\.dir") as raised:
        for _ in range(100):  # the start's look for unfinished backups holds the backup lock a moment
            try:
                await host.core.backups.take()
            except BackupBusy:
                await asyncio.sleep(0.02)
    assert isinstance(raised.value, BackupFolderUnusable)
    assert (raised.value.code, raised.value.values) == ("backup_dir_unusable", {"dir": UNUSABLE})


async def test_the_api_answers_an_unusable_folder_with_its_name_not_an_internal_error(skald):
    host = await skald.start(settings=skald.settings(backup={"dir": UNUSABLE}))
    admin = await host.admin()
    response = await admin.post("/api/admin/backups")
    body = response.json()
    assert (response.status_code, body["code"], body["values"]) == (500, "backup_dir_unusable", {"dir": UNUSABLE}), body
    assert UNUSABLE in body["error"]
    assert (await admin.get("/api/admin/backups")).json()["backups"] == []


async def test_the_schedule_logs_an_unusable_folder_and_tries_again(skald, caplog):
    caplog.set_level(logging.ERROR, logger="skald_host.core.backups.service")
    host = await skald.start(settings=skald.settings(backup={"dir": UNUSABLE, "every_hours": 0.0001}))
    failures: list[str] = []
    for _ in range(100):
        failures = [r.getMessage() for r in caplog.records if r.getMessage().startswith("scheduled backup: ")]
        if len(failures) >= 2:
            break
        await asyncio.sleep(0.05)
    assert len(failures) >= 2, failures
    assert UNUSABLE in failures[0]
    assert "scheduled-backups" in host.core.supervisor.names  # still running, for the next slot


async def test_the_control_socket_answers_an_unusable_folder_and_stays_up(skald, tmp_path):
    host = await skald.start()
    server = await start_control_socket(host.core)
    if server is None:
        pytest.skip("the data dir's path is too long for a unix socket here")
    async def backup_to(folder: str) -> dict:
        for _ in range(100):  # the start's look for unfinished backups holds the backup lock a moment
            answer = await ask(host.core.settings.data_dir, {"command": "backup", "to": folder})
            if "already being taken" not in str(answer.get("error")):
                return answer
            await asyncio.sleep(0.02)
        return answer

    try:
        # A --to folder is never made (a disk not mounted): one that does not exist is named.
        refused = await backup_to("/proc/skald-c")
        assert refused["ok"] is False and "/proc/skald-c does not exist: is the disk mounted?" in refused["error"], refused
        (tmp_path / "elsewhere").mkdir()
        taken = await backup_to(str(tmp_path / "elsewhere"))
        assert taken["ok"] is True, taken
    finally:
        server.close()
        await server.wait_closed()

"""A data-losing admin reset while the member's sandbox runs: the sandbox that had the
old home mounted is gone, and the next one mounts the fresh home (a container keeps
the folder it was given even after the folder is moved: a still-running one would
show the old files to whoever holds the new password)."""

from __future__ import annotations

NEW = "a fresh passphrase after the reset 9"


async def test_a_data_losing_reset_removes_the_running_sandbox_and_the_next_sees_a_fresh_home(box):
    await box.host.member("bob")  # unlocked, as while they chat
    result = await box.run(box.bob, "echo 'dear diary' > ~/diary.txt && cat ~/diary.txt")
    assert result.output.strip() == "dear diary", result
    assert box.core.sandbox.is_up(box.bob)
    admin = await box.host.admin()

    response = await admin.post(
        f"/api/admin/members/{box.bob}/reset-password", json={"new_password": NEW, "confirm_data_loss": True}
    )
    assert response.status_code == 200, response.text
    _, backend = await box.core.sandbox.backend()
    assert not box.core.sandbox.is_up(box.bob)
    assert box.bob not in await backend.existing(box.core.sandbox.instance)

    assert (await box.host.client().login("bob", NEW)).status_code == 200
    result = await box.run(box.bob, "ls -A ~")
    assert "diary.txt" not in result.output, result

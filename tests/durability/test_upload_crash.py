"""A server killed while it writes an upload leaves the upload's ``.part-*`` file
behind. The file listing hides it but the member's disk limit counts it, so the next
start removes it (found by a crash-kill probe: a 60 MiB leftover refused a later upload)."""

from __future__ import annotations

from .helpers import ADMIN_PASSWORD, crash_during, setup_admin


async def test_an_upload_cut_by_a_kill_leaves_nothing_after_the_next_start(servers):
    server = await servers.start(crash_at="upload.after_first_write")
    admin = await setup_admin(server)
    response = await admin.post("/api/conversations", json={"title": "files"})
    assert response.status_code == 201, response.text
    conversation_id = response.json()["id"]
    body = b"x" * (3 * 1024 * 1024)  # past the first 1 MiB write, where the server dies
    await crash_during(server, admin.post(
        f"/api/conversations/{conversation_id}/uploads", content=body, headers={"X-Filename": "big.bin"}))
    folder = servers.data_dir / "homes" / admin.member["id"] / "uploads" / conversation_id
    left = [p.name for p in folder.iterdir()]
    assert len(left) == 1 and left[0].startswith(".part-"), left  # what the kill left

    restarted = await servers.start()
    assert list(folder.iterdir()) == []
    assert "removed 1 partial upload(s) a stopped server left behind" in restarted.output
    admin = await restarted.login("admin", ADMIN_PASSWORD)
    response = await admin.post(
        f"/api/conversations/{conversation_id}/uploads", content=b"hello", headers={"X-Filename": "ok.txt"})
    assert response.status_code == 201, response.text

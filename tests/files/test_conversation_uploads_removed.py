"""Deleting a conversation deletes its uploads folder (``~/uploads/<conversation>/``):
once its rows are gone, never following a link the member's sandbox put in the home,
and fine when there is no folder. Other conversations' uploads stay."""

from __future__ import annotations

from urllib.parse import quote

from tests.chat.support import new_conversation
from tests.files.test_uploads import PNG, upload, uploads_dir


async def test_deleting_a_conversation_deletes_its_uploads(files):
    alice = await files.member("alice")
    doomed, kept = await new_conversation(files.alice), await new_conversation(files.alice)
    path = (await upload(files.alice, doomed, "photo.png", PNG, "image/png")).json()["path"]
    (uploads_dir(files, alice, doomed) / "sub").mkdir()  # the agent's own files in it go too
    (uploads_dir(files, alice, doomed) / "sub" / "notes.txt").write_text("made by a command")
    other = (await upload(files.alice, kept, "keep.png", PNG, "image/png")).json()["path"]
    assert (await files.alice.get(f"/api/file?path={quote(path)}")).status_code == 200

    response = await files.alice.delete(f"/api/conversations/{doomed}")
    assert response.status_code == 200, response.text
    assert not uploads_dir(files, alice, doomed).exists()
    assert (await files.alice.get(f"/api/file?path={quote(path)}")).status_code == 404
    assert (await files.alice.get(f"/api/file?path={quote(other)}")).content == PNG


async def test_the_uploads_go_only_once_the_conversation_is_deleted(files, monkeypatch):
    alice = await files.member("alice")
    cid = await new_conversation(files.alice)
    await upload(files.alice, cid, "a.png", PNG, "image/png")
    runtime = await files.core.chat.runtime(alice)
    seen = []
    remove = files.core.files.remove_uploads

    async def watched(member_id: str, conversation_id: str) -> None:
        seen.append(await runtime.store.find_root(conversation_id))  # the rows, as the delete left them
        await remove(member_id, conversation_id)

    monkeypatch.setattr(files.core.files, "remove_uploads", watched)
    assert (await files.alice.delete(f"/api/conversations/{cid}")).status_code == 200
    assert seen == [None]
    assert not uploads_dir(files, alice, cid).exists()


async def test_a_conversation_without_uploads_is_deleted_as_before(files):
    alice = await files.member("alice")
    cid = await new_conversation(files.alice)
    assert not uploads_dir(files, alice, cid).exists()
    assert (await files.alice.delete(f"/api/conversations/{cid}")).status_code == 200
    assert (await files.alice.get(f"/api/conversations/{cid}")).status_code == 404


async def test_links_in_the_home_are_removed_as_links_never_followed(files, tmp_path):
    alice = await files.member("alice")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the server's to delete")
    home = files.core.files.home(alice.id)

    linked = await new_conversation(files.alice)  # the conversation's folder is a link
    (home / "uploads").mkdir(exist_ok=True)
    (home / "uploads" / linked).symlink_to(outside, target_is_directory=True)
    assert (await files.alice.delete(f"/api/conversations/{linked}")).status_code == 200
    assert (outside / "keep.txt").exists()

    through = await new_conversation(files.alice)  # ``uploads`` itself is a link
    (home / "uploads" / linked).unlink()
    (home / "uploads").rmdir()
    (outside / through).mkdir()
    (outside / through / "keep.txt").write_text("nor this")
    (home / "uploads").symlink_to(outside, target_is_directory=True)
    assert (await files.alice.delete(f"/api/conversations/{through}")).status_code == 200
    assert (outside / through / "keep.txt").exists() and (outside / "keep.txt").exists()

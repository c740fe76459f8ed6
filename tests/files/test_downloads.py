"""Downloads of whole files: a project's explorer and a member's own ``/api/file``
stream any file an upload could make, larger than the viewer's cap included, in
chunks read off the event loop, with the headers that keep it from running as a page
of ours. The viewer's cap (``files.view_max_bytes``) only decides what is shown inline.
Small limits here keep the files small; a file spans several chunks all the same."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from skald_host.web.routes import files as file_routes
from tests.chat.support import new_conversation

VIEW_MAX = 64 * 1024
UPLOAD_MAX = 4 * 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 64


def _bytes(size: int) -> bytes:
    """Bytes whose every chunk differs, so a chunk sent twice or out of order shows."""
    block = bytes(range(256)) * 4
    return b"".join(i.to_bytes(4, "big") + block[4:] for i in range(size // len(block) + 1))[:size]


def _open_on(path: Path) -> list[str]:
    """This process's descriptors open on ``path`` (the host runs in the test's process)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                found.append(fd)
        except OSError:
            pass
    return found


async def _closed(path: Path) -> bool:
    for _ in range(100):
        if not _open_on(path):
            return True
        await asyncio.sleep(0.02)
    return False


@pytest.fixture
async def host(skald, monkeypatch):
    # Several chunks per file without a large file: the chunk is shrunk for the test.
    monkeypatch.setattr(file_routes, "STREAM_CHUNK", 16 * 1024)
    host = await skald.start(settings=skald.settings(files={"upload_max_bytes": UPLOAD_MAX, "view_max_bytes": VIEW_MAX}))
    await host.admin()
    return host


def _reads_off_the_loop(monkeypatch) -> list[bool]:
    """Whether each ``pread`` of the streamed bodies ran off the event loop's thread."""
    loop_thread = threading.current_thread()
    seen: list[bool] = []
    pread = os.pread

    def watched(fd: int, length: int, offset: int) -> bytes:
        seen.append(threading.current_thread() is not loop_thread)
        return pread(fd, length, offset)

    monkeypatch.setattr(os, "pread", watched)
    return seen


async def test_a_project_file_larger_than_the_view_cap_downloads_whole(host, monkeypatch):
    owner = await host.member("olga")
    pid = (await owner.post("/api/projects", json={"slug": "big"})).json()["id"]
    data = _bytes(3 * VIEW_MAX + 123)
    response = await owner.post(f"/api/projects/{pid}/files/upload/film.bin", content=data)
    assert response.status_code == 201, response.text
    off_loop = _reads_off_the_loop(monkeypatch)

    response = await owner.get(f"/api/projects/{pid}/files/content?path=film.bin")
    assert response.status_code == 200, response.text
    assert response.content == data
    assert response.headers["content-length"] == str(len(data))
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"] == "attachment; filename=\"film.bin\"; filename*=UTF-8''film.bin"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert len(off_loop) > 1 and all(off_loop)  # several chunks, none read on the loop
    assert await _closed(host.settings.data_dir / "projects" / owner.member["id"] / "big" / "film.bin")


async def test_a_project_download_keeps_its_access_checks(host):
    owner = await host.member("olga")
    stranger = await host.member("sven")
    pid = (await owner.post("/api/projects", json={"slug": "big"})).json()["id"]
    assert (await owner.post(f"/api/projects/{pid}/files/upload/a.txt", content=b"mine")).status_code == 201
    assert (await stranger.get(f"/api/projects/{pid}/files/content?path=a.txt")).status_code == 404
    assert (await owner.get(f"/api/projects/{pid}/files/content?path=missing.txt")).json()["code"] == "no_such_file"
    assert (await owner.post(f"/api/projects/{pid}/files/folder", json={"path": "sub"})).status_code == 201
    assert (await owner.get(f"/api/projects/{pid}/files/content?path=sub")).status_code == 404


async def test_a_members_own_file_larger_than_the_view_cap_is_a_download(host, monkeypatch):
    alice = await host.member("alice")
    member = await host.core.users.find("alice")
    cid = await new_conversation(alice)
    text = b"line of text\n" * (VIEW_MAX // 13 * 3)  # text, but too large to show in the page
    saved = (await alice.post(f"/api/conversations/{cid}/uploads", content=text, headers={"X-Filename": "log.txt"})).json()
    image = (await alice.post(f"/api/conversations/{cid}/uploads", content=PNG, headers={"X-Filename": "dot.png"})).json()
    off_loop = _reads_off_the_loop(monkeypatch)

    response = await alice.get(f"/api/file?path={quote(saved['path'])}")
    assert response.status_code == 200, response.text
    assert response.content == text and response.headers["content-length"] == str(len(text))
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["content-disposition"].startswith("attachment;")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in response.headers["content-security-policy"]
    assert off_loop and all(off_loop)

    small = await alice.get(f"/api/file?path={quote(image['path'])}")  # within the cap: shown as itself
    assert small.content == PNG and small.headers["content-type"] == "image/png"
    assert small.headers["content-disposition"].startswith("inline;")
    uploads = host.core.files.home(member.id) / "uploads" / cid
    assert await _closed(uploads / "log.txt") and await _closed(uploads / "dot.png")

    bob = await host.member("bob")  # the path is the caller's own namespace: not alice's file
    assert (await bob.get(f"/api/file?path={quote(saved['path'])}")).status_code == 404


async def test_a_download_the_client_abandons_lets_its_file_go(host):
    owner = await host.member("olga")
    pid = (await owner.post("/api/projects", json={"slug": "big"})).json()["id"]
    data = _bytes(UPLOAD_MAX - 1)
    assert (await owner.post(f"/api/projects/{pid}/files/upload/film.bin", content=data)).status_code == 201
    async with owner.http.stream("GET", f"/api/projects/{pid}/files/content?path=film.bin", headers=owner.headers()) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_raw():
            assert data.startswith(chunk)
            break  # and the connection closes with most of the file unsent
    assert await _closed(host.settings.data_dir / "projects" / owner.member["id"] / "big" / "film.bin")

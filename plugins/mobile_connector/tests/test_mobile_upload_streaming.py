"""The phone's upload streams (contract 1.12: ``HostApi.save_upload`` takes the body's
chunks): a large file arrives whole without the server holding it in memory, one over
the upload limit is refused with the uploads' own answer and leaves no file, and a body
cut off midway leaves none either. (A probe saw a 200 MB phone upload take the server
from 149 MB to 560 MB: the route read the whole body before handing it over.)"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import tracemalloc
from pathlib import Path
from typing import AsyncIterator

import pytest_asyncio

from skald_host.testing import SkaldHarness
from mobile_support import BASE, Setup, mobile_host, paired_device

MIB = 1024 * 1024
LIMIT = 8 * MIB  # the upload limit of the host that refuses (a small one, quick to pass)


@pytest_asyncio.fixture
async def capped(skald: SkaldHarness) -> AsyncIterator[Setup]:
    """The mobile connector on a host whose upload limit is ``LIMIT``."""
    async with mobile_host(skald, skald.settings(files={"upload_max_bytes": LIMIT})) as started:
        yield started


async def _new_conversation(device) -> str:
    response = await device.post(f"{BASE}/conversations")
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _piece(index: int) -> bytes:
    """1 MiB of bytes that differ from piece to piece (a shifted or dropped piece shows)."""
    seed = hashlib.sha256(index.to_bytes(4, "big")).digest()
    return seed * (MIB // len(seed))


def _uploads(setup: Setup, member_id: str, conversation: str) -> Path:
    return setup.host.core.files.home(member_id) / "uploads" / conversation


def _left_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def test_a_large_phone_upload_arrives_whole_and_is_never_held_in_memory(setup):
    """64 MiB sent chunked (as a phone streams a file): the saved file is the same bytes,
    and the server process's Python allocations grow by far less than the body while it
    comes in (the host runs in this process, so ``tracemalloc`` sees the server; the
    client makes each piece as it sends it)."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    conversation = await _new_conversation(phone)
    folder = _uploads(setup, alice.member["id"], conversation)
    pieces = 64
    digest = hashlib.sha256()

    def written() -> int:
        total = 0
        for part in folder.glob(".part-*") if folder.exists() else ():
            try:
                total += part.stat().st_size
            except FileNotFoundError:  # linked under its name meanwhile
                pass
        return total

    async def body() -> AsyncIterator[bytes]:
        # The client keeps at most 2 MiB ahead of what the server has written, as a
        # phone's network would: Quart takes a body in as fast as it is sent (it drains
        # the server's bounded queue into its own buffer), and this client, in the same
        # event loop, could outrun the disk, so the measure would be of that backlog, not
        # of the route. A route that reads the body whole writes nothing until the end:
        # the client stops waiting for it after 5 s, and the measure shows the body held.
        paced, sent = True, 0
        for index in range(pieces):
            piece = _piece(index)
            digest.update(piece)
            yield piece
            sent += len(piece)
            deadline = time.monotonic() + 5
            while paced and written() < sent - 2 * MIB:
                paced = time.monotonic() < deadline
                await asyncio.sleep(0.002)

    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        uploaded = await phone.post(
            f"{BASE}/uploads?name=big%20video.bin&conversation_id={conversation}",
            content=body(), headers={"Content-Type": "application/octet-stream"}, timeout=120,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert uploaded.status_code == 201, uploaded.text
    saved = uploaded.json()
    size = pieces * MIB
    assert saved["size"] == size and saved["mime"] == "application/octet-stream"
    assert saved["path"] == f"uploads/{conversation}/big video.bin", saved
    with (folder / "big video.bin").open("rb") as file:
        assert hashlib.file_digest(file, "sha256").digest() == digest.digest()  # whole, in order
    assert _left_in(folder) == ["big video.bin"]  # no partial file left beside it
    growth = peak - base
    # Read whole, the body was held at least twice (Quart's buffer and its copy): 131 MiB.
    assert growth < 32 * MIB, f"the server held {growth / MIB:.1f} MiB for a {size / MIB:.0f} MiB upload"


async def _chunked(setup: Setup, device, path: str, total: int, *, chunk: int = 64 * 1024) -> tuple[int | None, dict | None]:
    """A chunked POST on a raw socket: up to ``total`` bytes, stopping once the server
    answers; the status and JSON answer, or (None, None) when the server's close
    overtook its answer."""
    host, port = setup.host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = {"Host": f"{host}:{port}", "Transfer-Encoding": "chunked", "Content-Type": "application/octet-stream", **device.headers("POST")}
    writer.write((f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    answer = b""
    try:
        sent = 0
        while sent < total:
            writer.write(f"{chunk:x}\r\n".encode() + b"p" * chunk + b"\r\n")
            sent += chunk
            await writer.drain()
            try:
                answer = await asyncio.wait_for(reader.read(65536), 0.001)
            except asyncio.TimeoutError:
                continue
            if answer:
                break
        if not answer:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        answer += await asyncio.wait_for(reader.read(), 10)
    except (ConnectionResetError, BrokenPipeError):
        return None, None
    finally:
        writer.close()
    if not answer:
        return None, None
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    if b"chunked" in headers.lower():
        size, _, tail = body.partition(b"\r\n")
        body = tail[: int(size, 16)]
    return int(status_line.split()[1]), json.loads(body)


async def test_a_phone_upload_over_the_limit_is_refused_and_leaves_no_file(capped):
    """Chunked past ``files.upload_max_bytes``: the uploads' own refusal naming the limit
    (or a reset when the server's close overtakes it), and nothing stored, not even the
    partial file; exactly the limit is taken."""
    alice = await capped.host.member("alice")
    phone = await paired_device(capped, alice)
    conversation = await _new_conversation(phone)
    folder = _uploads(capped, alice.member["id"], conversation)
    status, refused = await _chunked(capped, phone, f"{BASE}/uploads?name=huge.bin&conversation_id={conversation}", LIMIT * 4)
    assert status in (413, None), (status, refused)
    if status is not None:
        assert refused["code"] == "upload_too_large", refused
        assert refused["values"] == {"limit": LIMIT, "size": "8 MiB", "size_bytes": LIMIT}, refused
    for _ in range(100):  # the server lets go of its side after answering
        if not _left_in(folder):
            break
        await asyncio.sleep(0.05)
    assert _left_in(folder) == []
    assert (await phone.get(f"{BASE}/me")).status_code == 200  # the server is fine

    exactly = await phone.post(f"{BASE}/uploads?name=full.bin&conversation_id={conversation}", content=b"f" * LIMIT,
                               headers={"Content-Type": "application/octet-stream"})
    assert exactly.status_code == 201 and exactly.json()["size"] == LIMIT, exactly.text
    assert _left_in(folder) == ["full.bin"]


async def test_a_phone_upload_cut_off_midway_leaves_no_file(setup):
    """The phone loses its network in the middle of a file: the server was already
    writing it (streamed, so a partial file exists while it comes), and drops it."""
    alice = await setup.host.member("alice")
    phone = await paired_device(setup, alice)
    conversation = await _new_conversation(phone)
    folder = _uploads(setup, alice.member["id"], conversation)
    host, port = setup.host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = {"Host": f"{host}:{port}", "Transfer-Encoding": "chunked", "Content-Type": "application/octet-stream", **phone.headers("POST")}
    path = f"{BASE}/uploads?name=cut.bin&conversation_id={conversation}"
    writer.write((f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    piece = b"c" * (64 * 1024)
    deadline = time.monotonic() + 20
    while not any(name.startswith(".part-") for name in _left_in(folder)):  # the server writes as it reads
        assert time.monotonic() < deadline, "no partial file while the body came: the route did not stream it"
        writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        await writer.drain()
        await asyncio.sleep(0.01)
    writer.write(f"{len(piece):x}\r\n".encode() + piece[:1000])  # cut inside a chunk
    await writer.drain()
    writer.close()
    for _ in range(200):
        if not _left_in(folder):
            break
        await asyncio.sleep(0.05)
    assert _left_in(folder) == []
    assert (await phone.get(f"{BASE}/me")).status_code == 200

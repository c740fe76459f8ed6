"""``HostApi.save_upload`` takes a stream (contract 1.12): an async iterable of byte
chunks is written as it comes and kept only once all of it arrived. Past the upload
limit, a chunk that is not bytes, or an iterable that fails midway (a body cut off):
nothing of the file is left, and the caller is told."""

from __future__ import annotations

import hashlib

import pytest

from skald_hookspecs.channels import ChannelRequestError

from .support import CHANNEL, RecordingChannel

KIB = 1024
LIMIT = 256 * KIB


async def start(skald):
    channel = RecordingChannel()
    host = await skald.start(plugins=[channel], enable=[CHANNEL], settings=skald.settings(files={"upload_max_bytes": LIMIT}))
    alice = await host.member("alice")
    member_id = alice.member["id"]
    conversation_id = await channel.api.new_conversation(member_id)
    return host, channel.api, member_id, conversation_id


def pieces(count: int, size: int = 16 * KIB) -> list[bytes]:
    return [hashlib.sha256(bytes([i])).digest() * (size // 32) for i in range(count)]


async def stream(chunks, *, then: BaseException | None = None):
    for chunk in chunks:
        yield chunk
    if then is not None:
        raise then


def left(host, member_id: str, conversation_id: str) -> list[str]:
    folder = host.core.files.home(member_id) / "uploads" / conversation_id
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


async def test_a_stream_is_saved_whole_as_bytes_are(skald):
    host, api, member_id, conversation_id = await start(skald)
    chunks = pieces(10)
    saved = await api.save_upload(member_id, "notes.bin", stream(chunks), conversation_id=conversation_id)
    assert saved == {"path": f"uploads/{conversation_id}/notes.bin", "mime": "application/octet-stream", "size": sum(map(len, chunks))}
    assert (host.core.files.home(member_id) / saved["path"]).read_bytes() == b"".join(chunks)
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\x00" * 32
    photo = await api.save_upload(member_id, "photo.png", stream([png[:5], bytearray(png[5:])]), conversation_id=conversation_id)
    assert (photo["mime"], photo["size"]) == ("image/png", len(png))  # sniffed from the first chunks
    # Exactly the limit is taken.
    full = await api.save_upload(member_id, "full.bin", stream(pieces(LIMIT // (16 * KIB))), conversation_id=conversation_id)
    assert full["size"] == LIMIT
    assert left(host, member_id, conversation_id) == ["full.bin", "notes.bin", "photo.png"]


async def test_a_stream_past_the_limit_or_cut_off_leaves_nothing(skald):
    host, api, member_id, conversation_id = await start(skald)
    pulled = 0

    async def endless():
        nonlocal pulled
        while True:
            pulled += 1
            yield b"e" * (16 * KIB)

    with pytest.raises(ChannelRequestError, match="larger than the upload limit"):
        await api.save_upload(member_id, "huge.bin", endless(), conversation_id=conversation_id)
    assert pulled == LIMIT // (16 * KIB) + 1  # pulled no further than the limit
    assert left(host, member_id, conversation_id) == []

    class CutOff(Exception):
        pass

    with pytest.raises(CutOff):  # what the stream raises reaches the caller as it is
        await api.save_upload(member_id, "cut.bin", stream(pieces(4), then=CutOff()), conversation_id=conversation_id)
    assert left(host, member_id, conversation_id) == []

    with pytest.raises(ChannelRequestError, match="bytes"):
        await api.save_upload(member_id, "text.bin", stream([b"fine", "not bytes"]), conversation_id=conversation_id)
    assert left(host, member_id, conversation_id) == []
    with pytest.raises(ChannelRequestError, match="bytes"):
        await api.save_upload(member_id, "x.bin", ["a list", "is not a stream"], conversation_id=conversation_id)


async def test_a_stream_is_not_pulled_for_a_refused_conversation(skald):
    host, api, member_id, conversation_id = await start(skald)
    pulled = 0

    async def counted():
        nonlocal pulled
        pulled += 1
        yield b"never"

    with pytest.raises(ChannelRequestError, match="no such conversation"):
        await api.save_upload(member_id, "x.bin", counted(), conversation_id="c-not-mine")
    assert pulled == 0

"""KeptRead: a read is kept until a write through its owner, and a read that spans a
write is used once but never kept (it may predate the write's commit)."""

from __future__ import annotations

import asyncio

from skald_host.core.storage.kept import KeptRead


async def test_a_read_is_kept_until_a_write_and_a_read_racing_a_write_is_not_kept():
    table = {"value": 1}
    reads = 0
    gate = asyncio.Event()

    async def read() -> int:
        nonlocal reads
        reads += 1
        seen = table["value"]
        await gate.wait()  # the read's answer is fixed here; its return comes later
        return seen

    kept = KeptRead(read)
    gate.set()
    assert await kept.get() == 1 and await kept.get() == 1 and reads == 1

    async def update() -> None:
        table["value"] = 2

    await kept.write(update())
    assert await kept.get() == 2 and reads == 2

    # A read that saw the old row while a write ran: used by its caller, not kept.
    gate.clear()
    kept.drop()
    racing = asyncio.ensure_future(kept.get())
    await asyncio.sleep(0)
    table["value"] = 3
    writing = asyncio.ensure_future(kept.write(asyncio.sleep(0)))
    await asyncio.sleep(0)
    gate.set()
    assert await racing == 2
    await writing
    assert await kept.get() == 3 and reads == 4


async def test_a_failed_write_drops_the_kept_copy_too():
    table = {"value": 1}

    async def read() -> int:
        return table["value"]

    kept = KeptRead(read)
    assert await kept.get() == 1

    async def half_written() -> None:
        table["value"] = 2  # whether a failed write committed is not known to the caller
        raise RuntimeError("disk full")

    try:
        await kept.write(half_written())
    except RuntimeError:
        pass
    assert await kept.get() == 2

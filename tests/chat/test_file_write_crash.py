"""SIGKILL while the assistant's ``write_file`` writes: the file is written beside its
target and renamed over it once whole, so the kill leaves the target as it was and a
temporary ``.<name>.<hex>.tmp`` beside it. The next start removes that file (it is
counted against the member's disk limit, and nothing else ever would: found by a
crash-kill probe, a 2 MiB leftover that survived two restarts), and never one a write
began after the start.

The server is a real subprocess killed outright at the named point; the scripted model
server runs in the test process."""

from __future__ import annotations

import os
import time
from typing import Any

from durability.helpers import Servers
from skald_host.core.folders.listing import CUT_WRITE
from skald_host.testing import Reply, ScriptedModelServer, ToolCall

from .support import ChatSocket, eventually, member_with_models, new_conversation

PASSWORD = "alice's passphrase for the file write crash test"


async def test_a_write_cut_by_a_kill_leaves_no_temporary_file_after_the_next_start(servers: Servers, model: ScriptedModelServer):
    server = await servers.start(crash_at="file_write.after_first_write")
    alice, alice_id = await member_with_models(
        server, model, PASSWORD, rule={"tool_pattern": "write_file", "action": "allow", "priority": 100})

    def respond(request: Any) -> Reply:
        if request.messages[-1]["role"] == "tool":
            return Reply("Written.")
        return Reply(tool_calls=[ToolCall("write_file", {"path": "notes/big.txt", "content": "x" * 100_000})])

    model.responder = respond
    async with ChatSocket(alice) as sock:
        await sock.send(await new_conversation(alice), "Write it down.")
        await eventually(lambda: not server.running, what="the server to kill itself in the middle of the write")
    folder = servers.data_dir / "homes" / alice_id / "notes"
    [left] = os.listdir(folder)
    assert CUT_WRITE.fullmatch(left) and left.startswith(".big.txt."), left  # what the kill left, and nothing else
    # As if a write had begun after the next start (modified after it): the sweep sees it
    # and must leave it alone.
    fresh = folder / ".other.txt.0123abcd.tmp"
    fresh.write_bytes(b"in flight")
    os.utime(fresh, (time.time() + 600, time.time() + 600))

    again = await servers.start()
    await eventually(lambda: sorted(os.listdir(folder)) == [fresh.name], what="the cut write to be removed")
    await eventually(lambda: "removed 1 cut file write(s) a stopped server left behind" in again.output, what="the sweep's log line")
    assert fresh.read_bytes() == b"in flight"
    # No shared folder or project exists here: nothing to look through, nothing to warn about.
    assert "could not all be looked for" not in again.output

"""Check D2 for the channel surface: what a channel plugin is handed — its events and
what the ``HostApi`` channel methods return — holds no password, session token, inbox
private key or database handle."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from skald_host.core.storage import Database
from skald_host.testing import Reply, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from tests.chat.support import MODEL_A
from tests.chat.test_hook_surface import walk


async def test_channel_events_and_host_api_results_carry_no_secret_and_no_handle(channels):
    alice = await channels.host.member("alice")
    member_id, api = alice.member["id"], channels.channel.api
    channels.server.script(MODEL_A, [Reply(tool_calls=[ToolCall("write_note", {"text": "n"})]), Reply("Done.")])
    returned: list[Any] = [await api.send_message(member_id, "Write a note", idempotency_key="s-1")]
    card = await channels.channel.wait_for("approval")
    returned.append(await api.resolve_approval(member_id, card.approval_id, True))
    await channels.channel.wait_for("answer")
    returned += [await api.new_conversation(member_id), await api.stop_turn(member_id), await api.member_locale(member_id)]
    returned.append(await api.save_upload(member_id, "a.txt", b"hello"))
    host = await channels.restart()
    returned.append(await channels.channel.api.send_message(member_id, "while locked"))
    private_key = await _private_key(channels, host, member_id)

    reached: list[Any] = []
    walk([returned, channels.channel.events, channels.channel.api], reached, set())
    handles = [type(v).__name__ for v in reached if isinstance(v, (Database, sqlite3.Connection))]
    assert handles == [], f"the channel surface hands out database handles: {handles}"
    text = json.dumps([v for v in reached if isinstance(v, (str, int, float))], default=str)
    for secret in (ADMIN_PASSWORD, MEMBER_PASSWORD, alice.session_token, private_key.hex()):
        assert secret not in text
    assert private_key not in [v for v in reached if isinstance(v, bytes)]
    assert {e.kind for _, e in channels.channel.events} >= {"typing", "approval", "approval_resolved", "answer"}


async def _private_key(channels, host, member_id: str) -> bytes:
    """Read through the member's own unlocked file, as only their session can."""
    await host.member("alice")
    row = await host.core.users.owner_db(member_id).run(lambda c: c.execute("SELECT private_key FROM inbox_key").fetchone())
    return bytes(row[0])

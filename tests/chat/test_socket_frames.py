"""The member socket's event frames: what each streamed token costs the host's loop."""

from __future__ import annotations

from quart.wrappers.websocket import Websocket

from skald_host.testing import Reply

from .support import MODEL_A, ChatSocket, configure_models, new_conversation, types


async def test_event_frames_go_to_the_server_without_quarts_per_message_yield(chat, monkeypatch):
    """Quart's ``Websocket.send`` yields a loop pass (``asyncio.sleep(0)``) and accepts
    the socket again before every message: for a streamed answer, one more loop pass
    and a dozen calls per token (issue 19: the socket's frames skip it). Events still
    arrive whole and in order; command replies (acks) may take the wrapper."""
    through_wrapper: list[str] = []
    original = Websocket.send

    async def counting(self: Websocket, data: str | bytes) -> None:
        through_wrapper.append(data if isinstance(data, str) else data.decode())
        await original(self, data)

    monkeypatch.setattr(Websocket, "send", counting)
    await configure_models(chat.admin, chat.server)
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("one two three four", token_delay=0.01)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Count.")
        events = await sock.turn(cid)
    kinds = types(events)
    assert "token" in kinds and kinds[-1] == "turn_finished"
    assert "".join(e["delta"] for e in events if e["type"] == "token") == "one two three four"
    assert [m for m in through_wrapper if m.startswith(('{"type":"event"', '{"type":"events"'))] == []

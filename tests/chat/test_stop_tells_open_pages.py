"""A graceful stop (SIGTERM) cuts the running answers, and the open pages must hear it:
the socket closed (1001) as soon as the stop began, before the turns it cut said they
ended, and the page kept the typing cursor, the running dot and Stop (crash-kill probe).
Each cut turn's ``turn_finished`` now goes out before the close."""

from __future__ import annotations

import asyncio

from skald_host.testing import Hang

from .support import MODEL_A, TIMEOUT, ChatSocket, configure_models, new_conversation


async def test_a_graceful_stop_sends_the_cut_turns_end_before_closing_the_socket(chat):
    await configure_models(chat.admin, chat.server, (MODEL_A,))
    chat.server.script(MODEL_A, [Hang(text="half an answer", token_delay=0.01)])
    alice = await chat.host.member("alice")
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Stream.")
        await sock.wait_event(cid, "token")
        # What SIGTERM does first (``server.serve_forever``'s shutdown trigger).
        chat.host.core.announce_stop()
        await chat.host.core.interrupt_turns()
        await asyncio.wait_for(asyncio.gather(sock._reader, return_exceptions=True), TIMEOUT)  # the server closed it
        assert [e["type"] for e in sock.events if e.get("conversation_id") == cid][-1] == "turn_finished"

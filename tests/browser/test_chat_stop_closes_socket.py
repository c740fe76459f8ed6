"""A server stopping closes the page's socket with 1001. What ran was cut by the stop
(interrupted, resumed at the next start): the page must not keep the typing cursor, the
running dot and Stop for it, even when the close comes before the turn's end was heard
(crash-kill probe: an old server, or a stop whose wait for the turns' events ran out).
The socket is closed here by the test, the server's events held back, so the close
always comes first."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import expect

from skald_host.testing import Hang, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model, send


async def test_a_1001_close_marks_the_running_answer_interrupted(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("carol")
        server.script(MODEL, [Hang(text="I am thinking very slowly about this question", token_delay=0.1)])
        page = await browser_pages.new(host.url)
        sockets: list[Any] = []
        refuse = [False]

        async def route(ws: Any) -> None:
            if refuse[0]:
                await ws.close(code=1011)  # the server is down: no reconnect
                return
            ws.connect_to_server()
            sockets.append(ws)

        await page.route_web_socket("**/api/ws", route)
        await sign_in(page, "carol", MEMBER_PASSWORD)
        await send(page, "Take your time")
        answer = page.locator(".msg.assistant")
        await expect(answer.locator(".msg-body")).to_contain_text("I am thinking")
        stop = page.get_by_role("button", name="Stop")
        await expect(stop).to_be_visible()
        conversation_id = page.url.rsplit("/", 1)[1]
        dot = page.locator(f".conv-list li[data-conversation-id='{conversation_id}'] .running-dot")
        await expect(dot).to_have_count(1)

        refuse[0] = True
        await sockets[-1].close(code=1001, reason="session ended")
        await expect(answer).to_have_attribute("data-status", "interrupted")
        await expect(answer).not_to_have_class(re.compile(r"\bstreaming\b"))
        await expect(stop).to_be_hidden()
        await expect(dot).to_have_count(0)

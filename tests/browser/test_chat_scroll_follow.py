"""A transcript pinned to its end stays there when an answer grows after it was drawn:
math is typeset by KaTeX (loaded the first time an answer has math) and its fonts
arrive later still, after the transcript followed the answer. A reader who scrolled up
is left where they are."""

from __future__ import annotations

import asyncio
from typing import Any

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model, send

LONG_ANSWER_WITH_MATH = "\n\n".join(
    [f"Paragraph {n}: " + "a sentence that takes some room in the transcript. " * 4 for n in range(1, 13)]
    + ["The area under the line is", "$$\\int_0^1 x\\,dx$$"]
)
SCROLLED_TO_END = """() => {
  const transcript = document.querySelector(".transcript");
  return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight <= 1;
}"""


async def test_an_answer_ending_in_display_math_scrolls_fully_into_view(skald, browser_pages):
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("mia", display_name="Mia")
        words = " ".join(f"word{n}" for n in range(1, 61))
        server.script(MODEL, [Reply(text=LONG_ANSWER_WITH_MATH), Reply(text=f"{words}\n\n$$e^{{i\\pi}} + 1 = 0$$", token_delay=0.05)])
        page = await browser_pages.new(host.url)
        # KaTeX arrives once the answer is drawn and followed, as it does when its
        # module is slower than the answer: the math then grows the finished message.
        katex_wanted = asyncio.Event()
        answered = asyncio.Event()

        async def katex_after_the_answer(route: Any) -> None:
            katex_wanted.set()
            await answered.wait()
            await route.continue_()

        await page.route("**/vendor/katex/katex.js", katex_after_the_answer)
        await sign_in(page, "mia", MEMBER_PASSWORD)
        await send(page, "How much is the integral of x from 0 to 1?")
        answer = page.locator(".msg.assistant").last
        await expect(answer).to_have_attribute("data-status", "complete")
        await expect(answer.get_by_role("button", name="Regenerate")).to_be_visible()
        await asyncio.wait_for(katex_wanted.wait(), 10)
        await page.wait_for_function(SCROLLED_TO_END)
        answered.set()
        await expect(answer.locator(".md-math.display.rendered .katex-display")).to_be_visible()
        await page.evaluate("() => document.fonts.ready")
        await page.wait_for_function(SCROLLED_TO_END)
        await expect(answer.get_by_role("button", name="Regenerate")).to_be_in_viewport(ratio=1)

        # Scrolled up to read while the next answer streams: it stays where it is.
        await send(page, "Once more, please.")
        streaming = page.locator(".msg.assistant.streaming")
        await expect(streaming).to_be_visible()
        await page.locator(".transcript").evaluate("(t) => { t.scrollTop = 0; t.dispatchEvent(new Event('scroll')); }")
        latest = page.locator(".msg.assistant").last
        await expect(latest).to_have_attribute("data-status", "complete")
        await expect(latest.locator(".md-math.rendered .katex")).to_be_visible()
        await page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert await page.locator(".transcript").evaluate("(t) => t.scrollTop") == 0

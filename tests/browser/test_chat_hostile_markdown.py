"""Hostile Markdown in an answer does not freeze the tab (a hostile-input probe: 400 kB
of "*a"/"_a" held the page for 29 s in one task, a 1,000-deep list 16 s, 5 MB of "x" 4 s,
5,000 formulas slowed every page switch after them). A message past the size or nesting
limit is plain text with a "Show formatted" button; KaTeX draws at most 100 formulas of a
message; a streamed answer keeps to the same limits. Long tasks are measured with a
PerformanceObserver, against a generous bound: the plain-text fallback is the assertion
that matters."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import expect

from skald_host.testing.host import MEMBER_PASSWORD
from skald_host.testing.model_server import Reply

from .kit import sign_in, stored_conversation
from .test_accessibility import assert_no_violations

LONG_TASK_BOUND_MS = 2000
PLAIN_SHOWN = 200_000  # markdown.js

WATCH_LONG_TASKS = """() => {
  window.__longTasks = [];
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longTasks.push(e.duration); })
    .observe({ type: "longtask", buffered: false });
}"""

EMPHASIS = "*a" * 100_000 + "\n" + "_a" * 100_000  # 400 kB
NESTED = "".join("  " * depth + "- item\n" for depth in range(1_000))  # a list 1,000 deep
NESTED = NESTED + "x" * max(0, 1_000_000 - len(NESTED))
PLAIN_X = "x" * 5_000_000
SHALLOW_DEEP = "".join("  " * depth + "- level\n" for depth in range(60))  # short, but 60 deep
PLAIN_OF_LENGTH = """(length) => [...document.querySelectorAll(".msg.assistant .md-plain")].some((n) => n.textContent.length === length)"""
MATH = " ".join(f"$x_{{{n}}}$" for n in range(4_000))  # 43 kB: under the plain-text size


async def _long_tasks(page: Any) -> list[float]:
    await page.wait_for_timeout(300)  # a long task is reported once it has ended
    return await page.evaluate("() => window.__longTasks")


async def test_hostile_stored_answers_are_plain_text_and_hold_the_page_briefly(skald, browser_pages):
    host = await skald.start()
    client = await host.member("lena")
    page = await browser_pages.new(host.url)
    await sign_in(page, "lena", MEMBER_PASSWORD)
    for title, answer in (("emphasis", EMPHASIS), ("nested", NESTED), ("plain", PLAIN_X), ("shallow deep", SHALLOW_DEEP)):
        conversation_id = await stored_conversation(host, client.member["id"], title, [("user", "Say it"), ("assistant", answer)])
        await page.evaluate(WATCH_LONG_TASKS)
        await page.goto(f"{host.url}/#chat/{conversation_id}")
        # At most PLAIN_SHOWN characters laid out at first (5 MB of text took seconds too).
        await page.wait_for_function(PLAIN_OF_LENGTH, arg=min(len(answer), PLAIN_SHOWN), timeout=20_000)
        answer_node = page.locator(".msg.assistant").last
        tasks = await _long_tasks(page)
        assert max(tasks, default=0) < LONG_TASK_BOUND_MS, (title, tasks)
        await expect(answer_node.get_by_role("button", name="Show formatted")).to_be_visible()
        await expect(answer_node.get_by_role("button", name="Show the whole text")).to_be_visible(visible=len(answer) > PLAIN_SHOWN)
        if title == "emphasis":
            await assert_no_violations(page, "a heavy answer as plain text")

    # On request, it is formatted after all (the short deep one: quick enough to wait for).
    answer_node = page.locator(".msg.assistant").last
    await answer_node.get_by_role("button", name="Show formatted").click()
    await expect(answer_node.locator(".md-plain")).to_have_count(0)
    await expect(answer_node.locator("li").first).to_be_attached()


async def test_a_message_draws_at_most_a_hundred_formulas_and_shows_the_rest_as_tex(skald, browser_pages):
    host = await skald.start()
    client = await host.member("lena")
    conversation_id = await stored_conversation(host, client.member["id"], "math", [("user", "Say it"), ("assistant", MATH)])
    page = await browser_pages.new(host.url)
    await sign_in(page, "lena", MEMBER_PASSWORD)
    await page.evaluate(WATCH_LONG_TASKS)
    await page.goto(f"{host.url}/#chat/{conversation_id}")
    answer_node = page.locator(".msg.assistant").last
    await expect(answer_node.locator(".md-math.rendered")).to_have_count(100, timeout=20_000)
    await expect(answer_node.locator(".md-math-source")).to_have_count(3_900)
    await expect(answer_node.locator(".md-math-source").last).to_have_text("$x_{3999}$")
    tasks = await _long_tasks(page)
    assert max(tasks, default=0) < LONG_TASK_BOUND_MS, tasks


async def test_a_formula_asking_for_a_huge_size_stays_small(skald, browser_pages):
    """``\\rule{9999em}{9999em}`` drew a box 190,000 px tall (security sweep): every
    message after it was out of reach. Sizes a formula names are capped (20 em)."""
    host = await skald.start()
    client = await host.member("lena")
    huge = "Before $\\color{red}{\\rule{9999em}{9999em}}$ after, and more below."
    conversation_id = await stored_conversation(host, client.member["id"], "huge", [("user", "Say it"), ("assistant", huge)])
    page = await browser_pages.new(host.url)
    await sign_in(page, "lena", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#chat/{conversation_id}")
    formula = page.locator(".msg.assistant .md-math.rendered")
    await expect(formula).to_have_count(1, timeout=20_000)
    box = await formula.bounding_box()
    assert box is not None and box["height"] < 2_000 and box["width"] < 2_000, box
    assert await page.evaluate("document.documentElement.scrollHeight") < 5_000


async def test_a_hostile_streamed_answer_turns_plain_as_it_streams(skald, browser_pages):
    chunk = 20_000
    server = await skald.model_server(
        Reply(text=EMPHASIS, token_delay=0.01), tokenizer=lambda text: [text[i:i + chunk] for i in range(0, len(text), chunk)]
    )
    host = await skald.start()
    await host.use_model(server)
    await host.member("lena")
    page = await browser_pages.new(host.url)
    await sign_in(page, "lena", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#chat")
    await page.evaluate(WATCH_LONG_TASKS)
    await page.get_by_role("textbox", name="Message").fill("Say it")
    await page.keyboard.press("Enter")
    answer_node = page.locator(".msg.assistant").last
    await expect(answer_node.locator(".md-plain")).to_be_attached(timeout=20_000)
    await expect(answer_node).not_to_have_class(re.compile(r"\bstreaming\b"), timeout=30_000)
    await expect(answer_node.locator(".md-plain")).to_have_count(1)
    assert await answer_node.locator(".md-plain").evaluate("(n) => n.textContent.length") == PLAIN_SHOWN
    tasks = await _long_tasks(page)
    assert max(tasks, default=0) < LONG_TASK_BOUND_MS, tasks

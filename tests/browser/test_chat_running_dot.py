"""The conversation list's running dot agrees with the turn: it goes when the turn ends,
whatever order the list's answers and the turn's events reach the page in.

The model is held by the test (a responder waiting on an event) and the page's
requests are held by routes, so each race is played the same way every time instead
of by luck on a fast or slow machine."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Callable

from playwright.async_api import expect

from skald_host.testing import Reply, ScriptedModelServer
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in
from .test_chat import MODEL, configure_model, send

LIST = re.compile(r"/api/conversations(\?[^/]*)?$")
ONE_CONVERSATION = re.compile(r"/api/conversations/[^/?]+$")


async def until(condition: Callable[[], bool], what: str, timeout: float = 10) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not condition():
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"waited {timeout} s for {what}") from None


class HeldModel:
    """A responder that answers only when the test lets it (one answer per release)."""

    def __init__(self) -> None:
        self.go = asyncio.Event()

    async def __call__(self, request: Any) -> Reply:
        await self.go.wait()
        self.go.clear()
        return Reply(text="Done.")


class TurnFrames:
    """How many ``turn_finished`` events the page's socket has received."""

    def __init__(self, page: Any) -> None:
        self.finished = 0
        page.on("websocket", lambda socket: socket.on("framereceived", self.heard))

    def heard(self, payload: Any) -> None:
        if isinstance(payload, str) and '"turn_finished"' in payload:
            self.finished += 1


def dot(page: Any, conversation_id: str) -> Any:
    return page.locator(f".conv-list li[data-conversation-id='{conversation_id}'] .running-dot")


async def test_the_dot_goes_when_the_turn_ends_while_a_new_conversation_opens(skald, browser_pages):
    """The first message of a new conversation opens its page, which reads the list and
    the conversation together. Here the list is read while the turn runs and the turn
    ends before the conversation's read is answered: the new page starts from a list
    that says "running", and must still hear that the turn ended."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        member = await host.member("alice", display_name="Alice")
        model = HeldModel()
        server.responder = model
        page = await browser_pages.new(host.url)
        frames = TurnFrames(page)
        await sign_in(page, "alice", MEMBER_PASSWORD)
        state = {"sent": False, "lists_seen": 0, "lists_read": 0, "lists_after_finish": 0, "read_held": False, "turn": 0, "finished_at": 0}

        async def list_while_the_turn_runs(route: Any) -> None:
            if route.request.method != "GET" or not state["sent"]:
                await route.continue_()
                return
            state["lists_seen"] += 1
            if frames.finished > state["finished_at"]:
                state["lists_after_finish"] += 1  # the page handled turn_finished: its list is read again
            await server.wait_for_requests(state["turn"])  # the turn runs: the model was asked
            response = await route.fetch()
            state["lists_read"] += 1
            await route.fulfill(response=response)

        async def conversation_after_the_turn(route: Any) -> None:
            if route.request.method != "GET" or state["read_held"]:
                await route.continue_()
                return
            state["read_held"] = True
            lists_before = state["lists_seen"]  # the list asked for with this read, and older ones
            await until(lambda: state["lists_read"] >= lists_before, "the lists read while the turn runs")
            model.go.set()
            await until(lambda: frames.finished > state["finished_at"] and state["lists_after_finish"] > 0,
                        "the page hearing that the turn ended")
            await route.continue_()

        await page.route(LIST, list_while_the_turn_runs)
        await page.route(ONE_CONVERSATION, conversation_after_the_turn)
        for turn in range(1, 4):
            state.update(sent=False, turn=turn, read_held=False, lists_after_finish=0, finished_at=frames.finished)
            await page.get_by_role("button", name="New conversation").click()
            await expect(page.get_by_role("heading", name="Hello, Alice")).to_be_visible()
            state["sent"] = True
            await send(page, f"Question {turn}")
            await page.wait_for_url(re.compile(r"#chat/.+"))
            conversation_id = page.url.rsplit("/", 1)[-1]
            await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Done.")
            assert (await member.get(f"/api/conversations/{conversation_id}")).json()["running"] is False
            await expect(page.locator(f".conv-list li[data-conversation-id='{conversation_id}']")).to_have_count(1)
            await expect(dot(page, conversation_id)).to_have_count(0)
        # A list read the last turn brought may still wait in its handler: it is dropped,
        # not answered into the page the teardown closes ("Fetch response has been disposed").
        await page.unroute_all(behavior="ignoreErrors")


async def test_a_list_read_during_the_turn_and_answered_after_it_shows_no_dot(skald, browser_pages):
    """The list is read again after each message; that read can be answered after the
    turn's end reached the page. Its "running" is older than the event and loses."""
    async with ScriptedModelServer(models=(MODEL,), api_key="sk-test") as server:
        host = await skald.start()
        await configure_model(await host.admin(), server)
        await host.create_member("bob", display_name="Bob")
        model = HeldModel()
        server.responder = model
        page = await browser_pages.new(host.url)
        frames = TurnFrames(page)
        await sign_in(page, "bob", MEMBER_PASSWORD)
        model.go.set()
        await send(page, "First question")
        await page.wait_for_url(re.compile(r"#chat/.+"))
        conversation_id = page.url.rsplit("/", 1)[-1]
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Done.")
        await page.reload()  # one view on the page: the start page's is gone with its late list reads
        await expect(page.locator(".msg.assistant .msg-body")).to_have_text("Done.")
        await expect(dot(page, conversation_id)).to_have_count(0)

        # The next message: the list read it brings is answered (running) only once the
        # page has ended the turn; any read after that waits until the check is done.
        stale = {"fulfilled": False, "answer": None}
        check_done = asyncio.Event()
        finished_before = frames.finished

        async def stale_then_held(route: Any) -> None:
            if route.request.method != "GET":
                await route.continue_()
                return
            if stale["answer"] is not None:
                await check_done.wait()
                await route.continue_()
                return
            await server.wait_for_requests(2)
            stale["answer"] = response = await route.fetch()
            assert (await response.json())["conversations"][0]["running"] is True
            model.go.set()
            await until(lambda: frames.finished > finished_before, "the turn's end reaching the page")
            await expect(page.get_by_role("button", name="Stop")).to_be_hidden()  # the page has handled it
            await route.fulfill(response=response)
            stale["fulfilled"] = True

        await page.route(LIST, stale_then_held)
        await send(page, "Second question")
        await until(lambda: stale["fulfilled"], "the stale list answer")
        await page.wait_for_load_state()
        # The answer is read and drawn within a few frames of its arrival.
        await page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 50))))")
        await expect(page.locator(".msg.assistant .msg-body").last).to_have_text("Done.")
        try:
            await expect(dot(page, conversation_id)).to_have_count(0, timeout=500)
        finally:
            check_done.set()
        await expect(dot(page, conversation_id)).to_have_count(0)

"""A call whose answer does not come back in time. One that surely never reached
Telegram (no connection, no free connection in the pool) is made again; so is an edit,
which cannot show twice. A send that may have been taken (its answer cut off by the read
timeout) is sent again on purpose — a lost answer is worse than one read twice — and the
log says it may arrive twice. The read timeout is long (a minute and a half) so that a
slow but accepted send is not cut off in the first place."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from telegram.error import NetworkError, TimedOut

import skald_telegram.bot as bot_module
from skald_host.testing import Reply
from skald_telegram import running as plugin_running
from skald_telegram.outbox import may_have_arrived
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, running

TWICE = "may arrive twice"


def raised(error: Exception, cause: BaseException | None) -> Exception:
    """The exception as PTB's HTTPXRequest raises it: from httpx's own."""
    try:
        raise error from cause
    except Exception as exc:
        return exc


def test_only_a_call_that_never_left_is_surely_not_done():
    request = httpx.Request("POST", "http://127.0.0.1/bot/sendMessage")
    assert not may_have_arrived(raised(TimedOut(), httpx.ConnectTimeout("no connection", request=request)))
    assert not may_have_arrived(raised(TimedOut("Pool timeout"), httpx.PoolTimeout("pool full", request=request)))
    assert not may_have_arrived(raised(NetworkError("httpx.ConnectError: refused"), httpx.ConnectError("refused", request=request)))
    assert may_have_arrived(raised(TimedOut(), httpx.ReadTimeout("no answer", request=request)))
    assert may_have_arrived(raised(TimedOut(), httpx.WriteTimeout("half written", request=request)))
    assert may_have_arrived(raised(NetworkError("httpx.RemoteProtocolError: cut"), httpx.RemoteProtocolError("cut", request=request)))
    assert not may_have_arrived(raised(NetworkError("Bad Gateway"), None))  # Telegram answered: not done


def hold_answers(setup: Setup, marker: str, seconds: float) -> None:
    """The stand-in takes the first send containing ``marker`` (the member will see it)
    and holds its answer back for ``seconds``."""
    api = setup.api
    original = api._do_sendMessage
    armed = [True]

    async def slow(params):
        result = await original(params)
        if armed[0] and marker in str(params.get("text")):
            armed[0] = False
            await asyncio.sleep(seconds)
        return result

    api._do_sendMessage = slow


async def test_the_read_timeout_outlasts_a_send_telegram_answers_after_35_seconds(setup: Setup):
    await running(setup)
    # The probe's case: Telegram took the send and answered after 35 s, past the old 30 s.
    assert plugin_running.bot.bot.request.read_timeout >= 60


async def test_a_send_held_within_the_read_timeout_arrives_once(setup: Setup, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setattr(bot_module, "READ_TIMEOUT_SECONDS", 3.0)  # the minute and a half, scaled down
    await running(setup)
    await paired_member(setup)
    hold_answers(setup, "Slow canary", 1.5)
    setup.model.script(MODEL, [Reply("Slow canary answer.")])
    setup.api.send(ALICE_CHAT, "hi")
    await setup.api.wait_for(lambda: any(c.result for c in setup.api.of("sendMessage", ALICE_CHAT) if "Slow canary" in str(c.params.get("text"))))
    await asyncio.sleep(2.5)  # room for a wrong second copy
    assert setup.api.shown(ALICE_CHAT).count("Slow canary answer.") == 1
    assert not [r.getMessage() for r in caplog.records if r.name == "skald_telegram" and r.levelno >= logging.WARNING]


async def test_a_send_whose_answer_is_cut_off_is_sent_again_and_the_log_says_it_may_arrive_twice(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    monkeypatch.setattr(bot_module, "READ_TIMEOUT_SECONDS", 1.0)
    await running(setup)
    await paired_member(setup)
    hold_answers(setup, "Slow canary", 2.5)  # taken by Telegram, answered after the timeout
    caplog.set_level(logging.INFO, logger="skald_telegram")
    setup.model.script(MODEL, [Reply("Slow canary answer.")])
    setup.api.send(ALICE_CHAT, "hi")
    # Never lost: a copy whose answer came back is there.
    await setup.api.wait_for(
        lambda: any(c.result for c in setup.api.of("sendMessage", ALICE_CHAT) if "Slow canary" in str(c.params.get("text"))), timeout=20
    )
    await asyncio.sleep(3)
    copies = setup.api.shown(ALICE_CHAT).count("Slow canary answer.")
    assert copies == 2  # the one Telegram took before the timeout, and the one sent again
    warned = [r for r in caplog.records if TWICE in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING, [r.getMessage() for r in caplog.records]
    assert "sendMessage" in warned[0].getMessage() and "ReadTimeout" in warned[0].getMessage()

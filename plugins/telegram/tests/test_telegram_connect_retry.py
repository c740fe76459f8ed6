"""A Bot API server that cannot be reached when the plugin starts (a network blip at
boot, a self-hosted server that comes up after Skald): the bot starts anyway and keeps
trying in the background, 1 s doubling to a minute, and polls from the first attempt
that succeeds, with no settings save. What the admin must fix (a refused token) stays
``NotReady`` with its reason and is not tried again; disabling the plugin or saving its
settings ends the attempts. Meanwhile the host's catalog card says it (contract 1.12,
``HostApi.set_degraded``): running, amber, with the reason, cleared once connected.
And a member who links a second chat: the first one is told."""

from __future__ import annotations

import asyncio
import dataclasses
import socket

import skald_telegram
from skald_host.testing import Reply
from telegram_standin import TOKEN, BotApiStandIn
from telegram_support import ALICE_CHAT, MODEL, Setup, paired_member, pairing_code, running

#: The longest a retry can be away is a minute; far more than the test needs on any machine.
CONNECT_TIMEOUT = 90.0
#: Longer than the first two retries (1 s, then 2 s): a loop still running would call by then.
PAST_TWO_RETRIES = 3.5


def free_port() -> int:
    """A port nothing listens on (yet): connecting to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive(name: str) -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if t.get_name() == name and not t.done()]


async def card(setup: Setup, locale: str = "en") -> dict:
    """The plugin's entry of the admin's catalog (``GET /api/admin/plugins``), in ``locale``."""
    return next(p for p in await setup.host.core.catalog.list(locale) if p["id"] == "telegram")


async def api_card(setup: Setup) -> dict:
    response = await setup.admin.get("/api/admin/plugins")
    assert response.status_code == 200, response.text
    return next(p for p in response.json()["plugins"] if p["id"] == "telegram")


async def retrying(setup: Setup, *, attempts: int = 2):
    """The running bot once at least ``attempts`` connection attempts failed."""
    bot = skald_telegram.running.bot
    assert bot is not None, setup.host.core.plugins.status("telegram").error
    await setup.api.wait_for(lambda: bot.connection()["attempts"] >= attempts, what=f"{attempts} connection attempts")
    assert bot.connection()["state"] == "connecting" and alive("telegram:connect")
    return bot


async def test_a_bot_api_server_that_comes_up_after_the_start_is_polled_without_a_settings_save(setup: Setup):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    await setup.configure(api_base_url=url)
    await setup.enable()
    status = setup.host.core.plugins.status("telegram")
    assert (status.started, status.healthy) == (True, True), status.error
    bot = await retrying(setup)

    # The admin's page says it cannot reach the server yet and keeps trying; the
    # member's page does not send anyone to a bot that cannot answer now.
    connection = (await setup.admin.get("/api/plugin/telegram/roster")).json()["connection"]
    assert connection["state"] == "connecting", connection
    assert connection["line"].startswith(f"Cannot reach the Bot API at {url}: ") and "keeps trying by itself" in connection["line"]
    assert TOKEN not in connection["line"] and "standin-token" not in connection["line"]
    # So does the host's catalog card: still running and healthy, but amber, with why.
    listed = await api_card(setup)
    assert (listed["state"], listed["healthy"], listed["error"]) == ("loaded", True, None)
    assert listed["degraded"].startswith(f"Cannot reach the Bot API at {url} (") and listed["degraded"].endswith("): the bot keeps trying by itself.")
    assert TOKEN not in listed["degraded"] and "standin-token" not in listed["degraded"]
    assert (await setup.admin.get("/api/admin/plugins/telegram")).json()["degraded"] == listed["degraded"]
    assert (await card(setup, "de"))["degraded"].startswith(f"Die Bot-API unter {url} ist nicht erreichbar (")
    assert "plugin_degraded" in [w["id"] for w in (await setup.admin.get("/api/admin/status")).json()["warnings"]]
    bert = await setup.host.member("bert", locale="de")
    mine = (await bert.get("/api/plugin/telegram/status")).json()
    assert mine["connected"] is False and mine["line"].startswith("Nicht verbunden. Der Telegram-Bot erreicht Telegram gerade nicht")

    late = BotApiStandIn(port=port)
    late.send(6001, "hello? anyone there?")  # written while the bot could not connect
    async with late:
        texts = await late.wait_texts(6001, 1, timeout=CONNECT_TIMEOUT)
        assert texts[0].startswith("Hello! This bot is the Telegram door"), texts
        assert late.of("getMe") and late.of("getUpdates")
        assert bot.connected and skald_telegram.running.bot is bot and alive("telegram:connect") == []
        assert len(alive("telegram:poller")) == 1
        assert (await setup.admin.get("/api/plugin/telegram/roster")).json()["connection"] == {"state": "connected", "line": None}
        assert (await api_card(setup))["degraded"] is None  # green again

        # And it converses as a bot that connected at once does.
        late_setup = dataclasses.replace(setup, api=late)
        await paired_member(late_setup, "alice", ALICE_CHAT)
        setup.model.script(MODEL, [Reply("Connected after all.")])
        late.send(ALICE_CHAT, "Are you there now?")
        await late.wait_for(lambda: "Connected after all." in late.texts(ALICE_CHAT), what="the model's answer")
    assert setup.api.calls == []  # only the configured address was ever called


async def test_a_refused_token_stays_not_ready_with_its_reason_and_is_not_tried_again(setup: Setup):
    await setup.configure(bot_token="4242424242:wrong-token")
    await setup.enable()
    status = setup.host.core.plugins.status("telegram")
    assert status.healthy is False and status.error_key == "error.token_refused", status.error
    assert "Telegram refused the bot token" in status.error and "wrong-token" not in status.error
    assert skald_telegram.running.bot is None
    await asyncio.sleep(PAST_TWO_RETRIES)
    assert len(setup.api.of("getMe")) == 1 and alive("telegram:connect") == []

    # Unreachable at the start, then a server that refuses the token: that is the
    # admin's to fix, so the attempts end there and the admin's page says why.
    port = free_port()
    await setup.configure(api_base_url=f"http://127.0.0.1:{port}")  # its startup failed: started again
    bot = await retrying(setup)
    async with BotApiStandIn(token="4242424242:AAE-another-bots-token", port=port) as late:
        await late.wait_for(lambda: bot.connection()["state"] == "failed", timeout=CONNECT_TIMEOUT, what="the refusal")
        connection = (await setup.admin.get("/api/plugin/telegram/roster")).json()["connection"]
        assert connection == {"state": "failed", "line": "Telegram refused the bot token (401 Unauthorized): check it in the settings."}
        # Its startup returned long ago: the card names the refused token beside "Running".
        listed = await api_card(setup)
        assert (listed["state"], listed["healthy"]) == ("loaded", True)
        assert listed["degraded"] == "Telegram refused the bot token (401 Unauthorized): check it in the settings."
        assert (await card(setup, "de"))["degraded"] == "Telegram hat das Bot-Token abgelehnt (401 Unauthorized): Prüfe es in den Einstellungen."
        await asyncio.sleep(PAST_TWO_RETRIES)
        assert len(late.of("getMe")) == 1 and late.of("getUpdates") == [] and alive("telegram:connect") == []


async def test_disabling_or_saving_the_settings_while_retrying_ends_the_attempts(setup: Setup):
    first, second = free_port(), free_port()
    await setup.configure(api_base_url=f"http://127.0.0.1:{first}")
    await setup.enable()
    await retrying(setup)
    assert (await api_card(setup))["degraded"]
    assert (await setup.enable(False))["degraded"] is None  # disabled: nothing keeps it from a job it no longer does
    assert skald_telegram.running.bot is None and alive("telegram:connect") == [] and alive("telegram:poller") == []
    async with BotApiStandIn(port=first) as late:
        await asyncio.sleep(PAST_TWO_RETRIES)
        assert late.calls == [], [c.method for c in late.calls]

    # Retrying again; a save pointing at a server that answers replaces the loop, and
    # exactly one poller runs.
    await setup.configure(api_base_url=f"http://127.0.0.1:{second}")
    await setup.enable()
    old = await retrying(setup)
    await setup.configure()  # the stand-in that is up
    new = skald_telegram.running.bot
    assert new is not old and new.connected and not old.connected
    assert (await api_card(setup))["degraded"] is None  # the old run's reason went with it
    assert alive("telegram:connect") == [] and len(alive("telegram:poller")) == 1
    code = await pairing_code(setup, 6002)
    assert code
    async with BotApiStandIn(port=second) as late:
        await asyncio.sleep(PAST_TWO_RETRIES)
        assert late.calls == [], [c.method for c in late.calls]
    assert len(alive("telegram:poller")) == 1


async def test_linking_a_second_chat_tells_the_first_one_in_the_members_language(setup: Setup, monkeypatch):
    await running(setup)
    await setup.host.member("alice", display_name="Alice", locale="de")
    alice = await paired_member(setup, "alice", 7001)
    before = len(setup.api.texts(7001))

    code = await pairing_code(setup, 7004)
    saved = await alice.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})
    assert saved.status_code == 200, saved.text
    assert (saved.json()["config"]["linked"], saved.json()["config"]["chat_id"]) == (True, 7004)
    told = await setup.api.wait_texts(7001, before + 1)
    assert told[before] == (
        "Dieser Chat ist nicht mehr mit deinem Skald-Konto verbunden: Das Konto ist jetzt mit einem anderen Telegram-Chat verbunden."
    )
    await setup.api.wait_texts(7004, 2)  # the code, then the "linked" greeting
    setup.model.script(MODEL, [Reply("Hallo aus Skald.")])
    setup.api.send(7004, "Bist du da?")
    await setup.api.wait_for(lambda: "Hallo aus Skald." in setup.api.texts(7004), what="the answer in the new chat")
    roster = (await setup.admin.get("/api/plugin/telegram/roster")).json()["links"]
    assert [row["chat_id"] for row in roster] == [7004]

    # A notice that cannot be sent neither undoes nor blocks the new link.
    bot = skald_telegram.running.bot
    say = bot.say

    async def failing(chat_id, text, member_id=None):
        if chat_id == 7004 and member_id is None:
            raise RuntimeError("the notice could not be queued")
        await say(chat_id, text, member_id)

    monkeypatch.setattr(bot, "say", failing)
    code = await pairing_code(setup, 7005)
    saved = await alice.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["config"]["chat_id"] == 7005
    await setup.api.wait_texts(7005, 2)
    setup.model.script(MODEL, [Reply("Immer noch da.")])
    setup.api.send(7005, "Und jetzt?")
    await setup.api.wait_for(lambda: "Immer noch da." in setup.api.texts(7005), what="the answer in the third chat")
    assert [row["chat_id"] for row in (await setup.admin.get("/api/plugin/telegram/roster")).json()["links"]] == [7005]


def test_an_unreachable_bot_api_is_said_at_growing_intervals_not_every_minute():
    """The retry runs every minute once doubled up; the log says it at the 1st, 2nd,
    4th, … attempt and then hourly (a newcomer's log held 1,440 warnings a day)."""
    from skald_telegram.bot import worth_saying

    assert [n for n in range(1, 200) if worth_saying(n)] == [1, 2, 4, 8, 16, 32, 60, 120, 180]

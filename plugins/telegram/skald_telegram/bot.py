"""The running bot: one Bot API connection, the poller (or webhook intake), the inbound
handling of each update, and what it hands the per-chat outbox (``outbox.py``) to
deliver the host's events: answers (streamed into one message while they are written),
notes, approval cards, errors.

Imported only from ``startup``: python-telegram-bot and httpx are too heavy for the
host's boot-time import of every installed plugin.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import re
import secrets
import time
import warnings
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from skald_hookspecs import NotReady

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning, PTBUserWarning

from skald_hookspecs import ChannelEvent, ChannelRequestError, HostApi, MemberLocked, TtsUnavailable
from skald_hookspecs.channels import LOCK_LOGGED_OUT, LOCK_RESTARTED
from skald_telegram import logsafe
from skald_telegram.held import HeldMessage, HeldStore
from skald_telegram.outbox import TYPING_STALE_SECONDS, ChatQueue, Job, Later, Outbox, Refused, refusal_kind, retry_after_seconds
from skald_telegram.pairing import Pairing, PairingError, display
from skald_telegram.strings import plural_category, size_text, telegram_locale
from skald_telegram.text import first_part, opening_words, split_markdown, split_message, to_telegram_html
from skald_telegram.updates import ButtonPress, Ignored, Inbound, parse_update, update_id_of

log = logging.getLogger("skald_telegram")



def _quiet_ptb_warnings() -> None:
    """getUpdates is called raw on purpose: PTB's typed ``get_updates`` parses the whole
    batch at once and logs the raw data (message text) when one update is malformed, so
    its advice to use it is silenced; so is the notice (raised inside PTB's own
    ``RetryAfter``) that ``retry_after`` will become a timedelta, which
    ``retry_after_seconds`` already accepts. Re-added at each start: idempotent."""
    warnings.filterwarnings("ignore", message=r".*Bot\.getUpdates.*do_api_request", category=PTBUserWarning)
    warnings.filterwarnings("ignore", message=r".*retry_after.*timedelta", category=PTBDeprecationWarning)

DEFAULT_API = "https://api.telegram.org"
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # the Bot API's own getFile limit
RECENT_UPDATES = 1000
ANSWERED_KEPT = 1000  # approvals answered by a press, remembered so a late re-announcement makes no second card
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]  # edits: only to say they are not read
#: setWebhook's rule for ``secret_token``, as the setting's help text says it.
WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")


@dataclass(frozen=True)
class BotConfig:
    token: str
    api_base_url: str
    mode: str
    webhook_url: str
    webhook_secret: str
    poll_timeout: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "BotConfig":
        token = str(config.get("bot_token") or "").strip()
        if not token:
            raise NotReady("no bot token is configured: set one on the plugin's settings page", key="error.no_token")
        mode = str(config.get("mode") or "polling")
        made = cls(
            token=token,
            api_base_url=str(config.get("api_base_url") or DEFAULT_API).rstrip("/"),
            mode=mode,
            webhook_url=str(config.get("webhook_url") or ""),
            webhook_secret=str(config.get("webhook_secret") or ""),
            poll_timeout=int(config.get("poll_timeout_seconds") or 25),
        )
        if mode == "webhook":
            _check_webhook(made.webhook_url, made.webhook_secret)
        return made


def _check_webhook(url: str, secret: str) -> None:
    """Webhook settings the card must name before any call: the schema can only say
    "a URL" and "at most 256 characters", and Telegram would take a webhook it never
    calls (an http address) or refuse the secret with an unhelpful 400."""
    if not url and not secret:
        raise NotReady("webhook mode needs both a webhook URL and a webhook secret token", key="error.webhook_incomplete")
    if not url:
        raise NotReady("webhook mode needs a webhook URL: the public https address of /api/plugin/telegram/webhook", key="error.webhook_no_url")
    if not secret:
        raise NotReady("webhook mode needs a webhook secret token", key="error.webhook_no_secret")
    if urlsplit(url).scheme != "https":
        raise NotReady(
            f"the webhook URL must be an https address (Telegram calls no other): {url}", key="error.webhook_not_https", values={"url": url}
        )
    if not WEBHOOK_SECRET.fullmatch(secret):
        raise NotReady("the webhook secret token may hold only 1-256 of A-Z a-z 0-9 _ -", key="error.webhook_secret_invalid")


#: How long a call to a chat waits for Telegram's answer. Long on purpose: a send cut
#: off after Telegram took it cannot be told from one that never arrived, and is sent
#: again (``outbox.may_have_arrived``): the member would read it twice. Telegram answers
#: in well under a second; one that has not in a minute and a half is taken as lost.
READ_TIMEOUT_SECONDS = 90.0

#: A voice note whose speech is busy being made waits this long before each next try
#: (about a minute in all), then its line says why it failed.
VOICE_BUSY_WAITS_SECONDS: tuple[float, ...] = (2.0, 4.0, 8.0, 15.0, 30.0)
#: The host's refusals (``core.error.<code>``) that mean "busy, try again later".
SPEECH_BUSY_CODES = ("tts_busy_member", "tts_busy_server")

#: Telegram drops a callback query's answer 15 s after the press; kept a little shorter.
CALLBACK_ANSWER_SECONDS = 12.0
#: A press that lost (its card was answered on the web at the same moment) waits this
#: long for the winner's ``approval_resolved``, to edit the card with its outcome; then
#: the card says only that the request is no longer waiting.
LOST_PRESS_WAIT_SECONDS = 3.0
#: The ``reason`` of an ``approval_resolved`` event the host denied itself, the member's
#: access having changed since the card was raised (a deactivation among them), and what
#: ``_settled_words`` is given for it: nobody denied it on another device.
WITHDRAWN = "withdrawn"

#: The first connection attempt runs inside ``startup`` (the host's 5 s hook timeout);
#: one that takes longer goes on in the background, as a network error does.
FIRST_ATTEMPT_SECONDS = 3.0
#: Connecting again after a network error at start: 1 s, doubling, at most a minute.
CONNECT_RETRY_FIRST_SECONDS = 1.0
CONNECT_RETRY_MAX_SECONDS = 60.0
#: After the doubling attempts, an unreachable Bot API is said again once an hour (at
#: the minute's pace); the card says it all along.
UNREACHABLE_SAID_EVERY = 60


def worth_saying(attempt: int) -> bool:
    """Whether the ``attempt``-th failed connection is a warning in the log: the 1st,
    2nd, 4th, 8th, … and then every ``UNREACHABLE_SAID_EVERY``-th. A warning every
    minute for ever (1,440 lines a day while Telegram was away) buried the rest of the
    log (newcomer walk 5); the others are debug lines."""
    return attempt % UNREACHABLE_SAID_EVERY == 0 or (attempt < UNREACHABLE_SAID_EVERY and attempt & (attempt - 1) == 0)


def _transient(exc: BaseException) -> bool:
    """A failure that goes away by itself (the network, a timeout, the server not up
    yet or answering 5xx, a flood wait): worth trying again without the admin. A 400
    (PTB's ``BadRequest`` is a ``NetworkError``), a refused token or an answer that is
    not the Bot API's are the admin's to fix."""
    if isinstance(exc, BadRequest):
        return False
    return isinstance(exc, (NetworkError, RetryAfter, TimeoutError, OSError))


def _is_unchanged(exc: BadRequest) -> bool:
    return "not modified" in exc.message.lower()


def _is_gone(exc: BadRequest) -> bool:
    return "not found" in exc.message.lower() or "can't be edited" in exc.message.lower()


class Stream:
    """The message one round of a streaming answer is shown in, for one chat: the
    latest text the host sent, the Telegram message it is edited into, what that
    message shows now. ``round``: the host's id of the round (``partial``'s
    ``data["message_id"]``); a new round (after tool calls) is a new message, as the
    host stores it. ``closed``: a card was sent below it, so later text goes in a new
    message under the card. ``job``: its edit waiting in the chat's queue.
    ``relay``: the stored record of the answer (``TelegramBot._relay_write``), held by
    its newest message, so that a stop of the plugin (or of the server) cannot leave
    the message cut off for good."""

    def __init__(self, conversation_id: str | None, round_: int | None = None) -> None:
        self.conversation_id = conversation_id
        self.round = round_
        self.text = ""
        self.message_id: int | None = None
        self.shown = ""
        self.finished = False
        self.closed = False
        self.job: Job | None = None
        self.relay: dict[str, Any] | None = None


def _round_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flat(text: str) -> str:
    return " ".join(text.split())


def _is_its_round(stream: Stream, round_: int | None, text: str) -> bool:
    """Whether a turn's final text (an answer, what a stopped one kept) is the round
    ``stream`` shows, so is edited into its message. By the round's id when both are
    known; else (a host before 1.13 names no answer's round, a restored stream no
    round) by its words: a round's text streams as a prefix of what it ends as, and an
    earlier round's words (before its tool calls) are not the answer's beginning."""
    if round_ is not None and stream.round is not None:
        return round_ == stream.round
    return _flat(text).startswith(_flat(stream.text))


#: ``relay:<chat id>``: the answer being streamed into a chat's message, kept in the
#: plugin's store while it streams: ``{"id", "member_id", "conversation_id",
#: "message_id" (the Telegram message, once sent), "answer" (the host's id of the
#: answer's first round)}`` — ids only, never the member's words. Removed when the
#: answer's end (``answer``, ``error``, ``stopped``) was queued for the chat. One left at
#: a start means the end never reached the plugin (it was off, or the server stopped):
#: the message is finished from the stored conversation (``_settle_relay``).
RELAY_PREFIX = "relay:"


class TelegramBot:
    """Everything that exists while the plugin is enabled."""

    def __init__(self, host: HostApi, config: BotConfig) -> None:
        self.host = host
        self.config = config
        self.mode = config.mode
        self.pairing = Pairing(host)
        self.outbox = Outbox(host, self._run)
        self.held = HeldStore(host)  # a locked member's messages with files (``held.py``)
        self._delivering: dict[str, asyncio.Lock] = {}
        self._deliverers: set[asyncio.Task[None]] = set()
        self.username: str | None = None
        self._streams: dict[int, Stream] = {}  # chat -> the answer's round being streamed there
        self._stream_jobs: dict[str, Stream] = {}  # waiting edit's job id -> the stream it shows
        self._finals: dict[str, Stream] = {}  # final answer's job id -> the stream it ends
        self._stopped: dict[int, str | None] = {}  # chat -> the conversation whose turn was stopped
        # Relays a previous run left (``relay:<chat>``), until read back against the
        # stored conversation; the chat's events wait for that (``deliver``).
        self._unsettled: dict[int, dict[str, Any]] = {}
        self._settling: dict[int, asyncio.Lock] = {}
        self._settlers: set[asyncio.Task[None]] = set()
        # chat -> the conversation whose answer was finished from the store: a late
        # event of that turn is not shown again (cleared by the next turn's ``typing``).
        self._resumed: dict[int, str | None] = {}
        #: Approvals a press here answered (the newest ``ANSWERED_KEPT``): answering may
        #: first resume the member's chat (after a restart), which announces the
        #: approval again, and that announcement may arrive after the answer.
        self._answered: dict[str, None] = {}
        #: Approvals a press here is answering now -> the status ``approval_resolved``
        #: brought meanwhile (an answer on the web at the same moment): the press, when
        #: it knows whether it won, settles the card once (``_settle_card``).
        self._pressing: dict[str, asyncio.Future[Any]] = {}
        self._settling_cards: set[str] = set()
        self._presses: set[asyncio.Task[None]] = set()  # button presses, off the poller
        self._guard_logs()  # before the Bot exists: its constructor logs its URLs
        self._poller: asyncio.Task[None] | None = None
        self._waiting = False  # the poller waits (long poll or back-off): safe to cancel
        self._stopping = False
        # Connecting: set once getMe (and the webhook call) succeeded; the outbox waits
        # for it. Until then ``_connector`` tries again in the background.
        self._connected = asyncio.Event()
        self._connector: asyncio.Task[None] | None = None
        self._attempts = 0
        self._unreachable = ""  # why the latest attempt failed (token redacted)
        self._problem: NotReady | None = None  # a background attempt the admin must fix
        self._seen: list[int] = []  # processed update ids, persisted
        self._in_flight: set[int] = set()
        self.bot = Bot(
            config.token,
            base_url=f"{config.api_base_url}/bot",
            base_file_url=f"{config.api_base_url}/file/bot",
            # A short connect timeout: startup runs under the host's 5 s hook timeout.
            request=HTTPXRequest(connection_pool_size=8, read_timeout=READ_TIMEOUT_SECONDS, connect_timeout=3.0),
            get_updates_request=HTTPXRequest(connection_pool_size=1, read_timeout=10.0, connect_timeout=3.0),
        )

    # -- lifecycle -------------------------------------------------------------------

    def _guard_logs(self) -> None:
        """PTB logs every request's parameters (the member's text) and its URLs (with
        the bot token) at DEBUG: its loggers stay at INFO or above whatever the host's
        level. The token, in whatever encoding, is redacted from every log record of any
        logger (``logsafe``): httpx logs each request URL at INFO."""
        _quiet_ptb_warnings()
        logsafe.guard(self.config.token)
        quiet = logging.getLogger("telegram")
        if quiet.getEffectiveLevel() < logging.INFO:
            quiet.setLevel(logging.INFO)

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def connection(self) -> dict[str, Any]:
        """For the plugin's pages (the host's card says it too: ``_tell_the_card``):
        ``connected``; ``connecting`` with the latest reason while the background
        attempts go on; ``failed`` with the plugin's string when a later attempt met what
        the admin must fix (a refused token)."""
        if self.connected:
            return {"state": "connected"}
        if self._problem is not None:
            return {"state": "failed", "key": self._problem.key, "values": dict(self._problem.values), "message": str(self._problem)}
        return {"state": "connecting", "url": self.config.api_base_url, "reason": self._unreachable, "attempts": self._attempts}

    def _redact(self, text: str) -> str:
        return text.replace(self.config.token, "<bot-token>")

    async def _connect(self) -> None:
        """getMe, then the webhook set (or removed, for polling). Raises ``NotReady``
        for what the admin must fix; a transient failure (``_transient``) as it is."""
        self._attempts += 1
        try:
            await self.bot.initialize()  # getMe: a wrong token fails here, with a 401
            me = self.bot.bot
            self.username = me.username
            if self.mode == "webhook":
                await self.bot.set_webhook(
                    self.config.webhook_url, secret_token=self.config.webhook_secret, allowed_updates=ALLOWED_UPDATES
                )
            else:  # getUpdates is refused while a webhook is set
                await self.bot.delete_webhook()
        except InvalidToken:
            raise NotReady(
                "Telegram refused the bot token (getMe answered 401 Unauthorized): check it on the settings page", key="error.token_refused"
            ) from None
        except TelegramError as exc:
            if _transient(exc):
                raise
            reason = self._redact(exc.message)
            raise NotReady(
                f"the Bot API at {self.config.api_base_url} refused to start the bot: {reason}", key="error.api_refused",
                values={"url": self.config.api_base_url, "reason": reason},
            ) from None

    def _tell_the_card(self) -> None:
        """Started but not connected (or connected again): what the host's catalog card
        says beside "Running" (``HostApi.set_degraded``, contract 1.12), as
        ``connection`` says it on the plugin's pages. A refused token ends the attempts
        and cannot fail a ``startup`` that returned: the card names it until the admin
        fixes the setting (which starts the plugin again)."""
        if self.connected:
            self.host.set_degraded(None)
        elif self._problem is not None:
            self.host.set_degraded(str(self._problem), key=self._problem.key, values=self._problem.values)
        else:
            url = self.config.api_base_url
            self.host.set_degraded(
                f"cannot reach the Bot API at {url} ({self._unreachable}): trying again by itself",
                key="degraded.unreachable", values={"url": url, "reason": self._unreachable},
            )

    def _reason(self, exc: BaseException) -> str:
        if isinstance(exc, TelegramError):
            return self._redact(exc.message)
        if isinstance(exc, TimeoutError):
            return "no answer in time"
        return self._redact(type(exc).__name__)

    async def start(self) -> None:
        """Connect once, within the host's hook timeout. What the admin must fix (a
        refused token, an answer that is not the Bot API's) raises ``NotReady``. A
        network error or a timeout does not: the bot starts without its connection and
        keeps trying in the background (``_keep_connecting``), polling from the first
        attempt that succeeds; updates sent meanwhile wait at Telegram until then."""
        try:
            await asyncio.wait_for(self._connect(), FIRST_ATTEMPT_SECONDS)
        except NotReady:
            await self._close_connection()
            raise
        except Exception as exc:
            if not _transient(exc):
                await self._close_connection()
                raise
            self._unreachable = self._reason(exc)
            log.warning(
                "telegram: cannot reach the Bot API at %s yet (%s): starting without it and trying again in the background",
                self.config.api_base_url, self._unreachable,
            )
            self._tell_the_card()
        else:
            self._connected.set()
        seen = await self.host.kv_get("recent_updates")
        self._seen = [i for i in seen if isinstance(i, int)] if isinstance(seen, list) else []
        await self.outbox.restore()  # what a previous run could not send yet (sent once connected)
        await self._restore_relays()  # answers a previous run was streaming when it stopped
        unlocked = set(self.host.unlocked_members())
        for member_id in await self.held.members():  # held while locked, unlocked since
            if member_id in unlocked:
                self._deliver_held_later(member_id)
        if self.connected:
            self._begin()
        else:
            self._connector = asyncio.create_task(self._keep_connecting(), name="telegram:connect")

    def _begin(self) -> None:
        """Connected: intake starts (the poller; a webhook needs nothing here)."""
        if self.mode == "polling" and not self._stopping and self._poller is None:
            self._poller = asyncio.create_task(self._poll(), name="telegram:poller")

    async def _keep_connecting(self) -> None:
        """Try again after 1 s, doubling up to a minute, until connected, stopped (the
        task is cancelled) or refused for a reason the admin must fix."""
        delay = CONNECT_RETRY_FIRST_SECONDS
        while not self._stopping:
            await asyncio.sleep(delay)
            try:
                await self._connect()
            except NotReady as exc:
                self._problem = exc
                log.error("telegram: the Bot API at %s answered, but the bot cannot start: %s", self.config.api_base_url, exc)
                self._tell_the_card()
                return
            except Exception as exc:
                if not _transient(exc):
                    error = type(exc).__name__
                    self._problem = NotReady(f"the bot could not start: {error}", key="error.start_failed", values={"error": error})
                    log.error("telegram: connecting to the Bot API failed: %s", error)
                    self._tell_the_card()
                    return
                self._unreachable = self._reason(exc)
                self._tell_the_card()
                if isinstance(exc, RetryAfter):
                    delay = max(delay, retry_after_seconds(exc))
                else:
                    delay = min(CONNECT_RETRY_MAX_SECONDS, delay * 2)
                log.log(
                    logging.WARNING if worth_saying(self._attempts) else logging.DEBUG,
                    "telegram: still cannot reach the Bot API at %s (%s, attempt %d): trying again in %.0f s",
                    self.config.api_base_url, self._unreachable, self._attempts, delay,
                )
                continue
            if self._stopping:
                return
            log.info("telegram: connected to the Bot API at %s (attempt %d)", self.config.api_base_url, self._attempts)
            self._unreachable = ""
            self._connected.set()
            self._tell_the_card()
            self._begin()
            return

    async def stop(self, *, forget_webhook: bool = False) -> None:
        """Within the host's hook timeout: an update being handled may finish (a
        second at most), the long poll is cut, queued replies get two seconds.
        ``forget_webhook``: remove the webhook at Telegram (the plugin was disabled).
        What is still waiting stays stored and is sent after the next start."""
        self._stopping = True
        if self._connector is not None:  # still trying to connect: no more attempts
            self._connector.cancel()
            await asyncio.gather(self._connector, return_exceptions=True)
            self._connector = None
        if self._poller is not None:
            if self._waiting:
                self._poller.cancel()
            done, _ = await asyncio.wait({self._poller}, timeout=1.5)
            if not done:
                self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        if self._presses:
            await asyncio.wait(self._presses, timeout=0.5)
            for press in self._presses:
                press.cancel()
        for settler in list(self._settlers):  # what is not settled yet stays stored
            settler.cancel()
        await asyncio.gather(*self._settlers, return_exceptions=True)
        for deliverer in list(self._deliverers):  # what is not delivered yet stays held
            deliverer.cancel()
        await asyncio.gather(*self._deliverers, return_exceptions=True)
        if self.connected:  # never connected: nothing could leave, it all stays stored
            await self.outbox.drain(timeout=1.5)
        await self.outbox.close()
        if forget_webhook and self.mode == "webhook":
            try:
                await self.bot.delete_webhook()
            except TelegramError as exc:  # unreachable now: it stays set, and says so
                reason = exc.message.replace(self.config.token, "<bot-token>")
                log.warning("telegram: the webhook could not be removed at Telegram (%s); it stays set at Telegram", reason)
        await self._close_connection()

    async def _close_connection(self) -> None:
        try:
            await self.bot.shutdown()
        except Exception:  # closing a connection that never opened
            pass

    # -- intake ------------------------------------------------------------------------

    async def _poll(self) -> None:
        offset = await self.host.kv_get("offset")
        offset = offset if isinstance(offset, int) else 0
        failures = 0
        while not self._stopping:
            self._waiting = True
            try:
                batch = await self.bot.do_api_request(
                    "getUpdates",
                    {"offset": offset, "timeout": self.config.poll_timeout, "allowed_updates": ALLOWED_UPDATES},
                    read_timeout=self.config.poll_timeout + 10,
                )
                failures = 0
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_seconds(exc))
                continue
            except Exception as exc:  # the network, or a token revoked while running
                failures += 1
                # A transport's failure by its cause's type, an answer by its kind (``refusal_kind``).
                if exc.__cause__ is not None:
                    said = f": {type(exc.__cause__).__name__}"
                else:
                    said = f": {refusal_kind(exc)}" if isinstance(exc, TelegramError) else ""
                log.warning("telegram: getUpdates failed (%s)%s", type(exc).__name__, said)
                await asyncio.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))
                continue
            finally:
                self._waiting = False
            for raw in batch if isinstance(batch, list) else []:
                if self._stopping:  # the rest is fetched again after the next start
                    return
                update_id = update_id_of(raw)
                try:
                    await self.handle_update(raw)
                    if update_id is not None and update_id >= offset:
                        offset = update_id + 1
                        await self.host.kv_set("offset", offset)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the host's store failing: keep polling, retry later
                    log.error("telegram: recording update %s failed: %s", update_id, type(exc).__name__)

    def _claim(self, update_id: int) -> bool:
        """True the first time an update id is seen and not being handled right now
        (a webhook retry racing the first call, or a batch with a copy)."""
        if update_id in self._seen or update_id in self._in_flight:
            return False
        self._in_flight.add(update_id)
        return True

    async def _done(self, update_id: int) -> None:
        """Recorded after handling, so an update cut short by a stop is handled again
        after the next start (the host's idempotency key keeps its message single)."""
        self._in_flight.discard(update_id)
        self._seen.append(update_id)
        del self._seen[:-RECENT_UPDATES]
        await self.host.kv_set("recent_updates", self._seen)

    async def handle_update(self, raw: Any) -> None:
        """Process one raw update once. Never raises: one bad update must not stop the
        poller or fail a webhook call (which Telegram would retry forever)."""
        try:
            update = parse_update(raw)
            if update is None:
                log.debug("telegram: dropped an update without an update_id")
                return
            if not self._claim(update.update_id):
                log.debug("telegram: update %d was already processed", update.update_id)
                return
        except Exception as exc:
            log.error("telegram: reading update %s failed: %s", update_id_of(raw), type(exc).__name__)
            return
        try:
            if isinstance(update, Ignored):
                log.debug("telegram: update %d ignored: %s", update.update_id, update.why)
            elif isinstance(update, ButtonPress):
                self._press(update)
            elif update.chat_type != "private" or update.from_id != update.chat_id:
                log.debug("telegram: update %d from a %s chat ignored", update.update_id, update.chat_type or "unknown")
            else:
                await self._on_message(update)
        except asyncio.CancelledError:
            self._in_flight.discard(update.update_id)
            raise
        except Exception as exc:  # by type only: an error's message may quote the member's text
            log.error("telegram: handling update %s failed: %s", update.update_id, type(exc).__name__)
        await self._done(update.update_id)

    # -- messages from a chat -----------------------------------------------------------

    async def say(self, chat_id: int, text: str, member_id: str | None = None, *, relay: Stream | None = None) -> None:
        """Queue plain text for a chat (split at Telegram's limit). With ``member_id``
        it is the member's (sealed and stored until sent); without, memory only.
        ``relay``: the stream this text ends (its stored job names the relay)."""
        if not text.strip():
            return
        job = Job("text", member_id, {"text": text}, _ending(relay))
        if member_id is None:
            self.outbox.put_nowait(chat_id, job)
        else:
            await self.outbox.put(chat_id, job)

    async def say_markdown(
        self, chat_id: int, member_id: str, text: str, conversation_id: str | None = None, round_: int | None = None,
        *, own: bool = False,
    ) -> None:
        """Queue the model's words (Telegram HTML, plain text where refused). The
        message this round streamed into, if any, is edited into the final text
        (``round_``: the host's id of the round, when it names it; ``own``: the text is
        the stream's own). A message of an earlier round (the words before a tool
        call), or one a card was sent below, stays as it is: the text comes as a new
        message, below it (and Telegram notifies it)."""
        stream = target = None
        if conversation_id is not None:
            current = self._streams.get(chat_id)
            if current is not None and current.conversation_id == conversation_id:
                if own or (not current.closed and _is_its_round(current, round_, text)):
                    stream = target = self._take_stream(chat_id, conversation_id)
                else:  # ended, not finished: its waiting edit still shows its own words
                    stream = self._streams.pop(chat_id)
        else:  # a note of the host's, below what streams: later text goes under it
            self._close_stream(chat_id)
        public: dict[str, Any] = {"sent": 0, **_ending(stream)}
        job = Job("markdown", member_id, {"text": text}, public)
        if target is not None:
            if target.message_id is not None:
                public["edit"] = target.message_id  # stored: a restart still edits it
            else:  # its first send may be under way: the job looks when it runs
                self._finals[job.id] = target
        await self.outbox.put(chat_id, job)
        await self._relay_end(chat_id, stream)  # after the job is stored: its end is queued

    async def _finish_stopped(self, chat_id: int, member_id: str, event: ChannelEvent) -> None:
        """A stopped turn (by /stop here or from the web) sends no answer, so its
        streamed message would stay the raw Markdown it streamed as: what the answer
        kept is finished as an answer is, and its last partials are ignored."""
        self._stopped[chat_id] = event.conversation_id
        stream = self._streams.get(chat_id)
        streamed = stream.text if stream is not None and stream.conversation_id == event.conversation_id else ""
        if event.text.strip():
            await self.say_markdown(chat_id, member_id, event.text, event.conversation_id)
        elif streamed.strip():  # what it showed, formatted in its own message
            await self.say_markdown(chat_id, member_id, streamed, event.conversation_id, own=True)
        else:
            await self._end_stream(chat_id, event.conversation_id)

    def t(self, key: str, locale: str, **values: Any) -> str:
        return self.host.translate(f"telegram.{key}", locale, **values)

    async def locale_for(self, member_id: str, fallback: str | None = None) -> str:
        """The member's UI language; the Telegram client's when the host will not say
        (a member whose grant was just revoked)."""
        try:
            return await self.host.member_locale(member_id)
        except ChannelRequestError:
            return telegram_locale(fallback)

    async def _linked_member(self, chat_id: int) -> str | None:
        """The chat's member; None for a chat not linked, or linked to a member whose
        own record no longer names it (deleted, or reset, while the plugin did not hear
        of it): that link is dropped here, with what waited for the member there."""
        member_id, stale = await self.pairing.live_member_for_chat(chat_id)
        if stale is not None:
            log.info("telegram: chat %s was linked to a member who no longer has it: unlinked", chat_id)
            await self.outbox.forget(chat_id, stale)
            await self._relay_drop(chat_id)
        return member_id

    async def _on_message(self, message: Inbound) -> None:
        member_id = await self._linked_member(message.chat_id)
        if message.edited:
            # The message as first sent was already passed on (and maybe answered): a
            # changed copy cannot replace it, so the member is told to send it again
            # rather than wait for an answer that never comes.
            if member_id is not None and await self.host.member_has_grant(member_id):
                locale = await self.locale_for(member_id, message.language_code)
                await self.say(message.chat_id, self.t("edit_not_read", locale), member_id)
            return
        if member_id is None:
            await self._offer_pairing(message)
            return
        if _command(message) == "/unlink":
            # From the chat itself, whatever the account may do: the person holding
            # the chat takes it back (a code handed to someone else linked it there).
            await self.unlink(member_id)
            return
        locale = await self.locale_for(member_id, message.language_code)
        if not await self.host.member_has_grant(member_id):
            await self._refuse_once(member_id, message.chat_id, locale)
            return
        try:
            await self._converse(member_id, message, locale)
        except MemberLocked as exc:
            command = _command(message)
            if command:
                # A command acts now or not at all: the host keeps only messages for the
                # model, so "kept and answered later" would be a promise nobody keeps.
                key, values = f"command_{locked_key(exc.lock_reason)}", {"command": command}
            else:
                key, values = locked_key(exc.lock_reason), {}
            await self.say(message.chat_id, self.t(key, locale, **values), member_id)
        except ChannelRequestError as exc:  # revoked or deactivated between the check and the call
            if await self.host.member_has_grant(member_id):
                await self.say(message.chat_id, self.t("not_delivered", locale, reason=str(exc)), member_id)
            else:
                await self._refuse_once(member_id, message.chat_id, locale)

    async def _converse(self, member_id: str, message: Inbound, locale: str) -> None:
        command = _command(message)
        if command in ("/start", "/help"):
            await self.say(message.chat_id, self.t("help", locale), member_id)
            return
        if command == "/new":
            await self.host.new_conversation(member_id)
            await self.say(message.chat_id, self.t("new_done", locale), member_id)
            return
        if command == "/stop":
            stopped = await self.host.stop_turn(member_id)  # its message is finished on ``stopped``
            await self.say(message.chat_id, self.t("stop_done" if stopped else "stop_none", locale), member_id)
            return
        if command == "/tasks":
            await self.say(message.chat_id, await self._tasks_text(member_id, locale), member_id)
            return
        if command == "/voice":
            await self._voice_command(member_id, message, locale)
            return
        if command and command not in KNOWN_COMMANDS and not message.files:
            # A command this bot does not have (a typo, another bot's /settings): said
            # so with a pointer to /help, not sent to the model as words to answer.
            await self.say(message.chat_id, self.t("unknown_command", locale, command=command), member_id)
            return
        if message.unsupported:
            await self.say(message.chat_id, self.t("unsupported", locale), member_id)
            return
        files = message.files
        held = await self._hold(member_id, message, locale)
        if held:
            return
        if held is None:  # could not be held: the words go on, the files are not fetched
            files = ()
        paths = []
        for ref in files:
            saved = await self._save_file(member_id, message.chat_id, ref, locale)
            if saved is not None:
                paths.append(saved)
        await self._pass_on(member_id, message.chat_id, self._words(message.text, message.forwarded_from, locale), paths, message.update_id, locale)

    def _words(self, text: str, forwarded_from: str | None, locale: str) -> str:
        if forwarded_from is None:
            return text
        # Someone else's words: the model and the transcript keep who wrote them.
        key = "forwarded_from" if forwarded_from else "forwarded"
        return self.t(key, locale, name=forwarded_from, text=text).rstrip()

    async def _pass_on(self, member_id: str, chat_id: int, text: str, paths: list[str], update_id: int, locale: str) -> None:
        if not paths and not text:
            return
        delivery = await self.host.send_message(
            member_id, text, attachments=tuple(paths), idempotency_key=f"telegram:{update_id}"
        )
        if delivery.status == "accepted":
            await self.host.kv_set(f"refused:{member_id}", None)
        elif delivery.status == "sealed":
            await self.say(chat_id, self.t(locked_key(delivery.lock_reason), locale), member_id)
        elif delivery.reason and await self.host.member_has_grant(member_id):
            await self.say(chat_id, self.t("not_delivered", locale, reason=delivery.reason), member_id)
        else:
            await self._refuse_once(member_id, chat_id, locale)

    # -- a locked member's files (``held.py``) ---------------------------------------

    async def _hold(self, member_id: str, message: Inbound, locale: str) -> bool | None:
        """Hold a locked member's message with files: sealed with Telegram's references
        to them, fetched only once the member logged in (``_deliver_held``), so no file
        of theirs lies in clear on the server's disk before that. A message that comes
        while earlier ones are held is held behind them, so they arrive in order.
        True: held (the member was told, or it goes on at once); False: not a message to
        hold; None: it should have been, but cannot be sealed for this member."""
        waiting = await self.held.waiting(member_id)
        if not waiting and (not message.files or member_id in self.host.unlocked_members()):
            return False
        try:
            sealed = await self.held.hold(member_id, HeldMessage.of(message))
        except ChannelRequestError as exc:  # no inbox key to seal to: the files are not kept
            log.error("telegram: a locked member's message with files could not be held: %s", type(exc).__name__)
            if message.files:
                await self.say(message.chat_id, self.t("download_failed", locale), member_id)
            return None
        try:
            await self.host.open_for_member(member_id, sealed)
        except MemberLocked as exc:
            await self.say(message.chat_id, self.t(locked_key(exc.lock_reason), locale), member_id)
        except ChannelRequestError as exc:
            log.error("telegram: a held message does not open: %s", type(exc).__name__)
        else:  # unlocked (meanwhile, or earlier ones are being delivered): it goes on now
            self._deliver_held_later(member_id)
        return True

    def _deliver_held_later(self, member_id: str) -> None:
        task = asyncio.create_task(self._deliver_held(member_id), name=f"telegram:held:{member_id}")
        self._deliverers.add(task)
        task.add_done_callback(self._deliverers.discard)

    async def _deliver_held(self, member_id: str) -> None:
        """The member is unlocked: their held messages, oldest first, each with its files
        fetched now. Each is delivered once, whatever became of its files; one locked
        again waits for the next unlock."""
        await self._connected.wait()  # a file cannot be fetched before that
        async with self._delivering.setdefault(member_id, asyncio.Lock()):
            while entries := await self.held.entries(member_id):
                update_id = entries[0]["update_id"]
                try:
                    held = HeldMessage.opened(await self.host.open_for_member(member_id, entries[0]["sealed"]))
                except MemberLocked:
                    return
                except (ChannelRequestError, ValueError, KeyError, TypeError) as exc:
                    log.error("telegram: a held message does not open any more, dropped: %s", type(exc).__name__)
                    await self.held.drop(member_id, update_id)
                    continue
                chat_id = await self.pairing.chat_for_member(member_id)
                if chat_id is None:  # unlinked meanwhile: nobody to tell, nothing to fetch for
                    await self.held.forget(member_id)
                    return
                try:
                    await self._deliver_one_held(member_id, chat_id, held)
                except MemberLocked:
                    return
                except ChannelRequestError as exc:  # revoked or deactivated meanwhile
                    log.warning("telegram: a held message was not delivered: %s", type(exc).__name__)
                    await self._tell_not_delivered(member_id, chat_id, held, refused=True)
                except Exception as exc:  # by type only: never retried forever
                    log.error("telegram: delivering a held message failed: %s", type(exc).__name__)
                    await self._tell_not_delivered(member_id, chat_id, held, refused=False)
                await self.held.drop(member_id, update_id)

    async def _tell_not_delivered(self, member_id: str, chat_id: int, held: HeldMessage, *, refused: bool) -> None:
        """A held message that is dropped undelivered is never dropped unsaid: the chat
        is told (the member's access was withdrawn, as a live message is told; or it
        failed here), so the member knows to send it again."""
        try:
            locale = await self.locale_for(member_id, held.language_code)
            if refused:
                await self._refuse_once(member_id, chat_id, locale)
            else:
                await self.say(chat_id, self.t("not_delivered", locale, reason=self.t("held_failed", locale)), member_id)
        except Exception as exc:  # the drop goes on: a message about a message may fail too
            log.warning("telegram: could not say a held message was not delivered: %s", type(exc).__name__)

    async def _deliver_one_held(self, member_id: str, chat_id: int, held: HeldMessage) -> None:
        locale = await self.locale_for(member_id, held.language_code)
        paths: list[str] = []
        notes: list[str] = []
        for ref in held.files:
            # As for an unlocked member: the same limits, and the chat is told of a failure.
            saved = await self._save_file(member_id, chat_id, ref, locale)
            if saved is not None:
                paths.append(saved)
            else:  # the model (and the transcript) learn there was a file it cannot see
                notes.append(self.t("attachment_not_fetched", locale, name=ref.filename))
        text = "\n\n".join(part for part in (self._words(held.text, held.forwarded_from, locale), *notes) if part)
        await self._pass_on(member_id, chat_id, text, paths, held.update_id, locale)

    async def _tasks_text(self, member_id: str, locale: str) -> str:
        """``/tasks``: the chat's task strip as text — running and recently failed runs."""
        tasks = await self.host.agent_tasks(member_id)
        if not tasks:
            return self.t("tasks_none", locale)
        lines = [self.t("tasks_header", locale)]
        for task in tasks:
            status = self.t(f"task_status_{task['status']}", locale)
            lines.append(self.t("task_line", locale, agent=task.get("title") or task["agent_id"], status=status, task=" ".join(task["task"].split())[:120]))
        return "\n".join(lines)

    async def _voice_command(self, member_id: str, message: Inbound, locale: str) -> None:
        """``/voice on|off``: answers also as voice notes (kept in the plugin's store,
        keyed by member; no text)."""
        words = message.text.split()
        wanted = words[1].lower() if len(words) > 1 else ""
        if wanted in ("on", "an"):
            await self.host.kv_set(f"voice:{member_id}", True)
            await self.say(message.chat_id, self.t("voice_on", locale), member_id)
        elif wanted in ("off", "aus"):
            await self.host.kv_set(f"voice:{member_id}", None)
            await self.say(message.chat_id, self.t("voice_off", locale), member_id)
        else:
            state = "voice_state_on" if await self.host.kv_get(f"voice:{member_id}") else "voice_state_off"
            await self.say(message.chat_id, self.t("voice_usage", locale, state=self.t(state, locale)), member_id)

    async def _run_voice(self, queue: ChatQueue, job: Job, payload: Mapping[str, Any]) -> None:
        """An answer as an OGG/Opus voice note, made by the host's speech engines (the
        member's voice, their cache); when it cannot be made, a line saying why. While
        the member's read-aloud slots are taken (the web reading something aloud, an
        earlier note still being made) or the server's are, the note waits and is tried
        again (``VOICE_BUSY_WAITS_SECONDS``, about a minute in all; the chat's other
        messages go ahead meanwhile) before the line says it failed."""
        chat_id = queue.chat_id
        member_id = str(job.member_id)
        locale = str(payload.get("locale") or "en")
        text = str(payload.get("text", ""))
        cut = job.public.get("cut")
        while not job.public.get("voice_sent"):
            spoken = first_part(text, cut) if isinstance(cut, int) else text
            try:
                audio = await self.host.synthesize_speech(member_id, spoken, format="ogg")
            except (TtsUnavailable, ChannelRequestError) as exc:
                tries = int(job.public.get("busy_tries", 0))
                if self._speech_busy(exc) and tries < len(VOICE_BUSY_WAITS_SECONDS):
                    job.public["busy_tries"] = tries + 1
                    wait = VOICE_BUSY_WAITS_SECONDS[tries]
                    log.info("telegram: the voice note for chat %s waits %.0f s: speech is busy being made", chat_id, wait)
                    raise Later(wait) from None
                limit = self._speech_limit(exc)
                if limit is not None and not isinstance(cut, int):
                    # Longer than the host reads aloud: the member who asked for voice
                    # replies gets its beginning, up to the host's own limit (the whole
                    # text went first: only the host can count what is read aloud).
                    cut = job.public["cut"] = limit
                    continue
                if limit is not None:
                    line = self.t("voice_too_long", locale, start=opening_words(text), limit=limit)
                else:
                    line = self.t("voice_failed", locale, reason=str(exc))
                await self._send_piece(queue, line, markdown=False, edit=None)
                return
            await self.outbox.call(queue, lambda: self.bot.send_voice(chat_id, voice=audio), "sendVoice")
            if not isinstance(cut, int):
                return
            job.public["voice_sent"] = True  # a retry of the line below sends no second note
            await self.outbox.progress(queue, job)
        # Read only in part: the chat says which answer, and that the rest was not read.
        await self._send_piece(queue, self.t("voice_cut", locale, start=opening_words(text), limit=cut), markdown=False, edit=None)

    @staticmethod
    def _speech_limit(exc: Exception) -> int | None:
        """The host's read-aloud limit when it refused a text as too long for it
        (``tts_too_long``, its ``limit`` value), else None."""
        if not isinstance(exc, ChannelRequestError) or exc.code != "tts_too_long":
            return None
        limit = exc.values.get("limit")
        return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None

    @staticmethod
    def _speech_busy(exc: Exception) -> bool:
        """The host refuses a synthesis while the member's (or the server's) read-aloud
        slots are taken, with the refusal's code (``ChannelRequestError.code``, 1.12)."""
        return isinstance(exc, ChannelRequestError) and exc.code in SPEECH_BUSY_CODES

    async def _offer_pairing(self, message: Inbound) -> None:
        locale = telegram_locale(message.language_code)
        code = await self.pairing.issue(message.chat_id, message.chat_name)
        if code is None:
            await self.say(message.chat_id, self.t("pair_wait", locale))  # a stranger's: memory only
        else:
            # The code is a secret: never stored anywhere in clear, so memory only.
            await self.say(message.chat_id, self.t("pair_intro", locale, code=display(code)))

    async def _refuse_once(self, member_id: str, chat_id: int, locale: str) -> None:
        """One polite refusal per revocation: the flag is cleared when a message of the
        member is accepted again."""
        if await self.host.kv_get(f"refused:{member_id}"):
            return
        await self.host.kv_set(f"refused:{member_id}", True)
        await self.say(chat_id, self.t("refused", locale), member_id)

    async def _save_file(self, member_id: str, chat_id: int, ref: Any, locale: str) -> str | None:
        if ref.size is not None and ref.size > MAX_DOWNLOAD_BYTES:
            await self.say(chat_id, self.t("file_too_big", locale), member_id)
            return None
        try:
            for attempt in range(1, 4):  # a flood wait on getFile: wait it out, twice at most
                try:
                    file = await self.bot.get_file(ref.file_id)
                    data = bytes(await file.download_as_bytearray())
                    break
                except RetryAfter as exc:
                    if attempt == 3:
                        raise
                    await asyncio.sleep(retry_after_seconds(exc))
            if len(data) > MAX_DOWNLOAD_BYTES:
                await self.say(chat_id, self.t("file_too_big", locale), member_id)
                return None
            saved = await self.host.save_upload(member_id, ref.filename, data)
            return str(saved["path"])
        except MemberLocked:
            raise
        except ChannelRequestError as exc:  # the host's kind of refusal, worded here in the member's language
            reason = self._refusal_words(exc, locale) or str(exc)
            await self.say(chat_id, self.t("upload_failed", locale, reason=reason), member_id)
        except ValueError as exc:
            await self.say(chat_id, self.t("upload_failed", locale, reason=str(exc)), member_id)
        except TelegramError as exc:
            # The log says the Bot API's kind of refusal ("invalid file_id"), never the
            # rest of its words; the member reads what happened in their own language.
            log.warning("telegram: downloading a file failed: %s", refusal_kind(exc))
            await self.say(chat_id, self.t("download_failed", locale), member_id)
        return None

    # -- buttons ---------------------------------------------------------------------

    def _press(self, press: ButtonPress) -> None:
        """Off the poller: a button press must not wait for the chat's queue, and the
        next update must not wait for the press."""
        task = asyncio.create_task(self._on_button(press, time.monotonic()), name=f"telegram:press:{press.update_id}")
        self._presses.add(task)
        task.add_done_callback(self._presses.discard)

    async def _on_button(self, press: ButtonPress, received: float) -> None:
        """Answered once (Telegram stops the button's spinner, and a query unanswered
        for 15 s expires): the answer belongs to no chat's queue and never waits for a
        chat's flood wait. A card's press is answered when it is known whether it
        counted: one that did not (a double tap, a card settled on the web) is told so
        in the answer, as a toast, not by a line in the chat that would come after the
        answer the model gives meanwhile. The card itself is edited to its outcome
        (``_settle_card``)."""
        verb, _, short = press.data.partition(":")
        answered = False

        async def answer(toast: str | None = None) -> None:
            nonlocal answered
            if answered:
                return
            answered = True
            await self.outbox.call_unbound(
                lambda: self.bot.answer_callback_query(
                    press.query_id, text=toast[:200] if toast else None, show_alert=False if toast else None,
                    read_timeout=CALLBACK_ANSWER_SECONDS,
                ),
                "answerCallbackQuery", until=received + CALLBACK_ANSWER_SECONDS,
            )

        if not (verb in ("approve", "deny") or verb.startswith("q")) or not short:
            await answer()
        try:
            await self._on_card_press(press, verb, short, answer)
        finally:
            if not answered:
                await answer()

    async def _on_card_press(self, press: ButtonPress, verb: str, short: str, answer: Any) -> None:
        """The press itself; ``answer``: ``_on_button``'s, called once with the toast a
        press that did not count shows (else ``_on_button`` answers without one)."""
        if press.chat_type not in (None, "private") or (press.chat_id is not None and press.chat_id != press.from_id):
            log.debug("telegram: a button press from a %s chat ignored", press.chat_type)
            return
        member_id = await self._linked_member(press.from_id)
        if member_id is None:
            # A card of a chat that lost its link (its member linked another chat: the
            # card moved there, ``_move_cards``): said so, and its buttons go (memory
            # only: the chat is nobody's now). Any other press from a chat not linked
            # (a stranger's, a forged handle) does nothing.
            moved = await self.host.kv_get(f"button:{short}") if short else None
            if isinstance(moved, dict) and moved.get("moved"):
                await answer()
                await self.host.kv_set(f"button:{short}", None)
                if press.message_id is not None:
                    self.outbox.put_nowait(press.from_id, Job("remove_buttons", None, None, {"message_id": press.message_id}))
                await self.say(press.from_id, self.t("button_unlinked", telegram_locale(press.language_code)))
            return
        locale = await self.locale_for(member_id, press.language_code)
        if not await self.host.member_has_grant(member_id):
            await answer()
            await self._refuse_once(member_id, press.from_id, locale)
            return
        if verb.startswith("q") and short:
            await self._on_question_button(press, member_id, locale, verb[1:], short, answer)
            return
        entry = await self.host.kv_get(f"button:{short}") if verb in ("approve", "deny") and short else None
        approval_id = str(entry["approval_id"]) if isinstance(entry, dict) and entry.get("member_id") == member_id and entry.get("approval_id") else ""
        if not approval_id or approval_id in self._pressing or approval_id in self._answered:
            # A second tap (the first one is being answered, or was), or a card whose
            # request is gone: a toast, never a chat line below the model's answer.
            await answer(self.t("approval_gone", locale))
            return
        # While the press is answered, its card stays as it is (``button:``/``card:``
        # too): whichever answer wins, this one or the web's (``approval_resolved``
        # arriving meanwhile sets this future), edits the card once, in place.
        waiting: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pressing[approval_id] = waiting
        try:
            try:
                result = await self.host.resolve_approval(member_id, approval_id, verb == "approve")
            except MemberLocked as exc:
                # Not answered: the card keeps its buttons for after the member signs in.
                await answer()
                await self.say(press.from_id, self.t(locked_key(exc.lock_reason), locale), member_id)
                return
            except Exception as exc:  # already answered elsewhere, expired, ...
                log.info("telegram: resolving an approval failed: %s", type(exc).__name__)
                await answer(self.t("approval_gone", locale))
                # The answer that won reaches this plugin as ``approval_resolved``, maybe
                # only now: its outcome is what the card says.
                try:
                    status = await asyncio.wait_for(asyncio.shield(waiting), LOST_PRESS_WAIT_SECONDS)
                except asyncio.TimeoutError:
                    status = None
                await self._settle_card(press.from_id, member_id, approval_id, self._settled_words(status, locale))
                return
            self._answered[approval_id] = None
            while len(self._answered) > ANSWERED_KEPT:
                del self._answered[next(iter(self._answered))]
        finally:
            self._pressing.pop(approval_id, None)
        await answer()
        decision = result.get("decision") if isinstance(result, Mapping) else None
        if decision not in ("approved", "denied"):
            decision = "approved" if verb == "approve" else "denied"
        await self._settle_card(press.from_id, member_id, approval_id, self.t(decision, locale), message_id=press.message_id, short=short)

    async def _on_question_button(self, press: ButtonPress, member_id: str, locale: str, choice: str, short: str, answer: Any) -> None:
        """A button of a question card (``TurnApi.ask`` in a Telegram conversation):
        ``d`` declines, ``<n>`` accepts with the card's ``n``-th answer. The answer goes
        to the host and is kept nowhere here."""
        entry = await self.host.kv_get(f"qbutton:{short}")
        answers = None
        if isinstance(entry, dict) and entry.get("member_id") == member_id:
            try:
                answers = json.loads(await self.host.open_for_member(member_id, str(entry.get("answers", ""))))
            except MemberLocked as exc:
                await answer()
                await self.say(press.from_id, self.t(locked_key(exc.lock_reason), locale), member_id)
                return
            except (ChannelRequestError, ValueError):
                answers = None
        if not isinstance(answers, list) or entry.get("member_id") != member_id or not (choice == "d" or (choice.isdigit() and int(choice) < len(answers))):
            await answer(self.t("approval_gone", locale))  # a toast, as for an approval card
            return
        await answer()
        await self.host.kv_set(f"qbutton:{short}", None)
        await self.host.kv_set(f"qcard:{entry['question_id']}", None)  # settled here: no second edit
        try:
            if choice == "d":
                await self.host.answer_question(member_id, entry["question_id"], "decline")
                reply = self.t("question_declined", locale)
            else:
                await self.host.answer_question(member_id, entry["question_id"], "accept", answers[int(choice)])
                reply = self.t("question_answered", locale)
        except MemberLocked as exc:
            reply = self.t(locked_key(exc.lock_reason), locale)
        except Exception as exc:  # answered elsewhere, timed out, ...
            log.info("telegram: answering a question failed: %s", type(exc).__name__)
            reply = self.t("approval_gone", locale)
        if press.message_id is not None:
            await self.outbox.put(press.from_id, Job("remove_buttons", member_id, None, {"message_id": press.message_id}))
        await self.say(press.from_id, reply, member_id)

    # -- the host's events, out ------------------------------------------------------------

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        """Queues only (the host waits for this before the member's next event)."""
        chat_id = await self.pairing.chat_for_member(member_id)
        if chat_id is None:
            log.debug("telegram: %s event for a member without a linked chat dropped", event.kind)
            return
        if chat_id in self._unsettled:  # what a previous run streamed here comes first
            await self._settle_relay(chat_id)
        if event.kind == "typing":
            if chat_id in self._stopped and self._stopped[chat_id] == event.conversation_id:
                del self._stopped[chat_id]  # a new turn: its partials start a new message
            if chat_id in self._resumed and self._resumed[chat_id] == event.conversation_id:
                del self._resumed[chat_id]
            if self.outbox.pending(chat_id, "typing") is None and chat_id not in self._streams:
                self.outbox.put_nowait(chat_id, Job("typing", member_id))
        elif event.kind in ("partial", "answer", "stopped", "error") and chat_id in self._resumed and self._resumed[chat_id] == event.conversation_id:
            # That turn's end was read back from the store and shown (``_settle``): a late
            # event of it would show it twice.
            log.debug("telegram: a late %s of an answer finished from the store dropped", event.kind)
        elif event.kind == "partial":
            await self._on_partial(chat_id, member_id, event)
        elif event.kind == "answer":
            if event.text.strip():
                await self._finish_answer(chat_id, member_id, event.conversation_id, event.text, _round_id(event.data.get("message_id")))
            else:  # the model said nothing: the chat must not just fall silent
                await self._show_empty_answer(chat_id, member_id, event.conversation_id)
        elif event.kind == "notification":
            if event.text.strip():
                # A note the host wrote (a request sent again) in the member's language;
                # background work's own words as they are.
                text = await self._host_words(member_id, event.conversation_id, event.text, await self.locale_for(member_id), _cause(event))
                await self.say_markdown(chat_id, member_id, text, None)
        elif event.kind == "stopped":
            await self._finish_stopped(chat_id, member_id, event)
        elif event.kind == "error":
            await self._show_failure(chat_id, member_id, event.conversation_id, event.text, _cause(event))
        elif event.kind == "approval" and event.approval_id:
            await self._send_approval(member_id, chat_id, event, await self.locale_for(member_id))
        elif event.kind == "question" and event.data.get("question_id"):
            await self._send_question(member_id, chat_id, event, await self.locale_for(member_id))
        elif event.kind == "question_resolved" and event.data.get("question_id"):
            card = await self.host.kv_get(f"qcard:{event.data['question_id']}")
            if isinstance(card, dict) and card.get("message_id"):
                await self.host.kv_set(f"qcard:{event.data['question_id']}", None)
                await self.host.kv_set(f"qbutton:{card.get('short')}", None)
                await self.outbox.put(chat_id, Job("remove_buttons", member_id, None, {"message_id": int(card["message_id"])}))
        elif event.kind == "approval_resolved" and event.approval_id:
            approval_id, status = str(event.approval_id), event.data.get("status")
            if event.data.get("reason") == WITHDRAWN:  # denied by the host, not by the member elsewhere
                status = WITHDRAWN
            pressing = self._pressing.get(approval_id)
            if pressing is not None:  # a press here is being answered: it settles the card
                if not pressing.done():
                    pressing.set_result(status)
            elif approval_id not in self._answered:  # else a press here won, and settled it
                await self._settle_card(chat_id, member_id, approval_id, self._settled_words(status, await self.locale_for(member_id)))

    async def _on_partial(self, chat_id: int, member_id: str, event: ChannelEvent) -> None:
        """The answer so far: one message per answer, created by the first partial and
        edited with the latest text whenever the chat's queue gets to it — at most one
        edit waits in the queue (later text replaces earlier), and the queue's pacing
        keeps it to one call a second. Plain text while it streams: half-written
        Markdown would flicker; the final answer is formatted."""
        if chat_id in self._stopped and self._stopped[chat_id] == event.conversation_id:
            return  # the stopped turn's last partial, sent before the host saw the stop
        round_ = _round_id(event.data.get("message_id"))
        stream = self._streams.get(chat_id)
        if (
            stream is None or stream.conversation_id != event.conversation_id or stream.closed
            or (round_ is not None and stream.round is not None and round_ != stream.round)
        ):
            # A new answer, a new round of it (after tool calls), or text after a card:
            # a new message. The earlier one keeps its words (its waiting edit still runs).
            previous, stream = stream, Stream(event.conversation_id, round_)
            self._streams[chat_id] = stream
            if previous is not None and previous.conversation_id == event.conversation_id and previous.relay is not None:
                # The same answer goes on in the new message: a restart finishes that one.
                stream.relay, previous.relay = {**previous.relay, "message_id": None}, None
                await self._relay_write(chat_id, stream.relay)
            else:
                await self._relay_begin(chat_id, member_id, stream, round_)
        elif stream.round is None:
            stream.round = round_  # restored after a restart: the answer goes on in it
        if stream.finished:
            return
        stream.text = event.text
        if stream.job is None:
            stream.job = Job("stream", member_id, None, {"conversation_id": event.conversation_id})
            self._stream_jobs[stream.job.id] = stream
            self.outbox.put_nowait(chat_id, stream.job)

    def _close_stream(self, chat_id: int) -> None:
        """A message goes to the chat below the streamed one (a card, a note): text
        streamed after it is a new message under it, not an edit above it."""
        stream = self._streams.get(chat_id)
        if stream is not None:
            stream.closed = True

    def _take_stream(self, chat_id: int, conversation_id: str | None) -> Stream | None:
        """The chat's stream of this conversation, ended now (no more edits of it), or
        None when the chat streams no answer of that conversation."""
        stream = self._streams.get(chat_id)
        if stream is None or stream.conversation_id != conversation_id:
            return None
        stream.finished = True
        if stream.job is not None:
            self.outbox.discard(chat_id, stream.job)
            self._stream_jobs.pop(stream.job.id, None)
            stream.job = None
        self._streams.pop(chat_id, None)
        return stream

    async def _end_stream(self, chat_id: int, conversation_id: str | None) -> None:
        await self._relay_end(chat_id, self._take_stream(chat_id, conversation_id))

    async def _finish_answer(
        self, chat_id: int, member_id: str, conversation_id: str | None, text: str, round_: int | None = None
    ) -> None:
        """A turn's answer: its round's streamed message edited into the final text,
        then (with ``/voice on``) the same words as a voice note."""
        await self.say_markdown(chat_id, member_id, text, conversation_id, round_)
        if await self.host.kv_get(f"voice:{member_id}"):
            # After the text, through the same outbox: sealed, paced, kept over a restart.
            locale = await self.locale_for(member_id)
            await self.outbox.put(chat_id, Job("voice", member_id, {"text": text, "locale": locale}))

    async def _show_empty_answer(self, chat_id: int, member_id: str, conversation_id: str | None) -> None:
        """A turn that ended in a blank answer: what streamed (a round before its tool
        calls) stays as it is, and a short line says the model gave no words — else the
        member would wait for an answer that never comes."""
        stream = self._take_stream(chat_id, conversation_id)
        await self.say(chat_id, self.t("empty_answer", await self.locale_for(member_id)), member_id, relay=stream)
        await self._relay_end(chat_id, stream)

    async def _show_failure(
        self, chat_id: int, member_id: str, conversation_id: str | None, text: str, reason: Mapping[str, Any] | None = None
    ) -> None:
        """A failed turn: its streamed message stays as it is, and a line says why, in
        the member's language."""
        stream = self._take_stream(chat_id, conversation_id)
        locale = await self.locale_for(member_id)
        words = await self._host_words(member_id, conversation_id, text, locale, reason)
        words = words if len(words) <= 300 else words[:299] + "…"
        await self.say(chat_id, self.t("error", locale, reason=words), member_id, relay=stream)
        await self._relay_end(chat_id, stream)

    # -- the host's own words, in the member's language ------------------------------------------

    async def _host_words(
        self, member_id: str, conversation_id: str | None, text: str, locale: str, reason: Mapping[str, Any] | None = None
    ) -> str:
        """A text the host wrote in English (why a turn failed, a note of its own) in the
        member's language: its cause (``reason``: ``{"code", "values"}``), which the web
        words as ``core.error.<code>`` in its reader's language — so is it here. The live
        event carries it (contract 1.12); a failure read back later (a relay finished
        after a stop) from the message the host stored with it (``reason``, 1.10). The
        English text when no code is given."""
        if reason is None and conversation_id is not None and text.strip():
            try:
                read = await self.host.conversation_messages(member_id, conversation_id)
            except ChannelRequestError:  # locked, or not a conversation of this source
                read = {}
            except Exception as exc:
                log.info("telegram: reading a failure's cause back failed: %s", type(exc).__name__)
                read = {}
            for message in reversed(list(read.get("messages") or ())):
                if isinstance(message, Mapping) and message.get("reason") and message.get("content") == text:
                    reason = message["reason"]
                    break
        return self._reason_words(reason, locale) or text

    def _refusal_words(self, exc: ChannelRequestError, locale: str) -> str | None:
        """A coded refusal of the host (contract 1.15: with its values) as the core
        bundle words it, a size in the member's number format; None without a code."""
        values = dict(getattr(exc, "values", None) or {})
        for name, to in (("left", "left"), ("limit", "size")):  # home_full's room, upload_too_large's cap
            if isinstance(values.get(name), int):
                values[to] = size_text(values[name], locale)
        return self._reason_words({"code": exc.code, "values": values}, locale)

    def _reason_words(self, reason: Any, locale: str) -> str | None:
        """``core.error.<code>`` with its values, as the web's ``errorString`` words it
        for a member: the ``.member`` wording where there is one (a member cannot fix a
        provider's address), a wait of a minute or more in minutes. None for no code or
        one no bundle words."""
        code = reason.get("code") if isinstance(reason, Mapping) else None
        if not isinstance(code, str) or not code:
            return None
        values = dict(reason.get("values") or {}) if isinstance(reason.get("values"), Mapping) else {}
        key = f"core.error.{code}"
        if self.host.translate(key, "en") == key:
            return None
        if self.host.translate(f"{key}.member", "en") != f"{key}.member":
            key = f"{key}.member"
        seconds = values.get("seconds")
        if isinstance(seconds, (int, float)) and seconds >= 60:
            count = int(-(-seconds // 60))
            # The form the member's language has for the count (CLDR's rules), else `.other`.
            for form in (f"core.error.{code}.minutes.{plural_category(locale, count)}", f"core.error.{code}.minutes.other"):
                if self.host.translate(form, locale) != form:
                    return self.host.translate(form, locale, **{**values, "count": count})
        return self.host.translate(key, locale, **values)

    # -- relays: an answer's message finished after a stop ---------------------------------------

    async def _relay_write(self, chat_id: int, record: Mapping[str, Any] | None) -> None:
        try:
            await self.host.kv_set(f"{RELAY_PREFIX}{chat_id}", dict(record) if record is not None else None)
        except Exception as exc:  # the host's store failing: the answer still streams, if not kept
            log.error("telegram: the answer streaming to chat %s could not be recorded: %s", chat_id, type(exc).__name__)

    async def _relay_begin(self, chat_id: int, member_id: str, stream: Stream, answer: Any) -> None:
        stream.relay = {
            "id": secrets.token_hex(8), "member_id": member_id, "conversation_id": stream.conversation_id,
            "message_id": None, "answer": _round_id(answer),
        }
        await self._relay_write(chat_id, stream.relay)

    async def _relay_end(self, chat_id: int, stream: Stream | None) -> None:
        """The stream's end is queued for the chat (stored, when it is the member's):
        nothing is left to finish after a stop."""
        if stream is not None and stream.relay is not None:
            stream.relay = None
            await self._relay_write(chat_id, None)

    async def _relay_drop(self, chat_id: int) -> None:
        """The chat is not its member's any more: nothing of theirs is finished there."""
        stream = self._streams.pop(chat_id, None)
        if stream is not None:
            stream.finished = True
        self._unsettled.pop(chat_id, None)
        self._resumed.pop(chat_id, None)
        await self._relay_write(chat_id, None)

    async def _restore_relays(self) -> None:
        """At start: the answers a previous run was streaming (``relay:<chat>``), each
        settled against the stored conversation in the background — at once when the
        member is unlocked, else at their next unlock (``member_unlocked``) — and before
        any event of its chat (``deliver``)."""
        try:
            keys = await self.host.kv_keys(RELAY_PREFIX)
        except Exception as exc:
            log.error("telegram: the streamed answers of the previous run could not be read: %s", type(exc).__name__)
            return
        for key in keys:
            record = await self.host.kv_get(key)
            chat = key[len(RELAY_PREFIX):]
            if not chat.lstrip("-").isdigit() or not _is_relay(record):
                await self.host.kv_set(key, None)
                continue
            self._unsettled[int(chat)] = dict(record)
        for chat_id in list(self._unsettled):
            self._settle_later(chat_id)

    def _settle_later(self, chat_id: int) -> None:
        task = asyncio.create_task(self._settle_relay(chat_id), name=f"telegram:relay:{chat_id}")
        self._settlers.add(task)
        task.add_done_callback(self._settlers.discard)

    def member_unlocked(self, member_id: str) -> None:
        """Their file is open again: what waited for it (after a server restart) now."""
        for chat_id, record in list(self._unsettled.items()):
            if record.get("member_id") == member_id:
                self._settle_later(chat_id)
        self._deliver_held_later(member_id)  # messages held while locked, if any

    async def _settle_relay(self, chat_id: int) -> None:
        async with self._settling.setdefault(chat_id, asyncio.Lock()):
            record = self._unsettled.get(chat_id)
            if record is None:
                return
            try:
                settled = await self._settle(chat_id, record)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # by type only; the record stays for the next start
                log.error("telegram: finishing the answer streamed to chat %s failed: %s", chat_id, type(exc).__name__)
                settled = True
            if settled:
                self._unsettled.pop(chat_id, None)

    async def _settle(self, chat_id: int, record: Mapping[str, Any]) -> bool:
        """One answer a previous run was streaming into the chat's message when it
        stopped, read back from the member's conversation (``conversation_messages``):
        still being written, its next partials edit that same message; ended meanwhile
        (its events went nowhere while the plugin was off), the message is finished as
        the end's event would have finished it — the answer, what a stopped one kept, or
        why it failed — once. False: not now (the member is locked)."""
        member_id, conversation_id = str(record["member_id"]), str(record["conversation_id"])
        if chat_id in self._streams:  # a newer answer streams there already (its own relay)
            return True
        if await self.pairing.chat_for_member(member_id) != chat_id:
            await self._relay_write(chat_id, None)
            return True
        queue = self.outbox.chats.get(chat_id)
        if queue is not None and any(j is not None and j.public.get("relay") == record["id"] for j in [queue.running, *queue.jobs]):
            await self._relay_write(chat_id, None)  # its end was queued (and restored) before the stop
            return True
        try:
            read = await self.host.conversation_messages(member_id, conversation_id)
        except MemberLocked:
            return False
        except ChannelRequestError as exc:  # no grant any more, or the conversation is gone
            log.info("telegram: the answer streamed to chat %s is not finished: %s", chat_id, type(exc).__name__)
            await self._relay_write(chat_id, None)
            return True
        messages = [m for m in read.get("messages") or () if isinstance(m, Mapping) and isinstance(m.get("id"), int)]
        answer = record.get("answer")
        if isinstance(answer, int):
            later = [m for m in messages if m["id"] >= answer]
        else:
            asked = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
            later = messages[asked + 1:]
        cut = next((i for i, m in enumerate(later) if m.get("role") == "user"), None)
        turn = later if cut is None else later[:cut]  # up to the member's next message
        # No round: the answer a restart cut off goes on (asked again) in this message.
        stream = Stream(conversation_id)
        stream.message_id = record.get("message_id") if isinstance(record.get("message_id"), int) else None
        stream.relay = dict(record)
        self._streams[chat_id] = stream
        if read.get("running") and cut is None:
            return True  # still being written: its partials go on in the same message
        if not read.get("running"):
            self._resumed[chat_id] = conversation_id
        last = next(
            (m for m in reversed(turn) if m.get("role") == "assistant" or (m.get("role") == "note" and m.get("status") == "error")), None
        )
        content = str(last.get("content") or "") if last is not None else ""
        if last is not None and last.get("status") == "error":
            await self._show_failure(chat_id, member_id, conversation_id, content, last.get("reason"))
        elif content.strip():
            await self._finish_answer(chat_id, member_id, conversation_id, content)
        else:
            await self._end_stream(chat_id, conversation_id)
        log.info("telegram: an answer streamed to chat %s when the plugin stopped was finished from the conversation", chat_id)
        return True

    async def _send_approval(self, member_id: str, chat_id: int, event: ChannelEvent, locale: str) -> None:
        # One card per approval: the host announces a waiting approval again when it
        # resumes the member's chat after a restart (at their sign-in, or at the very
        # press that answers it), and a second card's buttons would stay live.
        approval_id = str(event.approval_id)
        if approval_id in self._answered or approval_id in self._pressing or isinstance(await self.host.kv_get(f"card:{approval_id}"), dict):
            return
        queue = self.outbox.chats.get(chat_id)
        if queue is not None and any(j.kind == "approval" and str(j.public.get("approval_id")) == approval_id for j in queue.jobs):
            return
        short = secrets.token_urlsafe(9)  # callback_data is at most 64 bytes: a handle, not the id
        arguments = json.dumps(dict(event.arguments), ensure_ascii=False, indent=1)
        if len(arguments) > 1500:
            arguments = arguments[:1499] + "…"
        text = self.t("approval_prompt", locale, tool=event.tool or "?", arguments=arguments)
        payload = {"text": text[:4000], "approve": self.t("approve", locale), "deny": self.t("deny", locale)}
        entry: dict[str, Any] = {"member_id": member_id, "approval_id": event.approval_id}
        try:  # the card, sealed to the member: sent again should they link another chat (``_move_cards``)
            entry["card"] = await self.host.seal_for_member(member_id, json.dumps(payload).encode())
        except ChannelRequestError as exc:
            log.info("telegram: an approval card is not kept to be sent again: %s", type(exc).__name__)
        await self.host.kv_set(f"button:{short}", entry)
        self._close_stream(chat_id)  # the answer goes on below the card
        await self.outbox.put(chat_id, Job("approval", member_id, payload, {"short": short, "approval_id": event.approval_id}))

    def _settled_words(self, status: Any, locale: str) -> str:
        """What became of a card answered elsewhere (the web, the phone app), expired, or
        withdrawn by the host (``withdrawn``: the member's access changed, a deactivation
        among them) — never said to have been denied on another device when nobody did."""
        if status == WITHDRAWN:
            return self.t("approval_settled_withdrawn", locale)
        return self.t(f"approval_settled_{status}" if status in ("approved", "denied") else "approval_gone", locale)

    async def _settle_card(
        self, chat_id: int, member_id: str, approval_id: str, outcome: str, *, message_id: int | None = None, short: str | None = None,
    ) -> None:
        """The approval's card, answered here or elsewhere, or expired: its text says how,
        in place of its buttons; once (its ``card:``/``button:`` entries go, and a second
        settle finds none). Only taking the buttons left "… Allow it?" standing, and a
        line below it came after the model's answer. The card's words come from its
        sealed copy (``_send_approval``); a card without one (kept by an earlier
        version) loses its buttons and the outcome comes as a line below it.
        ``message_id``/``short``: the pressed card's own, when its ``card:`` entry is
        missing."""
        if approval_id in self._settling_cards:
            return
        self._settling_cards.add(approval_id)
        try:
            card = await self.host.kv_get(f"card:{approval_id}")
            if isinstance(card, dict) and card.get("message_id"):
                message_id, short = int(card["message_id"]), str(card.get("short") or short or "")
            entry = await self.host.kv_get(f"button:{short}") if short else None
            await self.host.kv_set(f"card:{approval_id}", None)
            if short:
                await self.host.kv_set(f"button:{short}", None)
        finally:
            self._settling_cards.discard(approval_id)
        if message_id is None:
            return  # never shown (or settled already): nothing to edit
        text = ""
        if isinstance(entry, dict) and isinstance(entry.get("card"), str):
            try:
                opened = json.loads(await self.host.open_for_member(member_id, entry["card"]))
                text = str(opened.get("text") or "") if isinstance(opened, dict) else ""
            except (ChannelRequestError, ValueError) as exc:
                log.info("telegram: a settled approval card could not be read back: %s", type(exc).__name__)
        if text:
            await self.outbox.put(chat_id, Job("settle_card", member_id, {"text": f"{text}\n\n{outcome}"[:4096]}, {"message_id": message_id}))
        else:
            await self.outbox.put(chat_id, Job("remove_buttons", member_id, None, {"message_id": message_id}))
            await self.say(chat_id, outcome, member_id)

    def _question_answers(self, fields: list[Any], locale: str) -> list[tuple[str, dict[str, Any]]]:
        """The answers a question's buttons can give: none asked (OK), one yes/no
        field, or one field of choices. A form that needs typing has none: the member
        answers it in the app (or declines here)."""
        required = [f for f in fields if isinstance(f, dict) and f.get("required")]
        if not fields:
            return [(self.t("question_ok", locale), {})]
        if len(fields) != 1 or not isinstance(fields[0], dict) or len(required) > 1:
            return []
        field_ = fields[0]
        if field_.get("type") == "boolean":
            return [(self.t("question_yes", locale), {field_["name"]: True}), (self.t("question_no", locale), {field_["name"]: False})]
        if field_.get("enum"):
            return [(str(v)[:60], {field_["name"]: v}) for v in list(field_["enum"])[:8]]
        return []

    async def _send_question(self, member_id: str, chat_id: int, event: ChannelEvent, locale: str) -> None:
        fields = list(event.data.get("fields") or ())
        answers = self._question_answers(fields, locale)
        short = secrets.token_urlsafe(9)
        # The question's choices back the buttons, sealed to the member (the key-value
        # store is in the admin-readable registry); never the member's typed answer.
        sealed = await self.host.seal_for_member(member_id, json.dumps([a for _, a in answers]).encode())
        await self.host.kv_set(f"qbutton:{short}", {"member_id": member_id, "question_id": event.data["question_id"], "answers": sealed})
        text = event.text[:3500]
        if not answers:
            text += "\n\n" + self.t("question_in_app", locale)
        buttons = [[label, f"q{index}:{short}"] for index, (label, _) in enumerate(answers)] + [[self.t("question_decline", locale), f"qd:{short}"]]
        payload = {"text": text, "buttons": buttons}
        self._close_stream(chat_id)  # the answer goes on below the card
        await self.outbox.put(chat_id, Job("question", member_id, payload, {"short": short, "question_id": event.data["question_id"]}))

    async def _run_question(self, queue: ChatQueue, job: Job, payload: Mapping[str, Any]) -> None:
        chat_id = queue.chat_id
        short = job.public.get("short")
        rows = [[InlineKeyboardButton(str(label), callback_data=str(data))] for label, data in payload.get("buttons") or ()]
        if await self.host.kv_get(f"qbutton:{short}") is None:
            return  # answered in the app while the card waited
        try:
            sent = await self.outbox.call(
                queue, lambda: self.bot.send_message(chat_id, str(payload.get("text", "")), reply_markup=InlineKeyboardMarkup(rows)), "sendMessage"
            )
        except BadRequest as exc:
            raise Refused(f"sendMessage: {refusal_kind(exc)}") from None
        await self.host.kv_set(f"qcard:{job.public.get('question_id')}", {"short": short, "message_id": sent.message_id})

    # -- running a queued job (the outbox's worker calls this, one job of a chat at a time) --

    async def _run(self, queue: ChatQueue, job: Job) -> None:
        # Not connected yet (the Bot API unreachable at start): the job waits, and is
        # kept (and stored) should the bot stop first.
        await self._connected.wait()
        chat_id = queue.chat_id
        streamed = self._stream_jobs.pop(job.id, None) if job.kind == "stream" else None
        if job.member_id is not None and job.kind != "typing" and await self.pairing.chat_for_member(job.member_id) != chat_id:
            log.info("telegram: a %s for chat %s dropped: the chat is no longer linked to its member", job.kind, chat_id)
            return
        payload = job.payload or {}
        if job.kind == "typing":
            if time.monotonic() - job.created < TYPING_STALE_SECONDS and chat_id not in self._streams:
                await self.outbox.call(queue, lambda: self.bot.send_chat_action(chat_id, "typing"), "sendChatAction", message=False)
        elif job.kind == "stream":
            await self._run_stream(queue, job, streamed)
        elif job.kind == "text":
            await self._send_pieces(queue, job, split_message(str(payload.get("text", ""))), markdown=False)
        elif job.kind == "markdown":
            await self._send_pieces(queue, job, split_markdown(str(payload.get("text", ""))), markdown=True)
        elif job.kind == "approval":
            await self._run_approval(queue, job, payload)
        elif job.kind == "question":
            await self._run_question(queue, job, payload)
        elif job.kind == "voice":
            await self._run_voice(queue, job, payload)
        elif job.kind == "settle_card":
            await self._run_settle_card(queue, job, payload)
        elif job.kind == "remove_buttons":
            await self._remove_buttons(queue, int(job.public["message_id"]))

    async def _run_settle_card(self, queue: ChatQueue, job: Job, payload: Mapping[str, Any]) -> None:
        """The card's text edited to its outcome; an edit without ``reply_markup``
        also takes its buttons. Refused (the member deleted it, or it is too old to
        edit): at least its buttons go."""
        chat_id, message_id, text = queue.chat_id, int(job.public["message_id"]), str(payload.get("text", ""))
        try:
            await self.outbox.call(
                queue, lambda: self.bot.edit_message_text(text, chat_id=chat_id, message_id=message_id), "editMessageText"
            )
        except BadRequest as exc:
            if _is_unchanged(exc):
                return
            log.info("telegram: editing a settled approval card in chat %s was refused: %s", chat_id, refusal_kind(exc))
            await self._remove_buttons(queue, message_id)

    async def _remove_buttons(self, queue: ChatQueue, message_id: int) -> None:
        chat_id = queue.chat_id
        try:
            await self.outbox.call(
                queue, lambda: self.bot.edit_message_reply_markup(chat_id=chat_id, message_id=message_id, reply_markup=None),
                "editMessageReplyMarkup",
            )
        except BadRequest as exc:  # already without buttons, or deleted by the member
            log.debug("telegram: removing buttons in chat %s: %s", chat_id, refusal_kind(exc))

    async def _send_pieces(self, queue: ChatQueue, job: Job, pieces: list[str], *, markdown: bool) -> None:
        """Each piece once, in order, recorded as it leaves; the first one edited into
        the streamed message when there is one."""
        streamed = self._finals.pop(job.id, None)
        if streamed is not None and streamed.message_id is not None:
            job.public.setdefault("edit", streamed.message_id)
        for index in range(int(job.public.get("sent", 0)), len(pieces)):
            piece = pieces[index]
            edit = job.public.get("edit") if index == 0 else None
            await self._send_piece(queue, piece, markdown=markdown, edit=edit)
            job.public["sent"] = index + 1
            if index + 1 < len(pieces):
                await self.outbox.progress(queue, job)

    async def _send_piece(self, queue: ChatQueue, piece: str, *, markdown: bool, edit: int | None) -> None:
        chat_id = queue.chat_id
        formatted = to_telegram_html(piece) if markdown else None
        forms: list[tuple[str, str | None]] = []
        if formatted is not None and formatted != html.escape(piece, quote=False):
            forms.append((formatted, "HTML"))
        forms.append((piece, None))  # plain text: what Telegram refuses no markup in
        if edit is not None:
            for text, mode in forms:
                try:
                    await self.outbox.call(
                        queue, lambda text=text, mode=mode: self.bot.edit_message_text(text, chat_id=chat_id, message_id=edit, parse_mode=mode),
                        "editMessageText",
                    )
                    return
                except BadRequest as exc:
                    if _is_unchanged(exc):
                        return
                    if _is_gone(exc):
                        break
                    log.info("telegram: editMessageText refused (%s)%s", refusal_kind(exc), ", sent as plain text" if mode else "")
            # The streamed message is gone or refuses the text: the answer comes as a new one.
        for text, mode in forms:
            try:
                await self.outbox.call(queue, lambda text=text, mode=mode: self.bot.send_message(chat_id, text, parse_mode=mode), "sendMessage")
                return
            except BadRequest as exc:
                if mode is None:
                    raise Refused(f"sendMessage: {refusal_kind(exc)}") from None
                log.info("telegram: sendMessage refused the markup (%s), sent as plain text", refusal_kind(exc))

    async def _run_stream(self, queue: ChatQueue, job: Job, stream: Stream | None) -> None:
        if stream is None or stream.finished:
            return
        if stream.job is job:
            stream.job = None  # taken: a later partial queues the next edit
        pieces = split_message(stream.text)
        text = pieces[0] if pieces else ""
        if not text or text == stream.shown:
            return
        chat_id = queue.chat_id
        try:
            if stream.message_id is None:
                sent = await self.outbox.call(queue, lambda: self.bot.send_message(chat_id, text), "sendMessage")
                stream.message_id = sent.message_id
                if stream.relay is not None:  # a restart edits this message, not a new one
                    stream.relay["message_id"] = sent.message_id
                    await self._relay_write(chat_id, stream.relay)
            else:
                message_id = stream.message_id
                await self.outbox.call(
                    queue, lambda: self.bot.edit_message_text(text, chat_id=chat_id, message_id=message_id), "editMessageText"
                )
            stream.shown = text
        except BadRequest as exc:  # an edit of a streamed message is worth no retry: the final text follows
            log.debug("telegram: a streaming edit in chat %s was refused: %s", chat_id, refusal_kind(exc))

    async def _run_approval(self, queue: ChatQueue, job: Job, payload: Mapping[str, Any]) -> None:
        chat_id = queue.chat_id
        short = job.public.get("short")
        markup = InlineKeyboardMarkup(
            [[
                InlineKeyboardButton(str(payload.get("approve", "Approve")), callback_data=f"approve:{short}"),
                InlineKeyboardButton(str(payload.get("deny", "Deny")), callback_data=f"deny:{short}"),
            ]]
        )
        if await self.host.kv_get(f"button:{short}") is None:
            return  # settled on the web while the card waited: nothing to ask any more
        try:
            sent = await self.outbox.call(
                queue, lambda: self.bot.send_message(chat_id, str(payload.get("text", "")), reply_markup=markup), "sendMessage"
            )
        except BadRequest as exc:
            raise Refused(f"sendMessage: {refusal_kind(exc)}") from None
        await self.host.kv_set(f"card:{job.public.get('approval_id')}", {"short": short, "message_id": sent.message_id})

    # -- pairing from the member's side ------------------------------------------------------

    async def pair(self, member_id: str, typed: str) -> dict[str, Any]:
        """Redeem a code for the member and greet the chat; raises ``PairingError``."""
        binding = await self.pairing.redeem(member_id, typed)
        locale = await self.locale_for(member_id)
        # The account named: someone talked into handing over their code sees that
        # their chat now belongs to another account (and can /unlink it from there).
        try:
            name = await self.host.member_name(member_id)
            account = f"{name['display_name']} ({name['username']})" if name["display_name"] != name["username"] else name["username"]
        except ChannelRequestError:
            account = "?"
        await self.say(binding["chat_id"], self.t("linked", locale, account=account), member_id)
        replaced = binding.get("replaced_chat_id")
        queued: set[str] = set()  # approval cards still waiting to be sent to the old chat
        if replaced is not None:
            old_queue = self.outbox.chats.get(replaced)
            if old_queue is not None:
                queued = {
                    str(j.public.get("approval_id")) for j in old_queue.jobs if j.kind == "approval" and j.member_id == member_id
                }
            # The member's previous chat lost the link to this one: told so (as an
            # unlink is), once the new link is written; a failure here undoes nothing.
            try:
                await self.outbox.forget(replaced, member_id)
                await self._relay_drop(replaced)
                await self.say(replaced, self.t("moved", locale))  # not the member's any more: memory only
            except Exception as exc:
                log.warning("telegram: telling chat %s that the account moved to another chat failed: %s", replaced, type(exc).__name__)
        try:
            await self._move_cards(member_id, int(binding["chat_id"]), replaced, queued, locale)
        except Exception as exc:  # the cards stay answerable on the web
            log.warning("telegram: sending the waiting approval cards to chat %s failed: %s", binding["chat_id"], type(exc).__name__)
        return binding

    async def _move_cards(self, member_id: str, chat_id: int, old_chat: int | None, queued: set[str], locale: str) -> None:
        """The member linked a new chat: the approvals still waiting for an answer come
        there as new cards (new buttons), and their cards in the old chat lose theirs
        (best effort: memory only, as that chat is nobody's now). Waiting: a card shown
        and not settled (``card:<id>``, removed by a press and by ``approval_resolved``),
        or one that was still queued for the old chat (``queued``)."""
        for key in await self.host.kv_keys("button:"):
            entry = await self.host.kv_get(key)
            if not isinstance(entry, dict) or entry.get("member_id") != member_id or not entry.get("approval_id"):
                continue
            approval_id = str(entry["approval_id"])
            card = await self.host.kv_get(f"card:{approval_id}")
            if not isinstance(card, dict) and approval_id not in queued:
                continue  # settled while the chat could not be told: not asked again
            if old_chat is not None and old_chat != chat_id and isinstance(card, dict) and isinstance(card.get("message_id"), int):
                self.outbox.put_nowait(old_chat, Job("remove_buttons", None, None, {"message_id": card["message_id"]}))
            payload: dict[str, Any] | None = None
            if isinstance(entry.get("card"), str):
                try:
                    opened = json.loads(await self.host.open_for_member(member_id, entry["card"]))
                    payload = opened if isinstance(opened, dict) else None
                except (ChannelRequestError, ValueError) as exc:
                    log.info("telegram: an approval card could not be read back: %s", type(exc).__name__)
            if payload is None:  # kept by a version before this, or not readable now: the card without its details
                text = self.t("approval_prompt", locale, tool="?", arguments="…")
                payload = {"text": text, "approve": self.t("approve", locale), "deny": self.t("deny", locale)}
            short = secrets.token_urlsafe(9)
            await self.host.kv_set(f"button:{short}", {**entry, "member_id": member_id, "approval_id": approval_id})
            # The old card's handle stays, marked moved, so a press there says where it went.
            await self.host.kv_set(key, {"member_id": member_id, "moved": True})
            await self.host.kv_set(f"card:{approval_id}", None)
            await self.outbox.put(chat_id, Job("approval", member_id, payload, {"short": short, "approval_id": approval_id}))

    async def forget_member(self, member_id: str) -> None:
        """The admin deleted the member (``member_deleted``): their chat is unlinked and
        told so, the answer that was streaming there is finished with what it showed
        (its end never comes: the member's turn stopped with them), and what waited for
        them (queued messages, stored jobs, buttons, flags) goes."""
        chats = await self.pairing.forget_member(member_id)
        await self.held.forget(member_id)
        for chat_id in list(self.outbox.chats):
            await self.outbox.forget(chat_id, member_id)
        for chat_id, record in list(self._unsettled.items()):
            if record.get("member_id") == member_id:
                await self._relay_drop(chat_id)
        locale = await self.locale_for(member_id)
        for chat_id in chats:
            stream = self._streams.get(chat_id)
            if stream is not None and stream.job is not None:
                self._stream_jobs.pop(stream.job.id, None)
            await self._relay_drop(chat_id)
            # Nobody's chat now: memory only, and not dropped by the link check.
            if stream is not None and stream.message_id is not None and stream.text.strip():
                self.outbox.put_nowait(chat_id, Job("markdown", None, {"text": stream.text}, {"sent": 0, "edit": stream.message_id}))
            await self.say(chat_id, self.t("unlinked", locale))

    async def unlink(self, member_id: str) -> None:
        chat_id = await self.pairing.unlink(member_id)
        await self.held.forget(member_id)  # not the account's to receive any more
        if chat_id is not None:
            await self.outbox.forget(chat_id, member_id)
            await self._relay_drop(chat_id)
            # Not the member's any more: memory only, and not dropped by the link check.
            await self.say(chat_id, self.t("unlinked", await self.locale_for(member_id)))


def _ending(stream: Stream | None) -> dict[str, Any]:
    """A job that ends a relayed stream names its relay in its stored (public) part: a
    restart that restores the job knows the answer's end is queued already."""
    return {"relay": stream.relay["id"]} if stream is not None and stream.relay is not None else {}


def _is_relay(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and all(isinstance(record.get(name), str) and record.get(name) for name in ("id", "member_id", "conversation_id"))
        and (record.get("message_id") is None or isinstance(record.get("message_id"), int))
    )


#: A message's first word that is a command, as Telegram's clients mark one: a slash, a
#: name of letters, digits and underscores, maybe ``@`` and the bot's username. "/etc/hosts
#: is missing" or "/ hmm" are the member's words, for the model.
COMMAND = re.compile(r"/([A-Za-z0-9_]{1,64})(?:@[A-Za-z0-9_]{1,64})?")
#: The commands the bot answers itself; any other ``/word`` is answered with a pointer to
#: /help, never sent to the model (it titled the conversation "/foo").
KNOWN_COMMANDS = ("/start", "/help", "/new", "/stop", "/tasks", "/voice", "/unlink")


def _command(message: Inbound) -> str:
    """A message's command (``/new``; ``/new@skald_bot`` in a group's form), or ""."""
    if message.forwarded_from is not None:  # someone else's "/new" is their text, not the member's command
        return ""
    words = message.text.split(maxsplit=1)
    match = COMMAND.fullmatch(words[0]) if words and message.text.startswith("/") else None
    return f"/{match.group(1).lower()}" if match else ""


def locked_key(lock_reason: str) -> str:
    """The string that tells a locked member what happened (spec 1.2's reason; an
    older host gives none, and the neutral words fit both)."""
    return {LOCK_LOGGED_OUT: "logged_out", LOCK_RESTARTED: "locked"}.get(lock_reason, "locked_unknown")


__all__ = ["BotConfig", "PairingError", "TelegramBot"]


def _cause(event: ChannelEvent) -> Mapping[str, Any] | None:
    """The host's code and values an ``error`` or ``notification`` carries (since 1.12),
    or None when it has none (words of its own)."""
    return event.data if isinstance(event.data.get("code"), str) and event.data.get("code") else None

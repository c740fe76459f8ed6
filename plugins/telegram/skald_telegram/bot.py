"""The running bot: one Bot API connection, the poller (or webhook intake), the inbound
handling of each update and the per-chat outbox that delivers the host's events.

Imported only from ``startup``: python-telegram-bot and httpx are too heavy for the
host's boot-time import of every installed plugin.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import secrets
import warnings
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning, PTBUserWarning

from skald_hookspecs import ChannelEvent, ChannelRequestError, HostApi, MemberLocked, TtsUnavailable
from skald_telegram.pairing import Pairing, PairingError, display
from skald_telegram.strings import telegram_locale
from skald_telegram.text import split_message, to_telegram_html
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
SEND_ATTEMPTS = 4
ALLOWED_UPDATES = ["message", "callback_query"]


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
            raise RuntimeError("no bot token is configured: set one on the plugin's settings page")
        mode = str(config.get("mode") or "polling")
        made = cls(
            token=token,
            api_base_url=str(config.get("api_base_url") or DEFAULT_API).rstrip("/"),
            mode=mode,
            webhook_url=str(config.get("webhook_url") or ""),
            webhook_secret=str(config.get("webhook_secret") or ""),
            poll_timeout=int(config.get("poll_timeout_seconds") or 25),
        )
        if mode == "webhook" and not (made.webhook_url and made.webhook_secret):
            raise RuntimeError("webhook mode needs both a webhook URL and a webhook secret token")
        return made


class _RedactToken(logging.Filter):
    """httpx logs every request URL at INFO, and a Bot API URL contains the bot token."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.token in message:
            record.msg, record.args = message.replace(self.token, "<bot-token>"), ()
        return True


class Outbox:
    """One queue and one worker per chat: a chat's messages leave in order, a flood
    wait (``RetryAfter``) delays that chat only, and ``deliver`` never waits for it."""

    def __init__(self) -> None:
        self._queues: dict[int, asyncio.Queue[Callable[[], Awaitable[Any]]]] = {}
        self._workers: dict[int, asyncio.Task[None]] = {}

    def put(self, chat_id: int, job: Callable[[], Awaitable[Any]]) -> None:
        queue = self._queues.get(chat_id)
        if queue is None:
            queue = self._queues[chat_id] = asyncio.Queue()
            self._workers[chat_id] = asyncio.create_task(self._work(queue), name=f"telegram:outbox:{chat_id}")
        queue.put_nowait(job)

    async def _work(self, queue: asyncio.Queue[Callable[[], Awaitable[Any]]]) -> None:
        while True:
            job = await queue.get()
            try:
                await job()
            except Exception as exc:  # a job logs its own failure; the chat's queue goes on
                log.warning("telegram: an outgoing message failed: %s", type(exc).__name__)
            finally:
                queue.task_done()

    async def drain(self, timeout: float = 5.0) -> None:
        """Let queued messages leave (best effort) before the connection closes."""
        waits = [asyncio.create_task(queue.join()) for queue in self._queues.values()]
        if waits:
            await asyncio.wait(waits, timeout=timeout)
            for wait in waits:
                wait.cancel()

    async def close(self) -> None:
        for worker in self._workers.values():
            worker.cancel()
        await asyncio.gather(*self._workers.values(), return_exceptions=True)
        self._workers.clear()
        self._queues.clear()


def retry_after_seconds(exc: RetryAfter) -> float:
    """PTB 22 returns an int and warns that it will become a timedelta; take either."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wait = exc.retry_after
    return wait.total_seconds() if hasattr(wait, "total_seconds") else float(wait)


async def with_retries(
    call: Callable[[], Awaitable[Any]], what: str, *, refused: Callable[[], Awaitable[Any]] | None = None
) -> Any:
    """Honour flood waits and retry transient network errors; give up on the rest.
    Returns None when the message could not be sent (logged without its content), or
    what ``refused`` returns when Telegram refuses the request itself (400)."""
    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            return await call()
        except RetryAfter as exc:
            seconds = retry_after_seconds(exc)
            log.info("telegram: flood wait of %.0f s before %s", seconds, what)
            await asyncio.sleep(seconds)
        except BadRequest as exc:
            if refused is not None:
                return await refused()
            log.warning("telegram: %s refused: %s", what, exc.message)
            return None
        except (Forbidden, InvalidToken) as exc:
            log.warning("telegram: %s refused: %s", what, exc.message)
            return None
        except NetworkError as exc:
            if attempt == SEND_ATTEMPTS:
                log.warning("telegram: %s failed after %d attempts: %s", what, attempt, exc.message)
                return None
            await asyncio.sleep(0.25 * 2**attempt)
    log.warning("telegram: %s still flood-limited after %d attempts", what, SEND_ATTEMPTS)
    return None


class TelegramBot:
    """Everything that exists while the plugin is enabled."""

    def __init__(self, host: HostApi, config: BotConfig) -> None:
        self.host = host
        self.config = config
        self.mode = config.mode
        self.pairing = Pairing(host)
        self.outbox = Outbox()
        self.username: str | None = None
        self._redact = _RedactToken(config.token)
        self._guard_logs()  # before the Bot exists: its constructor logs its URLs
        self._poller: asyncio.Task[None] | None = None
        self._waiting = False  # the poller waits (long poll or back-off): safe to cancel
        self._stopping = False
        self._seen: list[int] = []  # processed update ids, persisted
        self._in_flight: set[int] = set()
        self.bot = Bot(
            config.token,
            base_url=f"{config.api_base_url}/bot",
            base_file_url=f"{config.api_base_url}/file/bot",
            # A short connect timeout: startup runs under the host's 5 s hook timeout.
            request=HTTPXRequest(connection_pool_size=8, read_timeout=30.0, connect_timeout=3.0),
            get_updates_request=HTTPXRequest(connection_pool_size=1, read_timeout=10.0, connect_timeout=3.0),
        )

    # -- lifecycle -------------------------------------------------------------------

    def _guard_logs(self) -> None:
        """PTB logs every request's parameters (the member's text) and its URLs (with
        the bot token) at DEBUG: its loggers stay at INFO or above whatever the host's
        level. httpx logs each request URL at INFO: the token is masked there (a logger's
        filter sees only its own records, and httpx logs on ``httpx`` itself)."""
        _quiet_ptb_warnings()
        logging.getLogger("httpx").addFilter(self._redact)
        quiet = logging.getLogger("telegram")
        if quiet.getEffectiveLevel() < logging.INFO:
            quiet.setLevel(logging.INFO)

    async def start(self) -> None:
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
            await self._close_connection()
            raise RuntimeError("Telegram refused the bot token (getMe answered 401 Unauthorized): check it on the settings page") from None
        except TelegramError as exc:
            await self._close_connection()
            reason = exc.message.replace(self.config.token, "<bot-token>")
            raise RuntimeError(f"cannot reach the Bot API at {self.config.api_base_url}: {reason}") from None
        seen = await self.host.kv_get("recent_updates")
        self._seen = [i for i in seen if isinstance(i, int)] if isinstance(seen, list) else []
        if self.mode == "polling":
            self._poller = asyncio.create_task(self._poll(), name="telegram:poller")

    async def stop(self, *, forget_webhook: bool = False) -> None:
        """Within the host's hook timeout: an update being handled may finish (a
        second at most), the long poll is cut, queued replies get two seconds.
        ``forget_webhook``: remove the webhook at Telegram (the plugin was disabled)."""
        self._stopping = True
        if self._poller is not None:
            if self._waiting:
                self._poller.cancel()
            done, _ = await asyncio.wait({self._poller}, timeout=1.5)
            if not done:
                self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None
        await self.outbox.drain(timeout=2.0)
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
        logging.getLogger("httpx").removeFilter(self._redact)

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
                log.warning("telegram: getUpdates failed (%s): %s", type(exc).__name__, getattr(exc, "message", ""))
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
                await self._on_button(update)
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

    def say(self, chat_id: int, text: str, **kwargs: Any) -> None:
        """Queue plain-text messages (split at Telegram's limit) for a chat."""
        for piece in split_message(text):
            self.outbox.put(
                chat_id,
                lambda piece=piece: with_retries(lambda: self.bot.send_message(chat_id, piece, **kwargs), "sendMessage"),
            )

    def say_markdown(self, chat_id: int, text: str) -> None:
        """Queue the model's words: split, then each piece as Telegram HTML when it has
        formatting, sent again as plain text if Telegram refuses the markup."""
        for piece in split_message(text):
            formatted = to_telegram_html(piece)
            plain = lambda piece=piece: with_retries(lambda: self.bot.send_message(chat_id, piece), "sendMessage")  # noqa: E731
            if formatted == html.escape(piece, quote=False):
                self.outbox.put(chat_id, plain)
            else:
                self.outbox.put(
                    chat_id,
                    lambda formatted=formatted, plain=plain: with_retries(
                        lambda: self.bot.send_message(chat_id, formatted, parse_mode="HTML"), "sendMessage", refused=plain
                    ),
                )

    def t(self, key: str, locale: str, **values: Any) -> str:
        return self.host.translate(f"telegram.{key}", locale, **values)

    async def locale_for(self, member_id: str, fallback: str | None = None) -> str:
        """The member's UI language; the Telegram client's when the host will not say
        (a member whose grant was just revoked)."""
        try:
            return await self.host.member_locale(member_id)
        except ChannelRequestError:
            return telegram_locale(fallback)

    async def _on_message(self, message: Inbound) -> None:
        member_id = await self.pairing.member_for_chat(message.chat_id)
        if member_id is None:
            await self._offer_pairing(message)
            return
        locale = await self.locale_for(member_id, message.language_code)
        if not await self.host.member_has_grant(member_id):
            await self._refuse_once(member_id, message.chat_id, locale)
            return
        try:
            await self._converse(member_id, message, locale)
        except MemberLocked:
            self.say(message.chat_id, self.t("locked", locale))
        except ChannelRequestError as exc:  # revoked or deactivated between the check and the call
            if await self.host.member_has_grant(member_id):
                self.say(message.chat_id, self.t("not_delivered", locale, reason=str(exc)))
            else:
                await self._refuse_once(member_id, message.chat_id, locale)

    async def _converse(self, member_id: str, message: Inbound, locale: str) -> None:
        command = message.text.split()[0].split("@")[0].lower() if message.text.startswith("/") else ""
        if command in ("/start", "/help"):
            self.say(message.chat_id, self.t("help", locale))
            return
        if command == "/new":
            await self.host.new_conversation(member_id)
            self.say(message.chat_id, self.t("new_done", locale))
            return
        if command == "/stop":
            stopped = await self.host.stop_turn(member_id)
            self.say(message.chat_id, self.t("stop_done" if stopped else "stop_none", locale))
            return
        if command == "/voice":
            await self._voice_command(member_id, message, locale)
            return
        if message.unsupported:
            self.say(message.chat_id, self.t("unsupported", locale))
            return
        paths = []
        for ref in message.files:
            saved = await self._save_file(member_id, message.chat_id, ref, locale)
            if saved is not None:
                paths.append(saved)
        if not paths and not message.text:
            return
        delivery = await self.host.send_message(
            member_id, message.text, attachments=tuple(paths), idempotency_key=f"telegram:{message.update_id}"
        )
        if delivery.status == "accepted":
            await self.host.kv_set(f"refused:{member_id}", None)
        elif delivery.status == "sealed":
            self.say(message.chat_id, self.t("locked", locale))
        elif delivery.reason and await self.host.member_has_grant(member_id):
            self.say(message.chat_id, self.t("not_delivered", locale, reason=delivery.reason))
        else:
            await self._refuse_once(member_id, message.chat_id, locale)

    async def _voice_command(self, member_id: str, message: Inbound, locale: str) -> None:
        """``/voice on|off``: answers also as voice notes (kept in the plugin's store,
        keyed by member; no text)."""
        words = message.text.split()
        wanted = words[1].lower() if len(words) > 1 else ""
        if wanted in ("on", "an"):
            await self.host.kv_set(f"voice:{member_id}", True)
            self.say(message.chat_id, self.t("voice_on", locale))
        elif wanted in ("off", "aus"):
            await self.host.kv_set(f"voice:{member_id}", None)
            self.say(message.chat_id, self.t("voice_off", locale))
        else:
            state = "voice_state_on" if await self.host.kv_get(f"voice:{member_id}") else "voice_state_off"
            self.say(message.chat_id, self.t("voice_usage", locale, state=self.t(state, locale)))

    async def _send_voice(self, member_id: str, chat_id: int, text: str, locale: str) -> None:
        """An answer as an OGG/Opus voice note, made by the host's speech engines (the
        member's voice, their cache); when it cannot be made, a line saying why."""
        try:
            audio = await self.host.synthesize_speech(member_id, text, format="ogg")
        except (TtsUnavailable, ChannelRequestError) as exc:
            reason = str(exc)
            await with_retries(lambda: self.bot.send_message(chat_id, self.t("voice_failed", locale, reason=reason)), "sendMessage")
            return
        await with_retries(lambda: self.bot.send_voice(chat_id, voice=audio), "sendVoice")

    async def _offer_pairing(self, message: Inbound) -> None:
        locale = telegram_locale(message.language_code)
        code = await self.pairing.issue(message.chat_id, message.chat_name)
        if code is None:
            self.say(message.chat_id, self.t("pair_wait", locale))
        else:
            self.say(message.chat_id, self.t("pair_intro", locale, code=display(code)))

    async def _refuse_once(self, member_id: str, chat_id: int, locale: str) -> None:
        """One polite refusal per revocation: the flag is cleared when a message of the
        member is accepted again."""
        if await self.host.kv_get(f"refused:{member_id}"):
            return
        await self.host.kv_set(f"refused:{member_id}", True)
        self.say(chat_id, self.t("refused", locale))

    async def _save_file(self, member_id: str, chat_id: int, ref: Any, locale: str) -> str | None:
        if ref.size is not None and ref.size > MAX_DOWNLOAD_BYTES:
            self.say(chat_id, self.t("file_too_big", locale))
            return None
        try:
            file = await self.bot.get_file(ref.file_id)
            data = bytes(await file.download_as_bytearray())
            if len(data) > MAX_DOWNLOAD_BYTES:
                raise ValueError("file too big")
            saved = await self.host.save_upload(member_id, ref.filename, data)
            return str(saved["path"])
        except MemberLocked:
            raise
        except (ValueError, ChannelRequestError) as exc:
            self.say(chat_id, self.t("upload_failed", locale, reason=str(exc)))
        except TelegramError as exc:
            log.warning("telegram: downloading a file failed: %s", exc.message)
            self.say(chat_id, self.t("upload_failed", locale, reason=exc.message))
        return None

    # -- buttons ---------------------------------------------------------------------

    async def _on_button(self, press: ButtonPress) -> None:
        async def answer(text: str | None = None) -> None:
            await with_retries(lambda: self.bot.answer_callback_query(press.query_id, text=text), "answerCallbackQuery")

        if press.chat_type not in (None, "private") or (press.chat_id is not None and press.chat_id != press.from_id):
            log.debug("telegram: a button press from a %s chat ignored", press.chat_type)
            await answer()
            return
        member_id = await self.pairing.member_for_chat(press.from_id)
        if member_id is None:
            await answer()
            return
        locale = await self.locale_for(member_id, press.language_code)
        if not await self.host.member_has_grant(member_id):
            await self._refuse_once(member_id, press.from_id, locale)
            await answer()
            return
        verb, _, short = press.data.partition(":")
        entry = await self.host.kv_get(f"button:{short}") if verb in ("approve", "deny") and short else None
        if not isinstance(entry, dict) or entry.get("member_id") != member_id:
            await answer(self.t("approval_gone", locale))
            return
        await self.host.kv_set(f"button:{short}", None)
        await self.host.kv_set(f"card:{entry['approval_id']}", None)  # settled here: no second edit
        try:
            await self.host.resolve_approval(member_id, entry["approval_id"], verb == "approve")
            reply = self.t("approved" if verb == "approve" else "denied", locale)
        except MemberLocked:
            reply = self.t("locked", locale)
        except Exception as exc:  # already answered elsewhere, expired, ...
            log.info("telegram: resolving an approval failed: %s", type(exc).__name__)
            reply = self.t("approval_gone", locale)
        if press.message_id is not None:
            await self._remove_buttons(press.from_id, press.message_id)
        await answer(reply)

    async def _remove_buttons(self, chat_id: int, message_id: int) -> None:
        await with_retries(
            lambda: self.bot.edit_message_reply_markup(chat_id=chat_id, message_id=message_id, reply_markup=None),
            "editMessageReplyMarkup",
        )

    # -- the host's events, out ------------------------------------------------------------

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        chat_id = await self.pairing.chat_for_member(member_id)
        if chat_id is None:
            log.debug("telegram: %s event for a member without a linked chat dropped", event.kind)
            return
        locale = await self.locale_for(member_id)
        if event.kind == "typing":
            self.outbox.put(chat_id, lambda: with_retries(lambda: self.bot.send_chat_action(chat_id, "typing"), "sendChatAction"))
        elif event.kind in ("answer", "notification"):
            self.say_markdown(chat_id, event.text)
            if event.kind == "answer" and event.text.strip() and await self.host.kv_get(f"voice:{member_id}"):
                text = event.text
                self.outbox.put(chat_id, lambda: self._send_voice(member_id, chat_id, text, locale))
        elif event.kind == "error":
            reason = event.text if len(event.text) <= 300 else event.text[:299] + "…"
            self.say(chat_id, self.t("error", locale, reason=reason))
        elif event.kind == "approval" and event.approval_id:
            await self._send_approval(member_id, chat_id, event, locale)
        elif event.kind == "approval_resolved" and event.approval_id:
            card = await self.host.kv_get(f"card:{event.approval_id}")
            if isinstance(card, dict) and card.get("message_id"):
                await self.host.kv_set(f"card:{event.approval_id}", None)
                await self.host.kv_set(f"button:{card.get('short')}", None)
                self.outbox.put(chat_id, lambda: self._remove_buttons(chat_id, int(card["message_id"])))

    async def _send_approval(self, member_id: str, chat_id: int, event: ChannelEvent, locale: str) -> None:
        short = secrets.token_urlsafe(9)  # callback_data is at most 64 bytes: a handle, not the id
        await self.host.kv_set(f"button:{short}", {"member_id": member_id, "approval_id": event.approval_id})
        arguments = json.dumps(dict(event.arguments), ensure_ascii=False, indent=1)
        if len(arguments) > 1500:
            arguments = arguments[:1499] + "…"
        text = self.t("approval_prompt", locale, tool=event.tool or "?", arguments=arguments)
        markup = InlineKeyboardMarkup(
            [[
                InlineKeyboardButton(self.t("approve", locale), callback_data=f"approve:{short}"),
                InlineKeyboardButton(self.t("deny", locale), callback_data=f"deny:{short}"),
            ]]
        )

        async def send() -> None:
            sent = await with_retries(lambda: self.bot.send_message(chat_id, text[:4000], reply_markup=markup), "sendMessage")
            if sent is not None:
                await self.host.kv_set(f"card:{event.approval_id}", {"short": short, "message_id": sent.message_id})

        self.outbox.put(chat_id, send)

    # -- pairing from the member's side ------------------------------------------------------

    async def pair(self, member_id: str, typed: str) -> dict[str, Any]:
        """Redeem a code for the member and greet the chat; raises ``PairingError``."""
        binding = await self.pairing.redeem(member_id, typed)
        locale = await self.locale_for(member_id)
        self.say(binding["chat_id"], self.t("linked", locale))
        return binding

    async def unlink(self, member_id: str) -> None:
        chat_id = await self.pairing.unlink(member_id)
        if chat_id is not None:
            self.say(chat_id, self.t("unlinked", await self.locale_for(member_id)))


__all__ = ["BotConfig", "PairingError", "TelegramBot"]

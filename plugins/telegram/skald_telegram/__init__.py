"""skald-telegram: talk to your Skald assistant from Telegram.

A channel plugin installed as its own distribution and found through the entry point
``telegram = "skald_telegram"`` in the ``skald.plugins`` group. It imports only the
contract (``skald_hookspecs``); python-telegram-bot is imported in ``startup``, so the
host's boot-time import of every installed plugin stays cheap.

- Connection: long polling (default) or a webhook with a secret token, against the real
  Bot API or a self-hosted one (``api_base_url``).
- Pairing: an unpaired private chat gets a one-time code; the member enters it on the
  plugin's page (``PUT /api/plugins/telegram/my-config {"config": {"code": ...}}``, which
  ``user_config_updated`` turns into a binding) or gives it to the ``telegram_pairing``
  tool. The admin sees who is linked on the roster page.
- Conversation: a paired member's message goes to ``HostApi.send_message`` (the grant is
  re-checked per message); the host's replies come back through ``Channel.deliver``.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any, Callable, Mapping

from skald_hookspecs import ChannelEvent, ConfigField, HostApi, I18nBundle, PluginInfo, Tool, ToolContext, WebPage, hookimpl
from skald_telegram.strings import STRINGS

PLUGIN_ID = "telegram"

CONFIG_SCHEMA = (
    ConfigField("bot_token", "string", label="Bot token", description="The token @BotFather gave you (stored, never shown again).", secret=True, max_length=200),
    ConfigField(
        "api_base_url",
        "url",
        label="Bot API server",
        description="Leave empty for Telegram's own (https://api.telegram.org); set it for a self-hosted Bot API server.",
    ),
    ConfigField("mode", "choice", label="Mode", description="Long polling needs no public address; a webhook does.", choices=("polling", "webhook"), default="polling"),
    ConfigField("webhook_url", "url", label="Webhook URL", description="The public https address of /api/plugin/telegram/webhook (webhook mode only).",
                pattern=r"https://\S+"),
    ConfigField("webhook_secret", "string", label="Webhook secret token", description="Telegram sends it with every webhook call (1-256 of A-Z a-z 0-9 _ -).",
                secret=True, max_length=256, pattern=r"[A-Za-z0-9_-]{1,256}"),
    ConfigField("poll_timeout_seconds", "integer", label="Long-poll timeout (seconds)", default=25, minimum=1, maximum=50),
)

#: The member's binding, as their page shows it. ``code`` and ``unlink`` are requests,
#: never stored; the other three are written only by pairing (``user_config_updated``
#: refuses a hand-made change).
USER_CONFIG_SCHEMA = (
    ConfigField("code", "string", label="Pairing code", max_length=32),
    ConfigField("unlink", "boolean", label="Unlink"),
    ConfigField("linked", "boolean", label="Linked"),
    ConfigField("chat_id", "integer", label="Telegram chat"),
    ConfigField("chat_name", "string", label="Telegram chat name", max_length=200),
)
BINDING_FIELDS = ("linked", "chat_id", "chat_name")


class _Running:
    """The bot of the current enablement (``startup`` to ``shutdown``), for the routes,
    the tool and the channel. One host per process, as skald-hello explains."""

    bot: Any = None  # skald_telegram.bot.TelegramBot, imported lazily


running = _Running()


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id=PLUGIN_ID,
        title="Telegram",
        description="Talk to your assistant from Telegram: link a chat with a one-time code.",
        icon="send",
        spec=">=1.15,<2",  # seal_for_member/open_for_member, partial events, lock_reason, synthesize_speech; 1.3: the plugin page kit; 1.5: NotReady; 1.7: member_reset; 1.8: ConfigField.pattern; 1.12: HostApi.set_degraded, ChannelRequestError.code; 1.14: member_name, member_deleted; 1.15: ChannelRequestError.values
        config_schema=CONFIG_SCHEMA,
        user_config_schema=USER_CONFIG_SCHEMA,
        # A normal grant: the admin decides who may use Telegram, and every message
        # re-checks it (HostApi.member_has_grant), so a revoke lands on the next one.
        grant_by_default=True,
    )


@hookimpl
async def startup(host: HostApi) -> None:
    # python-telegram-bot and httpx take ~0.5 s to import: in a thread, not on the
    # server's event loop (which would answer nobody meanwhile).
    await asyncio.to_thread(importlib.import_module, "skald_telegram.bot")
    from skald_telegram.bot import BotConfig, TelegramBot

    config = BotConfig.from_config(await host.get_config())
    bot = TelegramBot(host, config)
    await bot.start()  # raises with the reason (bad token, unreachable server)
    running.bot = bot


@hookimpl
async def shutdown(reason: str) -> None:
    bot, running.bot = running.bot, None
    if bot is not None:
        # Disabled: Telegram must stop calling the webhook (it would keep retrying a
        # 404 and hold the chats' messages). Stopping: the next start sets it again.
        await bot.stop(forget_webhook=reason == "disabled")


@hookimpl
def register_routes(register: Callable[..., None], host: HostApi) -> None:
    from skald_telegram.routes import build_blueprint  # imports Quart: only now

    register(build_blueprint(host))


@hookimpl
def register_web_pages(register: Callable[..., None]) -> None:
    register(WebPage("main", "Telegram", "page.js", icon="send"))
    register(WebPage("roster", "Telegram links", "roster.js", icon="send", admin_only=True))


@hookimpl
def register_i18n(register: Callable[..., None]) -> None:
    register(I18nBundle(PLUGIN_ID, STRINGS))


class TelegramChannel:
    """What the host calls with the member's replies, approvals and notifications."""

    #: Spec 1.2: the host sends ``partial`` events while an answer streams.
    wants_partials = True

    async def deliver(self, member_id: str, event: ChannelEvent) -> None:
        bot = running.bot
        if bot is None:
            raise RuntimeError("the Telegram plugin is not running")
        await bot.deliver(member_id, event)

    async def reachable(self, member_id: str) -> bool:
        """Spec 1.16: only a member with a linked chat can be reached (``deliver`` drops
        what has no chat to go to), so only they are offered Telegram as the home of
        their background notes, and an unlinked member's notes stay on the web."""
        bot = running.bot
        return bot is not None and await bot.pairing.chat_for_member(member_id) is not None


@hookimpl
def register_channels(register: Callable[..., None]) -> None:
    register(PLUGIN_ID, TelegramChannel())


async def _pair_tool(args: Mapping[str, Any], ctx: ToolContext) -> str:
    """The ``telegram_pairing`` tool: the same redemption as the page."""
    from skald_telegram.pairing import PairingError

    bot = running.bot
    if bot is None:
        return "The Telegram bot is not running; ask the administrator to enable it."
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        return "Give the pairing code the Telegram bot sent (for example ABCDE-FGHIJ)."
    try:
        binding = await bot.pair(ctx.member_id, code)
    except PairingError as exc:
        return bot.t(exc.key, "en")
    return f"Linked the Telegram chat {binding['chat_name']!r} to this account."


@hookimpl
def register_tools(register: Callable[..., None]) -> None:
    register(
        Tool(
            name="telegram_pairing",
            description=(
                "Link the member's Telegram chat to their account with the one-time pairing code "
                "the Skald Telegram bot sent them there."
            ),
            parameters={
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The pairing code, e.g. ABCDE-FGHIJ."}},
                "required": ["code"],
            },
            run=_pair_tool,
        )
    )


@hookimpl
def member_unlocked(member_id: str, host: HostApi) -> None:
    """After a server restart the member's conversation can be read back only once they
    logged in again: an answer that was streaming into their chat is finished then (in
    a task of the bot's own: the login does not wait for it)."""
    bot = running.bot
    if bot is not None:
        bot.member_unlocked(member_id)


@hookimpl
async def member_reset(member_id: str, host: HostApi) -> None:
    """The account starts over in other hands (an admin reset the password): the
    member's chat is theirs, not the account's, so it is unlinked (and told so)."""
    bot = running.bot
    if bot is not None:
        await bot.unlink(member_id)
    else:
        from skald_telegram.pairing import Pairing

        await Pairing(host).unlink(member_id)


@hookimpl
async def member_deleted(member_id: str, host: HostApi) -> None:
    """The admin deleted the member: their chat is unlinked (and told so), what
    streamed there is finished, and what waited for them goes, so the chat can be
    paired again by whoever holds it."""
    bot = running.bot
    if bot is not None:
        await bot.forget_member(member_id)
    else:
        from skald_telegram.pairing import Pairing

        pairing = Pairing(host)
        await pairing.forget_member(member_id)
        await pairing.forget_stored_jobs(member_id)


@hookimpl
async def user_config_updated(member_id: str, values: dict, host: HostApi) -> None:
    """The page's writes: ``{"code": ...}`` pairs, ``{"unlink": true}`` unlinks. The
    binding fields are the plugin's to write; a member cannot set a chat by hand."""
    from skald_hookspecs import ChannelRequestError
    from skald_telegram.pairing import PairingError

    try:
        locale = await host.member_locale(member_id)
    except ChannelRequestError:
        locale = "en"
    stored = await host.get_user_config(member_id)
    if any(values.get(name) != stored.get(name) for name in BINDING_FIELDS):
        raise ValueError(host.translate("telegram.set_by_pairing", locale))
    bot = running.bot
    wants_unlink, code = values.get("unlink"), values.get("code")
    if not wants_unlink and not code:
        return
    if bot is None:
        raise ValueError(host.translate("telegram.not_running", locale))
    if wants_unlink:
        await bot.unlink(member_id)
        return
    try:
        await bot.pair(member_id, str(code))
    except PairingError as exc:
        raise ValueError(host.translate(f"telegram.{exc.key}", locale)) from None

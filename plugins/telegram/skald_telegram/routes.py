"""The plugin's HTTP routes, mounted at ``/api/plugin/telegram/`` behind the host's gate
(session, enabled flag, grant): the two pages, the member's status, the admin's roster
and the public webhook, which checks Telegram's secret token itself."""

from __future__ import annotations

import hmac
from importlib.resources import files
from typing import Any

from quart import Blueprint, Response, request

from skald_hookspecs import HostApi, current_caller, public
from skald_telegram import PLUGIN_ID, running
from skald_telegram.strings import PAGE_KEYS, ROSTER_KEYS

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def build_blueprint(host: HostApi) -> Blueprint:
    blueprint = Blueprint(PLUGIN_ID, __name__)
    package = files("skald_telegram")
    scripts = {name: package.joinpath(name).read_text(encoding="utf-8") for name in ("page.js", "roster.js")}

    def strings(keys: tuple[str, ...], locale: str | None) -> dict[str, str]:
        return {key: host.translate(f"telegram.{key}", locale) for key in keys}

    @blueprint.get("/page.js")
    async def page_js() -> Response:
        return Response(scripts["page.js"], mimetype="text/javascript")

    @blueprint.get("/roster.js")
    async def roster_js() -> Response:
        return Response(scripts["roster.js"], mimetype="text/javascript")

    @blueprint.get("/status")
    async def status() -> Any:
        """The caller's own binding, and the page's strings in their language."""
        caller = current_caller()
        assert caller is not None
        mine = await host.get_user_config(caller.id)
        bot = running.bot
        linked = bool(mine.get("linked"))
        chat = str(mine.get("chat_name") or "")
        username = bot.username if bot is not None else None
        connected = bot is not None and bot.connected
        return {
            "running": bot is not None,
            "connected": connected,
            "linked": linked,
            "chat_name": chat if linked else None,
            "bot_username": username,
            # Not running (no token yet, or it failed to start), or still connecting to
            # the Bot API: no bot answers now, so the page does not send the member to
            # write to one (a code they already have still links the chat).
            "line": host.translate(
                "telegram.page_linked" if linked
                else "telegram.page_unlinked" if connected
                else "telegram.page_connecting" if bot is not None
                # The admin is the one who can see why, and is sent there (the page
                # linked below); a member is told an administrator can.
                else "telegram.page_not_running_admin" if caller.is_admin
                else "telegram.page_not_running",
                caller.locale,
                chat=chat,
                bot=f" @{username}" if username else "",
            ),
            "why_link": host.translate("telegram.page_why", caller.locale) if bot is None and caller.is_admin else None,
            "strings": strings(PAGE_KEYS, caller.locale),
        }

    @blueprint.get("/roster")
    async def roster() -> Any:
        """Who is linked, for the admin (members see only their own status)."""
        caller = current_caller()
        if caller is None or not caller.is_admin:
            return {"error": "the roster is for administrators"}, 403
        links = await host.kv_get("links")
        rows = [
            {"member_id": link.get("member_id"), "chat_id": int(chat_id), "chat_name": link.get("chat_name"), "linked_at": link.get("linked_at")}
            for chat_id, link in (links.items() if isinstance(links, dict) else ())
        ]
        return {
            "links": sorted(rows, key=lambda r: str(r["linked_at"])),
            "connection": connection(caller.locale),
            "strings": strings(ROSTER_KEYS, caller.locale),
        }

    def connection(locale: str | None) -> dict[str, Any]:
        """The bot's connection to the Bot API, for the admin, in more words than the
        host's card gives it (``TelegramBot._tell_the_card``): the attempts so far."""
        bot = running.bot
        if bot is None:
            return {"state": "not_running", "line": None}
        state = bot.connection()
        if state["state"] == "connecting":
            line = " ".join((
                host.translate("telegram.error.unreachable", locale, url=state["url"], reason=state["reason"]),
                host.translate("telegram.connecting", locale, attempts=state["attempts"]),
            ))
        elif state["state"] == "failed":
            line = host.translate(f"telegram.{state['key']}", locale, **state["values"]) if state.get("key") else state["message"]
        else:
            line = None
        return {"state": state["state"], "line": line}

    @blueprint.post("/webhook")
    @public
    async def webhook() -> Any:
        """Telegram's calls in webhook mode. The secret token is compared in constant
        time; without it nothing of the body is read."""
        bot = running.bot
        if bot is None or bot.mode != "webhook":
            return {"error": "the Telegram webhook is not active"}, 404
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            return {"error": f"missing {SECRET_HEADER}"}, 401
        if not hmac.compare_digest(given.encode("utf-8"), bot.config.webhook_secret.encode("utf-8")):
            return {"error": f"wrong {SECRET_HEADER}"}, 403
        update = await request.get_json(force=True, silent=True)
        if not isinstance(update, dict):
            return {"error": "the body must be a JSON object (a Telegram update)"}, 400
        await bot.handle_update(update)
        return {"ok": True}

    return blueprint

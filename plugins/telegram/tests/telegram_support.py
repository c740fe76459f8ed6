"""Shared pieces of the Telegram plugin's tests: the host setup, a probe tool that needs
approval, and the pairing steps every conversation test starts with."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness
from telegram_standin import TOKEN, BotApiStandIn

MODEL = "model-telegram"
API_KEY = "sk-scripted-telegram-tests"
PROBE = "tgprobe"


class NoteProbe:
    """A tool with a side effect, so the seeded catch-all rule asks for approval."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=PROBE, title="Telegram test probe", spec=">=1.0,<2")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def run(args: Any, ctx: Any) -> str:
            self.notes.append(str(args.get("text")))
            return f"wrote {args.get('text')!r}"

        async def ring(args: Any, ctx: Any) -> str:
            await ctx.turn.notify(str(args.get("text")))
            return "rung"

        async def ask(args: Any, ctx: Any) -> str:
            # A question to the member (TurnApi.ask): a card with buttons on Telegram.
            if args.get("text"):
                fields = [{"name": "city", "type": "string", "required": True}]
            else:
                fields = [{"name": "color", "type": "string", "enum": ["red", "green"], "required": True}]
            answer = await ctx.turn.ask("Which one?", fields, timeout=30)
            return f"{answer['action']} {dict(answer.get('content') or {})}"

        text = {"type": "object", "properties": {"text": {"type": "string"}}}
        register(Tool("ask_member", "Ask the member.", text, ask))
        register(Tool("write_note", "Write a note.", text, run))
        register(Tool("ring", "Tell the member something now.", text, ring))


@dataclass
class Setup:
    host: RunningHost
    admin: SkaldClient
    api: BotApiStandIn
    model: ScriptedModelServer
    probe: NoteProbe
    harness: SkaldHarness

    async def configure(self, **config: Any) -> dict[str, Any]:
        body = {"bot_token": TOKEN, "api_base_url": self.api.url, "poll_timeout_seconds": 1, **config}
        response = await self.admin.put("/api/admin/plugins/telegram/config", json={"config": body})
        assert response.status_code == 200, response.text
        return response.json()

    async def enable(self, enabled: bool = True) -> Any:
        response = await self.admin.put("/api/admin/plugins/telegram/enabled", json={"enabled": enabled})
        assert response.status_code == 200, response.text
        return response.json()


async def configure_model(admin: SkaldClient, server: ScriptedModelServer) -> None:
    response = await admin.post("/api/admin/models/providers", json={"name": "scripted", "base_url": server.base_url, "api_key": API_KEY})
    assert response.status_code == 201, response.text
    body = {"provider_id": response.json()["id"], "model": MODEL, "priority": 1, "strength": 60}
    response = await admin.post("/api/admin/models/entries", json=body)
    assert response.status_code == 201, response.text


CODE = re.compile(r"\b([A-Z2-7]{5}-[A-Z2-7]{5})\b")
ALICE_CHAT = 5550001


async def pairing_code(setup: Setup, chat_id: int, text: str = "hello?", **kwargs) -> str:
    before = len(setup.api.texts(chat_id))
    setup.api.send(chat_id, text, **kwargs)
    texts = await setup.api.wait_texts(chat_id, before + 1)
    match = CODE.search(texts[before])
    assert match, texts[before]
    return match.group(1)


async def paired_member(setup: Setup, username: str = "alice", chat_id: int = ALICE_CHAT):
    """A logged-in member whose Telegram chat is linked through the plugin's page."""
    member = await setup.host.member(username, display_name=username.title())
    code = await pairing_code(setup, chat_id)
    saved = await member.put("/api/plugins/telegram/my-config", json={"config": {"code": code}})
    assert saved.status_code == 200, saved.text
    assert saved.json()["config"]["linked"] is True and saved.json()["config"]["chat_id"] == chat_id
    await setup.api.wait_texts(chat_id, 2)  # the "linked" greeting
    return member


async def running(setup: Setup) -> Setup:
    await setup.configure()
    await setup.enable()
    status = setup.host.core.plugins.status("telegram")
    assert (status.state, status.healthy, status.distribution) == ("loaded", True, "skald-telegram"), status.error
    return setup

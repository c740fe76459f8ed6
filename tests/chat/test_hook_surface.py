"""Check D2: a spy plugin that records every argument the host hands its hooks and
tools — walked recursively through dataclasses, mappings, sequences and objects'
fields — captures no password, key, session token, and no database handle, across
login, password change, per-member config, and a chat turn that calls its tool.
(Plugins are trusted code: a determined one can read closures and process memory;
SECURITY.md says so. This checks that the host hands out nothing it need not.)"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, PluginInfo, Tool, ToolContext
from skald_host.core.identity.crypto import KDF_FLOOR, KeyDerivation, SealedKey
from skald_host.core.storage import Database
from skald_host.testing import Reply, ScriptedModelServer, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD

from .support import ALL_MODELS, API_KEY, MODEL_A, ChatSocket, allow_tool, configure_models, new_conversation

NEW_PASSWORD = "alice's brand new password"


def walk(value: Any, out: list[Any], seen: set[int], depth: int = 0) -> None:
    """Everything reachable as data from ``value``; functions and modules are leaves."""
    if id(value) in seen or depth > 12:
        return
    seen.add(id(value))
    out.append(value)
    try:
        if isinstance(value, (str, bytes, int, float, bool, type(None), type)) or callable(value):
            return
        if dataclasses.is_dataclass(value):
            children = [getattr(value, f.name) for f in dataclasses.fields(value)]
        elif isinstance(value, dict):
            children = [*value.keys(), *value.values()]
        elif isinstance(value, (list, tuple, set, frozenset)):
            children = list(value)
        else:
            children = list(vars(value).values()) if hasattr(value, "__dict__") else []
    except Exception:  # context-bound proxies and the like: nothing to read there
        return
    for child in children:
        walk(child, out, seen, depth + 1)


class Spy:
    def __init__(self) -> None:
        self.captured: list[Any] = []

    def record(self, *values: Any) -> None:
        self.captured.extend(values)

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(
            id="spy", title="Spy", spec=">=1.0,<2", user_config_schema=(ConfigField("nickname"),)
        )

    @hookimpl
    def startup(self, host: Any) -> None:
        self.record(host)

    @hookimpl
    def shutdown(self) -> None:
        self.record("shutdown")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def peek(args: Any, ctx: ToolContext) -> str:
            self.record(args, ctx)
            return "seen"

        register(Tool("peek", "Look.", {"type": "object", "properties": {"text": {"type": "string"}}}, peek))

    @hookimpl
    def user_config_updated(self, member_id: str, values: dict, host: Any) -> None:
        self.record(member_id, values, host)


async def test_hooks_and_tools_receive_no_secret_and_no_database_handle(skald):
    spy = Spy()
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        host = await skald.start(plugins=[spy], enable=["spy"])
        admin = await host.admin()
        await configure_models(admin, server)
        await allow_tool(admin, "peek")
        alice = await host.member("alice")
        assert (await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": NEW_PASSWORD})).status_code == 200
        assert (await alice.put("/api/plugins/spy/my-config", json={"config": {"nickname": "Al"}})).status_code == 200
        server.script(MODEL_A, [Reply(tool_calls=[ToolCall("peek", {"text": "hi"})]), Reply("Done.")])
        async with ChatSocket(alice) as sock:
            conversation = await new_conversation(alice)
            await sock.send(conversation, "Peek, please.")
            await sock.turn(conversation)

        row = sqlite3.connect(host.settings.database_dir / "system.db").execute(
            "SELECT credentials FROM users WHERE id = ?", (alice.member["id"],)
        ).fetchone()
        dek = await KeyDerivation(KDF_FLOOR).unseal(NEW_PASSWORD, alice.member["id"], SealedKey.from_json(row[0]))
        secrets = [ADMIN_PASSWORD, MEMBER_PASSWORD, NEW_PASSWORD, dek.hex(), API_KEY, alice.session_token, admin.session_token]
        reached: list[Any] = []
        walk(spy.captured, reached, set())

    assert any(isinstance(v, ToolContext) for v in reached), "the spy saw the tool call"
    assert {"member_id": alice.member["id"]}.items() <= {"member_id": next(v for v in reached if isinstance(v, ToolContext)).member_id}.items()
    handles = [type(v).__name__ for v in reached if isinstance(v, (Database, sqlite3.Connection))]
    assert handles == [], f"the hook surface hands out database handles: {handles}"
    text = json.dumps([v for v in reached if isinstance(v, (str, int, float))], default=str)
    blobs = [v for v in reached if isinstance(v, bytes)]
    for secret in secrets:
        assert secret and secret not in text, "a secret reached a hook argument"
    assert dek not in blobs

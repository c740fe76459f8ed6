"""Shared pieces of the connectors plugin's tests: the host setup, adding a connector as
the admin does, and driving a member's turn over HTTP."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness

MODEL = "model-mcp"
API_KEY = "sk-scripted-mcp-tests"
DEMO = str(Path(__file__).with_name("demo_server.py"))
BASE = "/api/plugin/mcp"
TIMEOUT = 20.0


@dataclass
class Setup:
    host: RunningHost
    admin: SkaldClient
    model: ScriptedModelServer
    harness: SkaldHarness

    async def add_stdio(self, name: str = "demo", access: list[str] | None = None, **extra: Any) -> dict[str, Any]:
        body = {"name": name, "transport": "stdio", "command": sys.executable, "args": [DEMO], "access": access or [], **extra}
        response = await self.admin.post(f"{BASE}/servers", json=body)
        assert response.status_code == 201, response.text
        assert response.json()["state"] == "ready", response.json()
        return response.json()

    async def set_access(self, name: str, members: list[str]) -> None:
        response = await self.admin.put(f"{BASE}/servers/{name}/access", json={"members": members})
        assert response.status_code == 200, response.text

    async def server(self, name: str) -> dict[str, Any]:
        response = await self.admin.get(f"{BASE}/servers")
        assert response.status_code == 200, response.text
        return next(s for s in response.json()["servers"] if s["name"] == name)

    def offered(self) -> set[str]:
        """The tool names the model was offered in its latest request."""
        return {t["function"]["name"] for t in self.model.requests_for(MODEL)[-1].tools}

    def tool_results(self) -> list[str]:
        return [m["content"] for m in self.model.requests_for(MODEL)[-1].messages if m["role"] == "tool"]


def shown(status: dict[str, Any]) -> dict[str, Any]:
    """An accept's body as the page sends it: each withheld tool of ``status`` (a status
    answer, as the page was drawn from) with the hash it was shown at."""
    return {"tools": {t["name"]: t.get("hash") for t in status["pending_tools"]}}


async def configure_model(admin: SkaldClient, server: ScriptedModelServer) -> None:
    response = await admin.post("/api/admin/models/providers", json={"name": "scripted", "base_url": server.base_url, "api_key": API_KEY})
    assert response.status_code == 201, response.text
    body = {"provider_id": response.json()["id"], "model": MODEL, "priority": 1, "strength": 60}
    response = await admin.post("/api/admin/models/entries", json=body)
    assert response.status_code == 201, response.text


async def allow(admin: SkaldClient, pattern: str) -> None:
    response = await admin.post("/api/admin/approval-rules", json={"tool_pattern": pattern, "action": "allow", "priority": 50})
    assert response.status_code == 201, response.text


async def eventually(check: Callable[[], Any], *, timeout: float = TIMEOUT, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        await asyncio.sleep(0.05)


async def new_conversation(client: SkaldClient) -> str:
    response = await client.post("/api/conversations", json={"title": ""})
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def send(client: SkaldClient, cid: str, text: str) -> None:
    response = await client.post(f"/api/conversations/{cid}/messages", json={"text": text})
    assert response.status_code == 202, response.text


async def state(client: SkaldClient, cid: str) -> dict[str, Any]:
    response = await client.get(f"/api/conversations/{cid}")
    assert response.status_code == 200, response.text
    return response.json()


async def finished(client: SkaldClient, cid: str, *, approve_outside: bool = True) -> list[dict[str, Any]]:
    """Wait until the conversation's turn is over; its messages. ``approve_outside``:
    meanwhile the member approves each card raised because a connector's answer (outside
    text, check E2) is in the conversation — a connector call the rules allow asks
    after one; these tests are about the connector, not that gate
    (``test_connector_results_are_outside_text.py`` is)."""

    async def done() -> Any:
        body = await state(client, cid)
        if approve_outside:
            for approval in body["approvals"]:
                if approval.get("untrusted") and approval["status"] == "pending":
                    await client.post(f"/api/approvals/{approval['id']}", json={"decision": "approve"})
        last = body["messages"][-1] if body["messages"] else None
        idle = not body["running"] and not body["queued"] and last is not None and last["role"] == "assistant" and last["status"] != "streaming"
        return body["messages"] if idle else None

    return await eventually(done, what="the turn to finish")


async def card(client: SkaldClient, cid: str) -> dict[str, Any]:
    """The conversation's pending approval card, once it is raised."""

    async def pending() -> Any:
        approvals = (await state(client, cid))["approvals"]
        return approvals[0] if approvals else None

    return await eventually(pending, what="an approval card")


async def decide(client: SkaldClient, approval_id: str, decision: str = "approve") -> None:
    response = await client.post(f"/api/approvals/{approval_id}", json={"decision": decision})
    assert response.status_code == 200, response.text


def calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpDemo:
    """demo_server.py on streamable HTTP in a child process, for one test."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    async def __aenter__(self) -> "HttpDemo":
        self.process = subprocess.Popen([sys.executable, DEMO, "http", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        await eventually(listening, what="the HTTP MCP server to listen")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.process.terminate()
        await asyncio.to_thread(self.process.wait, 10)

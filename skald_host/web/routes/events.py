"""The member's WebSocket: their own event bus out, small commands in.

The handshake is gated in ``gate_websocket`` (Origin and session) before this runs.
The socket listens to its session's revocation: logout elsewhere, a password change,
deactivation or deletion close it with 1008 at once (check A2).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict

from quart import Blueprint, current_app, websocket

from skald_host.web.auth import current_principal

bp = Blueprint("events", __name__)

POLICY_VIOLATION = 1008


@bp.websocket("/api/ws")
async def member_socket() -> None:
    principal = current_principal()
    core = current_app.config["SKALD_CORE"]
    revoked = asyncio.Event()
    principal.session.listeners.append(lambda _session, _reason: revoked.set())
    subscription = core.buses.members.subscribe(principal.member.id)
    await websocket.accept()

    async def outbound() -> None:
        async for event in subscription:
            await websocket.send(json.dumps({"type": "event", "event": asdict(event)}))

    async def inbound() -> None:
        while True:
            raw = await websocket.receive()
            try:
                message = json.loads(raw)
                kind = message.get("type") if isinstance(message, dict) else None
            except (ValueError, RecursionError, TypeError):
                kind = None
            if kind == "ping":
                await websocket.send(json.dumps({"type": "pong"}))
            else:
                await websocket.send(json.dumps({"type": "error", "error": "unknown or malformed message"}))

    tasks = [
        asyncio.create_task(outbound()),
        asyncio.create_task(inbound()),
        asyncio.create_task(revoked.wait()),
        asyncio.create_task(core.stopping.wait()),
    ]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if tasks[2] in done or tasks[3] in done:
            await websocket.close(POLICY_VIOLATION if tasks[2] in done else 1001, "session ended")
    finally:
        subscription.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

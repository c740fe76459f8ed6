"""Shared pieces of the mobile connector's tests: the host setup, a probe plugin, pairing
a device, and a reader of the server-sent event stream."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import httpx

from skald_hookspecs import PluginInfo, Tool, hookimpl
from skald_host.testing import RunningHost, ScriptedModelServer, SkaldClient, SkaldHarness

MODEL = "model-mobile"
API_KEY = "sk-scripted-mobile-tests"
PROBE = "mobprobe"
PLUGIN = "mobile-connector"
BASE = f"/api/plugin/{PLUGIN}"


class Probe:
    """``write_note`` has a side effect, so the seeded catch-all rule asks for approval;
    ``ring`` tells the member something now (a background note)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=PROBE, title="Mobile test probe", spec=">=1.0,<2")

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def run(args: Any, ctx: Any) -> str:
            self.notes.append(str(args.get("text")))
            return f"wrote {args.get('text')!r}"

        async def ring(args: Any, ctx: Any) -> str:
            await ctx.turn.notify(str(args.get("text")))
            return "rung"

        text = {"type": "object", "properties": {"text": {"type": "string"}}}
        register(Tool("write_note", "Write a note.", text, run))
        register(Tool("ring", "Tell the member something now.", text, ring))


@dataclass
class Setup:
    host: RunningHost
    admin: SkaldClient
    model: ScriptedModelServer
    probe: Probe
    harness: SkaldHarness

    async def configure(self, **config: Any) -> None:
        response = await self.admin.put(f"/api/admin/plugins/{PLUGIN}/config", json={"config": config})
        assert response.status_code == 200, response.text

    async def enable(self, enabled: bool = True) -> None:
        response = await self.admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": enabled})
        assert response.status_code == 200, response.text

    @property
    def service(self) -> Any:
        from skald_mobile_connector import running

        return running.service


@asynccontextmanager
async def mobile_host(skald: SkaldHarness, settings: Any = None) -> AsyncIterator[Setup]:
    """A real host that finds the plugin through its installed entry point, enabled with
    HTTP push allowed, the scripted model configured and the probe plugin beside it."""
    async with ScriptedModelServer(models=(MODEL,), api_key=API_KEY) as model:
        probe = Probe()
        try:
            host = await skald.start(plugins=[probe], use_entry_points=True, enable=[PROBE], settings=settings)
            admin = await host.admin()
            await configure_model(admin, model)
            setup = Setup(host, admin, model, probe, skald)
            await setup.configure(allow_http_push=True)
            await setup.enable()
            yield setup
        finally:
            await skald.close()


async def configure_model(admin: SkaldClient, server: ScriptedModelServer) -> None:
    response = await admin.post("/api/admin/models/providers", json={"name": "scripted", "base_url": server.base_url, "api_key": API_KEY})
    assert response.status_code == 201, response.text
    body = {"provider_id": response.json()["id"], "model": MODEL, "priority": 1, "strength": 60}
    response = await admin.post("/api/admin/models/entries", json=body)
    assert response.status_code == 201, response.text


async def pairing_code(browser: SkaldClient) -> str:
    response = await browser.post(f"{BASE}/pairing")
    assert response.status_code == 201, response.text
    return response.json()["code"]


async def paired_device(setup: Setup, browser: SkaldClient, name: str = "Pixel") -> SkaldClient:
    """A client that speaks as a phone paired to ``browser``'s member: bearer token only."""
    code = await pairing_code(browser)
    device = setup.host.client()
    response = await device.post(f"{BASE}/pair", json={"code": code, "name": name, "platform": "android"})
    assert response.status_code == 201, response.text
    device.bearer = response.json()["token"]
    device.device_id = response.json()["device_id"]  # type: ignore[attr-defined]
    return device


async def project_with_a_file(member: SkaldClient) -> str:
    """A project of ``member`` named Garden, with plans/beds.md in it."""
    created = await member.post("/api/projects", json={"slug": "garden", "title": "Garden", "description": "Plans"})
    assert created.status_code == 201, created.text
    project_id = created.json()["id"]
    assert (await member.post(f"/api/projects/{project_id}/files/folder", json={"path": "plans"})).status_code in (200, 201)
    stored = await member.post(f"/api/projects/{project_id}/files/upload/plans/beds.md", content=b"# Beds\nTomatoes left.")
    assert stored.status_code in (200, 201), stored.text
    return project_id


@dataclass
class EventStream:
    """``GET /stream`` read in the background; ``events`` fills as they arrive."""

    device: SkaldClient
    events: list[dict[str, Any]] = field(default_factory=list)
    status: int | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __aenter__(self) -> "EventStream":
        self._task = asyncio.create_task(self._read())
        await self.wait_for("hello")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _read(self) -> None:
        try:
            async with self.device.http.stream("GET", f"{BASE}/stream", headers=self.device.headers("GET"), timeout=httpx.Timeout(60.0)) as response:
                self.status = response.status_code
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
                        self._changed.set()
        finally:
            self.ended.set()
            self._changed.set()

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events]

    async def wait_for(self, kind: str, timeout: float = 15.0, after: int = 0, **match: Any) -> dict[str, Any]:
        """The first event of ``kind`` matching ``match`` among the events from index
        ``after`` on (``len(stream.events)`` before an action: one that it caused)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for event in self.events[after:]:
                if event["kind"] == kind and all(event.get(k) == v for k, v in match.items()):
                    return event
            if self.ended.is_set() and kind != "closed":
                raise AssertionError(f"the stream ended (status {self.status}) before a {kind} event; saw {self.kinds()}")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"no {kind} event {match or ''} within {timeout} s; saw {self.kinds()}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

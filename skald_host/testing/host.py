"""A real host on 127.0.0.1 inside the test's event loop."""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
from pathlib import Path
from typing import Any, Iterable

from hypercorn.asyncio import serve
from quart import Quart

from skald_host.core.host import Skald, build_plugin_manager
from skald_host.settings import Settings, load_settings
from skald_host.server import behind_trusted_proxies, hypercorn_config
from skald_host.testing.client import SkaldClient
from skald_host.web.app import create_app

ADMIN_PASSWORD = "admin password for tests"
MEMBER_PASSWORD = "member password for tests"

#: The KDF floor: tests exercise the real Argon2id, at the cheapest allowed cost.
FAST_KDF = {"memory_kib": 19456, "time_cost": 2, "parallelism": 1}

#: The chat section for a benchmark's thousands of sends: the send limit at the top of
#: its range (settings refuse a value past it, as an admin's skald.yml would be).
UNTHROTTLED_CHAT = {"send_burst": 10_000, "sends_per_second": 1000}


def test_settings(data_dir: Path, **sections: dict[str, Any]) -> Settings:
    overrides: dict[str, dict[str, Any]] = {"kdf": dict(FAST_KDF), "log": {"file": None}}
    for name, values in sections.items():
        overrides.setdefault(name, {}).update(values)
    return load_settings(None, data_dir=data_dir, environ={}, overrides=overrides)


class RunningHost:
    def __init__(self, app: Quart, settings: Settings, url: str, task: asyncio.Task[Any], stop: asyncio.Event) -> None:
        self.app = app
        self.settings = settings
        self.url = url
        self._task = task
        self._stop = stop
        self._clients: list[SkaldClient] = []
        self.admin_username = "admin"

    @property
    def core(self) -> Skald:
        return self.app.config["SKALD_CORE"]

    def client(self) -> SkaldClient:
        client = SkaldClient(self.url)
        self._clients.append(client)
        return client

    async def setup_admin(self, username: str = "admin", password: str = ADMIN_PASSWORD, locale: str | None = None) -> SkaldClient:
        """First-run setup; ``locale``: the language chosen on the setup page, which is
        the admin's and the instance's (a member without one of their own reads it)."""
        client = self.client()
        body = {"username": username, "password": password, **({"locale": locale} if locale else {})}
        response = await client.post("/api/setup", json=body)
        assert response.status_code == 201, response.text
        client.csrf_token = response.json()["csrf_token"]
        client.member = response.json()["member"]
        self.admin_username = username
        return client

    async def admin(self, password: str = ADMIN_PASSWORD) -> SkaldClient:
        """A logged-in admin client, running first-run setup if nobody exists yet."""
        if await self.core.users.count() == 0:
            return await self.setup_admin(password=password)
        client = self.client()
        response = await client.login(self.admin_username, password)
        assert response.status_code == 200, response.text
        return client

    async def create_member(
        self, username: str, password: str = MEMBER_PASSWORD, *, own_password: bool = True, **fields: Any
    ) -> dict[str, Any]:
        """The admin creates the member. ``own_password`` (the default): the password
        then counts as one the member chose, as after their own change, so the web
        shell's first step ("Choose your own password") does not stand in front of
        what a test is about; ``own_password=False`` keeps it the admin's."""
        admin = await self.admin()
        response = await admin.post("/api/admin/members", json={"username": username, "password": password, **fields})
        assert response.status_code == 201, response.text
        body = response.json()
        if own_password:
            member_id = body["id"]
            await self.core.registry.transaction(
                lambda c: c.execute("UPDATE users SET password_set_by_admin = 0 WHERE id = ?", (member_id,))
            )
            body["password_set_by_admin"] = False
        return body

    async def member(
        self, username: str, password: str = MEMBER_PASSWORD, *, own_password: bool = True, **fields: Any
    ) -> SkaldClient:
        """A logged-in client for a member, created if needed (``own_password``: as
        ``create_member``)."""
        if await self.core.users.find(username) is None:
            await self.create_member(username, password, own_password=own_password, **fields)
        client = self.client()
        response = await client.login(username, password)
        assert response.status_code == 200, response.text
        return client

    async def use_model(self, server: Any, model: str | None = None) -> str:
        """Configure a ``ScriptedModelServer`` (or any OpenAI-compatible URL with
        ``base_url`` and ``models``) as the admin does on the Models page: one provider,
        ``model`` (default: the server's first) as the first choice. Returns its entry id."""
        admin = await self.admin()
        name = model or server.models[0]
        body = {"name": f"test provider {name}", "base_url": server.base_url, "api_key": getattr(server, "api_key", None) or "sk-test"}
        provider = await admin.post("/api/admin/models/providers", json=body)
        assert provider.status_code == 201, provider.text
        entry = await admin.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": name, "priority": 1})
        assert entry.status_code == 201, entry.text
        return entry.json()["id"]

    async def allow_tool(self, pattern: str) -> int:
        """An approval rule that lets ``pattern`` (a tool name or ``fnmatch`` pattern) run
        without asking, as an admin would add it; without one a plugin's tool waits for
        the member's approval. Returns the rule id."""
        admin = await self.admin()
        response = await admin.post("/api/admin/approval-rules", json={"tool_pattern": pattern, "action": "allow", "priority": 50})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    async def run_system_agents(self, *, later_by: dt.timedelta | None = None) -> list[Any]:
        """One pass of the system-agent scheduler now, as its loop makes them: every
        enabled agent that is due runs, for each member whose file is open (logged in).
        Returns an outcome per agent and member: ``agent_id``, ``member_id``,
        ``subject_id`` and ``result`` (``ran``, ``failed``, ``idle``, ``not_due``,
        ``locked``). An agent that ran is not due again until its interval passed:
        ``later_by`` moves the scheduler's clock that far ahead first (it stays there)."""
        scheduler = self.core.system_agents
        if later_by:
            earlier = scheduler.clock
            scheduler.clock = lambda: earlier() + later_by
        return await scheduler.tick()

    async def stop(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._stop.set()
        await asyncio.wait_for(self._task, 30)


async def start_host(
    settings: Settings,
    *,
    plugins: Iterable[Any] = (),
    use_entry_points: bool = False,
    enable: Iterable[str] = (),
) -> RunningHost:
    manager = build_plugin_manager(settings, extra=tuple(plugins), use_entry_points=use_entry_points)
    app = create_app(settings, plugins=manager)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    config = hypercorn_config(settings)
    config.bind = [f"fd://{sock.detach()}"]  # Hypercorn owns the descriptor from here
    config.graceful_timeout = 1.0
    stop = asyncio.Event()
    task = asyncio.create_task(serve(behind_trusted_proxies(app, settings), config, shutdown_trigger=stop.wait))  # type: ignore[arg-type]
    for _ in range(500):
        if app.config.get("SKALD_READY") or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()
        raise RuntimeError("the test host stopped while starting")
    host = RunningHost(app, settings, f"http://127.0.0.1:{port}", task, stop)
    try:
        for plugin_id in enable:
            refusal = load_failure(host.core, plugin_id)
            if refusal is not None:
                raise PluginLoadFailed(refusal)
            await host.core.set_plugin_enabled(plugin_id, True)  # a failing startup shows in its status, as in production
    except BaseException:
        await host.stop()
        raise
    return host


class PluginLoadFailed(AssertionError):
    """``skald.start(enable=[...])`` names a plugin that did not load or start: the
    message is its real error and traceback, as the catalog records them."""


def load_failure(core: Skald, plugin_id: str) -> str | None:
    """Why ``plugin_id`` cannot be enabled, with the traceback of its failure; None when
    it loaded. A plugin that failed before saying its id is listed under its module or
    entry-point name, so every such failure is shown when the id itself is unknown."""
    status = core.plugins.status(plugin_id)
    if status is not None and status.state in ("loaded", "disabled"):
        return None
    if status is not None:
        return f"plugin {plugin_id!r} is {status.state}: {status.error}\n{status.traceback or ''}".rstrip()
    failed = [s for s in core.plugins.statuses() if not s.builtin and s.state in ("failed", "blocked")]
    if not failed:
        loaded = [s.id for s in core.plugins.statuses() if not s.builtin]
        return f"no plugin {plugin_id!r} was loaded (the plugins given load as {loaded}; is the id in plugin_info() {plugin_id!r}?)"
    return "\n\n".join(
        [f"plugin {plugin_id!r} did not load; what failed:"]
        + [f"{s.name}{f' ({s.distribution})' if s.distribution else ''} is {s.state}: {s.error}\n{s.traceback or ''}".rstrip() for s in failed]
    )


class SkaldHarness:
    """What the ``skald`` fixture hands a test: start hosts, stopped at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self._hosts: list[RunningHost] = []
        self._servers: list[Any] = []

    async def model_server(self, *replies: Any, models: Iterable[str] = ("test-model",), **options: Any) -> Any:
        """A started ``ScriptedModelServer`` whose first model answers with ``replies``
        (``Reply``/``ToolCall`` items, or plain strings) in order; stopped at teardown.
        ``options`` go to ``ScriptedModelServer`` (e.g. ``responder``)."""
        from skald_host.testing.model_server import ScriptedModelServer

        server = ScriptedModelServer(models=tuple(models), **options)
        await server.start()
        self._servers.append(server)
        if replies:
            server.script(server.models[0], replies)
        return server

    def settings(self, name: str = "data", **sections: dict[str, Any]) -> Settings:
        return test_settings(self.tmp_path / name, **sections)

    async def start(
        self,
        *,
        plugins: Iterable[Any] = (),
        settings: Settings | None = None,
        use_entry_points: bool = False,
        enable: Iterable[str] = (),
    ) -> RunningHost:
        host = await start_host(
            settings or self.settings(), plugins=plugins, use_entry_points=use_entry_points, enable=enable
        )
        self._hosts.append(host)
        return host

    async def close(self) -> None:
        for host in self._hosts:
            await host.stop()
        self._hosts.clear()
        for server in self._servers:
            await server.close()
        self._servers.clear()

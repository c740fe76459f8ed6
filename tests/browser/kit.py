"""Throwaway plugins and small helpers for the browser tests."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

from quart import Blueprint, Response

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet, PluginInfo, WebPage
from skald_host.testing import ScriptedModelServer
from skald_host.testing.host import ADMIN_PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}

PAGE_MODULE = 'export default class extends HTMLElement { connectedCallback() { this.textContent = "hello from plugin"; } }'


class PagePlugin:
    """A plugin with one sidebar page served from its own router, optional config
    schema and settings set; ``fail_pages`` makes ``register_web_pages`` raise."""

    def __init__(
        self,
        plugin_id: str = "hello",
        *,
        title: str = "Hello",
        description: str = "Says hello from its own page.",
        page_title: str = "Hello",
        entry: str = "page.js",
        config_schema: Iterable[ConfigField] = (),
        config_sets: Iterable[ConfigSet] = (),
        fail_pages: str | None = None,
    ) -> None:
        self.plugin_id = plugin_id
        self.title = title
        self.description = description
        self.page_title = page_title
        self.entry = entry
        self.config_schema = tuple(config_schema)
        self.config_sets = tuple(config_sets)
        self.fail_pages = fail_pages

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(
            id=self.plugin_id,
            title=self.title,
            description=self.description,
            spec=">=1.0,<2",
            config_schema=self.config_schema,
        )

    @hookimpl
    def register_routes(self, register: Any) -> None:
        blueprint = Blueprint(f"test_{self.plugin_id.replace('-', '_')}", __name__)

        @blueprint.get("/page.js")
        async def page_module() -> Response:
            return Response(PAGE_MODULE, content_type="text/javascript; charset=utf-8")

        register(blueprint)

    @hookimpl
    def register_web_pages(self, register: Any) -> None:
        if self.fail_pages:
            raise RuntimeError(self.fail_pages)
        register(WebPage("main", self.page_title, self.entry))

    @hookimpl
    def register_config_sets(self, register: Any) -> None:
        for config_set in self.config_sets:
            register(config_set)


async def screenshot(page: Any, name: str, *, full_page: bool = True) -> None:
    """Save test-artifacts/<name>.png, scrolled to the top (sticky bars otherwise
    land mid-page in a full-page capture)."""
    ARTIFACTS.mkdir(exist_ok=True)
    await page.evaluate("window.scrollTo(0, 0)")
    await page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=full_page)


async def stored_conversation(host: Any, member_id: str, title: str, rows: Iterable[tuple[Any, ...]]) -> str:
    """A conversation written straight into the member's file, as an earlier version or
    a recovery left it; its id. Each row is ``(role, content)``, then optionally its
    status ("complete" when left out) and a dict of other ``messages`` columns, where
    ``branch_point`` names an earlier row by its content."""
    from skald_host.core.agent.store import ConversationStore

    db = host.core.users.owner_db(member_id)
    store = ConversationStore(db)
    conversation_id, _ = await store.create_conversation("assistant", title=title)
    frame = (await store.root_frame(conversation_id)).id

    def write(conn: Any) -> None:
        ids: dict[str, int] = {}
        for role, content, *rest in rows:
            columns = dict(rest.pop()) if rest and isinstance(rest[-1], dict) else {}
            if columns.get("branch_point") is not None:
                columns["branch_point"] = ids[columns["branch_point"]]
            values = {"conversation_id": conversation_id, "frame_id": frame, "role": role, "content": content,
                      "status": rest[0] if rest else "complete", **columns}
            ids[content] = conn.execute(
                f"INSERT INTO messages ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})", tuple(values.values())).lastrowid

    await db.transaction(write)
    return conversation_id


async def sign_in(page: Any, username: str, password: str) -> None:
    """Sign in through the login form and wait for the shell."""
    await page.goto("/")
    await page.get_by_label("User name").fill(username)
    await page.get_by_label("Password", exact=True).fill(password)
    await page.get_by_role("button", name="Sign in").click()
    await page.locator("#sidebar").wait_for(state="attached")


@asynccontextmanager
async def admin_on_models_page(skald: Any, browser_pages: Any) -> AsyncIterator[tuple[Any, Any, Any]]:
    """The admin's page on #models with one provider, "Scripted", at a scripted server
    that offers alpha-model and beta-model (not yet tested, no model added): the host,
    the admin's API client and the page; the server lives as long as the block."""
    async with ScriptedModelServer(models=("alpha-model", "beta-model")) as server:
        host = await skald.start()
        api = await host.admin()
        response = await api.post("/api/admin/models/providers", json={"name": "Scripted", "base_url": server.base_url, "api_key": "sk-test"})
        assert response.status_code == 201, response.text
        page = await browser_pages.new(host.url)
        await sign_in(page, "admin", ADMIN_PASSWORD)
        await page.goto("/#models")
        yield host, api, page

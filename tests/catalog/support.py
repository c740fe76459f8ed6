"""Throwaway plugins and small HTTP helpers for the catalog tests.

``Routed`` is the plain plugin most tests need: it says who it is and serves
``GET /ping`` (answering with the caller's member id), so "may this member use the
plugin" is asked of the real gate in front of ``/api/plugin/<id>/``. Tests that need a
particular behaviour subclass it next to the test.
"""

from __future__ import annotations

from typing import Any, Callable

from quart import Blueprint, g

from skald_hookspecs import hookimpl
from skald_hookspecs.types import ConfigField, PluginInfo, WebPage

SPEC = ">=1.0,<2"


class Routed:
    def __init__(
        self,
        plugin_id: str,
        *,
        config_schema: tuple[ConfigField, ...] = (),
        user_config_schema: tuple[ConfigField, ...] = (),
        manages_own_access: bool = False,
        grant_by_default: bool = True,
        pages: tuple[WebPage, ...] = (),
    ) -> None:
        self.info = PluginInfo(
            id=plugin_id,
            title=plugin_id.title(),
            spec=SPEC,
            config_schema=config_schema,
            user_config_schema=user_config_schema,
            manages_own_access=manages_own_access,
            grant_by_default=grant_by_default,
        )
        self.pages = pages

    @property
    def id(self) -> str:
        return self.info.id

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return self.info

    @hookimpl
    def register_routes(self, register: Callable[..., None]) -> None:
        blueprint = Blueprint(self.id, __name__)

        @blueprint.get("/ping")
        async def ping() -> dict[str, Any]:
            return {"plugin": self.id, "member_id": g.principal.member.id}

        self.add_routes(blueprint)
        register(blueprint)

    def add_routes(self, blueprint: Blueprint) -> None:
        """Subclasses add views here."""

    @hookimpl
    def register_web_pages(self, register: Callable[..., None]) -> None:
        for page in self.pages:
            register(page)


async def member_id(host: Any, username: str) -> str:
    member = await host.core.users.find(username)
    assert member is not None, username
    return member.id


async def grant_list(admin: Any, member: str) -> dict[str, dict[str, Any]]:
    """The member's page checklist: ``{plugin_id: {"granted": ..., "implicit": ...}}``."""
    response = await admin.get(f"/api/admin/members/{member}/plugins")
    assert response.status_code == 200, response.text
    return {entry["plugin_id"]: entry for entry in response.json()["plugins"]}


async def granted(admin: Any, member: str, plugin_id: str) -> bool:
    return (await grant_list(admin, member))[plugin_id]["granted"]


async def set_enabled(admin: Any, plugin_id: str, enabled: bool) -> None:
    response = await admin.put(f"/api/admin/plugins/{plugin_id}/enabled", json={"enabled": enabled})
    assert response.status_code == 200, response.text


async def roster(admin: Any, plugin_id: str) -> dict[str, bool]:
    """Who holds the plugin, as ``{username: implicit}``."""
    response = await admin.get(f"/api/admin/plugins/{plugin_id}/access")
    assert response.status_code == 200, response.text
    return {entry["username"]: entry["implicit"] for entry in response.json()["members"]}


async def catalog_entry(admin: Any, plugin_id: str) -> dict[str, Any]:
    response = await admin.get("/api/admin/plugins")
    assert response.status_code == 200, response.text
    return {entry["id"]: entry for entry in response.json()["plugins"]}[plugin_id]


async def registry_dump(host: Any) -> str:
    """The whole of system.db as SQL text, to show that a refused request wrote nothing."""
    await host.core.chat.request_log.flush()  # an earlier turn's metadata row, gathered for a moment
    return "\n".join(await host.core.registry.run(lambda conn: list(conn.iterdump())))

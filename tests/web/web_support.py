"""Shared pieces of the HTTP security tests: the route enumeration every sweep starts
from, a throwaway plugin that gives the plugin-catalog routes something real to act
on, and a WebSocket close helper."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from websockets.exceptions import ConnectionClosed

from skald_hookspecs import PUBLIC_ATTRIBUTE, hookimpl
from skald_hookspecs.types import ConfigField, ConfigSet, PluginInfo

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PARAM = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
POLICY_VIOLATION = 1008

PROBE = "probe"
PROBE_SET = "probe-set"


class Probe:
    """A plugin with an instance config (one secret field), a per-member config and a
    general settings set, so every catalog route has a valid request to answer."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(
            id=PROBE,
            title="Probe",
            spec=">=1.0,<2",
            config_schema=(ConfigField("greeting"), ConfigField("api_key", secret=True)),
            user_config_schema=(ConfigField("nickname"),),
        )

    @hookimpl
    def register_config_sets(self, register) -> None:
        register(ConfigSet(PROBE_SET, "Probe settings", (ConfigField("level", "integer"), ConfigField("token", secret=True))))


def fill(rule: str, **values: str) -> str:
    """A concrete path for a rule: ``/api/admin/members/<member_id>`` → ``…/<values['member_id']>``."""
    return PARAM.sub(lambda m: values[m.group(1)], rule)


def is_public(app: Any, endpoint: str) -> bool:
    return bool(getattr(app.view_functions[endpoint], PUBLIC_ATTRIBUTE, False))


def route_methods(app: Any) -> set[tuple[str, str]]:
    """Every (rule, method) the app answers, HEAD/OPTIONS aside; WebSocket rules as "WS"."""
    found = set()
    for rule in app.url_map.iter_rules():
        if getattr(rule, "websocket", False):
            found.add((rule.rule, "WS"))
        else:
            found |= {(rule.rule, method) for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
    return found


def endpoint_of(app: Any, rule_text: str, method: str) -> str:
    for rule in app.url_map.iter_rules():
        if rule.rule == rule_text and (method == "WS" or method in (rule.methods or set())):
            return rule.endpoint
    raise KeyError((rule_text, method))


async def registry_dump(host: Any) -> str:
    """The whole of system.db as SQL text, to show a request changed nothing."""
    return "\n".join(await host.core.registry.run(lambda conn: list(conn.iterdump())))


async def close_code(ws: Any, timeout: float = 1.0) -> int | None:
    """The close code the server sent within ``timeout`` seconds (frames before the
    close, such as events, are skipped); fails the test if the socket stays open."""

    async def drain() -> int | None:
        try:
            while True:
                await ws.recv()
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None

    try:
        return await asyncio.wait_for(drain(), timeout)
    except TimeoutError:
        raise AssertionError(f"the WebSocket is still open {timeout:.2f} s later") from None

"""Contract 1.11: ``HostApi.kv_update`` changes a value of the plugin's key-value store
atomically (a ``kv_get`` then a ``kv_set`` lost concurrent updates: twenty counting
route calls stored 3), and ``kv_keys`` lists the plugin's own keys, never another's."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

import pytest
from quart import Blueprint

from skald_hookspecs import PluginInfo, hookimpl
from skald_hookspecs.host_api import HostApi


def plus_one(count: int | None) -> int:
    return (count or 0) + 1


class Counter:
    """A plugin whose route counts with ``kv_update``, as the guide now says to."""

    def __init__(self, plugin_id: str) -> None:
        self.plugin_id = plugin_id
        self.host: Any = None

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.plugin_id, title=self.plugin_id.title(), spec=">=1.11,<2")

    @hookimpl
    async def startup(self, host: Any) -> None:
        self.host = host

    @hookimpl
    def register_routes(self, register: Callable[..., None]) -> None:
        blueprint = Blueprint(f"kv_{self.plugin_id}", __name__)

        @blueprint.post("/count")
        async def count() -> Any:
            return {"count": await self.host.kv_update("count", plus_one)}

        register(blueprint)


def test_the_contract_declares_kv_update_and_kv_keys_since_1_11():
    import skald_hookspecs

    assert tuple(map(int, skald_hookspecs.SPEC_VERSION.split("."))) >= (1, 11)  # and still there after
    for name in ("kv_update", "kv_keys"):
        method = getattr(HostApi, name)
        assert inspect.iscoroutinefunction(method), name
        assert "Since 1.11." in (method.__doc__ or ""), name
    assert list(inspect.signature(HostApi.kv_keys).parameters) == ["self", "prefix"]
    assert inspect.signature(HostApi.kv_keys).parameters["prefix"].default == ""


async def test_twenty_concurrent_route_calls_count_twenty(skald):
    plugin = Counter("counter")
    host = await skald.start(plugins=[plugin], enable=["counter"])
    admin = await host.admin()
    api = host.core.host_api("counter")
    await api.kv_set("count", 3)

    answers = await asyncio.gather(*(admin.post("/api/plugin/counter/count") for _ in range(20)))

    assert [a.status_code for a in answers] == [200] * 20
    assert sorted(a.json()["count"] for a in answers) == list(range(4, 24))  # each saw its own new value
    assert await api.kv_get("count") == 23


async def test_concurrent_updates_through_different_host_apis_of_one_plugin_are_not_lost(skald):
    """The lock is the host's, not one ``HostApi`` object's: a plugin's started HostApi
    and a fresh one (``register_routes(host)``, a test's) share it."""
    plugin = Counter("counter")
    host = await skald.start(plugins=[plugin], enable=["counter"])
    started, fresh = plugin.host, host.core.host_api("counter")
    assert started is not None

    def append_count(value: list[int] | None) -> list[int]:
        return [*(value or []), len(value or [])]

    await asyncio.gather(*(api.kv_update("log", append_count) for _ in range(10) for api in (started, fresh)))
    assert await fresh.kv_get("log") == list(range(20))


async def test_kv_update_removes_with_none_and_an_exception_leaves_the_value(skald):
    host = await skald.start(plugins=[Counter("counter")], enable=["counter"])
    api = host.core.host_api("counter")
    seen: list[Any] = []

    def first(value: Any) -> dict[str, int]:
        seen.append(value)
        return {"n": 1}

    assert await api.kv_update("state", first) == {"n": 1}
    assert seen == [None]  # a missing key reads as None
    assert await api.kv_get("state") == {"n": 1}

    class Refused(Exception):
        pass

    def refuse(value: Any) -> Any:
        raise Refused(f"not with {value!r}")

    with pytest.raises(Refused, match="not with"):
        await api.kv_update("state", refuse)
    assert await api.kv_get("state") == {"n": 1}  # unchanged

    with pytest.raises(TypeError):
        await api.kv_update("state", lambda value: {"n": object()})  # not JSON: nothing written
    assert await api.kv_get("state") == {"n": 1}

    async def not_plain(value: Any) -> int:
        return 2

    with pytest.raises(TypeError, match="plain function"):
        await api.kv_update("state", not_plain)
    assert await api.kv_get("state") == {"n": 1}

    # The lock is free again after each failure: the next update runs.
    assert await api.kv_update("state", lambda value: {"n": value["n"] + 1}) == {"n": 2}
    assert await api.kv_update("state", lambda value: None) is None
    assert await api.kv_get("state") is None
    assert "state" not in await api.kv_keys()  # removed, not a stored null

    from skald_host.core.plugins import host_api

    assert host_api._KV_LOCKS[host.core]._locks == {}  # no lock left behind, failed updates' included


async def test_kv_keys_lists_only_the_calling_plugins_keys_sorted_by_prefix(skald):
    host = await skald.start(plugins=[Counter("alpha"), Counter("beta")], enable=["alpha", "beta"])
    alpha, beta = host.core.host_api("alpha"), host.core.host_api("beta")
    for key in ("device:b", "device:a", "cursor", "device:ä"):
        await alpha.kv_set(key, 1)
    await beta.kv_set("device:z", 1)
    await beta.kv_update("beta-only", plus_one)

    assert await alpha.kv_keys() == ["cursor", "device:a", "device:b", "device:ä"]
    assert await alpha.kv_keys("device:") == ["device:a", "device:b", "device:ä"]
    assert await alpha.kv_keys("nothing") == []
    assert await beta.kv_keys() == ["beta-only", "device:z"]
    assert await beta.kv_keys("device:") == ["device:z"]

    await alpha.kv_set("device:a", None)
    assert await alpha.kv_keys("device:") == ["device:b", "device:ä"]

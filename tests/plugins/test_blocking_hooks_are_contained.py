"""A plugin whose plain ``def`` hook blocks (``time.sleep``) fails that plugin within the
hook timeout and nothing else: docs/plugins.md "What the host checks" promises every
other plugin and the host keep serving. A probe's ``register_tools`` sleeping 60 s held
the whole boot past Hypercorn's lifespan timeout and the server died; a ``startup``
sleeping 61 s did the same after "skald listening"."""

from __future__ import annotations

import time

from hypercorn.config import Config

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo

from .test_isolation import Bystander, info

SLEEP = 8.0  # far past the 0.5 s limit: the boot itself takes a second or two on a busy machine


class SleepyTools:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("sleepy-tools")

    @hookimpl
    def register_tools(self, register) -> None:
        time.sleep(SLEEP)


class SleepyStartup:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("sleepy-startup")

    @hookimpl
    def startup(self, host) -> None:
        time.sleep(1.5)


class SleepyShutdown:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("sleepy-shutdown")

    @hookimpl
    def shutdown(self, reason) -> None:
        time.sleep(SLEEP)


async def test_a_register_hook_that_sleeps_fails_its_plugin_within_the_hook_timeout(skald):
    started = time.monotonic()
    host = await skald.start(plugins=[SleepyTools(), Bystander()], settings=skald.settings(plugins={"hook_timeout_seconds": 0.5}))
    booted = time.monotonic() - started

    assert booted < SLEEP - 3, f"the boot waited {booted:.1f} s for a hook whose limit is 0.5 s"
    status = host.core.plugins.status("sleepy-tools")
    assert (status.state, status.error) == ("failed", "register_tools did not finish within 0.5 s")
    assert host.core.plugins.status("bystander").state in ("loaded", "disabled")  # loaded: a new plugin starts disabled
    assert (await host.client().get("/health")).status_code == 200


async def test_a_boot_longer_than_hypercorns_lifespan_limit_is_no_reason_to_die(skald, monkeypatch):
    """Hypercorn's lifespan limit (60 s; 1 s here) counted every plugin's hooks together:
    a contained failure must not reach it."""
    monkeypatch.setattr(Config, "startup_timeout", 1.0)
    settings = skald.settings(plugins={"hook_timeout_seconds": 0.5})
    host = await skald.start(plugins=[SleepyStartup(), Bystander()], settings=settings, enable=["sleepy-startup"])
    await host.stop()

    host = await skald.start(plugins=[SleepyStartup(), Bystander()], settings=settings)  # enabled: its startup runs at boot

    status = host.core.plugins.status("sleepy-startup")
    assert (status.healthy, status.started) == (False, False)
    assert status.error.startswith("startup: blocked the server for 1."), status.error
    assert (await host.client().get("/health")).status_code == 200


async def test_a_shutdown_that_sleeps_holds_the_stop_for_the_hook_timeout_at_most(skald):
    host = await skald.start(
        plugins=[SleepyShutdown()], settings=skald.settings(plugins={"hook_timeout_seconds": 0.5}), enable=["sleepy-shutdown"]
    )
    status = host.core.plugins.status("sleepy-shutdown")

    started = time.monotonic()
    await host.core.set_plugin_enabled("sleepy-shutdown", False)
    took = time.monotonic() - started

    assert took < SLEEP - 3, f"disabling waited {took:.1f} s for a shutdown whose limit is 0.5 s"
    assert status.started is False
    assert status.error.startswith("shutdown did not finish in time"), status.error

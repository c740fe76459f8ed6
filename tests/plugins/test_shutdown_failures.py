"""A ``shutdown`` that fails is reported as every other hook's failure after startup:
under an error id on the plugin's page (``failures``), its message withheld from the log
and the page, and the plugin marked unhealthy, since what it started may still run.
The host goes on stopping or disabling it; a later successful ``startup`` clears it."""

from __future__ import annotations

import asyncio
import logging

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo

from .test_isolation import Bystander, assert_host_and_bystanders_work, info

MEMBER_WORDS = "Aunt Ingrid's diagnosis 7f3c"
WITHHELD = "RuntimeError (message withheld: it may hold a member's data)"


class StopsBadly:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("stops-badly")

    @hookimpl
    async def startup(self, host) -> None:
        pass

    @hookimpl
    async def shutdown(self, reason: str) -> None:
        raise RuntimeError(f"could not flush the note about {MEMBER_WORDS}")


async def test_a_raising_shutdown_is_on_the_plugins_page_with_its_message_withheld(skald, caplog):
    caplog.set_level(logging.INFO)
    bystander = Bystander()
    host = await skald.start(plugins=[StopsBadly(), bystander], enable=["stops-badly"])
    admin = await host.admin()

    await host.core.set_plugin_enabled("stops-badly", False)

    detail = (await admin.get("/api/admin/plugins/stops-badly")).json()
    [failure] = detail["failures"]
    assert failure["where"] == "hook shutdown"
    assert failure["traceback"].endswith(WITHHELD) and "in shutdown" in failure["traceback"]
    assert (detail["state"], detail["healthy"]) == ("disabled", False)
    assert detail["error"] == f"shutdown raised RuntimeError (error id {failure['error_id']}); what it started may still run"
    assert MEMBER_WORDS not in caplog.text and MEMBER_WORDS not in str(detail)
    assert f"hook shutdown failed, error id {failure['error_id']}" in caplog.text

    await host.core.set_plugin_enabled("stops-badly", True)  # a startup that succeeds is healthy again
    status = host.core.plugins.status("stops-badly")
    assert (status.healthy, status.started, status.error) == (True, True, None)
    await assert_host_and_bystanders_work(host, bystander)


class StopsSlowly(StopsBadly):
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return info("stops-slowly")

    @hookimpl
    async def shutdown(self, reason: str) -> None:
        await asyncio.sleep(5)


async def test_a_shutdown_past_the_hook_timeout_is_recorded_and_the_plugin_stops(skald):
    host = await skald.start(
        plugins=[StopsSlowly()], settings=skald.settings(plugins={"hook_timeout_seconds": 0.3}), enable=["stops-slowly"],
    )

    await host.core.set_plugin_enabled("stops-slowly", False)

    status = host.core.plugins.status("stops-slowly")
    [failure] = status.failures
    assert failure["where"] == "hook shutdown"
    assert failure["traceback"].endswith("TimeoutError: shutdown did not finish within 0.3 s")
    assert (status.started, status.healthy) == (False, False)
    assert status.error == f"shutdown did not finish in time (error id {failure['error_id']}); what it started may still run"
    assert (await host.client().get("/health")).json() == {"status": "ok"}

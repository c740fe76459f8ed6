"""The instance status says which backend commands run in: the Docker and Bubblewrap
cards are both green when both are enabled, and only one is used (a newcomer probe could
not tell which without reading the server log)."""

from __future__ import annotations

import pytest

from skald_host.builtins.sandbox_bwrap import BubblewrapBackend


async def status_of(skald, backend: str) -> dict:
    host = await skald.start(settings=skald.settings(sandbox={"backend": backend}))
    response = await (await host.admin()).get("/api/admin/status")
    assert response.status_code == 200, response.text
    return response.json()


async def test_the_status_names_no_sandbox_and_why_when_it_is_switched_off(skald):
    status = await status_of(skald, "none")
    assert status["sandbox"] is None and "the sandbox is switched off" in status["sandbox_refusal"]


async def test_the_status_names_the_backend_commands_run_in(skald):
    missing = BubblewrapBackend().available()
    if missing is not None:
        pytest.skip(f"bubblewrap cannot run here: {missing}")
    status = await status_of(skald, "bubblewrap")
    assert (status["sandbox"], status["sandbox_refusal"]) == ("Bubblewrap sandbox", None)

"""``member_reset`` and ``member_deleted`` for a plugin that was not running when they
happened: told once at its next start, right after its ``startup``. A plugin that
failed to load (its import raised) at a reset was never told, once fixed: only loaded
plugins were noted. A reset missed for a member deleted since was still delivered, for
an account that no longer exists, and the deletion itself never was.

The plugin is a throwaway distribution found through the ``skald.plugins`` entry point
by a ``skald serve`` subprocess, as a real one is; it writes each hook call to a file."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from durability.helpers import ADMIN_PASSWORD, Servers, create_member, install_distribution, setup_admin

PLUGIN = "resetprobe"
PASSWORD = "bob's own password 42"
NEW_PASSWORD = "a password the admin chose 42"
SOURCE = '''
import json, os
from pathlib import Path

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo

if Path(os.environ["RESETPROBE_BROKEN"]).exists():
    raise RuntimeError("the probe's import is broken")


def _say(*event):
    with open(os.environ["RESETPROBE_LOG"], "a") as out:
        out.write(json.dumps(event) + "\\n")


@hookimpl
def plugin_info():
    return PluginInfo(id="resetprobe", title="Reset probe", spec=">=1.18,<2")


@hookimpl
def startup(host):
    _say("startup")


@hookimpl
def member_reset(member_id, host):
    _say("member_reset", member_id)


@hookimpl
def member_deleted(member_id, host):
    _say("member_deleted", member_id)
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("RESETPROBE_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("RESETPROBE_BROKEN", str(tmp_path / "broken"))
    install_distribution(site, PLUGIN, PLUGIN, textwrap.dedent(SOURCE))
    return site


def calls(tmp_path: Path) -> list[list[str]]:
    """The probe's hook calls so far, then forgotten."""
    path = tmp_path / "calls.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.unlink()
    return lines


async def state(admin) -> str:
    response = await admin.get(f"/api/admin/plugins/{PLUGIN}")
    assert response.status_code == 200, response.text
    return response.json()["state"]


async def test_a_plugin_failed_at_import_during_a_reset_is_told_once_it_loads(servers: Servers, site: Path, tmp_path: Path):
    server = await servers.start()
    admin = await setup_admin(server)
    assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})).status_code == 200
    bob = await create_member(admin, "bob", PASSWORD)
    await server.terminate()
    assert calls(tmp_path) == [["startup"]]

    (tmp_path / "broken").touch()
    server = await servers.start()
    admin = await server.login("admin", ADMIN_PASSWORD)
    assert await state(admin) == "failed"
    reset = await admin.post(f"/api/admin/members/{bob}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True})
    assert reset.status_code == 200 and reset.json()["data_lost"] is True, reset.text
    await server.terminate()

    (tmp_path / "broken").unlink()
    server = await servers.start()
    assert calls(tmp_path) == [["startup"], ["member_reset", bob]]
    await server.terminate()
    server = await servers.start()  # once: a restart does not tell it again
    assert calls(tmp_path) == [["startup"]]


async def test_a_plugin_off_at_a_deletion_is_told_the_deletion_not_the_reset_before(servers: Servers, site: Path, tmp_path: Path):
    server = await servers.start()
    admin = await setup_admin(server)
    assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})).status_code == 200
    carol = await create_member(admin, "carol", PASSWORD)
    await server.login("carol", PASSWORD)  # her file opens: the probe would link her
    assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": False})).status_code == 200
    reset = await admin.post(f"/api/admin/members/{carol}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True})
    assert reset.status_code == 200, reset.text
    assert (await admin.delete(f"/api/admin/members/{carol}")).status_code == 200
    assert calls(tmp_path) == [["startup"]]

    assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})).status_code == 200
    assert calls(tmp_path) == [["startup"], ["member_deleted", carol]]
    await server.terminate()
    server = await servers.start()  # once
    assert calls(tmp_path) == [["startup"]]

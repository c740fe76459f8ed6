"""An enabled plugin whose package is uninstalled (then a restart) vanished without a
word: gone from the catalog, no warning, no log line, while its row, settings and
grants stayed. Now it is listed as ``missing`` with why, the status warns, the start
logs it, and the admin can turn it off, which dismisses it; reinstalling brings it back
as the admin left it.

The plugin is a throwaway distribution found through the ``skald.plugins`` entry point,
as a real one is, by a ``skald serve`` subprocess; uninstalling removes its files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from durability.helpers import ADMIN_PASSWORD, KDF_ENV, Servers, install_distribution, setup_admin

PLUGIN = "goneprobe"
SOURCE = '''
from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo


@hookimpl
def plugin_info():
    return PluginInfo(id="goneprobe", title="Gone probe", spec=">=1.0,<2")
'''
REASON = "Installed no more: reinstall the package or disable it."


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return site


def install(site: Path) -> None:
    install_distribution(site, PLUGIN, PLUGIN, textwrap.dedent(SOURCE))


def uninstall(site: Path) -> None:
    shutil.rmtree(site / f"skald_{PLUGIN}")
    shutil.rmtree(site / f"skald_{PLUGIN}-1.0.dist-info")


async def listed(admin) -> dict:
    response = await admin.get("/api/admin/plugins")
    assert response.status_code == 200, response.text
    return {p["id"]: p for p in response.json()["plugins"]}


async def warnings(admin) -> list[dict]:
    response = await admin.get("/api/admin/status")
    assert response.status_code == 200, response.text
    return [w for w in response.json()["warnings"] if w["id"].startswith("plugin_")]


async def enabled_then_stopped(servers: Servers, site: Path) -> None:
    """The plugin installed and enabled by the admin, the server stopped again."""
    install(site)
    server = await servers.start()
    admin = await setup_admin(server)
    assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})).status_code == 200
    await server.terminate()


async def test_an_enabled_plugin_uninstalled_is_listed_missing_until_disabled(servers: Servers, site: Path):
    install(site)
    server = await servers.start()
    admin = await setup_admin(server)
    assert (await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})).status_code == 200
    assert (await listed(admin))[PLUGIN]["state"] == "loaded"
    await server.terminate()

    uninstall(site)
    server = await servers.start()
    admin = await server.login("admin", ADMIN_PASSWORD)
    gone = (await listed(admin))[PLUGIN]
    assert (gone["state"], gone["enabled"], gone["error"], gone["builtin"]) == ("missing", True, REASON, False)
    assert await warnings(admin) == [{
        "id": "plugin_missing", "values": {"plugin": PLUGIN},
        "text": f"The plugin {PLUGIN} is turned on but installed no more: reinstall its package, or turn it off in the catalog.",
    }]
    assert f"plugin {PLUGIN} is enabled but installed no more" in server.output
    detail = await admin.get(f"/api/admin/plugins/{PLUGIN}")
    assert detail.status_code == 200 and detail.json()["state"] == "missing", detail.text
    # Nothing is installed to turn on.
    refused = await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": True})
    assert (refused.status_code, refused.json()["code"], refused.json()["values"]) == (409, "plugin_missing", {"plugin": PLUGIN})

    # Off dismisses it: no longer listed, no warning.
    off = await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": False})
    assert off.status_code == 200, off.text
    assert (off.json()["state"], off.json()["enabled"]) == ("missing", False)
    assert PLUGIN not in await listed(admin)
    assert await warnings(admin) == []
    again = await admin.put(f"/api/admin/plugins/{PLUGIN}/enabled", json={"enabled": False})
    assert (again.status_code, again.json()["code"]) == (404, "plugin_unknown")
    await server.terminate()

    # Reinstalled, it is back as the admin left it: off.
    install(site)
    server = await servers.start()
    admin = await server.login("admin", ADMIN_PASSWORD)
    back = (await listed(admin))[PLUGIN]
    assert (back["state"], back["enabled"]) == ("disabled", False)
    assert "is enabled but installed no more" not in server.output


async def test_reinstalling_a_missing_plugin_brings_it_back_enabled(servers: Servers, site: Path):
    await enabled_then_stopped(servers, site)
    uninstall(site)
    server = await servers.start()
    admin = await server.login("admin", ADMIN_PASSWORD)
    assert (await listed(admin))[PLUGIN]["state"] == "missing"
    await server.terminate()

    install(site)
    server = await servers.start()
    admin = await server.login("admin", ADMIN_PASSWORD)
    back = (await listed(admin))[PLUGIN]
    assert (back["state"], back["enabled"]) == ("loaded", True)
    assert await warnings(admin) == []


def skald_plugins(data_dir: Path, work_dir: Path) -> tuple[dict[str, dict], str]:
    """``skald plugins --json`` and the table, with the server stopped, as an operator
    runs them (the environment's PYTHONPATH holds the site)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    env.update(KDF_ENV)
    run = [sys.executable, "-m", "skald_host", "plugins", "--data-dir", str(data_dir)]
    as_json = subprocess.run([*run, "--json"], env=env, cwd=work_dir, capture_output=True, text=True, timeout=120)
    assert as_json.returncode == 0, as_json.stderr
    table = subprocess.run(run, env=env, cwd=work_dir, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    return {row["id"]: row for row in json.loads(as_json.stdout)}, table.stdout


async def test_skald_plugins_lists_an_enabled_plugin_uninstalled_as_missing(servers: Servers, site: Path, tmp_path: Path):
    """The catalog listed it as missing; ``skald plugins`` left it out, as if it had
    never been there."""
    await enabled_then_stopped(servers, site)
    uninstall(site)

    rows, table = skald_plugins(servers.data_dir, tmp_path)
    assert (rows[PLUGIN]["state"], rows[PLUGIN]["error"], rows[PLUGIN]["builtin"]) == ("missing", REASON, False)
    assert set(rows[PLUGIN]) == set(rows["strings"])  # the shape of every other row
    line = next(line for line in table.splitlines() if line.split()[:1] == [PLUGIN])
    assert line.split()[1] == "missing"
    assert f"    error: {REASON}" in table.splitlines()


NEAR_MISS_REASON = (
    f"Not found: skald-{PLUGIN} declares it under the entry point group skald.plugin, which Skald does not read."
    " Change the group to skald.plugins in its pyproject.toml, reinstall it and restart Skald, or disable it."
)


async def test_an_entry_point_in_a_near_miss_group_is_named_where_the_plugin_is_missing(servers: Servers, site: Path, tmp_path: Path):
    """Reinstalled under ``skald.plugin`` (no s), the plugin was silently not found: the
    admin read "reinstall the package", which they just had. Discovery warns, naming the
    distribution and the group, and the missing plugin's reason says it."""
    await enabled_then_stopped(servers, site)
    entry_points = site / f"skald_{PLUGIN}-1.0.dist-info" / "entry_points.txt"
    entry_points.write_text(entry_points.read_text().replace("[skald.plugins]", "[skald.plugin]"))

    server = await servers.start()
    admin = await server.login("admin", ADMIN_PASSWORD)
    gone = (await listed(admin))[PLUGIN]
    assert (gone["state"], gone["error"]) == ("missing", NEAR_MISS_REASON)
    assert (
        f"the distribution skald-{PLUGIN} declares the entry point {PLUGIN} = skald_{PLUGIN} in the group 'skald.plugin',"
        " which Skald does not read: plugins are found in the group 'skald.plugins'"
    ) in server.output
    assert f"plugin {PLUGIN} is enabled but not found: skald-{PLUGIN} declares it in the entry point group 'skald.plugin'" in server.output
    await server.terminate()

    rows, _ = skald_plugins(servers.data_dir, tmp_path)
    assert (rows[PLUGIN]["state"], rows[PLUGIN]["error"]) == ("missing", NEAR_MISS_REASON)

"""Check D1 with real distributions: pip installs them, the host finds them through the
``skald.plugins`` entry-point group, and ``skald plugins`` lists every one with its
distribution name, version and state.

Three distributions are built once per module into a temporary ``--target`` directory
that only the subprocesses see (``PYTHONPATH``), so nothing leaks into the venv:

- ``skald-testplugin-ok``: a well-formed plugin; its ``startup`` would write a marker.
- ``skald-testplugin-broken``: raises at import.
- ``skald-testplugin-blocked``: writes a marker file the moment it is imported.

The venv's setuptools (65) cannot build a wheel without the ``wheel`` package, which
is no dependency of the project, so each distribution carries a tiny in-tree PEP 517
backend (``backend-path``): pip still builds and installs a real wheel with real
metadata and entry points.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

KDF_FLOOR_ENV = {"SKALD_KDF_MEMORY_KIB": "19456", "SKALD_KDF_TIME_COST": "2", "SKALD_KDF_PARALLELISM": "1"}

BACKEND = '''
"""A minimal PEP 517 backend: one pure-Python wheel from [project] in pyproject.toml."""
import base64, hashlib, tomllib, zipfile
from pathlib import Path


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files = {str(p): p.read_bytes() for p in sorted(Path(".").glob("*/**/*.py")) if p.parts[0] != "__pycache__"}
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: skald-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    groups = project.get("entry-points", {})
    files[f"{info}/entry_points.txt"] = "".join(
        f"[{group}]\\n" + "".join(f"{k} = {v}\\n" for k, v in eps.items()) for group, eps in groups.items()
    ).encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\\n".join(record) + "\\n").encode()
    wheel_name = f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel_name, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return wheel_name
'''


def write_distribution(root: Path, dist: str, package: str, ep_name: str, module_source: str) -> Path:
    source = root / dist
    (source / package).mkdir(parents=True)
    (source / package / "__init__.py").write_text(textwrap.dedent(module_source))
    (source / "skald_test_backend.py").write_text(BACKEND)
    (source / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = []
            build-backend = "skald_test_backend"
            backend-path = ["."]

            [project]
            name = "{dist}"
            version = "1.2.3"

            [project.entry-points."skald.plugins"]
            {ep_name} = "{package}"
            """
        )
    )
    return source


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("distributions")
    markers = root / "markers"
    markers.mkdir()
    ok = write_distribution(
        root,
        "skald-testplugin-ok",
        "skald_testplugin_ok",
        "testok",
        f"""\
        from pathlib import Path

        from skald_hookspecs import hookimpl
        from skald_hookspecs.types import PluginInfo


        @hookimpl
        def plugin_info():
            return PluginInfo(id="testok", title="Test OK", spec=">=1.0,<2")


        @hookimpl
        def startup(host):
            Path({str(markers / "ok-started")!r}).write_text("started")
        """,
    )
    broken = write_distribution(
        root,
        "skald-testplugin-broken",
        "skald_testplugin_broken",
        "testbroken",
        """\
        raise RuntimeError("skald_testplugin_broken cannot find its widget library")
        """,
    )
    blocked = write_distribution(
        root,
        "skald-testplugin-blocked",
        "skald_testplugin_blocked",
        "testblocked",
        f"""\
        from pathlib import Path

        Path({str(markers / "blocked-imported")!r}).write_text("imported")

        from skald_hookspecs import hookimpl
        from skald_hookspecs.types import PluginInfo


        @hookimpl
        def plugin_info():
            return PluginInfo(id="testblocked", title="Test blocked", spec=">=1.0,<2")
        """,
    )
    site = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--no-index", "--target", str(site), str(ok), str(broken), str(blocked)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return {"site": site, "markers": markers, "root": root}


def run_plugins(installed: dict[str, Path], data_dir: str, **env: str) -> list[dict[str, Any]]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    search_path = [str(installed["site"]), *filter(None, [environ.get("PYTHONPATH")])]
    environ.update(KDF_FLOOR_ENV, PYTHONPATH=os.pathsep.join(search_path), **env)
    result = subprocess.run(
        [sys.executable, "-m", "skald_host", "plugins", "--data-dir", str(installed["root"] / data_dir), "--json"],
        env=environ,
        cwd=installed["root"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def by_distribution(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["distribution"]: r for r in rows if r["distribution"]}


@pytest.fixture(scope="module")
def default_listing(installed) -> list[dict[str, Any]]:
    return run_plugins(installed, "data-default")


def test_installed_plugin_is_listed_with_its_distribution_version_and_disabled_state(installed, default_listing):
    row = by_distribution(default_listing)["skald-testplugin-ok"]
    assert row["id"] == "testok"
    assert row["version"] == "1.2.3"
    assert row["state"] == "disabled"
    assert row["builtin"] is False
    assert row["error"] is None
    assert set(row["hooks"]) == {"plugin_info", "startup"}
    assert not (installed["markers"] / "ok-started").exists()  # loaded, but never started


def test_plugin_raising_at_import_is_failed_with_its_error_and_the_others_are_listed(default_listing):
    rows = by_distribution(default_listing)
    broken = rows["skald-testplugin-broken"]
    assert broken["state"] == "failed"
    assert broken["id"] == "testbroken"
    assert broken["version"] == "1.2.3"
    assert broken["error"].startswith(
        'import of entry point testbroken = "skald_testplugin_broken"'
        ' ([project.entry-points."skald.plugins"] of skald-testplugin-broken):'
        " RuntimeError: skald_testplugin_broken cannot find its widget library (at "
    )
    assert broken["error"].endswith("skald_testplugin_broken/__init__.py:1)"), broken["error"]  # where, in the plugin's code
    assert "RuntimeError" in broken["traceback"]
    assert rows["skald-testplugin-ok"]["state"] == "disabled"
    strings = [r for r in default_listing if r["id"] == "strings"]
    assert [(r["state"], r["builtin"]) for r in strings] == [("loaded", True)]


def test_blocked_distribution_is_never_imported(installed):
    marker = installed["markers"] / "blocked-imported"
    marker.unlink(missing_ok=True)

    rows = by_distribution(run_plugins(installed, "data-blocked", SKALD_BLOCK_PLUGINS="skald-testplugin-blocked"))

    blocked = rows["skald-testplugin-blocked"]
    assert blocked["state"] == "blocked"
    assert blocked["error"] == "on the block list"
    assert blocked["version"] == "1.2.3"
    assert not marker.exists()
    assert rows["skald-testplugin-ok"]["state"] == "disabled"


def test_unblocked_marker_distribution_is_imported(installed):
    """The control for the test above: without the block list the marker appears."""
    marker = installed["markers"] / "blocked-imported"
    marker.unlink(missing_ok=True)

    rows = by_distribution(run_plugins(installed, "data-unblocked"))

    assert rows["skald-testplugin-blocked"]["state"] == "disabled"
    assert marker.exists()


def test_safe_mode_blocks_every_external_plugin_and_loads_the_builtins(installed):
    marker = installed["markers"] / "blocked-imported"
    marker.unlink(missing_ok=True)

    rows = run_plugins(installed, "data-safe", SKALD_SAFE_MODE="1")

    external = by_distribution(rows)
    for dist in ("skald-testplugin-ok", "skald-testplugin-broken", "skald-testplugin-blocked"):
        assert external[dist]["state"] == "blocked", external[dist]
        assert "safe mode" in external[dist]["error"]
    assert not marker.exists()
    assert [r["state"] for r in rows if r["builtin"]] and all(r["state"] == "loaded" for r in rows if r["builtin"])

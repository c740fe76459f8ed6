"""Issue 18's check: a fresh plugin written against the docs alone installs into a clean
venv holding ``skald-host`` and ``skald-hookspecs`` built from this tree, passes its
tests, appears in the catalog and runs its tool through the agent.

The plugin is the one of docs/plugins.md "Write a tool plugin", copied out of the page
(every ``<!-- tutorial-file: … -->`` block), so the page cannot drift from a plugin that
works. Its tests are the page's: the agent rolls dice through the scripted model, a
``ToolError`` reaches the model in the plugin's words, and the installed distribution
is in the catalog through its entry point.

Slow (wheels, a fresh venv, the host's dependencies from the package index or pip's
cache: minutes), so it runs when ``SKALD_SLOW_TESTS=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from .test_docs import tutorial_files

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("SKALD_SLOW_TESTS") != "1", reason="slow (builds wheels and a fresh venv): SKALD_SLOW_TESTS=1 runs it"),
]


def run(*args: str | Path, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKALD_", "VIRTUAL_ENV", "PYTHONPATH"))}
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def test_the_tutorial_plugin_installs_into_a_clean_venv_and_passes_its_tests(tmp_path):
    plugin = tmp_path / "skald-dice"
    for name, text in tutorial_files().items():
        (plugin / name).parent.mkdir(parents=True, exist_ok=True)
        (plugin / name).write_text(text)

    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", wheels, ROOT / "skald_hookspecs", ROOT, plugin, cwd=tmp_path)
    built = {p.name.split("-")[0]: p for p in wheels.glob("*.whl")}
    assert set(built) == {"skald_hookspecs", "skald_host", "skald_dice"}, built

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, clear=True)
    python = env_dir / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", built["skald_hookspecs"], f"{built['skald_host']}[test]", built["skald_dice"], cwd=tmp_path)

    listed = run(python, "-m", "pip", "list", "--format=freeze", cwd=tmp_path).stdout.lower()
    contract = tomllib.loads((ROOT / "skald_hookspecs" / "pyproject.toml").read_text())["project"]["version"]
    assert f"skald-hookspecs=={contract}" in listed and "skald-host==" in listed and "skald-dice==0.1.0" in listed
    assert "\nskald==" not in "\n" + listed  # never PyPI's unrelated `skald`
    assert run(python, "-m", "pip", "check", cwd=tmp_path).returncode == 0

    # The plugin's own tests, against the installed wheels (not this checkout).
    tests = run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=plugin)
    assert "3 passed" in tests.stdout, tests.stdout
    where = run(python, "-c", "import skald_host, skald_dice; print(skald_host.__file__); print(skald_dice.__file__)", cwd=tmp_path).stdout
    assert str(ROOT) not in where and str(plugin) not in where  # the installed copies ran

    # The command keeps its name, and sees the installed plugin.
    table = run(env_dir / "bin" / "skald", "plugins", "--data-dir", tmp_path / "data", cwd=tmp_path).stdout
    assert any(line.split()[:2] == ["dice", "disabled"] and "skald-dice" in line for line in table.splitlines()), table

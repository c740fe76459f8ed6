"""The distributions in the tree: the host is ``skald-host``, the contract ``skald-hookspecs``.

On PyPI the bare name ``skald`` belongs to an unrelated project, so no distribution here
may depend on it (a plugin that did would install the wrong package anywhere but our own
venv). And a venv made before the split, which still holds the old ``skald`` distribution,
is cleaned by the Makefile before it installs the new ones.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def pyprojects() -> list[Path]:
    skip = {".venv", "node_modules", "build", ".git"}
    return sorted(p for p in ROOT.rglob("pyproject.toml") if not skip & set(p.relative_to(ROOT).parts))


def requirements(project: dict) -> list[str]:
    found = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        found.extend(extra)
    return found


def bare_skald_requirements(path: Path) -> list[str]:
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    return [r for r in requirements(project) if canonicalize_name(Requirement(r).name) == "skald"]


def test_no_distribution_in_the_tree_depends_on_the_bare_skald():
    files = pyprojects()
    assert ROOT / "pyproject.toml" in files and ROOT / "skald_hookspecs" / "pyproject.toml" in files
    assert ROOT / "plugins" / "telegram" / "pyproject.toml" in files
    offenders = {str(p.relative_to(ROOT)): bare_skald_requirements(p) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_catches_a_bare_skald_requirement(tmp_path):
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[project]\nname = "x"\ndependencies = ["Skald>=0.1"]\n[project.optional-dependencies]\ntest = ["skald[test]"]\n')
    assert bare_skald_requirements(bad) == ["Skald>=0.1", "skald[test]"]


def test_the_names_the_host_and_plugins_use():
    host = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    contract = tomllib.loads((ROOT / "skald_hookspecs" / "pyproject.toml").read_text())["project"]
    assert host["name"] == "skald-host"
    assert host["scripts"]["skald"] == "skald_host.cli:main"  # the command keeps its name
    assert contract["name"] == "skald-hookspecs"
    assert [Requirement(r).name for r in contract["dependencies"]] == ["pluggy"]
    assert "skald-hookspecs" in [Requirement(r).name for r in host["dependencies"]]
    # The contract's version follows SPEC_VERSION (major.minor).
    import skald_hookspecs

    assert contract["version"].startswith(skald_hookspecs.SPEC_VERSION + ".")
    assert (ROOT / "skald_hookspecs" / "CHANGELOG.md").read_text().count(f"## {contract['version']}") == 1
    for plugin in [ROOT / "plugins" / "telegram", ROOT / "examples" / "skald-hello"]:
        project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]
        assert "skald-hookspecs" in [Requirement(r).name for r in project["dependencies"]], plugin
        assert [Requirement(r).name for r in project["optional-dependencies"]["test"]] == ["skald-host"], plugin


def fake_installed_skald(site_packages: Path) -> Path:
    """What an earlier ``make install`` left: a ``skald`` distribution pip can uninstall."""
    info = site_packages / "skald-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: skald\nVersion: 0.1.0\n")
    (info / "INSTALLER").write_text("pip\n")
    (site_packages / "__editable__.skald-0.1.0.pth").write_text("")
    (info / "RECORD").write_text(
        "skald-0.1.0.dist-info/METADATA,,\nskald-0.1.0.dist-info/INSTALLER,,\n"
        "skald-0.1.0.dist-info/RECORD,,\n__editable__.skald-0.1.0.pth,,\n"
    )
    return info


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_makefile_removes_the_old_skald_distribution_from_an_existing_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    )
    info = fake_installed_skald(site)

    def uninstall_old() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["make", "-s", "-C", str(ROOT), "uninstall-old", f"VENV={venv}"], capture_output=True, text=True, timeout=300
        )

    first = uninstall_old()
    assert first.returncode == 0, first.stderr
    assert "Removing the old 'skald' distribution" in first.stdout
    assert not info.exists() and not (site / "__editable__.skald-0.1.0.pth").exists()
    shown = subprocess.run([python, "-m", "pip", "show", "skald"], capture_output=True, text=True)
    assert shown.returncode != 0

    again = uninstall_old()  # nothing left to remove: silent, and still a success
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == ""


def test_make_install_removes_the_old_distribution_before_installing():
    makefile = (ROOT / "Makefile").read_text()
    for stamp in ("$(VENV)/.installed:", "$(VENV)/.installed-test:"):  # what install and install-test make
        line = next(l for l in makefile.splitlines() if l.startswith(stamp))
        assert "uninstall-old" in line, line
    assert "-e ./skald_hookspecs" in makefile


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_installs_again_only_when_a_pyproject_changed(tmp_path):
    """A second ``make run`` starts the server without a pip run (~20-35 s before);
    a pyproject.toml newer than the last install (a new dependency, a new entry
    point) installs again."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    stamp = venv / ".installed"
    stamp.write_text("")

    def planned() -> str:
        done = subprocess.run(["make", "-n", "-C", str(ROOT), "install", f"VENV={venv}"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "pip install" not in planned()
    os.utime(stamp, (0, 0))  # older than every pyproject.toml
    assert "pip install --quiet --quiet -e ./skald_hookspecs -e ." in planned()

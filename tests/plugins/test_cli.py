"""``skald plugins`` and ``skald setup``, run as an operator runs them: a subprocess."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

KDF_FLOOR_ENV = {"SKALD_KDF_MEMORY_KIB": "19456", "SKALD_KDF_TIME_COST": "2", "SKALD_KDF_PARALLELISM": "1"}


def skald(*args: str, cwd: Path, stdin: str | None = None, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``site``: a directory of installed plugins (``installed``) the process also sees."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}
    env.update(KDF_FLOOR_ENV)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "skald_host", *args],
        input=stdin,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_plugins_command_prints_a_table_with_the_builtin_strings_loaded(tmp_path):
    result = skald("plugins", "--data-dir", str(tmp_path / "data"), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["ID", "STATE", "VERSION", "DISTRIBUTION", "SPEC", "HOOKS"]  # an error goes under its row
    strings = [row.split() for row in rows if row.split()[:1] == ["strings"]]
    assert len(strings) == 1
    assert strings[0][1] == "loaded"
    assert strings[0][3] == "skald-host"
    assert "register_i18n" in strings[0][5]


def test_setup_check_exits_1_before_setup_and_0_after(tmp_path):
    data = str(tmp_path / "data")

    before = skald("setup", "--data-dir", data, "--check", cwd=tmp_path)
    assert before.returncode == 1, before.stderr
    where = (tmp_path / "data").resolve()
    assert before.stdout == (
        f"Skald is not set up: the data dir {where} does not exist yet."
        f" Run 'skald setup --data-dir {where}' to create the first admin.\n"
    )

    created = skald(
        "setup", "--data-dir", data, "--username", "admin", "--password-stdin",
        cwd=tmp_path, stdin="a long enough admin password\n",
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout == (
        f"created admin 'admin' in {where}. Start the server on it with 'skald serve' (pip install)"
        " or 'make run' (source checkout) and sign in.\n"
    )

    after = skald("setup", "--data-dir", data, "--check", cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert after.stdout == f"Skald is set up in {where}: its admin can sign in.\n"


def test_setup_on_another_data_dir_names_it_in_the_commands_it_suggests(tmp_path):
    """Taken literally, 'skald serve' and 'make run' start on ./data: after a setup on
    another dir the suggested commands must carry it (newcomer walk)."""
    elsewhere = tmp_path / "elsewhere"
    created = skald(
        "setup", "--data-dir", str(elsewhere), "--username", "xa", "--password-stdin",
        cwd=tmp_path, stdin="a long enough admin password\n",
    )
    assert created.returncode == 0, created.stderr
    where = elsewhere.resolve()
    assert created.stdout == (
        f"created admin 'xa' in {where}. Start the server on it with 'skald serve --data-dir {where}' (pip install)"
        f" or 'SKALD_DATA_DIR={where} make run' (source checkout) and sign in.\n"
    )
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text(encoding="utf-8")
    assert "SKALD_DATA_DIR := $(or $(SKALD_DATA_DIR),./data)" in makefile and "export SKALD_DATA_DIR" in makefile  # what 'make run' reads


def test_setup_check_on_a_data_dir_a_newer_skald_wrote_says_so_not_that_the_admin_can_sign_in(tmp_path):
    """An earlier Skald's 'setup --check' said "its admin can sign in" about a data dir
    its own 'serve' then refused as too new (upgrade probe)."""
    import sqlite3

    from skald_host.core.schema.registry import REGISTRY_MIGRATIONS

    data = str(tmp_path / "data")
    created = skald("setup", "--data-dir", data, "--username", "admin", "--password-stdin", cwd=tmp_path, stdin="a long enough admin password\n")
    assert created.returncode == 0, created.stderr
    newer = REGISTRY_MIGRATIONS.latest + 1
    with sqlite3.connect(tmp_path / "data" / "database" / "system.db") as conn:  # what a newer Skald's migration leaves
        conn.execute(f"PRAGMA user_version = {newer}")
    result = skald("setup", "--data-dir", data, "--check", cwd=tmp_path)
    assert result.returncode == 1
    assert f"but by a newer Skald: its registry is at schema version {newer}, and this Skald knows versions up to {REGISTRY_MIGRATIONS.latest}" in result.stdout
    assert "can sign in" not in result.stdout


def test_serve_on_a_data_dir_a_newer_skald_wrote_refuses_without_saying_the_core_stopped(tmp_path):
    """The refusal is the last word: "skald core stopped" before it read as if the
    server had run and stopped (operator probe)."""
    import sqlite3

    from skald_host.core.schema.registry import REGISTRY_MIGRATIONS

    data = str(tmp_path / "data")
    created = skald("setup", "--data-dir", data, "--username", "admin", "--password-stdin", cwd=tmp_path, stdin="a long enough admin password\n")
    assert created.returncode == 0, created.stderr
    with sqlite3.connect(tmp_path / "data" / "database" / "system.db") as conn:
        conn.execute(f"PRAGMA user_version = {REGISTRY_MIGRATIONS.latest + 1}")
    with socket.socket() as probe:  # a free port, should the refusal come after binding
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = skald("serve", "--data-dir", data, "--port", str(port), cwd=tmp_path)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "written by a newer Skald" in output
    assert "skald core stopped" not in output and "skald core started" not in output


def test_setup_check_names_a_data_dir_that_exists_but_holds_nobody(tmp_path):
    (tmp_path / "data").mkdir()
    result = skald("setup", "--check", cwd=tmp_path)  # the default data dir: ./data
    assert result.returncode == 1
    assert result.stdout.startswith(f"Skald is not set up in {(tmp_path / 'data').resolve()}: nobody has an account yet.")


def test_setup_refuses_a_seven_character_password_with_exit_2(tmp_path):
    data = str(tmp_path / "data")

    result = skald("setup", "--data-dir", data, "--username", "admin", "--password-stdin", cwd=tmp_path, stdin="abcdefg\n")

    assert result.returncode == 2
    assert "error: password must be at least 8 characters" in result.stderr.splitlines()
    assert skald("setup", "--data-dir", data, "--check", cwd=tmp_path).returncode == 1  # nobody was created


def test_setup_offers_the_languages_the_locale_files_have(tmp_path):
    data = str(tmp_path / "data")
    args = ("setup", "--data-dir", data, "--username", "admin", "--password-stdin")

    refused = skald(*args, "--locale", "xx", cwd=tmp_path, stdin="a long enough admin password\n")
    assert refused.returncode == 2
    assert "error: locale must be one of de, en" in refused.stderr.splitlines()
    created = skald(*args, "--locale", "DE", cwd=tmp_path, stdin="a long enough admin password\n")  # meant as "de"
    assert created.returncode == 0, created.stderr
    with sqlite3.connect(tmp_path / "data" / "database" / "system.db") as conn:
        assert conn.execute("SELECT value FROM config WHERE key = 'default_locale'").fetchone()[0] == '"de"'


# -- the table says what the server would -----------------------------------------------------

PROBLEM_PLUGINS = {
    # register_routes runs as the web app is built: the server fails this plugin there.
    "returner": '''
        from quart import Blueprint
        from skald_hookspecs import hookimpl
        from skald_hookspecs.types import PluginInfo

        @hookimpl
        def plugin_info():
            return PluginInfo(id="returner", title="Returner", spec=">=1,<2")

        @hookimpl
        def register_routes(register):
            return Blueprint("returner", __name__)
    ''',
    # An argument the hook does not pass: said in the host's words, on one line.
    "badsig": '''
        from skald_hookspecs import hookimpl
        from skald_hookspecs.types import PluginInfo

        @hookimpl
        def plugin_info():
            return PluginInfo(id="badsig", title="Bad signature", spec=">=1,<2")

        @hookimpl
        def startup(hostapi):
            pass
    ''',
    # pluggy's refusal, several lines long: its first line says only which hook.
    "unwrapped": '''
        from skald_hookspecs import hookimpl
        from skald_hookspecs.types import PluginInfo

        @hookimpl
        def plugin_info():
            return PluginInfo(id="unwrapped", title="Unwrapped", spec=">=1,<2")

        @hookimpl(wrapper=True)
        def register_tools(register):
            return None
    ''',
}


def installed(root: Path, modules: dict[str, str], entry_points: dict[str, str] | None = None) -> Path:
    """Each module an installed ``skald.plugins`` entry point (one dist-info on a path);
    ``entry_points``: name = value lines of their own, for a module that is not there."""
    site = root / "site"
    info = site / "skald_problem_plugins-0.1.dist-info"
    info.mkdir(parents=True)
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: skald-problem-plugins\nVersion: 0.1\n")
    declared = {**{name: name for name in modules}, **(entry_points or {})}
    (info / "entry_points.txt").write_text("[skald.plugins]\n" + "".join(f"{name} = {value}\n" for name, value in declared.items()))
    return site


def test_plugins_command_fails_a_plugin_whose_routes_the_server_would_refuse(tmp_path):
    site = installed(tmp_path, {"returner": PROBLEM_PLUGINS["returner"]})

    result = skald("plugins", "--json", "--data-dir", str(tmp_path / "data"), cwd=tmp_path, site=site)

    assert result.returncode == 0, result.stderr
    returner = next(row for row in json.loads(result.stdout) if row["id"] == "returner")
    assert (returner["state"], returner["error"]) == (
        "failed", "register_routes returned a Blueprint: call register(blueprint) instead; the return value is ignored",
    )


def errors_under_rows(stdout: str) -> dict[str, str]:
    """Each plugin's error, from the indented line under its row."""
    lines = stdout.splitlines()
    return {
        lines[number - 1].split()[0]: line.strip().removeprefix("error: ")
        for number, line in enumerate(lines) if line.startswith("    error: ")
    }


def test_plugins_table_shows_each_error_whole_on_a_line_of_its_own(tmp_path):
    """The hooks column is wide: an error at the end of the row went off the screen."""
    site = installed(tmp_path, {"badsig": PROBLEM_PLUGINS["badsig"], "unwrapped": PROBLEM_PLUGINS["unwrapped"]})

    result = skald("plugins", "--data-dir", str(tmp_path / "data"), cwd=tmp_path, site=site)

    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:] if line[:1].strip()}
    assert rows["badsig"][1] == rows["unwrapped"][1] == "failed"
    errors = errors_under_rows(result.stdout)
    assert errors["badsig"] == "startup(hostapi): the hook takes (host); 'hostapi' is not one of its arguments"
    assert errors["unwrapped"] == (
        "Plugin 'unwrapped' for hook 'register_tools' hookimpl definition: register_tools(register)"
        " Declared as wrapper=True or hookwrapper=True but function is not a generator function"
    )
    assert "strings" not in errors


def test_plugins_table_says_its_plugins_were_not_started(tmp_path):
    result = skald("plugins", "--data-dir", str(tmp_path / "data"), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "Plugins were loaded here, not started: a plugin listed as loaded may still fail in its startup;"
        " the server's catalog page and log say so."
    )


def test_an_entry_point_naming_a_missing_module_says_which_and_no_place_in_the_standard_library(tmp_path):
    site = installed(tmp_path, {}, entry_points={"p3bad": "p3bad.does_not_exist"})

    result = skald("plugins", "--json", "--data-dir", str(tmp_path / "data"), cwd=tmp_path, site=site)

    assert result.returncode == 0, result.stderr
    p3bad = next(row for row in json.loads(result.stdout) if row["id"] == "p3bad")
    assert (p3bad["state"], p3bad["error"]) == (
        "failed",
        'import of entry point p3bad = "p3bad.does_not_exist" ([project.entry-points."skald.plugins"] of skald-problem-plugins):'
        " ModuleNotFoundError: No module named 'p3bad'",
    )

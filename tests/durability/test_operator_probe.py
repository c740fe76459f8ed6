"""An operator probe of ``skald serve`` and its tools (each case reproduced as
``python -m skald_host ...``): a log folder outside the data dir made private (/tmp
locked at every start), SIGHUP ending the server without a graceful stop, a start
refused by the disk or a foreign file as three tracebacks, a data dir that is a file,
a failed ``skald backup`` missing from the server's log, a misspelt ``plugins.block``
blocking nothing silently, and a host that is no address blamed on the port."""

from __future__ import annotations

import json
import logging
import signal
import stat
import subprocess
import sys

import pytest

from skald_host.core.host import StartupError
from skald_host.server import check_address, hypercorn_config
from skald_host.settings import load_settings

from .helpers import free_port, refused_serve, server_env


@pytest.fixture
def root_logging():
    """``configure_logging`` replaces the root logger's handlers and sets the levels of
    the root and the private libraries' loggers: put them all back (left at WARNING,
    httpx's lines were missing from later tests in the same process)."""
    from skald_host.logs import PRIVATE_LIBRARY_LOGGERS

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in PRIVATE_LIBRARY_LOGGERS}
    yield
    for name, saved in levels.items():
        logging.getLogger(name).setLevel(saved)
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if handler not in handlers:
            handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_a_log_folder_outside_the_data_dir_keeps_its_mode(tmp_path, root_logging):
    """``log.file: /tmp/skald.log`` made /tmp 0700 at every start. A folder Skald makes
    is private; one that exists outside the data dir is left as it is; the data dir's
    own ``logs/`` stays private as before."""
    from skald_host.logs import configure_logging

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    configure_logging(load_settings(data_dir=tmp_path / "data", environ={}, overrides={"log": {"file": shared / "skald.log"}}))
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert stat.S_IMODE((shared / "skald.log").stat().st_mode) == 0o600

    made = tmp_path / "var" / "skald-logs"
    configure_logging(load_settings(data_dir=tmp_path / "data", environ={}, overrides={"log": {"file": made / "skald.log"}}))
    assert stat.S_IMODE(made.stat().st_mode) == 0o700

    inside = tmp_path / "data" / "logs"
    inside.mkdir(parents=True)
    inside.chmod(0o755)
    configure_logging(load_settings(data_dir=tmp_path / "data", environ={}))
    assert stat.S_IMODE(inside.stat().st_mode) == 0o700


async def test_sighup_stops_the_server_gracefully(servers):
    server = await servers.start()
    server.proc.send_signal(signal.SIGHUP)
    assert await server.wait_exit() == 0, server.output[-4000:]
    lines = (servers.data_dir / "logs" / "skald.log").read_text().splitlines()
    assert any(line.endswith("skald core stopped") for line in lines), lines[-20:]
    assert any(line.endswith("skald_host.server: skald stopped") for line in lines), lines[-20:]


def test_an_os_error_while_the_core_starts_is_one_line_naming_the_path(tmp_path):
    """``database/`` that cannot be used (here a file; another user's folder alike)
    printed three stacked tracebacks ending in LifespanFailureError."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "database").write_text("not a folder")
    line, output = refused_serve(data, free_port())
    assert line.startswith(f"cannot start: cannot use {data / 'database'}: "), output
    assert "LifespanFailureError" not in output


def test_a_data_dir_that_is_a_file_is_one_line(tmp_path):
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("")
    env = {**server_env(tmp_path), "SKALD_LOG_FILE": "null"}
    done = subprocess.run(
        [sys.executable, "-m", "skald_host", "backup", "--data-dir", str(a_file)], env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        f"configuration error: the data dir {a_file} is a file, not a folder; choose a folder with --data-dir or SKALD_DATA_DIR"
    )


async def test_a_failed_backup_asked_through_the_control_socket_is_logged(skald, caplog):
    from skald_host.control import _handle

    host = await skald.start()
    await host.admin()
    refused_to = host.core.settings.data_dir / "database"
    with caplog.at_level(logging.WARNING, logger="skald_host.control"):
        reply = await _handle(host.core, json.dumps({"command": "backup", "to": str(refused_to)}).encode())
    assert reply["ok"] is False
    logged = [r.getMessage() for r in caplog.records if r.name == "skald_host.control"]
    assert logged == [f"backup asked for by 'skald backup' failed: {reply['error']}"]


def test_an_unknown_name_on_the_block_list_is_warned_about(caplog):
    from skald_host.builtins import BUILTIN_PLUGINS
    from skald_host.core.plugins.manager import PluginManager

    with caplog.at_level(logging.WARNING, logger="skald_host.core.plugins.manager"):
        PluginManager(builtins=BUILTIN_PLUGINS, use_entry_points=False, block=["telegrm"]).load()
    warned = [r.getMessage() for r in caplog.records if "plugins.block" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("plugins.block names telegrm, which no installed plugin is called"), warned

    caplog.clear()
    known = BUILTIN_PLUGINS[0]
    short = (known if isinstance(known, str) else known.__name__).rsplit(".", 1)[-1]
    with caplog.at_level(logging.WARNING, logger="skald_host.core.plugins.manager"):
        PluginManager(builtins=BUILTIN_PLUGINS, use_entry_points=False, block=[short]).load()
    assert not [r for r in caplog.records if "plugins.block" in r.getMessage()]


@pytest.mark.parametrize("host", ["5", "not a host!"])
def test_a_host_this_machine_does_not_have_is_said_so(tmp_path, host):
    settings = load_settings(data_dir=tmp_path / "data", environ={}, overrides={"server": {"host": host, "port": free_port()}})
    with pytest.raises(StartupError, match=r"the host is not an address this machine has") as refused:
        check_address(hypercorn_config(settings))
    assert "another server" not in str(refused.value)


def test_an_ipv6_listening_address_is_bracketed():
    from skald_host.server import listening_address

    assert listening_address("http", "::1", 18123) == "http://[::1]:18123"
    assert listening_address("https", "127.0.0.1", 8080) == "https://127.0.0.1:8080"

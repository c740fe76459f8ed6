"""The ``sandbox`` settings section: defaults, the environment override every section
gets, and values that would disable a limit refused with the key named."""

from __future__ import annotations

import pytest

from skald_host.settings import SettingsError, load_settings


def test_defaults_are_locked_down(tmp_path):
    box = load_settings(None, data_dir=tmp_path, environ={}).sandbox
    assert (box.backend, box.network, box.image) == ("auto", False, "skald-sandbox:2")
    assert (box.exec_timeout_seconds, box.output_limit_bytes) == (120.0, 1024 * 1024)
    assert box.home_quota_mib == 2048


def test_the_environment_overrides_the_section(tmp_path):
    environ = {"SKALD_SANDBOX_BACKEND": "bubblewrap", "SKALD_SANDBOX_PIDS": "100", "SKALD_SANDBOX_NETWORK": "true"}
    box = load_settings(None, data_dir=tmp_path, environ=environ).sandbox
    assert (box.backend, box.pids, box.network) == ("bubblewrap", 100, True)


@pytest.mark.parametrize("field, value", [("pids", 0), ("memory_mib", 1), ("cpus", 0), ("exec_timeout_seconds", 0), ("output_limit_bytes", 10), ("home_quota_mib", 0)])
def test_a_limit_that_would_not_hold_is_refused(tmp_path, field, value):
    with pytest.raises(SettingsError, match="sandbox"):
        load_settings(None, data_dir=tmp_path, environ={}, overrides={"sandbox": {field: value}})


def test_a_misspelt_sandbox_setting_is_named(tmp_path):
    with pytest.raises(SettingsError, match="SKALD_SANDBOX_PID"):
        load_settings(None, data_dir=tmp_path, environ={"SKALD_SANDBOX_PID": "5"})

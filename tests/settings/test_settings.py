"""Typed settings: defaults < YAML file < environment, and errors that name the key."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from skald_host.settings import Settings, SettingsError, load_settings


def write_config(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_defaults_listen_on_loopback_8080_with_the_strong_kdf(tmp_path):
    settings = load_settings(data_dir=tmp_path, environ={})

    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8080)
    assert (settings.kdf.memory_kib, settings.kdf.time_cost, settings.kdf.parallelism) == (65536, 3, 4)
    assert settings.data_dir == tmp_path.resolve()
    assert settings.plugins.block == ()
    assert (settings.plugins.safe_mode, settings.plugins.strict, settings.plugins.hook_timeout_seconds) == (False, False, 5.0)
    assert settings.log.level == "INFO"


def test_yaml_file_values_replace_single_defaults(tmp_path):
    config = write_config(
        tmp_path / "skald.yml",
        """\
        server:
          port: 9000
        kdf:
          memory_kib: 131072
        plugins:
          block: [skald-telegram, other]
          hook_timeout_seconds: 2.5
        """,
    )

    settings = load_settings(config, data_dir=tmp_path / "data", environ={})

    assert settings.server.port == 9000
    assert settings.server.host == "127.0.0.1"  # untouched fields keep their default
    assert settings.kdf.memory_kib == 131072
    assert settings.kdf.time_cost == 3
    assert settings.plugins.block == ("skald-telegram", "other")
    assert settings.plugins.hook_timeout_seconds == 2.5


def test_environment_beats_the_file(tmp_path):
    config = write_config(
        tmp_path / "skald.yml",
        """\
        server: {host: 0.0.0.0, port: 9000}
        log: {level: DEBUG}
        kdf: {memory_kib: 131072}
        plugins: {block: [from-file]}
        """,
    )
    environ = {
        "SKALD_HOST": "192.0.2.7",
        "SKALD_PORT": "9100",
        "SKALD_LOG_LEVEL": "WARNING",
        "SKALD_KDF_MEMORY_KIB": "262144",
        "SKALD_BLOCK_PLUGINS": "a,b",
    }

    settings = load_settings(config, data_dir=tmp_path / "data", environ=environ)

    assert settings.server.host == "192.0.2.7"
    assert settings.server.port == 9100
    assert settings.log.level == "WARNING"
    assert settings.kdf.memory_kib == 262144
    assert settings.plugins.block == ("a", "b")


def test_every_field_answers_to_its_long_environment_name(tmp_path):
    environ = {"SKALD_PLUGINS_HOOK_TIMEOUT_SECONDS": "0.5", "SKALD_SAFE_MODE": "1", "SKALD_STRICT_PLUGINS": "true"}

    settings = load_settings(data_dir=tmp_path, environ=environ)

    assert settings.plugins.hook_timeout_seconds == 0.5
    assert settings.plugins.safe_mode is True
    assert settings.plugins.strict is True


def test_skald_data_dir_sets_the_data_directory(tmp_path):
    settings = load_settings(environ={"SKALD_DATA_DIR": str(tmp_path / "elsewhere")})

    assert settings.data_dir == (tmp_path / "elsewhere").resolve()
    assert settings.database_dir == (tmp_path / "elsewhere").resolve() / "database"


def test_unknown_key_is_an_error_naming_it(tmp_path):
    config = write_config(tmp_path / "skald.yml", "kdf: {memroy_kib: 1}\n")

    with pytest.raises(SettingsError) as error:
        load_settings(config, data_dir=tmp_path, environ={})

    assert "memroy_kib" in str(error.value)
    assert "kdf" in str(error.value)


def test_unknown_section_is_an_error_naming_it(tmp_path):
    config = write_config(tmp_path / "skald.yml", "servre: {port: 1}\n")

    with pytest.raises(SettingsError, match="servre"):
        load_settings(config, data_dir=tmp_path, environ={})


@pytest.mark.parametrize(
    "yaml_text, key",
    [
        ("server: {port: eighty}\n", "server.port"),
        ("server: {port: true}\n", "server.port"),
        ("plugins: {safe_mode: maybe}\n", "plugins.safe_mode"),
        ("plugins: {block: 5}\n", "plugins.block"),
        ("log: {file: [a, b]}\n", "log.file"),
        ("kdf: 5\n", "kdf"),
    ],
)
def test_wrong_type_is_an_error_naming_the_key(tmp_path, yaml_text, key):
    config = write_config(tmp_path / "skald.yml", yaml_text)

    with pytest.raises(SettingsError) as error:
        load_settings(config, data_dir=tmp_path, environ={})

    assert str(error.value).startswith(f"{key}: "), str(error.value)


def test_fractional_number_for_a_whole_number_setting_is_refused_not_truncated(tmp_path):
    config = write_config(tmp_path / "skald.yml", "server: {port: 8080.9}\n")

    with pytest.raises(SettingsError, match=r"^server\.port: expected a whole number, got 8080\.9"):
        load_settings(config, data_dir=tmp_path, environ={})
    assert load_settings(config, data_dir=tmp_path, environ={"SKALD_PORT": "9000"}).server.port == 9000


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_hook_timeout_must_be_positive(tmp_path, timeout):
    with pytest.raises(SettingsError, match=r"^plugins\.hook_timeout_seconds: must be more than 0"):
        load_settings(data_dir=tmp_path, environ={"SKALD_PLUGINS_HOOK_TIMEOUT_SECONDS": timeout})


def test_a_short_and_a_full_environment_name_that_disagree_are_refused(tmp_path):
    """SKALD_PORT won over SKALD_SERVER_PORT silently; the same value twice is fine."""
    with pytest.raises(SettingsError, match=r"^SKALD_PORT='9000' and SKALD_SERVER_PORT='9001' set the same setting \(server\.port\)"):
        load_settings(data_dir=tmp_path, environ={"SKALD_PORT": "9000", "SKALD_SERVER_PORT": "9001"})
    assert load_settings(data_dir=tmp_path, environ={"SKALD_PORT": "9000", "SKALD_SERVER_PORT": "9000"}).server.port == 9000


def test_wrong_type_in_the_environment_names_the_key(tmp_path):
    with pytest.raises(SettingsError, match=r"^server\.port: expected a number"):
        load_settings(data_dir=tmp_path, environ={"SKALD_PORT": "http"})


def test_relative_log_file_resolves_under_the_data_dir(tmp_path):
    config = write_config(tmp_path / "conf" / "skald.yml", "log: {file: logs/custom.log}\n")

    settings = load_settings(config, data_dir=tmp_path / "data", environ={})

    assert settings.log.file == Path("logs/custom.log")
    assert settings.resolve(settings.log.file) == (tmp_path / "data").resolve() / "logs" / "custom.log"
    assert settings.resolve(tmp_path / "abs.log") == tmp_path / "abs.log"


@pytest.mark.parametrize("field, value", [("memory_kib", 1024), ("time_cost", 1), ("parallelism", 0)])
def test_kdf_below_the_floor_is_refused_naming_the_field(tmp_path, field, value):
    with pytest.raises(SettingsError) as error:
        load_settings(data_dir=tmp_path, environ={f"SKALD_KDF_{field.upper()}": str(value)})

    assert f"{field}={value}" in str(error.value)


def test_kdf_at_the_floor_is_accepted(tmp_path):
    environ = {"SKALD_KDF_MEMORY_KIB": "19456", "SKALD_KDF_TIME_COST": "2", "SKALD_KDF_PARALLELISM": "1"}

    settings = load_settings(data_dir=tmp_path, environ=environ)

    assert (settings.kdf.memory_kib, settings.kdf.time_cost, settings.kdf.parallelism) == (19456, 2, 1)


def test_skald_config_picks_the_file(tmp_path):
    write_config(tmp_path / "data" / "skald.yml", "server: {port: 9001}\n")
    chosen = write_config(tmp_path / "chosen.yml", "server: {port: 9002}\n")

    settings = load_settings(data_dir=tmp_path / "data", environ={"SKALD_CONFIG": str(chosen)})

    assert settings.server.port == 9002


def test_skald_yml_in_the_data_dir_is_used_when_present(tmp_path):
    assert load_settings(data_dir=tmp_path / "data", environ={}).server.port == 8080
    write_config(tmp_path / "data" / "skald.yml", "server: {port: 9001}\n")

    assert load_settings(data_dir=tmp_path / "data", environ={}).server.port == 9001


def test_explicit_config_file_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "missing.yml", data_dir=tmp_path, environ={})


def test_settings_are_immutable(tmp_path):
    settings = load_settings(data_dir=tmp_path, environ={})
    assert isinstance(settings, Settings)
    with pytest.raises(Exception):
        settings.server.port = 1  # type: ignore[misc]


def test_serve_with_a_bad_config_exits_2_with_a_configuration_error(tmp_path):
    write_config(tmp_path / "data" / "skald.yml", "kdf: {memroy_kib: 1}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")}

    result = subprocess.run(
        [sys.executable, "-m", "skald_host", "serve", "--data-dir", str(tmp_path / "data")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 2
    assert result.stderr.startswith("configuration error:")
    assert "memroy_kib" in result.stderr


def test_misspelt_section_environment_variable_is_refused_by_name(tmp_path):
    with pytest.raises(SettingsError, match="SKALD_KDF_MEMROY_KIB"):
        load_settings(None, data_dir=tmp_path, environ={"SKALD_KDF_MEMROY_KIB": "131072"})


def test_sub_agent_bounds_default_to_the_seeds_and_reach_the_orchestration_limits(tmp_path):
    """Seed 004 §9: the ``subagents`` section holds the delegation bounds; the
    coordinator's limits are built from it."""
    from skald_host.core.agent.subagents.limits import OrchestrationLimits

    settings = load_settings(data_dir=tmp_path, environ={})
    assert dataclasses.asdict(settings.subagents) == {
        "max_tree_depth": 4, "max_runs_per_tree": 16, "max_concurrent_runs": 6, "max_concurrent_runs_per_session": 4,
        "max_concurrent_runs_per_member": 4, "max_pending_inbox_events_per_session": 128, "max_inbox_delivery_attempts": 8, "max_user_turn_burst_before_inbox": 4,
        "max_inbox_wait_secs": 30.0,
    }
    config = write_config(tmp_path / "skald.yml", "subagents: {max_runs_per_tree: 3, max_inbox_wait_secs: 2.5}\n")
    changed = load_settings(config, data_dir=tmp_path, environ={"SKALD_SUBAGENTS_MAX_CONCURRENT_RUNS": "2"})
    limits = OrchestrationLimits.from_settings(changed.subagents)
    assert (limits.max_runs_per_tree, limits.max_inbox_wait_secs, limits.max_concurrent_runs, limits.max_tree_depth) == (3, 2.5, 2, 4)
    assert OrchestrationLimits() == OrchestrationLimits.from_settings(settings.subagents)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SKALD_SUBAGENTS_MAX_TREE_DEPTH", "0", r"^subagents\.max_tree_depth: must be a whole number from 1 to 16, got 0"),
        ("SKALD_SUBAGENTS_MAX_TREE_DEPTH", "17", r"^subagents\.max_tree_depth: must be a whole number from 1 to 16"),
        ("SKALD_SUBAGENTS_MAX_CONCURRENT_RUNS_PER_SESSION", "-1", r"^subagents\.max_concurrent_runs_per_session: must be a whole"),
        ("SKALD_SUBAGENTS_MAX_PENDING_INBOX_EVENTS_PER_SESSION", "1.5", r"^subagents\.max_pending_inbox_events_per_session: expected a whole number, got 1.5"),
        ("SKALD_SUBAGENTS_MAX_INBOX_WAIT_SECS", "0", r"^subagents\.max_inbox_wait_secs: must be more than 0"),
        ("SKALD_SUBAGENTS_MAX_INBOX_WAIT_SECS", "nan", r"^subagents\.max_inbox_wait_secs: must be more than 0"),
        ("SKALD_SUBAGENTS_MAX_INBOX_DELIVERY_ATTEMPTS", "many", r"^subagents\.max_inbox_delivery_attempts: expected a number"),
    ],
)
def test_a_bad_sub_agent_bound_is_refused_naming_it(tmp_path, variable, value, message):
    with pytest.raises(SettingsError, match=message):
        load_settings(data_dir=tmp_path, environ={variable: value})


def test_the_readmes_configuration_example_loads_as_written(tmp_path):
    """README.md's "Configuration" block is a file an admin copies: every key in it is a
    setting this host knows (an unknown one stops the host), and the sections it shows
    list every setting they have."""
    import re

    import yaml

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.S) if "\nchat:" in b]
    assert len(blocks) == 1, "README.md has one YAML block with the settings"
    path = tmp_path / "skald.yaml"
    path.write_text(blocks[0], encoding="utf-8")
    settings = load_settings(path, data_dir=tmp_path / "data", environ={})
    shown = yaml.safe_load(blocks[0])
    sections = [f.name for f in dataclasses.fields(Settings) if f.name != "data_dir"]
    absent = [name for name in sections if name not in shown]
    assert not absent, f"README.md's settings block lacks the sections {absent}"
    for name in sections:
        fields = {f.name for f in dataclasses.fields(getattr(settings, name))}
        missing = fields - set(shown[name] or {})
        assert not missing, f"README.md's {name}: section lacks {sorted(missing)}"
    # ... with the defaults as values: the block is what a server without a file runs with.
    defaults = load_settings(data_dir=tmp_path / "data", environ={})
    for name in sections:
        assert getattr(settings, name) == getattr(defaults, name), f"README.md's {name}: section differs from the defaults"


@pytest.mark.parametrize(
    ("yaml_text", "key", "lines"),
    [
        ("server:\n  port: 9000\nkdf:\n  time_cost: 6\n  time_cost: 2\n", "time_cost", (4, 5)),
        ("server:\n  trusted_proxies: [10.0.0.1]\nlog:\n  level: INFO\nserver:\n  port: 9000\n", "server", (1, 5)),
    ],
)
def test_a_key_given_twice_is_refused_naming_it_and_both_lines(tmp_path, yaml_text, key, lines):
    """YAML keeps the last of two equal keys silently: a second ``server:`` dropped the
    first's proxies, a second ``time_cost`` the raised KDF cost."""
    config = tmp_path / "skald.yml"
    config.write_text(yaml_text)
    with pytest.raises(SettingsError, match=rf"{config}: the key '{key}' is given twice, on line {lines[0]} and on line {lines[1]}"):
        load_settings(config, data_dir=tmp_path, environ={})


def test_unreadable_config_files_are_configuration_errors_naming_the_file(tmp_path, monkeypatch):
    not_utf8 = tmp_path / "latin1.yml"
    not_utf8.write_bytes("server:\n  host: caf\xe9\n".encode("latin-1"))
    with pytest.raises(SettingsError, match=rf"config file {not_utf8} is not UTF-8 text"):
        load_settings(not_utf8, data_dir=tmp_path, environ={})

    folder = tmp_path / "folder.yml"
    folder.mkdir()
    with pytest.raises(SettingsError, match=rf"config file {folder} is a directory"):
        load_settings(folder, data_dir=tmp_path, environ={})

    deep = tmp_path / "deep.yml"
    deep.write_text("server: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(SettingsError, match=rf"config file {deep} is nested too deeply"):
        load_settings(deep, data_dir=tmp_path, environ={})

    private = tmp_path / "private.yml"
    private.write_text("server:\n  port: 9000\n")
    real_read_text = Path.read_text

    def unreadable(self, *args, **kwargs):  # chmod 000 restricts nothing for root
        if self == private:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", unreadable)
    with pytest.raises(SettingsError, match=rf"config file {private} cannot be read by this user \(check its owner and permissions\)"):
        load_settings(private, data_dir=tmp_path, environ={})


def test_a_whole_number_written_with_a_point_is_read_alike_from_the_file_and_the_environment(tmp_path):
    config = write_config(tmp_path / "skald.yml", "kdf:\n  time_cost: 5.0\n")
    assert load_settings(config, data_dir=tmp_path, environ={}).kdf.time_cost == 5
    assert load_settings(data_dir=tmp_path / "other", environ={"SKALD_KDF_TIME_COST": "5.0"}).kdf.time_cost == 5
    with pytest.raises(SettingsError, match=r"kdf.time_cost: expected a whole number, got 5.5"):
        load_settings(data_dir=tmp_path / "other", environ={"SKALD_KDF_TIME_COST": "5.5"})
    with pytest.raises(SettingsError, match=r"kdf.time_cost: expected a number, got 'five'"):
        load_settings(data_dir=tmp_path / "other", environ={"SKALD_KDF_TIME_COST": "five"})


def test_a_wrong_log_level_lists_every_accepted_level(tmp_path):
    with pytest.raises(SettingsError, match=r"log.level: 'LOUD' is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL$"):
        load_settings(data_dir=tmp_path, environ={"SKALD_LOG_LEVEL": "LOUD"})


def test_saving_into_an_empty_section_fills_it(tmp_path):
    """``kdf:`` with every key commented out (as the README allows) is None to YAML:
    ``skald kdf --calibrate --write`` said "saved" and then failed on it."""
    from skald_host.settings import save_setting

    config = write_config(tmp_path / "skald.yml", "kdf:\n  # time_cost: 4\nserver:\n  port: 9000\n")
    assert load_settings(config, data_dir=tmp_path, environ={}).kdf.time_cost == 3  # empty: no settings
    save_setting(config, "kdf", "time_cost", 7)
    settings = load_settings(config, data_dir=tmp_path, environ={})
    assert (settings.kdf.time_cost, settings.server.port) == (7, 9000)

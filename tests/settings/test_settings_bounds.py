"""Every numeric setting has bounds, checked at load, and the server-level values that
once started a broken server (an empty host, a public_url that is no address, a
section left empty) are refused or read as meant."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from skald_host.settings import BOUNDS, Settings, SettingsError, load_settings


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("auth.login_failures_per_account", 0),
        ("auth.login_failures_per_address", -1),
        ("auth.session_idle_minutes", 0),
        ("auth.session_absolute_hours", 0),
        ("auth.login_window_minutes", 0),
        ("server.max_body_bytes", -5),
        ("server.websocket_max_message_bytes", -1),
        ("server.header_timeout_seconds", math.inf),
        ("server.body_timeout_seconds", math.nan),
        ("backup.every_hours", math.nan),
        ("backup.every_hours", 1e-7),
        ("backup.every_hours", -1.0),
        ("backup.every_hours", math.inf),
        ("chat.compact_after_tokens", 0),
        ("chat.compact_after_tokens", -10),
        ("chat.tool_timeout_seconds", math.inf),
        ("chat.sends_per_second", math.inf),
        ("tts.cache_mib", -1),
        ("files.turn_image_count", -1),
        ("files.turn_image_bytes", -1),
        ("plugins.slow_import_ms", -1),
        ("plugins.hook_timeout_seconds", math.inf),
        ("sandbox.cpus", math.inf),
        ("sandbox.cpus", math.nan),
        ("sandbox.exec_timeout_seconds", math.inf),
        ("kdf.memory_kib", 100_000_000),
        ("kdf.parallelism", 100_000),
        ("kdf.concurrency", 100_000),
        ("kdf.concurrency", 0),
        ("kdf.time_cost", 10**9),
    ],
)
def test_a_numeric_setting_out_of_its_range_is_refused_naming_key_value_and_range(tmp_path, key, value):
    section, name = key.split(".")
    with pytest.raises(SettingsError) as raised:
        load_settings(data_dir=tmp_path, environ={}, overrides={section: {name: value}})
    message = str(raised.value)
    assert message.startswith(f"{key}: must be "), message
    assert message.endswith(f"got {value!r}"), message
    bound = BOUNDS[key]
    assert f"{bound.high:g}" in message or str(int(bound.high)) in message


def test_the_same_bad_value_from_the_yaml_file_and_the_environment_is_refused(tmp_path):
    config = tmp_path / "elsewhere.yml"
    config.write_text("auth:\n  login_failures_per_account: 0\nbackup:\n  every_hours: .nan\n")
    with pytest.raises(SettingsError, match=r"^auth\.login_failures_per_account: must be a whole number from 1 to 10000, got 0$"):
        load_settings(config, data_dir=tmp_path, environ={})
    with pytest.raises(SettingsError, match=r"^backup\.every_hours: must be 0 \(off\) or from 0\.0001 to 8784, got nan$"):
        load_settings(data_dir=tmp_path, environ={"SKALD_BACKUP_EVERY_HOURS": "nan"})


def test_every_numeric_setting_has_bounds_and_its_default_lies_within_them():
    hints = typing.get_type_hints(Settings)
    numeric = set()
    for section in dataclasses.fields(Settings):
        if section.name == "data_dir":
            continue
        cls = hints[section.name]
        for fld, annotation in typing.get_type_hints(cls).items():
            inner = set(typing.get_args(annotation)) - {type(None)} or {annotation}
            if inner & {int, float} and annotation is not bool:
                numeric.add(f"{section.name}.{fld}")
    assert numeric == set(BOUNDS)
    defaults = Settings()
    for key, bound in BOUNDS.items():
        section, name = key.split(".")
        value = getattr(getattr(defaults, section), name)
        assert value is None or bound.allows(value), key


def test_the_edges_of_a_range_and_the_off_values_load(tmp_path):
    settings = load_settings(
        data_dir=tmp_path,
        environ={},
        overrides={
            "backup": {"every_hours": 0},
            "tts": {"cache_mib": 0},
            "files": {"turn_image_count": 0},
            "auth": {"login_failures_per_account": 1, "login_window_minutes": 1},
            "kdf": {"memory_kib": 4 * 1024 * 1024, "parallelism": 64, "concurrency": 1},
            "chat": {"compact_after_tokens": None},
        },
    )
    assert settings.backup.every_hours == 0 and settings.kdf.parallelism == 64


@pytest.mark.parametrize("where", ["yaml", "env", "cli"])
def test_an_empty_host_is_refused_not_bound_on_every_interface(tmp_path, where):
    config = tmp_path / "skald.yml"
    config.write_text("server: {host: ''}\n")
    arguments = {
        "yaml": {"config_file": config, "environ": {}},
        "env": {"environ": {"SKALD_HOST": ""}},
        "cli": {"environ": {}, "overrides": {"server": {"host": "  "}}},
    }[where]
    with pytest.raises(SettingsError, match=r"^server\.host: empty, which would listen on every interface"):
        load_settings(data_dir=tmp_path, **arguments)


def _make_run_environment(tmp_path, environ: dict[str, str]) -> dict[str, str]:
    """The SKALD_* variables ``make run`` hands ``skald serve``, given ``environ``."""
    import subprocess
    from pathlib import Path

    makefile = Path(__file__).resolve().parents[2] / "Makefile"
    probe = tmp_path / "probe.mk"
    probe.write_text(f"include {makefile}\nshow-env:\n\t@env | grep ^SKALD_ || true\n")
    result = subprocess.run(["make", "-s", "-f", str(probe), "show-env"], env={"PATH": "/usr/bin:/bin", **environ},
                            capture_output=True, text=True, cwd=makefile.parent)
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


def test_make_run_with_an_empty_skald_host_keeps_the_loopback_default(tmp_path):
    passed = _make_run_environment(tmp_path, {"SKALD_HOST": "", "SKALD_PORT": ""})
    assert "SKALD_HOST" not in passed and "SKALD_PORT" not in passed, passed
    settings = load_settings(data_dir=tmp_path, environ=passed)
    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8080)


def test_make_run_leaves_the_address_to_skald_yml_unless_the_environment_sets_it(tmp_path):
    """``make run`` exported 127.0.0.1 and 8080, which beat skald.yml's ``server`` (the
    environment wins over the file): an admin's ``host: 0.0.0.0`` for the phones stayed
    on the loopback without a word (operator probe)."""
    (tmp_path / "skald.yml").write_text("server: {host: 0.0.0.0, port: 18758}\n")
    passed = _make_run_environment(tmp_path, {})
    settings = load_settings(data_dir=tmp_path, environ=passed)
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", 18758)
    passed = _make_run_environment(tmp_path, {"SKALD_PORT": "18759"})
    assert passed["SKALD_PORT"] == "18759"
    assert load_settings(data_dir=tmp_path, environ=passed).server.port == 18759


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("HTTPS://Skald.Example.org", "https://skald.example.org"),
        ("https://skald.example.org/", "https://skald.example.org"),
        ("http://192.168.1.5:8080", "http://192.168.1.5:8080"),
        ("https://[::1]:8443/", "https://[::1]:8443"),
        ("https://skald.example.org:443", "https://skald.example.org"),
        ("http://skald.example.org:80/", "http://skald.example.org"),
    ],
)
def test_public_url_is_normalised_to_a_lower_case_origin(tmp_path, given, kept):
    settings = load_settings(data_dir=tmp_path, environ={"SKALD_PUBLIC_URL": given})
    assert settings.server.public_url == kept


@pytest.mark.parametrize(
    ("given", "complaint"),
    [
        ("skald.example.org", "must start with https:// or http://"),
        ("ftp://x", "must start with https:// or http://"),
        ("12", "must start with https:// or http://"),
        ("https://", "must name a host"),
        ("https://skald.example.org/skald", "without a path, query or fragment"),
        ("https://skald.example.org/?a=1", "without a path, query or fragment"),
        ("https://skald.example.org:99999", "port"),
    ],
)
def test_a_public_url_that_is_no_server_address_is_refused(tmp_path, given, complaint):
    with pytest.raises(SettingsError, match=rf"^server\.public_url: {given!r}.*{complaint}".replace("?", r"\?").replace("+", r"\+")):
        load_settings(data_dir=tmp_path, environ={"SKALD_PUBLIC_URL": given})


def test_a_section_with_every_key_commented_out_is_an_empty_one(tmp_path):
    config = tmp_path / "skald.yml"
    config.write_text("server:\n  # port: 9000\nauth:\n")
    settings = load_settings(config, data_dir=tmp_path, environ={})
    assert settings.server == Settings().server and settings.auth == Settings().auth
    config.write_text("server: 12\n")
    with pytest.raises(SettingsError, match=r"^server: expected a mapping of settings, got 12"):
        load_settings(config, data_dir=tmp_path, environ={})


def test_the_readme_lists_every_bounded_setting():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    listed = {key for row in rows for key in re.findall(r"`([a-z_]+\.[a-z_]+)`", row.split("|")[1])}
    assert listed == set(BOUNDS)


def test_the_benchmarks_unthrottled_chat_is_inside_the_bounds(tmp_path):
    """bench/chat.py, subagents.py and tts.py start their hosts with it: values past the
    bounds stopped `python -m bench chat` at its start."""
    from skald_host.testing.host import UNTHROTTLED_CHAT, test_settings

    settings = test_settings(tmp_path, chat=UNTHROTTLED_CHAT, tts={"cache_mib": 0})
    assert (settings.chat.send_burst, settings.chat.sends_per_second) == (BOUNDS["chat.send_burst"].high, BOUNDS["chat.sends_per_second"].high)

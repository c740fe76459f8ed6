"""What ``skald serve`` refuses before anything starts, each in one ``cannot start``
line with exit code 1 (found by an operations probe: each printed a traceback, some
after the core and its plugins had come up): a TLS certificate or key that cannot be
used, an unwritable log file or data dir, a port of 0. And the log files stay 0600
across rotations."""

from __future__ import annotations

import datetime
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from skald_host.core.host import StartupError
from skald_host.server import check_address, hypercorn_config
from skald_host.settings import load_settings
from tests.durability.helpers import free_port, server_env


def write_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return key


def write_self_signed(cert_path: Path, key_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    key = write_key(key_path)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@pytest.fixture
def tls_files(tmp_path):
    cert, key, other = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "other-key.pem"
    write_self_signed(cert, key)
    write_key(other)
    return cert, key, other


def config_for(tmp_path: Path, cert: Path, key: Path):
    settings = load_settings(data_dir=tmp_path / "data", environ={}, overrides={"server": {"tls_cert": cert, "tls_key": key, "port": free_port()}})
    return hypercorn_config(settings)


def test_a_matching_certificate_and_key_pass_the_check(tmp_path, tls_files):
    cert, key, _ = tls_files
    check_address(config_for(tmp_path, cert, key))


def test_a_key_that_is_not_the_certificates_is_refused_before_anything_starts(tmp_path, tls_files):
    cert, _, other = tls_files
    with pytest.raises(StartupError, match=rf"^cannot use the TLS certificate {cert} with the key {other}: .*(mismatch|KEY_VALUES)"):
        check_address(config_for(tmp_path, cert, other))


@pytest.mark.parametrize("missing", ["certificate", "key"])
def test_a_missing_certificate_or_key_file_is_refused_naming_it(tmp_path, tls_files, missing):
    cert, key, _ = tls_files
    gone = tmp_path / "gone.pem"
    cert, key = (gone, key) if missing == "certificate" else (cert, gone)
    with pytest.raises(StartupError, match=rf"^cannot use the TLS {missing} {gone}: there is no such file"):
        check_address(config_for(tmp_path, cert, key))


def serve(tmp_path: Path, *arguments: str, **settings: str) -> subprocess.CompletedProcess:
    env = server_env(tmp_path)
    env.update({"SKALD_DATA_DIR": str(tmp_path / "data"), "SKALD_PORT": str(free_port()), **settings})
    return subprocess.run([sys.executable, "-m", "skald_host", "serve", *arguments], env=env, capture_output=True, text=True, timeout=120)


def one_refusal(done: subprocess.CompletedProcess) -> str:
    output = done.stderr + done.stdout
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    assert "skald core started" not in output, output
    lines = [line for line in done.stderr.splitlines() if line.startswith("cannot start: ")]
    assert len(lines) == 1, output
    return lines[0]


def test_serve_with_a_mismatched_key_says_so_in_one_line_and_starts_nothing(tmp_path, tls_files):
    cert, _, other = tls_files
    line = one_refusal(serve(tmp_path, SKALD_SERVER_TLS_CERT=str(cert), SKALD_SERVER_TLS_KEY=str(other)))
    assert line.startswith(f"cannot start: cannot use the TLS certificate {cert} with the key {other}: ")


def test_an_unwritable_log_file_is_one_line(tmp_path):
    line = one_refusal(serve(tmp_path, SKALD_LOG_FILE="/proc/nope/x.log"))
    assert line.startswith("cannot start: cannot write the log file /proc/nope/x.log: ")
    assert "log.file" in line


def test_a_data_dir_that_cannot_be_made_is_named_before_the_log_file_in_it(tmp_path):
    """``SKALD_DATA_DIR=…/afile/data`` (afile a file) was told to fix log.file, the log
    file being inside the data dir; the data dir is the thing to change (newcomer report 7)."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    data = afile / "data"
    line = one_refusal(serve(tmp_path, SKALD_DATA_DIR=str(data)))
    assert line.startswith(f"cannot start: cannot use the data dir {data}: Not a directory"), line
    assert "--data-dir or SKALD_DATA_DIR" in line and "log.file" not in line, line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_data_dir_is_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o500)
    try:
        line = one_refusal(serve(tmp_path))
    finally:
        data.chmod(0o700)
    assert line.startswith("cannot start: cannot ")
    assert str(data) in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_data_dir_without_a_log_file_is_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o500)
    try:
        line = one_refusal(serve(tmp_path, SKALD_LOG_FILE="null"))
    finally:
        data.chmod(0o700)
    assert line.startswith(f"cannot start: cannot use the data dir {data}: Permission denied")


def test_the_data_dir_check_turns_an_os_error_into_one_line(tmp_path, monkeypatch):
    """The read-only case as root (for whom chmod restricts nothing): the lock file
    cannot be made."""
    import skald_host.server as server

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self.path))

    monkeypatch.setattr(server.DataDirLock, "acquire", refuse)
    settings = load_settings(data_dir=tmp_path / "data", environ={}, overrides={"log": {"file": None}})
    with pytest.raises(StartupError, match=rf"^cannot use the data dir {tmp_path / 'data'}: Permission denied \(.*\.skald\.lock\)"):
        server.run(settings)


def test_port_zero_on_the_command_line_is_refused_not_ignored(tmp_path, capsys, monkeypatch):
    import skald_host.server
    from skald_host.cli import main

    def served(settings):
        raise AssertionError(f"--port 0 was ignored: the server would listen on {settings.server.port}")

    monkeypatch.setattr(skald_host.server, "run", served)

    assert main(["serve", "--data-dir", str(tmp_path / "data"), "--port", "0"]) == 2
    assert "server.port: must be a whole number from 1 to 65535, got 0" in capsys.readouterr().err


def test_every_log_file_is_private_after_a_rollover(tmp_path):
    from skald_host.logs import LogFileHandler

    umask = os.umask(0o022)  # what a service usually runs with: new files 0644 unless made private
    handler = LogFileHandler(tmp_path / "skald.log", maxBytes=100, backupCount=2, encoding="utf-8")
    try:
        for _ in range(2):
            handler.emit(logging.makeLogRecord({"msg": "x" * 150}))
            handler.doRollover()
    finally:
        handler.close()
        os.umask(umask)
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["skald.log", "skald.log.1", "skald.log.2"]
    assert {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {f.name: "0o600" for f in files}

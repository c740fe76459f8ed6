"""Issue 17.7: ``skald kdf --calibrate`` measures Argon2id on this machine and prints
(with ``--write``, saves in the settings file) the time cost reaching a target per
derivation; the next start seals with it and re-wraps each member's key at their next
login. Run as the real command (``python -m skald_host``). No assertion depends on the
machine's speed: the chosen time cost is checked against the tool's own report, and
the target is small so the run stays short anywhere."""

from __future__ import annotations

import json
import re
import os
import stat
import subprocess
import sys
from pathlib import Path

from skald_host.core.identity.crypto import DEFAULT_KDF, SealedKey
from skald_host.settings import load_settings
from skald_host.testing.host import MEMBER_PASSWORD

from .helpers import get_settings, member_dek, put_settings, sealed_record

#: The memory budget of the test (the floor's, so each derivation stays cheap); the time
#: cost is left to the settings file, which the environment would otherwise override.
KDF_BUDGET = {"SKALD_KDF_MEMORY_KIB": "19456", "SKALD_KDF_PARALLELISM": "1"}


def kdf(work_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKALD_")} | KDF_BUDGET
    return subprocess.run(
        [sys.executable, "-m", "skald_host", "kdf", *args], cwd=work_dir, env=env, capture_output=True, text=True, timeout=300,
    )


def report(done: subprocess.CompletedProcess[str]) -> dict:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_calibrate_prints_then_saves_a_time_cost_the_next_start_seals_with(skald, tmp_path):
    first = await skald.start()  # the test KDF: time_cost 2, below the default
    alice = await first.member("alice")
    member_id = alice.member["id"]
    await put_settings(alice, {"diary": "sealed at time_cost 2"})
    data_dir = first.settings.data_dir
    before = SealedKey.from_json(sealed_record(data_dir, member_id))
    dek = await member_dek(data_dir, member_id, MEMBER_PASSWORD)
    assert before.time_cost == 2
    await first.stop()
    config = data_dir / "skald.yml"

    shown = kdf(tmp_path, "--data-dir", str(data_dir), "--calibrate", "--target-ms", "30", "--json")
    measured = report(shown)
    sentence = shown.stdout.splitlines()[0]
    assert measured["reached"] and measured["measured_ms"] >= measured["target_ms"] == 30
    assert measured["time_cost"] >= DEFAULT_KDF.time_cost and (measured["memory_kib"], measured["parallelism"]) == (19456, 1)
    said = re.search(r"took (\d+) ms per derivation at time_cost=(\d+)", sentence)
    assert said and abs(int(said[1]) - measured["measured_ms"]) <= 1 and int(said[2]) == measured["time_cost"], sentence
    assert f"would save kdf.time_cost: {measured['time_cost']} in {config}" in sentence
    assert not config.exists() and not measured["saved"]

    config.write_text("# the admin's own notes\nlog:\n  level: INFO  # keep this\n")
    config.chmod(0o640)
    written = report(kdf(tmp_path, "--data-dir", str(data_dir), "--calibrate", "--write", "--target-ms", "30", "--json"))
    value = written["time_cost"]
    assert written["saved"] and written["measured_ms"] >= 30 and value >= DEFAULT_KDF.time_cost
    text = config.read_text()
    assert "# the admin's own notes" in text and "level: INFO  # keep this" in text
    assert stat.S_IMODE(config.stat().st_mode) == 0o640  # the file stays as the admin made it
    assert kdf(tmp_path, "--data-dir", str(data_dir)).stdout.strip() == f"Argon2id: memory_kib=19456 time_cost={value} parallelism=1"

    # The next start reads the saved value; Alice's key is re-wrapped with it at login.
    settings = load_settings(None, data_dir=data_dir, environ=KDF_BUDGET, overrides={"log": {"file": None}})
    assert settings.kdf.time_cost == value
    second = await skald.start(settings=settings)
    alice = second.client()
    assert (await alice.login("alice", MEMBER_PASSWORD)).status_code == 200
    after = SealedKey.from_json(sealed_record(data_dir, member_id))
    assert (after.memory_kib, after.time_cost, after.parallelism) == (19456, value, 1)
    assert after.salt != before.salt
    assert await member_dek(data_dir, member_id, MEMBER_PASSWORD) == dek, "re-wrapped, not re-keyed"
    assert (await get_settings(alice))["diary"] == "sealed at time_cost 2"


def test_calibrate_never_lowers_a_configured_time_cost_and_refuses_bad_input(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    config = data_dir / "skald.yml"
    config.write_text("kdf:\n  time_cost: 300\n")
    kept = report(kdf(tmp_path, "--data-dir", str(data_dir), "--calibrate", "--write", "--target-ms", "1", "--json"))
    assert kept["time_cost"] == DEFAULT_KDF.time_cost and kept["value"] == 300 and not kept["saved"]
    assert config.read_text() == "kdf:\n  time_cost: 300\n"

    alone = kdf(tmp_path, "--data-dir", str(data_dir), "--write")
    assert alone.returncode == 2 and "pass both" in alone.stderr
    zero = kdf(tmp_path, "--data-dir", str(data_dir), "--calibrate", "--target-ms", "0")
    assert zero.returncode == 2 and "--target-ms must be between 1 and 60000" in zero.stderr
    broken = data_dir / "broken.yml"
    broken.write_text("kdf: [unclosed\n")
    refused = kdf(tmp_path, "--config", str(broken), "--calibrate", "--write", "--target-ms", "1")
    assert refused.returncode == 2 and "is not valid YAML" in refused.stderr
    assert broken.read_text() == "kdf: [unclosed\n"


def test_calibrate_writes_into_a_section_whose_keys_are_commented_out(tmp_path):
    """``kdf:`` with its keys commented out (the README allows it) printed "saved
    kdf.time_cost ..." and then failed "kdf: expected a mapping of settings, got None"."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    config = data_dir / "skald.yml"
    config.write_text("kdf:\n  # time_cost: 4\nlog:\n  level: INFO\n")
    written = report(kdf(tmp_path, "--data-dir", str(data_dir), "--calibrate", "--write", "--target-ms", "1", "--json"))
    assert written["saved"]
    settings = load_settings(None, data_dir=data_dir, environ=KDF_BUDGET)
    assert settings.kdf.time_cost == written["value"] and settings.log.level == "INFO"

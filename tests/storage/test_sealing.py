"""Instance secrets sealed at rest in system.db (check B1): a data dir an earlier
version wrote with them in clear is sealed at the next start and nothing of the clear
text stays in the file; a database and a key from different data dirs refuse to start
with a message that says so; a sealed value opens only in its own cell."""

from __future__ import annotations

import logging
import sqlite3
import uuid

import pytest

from skald_host.core.host import Skald, StartupError, build_plugin_manager
from skald_host.core.llm.catalog import ModelCatalog
from skald_host.core.storage.sealing import KEY_FILE, PREFIX, SealedValueError, Sealer
from skald_host.testing import test_settings as settings_in
from tests.durability.helpers import free_port, refused_serve


async def started(data_dir):
    settings = settings_in(data_dir)
    return await Skald.start(settings, build_plugin_manager(settings, use_entry_points=False))


def database_bytes(data_dir) -> bytes:
    folder = data_dir / "database"
    return b"".join(p.read_bytes() for p in folder.iterdir() if p.name.startswith("system.db"))


async def test_secrets_an_earlier_version_stored_in_clear_are_sealed_at_the_next_start(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="skald_host.core.host")
    data_dir = tmp_path / "data"
    core = await started(data_dir)
    await core.stop()
    key, token, chosen = f"sk-{uuid.uuid4().hex}", f"123456:{uuid.uuid4().hex}", f"set-{uuid.uuid4().hex}"
    pem, phone = f"PEM-{uuid.uuid4().hex}", f"Phone-{uuid.uuid4().hex}"
    conn = sqlite3.connect(data_dir / "database" / "system.db")  # as the earlier version wrote them
    with conn:
        conn.execute("INSERT INTO llm_providers (id, name, base_url, api_key) VALUES ('p1', 'old', 'http://127.0.0.1:9/v1', ?)", (key,))
        conn.execute("INSERT INTO plugins (id, enabled, config) VALUES ('telegram', 0, ?)", (f'{{"bot_token": "{token}"}}',))
        conn.execute("INSERT INTO config (key, value) VALUES ('set:example', ?)", (f'{{"choice": "{chosen}"}}',))
        conn.execute("INSERT INTO plugin_kv (plugin_id, key, value) VALUES ('mobile-connector', 'vapid', ?)", (f'{{"private_pem": "{pem}"}}',))
        conn.execute("INSERT INTO device_tokens (id, plugin_id, member_id, token_hash, label) VALUES ('d1', 'mobile-connector', 'm1', 'h1', ?)",
                     (f'{{"name": "{phone}"}}',))  # no such member: this raw connection enforces no foreign key
    conn.close()
    assert token.encode() in database_bytes(data_dir)  # the positive control of the scan below

    core = await started(data_dir)
    try:
        assert "sealed 5 instance secret(s) an earlier version stored in clear" in caplog.text
        assert await ModelCatalog(core.registry, core.sealer).provider_secret("p1") == ("http://127.0.0.1:9/v1", key)
        assert await core.catalog._config("telegram") == {"bot_token": token}
        assert await core.instance_settings.values("example") == {"choice": chosen}
        assert await core.host_api("mobile-connector").kv_get("vapid") == {"private_pem": pem}
        assert [d["label"] for d in await core.auth.devices.list("mobile-connector", "m1")] == [{"name": phone}]
        stored = await core.registry.run(lambda c: c.execute("SELECT config FROM plugins WHERE id = 'telegram'").fetchone()[0])
        assert stored.startswith(PREFIX)
        running = database_bytes(data_dir)  # at once, not at the next stop (a kill may come first)
    finally:
        await core.stop()
    for on_disk in (running, database_bytes(data_dir)):
        for clear in (key, token, chosen, pem, phone):
            assert clear.encode() not in on_disk, clear

    core = await started(data_dir)  # sealed values are left as they are
    try:
        assert await core.catalog._config("telegram") == {"bot_token": token}
    finally:
        await core.stop()


async def with_a_sealed_setting(data_dir):
    """A data dir whose registry holds one sealed value (telegram's settings)."""
    core = await started(data_dir)
    await core.registry.transaction(lambda c: c.execute(
        "INSERT INTO plugins (id, enabled, config) VALUES ('telegram', 0, ?)",
        (core.sealed("plugins", "config", "telegram", '{"bot_token": "t"}'),)))
    await core.stop()


async def test_a_database_without_its_key_or_with_another_refuses_to_start_and_says_which(tmp_path):
    data_dir = tmp_path / "data"
    await with_a_sealed_setting(data_dir)
    key = (data_dir / KEY_FILE).read_bytes()

    (data_dir / KEY_FILE).unlink()  # system.db put back without its key
    with pytest.raises(StartupError, match=rf"{KEY_FILE} is missing, and system.db holds the instance's secrets sealed with it"):
        await started(data_dir)
    assert not (data_dir / KEY_FILE).exists()  # no new key that would open nothing

    Sealer.load_or_create(data_dir)  # another data dir's key
    with pytest.raises(StartupError, match=rf"plugins.config of 'telegram' does not open with this data dir's {KEY_FILE}"):
        await started(data_dir)

    (data_dir / KEY_FILE).write_bytes(key)  # the right one put back: it starts
    core = await started(data_dir)
    try:
        assert await core.catalog._config("telegram") == {"bot_token": "t"}
    finally:
        await core.stop()


async def test_serve_says_a_missing_key_in_one_line(tmp_path):
    """The upgrade probe saw three tracebacks around the reason; ``skald serve`` says it
    in one line, like every refused start."""
    data_dir = tmp_path / "data"
    await with_a_sealed_setting(data_dir)
    (data_dir / KEY_FILE).unlink()
    line, _ = refused_serve(data_dir, free_port())
    assert line == (f"cannot start: {data_dir / KEY_FILE} is missing, and system.db holds the instance's secrets"
                    " sealed with it: put back the instance.key from the same data dir or backup as system.db")


def test_a_sealed_value_opens_only_in_its_own_cell(tmp_path):
    sealer = Sealer.load_or_create(tmp_path)
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600
    sealed = sealer.seal("the token", "plugins", "config", "telegram")
    assert sealed is not None and "the token" not in sealed
    assert sealer.open(sealed, "plugins", "config", "telegram") == "the token"
    with pytest.raises(SealedValueError):
        sealer.open(sealed, "plugins", "config", "hello")  # moved to another plugin's row
    assert Sealer.load_or_create(tmp_path).open(sealed, "plugins", "config", "telegram") == "the token"  # the same key again
    assert sealer.open("written in clear", "plugins", "config", "telegram") == "written in clear"


"""``skald serve`` says ``listening`` only once the start succeeded: a refused start in
strict mode is one ``cannot start`` line, with no ``listening`` before it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.catalog.test_plugin_errors import free_port, installed_broken_plugin
from tests.durability.helpers import ServerProcess


def test_a_strict_start_refused_by_a_plugin_never_says_listening(tmp_path):
    site = installed_broken_plugin(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site), "SKALD_STRICT_PLUGINS": "1", "SKALD_DATA_DIR": str(tmp_path / "data"),
           "SKALD_PORT": str(free_port()), "SKALD_HOST": "127.0.0.1"}

    done = subprocess.run([sys.executable, "-m", "skald_host", "serve"], env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 1, done.stderr
    assert "cannot start: plugin 'brokenx' failed in register_tools" in done.stderr
    assert "listening" not in done.stderr + done.stdout


async def test_a_start_that_succeeds_says_listening(tmp_path):
    server = await ServerProcess(tmp_path / "data", tmp_path, "serve").start()
    try:
        assert f"skald listening on http://127.0.0.1:{server.port}" in server.output
    finally:
        assert await server.terminate() == 0


async def test_a_fresh_data_dir_says_to_open_the_address_to_create_the_first_admin(tmp_path):
    """A newcomer's console said only "skald listening on ...": nothing said that the first
    admin is made by opening that address."""
    server = await ServerProcess(tmp_path / "data", tmp_path, "serve").start()
    try:
        address = f"http://127.0.0.1:{server.port}"
        if "no admin yet" not in server.output:  # the line follows "listening" at once
            import asyncio

            for _ in range(100):
                await asyncio.sleep(0.1)
                if "no admin yet" in server.output:
                    break
        assert f"no admin yet: open {address} in a browser to create the first admin" in server.output
    finally:
        assert await server.terminate() == 0

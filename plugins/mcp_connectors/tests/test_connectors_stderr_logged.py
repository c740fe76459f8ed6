"""A global stdio connector's stderr went raw into the host's stderr (the SDK's
default): a failing call's traceback, thirty lines with no time, logger or name, read
as Skald's own crash. Each line is a log record of ``skald_mcp.stderr`` naming the
connector, cut to a length and to a rate, and nothing reaches the host's stderr."""

from __future__ import annotations

import asyncio
import logging
import sys

from mcp_support import BASE, Setup
from tiny_server import SOURCE

NOISY = "import sys\nfor n in range(30): sys.stderr.write(f'Traceback line {n} ' + 'x' * (900 if n == 0 else 0) + '\\n')\nsys.stderr.flush()\n"


async def test_a_connectors_stderr_is_logged_under_its_name_not_printed(setup: Setup, caplog, capfd):
    caplog.set_level(logging.INFO, logger="skald_mcp")
    body = {"name": "noisy", "transport": "stdio", "command": sys.executable, "args": ["-c", NOISY + SOURCE, "/"], "access": []}
    response = await setup.admin.post(f"{BASE}/servers", json=body)
    assert response.status_code == 201 and response.json()["state"] == "ready", response.text

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "skald_mcp.stderr"]

    for _ in range(100):
        if len(lines()) >= 20:
            break
        await asyncio.sleep(0.05)
    assert (await setup.admin.delete(f"{BASE}/servers/noisy")).status_code == 200
    for _ in range(100):  # the session's end: the rest is counted in one line
        if any("not logged" in line for line in lines()):
            break
        await asyncio.sleep(0.05)
    said = lines()
    assert said[0].startswith("connector noisy: Traceback line 0 xxx") and said[0].endswith("… (417 more characters)"), said[0]
    assert said[1:20] == [f"connector noisy: Traceback line {n} " for n in range(1, 20)]
    assert said[20:] == ["connector noisy: 10 more lines of its stderr not logged (at most 20 a minute)"]
    assert "Traceback line" not in capfd.readouterr().err

"""The running server's local control socket, ``<data dir>/control.sock``.

``skald backup`` on the machine asks the running server through it, since only the
server can copy the files it holds open consistently. The socket is 0o600 inside the
0o700 data dir: only the account that runs the server (and root) can connect, and they
can read the data dir anyway — it gives them nothing they do not have.

One JSON object per line each way: ``{"command": "backup", "to": <dir or null>}`` is
answered ``{"ok": true, "backup": {...}}`` or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skald_host.core.backups import BackupError
from skald_host.core.storage.data_dir_lock import CONTROL_SOCKET

if TYPE_CHECKING:
    from skald_host.core.host import Skald

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024
#: A backup of a large data dir takes a while; the client waits this long for it.
REPLY_TIMEOUT_SECONDS = 3600.0


def socket_path(data_dir: Path) -> Path:
    return data_dir / CONTROL_SOCKET


async def start_control_socket(core: Skald) -> asyncio.AbstractServer | None:
    """Listen on the socket; None (and a warning) when it cannot be made, since the
    server itself must still run."""
    path = socket_path(core.settings.data_dir)
    try:
        path.unlink(missing_ok=True)  # a crashed server's; we hold the data dir lock
        server = await asyncio.start_unix_server(lambda r, w: _serve(core, r, w), path=str(path), limit=MAX_REQUEST_BYTES)
        os.chmod(path, 0o600)
    except OSError as error:
        log.warning("control socket %s not available (%s): skald backup cannot reach this server", path, error)
        return None
    return server


def stop_control_socket(server: asyncio.AbstractServer, core: Skald) -> None:
    """Stop listening and remove the socket file: a stopped server's data dir holds no
    socket (a copy of it with ``shutil.copytree`` fails on one, ENXIO). Python before
    3.13 leaves it behind on ``close``."""
    server.close()
    socket_path(core.settings.data_dir).unlink(missing_ok=True)


async def _serve(core: Skald, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        line = await reader.readline()
        reply = await _handle(core, line)
    except (ValueError, asyncio.LimitOverrunError):
        reply = {"ok": False, "error": "a request is one JSON object on one line"}
    try:
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _handle(core: Skald, line: bytes) -> dict[str, Any]:
    request = json.loads(line)
    if not isinstance(request, dict):
        raise ValueError("not an object")
    if request.get("command") != "backup":
        return {"ok": False, "error": f"unknown command {request.get('command')!r}; this server knows: backup"}
    to = request.get("to")
    if to is not None and (not isinstance(to, str) or not os.path.isabs(to)):
        return {"ok": False, "error": "'to' must be an absolute directory path"}
    try:
        info = await core.backups.take(Path(to) if to else None)
    except BackupError as error:
        # The admin running ``skald backup`` sees the error; the server's log says it too
        # (paths and the reason only, as every backup line).
        log.warning("backup asked for by 'skald backup' failed: %s", error)
        return {"ok": False, "error": str(error)}
    return {"ok": True, "backup": info.as_dict()}


async def ask(data_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """Send one request to the server running on ``data_dir``; OSError if none answers."""
    reader, writer = await asyncio.open_unix_connection(str(socket_path(data_dir)), limit=1 << 24)
    try:
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), REPLY_TIMEOUT_SECONDS)
    finally:
        writer.close()
    if not line:
        raise ConnectionError("the server closed the control socket without answering")
    return json.loads(line)

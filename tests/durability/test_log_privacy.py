"""The log file the admin reads holds no member's words or secrets, whatever the log
level: client libraries log every request's URL at INFO (httpx: a member's connector
address with the key in its query) and request bodies at DEBUG (openai), so they log
from WARNING up (``skald_host.logs``)."""

from __future__ import annotations

import asyncio
import logging

import httpx

from skald_host.logs import PRIVATE_LIBRARY_LOGGERS, configure_logging
from skald_host.testing.host import test_settings as settings_for

CANARY = "CANARYKEY7f3e"


async def _answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


async def test_a_request_url_reaches_no_log_line_at_debug_level(tmp_path):
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), {name: logging.getLogger(name).level for name in PRIVATE_LIBRARY_LOGGERS})
    settings = settings_for(tmp_path / "data", log={"level": "DEBUG", "file": "logs/skald.log"})
    server = await asyncio.start_server(_answer_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        configure_logging(settings)
        async with httpx.AsyncClient() as client:  # httpx logs "HTTP Request: GET <url> ..." at INFO
            await client.get(f"http://127.0.0.1:{port}/mcp?key={CANARY}")
        logging.getLogger("skald_host.probe").debug("a host line at DEBUG still goes out")
        logging.getLogger("httpx").warning("a library warning still goes out")
    finally:
        server.close()
        await server.wait_closed()
        for handler in root.handlers:
            handler.flush()
        text = settings.resolve(settings.log.file).read_text()
        for handler in list(root.handlers):
            root.removeHandler(handler)
            if handler not in saved[1]:
                handler.close()
        root.setLevel(saved[0])
        for handler in saved[1]:
            root.addHandler(handler)
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)
    assert "a host line at DEBUG still goes out" in text
    assert "a library warning still goes out" in text
    assert CANARY not in text, text

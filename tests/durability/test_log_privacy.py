"""The log file the admin reads holds no member's words or secrets, whatever the log
level: client libraries log every request's URL at INFO (httpx: a member's connector
address with the key in its query) and request bodies at DEBUG (openai), so they log
from WARNING up (``skald_host.logs``)."""

from __future__ import annotations

import asyncio
import contextlib
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


class _LogFile:
    """What the log file held once the logging it was configured with is put back."""
    text = ""


@contextlib.contextmanager
def _logging_as_configured(settings):
    """The host's own logging (``configure_logging``) for the block, the test runner's
    again after it; the log file's text is read in between, every line flushed."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), {name: logging.getLogger(name).level for name in PRIVATE_LIBRARY_LOGGERS})
    log = _LogFile()
    try:
        configure_logging(settings)
        yield log
    finally:
        for handler in root.handlers:
            handler.flush()
        log.text = settings.resolve(settings.log.file).read_text()
        for handler in list(root.handlers):
            root.removeHandler(handler)
            if handler not in saved[1]:
                handler.close()
        root.setLevel(saved[0])
        for handler in saved[1]:
            root.addHandler(handler)
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)


async def test_a_request_url_reaches_no_log_line_at_debug_level(tmp_path):
    settings = settings_for(tmp_path / "data", log={"level": "DEBUG", "file": "logs/skald.log"})
    server = await asyncio.start_server(_answer_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with _logging_as_configured(settings) as log:
            async with httpx.AsyncClient() as client:  # httpx logs "HTTP Request: GET <url> ..." at INFO
                await client.get(f"http://127.0.0.1:{port}/mcp?key={CANARY}")
            logging.getLogger("skald_host.probe").debug("a host line at DEBUG still goes out")
            logging.getLogger("httpx").warning(f"a library warning goes out without its words {CANARY}")
    finally:
        server.close()
        await server.wait_closed()
    text = log.text
    assert "a host line at DEBUG still goes out" in text
    assert "WARNING httpx: a line from test_log_privacy:" in text  # its place, so the admin can look it up
    assert "without its words" not in text
    assert CANARY not in text, text


async def _malformed_mcp(request):
    """A connector whose answer is no JSON-RPC message: the mcp SDK logs it with
    ``logger.exception``, and pydantic's error quotes the answer (``input_value=``)."""
    from aiohttp import web

    body = f'event: message\ndata: {{"{CANARY}": "what the member\'s server said {CANARY}"}}\n\n'
    return web.Response(text=body, content_type="text/event-stream")


async def test_what_a_members_mcp_server_answers_reaches_no_log_line(tmp_path):
    """Security sweep 6: a connector answering one malformed message wrote it, quoted in
    a pydantic traceback, at ERROR into the log the admin reads (check E5)."""
    from aiohttp import web
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    settings = settings_for(tmp_path / "data", log={"level": "INFO", "file": "logs/skald.log"})
    app = web.Application()
    app.router.add_route("*", "/mcp", _malformed_mcp)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        with _logging_as_configured(settings) as log, contextlib.suppress(Exception):
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await asyncio.wait_for(session.initialize(), 5)
    finally:
        await runner.cleanup()
    text = log.text
    assert "ERROR mcp.client.streamable_http: a line from streamable_http:" in text, text  # the SDK did log it
    assert "its text withheld" in text
    assert CANARY not in text, text

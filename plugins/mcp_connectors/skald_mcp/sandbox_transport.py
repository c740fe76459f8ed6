"""An MCP stdio transport over a command in the member's sandbox
(``HostApi.sandbox_spawn``, contract 1.2): newline-delimited JSON-RPC on the command's
stdin and stdout, as the SDK's own stdio transport speaks it, but the process is the
sandbox's, never one on the bare host."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

#: How long a command whose output ended before it said anything is given to exit, for
#: its exit status to say why.
EXIT_WAIT_SECONDS = 2.0


class SandboxCommandEnded(RuntimeError):
    """The command ended before it answered anything (its exit status known or not)."""


def ended_before_answering(code: int | None) -> BaseException:
    """Why a sandboxed server stopped before its first message, from its exit status
    (the sandbox discards stderr): 127 is a shell's and ``setpriv``'s "not found", 126
    "cannot be run". Never the command line: a member's page shows this, and the
    template's command is the admin's."""
    if code == 127:
        return FileNotFoundError("the connector's program was not found in the sandbox (exit status 127)")
    if code == 126:
        return PermissionError("the connector's program cannot be run in the sandbox (exit status 126)")
    if code is None:
        return SandboxCommandEnded("the connector's program closed its output before it answered")
    return SandboxCommandEnded(f"the connector's program exited with status {code} before it answered")


@contextlib.asynccontextmanager
async def sandbox_transport(spawn: Callable[[], Awaitable[Any]]) -> AsyncIterator[Any]:
    process = await spawn()
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        answered = False
        async with read_writer:
            while True:
                line = await process.stdout.readline()
                if not line:
                    if not answered:
                        # It never spoke: say why it ended (the session would only
                        # read "connection closed").
                        code = None
                        with anyio.move_on_after(EXIT_WAIT_SECONDS):
                            code = await process.wait()
                        raise ended_before_answering(code)
                    return  # the command ended: the session sees the stream close
                if not line.strip():
                    continue
                answered = True
                try:
                    message: SessionMessage | Exception = SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                except ValueError as exc:
                    log.info("a sandboxed MCP server wrote a line that is not JSON-RPC")
                    message = exc
                try:
                    await read_writer.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def writer() -> None:
        async with write_reader:
            async for session_message in write_reader:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    process.stdin.write(data.encode())
                    await process.stdin.drain()
                except (ConnectionError, OSError):
                    await read_writer.aclose()
                    return

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            try:
                yield read_stream, write_stream
            finally:
                group.cancel_scope.cancel()
    finally:
        process.kill()
        with contextlib.suppress(Exception):
            with anyio.move_on_after(5, shield=True):
                await process.wait()

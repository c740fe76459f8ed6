"""A plugin's file upload (contract 1.10): a route that declares its body as a file may
take one as large as the host's own uploads (``files.upload_max_bytes``), not the
general body limit (``server.max_body_bytes``), and is refused past it with the uploads'
own answer, which names the limit. Every other plugin route keeps the body limit."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from quart import Blueprint, request

from skald_hookspecs import accepts, hookimpl
from skald_hookspecs.types import PluginInfo

BODY_LIMIT = 64 * 1024
UPLOAD_LIMIT = 256 * 1024
FILE = {"type": "string", "format": "binary"}


class Files:
    """Uploads declared as the contract says (POST and PUT), one declared as text (not a
    file), and a JSON route."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="files-probe", title="Files probe", spec=">=1.10,<2")

    @hookimpl
    def register_routes(self, register: Callable[..., None]) -> None:
        blueprint = Blueprint("files_probe", __name__)

        @blueprint.post("/items/<item>/file")
        @accepts(FILE, content_type="application/octet-stream")
        async def upload(item: str) -> Any:
            return {"item": item, "size": len(await request.get_data())}, 201

        @blueprint.put("/photo")
        @accepts(FILE, content_type="image/jpeg")
        async def photo() -> Any:
            size = 0
            async for chunk in request.body:
                size += len(chunk)
            return {"size": size}

        @blueprint.post("/text")
        @accepts({"type": "string"}, content_type="text/plain")
        async def text() -> Any:
            return {"size": len(await request.get_data())}

        @blueprint.post("/json")
        async def json_route() -> Any:
            return {"keys": len(await request.get_json() or {})}

        register(blueprint)


async def start(skald: Any) -> tuple[Any, Any]:
    settings = skald.settings(server={"max_body_bytes": BODY_LIMIT}, files={"upload_max_bytes": UPLOAD_LIMIT})
    host = await skald.start(plugins=[Files()], enable=["files-probe"], settings=settings)
    return host, await host.admin()


def refused_as_an_upload(answer: dict[str, Any]) -> None:
    assert answer["code"] == "upload_too_large", answer
    assert answer["values"] == {"limit": UPLOAD_LIMIT, "size": "256 KiB", "size_bytes": UPLOAD_LIMIT}, answer
    assert "256 KiB" in answer["error"]


async def raw_post(host: Any, client: Any, path: str, head: dict[str, str], chunks: list[bytes] | None = None) -> tuple[int | None, dict | None]:
    """A request on a raw socket: the head, then ``chunks`` (chunked) or nothing, and
    the status and JSON answer; (None, None) when the server closed first."""
    address, port = host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(address, int(port))
    head = {"Host": f"{address}:{port}", **client.headers("POST"), **head}
    writer.write((f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    try:
        for chunk in chunks or []:
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    except (ConnectionResetError, BrokenPipeError):
        return None, None
    finally:
        writer.close()
    if not answer:
        return None, None
    status_line, _, rest = answer.partition(b"\r\n")
    body = rest.split(b"\r\n\r\n", 1)[1]
    if b"chunked" in rest.split(b"\r\n\r\n", 1)[0].lower():  # the answer itself may come chunked
        size, _, tail = body.partition(b"\r\n")
        body = tail[: int(size, 16)]
    return int(status_line.split()[1]), json.loads(body)


async def test_a_declared_file_upload_takes_a_body_up_to_the_upload_limit(skald):
    host, admin = await start(skald)
    body = b"x" * (BODY_LIMIT * 2)  # over the body limit, under the upload limit
    response = await admin.post("/api/plugin/files-probe/items/a/file", content=body, headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 201, response.text
    assert response.json() == {"item": "a", "size": len(body)}
    response = await admin.put("/api/plugin/files-probe/photo", content=body, headers={"Content-Type": "image/jpeg"})
    assert response.status_code == 200 and response.json() == {"size": len(body)}, response.text
    exactly = await admin.post("/api/plugin/files-probe/items/b/file", content=b"x" * UPLOAD_LIMIT, headers={"Content-Type": "application/octet-stream"})
    assert exactly.status_code == 201 and exactly.json()["size"] == UPLOAD_LIMIT, exactly.text


async def test_a_plugin_upload_over_the_limit_is_refused_with_the_limit_named(skald):
    host, admin = await start(skald)
    # Announced too large: refused from the head alone, before the view runs.
    status, answer = await raw_post(host, admin, "/api/plugin/files-probe/items/a/file", {"Content-Length": str(UPLOAD_LIMIT + 1)})
    assert status == 413
    refused_as_an_upload(answer)
    # Chunked (no length up front): cut once past the limit, with the same answer, or
    # a reset connection when the server's close overtakes it; the server is fine after.
    status, answer = await raw_post(host, admin, "/api/plugin/files-probe/items/a/file", {"Transfer-Encoding": "chunked"}, [b"y" * 16384] * 20)
    assert status in (413, None)
    if status is not None:
        refused_as_an_upload(answer)
    assert (await admin.get("/api/auth/session")).status_code == 200


async def test_a_plugin_upload_read_in_chunks_is_cut_at_the_limit_too(skald):
    """Contract 1.12: a view that streams its body (``async for chunk in request.body``,
    or hands it to ``HostApi.save_upload``) is cut past the upload limit as one that
    reads it whole. Quart counted only what it held at once, so a chunked body read as
    it came ran on past the limit unnoticed (the probe's view counted all of it)."""
    host, admin = await start(skald)
    address, port = host.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(address, int(port))
    head = {"Host": f"{address}:{port}", "Transfer-Encoding": "chunked", "Content-Type": "image/jpeg", **admin.headers("PUT")}
    writer.write(("PUT /api/plugin/files-probe/photo HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode())
    answer = b""
    try:
        for _ in range(UPLOAD_LIMIT // 16384 * 2):  # as a slow network sends: the view reads each piece as it comes
            writer.write(f"{16384:x}\r\n".encode() + b"y" * 16384 + b"\r\n")
            await writer.drain()
            try:
                answer = await asyncio.wait_for(reader.read(65536), 0.02)
            except asyncio.TimeoutError:
                continue
            break
        else:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(65536), 10)
    except (ConnectionResetError, BrokenPipeError):
        answer = b""
    finally:
        writer.close()
    if answer:  # else the server's close overtook its answer
        status_line, _, rest = answer.partition(b"\r\n")
        headers, _, body = rest.partition(b"\r\n\r\n")
        assert int(status_line.split()[1]) == 413, answer
        if b"chunked" in headers.lower():
            size, _, tail = body.partition(b"\r\n")
            body = tail[: int(size, 16)]
        refused_as_an_upload(json.loads(body))
    assert (await admin.get("/api/auth/session")).status_code == 200

    async def chunks():  # up to the limit, in chunks (no length up front): read whole
        for _ in range(UPLOAD_LIMIT // 16384):
            yield b"y" * 16384

    response = await admin.put("/api/plugin/files-probe/photo", content=chunks(), headers={"Content-Type": "image/jpeg"})
    assert response.status_code == 200 and response.json() == {"size": UPLOAD_LIMIT}, response.text


async def test_every_other_plugin_route_keeps_the_body_limit(skald):
    host, admin = await start(skald)
    body = b"x" * (BODY_LIMIT * 2)
    response = await admin.post("/api/plugin/files-probe/text", content=body, headers={"Content-Type": "text/plain"})
    assert response.status_code == 413 and response.json()["code"] == "request_body_too_large", response.text
    big_json = json.dumps({"a": "x" * (BODY_LIMIT * 2)})
    response = await admin.post("/api/plugin/files-probe/json", content=big_json, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["code"] == "request_body_too_large", response.text
    # The upload route's own path, asked another way, is not an upload.
    response = await admin.request("PUT", "/api/plugin/files-probe/items/a/file", content=body)
    assert response.status_code in (405, 413), response.text


async def test_the_api_document_lists_the_refusal_of_a_file_too_large(skald):
    """Its 413 was missing from /api/openapi.json (second plugin-author probe)."""
    host, admin = await start(skald)
    paths = (await admin.get("/api/openapi.json")).json()["paths"]
    upload = paths["/api/plugin/files-probe/items/{item}/file"]["post"]["responses"]
    assert "upload_too_large" in upload["413"]["description"], upload
    assert "request_body_too_large" in paths["/api/plugin/files-probe/text"]["post"]["responses"]["413"]["description"]
    assert list(upload)[-1] == "default"

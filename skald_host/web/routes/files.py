"""Members' files over HTTP: the upload endpoint and the file viewer.

``POST /api/conversations/<id>/uploads`` takes the file as the raw request body (any
``Content-Type``) with its name in the ``X-Filename`` header (percent-encoded UTF-8,
so any name survives a header; without one the file is called ``upload``). The body is streamed into the one upload seam
(``FileService.save_upload``) and never buffered whole: past ``files.upload_max_bytes``
the request is refused with 413 and the partial file deleted.

``GET /api/file?path=<agent path>`` routes the path exactly like the fs tools (notes,
shared folders and projects, the home, the sandbox) for the calling member only, and
serves it with a type that cannot execute: images as themselves, text as
``text/plain``, everything else as a download, always ``nosniff`` and sandboxed.

A file on the host is streamed from its checked descriptor (``file_response``, the one
way a file of ours goes out whole, the project explorer's downloads too), so any file an
upload could make can be fetched again; ``files.view_max_bytes`` caps only what the
browser is asked to show inline, and what must be read whole (a note, a sandbox file).
"""

from __future__ import annotations

import asyncio
import os
import re
import weakref
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any
from urllib.parse import quote, unquote

from quart import Blueprint, Response, current_app, request
from quart.wrappers import Request
from quart.wrappers.request import Body
from quart.wrappers.response import ResponseBody
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge
from werkzeug.routing import Map, Rule

from skald_host.core.agent.runtime import ChatError
from skald_host.core.files.ops import MemberFiles, OpenFile
from skald_host.core.files.paths import PathRefused
from skald_host.core.files.service import FileError, UploadTooLarge
from skald_host.core.files.sniff import IMAGE_TYPES, TEXT
from skald_host.core.i18n import size_text
from skald_host.core.identity.users import OwnerDatabaseUnavailable
from skald_host.core.memory.notes import NoteAccessDenied, NoteError
from skald_host.web.auth import PLUGIN_PREFIX, current_principal, requires
from skald_host.web.body import JSON, UPLOAD, accepts, declared_body, query, ref, returns
from skald_host.web.errors import ApiError

bp = Blueprint("files", __name__)

#: Routes whose body is a file: a chat upload, and a file put into a project's folder
#: by its explorer (skald_host/web/routes/folders.py).
UPLOAD_ROUTE = re.compile(r"^/api/(conversations/[^/]+/uploads|projects/[^/]+/files/upload/.+)$")
FILENAME_HEADER = "X-Filename"
MAX_FILENAME_HEADER = 2048


#: The methods a plugin's file upload may use (contract 1.10).
PLUGIN_UPLOAD_METHODS = frozenset({"POST", "PUT"})


def is_file_upload(view: Any) -> bool:
    """Whether a view declared its body as a file (contract 1.10): ``@accepts`` with a
    binary string (``format: binary``, or ``contentMediaType`` as OpenAPI 3.1 writes a
    file) and a content type other than JSON. Such a body may be as large as an upload."""
    declared = declared_body(view)
    if declared is None or declared[1] == JSON:
        return False
    schema = declared[0]
    return schema.get("type") == "string" and (schema.get("format") == "binary" or "contentMediaType" in schema)


class PluginUploads:
    """The plugin routes that are file uploads, known before routing: the request class
    is built before a request is matched to a view, and the size it may reach is part of
    building it. Filled once the plugins' blueprints are mounted (``app.mount_plugin_routes``),
    from the views' own ``@accepts``, so any plugin gets the upload limit the same way,
    and no plugin is named here."""

    def __init__(self) -> None:
        self._map: Map | None = None

    def mount(self, app: Any) -> None:
        rules = [
            Rule(rule.rule, methods=rule.methods, endpoint=rule.endpoint)
            for rule in app.url_map.iter_rules()
            if rule.rule.startswith(PLUGIN_PREFIX)
            and (rule.methods or set()) & PLUGIN_UPLOAD_METHODS
            and is_file_upload(app.view_functions.get(rule.endpoint))
        ]
        self._map = Map(rules, converters=app.url_map.converters, merge_slashes=False) if rules else None

    def match(self, method: str, path: str) -> bool:
        if self._map is None or method not in PLUGIN_UPLOAD_METHODS or not path.startswith(PLUGIN_PREFIX):
            return False
        try:
            self._map.bind("localhost").match(path, method)
        except HTTPException:  # not one of them (404, 405, a redirect to a slash)
            return False
        return True


class CountedBody(Body):
    """A body whose limit counts every byte read, whole or in chunks. Quart's own counts
    only what it holds at once: a view that streams it (``async for chunk in
    request.body``) clears what it read, so a chunked body could run on past the limit
    unnoticed. Past the limit it raises ``RequestEntityTooLarge`` as a whole read does,
    and takes nothing more in."""

    def __init__(self, expected_content_length: int | None, max_content_length: int | None) -> None:
        super().__init__(expected_content_length, max_content_length)
        self._read = 0

    async def __anext__(self) -> bytes:
        data = await super().__anext__()
        self._read += len(data)
        if self._max_content_length is not None and self._read > self._max_content_length:
            self._must_raise = RequestEntityTooLarge()  # and ``append`` drops what still comes
            self.clear()  # left incomplete: the answer closes the connection (``settle_unread_body``)
            raise self._must_raise
        return data


def request_class(upload_max_bytes: int, plugin_uploads: PluginUploads | None = None) -> type[Request]:
    """The app's request class: the upload routes, the host's and a plugin's declared
    file uploads (``plugin_uploads``), may carry a body up to the upload limit (every
    other route keeps ``server.max_body_bytes``). A ``Content-Length`` above it is
    refused before a byte is read; a chunked body is cut by the seam (the host's
    routes) or, a plugin's, as its view reads past the limit, streamed or whole
    (``CountedBody``; the app answers that with the uploads' refusal)."""

    class SkaldRequest(Request):
        def __init__(self, method: str, scheme: str, path: str, *args: Any, **kwargs: Any) -> None:
            if method == "POST" and UPLOAD_ROUTE.match(path):
                kwargs["max_content_length"] = upload_max_bytes
            elif plugin_uploads is not None and plugin_uploads.match(method, path):
                kwargs["max_content_length"] = upload_max_bytes
                self.body_class = CountedBody
            super().__init__(method, scheme, path, *args, **kwargs)

    return SkaldRequest


def plugin_upload_view() -> bool:
    """Whether this request is for a plugin's declared file upload (after routing)."""
    rule = request.url_rule
    if rule is None or not request.path.startswith(PLUGIN_PREFIX) or request.method not in PLUGIN_UPLOAD_METHODS:
        return False
    return is_file_upload(current_app.view_functions.get(rule.endpoint))


async def refuse_oversized_plugin_upload() -> None:
    """``before_request`` after the gate: a plugin's file upload whose declared length is
    over the upload limit gets the same refusal as the host's own upload routes (naming
    the limit), before its view runs."""
    if request.content_length and plugin_upload_view():
        limit = current_app.config["SKALD_SETTINGS"].files.upload_max_bytes
        if request.content_length > limit:
            raise upload_too_large(limit)


def plugin_upload_refusal() -> ApiError | None:
    """A body cut at its limit while a view read it (a chunked body says no length up
    front): on a plugin's file upload, the upload refusal naming the limit; None
    elsewhere (the generic 413)."""
    if plugin_upload_view():
        return upload_too_large(current_app.config["SKALD_SETTINGS"].files.upload_max_bytes)
    return None


def upload_too_large(limit: int) -> ApiError:
    """The one refusal of an upload over the cap, chat or project: with the cap in the
    values, since "too large" alone leaves the member guessing how large may be."""
    return ApiError(
        413, f"the file is larger than the upload limit of {limit} bytes ({size_text(limit)})",
        # size_bytes: the reader's language says the size in its number format ("1,5 GiB").
        code="upload_too_large", values={"limit": limit, "size": size_text(limit), "size_bytes": limit},
    )


def _files_error(exc: Exception) -> ApiError:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, UploadTooLarge):
        if exc.limit is not None:
            return upload_too_large(exc.limit)
        return ApiError(413, message, code="home_full", values={"left": size_text(exc.left), "left_bytes": exc.left})
    if isinstance(exc, (FileNotFoundError,)):
        return ApiError(404, "no such file", code="file_not_found")
    if isinstance(exc, NoteAccessDenied):
        return ApiError.refusing(403, exc)  # its code: the reader's language
    if isinstance(exc, OwnerDatabaseUnavailable):
        return ApiError.refusing(423, exc)
    if isinstance(exc, (FileError, NoteError, PathRefused)):
        missing = "does not exist" in message or message.startswith("no such")
        return ApiError.refusing(404 if missing else 400, exc)
    raise exc


def _decoded_filename(raw_name: str) -> str:
    """The upload's name from its header. Header values arrive as Latin-1 (HTTP's own
    charset), so a client that sends raw UTF-8 would have ``rawé`` saved as ``rawÃ©``;
    any byte outside ASCII is refused instead, with what to send, never guessed at."""
    not_encoded = ApiError(
        400, f"{FILENAME_HEADER} must be percent-encoded UTF-8 (encodeURIComponent in JavaScript), not raw non-ASCII text",
        field="filename", code="filename_not_encoded", values={"header": FILENAME_HEADER},
    )
    if not raw_name.isascii():
        raise not_encoded
    try:
        return unquote(raw_name, errors="strict")
    except UnicodeDecodeError:
        raise not_encoded from None


@bp.post("/api/conversations/<conversation_id>/uploads")
@accepts(UPLOAD, content_type="application/octet-stream")
@returns(ref("Upload"), 201, "stored in the conversation's uploads; name the path in a message's attachments")
@requires("chat.use")
async def upload(conversation_id: str) -> Any:
    core = current_app.config["SKALD_CORE"]
    member = current_principal().member
    try:
        runtime = await core.chat.runtime(member)
        await runtime.conversation(conversation_id)
    except ChatError as exc:
        raise ApiError.refusing(exc.status, exc) from None
    raw_name = request.headers.get(FILENAME_HEADER) or "upload"
    if len(raw_name) > MAX_FILENAME_HEADER:
        raise ApiError(
            400, f"{FILENAME_HEADER} is longer than {MAX_FILENAME_HEADER} characters", field="filename",
            code="filename_too_long", values={"limit": MAX_FILENAME_HEADER},
        )
    filename = _decoded_filename(raw_name)
    limit = core.settings.files.upload_max_bytes
    if (request.content_length or 0) > limit:
        raise upload_too_large(limit)
    if request.content_length == 0:  # as the phone app's own upload refuses it
        raise ApiError(400, "the file is empty: there is nothing in it to send", field="body", code="upload_empty")
    try:
        saved = await core.files.save_upload(
            member.id, conversation_id, filename, request.body, declared_type=request.headers.get("Content-Type")
        )
    except RequestEntityTooLarge:  # a chunked body past the cap, cut by the request class
        raise upload_too_large(limit) from None
    except (FileError, PathRefused) as exc:
        raise _files_error(exc) from None
    return saved.summary(), 201


@bp.get("/api/file")
@query(path={"type": "string", "x-required": True, "description": "an agent path, as the fs tools name it"})
async def view_file() -> Any:
    core = current_app.config["SKALD_CORE"]
    path = request.args.get("path")
    if not path:
        raise ApiError(400, "path is required", field="path", code="field_required", values={"field": "path"})
    files = MemberFiles(core, current_principal().member)
    try:
        blob = await files.open_blob(path, start_sandbox=False)
    except Exception as exc:  # re-raised by _files_error unless it is a known refusal
        raise _files_error(exc) from None
    # Shown in the page only up to the viewer's cap: a larger image or text is a download.
    viewable = blob.size <= core.settings.files.view_max_bytes
    if blob.mime in IMAGE_TYPES and viewable:
        content_type, inline = blob.mime, True
    elif blob.mime == TEXT and viewable:
        content_type, inline = "text/plain; charset=utf-8", True
    else:
        content_type, inline = "application/octet-stream", False
    if isinstance(blob, OpenFile):
        return file_response(blob.fd, blob.size, blob.name, content_type=content_type, inline=inline)
    response = Response(blob.data, status=200, content_type=content_type)
    _file_headers(response, blob.name, inline)
    return response


#: What one read of a streamed file takes (one worker thread's trip per chunk).
STREAM_CHUNK = 1024 * 1024


class DescriptorBody(ResponseBody):
    """A response body streamed from an open, already checked file descriptor: read in
    chunks, each in a worker thread (a disk read never holds up the event loop), and
    never by name again (Quart's ``FileBody`` reopens its path, which a sandbox may have
    swapped for a link by then). Exactly ``size`` bytes, the size the headers promised:
    a file grown since is cut there; one shrunk ends the answer short, as an error, so
    the client sees a broken download rather than a whole-looking short one. The
    descriptor is closed when the body was sent, or, never sent (the client left first),
    when the body is collected."""

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self._size = size
        self._close = weakref.finalize(self, os.close, fd)

    async def __aenter__(self) -> "DescriptorBody":
        return self

    async def __aexit__(self, exc_type: type | None, exc_value: BaseException | None, tb: TracebackType | None) -> None:
        self._close()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        offset = 0
        while offset < self._size:
            chunk = await asyncio.to_thread(os.pread, self._fd, min(STREAM_CHUNK, self._size - offset), offset)
            if not chunk:
                raise OSError(f"the file shrank to {offset} bytes while it was sent ({self._size} were announced)")
            offset += len(chunk)
            yield chunk


def file_response(fd: int, size: int, name: str, *, content_type: str = "application/octet-stream", inline: bool = False) -> Response:
    """The one way a whole file of ours is answered: streamed from ``fd`` (a descriptor
    checked to be a regular file where the caller may read; this takes it over and
    closes it), ``size`` bytes of it, with headers that never let it run as a page of
    ours. No response timeout: a large file on a slow link takes as long as it takes
    (Quart's default would cut it silently after a minute)."""
    try:
        response = Response(DescriptorBody(fd, size), status=200, content_type=content_type)
    except BaseException:
        os.close(fd)
        raise
    response.content_length = size
    response.timeout = None
    _file_headers(response, name, inline)
    return response


def _file_headers(response: Response, name: str, inline: bool) -> None:
    disposition = "inline" if inline else "attachment"
    ascii_name = re.sub(r"[^A-Za-z0-9._ ()-]", "_", name) or "file"
    response.headers["Content-Disposition"] = f"{disposition}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name)}"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox"
    response.headers["Cache-Control"] = "private, no-store"

"""One JSON error shape for the whole API: ``{"error": "<what was wrong>"}``.

Internal errors answer a generic 500 and the traceback goes to the log only (check
F4: no tracebacks to clients). The default handler is registered last, so a plugin's
blueprint may handle its own errors first.
"""

from __future__ import annotations

import logging
from typing import Any

from quart import Quart, jsonify, request
from werkzeug.exceptions import HTTPException

from skald_host.core.storage import DiskFailure, DiskFull, disk_failure

log = logging.getLogger(__name__)


class ApiError(Exception):
    """``field`` names the offending input field when there is one, so a form can put
    the message beside it without parsing text."""

    def __init__(self, status: int, message: str, *, headers: dict[str, str] | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.field = field


def error_response(status: int, message: str, headers: dict[str, str] | None = None, field: str | None = None) -> Any:
    body = {"error": message}
    if field is not None:
        body["field"] = field
    response = jsonify(body)
    response.status_code = status
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


_GENERIC = {
    400: "bad request",
    401: "authentication required",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    413: "request body too large",
    415: "unsupported media type",
    429: "too many requests",
}

#: When a client may try a write the disk refused again (check G4).
STORAGE_RETRY_SECONDS = 30


def storage_failure_response(failure: DiskFailure) -> Any:
    """507 for a full disk, 503 with Retry-After for a failing one; the operator's
    detail (which file) goes to the log, not to the client."""
    log.error("storage failure on %s %s: %s", request.method, request.path, failure)
    if isinstance(failure, DiskFull):
        return error_response(507, failure.member_text)
    return error_response(503, failure.member_text, {"Retry-After": str(STORAGE_RETRY_SECONDS)})


def install_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def api_error(exc: ApiError) -> Any:
        return error_response(exc.status, exc.message, exc.headers, exc.field)

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> Any:
        status = exc.code or 500
        return error_response(status, _GENERIC.get(status, "request failed"))

    @app.errorhandler(DiskFailure)
    async def storage_error(exc: DiskFailure) -> Any:
        return storage_failure_response(exc)

    @app.errorhandler(Exception)
    async def internal_error(exc: Exception) -> Any:
        failure = disk_failure(exc, "a file") if isinstance(exc, OSError) else None  # an upload's write, say
        if failure is not None:
            return storage_failure_response(failure)
        log.error("unhandled error on %s %s", request.method, request.path, exc_info=exc)
        return error_response(500, "internal error")

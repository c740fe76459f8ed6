"""The HTTP API reference: ``/api/openapi.json`` (OpenAPI 3.1) and ``/api/reference``,
the same document as a readable page.

Both need a session, like everything under ``/api`` that is not marked public: the
document holds no secret, but it names the server's version and its enabled plugins,
and nobody needs it before logging in (the host's own routes are documented in the
source tree as well). Plugins that are disabled are left out.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from quart import Blueprint, Response, current_app

from skald_host.web.openapi import build_document
from skald_host.web.body import returns

bp = Blueprint("reference", __name__)

_CODE = re.compile(r"``?([^`]+)``?")
METHOD_ORDER = ("get", "post", "put", "patch", "delete")


def document() -> dict[str, Any]:
    core = current_app.config["SKALD_CORE"]
    return build_document(current_app, core.plugins.is_enabled)


@bp.get("/api/openapi.json")
@returns({"type": "object", "description": "an OpenAPI 3.1 document"})
async def openapi() -> dict:
    """The API reference as an OpenAPI 3.1 document: every route under /api of this server."""
    return document()


def _inline(value: str) -> str:
    """Escaped text with its `code` spans as code."""
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(" ".join(value.split())))


def _text(value: str) -> str:
    """Plain text with `code` spans, paragraph by paragraph."""
    return "".join(f"<p>{_inline(paragraph)}</p>" for paragraph in value.split("\n\n") if paragraph.strip())


def _schema(schema: Any) -> str:
    text = html.escape(json.dumps(schema, indent=2, ensure_ascii=False))
    return re.sub(
        r"&quot;#/components/schemas/([A-Za-z]+)&quot;",
        lambda m: f'&quot;<a href="#schema-{m.group(1)}">#/components/schemas/{m.group(1)}</a>&quot;',
        text,
    )


def render(doc: dict[str, Any]) -> str:
    operations: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in doc["paths"].items():
        for method in sorted(item, key=lambda m: METHOD_ORDER.index(m) if m in METHOD_ORDER else 9):
            operation = item[method]
            operations.setdefault(operation["tags"][0], []).append((method, path, operation))
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(doc['info']['title'])}</title>",
        # No icon of its own: without this line Chromium asks for /favicon.ico (a 404 in its console).
        '<link rel="icon" href="data:,">',
        '<link rel="stylesheet" href="/ui/reference.css"></head><body>',
        f"<header><h1>{html.escape(doc['info']['title'])} <small>{html.escape(doc['info']['version'])}</small></h1>",
        _text(doc["info"]["description"]),
        '<p><a href="/api/openapi.json">The OpenAPI 3.1 document</a> (JSON) for tools and client generators.</p></header>',
        '<nav><h2>Contents</h2><ul>',
    ]
    for tag in sorted(operations):
        out.append(f'<li><a href="#tag-{html.escape(tag.replace(" ", "-"))}">{html.escape(tag)}</a></li>')
    out.append('<li><a href="#schemas">schemas</a></li></ul></nav><main>')
    for tag in sorted(operations):
        out.append(f'<section><h2 id="tag-{html.escape(tag.replace(" ", "-"))}">{html.escape(tag)}</h2>')
        for method, path, operation in operations[tag]:
            out.append(f'<article id="{html.escape(operation["operationId"])}">')
            out.append(f'<h3><span class="method {method}">{method.upper()}</span> <code>{html.escape(path)}</code></h3>')
            out.append(f'<p class="summary">{html.escape(operation["summary"])}</p>')
            out.append(_text(operation.get("description", "")))
            if operation.get("parameters"):
                out.append("<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>type</th><th>required</th></tr>")
                for p in operation["parameters"]:
                    kind = p["schema"].get("type", "")
                    out.append(
                        f"<tr><td><code>{html.escape(p['name'])}</code></td><td>{p['in']}</td>"
                        f"<td>{html.escape(str(kind))}</td><td>{'yes' if p.get('required') else 'no'}</td></tr>"
                    )
                out.append("</table>")
            if "requestBody" in operation:
                for content_type, media in operation["requestBody"]["content"].items():
                    out.append(f"<h4>Request body <small>{html.escape(content_type)}</small></h4><pre>{_schema(media['schema'])}</pre>")
            out.append("<h4>Responses</h4><dl>")
            for status, response in operation["responses"].items():
                out.append(f"<dt>{html.escape(status)}</dt><dd>{_inline(response['description'])}")
                media = response.get("content", {}).get("application/json")
                if media and status.startswith("2"):
                    out.append(f"<pre>{_schema(media['schema'])}</pre>")
                out.append("</dd>")
            out.append("</dl></article>")
        out.append("</section>")
    out.append('<section><h2 id="schemas">schemas</h2>')
    for name, schema in doc["components"]["schemas"].items():
        out.append(f'<article id="schema-{html.escape(name)}"><h3>{html.escape(name)}</h3><pre>{_schema(schema)}</pre></article>')
    out.append("</section></main></body></html>")
    return "\n".join(out)


@bp.get("/api/reference")
async def reference() -> Response:
    """The API reference as a page to read (the OpenAPI document, rendered)."""
    return Response(render(document()), mimetype="text/html")

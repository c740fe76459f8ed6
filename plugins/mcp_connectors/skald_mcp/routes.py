"""The plugin's HTTP routes, mounted at ``/api/plugin/mcp/`` behind the host's gate
(session, enabled flag, grant).

Admin (``/servers…``): list, add, edit, remove and restart connectors, set who may use
each, accept a connector's changed tools. Member (``/mine``): the connectors granted to
the caller and their tools. Bad input answers 400 with what was wrong; nothing is stored
half-way.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from quart import Blueprint, Response, request

from skald_hookspecs import HostApi, current_caller
from skald_mcp import PLUGIN_ID, running
from skald_mcp.spec import SpecError, parse_spec
from skald_mcp.strings import PAGE_KEYS


def build_blueprint(host: HostApi) -> Blueprint:
    blueprint = Blueprint(PLUGIN_ID, __name__)
    script = files("skald_mcp").joinpath("page.js").read_text(encoding="utf-8")

    def strings(locale: str | None) -> dict[str, str]:
        return {key: host.translate(f"{PLUGIN_ID}.{key}", locale) for key in PAGE_KEYS}

    def error(key: str, status: int, **values: Any) -> tuple[dict[str, str], int]:
        caller = current_caller()
        return {"error": host.translate(f"{PLUGIN_ID}.{key}", caller.locale if caller else None, **values)}, status

    def admin_runtime() -> Any:
        """The runtime, or the error response to return instead."""
        caller = current_caller()
        if caller is None or not caller.is_admin:
            return error("err_admin_only", 403)
        if running.runtime is None:
            return error("err_not_running", 503)
        return running.runtime

    async def json_body() -> Any:
        body = await request.get_json(silent=True)
        if not isinstance(body, dict):
            raise SpecError("the body must be a JSON object")
        return body

    def members_of(value: Any) -> set[str]:
        if value is None:
            return set()
        if not isinstance(value, list) or not all(isinstance(m, str) and 0 < len(m) <= 64 for m in value) or len(value) > 10_000:
            raise SpecError("members must be a list of member ids")
        return set(value)

    @blueprint.get("/page.js")
    async def page_js() -> Response:
        return Response(script, mimetype="text/javascript")

    @blueprint.get("/mine")
    async def mine() -> Any:
        """The caller's connectors (granted globals), and the page's strings."""
        caller = current_caller()
        assert caller is not None
        runtime = running.runtime
        rows = []
        if runtime is not None:
            for name in sorted(runtime.specs):
                if caller.id in runtime.access.get(name, ()):
                    status = runtime.status(name)
                    rows.append({"name": name, "state": status["state"], "tools": [t["exposed_as"] for t in status["tools"] if t["offered"]]})
        return {"connectors": rows, "is_admin": caller.is_admin, "strings": strings(caller.locale)}

    @blueprint.get("/servers")
    async def servers() -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        return {"servers": [runtime.status(name) for name in sorted(runtime.specs)]}

    @blueprint.post("/servers")
    async def add_server() -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        try:
            body = await json_body()
            members = members_of(body.pop("access", None))
            spec = parse_spec(body)
        except SpecError as exc:
            return {"error": str(exc)}, 400
        if spec.name in runtime.specs:
            return error("err_exists", 409, name=spec.name)
        await runtime.add(spec, members)
        return runtime.status(spec.name), 201

    @blueprint.put("/servers/<name>")
    async def edit_server(name: str) -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        if name not in runtime.specs:
            return error("err_unknown", 404, name=name)
        try:
            body = await json_body()
            body.setdefault("name", name)
            spec = parse_spec(body, keep=runtime.specs[name])
        except SpecError as exc:
            return {"error": str(exc)}, 400
        if spec.name != name:
            return {"error": "a connector cannot be renamed; add a new one"}, 400
        await runtime.replace(spec)
        return runtime.status(name)

    @blueprint.delete("/servers/<name>")
    async def remove_server(name: str) -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        if name not in runtime.specs:
            return error("err_unknown", 404, name=name)
        await runtime.remove(name)
        return {"removed": name}

    @blueprint.post("/servers/<name>/restart")
    async def restart_server(name: str) -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        if name not in runtime.specs:
            return error("err_unknown", 404, name=name)
        await runtime.restart(name)
        return runtime.status(name)

    @blueprint.put("/servers/<name>/access")
    async def set_access(name: str) -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        if name not in runtime.specs:
            return error("err_unknown", 404, name=name)
        try:
            members = members_of((await json_body()).get("members"))
        except SpecError as exc:
            return {"error": str(exc)}, 400
        await runtime.set_access(name, members)
        return {"name": name, "access": sorted(members)}

    @blueprint.post("/servers/<name>/accept")
    async def accept(name: str) -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        if name not in runtime.specs:
            return error("err_unknown", 404, name=name)
        await runtime.accept(name)
        return runtime.status(name)

    return blueprint

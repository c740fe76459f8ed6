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
from skald_mcp.members import MemberConnectors
from skald_mcp.oauth import OAuthError, parse_provider, public_provider
from skald_mcp.spec import SpecError, parse_remote, parse_spec, parse_template, parse_values
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
        rows, own, catalog = [], [], []
        config = await host.get_config()
        if runtime is not None:
            for name in sorted(runtime.specs):
                if caller.id in runtime.access.get(name, ()):
                    status = runtime.status(name)
                    rows.append({"name": name, "state": status["state"], "tools": [t["exposed_as"] for t in status["tools"] if t["offered"]]})
            members: MemberConnectors = runtime.members
            own = [members.status(caller.id, name) for name in sorted(members.records.get(caller.id, {}))]
            for name, template in sorted(runtime.templates.items()):
                record = members.records.get(caller.id, {}).get(name)
                catalog.append({**template.public(), "activated": record is not None, "update_available": bool(record and record.get("version", 0) < template.version)})
        return {
            "connectors": rows,
            "own": own,
            "catalog": catalog,
            "may_add_remote": bool(config.get("members_add_remote")),
            "is_admin": caller.is_admin,
            "strings": strings(caller.locale),
        }

    # -- the member's own connectors (in their encrypted file) --------------------------------

    def member_runtime() -> Any:
        caller = current_caller()
        if caller is None:
            return error("err_admin_only", 403)
        if running.runtime is None:
            return error("err_not_running", 503)
        if caller.id not in host.unlocked_members():
            return error("err_locked", 409)
        return running.runtime

    @blueprint.post("/my/connectors")
    async def activate() -> Any:
        """Activate a catalog template (``{"template", "values"}``) or register an own
        remote server (``{"remote": {"name", "url", "headers"}}``, when the admin allows
        it). Members never give a command."""
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        caller = current_caller()
        config = await host.get_config()
        members: MemberConnectors = runtime.members
        mine = members.records.setdefault(caller.id, {})
        try:
            body = await json_body()
            if "remote" in body:
                if set(body) != {"remote"} or not isinstance(body["remote"], dict):
                    raise SpecError("give either remote or template and values")
                if not config.get("members_add_remote"):
                    return error("err_no_remote", 403)
                spec = parse_remote(body["remote"])
                if not config.get("allow_private_addresses"):
                    from skald_mcp.guard import check_public

                    await check_public(spec.url)
                record = {"kind": "remote", "name": spec.name, "url": spec.url, "headers": dict(spec.headers), "state": "ready"}
            else:
                if set(body) - {"template", "values"}:
                    raise SpecError(f"unknown field(s): {', '.join(sorted(set(body) - {'template', 'values'}))}")
                template = runtime.templates.get(body.get("template")) if isinstance(body.get("template"), str) else None
                if template is None:
                    return error("err_no_template", 404, name=str(body.get("template"))[:40])
                values = parse_values(template, body.get("values"))
                record = {"kind": "catalog", "name": template.name, "template": template.name, "version": template.version, "values": values, "state": "ready"}
                if template.oauth:
                    record.update(state="needs_oauth", provider=template.oauth["provider"], resource=template.url)
                elif template.login == "qr":
                    record.update(state="needs_login")  # started now: it has to produce the QR code
        except SpecError as exc:
            return {"error": str(exc)}, 400
        name = record["name"]
        if name in mine or name in runtime.specs:
            return error("err_exists", 409, name=name)
        await members.save(caller.id, name, record)
        if record["state"] in ("ready", "needs_login"):
            await members.connect(caller.id, name)
        return members.status(caller.id, name), 201

    @blueprint.get("/my/connectors")
    async def own() -> Any:
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        caller = current_caller()
        members: MemberConnectors = runtime.members
        return {"connectors": [members.status(caller.id, name) for name in sorted(members.records.get(caller.id, {}))]}

    def own_record(runtime: Any, name: str) -> Any:
        caller = current_caller()
        record = runtime.members.records.get(caller.id, {}).get(name)
        return record if record is not None else error("err_unknown", 404, name=name[:40])

    @blueprint.delete("/my/connectors/<name>")
    async def deactivate(name: str) -> Any:
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        record = own_record(runtime, name)
        if isinstance(record, tuple):
            return record
        caller = current_caller()
        await runtime.members.disconnect(caller.id, name)
        await runtime.members.save(caller.id, name, None)
        return {"removed": name}

    @blueprint.post("/my/connectors/<name>/accept")
    async def accept_own(name: str) -> Any:
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        record = own_record(runtime, name)
        if isinstance(record, tuple):
            return record
        await runtime.members.accept(current_caller().id, name)
        return runtime.members.status(current_caller().id, name)

    @blueprint.get("/my/connectors/<name>/login/status")
    async def login_status(name: str) -> Any:
        """The QR / device login: ``{state, qr?, message}`` from the connector's
        ``login_status`` tool, polled by the page."""
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        record = own_record(runtime, name)
        if isinstance(record, tuple):
            return record
        try:
            return await runtime.members.login_status(current_caller().id, name)
        except (SpecError, RuntimeError) as exc:
            return {"error": str(exc)}, 502

    @blueprint.post("/my/connectors/<name>/login/reset")
    async def login_reset(name: str) -> Any:
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        record = own_record(runtime, name)
        if isinstance(record, tuple):
            return record
        try:
            return await runtime.members.login_reset(current_caller().id, name)
        except (SpecError, RuntimeError) as exc:
            return {"error": str(exc)}, 502

    @blueprint.get("/my/elicitations")
    async def elicitations() -> Any:
        """What the caller's connectors are asking them right now (RAM only)."""
        caller = current_caller()
        runtime = running.runtime
        return {"elicitations": runtime.elicitations.for_member(caller.id) if runtime is not None and caller else []}

    @blueprint.post("/my/elicitations/<elicitation_id>")
    async def answer_elicitation(elicitation_id: str) -> Any:
        """``{"action": "accept", "content": {...}}`` or ``{"action": "decline"}``. The
        answer goes to the server only: never stored, never logged."""
        from skald_mcp.elicitation import ElicitationError

        caller = current_caller()
        runtime = running.runtime
        if runtime is None or caller is None:
            return error("err_not_running", 503)
        try:
            body = await json_body()
            runtime.elicitations.answer(caller.id, elicitation_id, body.get("action"), body.get("content"))
        except LookupError:
            return error("err_elicitation_gone", 404)
        except (SpecError, ElicitationError) as exc:
            return {"error": str(exc)}, 400
        return {"answered": elicitation_id}

    @blueprint.post("/my/connectors/<name>/oauth/start")
    async def oauth_start(name: str) -> Any:
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        record = own_record(runtime, name)
        if isinstance(record, tuple):
            return record
        template = runtime.templates.get(record.get("template") or "")
        if template is None or not template.oauth:
            return {"error": "this connector does not sign in with OAuth"}, 400
        try:
            url = runtime.oauth.start(current_caller().id, name, template.oauth["provider"], template.oauth["scopes"], template.url)
        except OAuthError as exc:
            return {"error": str(exc)}, 409
        return {"url": url}

    @blueprint.post("/my/connectors/<name>/oauth/complete")
    async def oauth_complete(name: str) -> Any:
        """``{"state", "code"}``: the code the provider showed, pasted back."""
        runtime = member_runtime()
        if isinstance(runtime, tuple):
            return runtime
        record = own_record(runtime, name)
        if isinstance(record, tuple):
            return record
        caller = current_caller()
        try:
            body = await json_body()
            flow = runtime.oauth.take(caller.id, name, body.get("state"))
            tokens = await runtime.oauth.exchange(flow, body.get("code"))
        except (SpecError, OAuthError) as exc:
            return {"error": str(exc)}, 400
        record = {**record, "refresh_token": tokens["refresh_token"], "state": "ready"}
        await runtime.members.save(caller.id, name, record)
        await runtime.members.connect(caller.id, name)
        return runtime.members.status(caller.id, name)

    # -- the catalog and the sign-in providers (admin) ----------------------------------------

    @blueprint.get("/catalog")
    async def catalog() -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        return {"templates": [t.as_json() for _, t in sorted(runtime.templates.items())]}

    @blueprint.put("/catalog/<name>")
    async def put_template(name: str) -> Any:
        """Add or update a template; a higher ``version`` is the update signal members
        see beside their activation."""
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        try:
            body = await json_body()
            body.setdefault("name", name)
            template = parse_template(body)
        except SpecError as exc:
            return {"error": str(exc)}, 400
        if template.name != name:
            return {"error": "the name in the body differs from the address"}, 400
        if template.oauth and template.oauth["provider"] not in runtime.oauth.providers:
            return error("err_no_provider", 400, name=template.oauth["provider"])
        runtime.templates[name] = template
        await runtime.save_catalog()
        return template.as_json()

    @blueprint.delete("/catalog/<name>")
    async def delete_template(name: str) -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        if runtime.templates.pop(name, None) is None:
            return error("err_no_template", 404, name=name[:40])
        await runtime.save_catalog()
        return {"removed": name}

    @blueprint.get("/providers")
    async def providers() -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        return {"providers": [public_provider(p) for _, p in sorted(runtime.oauth.providers.items())]}

    @blueprint.put("/providers/<name>")
    async def put_provider(name: str) -> Any:
        """Endpoints (or an ``issuer`` to discover them from), client credentials and the
        redirect page. The client secret is write-only."""
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        config = await host.get_config()
        try:
            body = await json_body()
            body.setdefault("name", name)
            provider = parse_provider(body, keep=runtime.oauth.providers.get(name))
            if provider["name"] != name:
                raise SpecError("the name in the body differs from the address")
            provider = await runtime.oauth.discover(provider, allow_private=bool(config.get("allow_private_addresses")))
        except SpecError as exc:
            return {"error": str(exc)}, 400
        runtime.oauth.providers[name] = provider
        await runtime.oauth.save()
        return public_provider(provider)

    @blueprint.delete("/providers/<name>")
    async def delete_provider(name: str) -> Any:
        runtime = admin_runtime()
        if isinstance(runtime, tuple):
            return runtime
        if runtime.oauth.providers.pop(name, None) is None:
            return error("err_no_provider", 404, name=name[:40])
        await runtime.oauth.save()
        return {"removed": name}

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
            by_default = body.pop("grant_by_default", True)
            if not isinstance(by_default, bool):
                raise SpecError("grant_by_default must be true or false")
            spec = parse_spec(body)
        except SpecError as exc:
            return {"error": str(exc)}, 400
        if spec.name in runtime.specs:
            return error("err_exists", 409, name=spec.name)
        await runtime.add(spec, members, by_default)
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

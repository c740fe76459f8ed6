"""The plugin's HTTP routes, mounted at ``/api/plugin/mcp/`` behind the host's gate
(session, enabled flag, grant).

Admin (``/servers…``): list, add, edit, remove and restart connectors, set who may use
each, accept a connector's changed tools. Member (``/mine``): the connectors granted to
the caller and their tools. Bad input answers 400 with what was wrong; nothing is stored
half-way.
"""

from __future__ import annotations

import functools
import secrets
from importlib.resources import files
from typing import Any, Awaitable, Callable

from quart import Blueprint, Response, request

from skald_hookspecs import ChannelRequestError, HostApi, ToolError, current_caller
from skald_mcp import PLUGIN_ID, running
from skald_mcp.members import MemberConnectors
from skald_mcp.oauth import OAuthError, parse_provider, pasted_code, public_provider
from skald_mcp.runtime import ReviewOutdated
from skald_mcp.spec import SpecError, destination, parse_remote, parse_spec, parse_template, parse_values, unknown_fields
from skald_mcp.strings import PAGE_KEYS, STRINGS


#: The role capabilities of self-service (seed 001 "MCP connectors"): activating an
#: admin-vetted catalog template, and registering one's own remote server.
ACTIVATE = "connectors.activate"
REMOTE = "connectors.remote"
#: The most tools one accept may name (a server listing more is accepted in parts).
MAX_ACCEPTED = 1000


def login_session(caller: Any) -> str:
    """The credential a request came with, for binding a sign-in's ``state`` to it
    (check E5): the login session's opaque handle, or the device token's id. The two
    are kept apart by their prefix. A caller with neither gets a value no later request
    has, so its sign-in can never be completed (fail closed), not one shared by all such
    callers of the member."""
    if caller.session_id:
        return f"session:{caller.session_id}"
    if caller.device_id:
        return f"device:{caller.device_id}"
    return f"none:{secrets.token_hex(16)}"


def build_blueprint(host: HostApi) -> Blueprint:
    blueprint = Blueprint(PLUGIN_ID, __name__)
    script = files("skald_mcp").joinpath("page.js").read_text(encoding="utf-8")
    member_script = files("skald_mcp").joinpath("member.js").read_text(encoding="utf-8")

    def strings(locale: str | None) -> dict[str, str]:
        return {key: host.translate(f"{PLUGIN_ID}.{key}", locale) for key in PAGE_KEYS}

    def error(key: str, status: int, /, **values: Any) -> tuple[dict[str, str], int]:
        caller = current_caller()
        return {"error": host.translate(f"{PLUGIN_ID}.{key}", caller.locale if caller else None, **values), "code": f"{PLUGIN_ID}.{key}"}, status

    def withdrawn(record: dict[str, Any], name: str) -> tuple[dict[str, str], int]:
        """The refusal for a template that is not (or no longer) open to the caller, as
        activating it answers: to them the catalog has no such connector."""
        return error("err_no_template", 404, name=str(record.get("template") or name)[:40])

    def labelled(values: dict[str, Any], locale: str | None) -> dict[str, Any]:
        """A refusal's ``what`` (the field at fault, a JSON key) as its label in the
        reader's language, where the page has one (``label_<key>``)."""
        what = values.get("what")
        if isinstance(what, str) and f"label_{what}" in STRINGS["en"]:
            return {**values, "what": host.translate(f"{PLUGIN_ID}.label_{what}", locale)}
        return values

    def refused(exc: SpecError, status: int = 400) -> tuple[dict[str, Any], int]:
        """A ``SpecError`` (an ``OAuthError`` too) as an answer, 400 unless said: a
        coded one in the caller's language, with its code (``mcp.err_…``, never one of
        the host's) and the field at fault."""
        if not exc.code:
            return {"error": str(exc)}, status
        caller = current_caller()
        body, status = error(f"err_{exc.code}", status, **labelled(exc.values, caller.locale if caller else None))
        return {**body, "values": exc.values, "field": exc.field or None}, status

    def said(exc: SpecError) -> str:
        """A coded refusal a connector failed with, as its status shows it: in the
        caller's language, like ``refused``."""
        caller = current_caller()
        locale = caller.locale if caller else None
        return host.translate(f"{PLUGIN_ID}.err_{exc.code}", locale, **labelled(exc.values, locale))

    def guarded(who: str, *, own: bool = False, server: bool = False) -> Callable[[Any], Any]:
        """The checks every route makes, once: ``who`` is ``"admin"`` or ``"member"``
        (the caller's file must be open); ``own``: ``<name>`` is one of the caller's own
        connectors (its record is passed as ``record``); ``server``: ``<name>`` is a
        global connector. The view receives ``(runtime, caller, **path)``; a
        ``SpecError`` it raises answers 400 with its message."""

        def wrap(view: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            @functools.wraps(view)
            async def checked(**path: Any) -> Any:
                caller = current_caller()
                if caller is None or (who == "admin" and not caller.is_admin):
                    return error("err_admin_only", 403)
                runtime = running.runtime
                if runtime is None:
                    return error("err_not_running", 503)
                if who == "member" and caller.id not in host.unlocked_members():
                    return error("err_locked", 409)
                if who == "member":
                    await runtime.members.records_read(caller.id)
                name = path.get("name", "")
                if server and name not in runtime.specs:
                    return error("err_unknown", 404, name=name[:40])
                if own:
                    record = runtime.members.records.get(caller.id, {}).get(name)
                    if record is None:
                        return error("err_unknown", 404, name=name[:40])
                    path["record"] = record
                try:
                    return await view(runtime, caller, **path)
                except SpecError as exc:
                    return refused(exc)

            return checked

        return wrap

    async def read_body() -> Any:
        """The body through the host's one JSON reader (whatever its content type, as the
        host's own routes read theirs); None when empty. A body it cannot read (not
        JSON, not UTF-8, a NaN, nested too deep) is refused right there with the host's
        400, which says what is wrong and names the field: never "the body must be an
        object", and never read as ``{}`` (the client would hear a field is missing)."""
        return await request.get_json(force=True)

    async def json_body() -> Any:
        body = await read_body()
        if not isinstance(body, dict):
            raise SpecError(code="body_not_object")
        return body

    async def shown_tools() -> dict[str, str]:
        """What an accept vouches for: ``{"tools": {<tool>: <hash>}}``, each withheld tool
        with the ``hash`` its ``pending_tools`` entry showed. Required, with no default:
        without it the accept would pin whatever the server lists when the request
        arrives, a definition changed after the page was drawn included."""
        body = await read_body()
        body = {} if body is None else body
        if not isinstance(body, dict):
            raise SpecError(code="body_not_object")
        if set(body) - {"tools"}:
            raise unknown_fields(set(body) - {"tools"})
        tools = body.get("tools")
        if tools is None:
            raise SpecError(code="accept_tools_missing", field="tools")
        if (
            not isinstance(tools, dict) or not 0 < len(tools) <= MAX_ACCEPTED
            or not all(isinstance(h, str) and 0 < len(n) <= 256 and 0 < len(h) <= 128 for n, h in tools.items())
        ):
            raise SpecError(code="accept_tools_invalid", field="tools", limit=MAX_ACCEPTED)
        return tools

    def outdated(exc: ReviewOutdated) -> tuple[dict[str, str], int]:
        """An accept naming a tool changed since the page showed it: 409, nothing
        pinned, for the page to draw the tool as it is now."""
        return error("err_tools_changed", 409, tools=", ".join(exc.tools)[:500])

    def members_of(value: Any) -> set[str]:
        if value is None:
            return set()
        if not isinstance(value, list) or not all(isinstance(m, str) and 0 < len(m) <= 64 for m in value) or len(value) > 10_000:
            raise SpecError(code="members_invalid")
        return set(value)

    async def access_body() -> Any:
        """The ``members`` of a ``PUT …/access`` (the whole list): required, and the
        only field. Read as "no one" (or, for a template, "everyone") when missing, a
        body with the create route's ``access`` key, or a typo, would change who may use
        the connector the other way than the admin meant, silently."""
        body = await json_body()
        if set(body) - {"members"}:
            raise unknown_fields(set(body) - {"members"})
        if "members" not in body:
            raise SpecError(code="members_missing", field="members")
        return body["members"]

    async def known(members: set[str] | None, had: Any = ()) -> None:
        """Refuse an access list naming someone who is no member the plugin is granted
        to (``HostApi.member_has_grant``: a mistyped id, a deleted member), before
        anything is stored. Only the ids the change adds are asked: one kept from
        before (a member since deleted) does not block taking someone else out."""
        for member_id in sorted((members or set()) - set(had or ())):
            try:
                granted = await host.member_has_grant(member_id)
            except Exception:  # noqa: BLE001 - a host that raises for an unknown id (not False)
                granted = False
            if not granted:
                raise SpecError(code="member_unknown", field="members", id=member_id)

    @blueprint.get("/page.js")
    async def page_js() -> Response:
        return Response(script, mimetype="text/javascript")

    @blueprint.get("/member.js")
    async def member_js() -> Response:
        return Response(member_script, mimetype="text/javascript")

    @blueprint.get("/members/<member_id>/grants")
    @guarded("admin")
    async def member_grants(runtime: Any, caller: Any, member_id: str) -> Any:
        """For the member's page in the admin's Members area: each global connector and
        whether the member may use it, and each template's access (``null``: everyone
        with the plugin). Written through the same ``…/access`` routes as this page."""
        strings = {key: host.translate(f"{PLUGIN_ID}.grants_{key}", caller.locale) for key in ("hint", "none", "everyone", "template")}
        return {
            "servers": [
                {"name": name, "granted": member_id in runtime.access.get(name, ()), "access": sorted(runtime.access.get(name, ()))}
                for name in sorted(runtime.specs)
            ],
            "templates": [
                {"name": name, "title": runtime.templates[name].title, "granted": runtime.may_use_template(member_id, name), "access": runtime.template_status(name)["access"]}
                for name in sorted(runtime.templates)
            ],
            "strings": strings,
        }

    @blueprint.get("/mine")
    async def mine() -> Any:
        """The caller's connectors (granted globals, their own), the catalog templates
        open to them, what they may do, and the page's strings."""
        caller = current_caller()
        assert caller is not None
        runtime = running.runtime
        rows, own, catalog = [], [], []
        if runtime is not None:
            for name in sorted(runtime.specs):
                if caller.id in runtime.access.get(name, ()):
                    status = runtime.status(name)
                    if runtime.shadowed(caller.id, name):
                        # One of their own has this name: theirs is the one their
                        # assistant uses (``Runtime.member_tools``), and the page says so.
                        reason = host.translate(f"{PLUGIN_ID}.mine_name_clash", caller.locale, name=name)
                        rows.append({"name": name, "state": status["state"], "tools": [], "reason": reason, "shadowed": True})
                        continue
                    # Why it failed is the admin's to read (it may quote their command or
                    # environment): the member reads that it is unavailable, and who knows why.
                    reasons = {"failed": "mine_unavailable", "reconnecting": "mine_reconnecting"}
                    reason = host.translate(f"{PLUGIN_ID}.{reasons[status['state']]}", caller.locale) if status["state"] in reasons else None
                    rows.append({"name": name, "state": status["state"], "tools": [t["exposed_as"] for t in status["tools"] if t["offered"]], "reason": reason})
            members: MemberConnectors = runtime.members
            own = [members.status(caller.id, name, said, caller.may) for name in sorted(members.records.get(caller.id, {}))]
            for name, template in sorted(runtime.templates.items()):
                if not runtime.may_use_template(caller.id, name) and not caller.is_admin:
                    continue
                record = members.records.get(caller.id, {}).get(name)
                if record is not None and (record.get("kind") != "catalog" or record.get("template") != name):
                    record = None  # their own remote connector of that name is no activation of it
                catalog.append({**template.public(), "activated": record is not None, "update_available": bool(record and members.update_offer(record))})
        return {
            "connectors": rows,
            "own": own,
            "catalog": catalog,
            "may_activate": caller.may(ACTIVATE),
            "may_add_remote": caller.may(REMOTE),
            "is_admin": caller.is_admin,
            "strings": strings(caller.locale),
        }

    # -- the member's own connectors (in their encrypted file) --------------------------------

    @blueprint.post("/my/connectors")
    @guarded("member")
    async def activate(runtime: Any, caller: Any) -> Any:
        """Activate a catalog template (``{"template", "values"}``, with the role's
        ``connectors.activate`` and the template open to the caller) or register an own
        remote server (``{"remote": {"name", "url", "headers"}}``, with
        ``connectors.remote``). Members never give a command."""
        config = await host.get_config()
        members: MemberConnectors = runtime.members
        members.records.setdefault(caller.id, {})  # their records, read again under the lock below
        body = await json_body()
        if "remote" in body:
            if set(body) != {"remote"} or not isinstance(body["remote"], dict):
                raise SpecError(code="remote_or_template")
            if not caller.may(REMOTE):
                return error("err_no_remote", 403)
            spec = parse_remote(body["remote"])
            if not config.get("allow_private_addresses"):
                from skald_mcp.guard import check_public

                try:
                    await check_public(spec.url)
                except SpecError as exc:
                    if exc.code != "private_address":
                        raise
                    # A member cannot change it, but can ask for it by its name.
                    raise SpecError(code="private_address_member", field="url", **exc.values) from None
            record = {"kind": "remote", "name": spec.name, "url": spec.url, "headers": dict(spec.headers), "state": "ready"}
        else:
            if set(body) - {"template", "values"}:
                raise unknown_fields(set(body) - {"template", "values"})
            if not caller.may(ACTIVATE):
                return error("err_no_activate", 403)
            name = body.get("template") if isinstance(body.get("template"), str) else None
            template = runtime.templates.get(name) if name and (caller.is_admin or runtime.may_use_template(caller.id, name)) else None
            if template is None:
                return error("err_no_template", 404, name=str(body.get("template"))[:40])
            values = parse_values(template, body.get("values"))
            record = {
                "kind": "catalog", "name": template.name, "template": template.name, "version": template.version, "values": values,
                "state": "ready", "destination": destination(template, runtime.oauth.providers.get(template.oauth["provider"]) if template.oauth else None),
            }
            if template.oauth:
                record.update(state="needs_oauth", provider=template.oauth["provider"], resource=template.url)  # "" for stdio
            elif template.login == "qr":
                record.update(state="needs_login")  # started now: it has to produce the QR code
        name = record["name"]
        # The check and the save under the member's lock: of concurrent activations of
        # one name, one is saved and the others read it there (409), never two saved
        # and connected over each other. The connect runs after it (``connect`` keeps
        # one session per connector by itself).
        async with members.serial(caller.id):
            mine = members.records.get(caller.id)
            if mine is None:
                return error("err_locked", 409)  # their file closed while the body was read
            # One name, one connector, in the member's view: theirs, their administrator's
            # connectors and the catalog's templates (``Runtime.member_tools``).
            if name in mine:
                return error("err_exists", 409, name=name)
            if record["kind"] == "remote" and (name in runtime.specs or name in runtime.templates):
                return error("err_name_taken_member", 409, name=name)
            if name in runtime.specs:  # a template named like an admin's connector (an earlier version let it be)
                return error("err_template_name_clash", 409, name=name)
            await members.save(caller.id, name, record)
        if record["state"] in ("ready", "needs_login"):
            await members.connect(caller.id, name)
        return members.status(caller.id, name, said, caller.may), 201

    @blueprint.get("/my/connectors")
    @guarded("member")
    async def own(runtime: Any, caller: Any) -> Any:
        members: MemberConnectors = runtime.members
        return {"connectors": [members.status(caller.id, name, said, caller.may) for name in sorted(members.records.get(caller.id, {}))]}

    @blueprint.get("/my/connectors/<name>")
    @guarded("member", own=True)
    async def own_one(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        """One of the caller's connectors, for its own page."""
        return runtime.members.status(caller.id, name, said, caller.may)

    @blueprint.delete("/my/connectors/<name>")
    @guarded("member", own=True)
    async def deactivate(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        await runtime.members.remove(caller.id, name)
        return {"removed": name}

    @blueprint.post("/my/connectors/<name>/accept")
    @guarded("member", own=True)
    async def accept_own(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        """``{"tools": {<tool>: <hash>}}``: the withheld tools as the page showed them."""
        shown = await shown_tools()
        try:
            await runtime.members.accept(caller.id, name, shown)
        except ReviewOutdated as exc:
            return outdated(exc)
        return runtime.members.status(caller.id, name, said, caller.may)

    @blueprint.post("/my/connectors/<name>/restart")
    @guarded("member", own=True)
    async def restart_own(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        """Start the caller's own connector anew, as ``servers/<name>/restart`` does a
        global one (the caller's own only: another's name is unknown here). One that
        waits for its sign-in answers 409 (sign in first)."""
        try:
            await runtime.members.restart(caller.id, name)
        except SpecError as exc:
            return refused(exc, 409)
        return runtime.members.status(caller.id, name, said, caller.may)

    @blueprint.post("/my/connectors/<name>/update")
    @guarded("member", own=True)
    async def update_own(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        """Re-activate on the template's newer version (``{"values"}`` only when the
        update moved it elsewhere: see ``MemberConnectors.update_offer``)."""
        template = runtime.templates.get(record.get("template") or "")
        if record.get("kind") != "catalog" or template is None or not (caller.is_admin or runtime.may_use_template(caller.id, template.name)):
            return withdrawn(record, name)
        if runtime.members.update_offer(record) is None:
            return error("err_up_to_date", 409, name=name)
        body = await read_body()
        body = {} if body is None else body
        if not isinstance(body, dict):
            raise SpecError(code="body_not_object")
        if set(body) - {"values"}:
            raise unknown_fields(set(body) - {"values"})
        await runtime.members.update(caller.id, name, template, body.get("values"))
        return runtime.members.status(caller.id, name, said, caller.may)

    @blueprint.get("/my/connectors/<name>/login/status")
    @guarded("member", own=True)
    async def login_status(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        """The QR / device login as known: ``{state, qr?, message, running}``, polled by
        the page. Read-only: it starts nothing, asks the connector nothing and writes
        nothing (the plugin follows the login by itself; ``POST …/login/check`` asks
        now). A connector that is not running reads ``stopped``."""
        status = runtime.members.login_known(caller.id, name, said)
        if status["state"] == "stopped" and not status["message"]:
            status["message"] = host.translate(f"{PLUGIN_ID}.login_not_running", caller.locale)
        return status

    @blueprint.post("/my/connectors/<name>/login/check")
    @guarded("member", own=True)
    async def login_check(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        """Ask the connector's ``login_status`` now, starting the connector if it is not
        running, and record what it says (linked: its tools are offered; no longer
        linked: withdrawn): ``{state, qr?, message}``. The page calls it once as it
        draws the device-login panel, then polls the read-only ``GET …/login/status``."""
        try:
            return await runtime.members.login_status(caller.id, name, said)
        except SpecError as exc:
            return refused(exc, 400 if exc.code == "no_device_login" else 502)
        except (RuntimeError, ToolError) as exc:  # the connector's own words, or its session gone
            return error("err_login_failed", 502, detail=str(exc)[:500])

    @blueprint.post("/my/connectors/<name>/login/reset")
    @guarded("member", own=True)
    async def login_reset(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        try:
            return await runtime.members.login_reset(caller.id, name, said)
        except SpecError as exc:
            return refused(exc, 400 if exc.code == "no_device_login" else 502)
        except (RuntimeError, ToolError) as exc:
            return error("err_login_failed", 502, detail=str(exc)[:500])

    @blueprint.get("/my/elicitations")
    @guarded("member")
    async def elicitations(runtime: Any, caller: Any) -> Any:
        """What the caller's connectors are asking them right now: the host's questions
        this plugin's tools asked (RAM only; the same cards the conversation shows)."""
        questions = await host.member_questions(caller.id)
        return {"elicitations": [{"id": q["question_id"], "conversation_id": q["conversation_id"], "message": q["message"], "fields": q["fields"]} for q in questions]}

    @blueprint.post("/my/elicitations/<elicitation_id>")
    @guarded("member")
    async def answer_elicitation(runtime: Any, caller: Any, elicitation_id: str) -> Any:
        """``{"action": "accept", "content": {...}}`` or ``{"action": "decline"}``. The
        answer goes to the server only: never stored, never logged."""
        body = await json_body()
        if elicitation_id not in {q["question_id"] for q in await host.member_questions(caller.id)}:
            return error("err_elicitation_gone", 404)
        try:
            await host.answer_question(caller.id, elicitation_id, body.get("action"), body.get("content"))
        except ChannelRequestError as exc:
            if elicitation_id not in {q["question_id"] for q in await host.member_questions(caller.id)}:
                return error("err_elicitation_gone", 404)  # settled meanwhile (answered elsewhere, the turn stopped)
            # The host's reason, in the member's language already (a field missing or
            # of the wrong kind, an action the question has not): it keeps waiting.
            return error("err_elicitation_answer_invalid", 400, detail=str(exc)[:500])
        return {"answered": elicitation_id}

    @blueprint.post("/my/connectors/<name>/oauth/start")
    @guarded("member", own=True)
    async def oauth_start(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        if not runtime.members.usable(caller.id, name):
            return withdrawn(record, name)
        template = runtime.templates.get(record.get("template") or "")
        if template is None or not template.oauth:
            return error("err_not_oauth", 400)
        try:
            url = runtime.oauth.start(caller.id, login_session(caller), name, template.oauth["provider"], template.oauth["scopes"], template.url)  # no resource for stdio
        except OAuthError as exc:
            return refused(exc, 409)
        return {"url": url}

    @blueprint.post("/my/connectors/<name>/oauth/complete")
    @guarded("member", own=True)
    async def oauth_complete(runtime: Any, caller: Any, name: str, record: dict[str, Any]) -> Any:
        """``{"state", "code"}``: the code the provider showed, pasted back. The
        template may be taken away from the caller after the start: asked again before
        the token request (which carries the admin's client secret) and after it,
        before anything is stored."""
        if not runtime.members.usable(caller.id, name):
            return withdrawn(record, name)
        try:
            body = await json_body()
            # The code first: an empty or overlong paste is refused without taking the
            # one-time state, so the member can paste again into the same sign-in.
            code = pasted_code(body.get("code"))
            flow = runtime.oauth.take(caller.id, login_session(caller), name, body.get("state"))
            tokens = await runtime.oauth.exchange(flow, code)
        except OAuthError as exc:
            return refused(exc)
        if not runtime.members.usable(caller.id, name):
            return withdrawn(record, name)
        # Signing in is consent to where the template and its sign-in service are now.
        template = runtime.templates.get(record.get("template") or "")
        pinned = destination(template, runtime.oauth.providers.get(template.oauth["provider"])) if template and template.oauth else record.get("destination")
        record = {**record, "refresh_token": tokens["refresh_token"], "state": "ready", "destination": pinned}
        await runtime.members.save(caller.id, name, record)
        await runtime.members.connect(caller.id, name)
        return runtime.members.status(caller.id, name, said, caller.may)

    # -- the catalog and the sign-in providers (admin) ----------------------------------------

    @blueprint.get("/catalog")
    @guarded("admin")
    async def catalog(runtime: Any, caller: Any) -> Any:
        return {"templates": [runtime.template_status(name) for name in sorted(runtime.templates)]}

    @blueprint.put("/catalog/<name>")
    @guarded("admin")
    async def put_template(runtime: Any, caller: Any, name: str) -> Any:
        """Add or update a template; a higher ``version`` is the update signal members
        see beside their activation. At the template's birth (default access):
        ``access``, the member ids who may use it (absent: every member the plugin is
        granted to), and ``grant_by_default`` (a member created later receives it).
        Later, ``PUT catalog/<name>/access`` changes who may use it."""
        body = await json_body()
        body.setdefault("name", name)
        new = name not in runtime.templates
        access = body.pop("access", None)
        members = None if access is None else members_of(access)
        if new:
            await known(members)
        by_default = body.pop("grant_by_default", True)
        if not isinstance(by_default, bool):
            raise SpecError(code="grant_by_default_invalid", field="grant_by_default")
        template = parse_template(body)
        if template.name != name:
            raise SpecError(code="name_differs", field="name")
        if new:
            # One name, one connector in a member's view: a template named like a
            # connector of the admin's could not be activated, and one named like a
            # member's own would hide it (an activation of an earlier template of this
            # name is its own, as before).
            if name in runtime.specs:
                return error("err_name_global", 409, name=name)
            if runtime.members.named(name, template=name):
                return error("err_name_member", 409, name=name)
        if template.oauth and template.oauth["provider"] not in runtime.oauth.providers:
            return error("err_no_provider", 400, name=template.oauth["provider"])
        runtime.templates[name] = template
        await runtime.save_catalog()
        if new:
            await runtime.set_template_access(name, members, by_default)
        await runtime.members.stop_moved()  # moved at the same version: its activations stop now
        return runtime.template_status(name)

    @blueprint.put("/catalog/<name>/access")
    @guarded("admin")
    async def set_template_access(runtime: Any, caller: Any, name: str) -> Any:
        """``{"members": [...]}``: who may see and activate the template (``null``:
        every member the plugin is granted to). Revoking it withdraws the tools of
        activations made from it at once (each call checks it)."""
        if name not in runtime.templates:
            return error("err_no_template", 404, name=name[:40])
        chosen = await access_body()
        members = None if chosen is None else members_of(chosen)
        await known(members, runtime.template_access.get(name))
        await runtime.set_template_access(name, members)
        return runtime.template_status(name)

    @blueprint.route("/catalog/<name>/access/<member_id>", methods=["PUT", "DELETE"])
    @guarded("admin")
    async def set_template_member(runtime: Any, caller: Any, name: str, member_id: str) -> Any:
        """Open (PUT) or close (DELETE) the template to one member, the others untouched,
        as for a connector's grants. Closing a template open to everyone to one member
        is refused: it would have to invent the list of all the others."""
        if name not in runtime.templates:
            return error("err_no_template", 404, name=name[:40])
        (member,) = members_of([member_id])
        if request.method == "DELETE" and runtime.template_status(name)["access"] is None:
            return error("err_template_open_to_everyone", 409, name=name)
        if request.method == "PUT":
            await known({member}, runtime.template_access.get(name))
        await runtime.set_template_member(name, member, request.method == "PUT")
        return runtime.template_status(name)

    @blueprint.delete("/catalog/<name>")
    @guarded("admin")
    async def delete_template(runtime: Any, caller: Any, name: str) -> Any:
        if runtime.templates.pop(name, None) is None:
            return error("err_no_template", 404, name=name[:40])
        await runtime.save_catalog()
        await runtime.forget_template(name)
        return {"removed": name}

    @blueprint.get("/providers")
    @guarded("admin")
    async def providers(runtime: Any, caller: Any) -> Any:
        return {"providers": [public_provider(p) for _, p in sorted(runtime.oauth.providers.items())]}

    @blueprint.put("/providers/<name>")
    @guarded("admin")
    async def put_provider(runtime: Any, caller: Any, name: str) -> Any:
        """Endpoints (or an ``issuer`` to discover them from), client credentials and the
        redirect page. The client secret is write-only."""
        config = await host.get_config()
        body = await json_body()
        body.setdefault("name", name)
        keep = runtime.oauth.providers.get(name)
        provider = parse_provider(body, keep=keep)
        if provider["name"] != name:
            raise SpecError(code="name_differs", field="name")
        provider = await runtime.oauth.discover(provider, allow_private=bool(config.get("allow_private_addresses")))
        if keep is not None and body.get("client_secret") == "********" and provider.get("token_url") != keep.get("token_url"):
            # The same issuer whose metadata now names another token endpoint: the
            # stored secret does not follow it unasked either.
            raise SpecError(code="secret_reenter", field="client_secret", name="client_secret")
        runtime.oauth.providers[name] = provider
        await runtime.oauth.save()
        await runtime.members.stop_moved()  # a token endpoint moved: no refresh token follows it
        return public_provider(provider)

    @blueprint.delete("/providers/<name>")
    @guarded("admin")
    async def delete_provider(runtime: Any, caller: Any, name: str) -> Any:
        if runtime.oauth.providers.pop(name, None) is None:
            return error("err_no_provider", 404, name=name[:40])
        await runtime.oauth.save()
        await runtime.members.stop_moved()
        return {"removed": name}

    @blueprint.get("/servers")
    @guarded("admin")
    async def servers(runtime: Any, caller: Any) -> Any:
        return {"servers": [runtime.status(name) for name in sorted(runtime.specs)]}

    @blueprint.post("/servers")
    @guarded("admin")
    async def add_server(runtime: Any, caller: Any) -> Any:
        body = await json_body()
        members = members_of(body.pop("access", None))
        await known(members)
        by_default = body.pop("grant_by_default", True)
        if not isinstance(by_default, bool):
            raise SpecError(code="grant_by_default_invalid", field="grant_by_default")
        spec = parse_spec(body)
        if spec.name in runtime.specs:
            return error("err_exists", 409, name=spec.name)
        # One name, one connector in a member's view (``Runtime.member_tools``): a
        # member's calls must never go to another server because of a name.
        if spec.name in runtime.templates:
            return error("err_name_template", 409, name=spec.name)
        if runtime.members.named(spec.name):
            return error("err_name_member", 409, name=spec.name)
        await runtime.add(spec, members, by_default)
        return runtime.status(spec.name), 201

    @blueprint.put("/servers/<name>")
    @guarded("admin", server=True)
    async def edit_server(runtime: Any, caller: Any, name: str) -> Any:
        body = await json_body()
        body.setdefault("name", name)
        spec = parse_spec(body, keep=runtime.specs[name])
        if spec.name != name:
            raise SpecError(code="no_rename", field="name")
        await runtime.replace(spec)
        return runtime.status(name)

    @blueprint.delete("/servers/<name>")
    @guarded("admin", server=True)
    async def remove_server(runtime: Any, caller: Any, name: str) -> Any:
        await runtime.remove(name)
        return {"removed": name}

    @blueprint.post("/servers/<name>/restart")
    @guarded("admin", server=True)
    async def restart_server(runtime: Any, caller: Any, name: str) -> Any:
        if await runtime.restart(name) is None:
            return error("err_unknown", 404, name=name[:40])  # removed while it waited
        return runtime.status(name)

    @blueprint.put("/servers/<name>/access")
    @guarded("admin", server=True)
    async def set_access(runtime: Any, caller: Any, name: str) -> Any:
        chosen = await access_body()
        if chosen is None:
            raise SpecError(code="members_invalid", field="members")  # a connector has no "everyone": a list, [] for no one
        members = members_of(chosen)
        await known(members, runtime.access.get(name))
        await runtime.set_access(name, members)
        return {"name": name, "access": sorted(members)}

    @blueprint.route("/servers/<name>/access/<member_id>", methods=["PUT", "DELETE"])
    @guarded("admin", server=True)
    async def set_member_access(runtime: Any, caller: Any, name: str, member_id: str) -> Any:
        """Grant (PUT) or revoke (DELETE) one member, the others untouched: what the pages'
        checkboxes send, so a page drawn before someone else's change cannot undo it
        (``PUT …/access`` replaces the whole list, for API clients that mean that)."""
        (member,) = members_of([member_id])
        if request.method == "PUT":
            await known({member}, runtime.access.get(name))
        await runtime.set_member_access(name, member, request.method == "PUT")
        return {"name": name, "access": sorted(runtime.access.get(name, ()))}

    @blueprint.post("/servers/<name>/accept")
    @guarded("admin", server=True)
    async def accept(runtime: Any, caller: Any, name: str) -> Any:
        """``{"tools": {<tool>: <hash>}}``: the withheld tools as the page showed them."""
        shown = await shown_tools()
        try:
            await runtime.accept(name, shown)
        except ReviewOutdated as exc:
            return outdated(exc)
        return runtime.status(name)

    return blueprint

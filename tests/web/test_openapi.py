"""Issue 18.7: the HTTP API reference. ``/api/openapi.json`` is an OpenAPI 3.1 document
generated from the running app: it lists every ``/api`` route (enabled plugins' too, a
disabled plugin's not), validates with ``openapi-spec-validator``, documents each
route's auth and request body, and for setup, members, models, approval rules and chat
the answers the routes really give. ``/api/reference`` renders it as a page."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Callable

from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from quart import Blueprint, request
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from skald_hookspecs import PUBLIC_ATTRIBUTE, accepts, hookimpl, public
from skald_hookspecs.types import PluginInfo
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from skald_host.web.openapi import openapi_path
from web_support import MODEL, NEEDS_APPROVAL

DOC_URI = "urn:skald:openapi"
WRITES = {"post", "put", "patch", "delete"}
#: The routes integrators asked for first: each answers with a documented schema.
FULLY_DESCRIBED = ("/api/setup", "/api/admin/members", "/api/admin/models", "/api/admin/approval-rules", "/api/admin/security-groups", "/api/conversations", "/api/chat/", "/api/approvals")


class Documented:
    """A plugin whose routes show what a plugin's entry in the reference holds."""

    def __init__(self, plugin_id: str) -> None:
        self.plugin_id = plugin_id

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id=self.plugin_id, title=self.plugin_id.title(), spec=">=1.2,<2")

    @hookimpl
    def register_routes(self, register: Callable[..., None]) -> None:
        blueprint = Blueprint(self.plugin_id, __name__)

        @blueprint.get("/status")
        async def status() -> Any:
            """How the plugin is doing, for its page."""
            return {"ok": True}

        @blueprint.post("/notes")
        @accepts({"type": "object", "properties": {"text": {"type": "string", "maxLength": 20}}, "required": ["text"]})
        async def add_note() -> Any:
            """Add a note."""
            return {"added": (await request.get_json())["text"]}, 201

        @blueprint.post("/hook")
        @public
        async def hook() -> Any:
            """A webhook that checks its own secret before reading anything."""
            return {"ok": True}

        register(blueprint)


def pointer(*parts: str) -> str:
    return "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


class Reference:
    """The document, and a check that an answer is what it documents."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.registry = Registry().with_resource(DOC_URI, Resource(contents=doc, specification=DRAFT202012))
        self.checked: set[tuple[str, str]] = set()

    def conforms(self, method: str, rule: str, response: Any) -> Any:
        path, _ = openapi_path(rule)
        operation = self.doc["paths"][path][method.lower()]
        status = str(response.status_code)
        if status not in operation["responses"]:  # OpenAPI: "default" describes every status not listed
            assert not status.startswith("2"), f"{method} {rule} answered {status}, which is not documented: {response.text}"
            status = "default"
        media = operation["responses"][status].get("content", {}).get("application/json")
        assert media is not None, f"{method} {rule} {status} has no documented answer"
        ref = {"$ref": f"{DOC_URI}#/{pointer('paths', path, method.lower(), 'responses', status, 'content', 'application/json', 'schema')}"}
        errors = sorted(Draft202012Validator(ref, registry=self.registry).iter_errors(response.json()), key=str)
        assert not errors, f"{method} {rule} {status} does not match its documented answer: {errors[0].message} at {list(errors[0].absolute_path)}"
        self.checked.add((path, method.lower()))
        return response.json()


def documented_routes(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(path, method.upper()) for path, item in doc["paths"].items() for method in item}


def app_routes(app: Any, *, skip_plugin: str) -> set[tuple[str, str]]:
    found = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/") or rule.rule.startswith(f"/api/plugin/{skip_plugin}/"):
            continue
        path, _ = openapi_path(rule.rule)
        methods = {"GET"} if getattr(rule, "websocket", False) else set(rule.methods or ()) - {"HEAD", "OPTIONS"}
        found |= {(path, method) for method in methods}
    return found


async def test_the_document_lists_every_route_and_validates(skald):
    host = await skald.start(plugins=[Documented("docs"), Documented("dormant")], enable=["docs"])
    admin = await host.admin()
    response = await admin.get("/api/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    validate(doc)  # OpenAPI 3.1, openapi-spec-validator
    assert doc["openapi"].startswith("3.1")
    listed, served = documented_routes(doc), app_routes(host.app, skip_plugin="dormant")
    assert listed == served, f"missing: {sorted(served - listed)}; extra: {sorted(listed - served)}"
    assert len(listed) > 70
    assert not any(path.startswith("/api/plugin/dormant/") for path, _ in listed)  # disabled: left out
    assert ("/api/plugin/docs/notes", "POST") in listed
    # Enabling a plugin adds its routes, with no restart.
    await host.core.set_plugin_enabled("dormant", True)
    assert ("/api/plugin/dormant/status", "GET") in documented_routes((await admin.get("/api/openapi.json")).json())

    # A plugin's routes: summary from the docstring, auth from the gate's markers, the declared body.
    notes = doc["paths"]["/api/plugin/docs/notes"]["post"]
    assert notes["summary"] == "Add a note."
    assert (notes["x-skald-auth"], notes["x-skald-plugin"]) == ("session", "docs")
    assert notes["requestBody"]["content"]["application/json"]["schema"]["required"] == ["text"]
    hook = doc["paths"]["/api/plugin/docs/hook"]["post"]
    assert (hook["security"], hook["x-skald-auth"], "requestBody" in hook) == ([], "public", False)


async def test_every_operation_says_what_it_is_who_may_call_it_and_what_it_takes(skald):
    host = await skald.start(plugins=[Documented("docs")], enable=["docs"])
    admin = await host.admin()
    doc = (await admin.get("/api/openapi.json")).json()
    views = {}
    for rule in host.app.url_map.iter_rules():
        if rule.rule.startswith("/api/"):
            path, _ = openapi_path(rule.rule)
            for method in {"GET"} if getattr(rule, "websocket", False) else rule.methods or ():
                views[(path, method.lower())] = host.app.view_functions[rule.endpoint]
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            view = views[(path, method)]
            source = inspect.getsource(inspect.unwrap(view))
            where = f"{method.upper()} {path}"
            assert operation["summary"].strip(), where
            public = bool(getattr(view, PUBLIC_ATTRIBUTE, False))
            assert operation["x-skald-auth"] == ("public" if public else "session"), where
            assert (operation["security"] == []) == public, where
            action = getattr(view, "_skald_action", None)
            assert operation.get("x-skald-capability") == action, where
            if action:
                assert f"`{action}`" in operation["description"], where
            # A route that reads a JSON body documents it (and so has it checked).
            if "json_object(" in source or ("get_json(" in source and not public):
                assert "requestBody" in operation, f"{where} reads a body that is documented nowhere"
            if method in ("post", "put", "patch") and "requestBody" not in operation:
                assert "json_object(" not in source and "get_json(" not in source or public, where
            if path.startswith(FULLY_DESCRIBED):
                ok = [s for s in operation["responses"] if s.startswith("2")]
                assert ok and all("content" in operation["responses"][s] for s in ok), f"{where} has no documented answer"
                for parameter in operation.get("parameters", []):
                    assert "schema" in parameter, where


async def test_the_documented_answers_are_what_the_routes_answer(skald, model_server):
    host = await skald.start()
    # first-run setup over plain HTTP
    first = host.client()
    needs = await first.get("/api/setup")
    setup = await first.post("/api/setup", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert setup.status_code == 201, setup.text
    first.csrf_token = setup.json()["csrf_token"]
    ref = Reference((await first.get("/api/openapi.json")).json())
    assert ref.conforms("GET", "/api/setup", needs)["needs_setup"] is True
    ref.conforms("POST", "/api/setup", setup)
    ref.conforms("POST", "/api/setup", await host.client().post("/api/setup", json={"username": "late", "password": ADMIN_PASSWORD}))  # 409
    admin = host.client()
    ref.conforms("POST", "/api/auth/login", await admin.login("admin", ADMIN_PASSWORD))
    ref.conforms("GET", "/api/auth/session", await admin.get("/api/auth/session"))

    # members
    created = ref.conforms("POST", "/api/admin/members", await admin.post("/api/admin/members", json={"username": "alice", "password": MEMBER_PASSWORD}))
    ref.conforms("GET", "/api/admin/members", await admin.get("/api/admin/members"))
    member = f"/api/admin/members/{created['id']}"
    ref.conforms("GET", "/api/admin/members/<member_id>", await admin.get(member))
    ref.conforms("PATCH", "/api/admin/members/<member_id>", await admin.patch(member, json={"display_name": "Alice"}))
    ref.conforms("POST", "/api/admin/members/<member_id>/end-sessions", await admin.post(f"{member}/end-sessions"))
    refused = ref.conforms("POST", "/api/admin/members", await admin.post("/api/admin/members", json={"username": 5, "password": "x"}))
    assert refused == {"error": "'username' must be text", "field": "username", "code": "field_type", "values": {"field": "username"}}

    # models and approval rules
    provider = ref.conforms("POST", "/api/admin/models/providers", await admin.post("/api/admin/models/providers", json={"name": "Scripted", "base_url": model_server.base_url, "api_key": "sk-x"}))
    assert provider["api_key"] != "sk-x"  # write-only
    model = ref.conforms("POST", "/api/admin/models/entries", await admin.post("/api/admin/models/entries", json={"provider_id": provider["id"], "model": MODEL}))
    ref.conforms("PATCH", "/api/admin/models/entries/<model_id>", await admin.patch(f"/api/admin/models/entries/{model['id']}", json={"priority": 5}))
    ref.conforms("PATCH", "/api/admin/models/providers/<provider_id>", await admin.patch(f"/api/admin/models/providers/{provider['id']}", json={"name": "Scripted model"}))
    ref.conforms("POST", "/api/admin/models/providers/<provider_id>/test", await admin.post(f"/api/admin/models/providers/{provider['id']}/test"))
    ref.conforms("GET", "/api/admin/models", await admin.get("/api/admin/models"))
    ref.conforms("POST", "/api/admin/security-groups", await admin.post("/api/admin/security-groups", json={"id": "testers", "label": "Testers"}))
    rule = ref.conforms("POST", "/api/admin/approval-rules", await admin.post("/api/admin/approval-rules", json={"tool_pattern": "probe_*", "action": "deny", "priority": 10, "group_id": "testers"}))
    ref.conforms("PATCH", "/api/admin/approval-rules/<int:rule_id>", await admin.patch(f"/api/admin/approval-rules/{rule['id']}", json={"note": "tested"}))
    ref.conforms("GET", "/api/admin/approval-rules", await admin.get("/api/admin/approval-rules"))
    refused = ref.conforms("POST", "/api/admin/approval-rules", await admin.post("/api/admin/approval-rules", json={"tool_pattern": "x", "action": "maybe", "priority": 1}))
    assert refused == {"error": "'action' must be 'allow', 'deny' or 'require'", "field": "action", "code": "field_invalid", "values": {"field": "action"}}
    ref.conforms("DELETE", "/api/admin/approval-rules/<int:rule_id>", await admin.delete(f"/api/admin/approval-rules/{rule['id']}"))
    ref.conforms("DELETE", "/api/admin/security-groups/<group_id>", await admin.delete("/api/admin/security-groups/testers"))

    # chat over plain HTTP, an approval included
    alice = host.client()
    assert (await alice.login("alice", MEMBER_PASSWORD, bearer=True)).status_code == 200
    ref.conforms("GET", "/api/chat/status", await alice.get("/api/chat/status"))
    conversation = ref.conforms("POST", "/api/conversations", await alice.post("/api/conversations", json={"title": "Plain HTTP"}))
    path = f"/api/conversations/{conversation['id']}"
    ack = ref.conforms("POST", "/api/conversations/<conversation_id>/messages", await alice.post(f"{path}/messages", json={"text": NEEDS_APPROVAL}))
    assert ack["queued"] is False
    deadline = time.monotonic() + 10
    while not (approvals := ref.conforms("GET", "/api/approvals", await alice.get("/api/approvals"))["approvals"]):
        assert time.monotonic() < deadline, "no approval card"
        await asyncio.sleep(0.05)
    thread = ref.conforms("GET", "/api/conversations/<conversation_id>", await alice.get(path))
    assert thread["approvals"] and any(m["tool_calls"] for m in thread["messages"])
    ref.conforms("POST", "/api/approvals/<approval_id>", await alice.post(f"/api/approvals/{approvals[0]['id']}", json={"decision": "deny"}))
    while (await alice.get(path)).json()["running"]:
        assert time.monotonic() < deadline + 10, "the turn did not end"
        await asyncio.sleep(0.05)
    ref.conforms("GET", "/api/conversations/<conversation_id>", await alice.get(path))
    ref.conforms("POST", "/api/conversations/<conversation_id>/messages", await alice.post(f"{path}/messages", json={"text": ""}))
    ref.conforms("PATCH", "/api/conversations/<conversation_id>", await alice.patch(path, json={"title": "Renamed"}))
    ref.conforms("GET", "/api/conversations", await alice.get("/api/conversations", params={"search": "Ren"}))
    ref.conforms("POST", "/api/conversations/<conversation_id>/stop", await alice.post(f"{path}/stop"))
    ref.conforms("DELETE", "/api/conversations/<conversation_id>", await alice.delete(path))
    ref.conforms("DELETE", "/api/admin/models/entries/<model_id>", await admin.delete(f"/api/admin/models/entries/{model['id']}"))
    ref.conforms("DELETE", "/api/admin/models/providers/<provider_id>", await admin.delete(f"/api/admin/models/providers/{provider['id']}"))
    ref.conforms("DELETE", "/api/admin/members/<member_id>", await admin.delete(member))
    assert len(ref.checked) >= 30


async def test_the_reference_page_shows_every_operation_and_needs_a_session(skald):
    host = await skald.start()
    anonymous = host.client()
    assert (await anonymous.get("/api/openapi.json")).status_code == 401
    assert (await anonymous.get("/api/reference")).status_code == 401
    admin = await host.admin()
    doc = (await admin.get("/api/openapi.json")).json()
    page = await admin.get("/api/reference")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for item in doc["paths"].values():
        for operation in item.values():
            assert f'id="{operation["operationId"]}"' in page.text, operation["operationId"]
    assert '<a href="#schema-Member">' in page.text
    assert "<script" not in page.text  # the CSP allows no inline script; the page needs none
    assert '<link rel="icon" href="data:,">' in page.text  # else Chromium asks for /favicon.ico: a 404 in its console
    style = await anonymous.get("/ui/reference.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")

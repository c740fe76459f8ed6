"""Cross-site request forgery and WebSocket origin (check A4).

Every cookie-authenticated write needs the session's ``X-CSRF-Token`` and, when the
browser sends one, a same-origin ``Origin``. The routes are enumerated from the app's
URL map, so a new write route without a case in ``valid_writes`` fails the suite.
"""

from __future__ import annotations

from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from skald_host.web.auth import CSRF_HEADER
from skald_host.web.routes.setup import setup_host_trusted
from web_support import (
    NO_SUCH_ID,
    own_report,
    a_live_run,
    PROBE,
    PROBE_SET,
    SAFE_METHODS,
    WRITE_METHODS,
    Probe,
    admin_chat_objects,
    fill,
    folder_objects,
    is_public,
    member_chat_objects,
    question_objects,
    registry_dump,
    version_objects,
)

EVIL = "https://evil.example"


def authenticated_writes(app) -> set[tuple[str, str]]:
    return {
        (rule.rule, method)
        for rule in app.url_map.iter_rules()
        if not getattr(rule, "websocket", False) and not is_public(app, rule.endpoint)
        for method in (rule.methods or set()) - SAFE_METHODS
    }


def valid_writes(ids: dict[str, str]) -> dict[tuple[str, str], tuple[str, Any]]:
    """One request per write route that *succeeds* with the right token (see the
    positive control below), so a 403 in the attack test can only come from the CSRF
    and Origin checks. ``ids`` name the victim member and the admin's own chat and
    model objects. Ordered so destructive ones come last."""
    ids = {"role_id": "spare", "plugin_id": PROBE, "set_id": PROBE_SET, "root": "user-memory", "key": "forged.md", **ids}
    bodies: dict[tuple[str, str], dict | None] = {
        ("/api/me/settings", "PUT"): {"forged": True},
        ("/api/me/locale", "PUT"): {"locale": "de"},
        ("/api/tts", "POST"): {"text": "Forged speech."},
        ("/api/me/home-source", "PUT"): {"home_source": "web"},
        ("/api/me/supervision/seen", "POST"): {"through": "2026-01-02T03:04:05.678Z"},
        ("/api/plugins/<plugin_id>/my-config", "PUT"): {"config": {"nickname": "forged"}},
        ("/api/conversations", "POST"): {"title": "forged"},
        ("/api/conversations/<conversation_id>", "PATCH"): {"title": "forged"},
        ("/api/approvals/<approval_id>", "POST"): {"decision": "deny"},
        ("/api/questions/<question_id>", "POST"): {"action": "accept", "content": {"word": "forged"}},
        ("/api/conversations/<conversation_id>/messages", "POST"): {"text": "forged"},
        ("/api/conversations/<conversation_id>/stop", "POST"): None,  # whatever the message started
        ("/api/agent-runs/<run_id>/cancel", "POST"): None,
        ("/api/conversations/<conversation_id>/compact", "POST"): None,
        ("/api/schedules", "POST"): {"prompt": "forged", "every": "every day at 8"},
        ("/api/schedules/preview", "POST"): {"every": "every day at 8"},
        ("/api/schedules/<job_id>", "PATCH"): {"paused": True},
        ("/api/conversations/<conversation_id>/uploads", "POST"): b"forged",  # a file named "upload" (an empty one is refused)
        ("/api/memory/<root>/notes/<path:key>", "PUT"): {"content": "forged"},
        ("/api/projects", "POST"): {"slug": "forged"},
        ("/api/projects/<project_id>", "PATCH"): {"title": "Forged"},
        ("/api/projects/<project_id>/members", "POST"): {"username": "victim"},
        ("/api/projects/<project_id>/members/<member_id>", "PATCH"): {"can_write": True},
        ("/api/projects/<project_id>/chat", "POST"): None,
        ("/api/projects/<project_id>/files/folder", "POST"): {"path": "forged"},
        ("/api/projects/<project_id>/files/rename", "POST"): {"from": "forged", "to": "forged-renamed"},
        ("/api/projects/<project_id>/files/upload/<path:target>", "POST"): None,  # an empty file
        ("/api/projects/<project_id>/files/delete", "POST"): {"path": "forged-renamed"},
        ("/api/project-invitations/<invitation_id>/accept", "POST"): None,
        ("/api/project-invitations/<invitation_id>", "DELETE"): None,
        ("/api/admin/shared-folders", "POST"): {"slug": "forged"},
        ("/api/admin/shared-folders/<folder_id>", "PATCH"): {"title": "Forged"},
        ("/api/admin/shared-folders/<folder_id>/members", "POST"): {"username": "victim"},
        ("/api/admin/shared-folders/<folder_id>/members/<member_id>", "PATCH"): {"can_write": True},
        ("/api/admin/models/providers", "POST"): {"name": "Forged", "base_url": "http://127.0.0.1:9/v1"},
        ("/api/admin/models/providers/<provider_id>", "PATCH"): {"name": "Forged renamed"},
        ("/api/admin/models/providers/<provider_id>/test", "POST"): None,
        ("/api/admin/models/presets/apply", "POST"): {"name": "Forged preset", "base_url": "http://127.0.0.1:9/v1"},
        ("/api/admin/models/entries", "POST"): {"provider_id": ids["provider_id"], "model": "forged-model"},
        ("/api/admin/models/entries/<model_id>", "PATCH"): {"priority": 7},
        ("/api/admin/approval-rules", "POST"): {"tool_pattern": "forged_*", "action": "deny", "priority": 30},
        ("/api/admin/approval-rules/<int:rule_id>", "PATCH"): {"note": "forged"},
        ("/api/admin/security-groups", "POST"): {"id": "forged", "label": "Forged"},
        ("/api/admin/members", "POST"): {"username": "mallory", "password": "mallory password 42"},
        ("/api/admin/members/<member_id>", "PATCH"): {"display_name": "forged"},
        ("/api/admin/members/<member_id>/plugins", "PUT"): {"plugins": []},
        ("/api/admin/members/<member_id>/supervisors", "PUT"): {"supervisors": []},
        ("/api/admin/members/<member_id>/agent-intervals", "PUT"): {"agent_id": "probe_agent", "interval": 10},
        ("/api/reports/<where>/<report_id>/read", "POST"): None,
        ("/api/admin/members/<member_id>/end-sessions", "POST"): None,
        ("/api/admin/backups", "POST"): None,
        ("/api/admin/plugins/<plugin_id>/config", "PUT"): {"config": {"greeting": "forged"}},
        ("/api/admin/plugins/<plugin_id>/enabled", "PUT"): {"enabled": False},
        ("/api/admin/plugins/<plugin_id>/stale-settings", "DELETE"): None,
        ("/api/admin/settings/<set_id>", "PUT"): {"values": {"level": 3}},
        ("/api/admin/language", "PUT"): {"locale": "en"},
        ("/api/admin/roles", "POST"): {"id": "forged", "label": "Forged"},
        ("/api/admin/roles/<role_id>", "PATCH"): {"label": "Forged"},
        ("/api/admin/roles/<role_id>", "DELETE"): None,
        ("/api/schedules/<job_id>", "DELETE"): None,
        ("/api/conversations/<conversation_id>", "DELETE"): None,
        ("/api/memory/<root>/notes/<path:key>", "DELETE"): None,  # the note the PUT above wrote
        ("/api/admin/approval-rules/<int:rule_id>", "DELETE"): None,
        ("/api/admin/security-groups/<group_id>", "DELETE"): None,
        ("/api/admin/models/entries/<model_id>", "DELETE"): None,
        ("/api/admin/models/providers/<provider_id>", "DELETE"): None,
        ("/api/projects/<project_id>/members/<member_id>", "DELETE"): None,
        ("/api/projects/<project_id>/invitations/<invitation_id>", "DELETE"): None,
        ("/api/projects/<project_id>", "DELETE"): None,
        ("/api/admin/shared-folders/<folder_id>/members/<member_id>", "DELETE"): None,
        ("/api/admin/shared-folders/<folder_id>", "DELETE"): None,
        # After the member's folder memberships are written to: a data-losing reset ends them.
        ("/api/admin/members/<member_id>/reset-password", "POST"): {
            "new_password": "forged password 42",
            "confirm_data_loss": True,
        },
        ("/api/admin/members/<member_id>", "DELETE"): None,
        ("/api/auth/password", "POST"): {"current_password": ADMIN_PASSWORD, "new_password": "a new admin password 42"},
        ("/api/auth/logout", "POST"): None,
    }
    # The routes that change a conversation's versions, each on a conversation of its own
    # in the state it needs (web_support.version_objects), before the destructive ones.
    versions = {
        (rule, method): (fill(rule, conversation_id=ids[key]), body)
        for (rule, method), (key, body) in {
            ("/api/conversations/<conversation_id>/regenerate", "POST"): ("regenerate_conversation_id", None),
            ("/api/conversations/<conversation_id>/edit", "POST"): (
                "edit_conversation_id", {"message_id": int(ids["edit_message_id"]), "text": "forged"},
            ),
            ("/api/conversations/<conversation_id>/version", "PUT"): ("version_conversation_id", {"variant": 1}),
            ("/api/conversations/<conversation_id>/retry", "POST"): ("failed_conversation_id", None),
        }.items()
    }
    # The invitation routes, each on an invitation of its own (see _install).
    invitations = {
        ("/api/project-invitations/<invitation_id>/accept", "POST"): "accept_invitation_id",
        ("/api/project-invitations/<invitation_id>", "DELETE"): "decline_invitation_id",
        ("/api/projects/<project_id>/invitations/<invitation_id>", "DELETE"): "withdraw_invitation_id",
    }
    writes = {}
    for (rule, method), body in bodies.items():
        if method == "DELETE" and versions:
            writes |= versions
            versions = {}
        invitation = invitations.get((rule, method))
        writes[(rule, method)] = (fill(rule, **(ids | {"invitation_id": ids[invitation]} if invitation else ids)), body)
    return writes


#: Ids that fill every route for the tests that never reach a handler.
PLACEHOLDER_IDS = {
    "member_id": "id", "conversation_id": NO_SUCH_ID, "approval_id": NO_SUCH_ID, "question_id": NO_SUCH_ID, "provider_id": "id", "model_id": "id",
    "rule_id": "1", "group_id": "id", "project_id": "id", "folder_id": "id", "target": "x", "job_id": NO_SUCH_ID, "run_id": NO_SUCH_ID,
    **dict.fromkeys(("regenerate_conversation_id", "edit_conversation_id", "version_conversation_id", "failed_conversation_id"), NO_SUCH_ID),
    "edit_message_id": "1", "where": "own", "report_id": NO_SUCH_ID,
    **dict.fromkeys(("accept_invitation_id", "decline_invitation_id", "withdraw_invitation_id"), NO_SUCH_ID),
}


async def _install(skald, model_server):
    """A host with the probe plugin, an admin with a conversation waiting on an approval
    and the model objects, a victim member (logged in) and a spare role; the ids."""
    host = await skald.start(plugins=[Probe()], enable=[PROBE])
    admin = await host.admin()
    victim = await host.member("victim")
    response = await admin.post("/api/admin/roles", json={"id": "spare", "label": "Spare"})
    assert response.status_code == 201
    ids = {"member_id": victim.member["id"]}
    ids |= await admin_chat_objects(admin, model_server)
    ids |= await member_chat_objects(admin)
    ids |= await version_objects(admin)
    ids |= await folder_objects(admin, admin)
    ids |= await invitation_objects(host, admin, victim, ids["project_id"])
    ids |= {"where": "own", "report_id": await own_report(host, admin.member["id"])}
    ids |= await question_objects(admin, admin)
    ids["run_id"] = await a_live_run(host, admin, ids["conversation_id"])
    return host, admin, victim, ids


async def invitation_objects(host, admin, victim, project_id: str) -> dict[str, str]:
    """The victim a member of the admin's project (so its member routes have someone to
    act on), an invitation of that project waiting for a third member (to withdraw),
    and two of the victim's projects inviting the admin (to accept, to decline)."""
    response = await admin.post(f"/api/projects/{project_id}/members", json={"username": "victim"})
    assert response.status_code == 201, response.text
    [invitation] = (await victim.get("/api/projects")).json()["invitations"]
    assert (await victim.post(f"/api/project-invitations/{invitation['id']}/accept")).status_code == 200
    await host.create_member("guest")
    response = await admin.post(f"/api/projects/{project_id}/members", json={"username": "guest"})
    [withdraw] = [i["id"] for i in response.json()["invitations"] if i["username"] == "guest"]
    ids = {"withdraw_invitation_id": withdraw}
    for use in ("accept", "decline"):
        project = (await victim.post("/api/projects", json={"slug": f"to-{use}", "title": f"To {use}"})).json()
        response = await victim.post(f"/api/projects/{project['id']}/members", json={"username": admin.member["username"]})
        assert response.status_code == 201, response.text
        [invitation] = response.json()["invitations"]
        ids[f"{use}_invitation_id"] = invitation["id"]
    return ids


async def test_every_write_route_has_a_csrf_case(skald):
    host = await skald.start(plugins=[Probe()])
    writes = authenticated_writes(host.app)
    cases = set(valid_writes(PLACEHOLDER_IDS))
    assert not writes - cases, f"new write route(s) {sorted(writes - cases)}: add a valid request to valid_writes() in {__file__}"
    assert not cases - writes, f"valid_writes() names routes that no longer exist: {sorted(cases - writes)}"


async def test_writes_succeed_with_the_session_token_and_a_same_origin(skald, model_server):
    """The positive control for the forgeries below: each request in the table is valid."""
    host, admin, victim, ids = await _install(skald, model_server)
    for (rule, method), (path, body) in valid_writes(ids).items():
        response = await admin.request(method, path, **_body(body), headers={"Origin": host.url})
        assert response.status_code < 300, f"{method} {rule}: {response.status_code} {response.text}"


def _body(body: Any) -> dict[str, Any]:
    """The request's body: bytes as they are (an upload), anything else as JSON."""
    return {"content": body} if isinstance(body, bytes) else {"json": body}


FORGERIES = {
    "no token": {CSRF_HEADER: None},
    "no token, same origin": {CSRF_HEADER: None, "Origin": "same"},
    "empty token": {CSRF_HEADER: ""},
    "another session's token": {CSRF_HEADER: "other"},
    "right token, evil origin": {"Origin": EVIL},
    "right token, null origin": {"Origin": "null"},
    "right token, another port": {"Origin": "http://127.0.0.1:1"},
}


async def test_forged_cookie_writes_are_refused_on_every_route_and_change_nothing(skald, model_server):
    host, admin, victim, ids = await _install(skald, model_server)
    other = await host.admin()  # a second, valid session of the same admin
    before = await registry_dump(host)

    for forgery, extra in FORGERIES.items():
        forger = host.client()
        forger.cookies = dict(admin.cookies)
        forger.csrf_token = None if CSRF_HEADER in extra else admin.csrf_token
        headers = {}
        for key, value in extra.items():
            if value is not None:
                headers[key] = {"same": host.url, "other": other.csrf_token}.get(value, value)
        for (rule, method), (path, body) in valid_writes(ids).items():
            response = await forger.request(method, path, **_body(body), headers=headers)
            assert response.status_code == 403, f"{method} {rule} with {forgery}: {response.status_code} {response.text}"
            assert response.json() == {"error": "missing or wrong CSRF token", "code": "csrf"}

    assert await registry_dump(host) == before
    assert (await admin.get("/api/auth/session")).status_code == 200
    assert (await victim.get("/api/auth/session")).status_code == 200
    assert (await victim.get("/api/me/settings")).json() == {"settings": {}}
    assert (await admin.get("/api/me/settings")).json() == {"settings": {}}


async def test_bearer_writes_need_no_csrf_token(skald):
    """A bearer token is never sent by a browser on its own, so it cannot be forged
    cross-site; the cookie rule must not spill onto it."""
    host = await skald.start()
    await host.admin()
    await host.create_member("alice")
    client = host.client()
    assert (await client.login("alice", MEMBER_PASSWORD, bearer=True)).status_code == 200
    assert (await client.put("/api/me/settings", json={"a": 1})).status_code == 200


async def test_public_login_refuses_a_foreign_origin(skald):
    host = await skald.start()
    await host.admin()
    client = host.client()
    body = {"username": "admin", "password": ADMIN_PASSWORD}
    for origin in (EVIL, "null", "http://127.0.0.1:1"):
        response = await client.post("/api/auth/login", json=body, headers={"Origin": origin})
        assert response.status_code == 403, origin
        assert response.headers.get_list("set-cookie") == []
    assert (await client.post("/api/auth/login", json=body, headers={"Origin": host.url})).status_code == 200


async def test_public_setup_refuses_a_foreign_origin(skald):
    host = await skald.start()
    client = host.client()
    body = {"username": "admin", "password": ADMIN_PASSWORD}
    response = await client.post("/api/setup", json=body, headers={"Origin": EVIL})
    assert response.status_code == 403
    assert response.headers.get_list("set-cookie") == []
    assert await host.core.users.count() == 0
    assert (await client.get("/api/setup")).json()["needs_setup"] is True


async def test_setup_refuses_a_stranger_s_domain_pointed_at_the_server(skald):
    """DNS rebinding: a page on evil.example makes its name resolve to this server; its
    requests carry Host and Origin evil.example and so pass the same-origin check. On a
    fresh install setup would hand it the first admin: it is served only by an address
    no stranger controls."""
    host = await skald.start()
    client = host.client()
    body = {"username": "admin", "password": ADMIN_PASSWORD}
    port = host.url.rsplit(":", 1)[1]
    for name in ("evil.example", "rebind.attacker.test", "127.0.0.1.nip.io"):
        response = await client.post("/api/setup", json=body, headers={"Host": f"{name}:{port}", "Origin": f"http://{name}:{port}"})
        assert response.status_code == 403 and response.json()["code"] == "setup_host_refused", (name, response.text)
        assert response.headers.get_list("set-cookie") == []
    assert await host.core.users.count() == 0
    for name in ("skald", "skald.local", "box.home.arpa", "localhost", "[::1]", "192.168.1.20"):
        assert setup_host_trusted(f"{name}:{port}", None), name
    assert setup_host_trusted("skald.example.org", "https://skald.example.org") and not setup_host_trusted("skald.example.org", None)
    response = await client.post("/api/setup", json=body, headers={"Origin": host.url})
    assert response.status_code == 201, response.text


async def test_the_setup_status_says_whether_this_host_name_may_set_up(skald):
    """The page opened by a refused name shows the refusal at once, not a form that
    cannot succeed: the status answers with the check the setup itself makes."""
    host = await skald.start()
    client = host.client()
    port = host.url.rsplit(":", 1)[1]
    refused = (await client.get("/api/setup", headers={"Host": f"evil.example:{port}"})).json()
    assert refused["needs_setup"] is True and refused["setup_allowed"] is False
    assert (await client.get("/api/setup")).json()["setup_allowed"] is True
    assert (await client.get("/api/setup", headers={"Host": f"skald.local:{port}"})).json()["setup_allowed"] is True


#: The GET routes, each reviewed as not changing state. A new GET route fails
#: ``test_no_view_serves_get_and_a_write`` until it is checked and added here.
READ_ONLY_GET_ROUTES = {
    "/",
    "/ui/<path:filename>",
    "/static/<path:filename>",
    "/health",
    "/api/health",
    "/api/openapi.json",
    "/api/reference",
    "/api/setup",
    "/api/i18n",
    "/api/auth/session",
    "/api/me/settings",
    "/api/me/privacy",
    "/api/tts/voices",
    "/api/me/home-source",
    "/api/plugins/mine",
    "/api/plugins/pages",
    "/api/admin/members",
    "/api/admin/members/<member_id>",
    "/api/admin/members/<member_id>/plugins",
    "/api/admin/roles",
    "/api/admin/plugins",
    "/api/admin/plugins.json",
    "/api/admin/plugins/<plugin_id>",
    "/api/admin/plugins/<plugin_id>/access",
    "/api/admin/settings",
    "/api/admin/language",
    "/api/admin/status",
    "/api/admin/usage",
    "/api/ws",
    # chat: reads of the member's own file. The first of them builds the member's chat
    # runtime, which resumes work a restart interrupted: the member's own turn going on,
    # not a change the request asks for.
    "/api/chat/status",
    "/api/conversations",
    "/api/conversations/<conversation_id>",
    "/api/conversations/<conversation_id>/export",
    "/api/file",
    "/api/approvals",
    "/api/admin/models",
    "/api/admin/models/presets",  # probes a local Ollama; stores nothing
    "/api/admin/approval-rules",
    "/api/memory/<root>/notes",
    "/api/memory/<root>/search",
    "/api/memory/<root>/notes/<path:key>",
    "/api/schedules",
    "/api/projects",
    "/api/projects/<project_id>",
    "/api/projects/<project_id>/files",
    "/api/projects/<project_id>/files/content",
    "/api/admin/shared-folders",
    "/api/admin/backups",
    "/api/admin/shared-folders/<folder_id>",
    "/api/system-agents",
    "/api/system-agents/runs",
    "/api/reports",
    "/api/admin/members/<member_id>/supervisors",
    "/api/admin/members/<member_id>/agent-intervals",
    "/api/conversations/<conversation_id>/runs",
    "/api/agent-runs/<run_id>",
    "/api/agent-definitions",
}


async def test_no_view_serves_get_and_a_write(skald):
    """Statically: no rule answers GET and a write, no view is shared between a GET
    rule and a write rule, and the GET routes are the reviewed list above."""
    app = (await skald.start(plugins=[Probe()])).app  # plugin routes mount at boot
    get_rules, write_endpoints = {}, set()
    for rule in app.url_map.iter_rules():
        methods = rule.methods or set()
        assert not ("GET" in methods and WRITE_METHODS & methods), f"{rule.rule} answers GET and {sorted(WRITE_METHODS & methods)}"
        if "GET" in methods:
            get_rules[rule.rule] = rule.endpoint
        if WRITE_METHODS & methods:
            write_endpoints.add(rule.endpoint)
    shared = set(get_rules.values()) & write_endpoints
    assert not shared, f"views serving both GET and a write: {sorted(shared)}"
    assert set(get_rules) == READ_ONLY_GET_ROUTES, (
        f"GET routes changed (new: {sorted(set(get_rules) - READ_ONLY_GET_ROUTES)}, gone: "
        f"{sorted(READ_ONLY_GET_ROUTES - set(get_rules))}): check that a new one changes no state, then update "
        f"READ_ONLY_GET_ROUTES in {__file__}"
    )


async def test_get_routes_leave_the_registry_unchanged(skald):
    """Dynamically: every GET route, as admin, member and stranger, leaves system.db
    byte-for-byte as it was."""
    host = await skald.start(plugins=[Probe()], enable=[PROBE])
    admin = await host.admin()
    alice = await host.member("alice")
    folders = await folder_objects(admin, alice)
    before = await registry_dump(host)
    ids = {"member_id": alice.member["id"], "plugin_id": PROBE, "filename": "app.js", "conversation_id": NO_SUCH_ID, "run_id": NO_SUCH_ID}
    ids |= {"root": "shared-memory", "key": "index.md"}  # the pool that lives in system.db
    ids |= folders
    for rule in host.app.url_map.iter_rules():
        if "GET" not in (rule.methods or set()) or getattr(rule, "websocket", False):
            continue
        path = fill(rule.rule, **ids)
        for client in (admin, alice, host.client()):
            response = await client.get(path)
            assert response.status_code < 500, f"GET {path}: {response.status_code}"
    assert await registry_dump(host) == before
    assert (await alice.get("/api/auth/session")).status_code == 200


async def test_websocket_with_a_foreign_origin_is_refused_even_with_a_session(skald):
    host = await skald.start()
    alice = await host.member("alice")
    for origin in (EVIL, "null", "http://127.0.0.1:1"):
        with pytest.raises(InvalidStatus) as refused:
            async with alice.ws(origin=origin):
                pass
        assert refused.value.response.status_code == 403, origin
    async with alice.ws() as ws:  # the same session from the same origin is accepted
        await ws.send('{"type": "ping"}')
        assert "pong" in await ws.recv()


async def test_websocket_without_a_session_is_refused(skald):
    host = await skald.start()
    await host.admin()
    with pytest.raises(InvalidStatus) as refused:
        async with host.client().ws():
            pass
    assert refused.value.response.status_code == 401
    stranger = host.client()
    stranger.cookies["__Host-skald_session"] = "A" * 43
    with pytest.raises(InvalidStatus) as refused:
        async with stranger.ws():
            pass
    assert refused.value.response.status_code == 401

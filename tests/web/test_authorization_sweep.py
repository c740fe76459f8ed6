"""The route sweep: who may call what (checks C1's coverage rule, C2, C4).

``EXPECTED`` names the access level of every route of the running app. The first test
fails when a route is added without a line here, so a new route cannot ship untested.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import InvalidStatus

from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from web_support import (
    NO_SUCH_ID,
    own_report,
    a_live_run,
    PROBE,
    PROBE_SET,
    Probe,
    admin_chat_objects,
    endpoint_of,
    fill,
    is_public,
    member_chat_objects,
    question_objects,
    folder_objects,
    owner_dump,
    registry_dump,
    route_methods,
    settled,
)

EXPECTED: dict[tuple[str, str], str] = {
    # the page shell and liveness
    ("/", "GET"): "public",
    ("/ui/<path:filename>", "GET"): "public",
    ("/static/<path:filename>", "GET"): "public",
    ("/health", "GET"): "public",
    ("/api/health", "GET"): "public",
    ("/api/i18n", "GET"): "public",
    # the API reference (skald_host/web/routes/reference.py): any member, not the public
    ("/api/openapi.json", "GET"): "member",
    ("/api/reference", "GET"): "member",
    # getting in
    ("/api/setup", "GET"): "public",
    ("/api/setup", "POST"): "public",
    ("/api/auth/login", "POST"): "public",
    ("/api/auth/logout", "POST"): "member",
    ("/api/auth/session", "GET"): "member",
    ("/api/auth/password", "POST"): "member",
    # the member's own things
    ("/api/me/settings", "GET"): "member",
    ("/api/me/settings", "PUT"): "member",
    ("/api/tts", "POST"): "member",
    ("/api/tts/voices", "GET"): "member",
    ("/api/me/locale", "PUT"): "member",
    ("/api/me/home-source", "GET"): "member",
    ("/api/me/privacy", "GET"): "member",
    ("/api/me/supervision/seen", "POST"): "member",
    ("/api/me/home-source", "PUT"): "member",
    ("/api/plugins/mine", "GET"): "member",
    ("/api/plugins/pages", "GET"): "member",
    ("/api/plugins/<plugin_id>/my-config", "PUT"): "member",
    ("/api/ws", "WS"): "member",
    # chat: conversations and approvals live in the member's own file
    ("/api/chat/status", "GET"): "member",
    ("/api/conversations", "GET"): "member",
    ("/api/conversations", "POST"): "member",
    ("/api/conversations/<conversation_id>", "GET"): "member",
    ("/api/conversations/<conversation_id>", "PATCH"): "member",
    ("/api/conversations/<conversation_id>", "DELETE"): "member",
    ("/api/conversations/<conversation_id>/messages", "POST"): "member",
    ("/api/conversations/<conversation_id>/stop", "POST"): "member",
    ("/api/conversations/<conversation_id>/compact", "POST"): "member",
    ("/api/conversations/<conversation_id>/retry", "POST"): "member",
    ("/api/conversations/<conversation_id>/regenerate", "POST"): "member",
    ("/api/conversations/<conversation_id>/version", "PUT"): "member",
    ("/api/conversations/<conversation_id>/edit", "POST"): "member",
    ("/api/conversations/<conversation_id>/export", "GET"): "member",
    ("/api/conversations/<conversation_id>/uploads", "POST"): "member",
    # sub-agent runs live in the member's own file too; definitions are the host's
    ("/api/conversations/<conversation_id>/runs", "GET"): "member",
    ("/api/agent-runs/<run_id>", "GET"): "member",
    ("/api/agent-runs/<run_id>/cancel", "POST"): "member",
    ("/api/agent-definitions", "GET"): "member",
    ("/api/file", "GET"): "member",
    ("/api/approvals", "GET"): "member",
    ("/api/approvals/<approval_id>", "POST"): "member",
    ("/api/questions/<question_id>", "POST"): "member",
    # memory notes: the caller's own, or the shared pool (capability-gated in the service)
    ("/api/memory/<root>/notes", "GET"): "member",
    ("/api/memory/<root>/search", "GET"): "member",
    ("/api/memory/<root>/notes/<path:key>", "GET"): "member",
    ("/api/memory/<root>/notes/<path:key>", "PUT"): "member",
    ("/api/memory/<root>/notes/<path:key>", "DELETE"): "member",
    # scheduled prompts: the caller's own, in their own file
    ("/api/schedules", "GET"): "member",
    ("/api/schedules", "POST"): "member",
    ("/api/schedules/preview", "POST"): "member",
    ("/api/schedules/<job_id>", "PATCH"): "member",
    ("/api/schedules/<job_id>", "DELETE"): "member",
    # projects: self-service; a project id the caller is not in answers 404 (service)
    ("/api/projects", "GET"): "member",
    ("/api/projects", "POST"): "member",
    ("/api/projects/<project_id>", "GET"): "member",
    ("/api/projects/<project_id>", "PATCH"): "member",
    ("/api/projects/<project_id>", "DELETE"): "member",
    ("/api/projects/<project_id>/members", "POST"): "member",
    ("/api/projects/<project_id>/members/<member_id>", "PATCH"): "member",
    ("/api/projects/<project_id>/members/<member_id>", "DELETE"): "member",
    ("/api/projects/<project_id>/invitations/<invitation_id>", "DELETE"): "member",
    ("/api/project-invitations/<invitation_id>/accept", "POST"): "member",
    ("/api/project-invitations/<invitation_id>", "DELETE"): "member",
    ("/api/projects/<project_id>/chat", "POST"): "member",
    ("/api/projects/<project_id>/files", "GET"): "member",
    ("/api/projects/<project_id>/files/content", "GET"): "member",
    ("/api/projects/<project_id>/files/upload/<path:target>", "POST"): "member",
    ("/api/projects/<project_id>/files/folder", "POST"): "member",
    ("/api/projects/<project_id>/files/rename", "POST"): "member",
    ("/api/projects/<project_id>/files/delete", "POST"): "member",
    # administration
    ("/api/admin/members", "GET"): "admin",
    ("/api/admin/shared-folders", "GET"): "admin",
    ("/api/admin/shared-folders", "POST"): "admin",
    ("/api/admin/shared-folders/<folder_id>", "GET"): "admin",
    ("/api/admin/shared-folders/<folder_id>", "PATCH"): "admin",
    ("/api/admin/shared-folders/<folder_id>", "DELETE"): "admin",
    ("/api/admin/shared-folders/<folder_id>/members", "POST"): "admin",
    ("/api/admin/shared-folders/<folder_id>/members/<member_id>", "PATCH"): "admin",
    ("/api/admin/shared-folders/<folder_id>/members/<member_id>", "DELETE"): "admin",
    ("/api/admin/members", "POST"): "admin",
    ("/api/admin/members/<member_id>", "GET"): "admin",
    ("/api/admin/members/<member_id>", "PATCH"): "admin",
    ("/api/admin/members/<member_id>", "DELETE"): "admin",
    ("/api/admin/members/<member_id>/reset-password", "POST"): "admin",
    ("/api/admin/members/<member_id>/end-sessions", "POST"): "admin",
    ("/api/admin/members/<member_id>/plugins", "GET"): "admin",
    ("/api/admin/members/<member_id>/plugins", "PUT"): "admin",
    ("/api/admin/members/<member_id>/supervisors", "GET"): "admin",
    ("/api/admin/members/<member_id>/supervisors", "PUT"): "admin",
    ("/api/admin/members/<member_id>/agent-intervals", "GET"): "admin",
    ("/api/admin/members/<member_id>/agent-intervals", "PUT"): "admin",
    ("/api/system-agents", "GET"): "member",
    ("/api/system-agents/runs", "GET"): "member",
    ("/api/reports", "GET"): "member",
    ("/api/reports/<where>/<report_id>/read", "POST"): "member",
    ("/api/admin/roles", "GET"): "admin",
    ("/api/admin/roles", "POST"): "admin",
    ("/api/admin/roles/<role_id>", "PATCH"): "admin",
    ("/api/admin/roles/<role_id>", "DELETE"): "admin",
    ("/api/admin/plugins", "GET"): "admin",
    ("/api/admin/plugins.json", "GET"): "admin",
    ("/api/admin/plugins/<plugin_id>", "GET"): "admin",
    ("/api/admin/plugins/<plugin_id>/enabled", "PUT"): "admin",
    ("/api/admin/plugins/<plugin_id>/config", "PUT"): "admin",
    ("/api/admin/plugins/<plugin_id>/stale-settings", "DELETE"): "admin",
    ("/api/admin/plugins/<plugin_id>/access", "GET"): "admin",
    ("/api/admin/settings", "GET"): "admin",
    ("/api/admin/language", "GET"): "admin",
    ("/api/admin/language", "PUT"): "admin",
    ("/api/admin/settings/<set_id>", "PUT"): "admin",
    ("/api/admin/status", "GET"): "admin",
    ("/api/admin/backups", "GET"): "admin",
    ("/api/admin/backups", "POST"): "admin",
    ("/api/admin/models", "GET"): "admin",
    ("/api/admin/models/presets", "GET"): "admin",
    ("/api/admin/usage", "GET"): "admin",
    ("/api/admin/models/presets/apply", "POST"): "admin",
    ("/api/admin/models/providers", "POST"): "admin",
    ("/api/admin/models/providers/<provider_id>", "PATCH"): "admin",
    ("/api/admin/models/providers/<provider_id>", "DELETE"): "admin",
    ("/api/admin/models/providers/<provider_id>/test", "POST"): "admin",
    ("/api/admin/models/entries", "POST"): "admin",
    ("/api/admin/models/entries/<model_id>", "PATCH"): "admin",
    ("/api/admin/models/entries/<model_id>", "DELETE"): "admin",
    ("/api/admin/approval-rules", "GET"): "admin",
    ("/api/admin/approval-rules", "POST"): "admin",
    ("/api/admin/approval-rules/<int:rule_id>", "PATCH"): "admin",
    ("/api/admin/approval-rules/<int:rule_id>", "DELETE"): "admin",
    ("/api/admin/security-groups", "POST"): "admin",
    ("/api/admin/security-groups/<group_id>", "DELETE"): "admin",
}

#: A request body that succeeds for someone allowed to call the route; routes without
#: one send none.
BODIES: dict[tuple[str, str], dict] = {
    ("/api/setup", "POST"): {"username": "late-admin", "password": ADMIN_PASSWORD},
    ("/api/auth/password", "POST"): {},  # 400 for anyone allowed: it must not be 401/403
    ("/api/me/settings", "PUT"): {"theme": "dark"},
    ("/api/tts", "POST"): {"text": "Read this aloud."},
    ("/api/me/locale", "PUT"): {"locale": "de"},
    ("/api/me/home-source", "PUT"): {"home_source": "web"},
    ("/api/me/supervision/seen", "POST"): {"through": "2026-01-02T03:04:05.678Z"},
    ("/api/plugins/<plugin_id>/my-config", "PUT"): {"config": {"nickname": "swept"}},
    ("/api/admin/members", "POST"): {"username": "created-by-sweep", "password": "created password 42"},
    ("/api/admin/members/<member_id>", "PATCH"): {"display_name": "Swept"},
    ("/api/admin/members/<member_id>/reset-password", "POST"): {"new_password": "swept password 42", "confirm_data_loss": True},
    ("/api/admin/members/<member_id>/plugins", "PUT"): {"plugins": [PROBE]},
    ("/api/admin/members/<member_id>/supervisors", "PUT"): {"supervisors": []},
    ("/api/admin/members/<member_id>/agent-intervals", "PUT"): {"agent_id": "probe_agent", "interval": 10},
    ("/api/admin/roles", "POST"): {"id": "swept", "label": "Swept"},
    ("/api/admin/roles/<role_id>", "PATCH"): {"label": "Swept"},
    ("/api/admin/plugins/<plugin_id>/enabled", "PUT"): {"enabled": True},
    ("/api/admin/plugins/<plugin_id>/config", "PUT"): {"config": {"greeting": "hello"}},
    ("/api/admin/settings/<set_id>", "PUT"): {"values": {"level": 2}},
    ("/api/admin/language", "PUT"): {"locale": "en"},
    ("/api/conversations", "POST"): {"title": "swept"},
    ("/api/conversations/<conversation_id>", "PATCH"): {"title": "swept"},
    ("/api/conversations/<conversation_id>/messages", "POST"): {"text": "swept", "idempotency_key": "swept-message"},
    ("/api/approvals/<approval_id>", "POST"): {"decision": "deny"},
    ("/api/questions/<question_id>", "POST"): {"action": "decline"},
    ("/api/projects", "POST"): {"slug": "swept"},
    ("/api/projects/<project_id>", "PATCH"): {"title": "Swept"},
    ("/api/projects/<project_id>/members", "POST"): {"username": "bob"},
    ("/api/projects/<project_id>/members/<member_id>", "PATCH"): {"can_write": True},
    ("/api/projects/<project_id>/files/folder", "POST"): {"path": "swept"},
    ("/api/projects/<project_id>/files/rename", "POST"): {"from": "swept", "to": "swept-renamed"},
    ("/api/projects/<project_id>/files/delete", "POST"): {"path": "swept-renamed"},
    ("/api/admin/shared-folders", "POST"): {"slug": "swept"},
    ("/api/admin/shared-folders/<folder_id>", "PATCH"): {"title": "Swept"},
    ("/api/admin/shared-folders/<folder_id>/members", "POST"): {"username": "bob"},
    ("/api/admin/shared-folders/<folder_id>/members/<member_id>", "PATCH"): {"can_write": True},
    ("/api/memory/<root>/notes/<path:key>", "PUT"): {"content": "swept"},
    ("/api/schedules", "POST"): {"prompt": "swept", "every": "every day at 8"},
    ("/api/schedules/preview", "POST"): {"every": "every day at 8"},
    ("/api/schedules/<job_id>", "PATCH"): {"paused": True},
    ("/api/admin/models/presets/apply", "POST"): {"name": "Swept preset", "base_url": "http://127.0.0.1:9/v1"},
    ("/api/admin/models/providers", "POST"): {"name": "Swept", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-swept"},
    ("/api/admin/models/providers/<provider_id>", "PATCH"): {"name": "Sweep renamed"},
    ("/api/admin/models/entries", "POST"): {"provider_id": None, "model": "swept-model"},  # provider_id: filled in
    ("/api/admin/models/entries/<model_id>", "PATCH"): {"priority": 5},
    ("/api/admin/approval-rules", "POST"): {"tool_pattern": "swept_*", "action": "require", "priority": 20},
    ("/api/admin/approval-rules/<int:rule_id>", "PATCH"): {"note": "swept"},
    ("/api/admin/security-groups", "POST"): {"id": "swept", "label": "Swept"},
}


def ordered(keys) -> list[tuple[str, str]]:
    """Reads first, then writes, deletions and logout last, so one session can walk
    the whole list."""
    def rank(key):
        rule, method = key
        deleting = method == "DELETE"
        # a member is deleted last of all; otherwise an object's parts before the object
        return (rule == "/api/auth/logout", deleting and rule.startswith("/api/admin/members/"), deleting, method != "GET", -rule.count("/") if deleting else 0)

    return sorted(keys, key=lambda k: (rank(k), k))


async def _call(client, key, ids):
    rule, method = key
    body = BODIES.get(key)
    if key == ("/api/admin/models/entries", "POST"):
        body = {**body, "provider_id": ids["provider_id"]}
    return await client.request(method, fill(rule, **ids), json=body)


async def _install(skald, model_server):
    host = await skald.start(plugins=[Probe()], enable=[PROBE])
    admin = await host.admin()
    alice = await host.member("alice")
    bob = await host.create_member("bob")
    assert (await admin.post("/api/admin/roles", json={"id": "spare", "label": "Spare"})).status_code == 201
    ids = {"member_id": bob["id"], "role_id": "spare", "plugin_id": PROBE, "set_id": PROBE_SET, "filename": "app.js"}
    ids |= {"root": "user-memory", "key": "swept.md", "where": "own", "report_id": NO_SUCH_ID}
    ids |= await admin_chat_objects(admin, model_server)
    ids |= await member_chat_objects(alice)
    ids |= await folder_objects(admin, alice)
    ids |= await invitation_objects(host, alice, ids["project_id"], "bob")
    ids |= await question_objects(admin, alice)
    ids["run_id"] = await a_live_run(host, alice, ids["conversation_id"])
    return host, admin, alice, ids


async def invitation_objects(host, owner, project_id: str, invitee: str) -> dict[str, str]:
    """An invitation of ``owner``'s project waiting for ``invitee`` (made a member of
    the instance if need be): what the invitation routes act on."""
    if await host.core.users.find(invitee) is None:
        await host.create_member(invitee)
    response = await owner.post(f"/api/projects/{project_id}/members", json={"username": invitee})
    assert response.status_code == 201, response.text
    [invitation] = [i for i in response.json()["invitations"] if i["username"] == invitee]
    return {"invitation_id": invitation["id"]}


async def test_every_route_of_the_app_has_an_expected_access_level(skald):
    host = await skald.start(plugins=[Probe()], enable=[PROBE])
    actual = route_methods(host.app)
    missing, stale = actual - set(EXPECTED), set(EXPECTED) - actual
    assert not missing, (
        f"route(s) without an access level: {sorted(missing)}. Add each to EXPECTED in {__file__} "
        "('public', 'member' or 'admin'), and a body to BODIES if it takes one."
    )
    assert not stale, f"EXPECTED lists routes the app no longer has: {sorted(stale)}"


async def test_public_routes_are_exactly_the_views_marked_public(skald):
    host = await skald.start(plugins=[Probe()])
    for (rule, method), level in EXPECTED.items():
        if not rule.startswith("/api/"):
            assert level == "public", rule
            continue
        marked = is_public(host.app, endpoint_of(host.app, rule, method))
        assert marked == (level == "public"), f"{method} {rule}: marked public={marked}, expected {level}"


async def test_anonymous_callers_get_401_on_every_non_public_api_route(skald, model_server):
    host, _, _, ids = await _install(skald, model_server)
    before = await registry_dump(host)
    anonymous, forged_cookie, forged_bearer = host.client(), host.client(), host.client()
    forged_cookie.cookies["__Host-skald_session"] = "A" * 43
    forged_bearer.bearer = "A" * 43
    for key, level in EXPECTED.items():
        if level == "public":
            continue
        for client in (anonymous, forged_cookie, forged_bearer):
            if key[1] == "WS":
                with pytest.raises(InvalidStatus) as refused:
                    async with client.ws():
                        pass
                assert refused.value.response.status_code == 401
                continue
            response = await _call(client, key, ids)
            assert response.status_code == 401, f"{key}: {response.status_code}"
            assert response.json() == {"error": "authentication required", "code": "authentication_required"}
    assert await registry_dump(host) == before


async def test_public_routes_answer_without_a_session(skald, model_server):
    host, _, _, ids = await _install(skald, model_server)
    anonymous = host.client()
    for key in ordered(k for k, level in EXPECTED.items() if level == "public"):
        if key == ("/api/auth/login", "POST"):
            response = await anonymous.login("alice", MEMBER_PASSWORD)
            assert response.status_code == 200
            continue
        response = await _call(anonymous, key, ids)
        assert response.status_code not in (401, 403), f"{key}: {response.status_code}"
        assert response.status_code < 500, f"{key}: {response.status_code}"


async def test_members_get_403_on_every_admin_route_by_cookie_and_by_bearer(skald, model_server):
    host, admin, alice, ids = await _install(skald, model_server)
    await admin.patch(f"/api/admin/members/{ids['member_id']}", json={"role": "restricted"})
    bob = await host.member("bob")  # a member of the restricted preset
    alice_bearer = host.client()
    assert (await alice_bearer.login("alice", MEMBER_PASSWORD, bearer=True)).status_code == 200
    before = await registry_dump(host)
    admin_routes = ordered(k for k, level in EXPECTED.items() if level == "admin")
    for client in (alice, alice_bearer, bob):
        for key in admin_routes:
            response = await _call(client, key, ids)
            assert response.status_code == 403, f"{client.member['username']} {key}: {response.status_code} {response.text}"
            assert response.json() == {"error": "forbidden", "code": "forbidden"}
    assert await registry_dump(host) == before
    assert (await bob.get("/api/auth/session")).status_code == 200  # end-sessions did not run


async def test_admins_may_call_every_admin_route(skald, model_server):
    """The control for the 403s above: the same requests succeed for the admin."""
    host, admin, _, ids = await _install(skald, model_server)
    for key in ordered(k for k, level in EXPECTED.items() if level == "admin"):
        response = await _call(admin, key, ids)
        assert response.status_code < 300, f"{key}: {response.status_code} {response.text}"


async def test_members_may_call_every_member_route(skald, model_server):
    host, admin, alice, ids = await _install(skald, model_server)
    await admin.put(f"/api/admin/members/{alice.member['id']}/plugins", json={"plugins": [PROBE]})
    for key in ordered(k for k, level in EXPECTED.items() if level == "member"):
        if key[1] == "WS":
            async with alice.ws() as ws:
                await ws.send('{"type": "ping"}')
                assert "pong" in await ws.recv()
            continue
        response = await _call(alice, key, ids)
        assert response.status_code not in (401, 403), f"{key}: {response.status_code} {response.text}"
        assert response.status_code < 500, f"{key}: {response.status_code}"


async def test_no_route_shows_the_admin_a_members_private_content_or_a_secret(skald):
    """C4: the admin sees metadata only. A canary alice stores privately, and secret
    config values the admin typed in, appear in no GET response, while alice is
    unlocked and after she has logged out (locked)."""
    host = await skald.start(plugins=[Probe()], enable=[PROBE])
    admin = await host.admin()
    alice = await host.member("alice")
    canary, secret = "CANARY-8d2f0c1e-private", "CANARY-51a9-secret-token"
    response = await alice.put("/api/me/settings", json={"diary": canary, f"k-{canary}": 1})
    assert response.status_code == 200
    assert canary in (await alice.get("/api/me/settings")).text  # the owner can read it
    response = await alice.post("/api/conversations", json={"title": f"Title {canary}"})
    conversation_id = response.json()["id"]
    assert (await alice.post(f"/api/conversations/{conversation_id}/messages", json={"text": canary})).status_code == 202
    assert canary in (await alice.get(f"/api/conversations/{conversation_id}")).text
    for path, body in (
        (f"/api/admin/plugins/{PROBE}/config", {"config": {"api_key": secret}}),
        (f"/api/admin/settings/{PROBE_SET}", {"values": {"token": secret}}),
    ):
        response = await admin.put(path, json=body)
        assert response.status_code == 200 and secret not in response.text, path

    response = await alice.put("/api/memory/user-memory/notes/diary.md", json={"content": canary})
    assert response.status_code == 200, response.text
    ids = {"member_id": alice.member["id"], "plugin_id": PROBE, "filename": "app.js", "conversation_id": conversation_id}
    ids |= {"project_id": NO_SUCH_ID, "folder_id": NO_SUCH_ID, "run_id": NO_SUCH_ID}
    ids |= {"root": "user-memory", "key": "diary.md", "where": "own", "report_id": NO_SUCH_ID}
    get_routes = [key for key in EXPECTED if key[1] == "GET"]
    for phase in ("alice unlocked", "alice locked"):
        for rule, _ in get_routes:
            response = await admin.get(fill(rule, **ids))
            assert canary not in response.text, f"{rule} ({phase}) returned alice's private canary"
            assert secret not in response.text, f"{rule} ({phase}) returned a secret"
        await alice.post("/api/auth/logout")
        assert not host.core.users.is_unlocked(alice.member["id"])


# -- C1: another member's object ids ------------------------------------------------------

#: Path parameters that name no member-owned object: a plugin id is public knowledge
#: (its routes are gated by grants, see tests/catalog/test_grants.py).
#: A memory root and note key name a place in the caller's *own* store (the same key is
#: a different note for each member), so they cannot name another's object; the
#: cross-member case is tests/memory/test_memory_api.py.
NOT_OBJECT_IDS = {"plugin_id", "root", "key", "where"}

#: One request per member route that takes an object id, made by B with A's ids. A new
#: id-bearing route fails ``test_every_id_bearing_member_route_has_an_idor_case`` until
#: it has a line here.
IDOR_CASES: dict[tuple[str, str], dict | None] = {
    ("/api/reports/<where>/<report_id>/read", "POST"): None,
    ("/api/conversations/<conversation_id>", "GET"): None,
    ("/api/conversations/<conversation_id>", "PATCH"): {"title": "hijacked"},
    ("/api/conversations/<conversation_id>", "DELETE"): None,
    ("/api/conversations/<conversation_id>/messages", "POST"): {"text": "continue for me", "idempotency_key": "bob-continues"},
    ("/api/conversations/<conversation_id>/stop", "POST"): None,
    ("/api/conversations/<conversation_id>/compact", "POST"): None,
    ("/api/conversations/<conversation_id>/retry", "POST"): None,
    ("/api/conversations/<conversation_id>/regenerate", "POST"): None,
    ("/api/conversations/<conversation_id>/version", "PUT"): {"variant": 1},
    ("/api/conversations/<conversation_id>/edit", "POST"): {"message_id": 1, "text": "edited by bob"},
    ("/api/conversations/<conversation_id>/export", "GET"): None,
    ("/api/conversations/<conversation_id>/uploads", "POST"): None,
    ("/api/conversations/<conversation_id>/runs", "GET"): None,
    ("/api/agent-runs/<run_id>", "GET"): None,
    ("/api/agent-runs/<run_id>/cancel", "POST"): None,
    ("/api/approvals/<approval_id>", "POST"): {"decision": "approve"},
    ("/api/schedules/<job_id>", "PATCH"): {"paused": True, "prompt": "hijacked"},
    ("/api/schedules/<job_id>", "DELETE"): None,
    ("/api/questions/<question_id>", "POST"): {"action": "accept", "content": {"word": "hijacked"}},
    ("/api/projects/<project_id>", "GET"): None,
    ("/api/projects/<project_id>", "PATCH"): {"title": "hijacked"},
    ("/api/projects/<project_id>", "DELETE"): None,
    ("/api/projects/<project_id>/members", "POST"): {"username": "bob", "can_write": True},
    ("/api/projects/<project_id>/members/<member_id>", "PATCH"): {"can_write": False},
    ("/api/projects/<project_id>/members/<member_id>", "DELETE"): None,
    # an invitation of A's project, to a third member: B can neither answer nor withdraw it
    ("/api/projects/<project_id>/invitations/<invitation_id>", "DELETE"): None,
    ("/api/project-invitations/<invitation_id>/accept", "POST"): None,
    ("/api/project-invitations/<invitation_id>", "DELETE"): None,
    ("/api/projects/<project_id>/chat", "POST"): None,
    ("/api/projects/<project_id>/files", "GET"): None,
    ("/api/projects/<project_id>/files/content", "GET"): None,
    ("/api/projects/<project_id>/files/upload/<path:target>", "POST"): None,
    ("/api/projects/<project_id>/files/folder", "POST"): {"path": "hijacked"},
    ("/api/projects/<project_id>/files/rename", "POST"): {"from": "plan.txt", "to": "hijacked.txt"},
    ("/api/projects/<project_id>/files/delete", "POST"): {"path": "plan.txt"},
}

#: Every WebSocket command that names an object, with A's ids filled in.
WS_IDOR_CASES = {
    "send": {"type": "send", "conversation_id": "<conversation_id>", "text": "continue for me", "idempotency_key": "bob-ws-1"},
    "stop": {"type": "stop", "conversation_id": "<conversation_id>"},
    "approve": {"type": "approve", "approval_id": "<approval_id>", "decision": "approve"},
}


def _id_params(rule: str) -> set[str]:
    from web_support import PARAM

    return {m.group(1) for m in PARAM.finditer(rule)} - NOT_OBJECT_IDS


def _ws_message(template: dict, ids: dict) -> dict:
    return {k: fill(v, **ids) if isinstance(v, str) else v for k, v in template.items()}


async def test_every_id_bearing_member_route_has_an_idor_case(skald):
    from skald_host.web.routes.events import COMMANDS

    host = await skald.start(plugins=[Probe()])
    bearing = {key for key in route_methods(host.app) if EXPECTED.get(key) == "member" and _id_params(key[0])}
    assert not bearing - set(IDOR_CASES), f"id-bearing route(s) without a C1 case: {sorted(bearing - set(IDOR_CASES))}"
    assert not set(IDOR_CASES) - bearing, f"IDOR_CASES names routes that are gone: {sorted(set(IDOR_CASES) - bearing)}"
    assert set(WS_IDOR_CASES) == set(COMMANDS), "every WebSocket command needs a C1 case in WS_IDOR_CASES"


async def _two_members_with_chats(skald, model_server):
    host = await skald.start(plugins=[Probe()], enable=[PROBE])
    admin = await host.admin()
    await admin_chat_objects(admin, model_server)
    alice, bob = await host.member("alice"), await host.member("bob")
    theirs = await member_chat_objects(alice, title="alice's private title")
    theirs |= await folder_objects(admin, alice)
    theirs |= await invitation_objects(host, alice, theirs["project_id"], "carol")
    theirs |= await question_objects(admin, alice)
    theirs["member_id"] = alice.member["id"]  # a member of her project
    theirs |= {"where": "own", "report_id": await own_report(host, alice.member["id"])}
    theirs["run_id"] = await a_live_run(host, alice, theirs["conversation_id"])
    await member_chat_objects(bob)  # bob has objects of his own, so his file is not empty
    return host, alice, bob, theirs


async def _states(host, *clients) -> list:
    return [await registry_dump(host)] + [await owner_dump(host, c.member["id"]) for c in clients]


async def test_member_gets_404_and_changes_nothing_with_anothers_ids_while_unlocked_and_locked(skald, model_server):
    host, alice, bob, theirs = await _two_members_with_chats(skald, model_server)
    unknown = {"conversation_id": NO_SUCH_ID, "approval_id": NO_SUCH_ID, "project_id": NO_SUCH_ID, "member_id": NO_SUCH_ID, "job_id": NO_SUCH_ID}
    unknown |= {"where": "own", "report_id": NO_SUCH_ID}
    unknown |= {"target": theirs["target"], "folder_id": NO_SUCH_ID, "question_id": NO_SUCH_ID, "run_id": NO_SUCH_ID}
    unknown |= {"invitation_id": NO_SUCH_ID}

    async def sweep(phase: str) -> None:
        for (rule, method), body in IDOR_CASES.items():
            response = await bob.request(method, fill(rule, **theirs), json=body)
            control = await bob.request(method, fill(rule, **unknown), json=body)
            assert response.status_code == 404, f"{phase}: {method} {rule}: {response.status_code} {response.text}"
            assert response.json() == control.json(), f"{phase}: {method} {rule} tells A's ids from unknown ones"

    before = await _states(host, alice, bob)
    await sweep("alice unlocked")
    assert await _states(host, alice, bob) == before

    # Alice answers her own question now: a turn waiting on one when she logs out is
    # resumed by her next login's recovery, in a race with the comparison below.
    answered = await alice.post(f"/api/questions/{theirs['question_id']}", json={"action": "decline"})
    assert answered.status_code == 200, answered.text
    await settled(alice, theirs["question_conversation_id"])
    before = await _states(host, alice, bob)

    assert (await alice.post("/api/auth/logout")).status_code == 200
    assert not host.core.users.is_unlocked(alice.member["id"])
    locked = await _states(host, bob)
    await sweep("alice locked")
    assert await _states(host, bob) == locked

    assert (await alice.login("alice", MEMBER_PASSWORD)).status_code == 200
    # Her unlock starts her runtime, whose recovery (seed 004 §6) ends the run no
    # process carried across the lock and counts her runs again: waited for, not raced.
    await host.core.chat.runtime(await host.core.users.get(alice.member["id"]))
    # Her login counts one more opening of her file (check G6); recovery did what it
    # does to any run left live; nothing else changed.
    after = await owner_dump(host, alice.member["id"])
    assert after.pop("generation") == [(1, before[1]["generation"][0][1] + 1)]
    # (and gave the registry the request log's rows her file carried, emptying them there)
    recovered = ("agent_runs", "agent_session_state", "request_log_outbox")
    assert {k: v for k, v in after.items() if k not in recovered} == {k: v for k, v in before[1].items() if k not in recovered and k != "generation"}
    db = host.core.users.owner_db(alice.member["id"])
    runs = await db.run(lambda c: c.execute("SELECT id, status FROM agent_runs").fetchall())
    assert [tuple(r) for r in runs] == [(theirs["run_id"], "interrupted")]
    assert [row[1:4] for row in after["agent_session_state"]] == [(0, 0, 0)]  # nothing live, nothing reserved
    # A's turn is intact: the card still waits for A.
    assert [a["id"] for a in (await alice.get("/api/approvals")).json()["approvals"]] == [theirs["approval_id"]]


async def test_websocket_commands_with_anothers_ids_answer_a_generic_error_and_send_none_of_their_data(skald, model_server):
    host, alice, bob, theirs = await _two_members_with_chats(skald, model_server)
    unknown = {"conversation_id": NO_SUCH_ID, "approval_id": NO_SUCH_ID}
    before = await _states(host, alice, bob)
    received: list[str] = []
    async with bob.ws() as ws:
        for command, template in WS_IDOR_CASES.items():
            await ws.send(json.dumps(_ws_message(template, theirs)))
            reply = await asyncio.wait_for(ws.recv(), 5)
            await ws.send(json.dumps({**_ws_message(template, unknown), "idempotency_key": template.get("idempotency_key")}))
            control = await asyncio.wait_for(ws.recv(), 5)
            received += [reply, control]
            assert json.loads(reply)["type"] == "error", (command, reply)
            assert reply == control, f"{command}: A's ids answer differently from unknown ones"
        await ws.send('{"type": "ping"}')
        received.append(await asyncio.wait_for(ws.recv(), 5))
    assert received[-1] == '{"type": "pong"}'
    for frame in received:
        assert theirs["conversation_id"] not in frame and theirs["approval_id"] not in frame
        assert "alice" not in frame and alice.member["id"] not in frame
    assert await _states(host, alice, bob) == before

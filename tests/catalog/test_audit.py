"""Check C3's audit: every refusal for want of a grant or a capability leaves one line
on the ``skald.audit`` logger naming who, what and where, and nothing of the request's
content (the admin reads these files)."""

from __future__ import annotations

import logging

from typing import Any

from tests.channels.support import CHANNEL, RecordingChannel

from .support import Routed, member_id

CANARY = "canary-audit-4e1d the member's words"


def audit_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "skald.audit"]


async def test_refusals_are_audited_with_who_what_and_where_and_never_the_content(skald, caplog):
    caplog.set_level(logging.INFO)
    channel = RecordingChannel()
    host = await skald.start(plugins=[Routed("alpha"), channel], enable=["alpha", CHANNEL])
    admin = await host.admin()
    alice = await host.member("alice")
    alice_id = await member_id(host, "alice")
    assert (await alice.get("/api/plugin/alpha/ping")).status_code == 200
    assert audit_lines(caplog) == []  # an allowed call leaves none

    assert (await admin.put(f"/api/admin/members/{alice_id}/plugins", json={"plugins": []})).status_code == 200
    assert (await alice.post("/api/plugin/alpha/ping", json={"text": CANARY})).status_code in (403, 405)
    assert (await alice.get("/api/plugin/alpha/ping")).status_code == 403
    assert (await alice.post("/api/admin/members", json={"username": "mallory", "password": CANARY})).status_code == 403
    refused = await channel.api.send_message(alice_id, CANARY)
    assert refused.status == "refused"

    lines = audit_lines(caplog)
    assert f"denied member={alice_id} plugin:alpha method=GET route=/api/plugin/alpha/ping" in lines
    assert f"denied member={alice_id} action:members.manage method=POST route=/api/admin/members" in lines
    assert f"denied member={alice_id} plugin:{CHANNEL} via=channel" in lines
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "skald.audit")
    assert CANARY not in caplog.text and "mallory" not in caplog.text


class OwnChecks(Routed):
    """A plugin that refuses a page of its own to non-admins, as the connectors plugin's
    catalog does, with nothing written to the audit log by the plugin itself."""

    def add_routes(self, blueprint: Any) -> None:
        from quart import g

        @blueprint.get("/admin-only")
        async def admin_only() -> Any:
            if not g.principal.member.is_admin:
                return {"error": "admins only", "code": "beta.admin_only"}, 403
            return {"ok": True}


async def test_a_plugin_routes_own_refusal_is_audited_once_by_the_host(skald, caplog):
    caplog.set_level(logging.INFO)
    host = await skald.start(plugins=[OwnChecks("beta")], enable=["beta"])
    admin = await host.admin()
    bob = await host.member("bob")
    bob_id = await member_id(host, "bob")
    assert (await admin.get("/api/plugin/beta/admin-only")).status_code == 200
    assert (await bob.get("/api/plugin/beta/ping")).status_code == 200
    assert audit_lines(caplog) == []  # allowed calls leave none
    assert (await bob.get("/api/plugin/beta/admin-only", params={"q": CANARY})).status_code == 403
    assert audit_lines(caplog) == [f"denied member={bob_id} plugin-route:beta method=GET route=/api/plugin/beta/admin-only"]

    caplog.clear()  # the gate's own refusal (no grant) stays one line, not one more from the plugin's check
    assert (await admin.put(f"/api/admin/members/{bob_id}/plugins", json={"plugins": []})).status_code == 200
    assert (await bob.get("/api/plugin/beta/admin-only")).status_code == 403
    assert audit_lines(caplog) == [f"denied member={bob_id} plugin:beta method=GET route=/api/plugin/beta/admin-only"]
    assert CANARY not in caplog.text

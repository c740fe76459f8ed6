"""A member who was signed out when the admin named a supervisor learns it at their next
sign-in (newcomer probe: the live notice reached only an open page or a home channel,
so a web member signed out never learned it). /api/me/privacy reports the supervisors
named since the member last acknowledged; acknowledging is their own, up to the time
they were shown; system.db keeps a time for it, no text."""

from __future__ import annotations

from skald_host.testing.host import MEMBER_PASSWORD


async def _news(client) -> dict:
    response = await client.get("/api/me/privacy")
    assert response.status_code == 200, response.text
    return response.json()["supervision_news"]


async def _seen_at(host, member_id: str) -> str | None:
    return await host.core.registry.run(lambda c: c.execute("SELECT supervision_seen_at FROM users WHERE id = ?", (member_id,)).fetchone()[0])


async def test_a_supervisor_named_while_the_member_was_signed_out_is_reported_at_sign_in_until_acknowledged(skald):
    host = await skald.start(settings=skald.settings(system_agents={"run": False}))
    admin = await host.admin()
    pat = await host.member("pat", display_name="Pat")
    bob_id = (await host.create_member("bob", display_name="Bob"))["id"]  # never signed in
    carol_id = (await host.create_member("carol", display_name="Carol"))["id"]

    named = await admin.put(f"/api/admin/members/{bob_id}/supervisors", json={"supervisors": [pat.member["id"]]})
    assert named.status_code == 200, named.text

    bob = host.client()
    assert (await bob.login("bob", MEMBER_PASSWORD)).status_code == 200
    news = await _news(bob)
    assert news["added"] == ["Pat"] and news["added_through"]
    assert await _news(pat) == {"added": [], "added_through": None}  # pat supervises; nobody supervises pat

    # Acknowledging is one's own: pat's acknowledgement with bob's time leaves bob's
    # notice, and naming bob in the body is refused.
    assert (await pat.post("/api/me/supervision/seen", json={"through": news["added_through"]})).status_code == 200
    refused = await pat.post("/api/me/supervision/seen", json={"through": news["added_through"], "member_id": bob_id})
    assert refused.status_code == 400, refused.text
    assert (await _news(bob))["added"] == ["Pat"]
    assert await _seen_at(host, bob_id) is None

    # A signed-out client cannot acknowledge at all.
    assert (await host.client().post("/api/me/supervision/seen", json={"through": news["added_through"]})).status_code == 401

    seen = await bob.post("/api/me/supervision/seen", json={"through": news["added_through"]})
    assert seen.status_code == 200, seen.text
    assert seen.json() == {"added": [], "added_through": None}
    assert await _seen_at(host, bob_id) == news["added_through"]  # a time, the edge's own; no text
    # Not again: at the next sign-in either.
    assert (await bob.post("/api/auth/logout")).status_code == 200
    again = host.client()
    assert (await again.login("bob", MEMBER_PASSWORD)).status_code == 200
    assert await _news(again) == {"added": [], "added_through": None}
    # My account still says who supervises him.
    assert (await again.get("/api/me/privacy")).json()["supervision"]["supervisors"] == ["Pat"]

    # A second supervisor is news again, alone; an acknowledgement of the earlier time
    # (a page open since before) does not swallow it.
    named = await admin.put(f"/api/admin/members/{bob_id}/supervisors", json={"supervisors": [pat.member["id"], carol_id]})
    assert named.status_code == 200, named.text
    later = await _news(again)
    assert later["added"] == ["Carol"] and later["added_through"] > news["added_through"]
    stale = await again.post("/api/me/supervision/seen", json={"through": news["added_through"]})
    assert stale.json() == later
    assert (await again.post("/api/me/supervision/seen", json={"through": later["added_through"]})).json()["added"] == []

    # A time that is not one is refused at its field.
    for not_a_time in ("yesterday", "2026-13-45T99:99:99Z"):  # the second has a time's shape only
        bad = await again.post("/api/me/supervision/seen", json={"through": not_a_time})
        assert bad.status_code == 400 and bad.json()["field"] == "through", bad.text
    assert await _seen_at(host, bob_id) == later["added_through"]

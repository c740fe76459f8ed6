"""A role's interface (attrs.ui_mode, seed 001 "Role-driven interface") reaches its
members: the seeded restricted role said "simple", the Roles API stored it, and nothing
told the web shell, which drew every page for them."""

from __future__ import annotations


async def test_the_roles_api_round_trips_the_interface_and_the_session_says_it(skald):
    host = await skald.start()
    admin = await host.admin()
    lena = await host.member("lena")  # the member preset: the full interface
    assert (await lena.get("/api/auth/session")).json()["ui_mode"] == "full"

    updated = await admin.patch("/api/admin/roles/member", json={"attrs": {"ui_mode": "simple"}})
    assert updated.status_code == 200, updated.text
    assert updated.json()["attrs"]["ui_mode"] == "simple"
    listed = {r["id"]: r for r in (await admin.get("/api/admin/roles")).json()["roles"]}
    assert listed["member"]["attrs"]["ui_mode"] == "simple"
    assert (await lena.get("/api/auth/session")).json()["ui_mode"] == "simple"

    refused = await admin.patch("/api/admin/roles/member", json={"attrs": {"ui_mode": "fancy"}})
    assert refused.status_code == 400, refused.text
    assert (refused.json()["code"], refused.json().get("field")) == ("role_ui_mode_invalid", "ui_mode"), refused.text
    assert (await lena.get("/api/auth/session")).json()["ui_mode"] == "simple"  # unchanged by the refusal


async def test_an_admins_interface_is_always_full(skald):
    host = await skald.start()
    admin = await host.admin()
    refused = await admin.patch("/api/admin/roles/admin", json={"attrs": {"ui_mode": "simple"}})
    # Whether or not the store keeps the word for the admin role, its members stay full.
    assert refused.status_code in (200, 400), refused.text
    assert (await admin.get("/api/auth/session")).json()["ui_mode"] == "full"
    kim = await host.member("kim", role="restricted")  # the seeded role that asks for the simple one
    assert (await kim.get("/api/auth/session")).json()["ui_mode"] == "simple"

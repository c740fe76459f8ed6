"""Password rules, change and the first-run race over HTTP (check A5).

The policy (``skald_host.core.identity.passwords``): 8 to 1024 code points after NFC,
not only spaces, not the user name, not on the breached list; never truncated.
"""

from __future__ import annotations

import asyncio
import unicodedata


from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from web_support import POLICY_VIOLATION, close_code


async def _create(admin, username: str, password: str):
    return await admin.post("/api/admin/members", json={"username": username, "password": password})


POLICY_REFUSALS = [
    ("x7#Kq!2", "at least 8 characters"),
    ("", "at least 8 characters"),
    ("        ", "only of spaces"),
    ("password1", "breached"),
    ("PASSWORD1", "breached"),  # the list is compared case-insensitively
    ("iloveyou", "breached"),
    ("carol-the-member", "same as the user name"),
    ("x" * 1025, "at most 1024 characters"),
]


async def test_policy_refuses_with_a_message_that_says_what_to_fix(skald):
    host = await skald.start()
    admin = await host.admin()
    for password, fragment in POLICY_REFUSALS:
        response = await _create(admin, "carol-the-member", password)
        assert response.status_code == 400, password
        assert fragment in response.json()["error"], (password, response.text)
    assert await host.core.users.find("carol-the-member") is None


async def test_passwords_of_8_15_64_and_128_characters_are_accepted_and_log_in(skald):
    host = await skald.start()
    admin = await host.admin()
    for length in (8, 15, 64, 128):
        password = ("x7#Kq!2m" * 16)[:length]
        username = f"len{length}"
        assert (await _create(admin, username, password)).status_code == 201, length
        assert (await host.client().login(username, password)).status_code == 200, length
        # No prefix of the password works: nothing was cut off.
        assert (await host.client().login(username, password[:-1])).status_code == 401, length


async def test_nfc_and_nfd_spellings_of_a_password_are_the_same_password(skald):
    host = await skald.start()
    admin = await host.admin()
    composed = unicodedata.normalize("NFC", "Grüße-Café-Ñandú")
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert (await _create(admin, "nfc", composed)).status_code == 201
    assert (await _create(admin, "nfd", decomposed)).status_code == 201
    for username in ("nfc", "nfd"):
        for spelling in (composed, decomposed):
            assert (await host.client().login(username, spelling)).status_code == 200, (username, spelling)
    assert (await host.client().login("nfc", "Gruse-Cafe-Nandu")).status_code == 401


async def test_passwords_are_not_truncated_at_72_bytes(skald):
    """bcrypt would see 72×a+b and 72×a+c as one password; Argon2id must not."""
    host = await skald.start()
    admin = await host.admin()
    assert (await _create(admin, "long", "a" * 72 + "b")).status_code == 201
    assert (await host.client().login("long", "a" * 72 + "c")).status_code == 401
    assert (await host.client().login("long", "a" * 72)).status_code == 401
    assert (await host.client().login("long", "a" * 72 + "b")).status_code == 200


async def test_policy_also_applies_to_setup_change_and_reset(skald):
    host = await skald.start()
    client = host.client()
    response = await client.post("/api/setup", json={"username": "admin", "password": "password1"})
    assert response.status_code == 400 and "breached" in response.json()["error"]
    assert await host.core.users.count() == 0

    admin = await host.admin()
    alice = await host.member("alice")
    response = await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": "short"})
    assert response.status_code == 400 and "at least 8" in response.json()["error"]
    response = await admin.post(
        f"/api/admin/members/{alice.member['id']}/reset-password",
        json={"new_password": "password1", "confirm_data_loss": True},
    )
    assert response.status_code == 400 and "breached" in response.json()["error"]
    assert (await host.client().login("alice", "password1")).status_code == 401


async def test_a_reset_refused_by_the_policy_leaves_the_member_signed_in(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    response = await admin.post(
        f"/api/admin/members/{alice.member['id']}/reset-password",
        json={"new_password": "password1", "confirm_data_loss": True},
    )
    assert response.status_code == 400
    assert (await alice.get("/api/auth/session")).status_code == 200
    assert host.core.users.is_unlocked(alice.member["id"])


async def test_change_with_the_wrong_current_password_is_refused_and_changes_nothing(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    other = await host.member("alice")
    response = await alice.post(
        "/api/auth/password", json={"current_password": "not my password", "new_password": "a brand new password 42"}
    )
    assert response.status_code == 403
    assert response.json() == {"error": "the current password is wrong", "code": "current_password_wrong", "field": "current_password"}
    assert (await other.get("/api/auth/session")).status_code == 200
    assert (await host.client().login("alice", MEMBER_PASSWORD)).status_code == 200
    assert (await host.client().login("alice", "a brand new password 42")).status_code == 401


async def test_change_ends_the_other_sessions_and_keeps_this_one(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    await alice.put("/api/me/settings", json={"kept": "across the change"})
    other_cookie = await host.member("alice")
    other_bearer = host.client()
    assert (await other_bearer.login("alice", MEMBER_PASSWORD, bearer=True)).status_code == 200
    new = "a brand new password 42"

    async with other_cookie.ws() as socket:
        response = await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": new})
        assert response.status_code == 200
        assert await close_code(socket) == POLICY_VIOLATION

    assert (await other_cookie.get("/api/auth/session")).status_code == 401
    assert (await other_bearer.get("/api/auth/session")).status_code == 401
    assert (await alice.get("/api/auth/session")).status_code == 200
    assert (await alice.put("/api/me/settings", json={"after": True})).status_code == 200
    # The same key was re-wrapped: the data survives, and the member stays unlocked.
    assert (await alice.get("/api/me/settings")).json()["settings"] == {"kept": "across the change", "after": True}
    assert host.core.users.is_unlocked(alice.member["id"])

    assert (await host.client().login("alice", MEMBER_PASSWORD)).status_code == 401
    fresh = host.client()
    assert (await fresh.login("alice", new)).status_code == 200
    assert (await fresh.get("/api/me/settings")).json()["settings"]["kept"] == "across the change"


async def test_twenty_concurrent_setups_make_exactly_one_admin(skald):
    host = await skald.start()
    clients = [host.client() for _ in range(20)]
    responses = await asyncio.gather(
        *(
            client.post("/api/setup", json={"username": f"admin{n}", "password": ADMIN_PASSWORD})
            for n, client in enumerate(clients)
        )
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [409] * 19, [(r.status_code, r.text) for r in responses]
    members = await host.core.users.list()
    assert len(members) == 1 and members[0].is_admin
    winner = next(c for c, r in zip(clients, responses) if r.status_code == 201)
    assert (await winner.get("/api/admin/members")).status_code == 200
    assert all(r.headers.get_list("set-cookie") == [] for r in responses if r.status_code == 409)
    # No stray owner files from the losers.
    owner_files = sorted(p.stem for p in host.settings.database_dir.glob("*.db") if p.name != "system.db")
    assert owner_files == [members[0].id]


async def test_twenty_concurrent_setups_with_one_name_make_exactly_one_admin(skald):
    host = await skald.start()
    responses = await asyncio.gather(
        *(host.client().post("/api/setup", json={"username": "admin", "password": ADMIN_PASSWORD}) for _ in range(20))
    )
    assert sorted(r.status_code for r in responses) == [201] + [409] * 19, [(r.status_code, r.text) for r in responses]
    assert [m.username for m in await host.core.users.list()] == ["admin"]


async def test_a_password_the_admin_chose_is_marked_until_the_member_chooses_their_own(skald):
    """The admin chooses a new member's first password (and a reset's): until the
    member changes it themself, the admin knows what opens their data, and the session
    says so (the shell asks them to choose their own). The first admin chose theirs."""
    host = await skald.start()
    admin = await host.admin()
    assert (await admin.get("/api/auth/session")).json()["member"]["password_set_by_admin"] is False
    created = await _create(admin, "bob", MEMBER_PASSWORD)
    assert created.status_code == 201 and created.json()["password_set_by_admin"] is True
    bob = host.client()
    assert (await bob.login("bob", MEMBER_PASSWORD)).status_code == 200
    assert (await bob.get("/api/auth/session")).json()["member"]["password_set_by_admin"] is True

    changed = await bob.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": "bob chose this himself 4"})
    assert changed.status_code == 200, changed.text
    assert (await bob.get("/api/auth/session")).json()["member"]["password_set_by_admin"] is False
    listed = {m["username"]: m["password_set_by_admin"] for m in (await admin.get("/api/admin/members")).json()["members"]}
    assert listed["bob"] is False and listed["admin"] is False

    bob_id = created.json()["id"]
    reset = await admin.post(f"/api/admin/members/{bob_id}/reset-password", json={"new_password": "the admin's again 5", "confirm_data_loss": True})
    assert reset.status_code == 200, reset.text
    bob = host.client()
    assert (await bob.login("bob", "the admin's again 5")).status_code == 200
    assert (await bob.get("/api/auth/session")).json()["member"]["password_set_by_admin"] is True

"""Sign-ins that overlap a password change or an admin reset, and parallel guesses
(found by a security sweep on a live server):

- a sign-in with the old password whose check finished before a change or reset
  committed got its session after the change had ended every other one, and kept it;
  after a reset, its connection to the old file was handed to whoever signed in next,
  the admin with the password they chose included;
- parallel wrong guesses were all admitted before the first was counted, so a burst of
  25 met no limit of 10.

The racing sign-in is held right after its password check (the Argon2 step is what
takes long enough for a change to commit meanwhile), so the order is exact."""

from __future__ import annotations

import asyncio

from skald_host.testing.host import MEMBER_PASSWORD

NEW_PASSWORD = "a brand new password 42"
WRONG = "wrong password here"


def hold_after_check(users) -> tuple[asyncio.Event, asyncio.Event]:
    """The next password check returns only when ``go`` is set; ``checked`` says it ran."""
    checked, go = asyncio.Event(), asyncio.Event()
    real = users.verify_password

    async def verify_then_wait(*args, **kwargs):
        result = await real(*args, **kwargs)
        if not checked.is_set():
            checked.set()
            await go.wait()
        return result

    users.verify_password = verify_then_wait
    return checked, go


async def test_a_sign_in_checked_before_a_password_change_committed_gets_no_session(skald):
    host = await skald.start()
    await host.admin()
    alice = await host.member("alice")
    checked, go = hold_after_check(host.core.users)
    racer = host.client()
    racing = asyncio.ensure_future(racer.login("alice", MEMBER_PASSWORD, bearer=True))
    await asyncio.wait_for(checked.wait(), 10)
    changed = await alice.post("/api/auth/password", json={"current_password": MEMBER_PASSWORD, "new_password": NEW_PASSWORD})
    assert changed.status_code == 200, changed.text
    go.set()
    response = await racing
    assert response.status_code == 401, response.text
    assert (await racer.get("/api/auth/session")).status_code == 401
    assert (await alice.get("/api/auth/session")).status_code == 200  # the changing session stays
    assert (await host.client().login("alice", NEW_PASSWORD)).status_code == 200


async def test_a_sign_in_with_the_old_password_racing_an_admin_reset_opens_nothing_of_the_old_file(skald):
    host = await skald.start()
    admin = await host.admin()
    alice = await host.member("alice")
    created = await alice.post("/api/conversations", json={"title": "ALICE PRIVATE TITLE"})
    assert created.status_code in (200, 201), created.text
    checked, go = hold_after_check(host.core.users)
    racer = host.client()
    racing = asyncio.ensure_future(racer.login("alice", MEMBER_PASSWORD, bearer=True))
    await asyncio.wait_for(checked.wait(), 10)
    reset = await admin.post(
        f"/api/admin/members/{alice.member['id']}/reset-password", json={"new_password": NEW_PASSWORD, "confirm_data_loss": True}
    )
    assert reset.status_code == 200, reset.text
    go.set()
    response = await racing
    assert response.status_code == 401, response.text
    holder = host.client()
    assert (await holder.login("alice", NEW_PASSWORD)).status_code == 200
    assert (await holder.get("/api/conversations")).json()["conversations"] == []


async def test_parallel_wrong_guesses_meet_the_account_limit_together(skald):
    host = await skald.start()
    await host.admin()
    await host.create_member("alice")
    limit = host.core.settings.auth.login_failures_per_account
    clients = [host.client() for _ in range(limit + 15)]
    answers = await asyncio.gather(*(c.login("alice", WRONG, bearer=True) for c in clients))
    codes = [a.status_code for a in answers]
    assert codes.count(401) <= limit and codes.count(429) >= 15, codes


async def test_correct_sign_ins_at_the_same_moment_wait_their_turn(skald):
    """More correct sign-ins at once than the account's limit (a family's devices after
    a restart, a script): those held only by others still being checked wait for them,
    and all get in; none reads "too many failed logins" (a security sweep saw ten of
    twenty refused so). The wrong guesses above are still refused at the limit."""
    host = await skald.start()
    await host.admin()
    await host.create_member("alice")
    limit = host.core.settings.auth.login_failures_per_account
    clients = [host.client() for _ in range(2 * limit)]
    answers = await asyncio.gather(*(c.login("alice", MEMBER_PASSWORD, bearer=True) for c in clients))
    assert [a.status_code for a in answers] == [200] * (2 * limit), [(a.status_code, a.text) for a in answers if a.status_code != 200]

"""Every route of the plugin's router, called anonymously, as a member and as the
admin (check C1, A6): the table below must name each route the router has, so a new
route without a decided access level fails here. One member's link is never visible
to another."""

from __future__ import annotations

from skald_host.testing import SkaldClient
from telegram_support import ALICE_CHAT, Setup, paired_member, running

PREFIX = "/api/plugin/telegram"

# (method, path) -> statuses for (anonymous, member, admin). The webhook is public and
# checks its own secret; in polling mode it answers 404 to everyone.
EXPECTED = {
    ("GET", "/page.js"): (401, 200, 200),
    ("GET", "/roster.js"): (401, 200, 200),
    ("GET", "/status"): (401, 200, 200),
    ("GET", "/roster"): (401, 403, 200),
    ("POST", "/webhook"): (404, 404, 404),
}


def plugin_routes(setup: Setup) -> set[tuple[str, str]]:
    found = set()
    for rule in setup.host.app.url_map.iter_rules():
        if rule.rule.startswith(PREFIX + "/"):
            for method in rule.methods - {"HEAD", "OPTIONS"}:
                found.add((method, rule.rule[len(PREFIX):]))
    return found


async def call(client: SkaldClient, method: str, path: str) -> int:
    if method == "GET":
        return (await client.get(PREFIX + path)).status_code
    return (await client.request(method, PREFIX + path, json={})).status_code


async def test_every_route_has_a_decided_access_level(setup: Setup):
    await running(setup)
    assert plugin_routes(setup) == set(EXPECTED), "a plugin route lacks a row in EXPECTED (or a row names no route)"
    anonymous = setup.host.client()
    bob = await setup.host.member("bob")
    for (method, path), (as_anonymous, as_member, as_admin) in EXPECTED.items():
        got = (await call(anonymous, method, path), await call(bob, method, path), await call(setup.admin, method, path))
        assert got == (as_anonymous, as_member, as_admin), (method, path, got)


async def test_one_members_link_is_invisible_to_another(setup: Setup):
    await running(setup)
    alice = await paired_member(setup, "alice", ALICE_CHAT)
    mine = (await alice.get(PREFIX + "/status")).json()
    assert mine["linked"] is True and mine["chat_name"]
    bob = await setup.host.member("bob")
    theirs = (await bob.get(PREFIX + "/status")).json()
    assert theirs["linked"] is False and theirs["chat_name"] is None
    assert mine["chat_name"] not in str(theirs)
    roster = (await setup.admin.get(PREFIX + "/roster")).json()["links"]
    assert [row["chat_id"] for row in roster] == [ALICE_CHAT]


async def test_enabled_without_a_token_the_members_page_does_not_send_them_to_a_bot(setup: Setup):
    """No token yet: the plugin is enabled but no bot runs, so the member's page says
    so instead of 'write to the bot to get a pairing code' (in their language)."""
    await setup.enable()
    assert setup.host.core.plugins.status("telegram").healthy is False
    bert = await setup.host.member("bert", locale="de")
    status = (await bert.get(PREFIX + "/status")).json()
    assert (status["running"], status["linked"]) == (False, False)
    assert status["line"].startswith("Der Telegram-Bot läuft gerade nicht")

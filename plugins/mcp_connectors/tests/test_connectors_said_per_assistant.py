"""The Connectors page and the Helpers page say what is true for the member's own
assistants: a restricted member (the Companion: a fixed tool list, no tools.delegate)
granted a connector read "These are available to you: demo (running): demo__echo",
while a call to demo__echo was "no tool named 'demo__echo' here", and read "the named
helpers your assistant can hand work to" though it could hand work to none."""

from __future__ import annotations

from mcp_support import Setup
from skald_host.testing.host import MEMBER_PASSWORD

TAG = "skald-p-mcp-connectors"


async def test_a_companions_member_is_not_promised_connector_tools_or_helpers(setup: Setup, plugin_browser):
    # a role with few capabilities and the full interface: the pages under test are in it (the
    # seeded role's simple one leaves them out, see test_simple_interface.py)
    assert (await setup.admin.patch("/api/admin/roles/restricted", json={"attrs": {"ui_mode": "full"}})).status_code == 200
    kim = await setup.host.member("kim", role="restricted")
    alice = await setup.host.member("alice")
    granted = await setup.admin.put(f"/api/admin/members/{kim.member['id']}/plugins", json={"plugins": ["mcp"]})
    assert granted.status_code == 200, granted.text
    await setup.add_stdio(access=[kim.member["id"], alice.member["id"]])

    # The host's rule, as the rounds apply it: the Companion is offered none of them.
    [companion] = (await kim.get("/api/chat/status")).json()["agents"]
    assert (companion["id"], companion["member_tools"]) == ("companion", [])
    offered = {a["id"]: a["member_tools"] for a in (await alice.get("/api/chat/status")).json()["agents"]}
    assert "demo__echo" in offered["assistant"], offered
    hand_off = (await kim.get("/api/agent-definitions")).json()["hand_off"]
    assert hand_off == {"role_allows": False, "assistants": [{"id": "companion", "title": "Companion", "delegates": False}]}
    assert (await alice.get("/api/agent-definitions")).json()["hand_off"]["role_allows"] is True

    page = await plugin_browser.new_page()
    await plugin_browser.sign_in(page, setup.host, "kim", MEMBER_PASSWORD)
    await plugin_browser.mount(page, "mcp", "connectors")
    intro = page.locator(f"{TAG} .mcp-mine-intro")
    await intro.wait_for(timeout=10_000)
    assert (await intro.inner_text()).startswith("Your assistant (Companion) does not use connector tools")
    row = page.locator(f"{TAG} li.mcp-connector")
    assert "demo__echo" not in await row.inner_text()

    await page.goto(setup.host.url + "/#agents")
    await page.reload()  # the shell itself, where the page above was mounted alone
    await page.get_by_text("Your role does not let your assistant hand work to helpers.").wait_for(timeout=10_000)
    assert "The named helpers your assistant can hand work to" not in await page.locator(".agents-page").inner_text()

    # Alice's assistant is offered them: her page lists the tools as before.
    page = await plugin_browser.new_page()
    await plugin_browser.sign_in(page, setup.host, "alice", MEMBER_PASSWORD)
    await plugin_browser.mount(page, "mcp", "connectors")
    await page.locator(f"{TAG} li.mcp-connector").filter(has_text="demo__echo").wait_for(timeout=10_000)
    assert (await page.locator(f"{TAG} .mcp-mine-intro").inner_text()).startswith("Connectors give your assistant tools")

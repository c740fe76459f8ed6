"""A member reads that a granted connector which failed is unavailable, and that an
administrator sees why, in their own language, without the admin's command line or
environment (the technical detail is the admin's)."""

from __future__ import annotations

from mcp_support import BASE, Setup
from skald_host.testing.host import MEMBER_PASSWORD
from test_connectors_german_refusals import german

TAG = "skald-p-mcp-connectors"
SECRET = "env-secret-93ab1c77"


async def add_broken(setup: Setup, access: list[str]) -> None:
    body = {"name": "nocmd", "transport": "stdio", "command": "/nonexistent/bin/mcp-nocmd", "args": ["--token", "arg-93ab"], "env": {"API_KEY": SECRET}, "access": access}
    response = await setup.admin.post(f"{BASE}/servers", json=body)
    assert response.status_code == 201 and response.json()["state"] == "failed", response.text


async def test_a_member_reads_why_a_failed_connector_is_not_there_without_the_admins_detail(setup: Setup):
    alice = await setup.host.member("alice")
    bernd = await setup.host.member("bernd")
    await german(bernd)
    await add_broken(setup, [alice.member["id"], bernd.member["id"]])

    answer = await alice.get(f"{BASE}/mine")
    (row,) = answer.json()["connectors"]
    assert row["state"] == "failed" and row["tools"] == []
    assert row["reason"].startswith("Not available right now") and "administrator" in row["reason"], row
    for leak in ("nonexistent", "mcp-nocmd", "arg-93ab", SECRET, "API_KEY"):
        assert leak not in answer.text
    (row,) = (await bernd.get(f"{BASE}/mine")).json()["connectors"]
    assert row["reason"].startswith("Gerade nicht verfügbar") and "ließ sich nicht starten" in row["reason"], row


async def test_the_page_shows_a_member_why_a_failed_connector_is_unavailable_in_a_browser(setup: Setup, plugin_browser):
    alice = await setup.host.member("alice")
    await add_broken(setup, [alice.member["id"]])
    page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
    row = page.locator(f"{TAG} .mcp-connector").filter(has_text="nocmd")
    await row.locator(".mcp-unavailable").filter(has_text="Not available right now").wait_for(timeout=10_000)
    assert "):" not in await row.inner_text()  # no empty tool list after the state

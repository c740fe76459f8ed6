"""The Helpers page's "Started" column says when a run started (``started_at``, kept
across a restart), not when it was asked for: a probe found it showing ``created_at``
under "Started" ("Gestartet"). A run still waiting for a free slot has not started,
and says since when it waits; one that ended before it started says it did not start.
In English and in German."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from skald_host.core.agent.subagents.runs import NewRun
from skald_host.testing.host import MEMBER_PASSWORD

from .kit import sign_in

ASKED = "2026-03-02T08:00:00.000Z"
STARTED = "2026-03-02T09:30:00.000Z"
QUEUED_ASKED = "2026-03-02T10:15:00.000Z"


async def three_runs(host, username: str) -> tuple[str, str, str]:
    """A run asked for at 08:00 that started at 09:30, one asked for at 10:15 and still
    waiting for a slot, and one cancelled before it started."""
    client = await host.member(username)
    response = await client.post("/api/conversations", json={"title": ""})
    assert response.status_code == 201, response.text
    cid = response.json()["id"]
    runtime = host.core.chat.live_runtime(client.member["id"])
    store = runtime.subagents.store
    frame = await runtime.store.root_frame(cid)
    new = [NewRun("researcher", "h" * 64, None, "foreground", 1, f"Task {i}.", {}, None, None) for i in range(3)]
    started, waiting, never = await store.accept(cid, "tree", None, (), "root", frame.id, new, max_runs_per_tree=16, max_pending=128)
    await store.db.transaction(lambda c: (
        c.execute("UPDATE agent_runs SET status = 'running', created_at = ?, started_at = ? WHERE id = ?", (ASKED, STARTED, started.run_id)),
        c.execute("UPDATE agent_runs SET created_at = ? WHERE id = ?", (QUEUED_ASKED, waiting.run_id)),
        c.execute("UPDATE agent_runs SET status = 'cancelled', error = 'cancelled', created_at = ? WHERE id = ?", (ASKED, never.run_id)),
    ))
    return started.run_id, waiting.run_id, never.run_id


@pytest.mark.parametrize(
    ("locale", "started_text", "asked_text", "waiting_text", "never_text"),
    [
        ("en", "Mar 2, 2026, 9:30:00 AM", "8:00:00", "Waiting since Mar 2, 2026, 10:15:00 AM", "Did not start"),
        ("de", "02.03.2026, 09:30:00", "08:00:00", "Wartet seit 02.03.2026, 10:15:00", "Nicht gestartet"),
    ],
)
async def test_the_started_column_shows_when_a_run_started_or_that_it_waits(
    skald, browser_pages, locale, started_text, asked_text, waiting_text, never_text,
):
    host = await skald.start()
    await host.create_member("ida", locale=locale)
    started, waiting, never = await three_runs(host, "ida")

    page = await browser_pages.new(host.url, timezone_id="UTC")  # the member's own language words the shell once signed in
    await sign_in(page, "ida", MEMBER_PASSWORD)
    await page.goto(f"{host.url}/#agents")
    await expect(page.locator("table.agent-runs thead th").nth(3)).to_have_text("Gestartet" if locale == "de" else "Started")
    cell = lambda run_id: page.locator(f"tr[data-run-id='{run_id}'] td").nth(3)  # noqa: E731
    await expect(cell(started)).to_have_text(started_text)
    assert asked_text not in await cell(started).inner_text()
    await expect(cell(waiting)).to_have_text(waiting_text)
    await expect(cell(never)).to_have_text(never_text)

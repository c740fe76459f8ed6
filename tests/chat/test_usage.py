"""The admin's view of the request log (``GET /api/admin/usage``): totals per member and
per model for a period, and the latest requests paged newest first, read from the rows
real turns wrote: metadata only, a deleted member shown as such, admins only."""

from __future__ import annotations

import datetime as dt

from skald_host.testing import Hang, Reply, ScriptedError
from skald_host.core.llm.usage import AFTER_CURSOR, LATEST_SQL, TOTALS_SQL

from .support import MODEL_A, MODEL_B, ChatSocket, configure_models, eventually, new_conversation


async def _logged(chat, count: int) -> None:
    async def enough() -> bool:  # the log is written in the background
        return await chat.host.core.registry.run(lambda c: c.execute("SELECT count(*) FROM llm_requests").fetchone()[0]) >= count

    await eventually(enough, what=f"{count} request rows")


async def test_usage_totals_per_member_and_model_and_the_latest_requests_with_a_stopped_one_and_a_deleted_member(chat):
    ids = await configure_models(chat.admin, chat.server, (MODEL_A, MODEL_B))
    alice = await chat.host.member("alice", display_name="Alice A.")
    bob = await chat.host.member("bob")
    chat.server.script(MODEL_A, [
        Reply("First secret answer.", usage=(10, 5)),
        Hang(text="a partial answer", token_delay=0.05),
        ScriptedError(429, retry_after=30),
        Reply("Bob's secret answer.", usage=(20, 8)),
    ])
    chat.server.script(MODEL_B, [Reply("The fallback's answer.", usage=(7, 3))])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        await sock.send(cid, "Private words one")
        await sock.turn(cid)
        await sock.send(cid, "Private words two")
        await sock.wait_event(cid, "token", delta=" answer")
        assert (await sock.stop(cid))["stopped"] is True
        await sock.turn(cid)
        await sock.send(cid, "Private words three")  # A refuses with a 429; B answers
        await sock.turn(cid)
    async with ChatSocket(bob) as sock:
        cid = await new_conversation(bob)
        await sock.send(cid, "Bob's private words")
        await sock.turn(cid)
    await _logged(chat, 5)
    await bob.post("/api/auth/logout")
    assert (await chat.admin.delete(f"/api/admin/members/{bob.member['id']}")).status_code == 200

    response = await chat.admin.get("/api/admin/usage")
    assert response.status_code == 200, response.text
    usage = response.json()
    today = dt.datetime.now(dt.timezone.utc).date()
    assert (usage["since"], usage["until"]) == ((today - dt.timedelta(days=29)).isoformat(), today.isoformat())
    for secret in ("Private words", "secret answer", "fallback's answer", "a partial"):
        assert secret not in response.text

    alice_member = {"id": alice.member["id"], "username": "alice", "display_name": "Alice A.", "deleted": False}
    bob_member = {"id": bob.member["id"], "username": None, "display_name": None, "deleted": True}
    assert usage["members"] == [
        {"member": alice_member, "requests": {"ok": 2, "stopped": 1, "error": 1}, "total": 4, "tokens_in": 17, "tokens_out": 8},
        {"member": bob_member, "requests": {"ok": 1}, "total": 1, "tokens_in": 20, "tokens_out": 8},
    ]
    provider_id = (await chat.admin.get("/api/admin/models")).json()["providers"][0]["id"]

    def entry(model: str) -> dict:  # the catalog entry each request went to (no label set: its model name)
        return {"id": ids[model], "label": model, "provider_id": provider_id, "provider_name": "scripted", "deleted": False}

    assert usage["models"] == [
        {"model": MODEL_A, "entry": entry(MODEL_A), "requests": {"ok": 2, "stopped": 1, "error": 1}, "total": 4, "tokens_in": 30, "tokens_out": 13},
        {"model": MODEL_B, "entry": entry(MODEL_B), "requests": {"ok": 1}, "total": 1, "tokens_in": 7, "tokens_out": 3},
    ]
    assert [r["entry"] for r in usage["requests"]] == [entry(MODEL_A), entry(MODEL_B), entry(MODEL_A), entry(MODEL_A), entry(MODEL_A)]
    assert usage["total"] == {"requests": {"ok": 3, "stopped": 1, "error": 1}, "total": 5, "tokens_in": 37, "tokens_out": 16}

    rows = usage["requests"]
    assert [(r["member"]["username"], r["member"]["deleted"], r["model"], r["status"], r["http_status"], r["tokens_in"], r["tokens_out"]) for r in rows] == [
        (None, True, MODEL_A, "ok", 200, 20, 8),
        ("alice", False, MODEL_B, "ok", 200, 7, 3),
        ("alice", False, MODEL_A, "error", 429, None, None),
        ("alice", False, MODEL_A, "stopped", None, None, None),
        ("alice", False, MODEL_A, "ok", 200, 10, 5),
    ]
    assert rows[0]["member"] == bob_member and rows[1]["member"] == alice_member
    assert [r["at"] for r in rows] == sorted((r["at"] for r in rows), reverse=True)
    assert all(isinstance(r["latency_ms"], int) for r in rows if r["status"] != "stopped")
    assert isinstance(rows[-1]["first_token_ms"], int)
    assert usage["next_before"] is None

    # Paged: two at a time, each page after the last row of the one before, no row twice.
    pages, before = [], None
    while True:
        response = await chat.admin.get("/api/admin/usage", params={"limit": "2", **({"before": before} if before else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["requests"]) <= 2 and page["members"] == usage["members"]
        pages.append([r["id"] for r in page["requests"]])
        before = page["next_before"]
        if before is None:
            break
    assert pages == [[r["id"] for r in rows[:2]], [r["id"] for r in rows[2:4]], [r["id"] for r in rows[4:]]]

    # A period without requests; the period's days are UTC days, both included.
    yesterday = (today - dt.timedelta(days=1)).isoformat()
    empty = (await chat.admin.get("/api/admin/usage", params={"since": "2020-01-01", "until": yesterday})).json()
    assert (empty["members"], empty["models"], empty["requests"], empty["total"]["total"]) == ([], [], [], 0)
    same_day = (await chat.admin.get("/api/admin/usage", params={"since": today.isoformat(), "until": today.isoformat()})).json()
    assert same_day["total"]["total"] == 5


async def test_usage_refuses_a_period_or_page_it_cannot_read_with_a_400_that_names_the_parameter(chat):
    admin = chat.admin
    for params, name in (
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-02-30"}, "since"),
        ({"until": "2026-13-01"}, "until"),
        ({"since": "2026-05-02", "until": "2026-05-01"}, "since"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"before": "not a cursor"}, "before"),
    ):
        response = await admin.get("/api/admin/usage", params=params)
        assert response.status_code == 400, (params, response.text)
        assert response.json()["field"] == name, (params, response.text)
    assert (await admin.get("/api/admin/usage", params={"limit": "200", "since": "2026-02-28"})).status_code == 200


async def test_members_get_403_from_the_usage_route(chat):
    alice = await chat.host.member("alice")
    response = await alice.get("/api/admin/usage")
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden", "code": "forbidden"}


async def test_the_usage_queries_read_the_period_through_an_index_not_a_scan_of_the_whole_log(chat):
    """The log grows by a row per request for as long as the instance lives: a period
    must be a range of an index, and the newest-first order the index's own."""

    def plans(conn) -> list[list[str]]:
        return [
            [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", ["x"] * sql.count("?"))]
            for sql in (TOTALS_SQL, LATEST_SQL.format(cursor=""), LATEST_SQL.format(cursor=AFTER_CURSOR))
        ]

    for plan in await chat.host.core.registry.run(plans):
        assert any(step.startswith("SEARCH llm_requests USING INDEX llm_requests_created (created_at>? AND created_at<?)") for step in plan), plan
        assert not any("ORDER BY" in step for step in plan), plan


async def test_a_finished_requests_row_is_dated_when_it_was_sent_not_when_it_finished(chat):
    """Every row is dated when its request was sent, as a crash-cut request's is: an
    answer that takes seconds and finishes after midnight counts on the day it was
    asked for, the same day the same request cut by a crash would count on."""
    await configure_models(chat.admin, chat.server, (MODEL_A,))
    alice = await chat.host.member("alice")
    chat.server.script(MODEL_A, [Reply("A slow answer.", first_token_delay=1.5)])
    async with ChatSocket(alice) as sock:
        cid = await new_conversation(alice)
        before = dt.datetime.now(dt.timezone.utc)
        await sock.send(cid, "Take your time.")
        await sock.turn(cid)
        after = dt.datetime.now(dt.timezone.utc)
    await _logged(chat, 1)
    [(created_at, latency)] = await chat.host.core.registry.run(
        lambda c: c.execute("SELECT created_at, latency_ms FROM llm_requests").fetchall()
    )
    dated = dt.datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    assert latency >= 1500
    assert -0.01 <= (dated - before).total_seconds() < 1.0, (before, dated)  # sent (the row keeps milliseconds)
    assert (after - dated).total_seconds() >= 1.4, (dated, after)  # not when it finished

"""A job set from a cron expression keeps no phrase: ``list_scheduled_prompts`` told it
as "cron (cron */5 * * * *, UTC)". It is described in words where the phrases can say
it, else its expression is said once."""

from __future__ import annotations

from skald_host.builtins.agent_tools import _line
from skald_host.core.schedules import describe_cron
from skald_host.core.schedules.service import summary


def job(cron: str) -> dict:
    return {
        "id": "034483c0deadbeef", "prompt": "Ping.", "conversation_id": "c", "cron": cron, "phrase": None,
        "timezone": "UTC", "paused": 0, "status": "pending", "due_at": "2026-12-06T22:15:00.000000Z",
        "last_run_at": None, "last_status": None, "runs": 0, "created_at": "2026-12-01T00:00:00.000Z",
    }


def test_a_cron_job_is_listed_in_words():
    line = _line(summary(job("*/5 * * * *")))
    assert line.startswith("- 034483c0 [pending] every 5 minutes (cron */5 * * * *, UTC);"), line
    assert "cron (cron" not in line


def test_an_expression_without_words_is_said_once():
    line = _line(summary(job("0 8 1-7 * 1")))
    assert line.startswith("- 034483c0 [pending] cron 0 8 1-7 * 1 (UTC);"), line


def test_the_forms_the_phrases_make_are_described():
    assert [describe_cron(c) for c in ("* * * * *", "0 * * * *", "0 */2 * * *", "30 7 * * 1-5", "0 9 * * *", "0 9 * * 1,5", "0 9 3 * *")] == [
        "every minute", "every hour", "every 2 hours", "every weekday at 07:30", "every day at 09:00",
        "every Monday, Friday at 09:00", "on day 3 of every month at 09:00",
    ]

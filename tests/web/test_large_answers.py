"""A large answer (a conversation of 5,000 messages) is not encoded by the standard
library's JSON encoder on the event loop: that took ~48 ms per answer and stalled every
other member's requests meanwhile (a scale probe). orjson writes it, as the same JSON:
keys sorted, dates as before, a final newline; small answers are written as ever."""

from __future__ import annotations

import datetime
import json

import pytest
from quart import Quart

from skald_host.web import body
from skald_host.web.body import JSONProvider


def transcript(messages: int) -> dict:
    return {
        "conversation": {"title": "Grüße, 東京 ✓", "id": "c1", "updated_at": "2026-01-01T00:00:00.000Z"},
        "messages": [
            {"id": n, "role": "user" if n % 2 else "assistant", "content": f"word {n} " * 20, "status": "complete",
             "reason": None, "tool_calls": [{"seq": 0, "name": "notify", "result_code": None}] if n % 7 == 0 else [],
             "attachments": [], "variant": 0, "zeta": True, "alpha": 1.5}
            for n in range(messages)
        ],
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
    }


@pytest.fixture
def app() -> Quart:
    app = Quart(__name__)
    app.json = JSONProvider(app)
    return app


def stdlib_body(app: Quart, value: object) -> str:
    return json.dumps(value, default=app.json.default, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


async def test_a_large_answer_is_not_encoded_by_the_standard_library_and_is_the_same_json(app, monkeypatch):
    value = transcript(5_000)
    expected = stdlib_body(app, value)  # what it was, but for escapes of text: the same JSON value
    assert len(expected.encode()) > 1_000_000  # a long conversation's answer
    used: list[int] = []
    encode = body.json.dumps

    def counting(*args, **kwargs):
        used.append(1)
        return encode(*args, **kwargs)

    monkeypatch.setattr(body.json, "dumps", counting)
    async with app.app_context():
        response = app.json.response(value)
    assert used == []  # the standard library's encoder never ran on it
    monkeypatch.undo()
    text = (await response.get_data()).decode("utf-8")
    assert response.mimetype == "application/json"
    assert text == expected  # byte for byte: keys sorted, compact, the date as an HTTP date, a final newline
    assert json.loads(text)["when"] == "Fri, 02 Jan 2026 03:04:05 GMT"


async def test_a_small_answer_and_one_orjson_refuses_are_written_as_before(app):
    small = transcript(3)
    refused = transcript(5_000) | {"bad": "\ud800", "huge": 2**70}  # a lone surrogate, past 64 bits
    async with app.app_context():
        for value in (small, refused):
            response = app.json.response(value)
            sent = (await response.get_data()).decode("utf-8")
            assert sent == json.dumps(value, default=app.json.default, sort_keys=True, separators=(",", ":")) + "\n"

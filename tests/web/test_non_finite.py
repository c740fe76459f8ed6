"""Issue 17.4: NaN and Infinity are not JSON. Every JSON route refuses them with a 400
naming the field, whoever reads the body (a host route, a plugin's ``get_json()``, a
declared plugin body); a value stored before the fix is repaired when read; an answer
never carries them."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

from quart import Blueprint, request

from skald_hookspecs import accepts, hookimpl
from skald_hookspecs.types import PluginInfo
from web_support import NO_SUCH_ID, fill

WRITES = ("POST", "PUT", "PATCH")


def strict_json(text: str) -> Any:
    """Parse as RFC 8259 JSON: NaN, Infinity and -Infinity are errors."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"the answer is not JSON: it holds {constant}")

    return json.loads(text, parse_constant=refuse)


class Numbers:
    """A plugin reading its bodies the plain Quart way, one declaring its body, and one
    answer holding a NaN."""

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="numbers", title="Numbers", spec=">=1.2,<2")

    @hookimpl
    def register_routes(self, register: Callable[..., None]) -> None:
        blueprint = Blueprint("numbers", __name__)

        @blueprint.post("/echo")
        async def echo() -> Any:
            return {"got": await request.get_json()}

        @blueprint.put("/declared")
        @accepts({"type": "object", "properties": {"level": {"type": "number"}}, "required": ["level"]})
        async def declared() -> Any:
            return {"level": (await request.get_json())["level"]}

        @blueprint.get("/nan")
        async def nan() -> Any:
            return {"ratio": float("nan"), "ok": [1.5, float("inf")]}

        register(blueprint)


async def test_every_write_route_refuses_nan_and_infinity(skald):
    host = await skald.start(plugins=[Numbers()], enable=["numbers"])
    admin = await host.admin()
    rules = [
        (rule.rule, method)
        for rule in host.app.url_map.iter_rules()
        if rule.rule.startswith("/api/") and not getattr(rule, "websocket", False)
        for method in sorted(set(rule.methods or ()) & set(WRITES))
    ]
    assert len(rules) > 40
    values = {"plugin_id": "numbers", "set_id": "none", "root": "user-memory", "key": "k", "target": "t", "rule_id": "1"}
    bodies = ["NaN", "Infinity", '{"value": NaN}', '{"a": {"b": [1, -Infinity]}}', '{"value": 1e999}']
    answered = {}
    for rule, method in rules:
        path = fill(rule, **{**{name: NO_SUCH_ID for name in ("member_id", "role_id", "conversation_id", "approval_id", "question_id", "project_id", "folder_id", "provider_id", "model_id", "group_id", "job_id", "report_id", "run_id", "invitation_id")}, "where": "own", **values})
        for body in bodies:
            response = await admin.request(method, path, content=body, headers={"Content-Type": "application/json"})
            assert not 200 <= response.status_code < 300, f"{method} {rule} accepted {body}: {response.text}"
            assert response.status_code != 500, f"{method} {rule} failed on {body}: {response.text}"
            assert "error" in response.json()
            answered[(rule, method, body)] = response
    # Where the body reaches a reader, the refusal says what and where.
    for rule, method in [("/api/me/settings", "PUT"), ("/api/plugin/numbers/echo", "POST"), ("/api/plugin/numbers/declared", "PUT"), ("/api/admin/members", "POST"), ("/api/setup", "POST")]:
        response = answered[(rule, method, '{"a": {"b": [1, -Infinity]}}')]
        assert response.status_code == 400, (rule, response.text)
        assert response.json()["field"] == "a.b[1]", (rule, response.json())
        assert "finite" in response.json()["error"]
        top = answered[(rule, method, "NaN")].json()
        assert top["error"].startswith("request body must be JSON"), (rule, top)
    assert answered[("/api/me/settings", "PUT", '{"value": 1e999}')].json()["field"] == "value"
    settings = await admin.get("/api/me/settings")
    assert strict_json(settings.text)["settings"] == {}  # nothing half-written


async def test_a_stored_non_finite_setting_is_repaired_when_read(skald, caplog):
    host = await skald.start()
    alice = await host.member("alice")
    assert (await alice.put("/api/me/settings", json={"theme": "dark", "zoom": 1.25})).status_code == 200
    member_id = (await host.core.users.find("alice")).id
    db = host.core.users.owner_db(member_id)
    # What an earlier version let through: Python's json wrote NaN and Infinity as such.
    await db.transaction(
        lambda c: c.executemany(
            "INSERT INTO member_settings (key, value) VALUES (?, ?)",
            [("ratio", json.dumps(float("nan"))), ("scale", json.dumps({"x": [1, float("inf")]}))],
        )
    )
    with caplog.at_level(logging.WARNING, logger="skald_host.web.routes.me"):
        response = await alice.get("/api/me/settings")
    assert response.status_code == 200
    assert strict_json(response.text)["settings"] == {"theme": "dark", "zoom": 1.25}
    lines = [r.getMessage() for r in caplog.records if r.name == "skald_host.web.routes.me"]
    assert len(lines) == 1 and "'ratio'" in lines[0] and "'scale'" in lines[0], lines
    assert "nan" not in lines[0].lower() and "inf" not in lines[0].lower()  # the key, not the value
    rows = await db.run(lambda c: c.execute("SELECT key FROM member_settings ORDER BY key").fetchall())
    assert [r[0] for r in rows] == ["theme", "zoom"]  # repaired in the file, not only hidden
    assert strict_json((await alice.get("/api/me/settings")).text)["settings"] == {"theme": "dark", "zoom": 1.25}


async def test_an_answer_never_carries_nan(skald, caplog):
    host = await skald.start(plugins=[Numbers()], enable=["numbers"])
    admin = await host.admin()
    with caplog.at_level(logging.WARNING, logger="skald_host.web.body"):
        response = await admin.get("/api/plugin/numbers/nan")
    assert response.status_code == 200
    assert strict_json(response.text) == {"ratio": None, "ok": [1.5, None]}
    assert any("ratio" in r.getMessage() and "ok[1]" in r.getMessage() for r in caplog.records)
    # and what a plugin reads, or a declared body checks, is finite JSON
    assert (await admin.post("/api/plugin/numbers/echo", json={"x": 2.5})).json() == {"got": {"x": 2.5}}
    declared = await admin.put("/api/plugin/numbers/declared", json={"level": "high"})
    assert (declared.status_code, declared.json()) == (400, {"error": "'level' must be a number", "field": "level", "code": "field_type", "values": {"field": "level"}})


async def test_a_websocket_message_goes_through_the_same_reader(skald):
    host = await skald.start()
    admin = await host.admin()
    async with admin.ws() as ws:
        await ws.send('{"type": "ping", "at": NaN}')
        assert strict_json(await ws.recv()) == {"type": "error", "error": "unknown or malformed message", "code": "socket_message_invalid"}
        await ws.send('{"type": "ping", "at": 1.5}')
        assert strict_json(await ws.recv()) == {"type": "pong"}


async def test_a_plugins_get_json_refuses_a_body_that_is_not_utf8_with_the_hosts_400(skald):
    """Quart decodes the body before its own error handling: without the host's reader
    a body that is not UTF-8 was a 500, even for ``get_json(silent=True)``."""
    host = await skald.start(plugins=[Numbers()], enable=["numbers"])
    admin = await host.admin()
    response = await admin.post("/api/plugin/numbers/echo", content=b'{"a": "\xff"}', headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "body_invalid" and "UTF-8" in response.json()["error"]

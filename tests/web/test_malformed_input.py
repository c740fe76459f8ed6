"""Malformed and oversized input (check F4, in a CI-sized form).

F4 asks for 10,000 generated cases per route; here each JSON route gets ~200 so the
suite stays fast (login ~100: every well-formed login costs an Argon2id, by design).
Each route's cases are a systematic grid (every known field missing, null and of every
wrong type; bodies nested 10,000 deep, invalid UTF-8, a BOM, lone surrogates, huge
numbers, truncated JSON) topped up with Hypothesis-generated bodies. The properties are
F4's: never a 500, every error is ``{"error": "..."}`` with no traceback, oversized
bodies get 413 before parsing, oversized WebSocket frames close the socket with 1009,
and the server keeps serving.

How Hypothesis meets pytest-asyncio here: ``@given`` cannot wrap an async test that
shares one running server, so each route's cases are *drawn* by a small synchronous
``@given`` function that appends every generated value to a list (generate phase only:
no shrinking, no example database), and the async test then sends them all to one host
shared by the module. A failure names the exact body that caused it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from skald_host.core.identity.users import PROFILE_FIELDS
from skald_host.testing.host import SkaldHarness
from web_support import NO_SUCH_ID, PROBE, PROBE_SET, SAFE_METHODS, Probe, fill, folder_objects

pytestmark = pytest.mark.asyncio(loop_scope="module")

CASES_PER_ROUTE = 200
MB = 1024 * 1024

#: Every write route that reads a JSON object, with the field names it knows about.
JSON_ROUTES: dict[tuple[str, str], tuple[str, ...]] = {
    ("/api/setup", "POST"): ("username", "password", "display_name", "locale", "encrypted"),
    ("/api/auth/login", "POST"): ("username", "password", "session"),
    ("/api/auth/password", "POST"): ("current_password", "new_password"),
    ("/api/me/settings", "PUT"): ("theme", "timezone", "a.b-c_d", "x" * 65),
    ("/api/me/locale", "PUT"): ("locale",),
    ("/api/tts", "POST"): ("text", "voice", "format", "locale"),
    ("/api/me/home-source", "PUT"): ("home_source",),
    ("/api/me/supervision/seen", "POST"): ("through",),
    ("/api/plugins/<plugin_id>/my-config", "PUT"): ("config",),
    ("/api/admin/members", "POST"): ("username", "password", "role", "encrypted", *PROFILE_FIELDS),
    ("/api/admin/members/<member_id>", "PATCH"): ("role", "active", *PROFILE_FIELDS),
    ("/api/admin/members/<member_id>/reset-password", "POST"): ("new_password", "confirm_data_loss"),
    ("/api/admin/members/<member_id>/plugins", "PUT"): ("plugins",),
    ("/api/admin/members/<member_id>/supervisors", "PUT"): ("supervisors",),
    ("/api/admin/members/<member_id>/agent-intervals", "PUT"): ("agent_id", "interval"),
    ("/api/admin/roles", "POST"): ("id", "label", "attrs", "capabilities"),
    ("/api/admin/roles/<role_id>", "PATCH"): ("label", "attrs", "capabilities"),
    ("/api/admin/plugins/<plugin_id>/enabled", "PUT"): ("enabled",),
    ("/api/admin/plugins/<plugin_id>/config", "PUT"): ("config",),
    ("/api/admin/settings/<set_id>", "PUT"): ("values",),
    ("/api/admin/language", "PUT"): ("locale",),
    # chat (before the model routes: a fuzzed provider must not be what a turn calls)
    ("/api/conversations", "POST"): ("title", "agent"),
    ("/api/conversations/<conversation_id>", "PATCH"): ("title", "model"),
    ("/api/conversations/<conversation_id>/messages", "POST"): ("text", "idempotency_key", "attachments"),
    ("/api/conversations/<conversation_id>/edit", "POST"): ("message_id", "text"),
    ("/api/conversations/<conversation_id>/version", "PUT"): ("variant",),
    ("/api/memory/<root>/notes/<path:key>", "PUT"): ("content", "expected"),
    ("/api/schedules", "POST"): ("prompt", "every", "timezone", "conversation_id"),
    ("/api/schedules/preview", "POST"): ("every", "timezone"),
    ("/api/schedules/<job_id>", "PATCH"): ("prompt", "every", "timezone", "paused"),
    ("/api/admin/shared-folders", "POST"): ("slug", "title"),
    ("/api/admin/shared-folders/<folder_id>", "PATCH"): ("title",),
    ("/api/admin/shared-folders/<folder_id>/members", "POST"): ("username", "can_write"),
    ("/api/admin/shared-folders/<folder_id>/members/<member_id>", "PATCH"): ("can_write",),
    ("/api/projects", "POST"): ("slug", "title", "description"),
    ("/api/projects/<project_id>", "PATCH"): ("title", "description"),
    ("/api/projects/<project_id>/members", "POST"): ("username", "can_write"),
    ("/api/projects/<project_id>/members/<member_id>", "PATCH"): ("can_write",),
    ("/api/projects/<project_id>/files/folder", "POST"): ("path",),
    ("/api/projects/<project_id>/files/rename", "POST"): ("from", "to"),
    ("/api/projects/<project_id>/files/delete", "POST"): ("path",),
    ("/api/approvals/<approval_id>", "POST"): ("decision",),
    ("/api/questions/<question_id>", "POST"): ("action", "content"),
    ("/api/admin/models/providers", "POST"): ("name", "base_url", "api_key"),
    ("/api/admin/models/providers/<provider_id>", "PATCH"): ("name", "base_url", "api_key"),
    ("/api/admin/models/presets/apply", "POST"): ("name", "base_url", "api_key_from_environment"),
    ("/api/admin/models/entries", "POST"): ("provider_id", "model", "label", "vision", "strength", "priority", "enabled", "self"),
    ("/api/admin/models/entries/<model_id>", "PATCH"): ("label", "vision", "strength", "priority", "enabled", "model_id", "self"),
    ("/api/admin/approval-rules", "POST"): ("tool_pattern", "path_class", "action", "priority", "group_id", "note"),
    ("/api/admin/approval-rules/<int:rule_id>", "PATCH"): ("tool_pattern", "path_class", "action", "priority", "group_id", "note"),
    ("/api/admin/security-groups", "POST"): ("id", "label", "description"),
}
#: Write routes that read no body (what they act on is in the path or the session).
BODYLESS_ROUTES = {
    ("/api/auth/logout", "POST"),
    ("/api/reports/<where>/<report_id>/read", "POST"),
    ("/api/admin/members/<member_id>/end-sessions", "POST"),
    ("/api/admin/backups", "POST"),
    ("/api/admin/members/<member_id>", "DELETE"),
    ("/api/admin/plugins/<plugin_id>/stale-settings", "DELETE"),
    ("/api/admin/roles/<role_id>", "DELETE"),
    ("/api/conversations/<conversation_id>", "DELETE"),
    ("/api/conversations/<conversation_id>/stop", "POST"),
    ("/api/agent-runs/<run_id>/cancel", "POST"),
    ("/api/conversations/<conversation_id>/compact", "POST"),
    ("/api/conversations/<conversation_id>/retry", "POST"),
    ("/api/conversations/<conversation_id>/regenerate", "POST"),
    ("/api/conversations/<conversation_id>/uploads", "POST"),  # a raw file body: tests/files/test_uploads.py
    ("/api/memory/<root>/notes/<path:key>", "DELETE"),
    ("/api/schedules/<job_id>", "DELETE"),
    ("/api/admin/shared-folders/<folder_id>", "DELETE"),
    ("/api/admin/shared-folders/<folder_id>/members/<member_id>", "DELETE"),
    ("/api/projects/<project_id>", "DELETE"),
    ("/api/projects/<project_id>/members/<member_id>", "DELETE"),
    ("/api/projects/<project_id>/invitations/<invitation_id>", "DELETE"),
    ("/api/project-invitations/<invitation_id>/accept", "POST"),
    ("/api/project-invitations/<invitation_id>", "DELETE"),
    ("/api/projects/<project_id>/chat", "POST"),
    ("/api/projects/<project_id>/files/upload/<path:target>", "POST"),  # a raw file body: tests/folders/test_explorer.py
    ("/api/admin/models/providers/<provider_id>", "DELETE"),
    ("/api/admin/models/providers/<provider_id>/test", "POST"),
    ("/api/admin/models/entries/<model_id>", "DELETE"),
    ("/api/admin/approval-rules/<int:rule_id>", "DELETE"),
    ("/api/admin/security-groups/<group_id>", "DELETE"),
}
FEWER_CASES = {("/api/auth/login", "POST"): 100}
#: GET routes whose query parameters the API checks (``@query`` and ``body.check``), with
#: the names they know: each answers or says 400, whatever the query string holds.
QUERY_ROUTES: dict[str, tuple[str, ...]] = {
    "/api/admin/usage": ("since", "until", "before", "limit"),
    "/api/conversations": ("search", "before"),
    "/api/conversations/<conversation_id>": ("all", "limit", "before", "after", "around", "find", "snippet"),
}
#: Each known parameter is sent with each of these (raw, already percent-encoded).
ODD_QUERY_VALUES = [
    "", "%20", "0", "-1", "201", "99999999999999999999", "1e999", "NaN", "%00", "%ff", "%ed%a0%80", "%C3%BC" * 64, "x" * 5000,
    "2026-02-30", "2026-13-01", "0000-01-01", "0001-01-01", "9999-12-31", "2026-01-01T00:00:00Z", "%2B2026-01-01",
    "2026-01-01T00:00:00.000Z~1", "2026-01-01T00:00:00.000Z~999999999999999999", "2026-01-01T00:00:00.000Z~9999999999999999999",
    "2026-01-01T00:00:00.000Z~-1", "~", "%7E1", "..%2F..%2Fetc%2Fpasswd",
]

# -- the strategies ------------------------------------------------------------------------

# Text includes lone surrogates, which JSON can carry as "\ud800" escapes but UTF-8,
# SQLite and Argon2 cannot.
text = st.one_of(
    st.text(max_size=16),
    st.text(st.characters(categories=["Cs", "Lu", "Ll", "Nd", "Zs", "Cc", "So"]), max_size=16),
)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | text
json_values = st.recursive(
    scalars, lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4), max_leaves=6
)
# Values that get a request past the type checks and into the code behind them.
plausible = st.sampled_from(
    [
        "admin", "member", "restricted", "spare", "en", "de", "de-CH", "2001-01-01", "2999-01-01", PROBE, "cookie",
        "bearer", "a valid password 42", "password1", "********", "", " ", "../../etc/passwd", "\x00", "ü" * 64,
        "x" * 5000, True, False, 0, -1, 2**63, 1e308, [], {}, [PROBE], {"greeting": "hi"}, {"nickname": "n"},
        {"level": 3}, {"ui_mode": "simple"}, {"auto_grant": False}, ["chat.use"], ["members.manage"],
        "every weekday at 8", "0 8 * * 1-5", "* * * * *", "Europe/Berlin", "Mars/Olympus",
    ]
)
field_values = st.one_of(plausible, scalars, json_values)

DEEP = 10_000
SPECIAL_BODIES = [
    b"",
    b"null",
    b"[]",
    b'"a string"',
    b"42",
    b"{",
    b'{"a":',
    b"{'single': 'quotes'}",
    b"\xff\xfe\xfd",
    b'{"username": "\xff\xfe"}',
    b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark
    b'{"a": "\\ud800"}',
    b'{"a": NaN, "b": Infinity}',
    b'{"a": 1e999999}',
    b'{"a": ' + b"9" * 5000 + b"}",
    b"[" * DEEP + b"]" * DEEP,
    b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    b'{"config": ' + b"[" * DEEP + b"]" * DEEP + b"}",
    b'{"a": "' + b"\\" * 1000 + b'"}',
]
#: Each known field is sent with each of these (the other fields valid), and left out once.
WRONG_VALUES = [None, 0, -1, 1.5, True, "", "\ud800", [], {}, ["x"], {"x": 1}]


def encode(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode("ascii")  # ASCII: surrogates travel as escapes


def systematic_bodies(fields: tuple[str, ...]) -> list[bytes]:
    """The deterministic part: each field missing, null and of every wrong type."""
    bodies = [encode({}), *SPECIAL_BODIES]
    full = {name: "a valid value 42" for name in fields}
    for name in fields:
        bodies.append(encode({k: v for k, v in full.items() if k != name}))
        bodies += [encode({**full, name: wrong}) for wrong in WRONG_VALUES]
    return bodies


def generated_bodies(fields: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    known = st.fixed_dictionaries({}, optional={name: field_values for name in fields})
    with_extra = st.tuples(known, st.dictionaries(text, scalars, max_size=2)).map(lambda pair: {**pair[1], **pair[0]})
    return st.one_of(known.map(encode), with_extra.map(encode), json_values.map(encode), st.binary(max_size=48))


def draw(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """``count`` values from a strategy, outside any test: Hypothesis generates, the
    caller sends (see the module docstring)."""
    drawn: list[Any] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: Any) -> None:
        drawn.append(value)

    collect()
    return drawn


def cases_for(route: tuple[str, str]) -> list[bytes]:
    """~CASES_PER_ROUTE bodies: all the systematic ones, topped up with generated
    ones (at least half the total)."""
    fields = JSON_ROUTES[route]
    total = FEWER_CASES.get(route, CASES_PER_ROUTE)
    systematic = systematic_bodies(fields)
    return systematic + draw(generated_bodies(fields), max(total - len(systematic), total // 2))


# -- the shared host -----------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fuzz(tmp_path_factory):
    harness = SkaldHarness(tmp_path_factory.mktemp("fuzz"))
    try:
        host = await harness.start(plugins=[Probe()], enable=[PROBE])
        admin = await host.admin()
        victim = await host.member("victim")
        assert (await admin.post("/api/admin/roles", json={"id": "spare", "label": "Spare"})).status_code == 201
        host.core.auth.throttle.enabled = False  # login cases are about parsing, not the limit
        ids = {"member_id": victim.member["id"], "role_id": "spare", "plugin_id": PROBE, "set_id": PROBE_SET}
        ids |= {"root": "user-memory", "key": "fuzzed.md"}
        ids |= await _chat_objects(admin)
        ids |= await folder_objects(admin, admin)
        yield host, admin, ids
    finally:
        await harness.close()


async def _chat_objects(admin) -> dict[str, str]:
    """What the chat and model routes act on. No model is enabled (the fuzzed messages
    get a "no model" note, no network), and the approval id names nothing: its route's
    parsing is what is fuzzed."""
    response = await admin.post("/api/conversations", json={})
    conversation_id = response.json()["id"]
    response = await admin.post("/api/admin/models/providers", json={"name": "Fuzzed", "base_url": "http://127.0.0.1:9/v1"})
    provider_id = response.json()["id"]
    body = {"provider_id": provider_id, "model": "fuzzed", "enabled": False}
    model_id = (await admin.post("/api/admin/models/entries", json=body)).json()["id"]
    rule = await admin.post("/api/admin/approval-rules", json={"tool_pattern": "fuzzed", "action": "deny", "priority": 5})
    group = await admin.post("/api/admin/security-groups", json={"id": "fuzzers", "label": "Fuzzers"})
    assert group.status_code == 201
    job = await admin.post("/api/schedules", json={"prompt": "Fuzzed.", "every": "every day at 8", "conversation_id": conversation_id})
    assert job.status_code == 201, job.text
    return {
        "conversation_id": conversation_id, "approval_id": NO_SUCH_ID, "question_id": NO_SUCH_ID, "provider_id": provider_id, "model_id": model_id,
        "rule_id": str(rule.json()["id"]), "group_id": "fuzzers", "job_id": job.json()["id"], "run_id": NO_SUCH_ID,
    }


def assert_well_formed_error(response, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:300]}"
    assert "Traceback" not in response.text, what
    if response.status_code >= 400:
        body = response.json()
        assert set(body) <= {"error", "code", "values", "field", "errors"} and isinstance(body["error"], str), f"{what}: {response.text[:300]}"
        assert isinstance(body["code"], str) and isinstance(body.get("values", {}), dict), f"{what}: {response.text[:300]}"
        # A settings form's refusal lists every bad field, each in the same shape (the first is the body's own).
        for each in body.get("errors", ()):
            assert set(each) == {"error", "code", "values", "field"} and isinstance(each["values"], dict), f"{what}: {response.text[:300]}"


async def test_every_write_route_is_fuzzed_or_known_to_read_no_body(fuzz):
    host, _, _ = fuzz
    writes = {
        (rule.rule, method)
        for rule in host.app.url_map.iter_rules()
        if not getattr(rule, "websocket", False)
        for method in (rule.methods or set()) - SAFE_METHODS
    }
    listed = set(JSON_ROUTES) | BODYLESS_ROUTES
    assert not writes - listed, f"new write route(s) {sorted(writes - listed)}: add them to JSON_ROUTES in {__file__}"
    assert not listed - writes, f"routes that no longer exist: {sorted(listed - writes)}"


@pytest.mark.parametrize("route", list(JSON_ROUTES), ids=lambda r: f"{r[1]} {r[0]}")
async def test_generated_bodies_never_cause_a_500(fuzz, route):
    host, admin, ids = fuzz
    rule, method = route
    path = fill(rule, **ids)
    for body in cases_for(route):
        response = await admin.request(method, path, content=body, headers={"Content-Type": "application/json"})
        assert_well_formed_error(response, f"{method} {path} with {body[:200]!r}")
    assert (await admin.get("/api/auth/session")).status_code == 200  # the fuzzing session survived
    assert (await admin.get("/health")).json() == {"status": "ok"}


def query_strings(names: tuple[str, ...]) -> list[str]:
    """Each parameter alone with each odd value, the same name twice, and generated
    strings of known and unknown names (percent-encoded, so any text travels)."""
    strings = [f"{name}={value}" for name in names for value in ODD_QUERY_VALUES]
    strings += [f"{name}=2026-01-01&{name}=x" for name in names] + ["since=2999-01-01", "until=2001-01-01&since=2001-01-02", "&&=&"]
    pairs = st.lists(st.tuples(st.sampled_from([*names, "x", ""]) | text, field_values.map(str) | text), max_size=4)
    encode_pair = lambda pair: "=".join(quote(part.encode("utf-8", "surrogatepass"), safe="") for part in pair)  # noqa: E731
    return strings + draw(pairs.map(lambda items: "&".join(encode_pair(pair) for pair in items)), CASES_PER_ROUTE // 2)


@pytest.mark.parametrize("rule", list(QUERY_ROUTES))
async def test_generated_query_strings_get_an_answer_or_a_400_never_a_500(fuzz, rule):
    host, admin, ids = fuzz
    if "<conversation_id>" in rule:  # its own: the bodies fuzzed before may have deleted the shared one
        created = await admin.post("/api/conversations", json={})
        assert created.status_code == 201, created.text
        ids = {**ids, "conversation_id": created.json()["id"]}
    path = fill(rule, **ids)
    for query in query_strings(QUERY_ROUTES[rule]):
        response = await admin.get(f"{path}?{query}")
        assert response.status_code in (200, 400), f"GET {rule}?{query[:200]}: {response.status_code} {response.text[:300]}"
        assert_well_formed_error(response, f"GET {rule}?{query[:200]}")
        if response.status_code == 400:
            assert response.json().get("field") in QUERY_ROUTES[rule], f"GET {rule}?{query[:200]}: {response.text[:300]}"
    assert (await admin.get("/health")).json() == {"status": "ok"}


JSON_TYPE = {"Content-Type": "application/json"}


async def test_deep_nesting_and_invalid_utf8_get_a_400_that_says_so_on_every_json_route(fuzz):
    host, admin, ids = fuzz
    for (rule, method) in JSON_ROUTES:
        path = fill(rule, **ids)
        deep = await admin.request(method, path, content=b"[" * DEEP + b"]" * DEEP, headers=JSON_TYPE)
        assert deep.status_code == 400 and "nested deeper" in deep.json()["error"], (path, deep.text)
        binary = await admin.request(method, path, content=b'{"a": "\xff"}', headers=JSON_TYPE)
        assert binary.status_code == 400 and "UTF-8" in binary.json()["error"], (path, binary.text)
        surrogate = await admin.request(method, path, content=b'{"username": "\\udc80", "a": "\\ud800"}', headers=JSON_TYPE)
        assert surrogate.status_code == 400 and "not valid JSON" in surrogate.json()["error"], (path, surrogate.text)


async def test_a_body_not_sent_as_json_gets_415_and_a_key_named_twice_a_400_on_every_json_route(fuzz):
    """A form or text/plain body is what another site's page can send without asking
    first (check A4): refused whatever the CSRF defence says. A key given twice would
    mean whichever the reader kept."""
    host, admin, ids = fuzz
    for (rule, method) in JSON_ROUTES:
        path = fill(rule, **ids)
        for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {"Content-Type": content_type} if content_type else {}
            refused = await admin.request(method, path, content=b'{"title": "x"}', headers=headers)
            assert refused.status_code == 415, (path, content_type, refused.status_code, refused.text)
            assert refused.json()["code"] == "body_not_json", (path, refused.text)
        twice = await admin.request(method, path, content=b'{"title": "a", "title": "b"}', headers=JSON_TYPE)
        assert twice.status_code in (400, 403, 404), (path, twice.status_code, twice.text)
        if twice.status_code == 400:
            assert "'title' twice" in twice.json()["error"], (path, twice.text)
    typed = await admin.post("/api/conversations", content=b'{"title": "typed"}', headers={"Content-Type": "application/json; charset=utf-8"})
    assert typed.status_code == 201, typed.text
    twice = await admin.post("/api/conversations", content=b'{"title": "a", "title": "b"}', headers=JSON_TYPE)
    assert (twice.status_code, twice.json()["code"], twice.json()["field"]) == (400, "field_invalid", "title")


async def _raw_request(host, head: bytes, body: bytes = b"") -> bytes:
    port = int(host.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        await writer.drain()
        return await asyncio.wait_for(reader.read(64 * 1024), 5)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_an_oversized_body_gets_413_before_it_is_read(fuzz):
    """Only the headers are sent, announcing 11 MB: the 413 arrives without one byte of
    the body, so nothing was buffered or parsed."""
    host, admin, _ = fuzz
    port = host.url.rsplit(":", 1)[1]
    for path, authenticated in (("/api/auth/login", False), ("/api/me/settings", True)):
        method = "POST" if path.endswith("login") else "PUT"
        headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json", "Content-Length": str(11 * MB)}
        if authenticated:
            headers.update(admin.headers(method))
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        reply = await _raw_request(host, head.encode())
        status_line, _, rest = reply.partition(b"\r\n")
        assert status_line.startswith(b"HTTP/1.1 413"), (path, reply[:200])
        assert rest.endswith(b'{"code":"request_body_too_large","error":"request body too large"}\n'), (path, reply[-200:])


async def test_an_oversized_chunked_body_gets_413(fuzz):
    """Without a Content-Length the limit applies while reading."""
    host, admin, _ = fuzz

    async def chunks():
        for _ in range(11):
            yield b"x" * MB

    response = await admin.put("/api/me/settings", content=chunks())
    assert response.status_code == 413
    assert response.json() == {"error": "request body too large", "code": "request_body_too_large"}
    assert (await admin.get("/health")).json() == {"status": "ok"}


async def test_generated_websocket_frames_are_answered_and_the_socket_stays_open(fuzz):
    host, admin, _ = fuzz
    frames = draw(
        st.one_of(
            json_values.map(lambda v: json.dumps(v, allow_nan=True)),
            st.fixed_dictionaries({"type": field_values}, optional={"data": json_values}).map(json.dumps),
            text.filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)),
            st.binary(max_size=64),
            st.sampled_from(SPECIAL_BODIES),
        ),
        CASES_PER_ROUTE,
    )
    async with admin.ws() as ws:
        for frame in frames:
            await ws.send(frame)
            reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert reply in ({"type": "pong"}, {"type": "error", "error": "unknown or malformed message", "code": "socket_message_invalid"}), (frame, reply)
        await ws.send('{"type": "ping"}')
        assert json.loads(await ws.recv()) == {"type": "pong"}


async def test_a_2_mb_websocket_frame_closes_the_socket_with_1009_and_the_server_lives_on(fuzz):
    host, admin, _ = fuzz
    async with admin.ws() as ws:
        await ws.send("x" * (2 * MB))
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert (await host.client().get("/health")).json() == {"status": "ok"}
    async with admin.ws() as ws:  # the session is untouched; a new socket works
        await ws.send('{"type": "ping"}')
        assert json.loads(await ws.recv()) == {"type": "pong"}

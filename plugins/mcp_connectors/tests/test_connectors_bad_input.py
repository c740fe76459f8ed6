"""Bad input to the connectors API: a clear 400 saying what was wrong, nothing stored;
members cannot manage connectors (and so cannot set a stdio command); a server that
cannot start is a state on the page, never the host's crash."""

from __future__ import annotations

import sys

import pytest

from mcp_support import BASE, DEMO, Setup
from skald_mcp.spec import SpecError, parse_spec, tool_name


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "JSON object"),
        ({"name": "Demo", "transport": "stdio", "command": "x"}, "lower-case"),
        ({"name": "a__b", "transport": "stdio", "command": "x"}, "lower-case"),
        ({"name": "demo", "transport": "sse", "command": "x"}, "transport must be"),
        ({"name": "demo", "transport": "stdio"}, "needs a command"),
        ({"name": "demo", "transport": "stdio", "command": "x", "args": "a b"}, "list of strings"),
        ({"name": "demo", "transport": "stdio", "command": "x", "env": {"BAD NAME": "1"}}, "not a valid name"),
        ({"name": "demo", "transport": "stdio", "command": "x", "env": {"A": "1\n2"}}, "single-line"),
        ({"name": "demo", "transport": "http", "url": "file:///etc/passwd"}, "http:// or https://"),
        ({"name": "demo", "transport": "http", "url": "https://user:pw@example.org/mcp"}, "not in the url"),
        ({"name": "demo", "transport": "http", "url": "https://example.org/mcp", "command": "sh"}, "for stdio"),
        ({"name": "demo", "transport": "stdio", "command": "x", "shell": True}, "unknown field"),
    ],
)
def test_parse_spec_refuses_with_a_message(body, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(body)


def test_masked_secrets_keep_the_stored_values_on_edit():
    stored = parse_spec({"name": "demo", "transport": "stdio", "command": "x", "env": {"KEY": "secret", "OTHER": "1"}})
    assert stored.public()["env"] == {"KEY": "********", "OTHER": "********"}
    edited = parse_spec({"name": "demo", "transport": "stdio", "command": "x", "env": {"KEY": "********", "NEW": "2"}}, keep=stored)
    assert dict(edited.env) == {"KEY": "secret", "NEW": "2"}


def test_tool_names_are_namespaced_and_fit_the_hosts_rules():
    assert tool_name("demo", "echo") == "demo__echo"
    assert tool_name("demo", "files.read/all") == "demo__files_read_all"
    assert len(tool_name("demo", "x" * 100)) == 64


async def test_the_api_refuses_bad_input_and_stores_nothing(setup: Setup):
    response = await setup.admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "stdio"})
    assert response.status_code == 400 and "needs a command" in response.json()["error"]
    response = await setup.admin.post(f"{BASE}/servers", json={"name": "demo", "transport": "stdio", "command": "x", "access": "everyone"})
    assert response.status_code == 400 and "list of member ids" in response.json()["error"]
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"] == []
    for method, path in [("put", "/servers/nope"), ("delete", "/servers/nope"), ("post", "/servers/nope/accept"), ("put", "/servers/nope/access")]:
        response = await getattr(setup.admin, method)(f"{BASE}{path}", json={"members": []})
        assert response.status_code == 404 and "nope" in response.json()["error"], (method, path)


async def test_members_cannot_manage_connectors_or_set_a_command(setup: Setup):
    alice = await setup.host.member("alice")
    body = {"name": "mine", "transport": "stdio", "command": sys.executable, "args": [DEMO]}
    response = await alice.post(f"{BASE}/servers", json=body)
    assert response.status_code == 403 and "administrator" in response.json()["error"]
    assert (await alice.get(f"{BASE}/servers")).status_code == 403
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"] == []


async def test_a_server_that_cannot_start_is_a_failed_row_and_the_host_keeps_going(setup: Setup):
    body = {"name": "broken", "transport": "stdio", "command": "/nonexistent/mcp-server", "access": []}
    response = await setup.admin.post(f"{BASE}/servers", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "failed" and response.json()["error"]
    await setup.add_stdio()  # the next one works
    assert (await setup.admin.get("/api/health")).status_code == 200


async def test_german_strings_reach_a_german_admin(setup: Setup):
    response = await setup.admin.put("/api/me/locale", json={"locale": "de"})
    assert response.status_code == 200, response.text
    mine = (await setup.admin.get(f"{BASE}/mine")).json()
    assert mine["strings"]["title"] == "Konnektoren"
    response = await setup.admin.delete(f"{BASE}/servers/nope")
    assert response.json()["error"] == "Es gibt keinen Konnektor namens nope."


def test_every_string_is_in_english_and_german():
    from skald_mcp.strings import STRINGS

    assert set(STRINGS["en"]) == set(STRINGS["de"])
    assert all(STRINGS["de"][key].strip() and STRINGS["de"][key] != STRINGS["en"][key] or key in ("name", "col_name") for key in STRINGS["en"])

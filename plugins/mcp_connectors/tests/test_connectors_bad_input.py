"""Bad input to the connectors API: a clear 400 saying what was wrong, nothing stored;
members cannot manage connectors (and so cannot set a stdio command); a server that
cannot start is a state on the page, never the host's crash."""

from __future__ import annotations

import socket
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


async def test_a_german_admin_reads_refusals_in_german_with_a_code_and_the_field(setup: Setup):
    """Each refusal from the checks has a stable code and the reader's language; the
    page cannot translate an English sentence it does not know."""
    assert (await setup.admin.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    refusals = [
        ("post", "/servers", {"name": "Demo", "transport": "stdio", "command": "x"}, "mcp.err_name_invalid", "name", "Kleinbuchstaben"),
        ("post", "/servers", {"name": "demo", "transport": "http", "url": "ftp://x"}, "mcp.err_url_scheme", "url", "https://-Adresse"),
        ("post", "/servers", {"name": "demo", "transport": "stdio", "command": "x", "shell": True}, "mcp.err_unknown_fields", None, "unbekannte Felder: shell"),
        ("post", "/servers", {"name": "demo", "transport": "http", "url": "https://example.org/", "headers": {"X-Probe wert": "1"}}, "mcp.err_headers_name_invalid", "headers", "kein gültiger Header-Name"),
        ("post", "/servers", {"name": "demo", "transport": "http", "url": "https://example.org/", "headers": "X-Probe wert"}, "mcp.err_headers_not_object", "headers", "Header müssen"),
        ("post", "/servers", {"name": "demo", "transport": "stdio", "command": "x", "env": {"A": "1\n2"}}, "mcp.err_env_value_invalid", "env", "einzeiligen Wert"),
        ("put", "/catalog/search", {"transport": "http", "url": "ftp://x"}, "mcp.err_url_scheme", "url", "https://-Adresse"),
        ("put", "/providers/idp", {"foo": 1}, "mcp.err_unknown_fields", None, "unbekannte Felder: foo"),
        ("put", "/providers/Idp", {"client_id": "c"}, "mcp.err_name_invalid", "name", "Kleinbuchstaben"),
        # A text field's refusals name the field: they were a 500 (its name collided
        # with the translation's own argument).
        ("put", "/providers/idp", {"auth_url": "https://a.example/auth", "token_url": "https://a.example/token"}, "mcp.err_text_required", "client_id", "client_id ist erforderlich"),
        ("put", "/providers/idp", {"client_id": "c", "issuer": 5}, "mcp.err_text_invalid", "issuer", "issuer muss eine Zeichenkette"),
        # A private issuer names ``issuer``: the body has no ``url`` for the page to focus.
        ("put", "/providers/idp", {"client_id": "c", "issuer": "http://127.0.0.1:9", "redirect_uri": "https://skald.example/oauth"},
         "mcp.err_private_address", "issuer", "zeigt auf eine private oder besondere Adresse"),
        ("put", "/catalog/search", {"transport": "http", "url": "https://x.example/mcp", "title": 5}, "mcp.err_text_invalid", "title", "title muss"),
    ]
    for method, path, body, code, field, german in refusals:
        response = await getattr(setup.admin, method)(f"{BASE}{path}", json=body)
        answer = response.json()
        assert response.status_code == 400 and answer["code"] == code and answer["field"] == field, (path, body, answer)
        assert german in answer["error"], (path, body, answer)
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"] == []


async def test_a_member_reads_the_private_address_refusal_in_german(setup: Setup):
    from test_member_connectors import grant_remote

    await grant_remote(setup)
    alice = await setup.host.member("alice")
    assert (await alice.put("/api/me/locale", json={"locale": "de"})).status_code == 200
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": "http://127.0.0.1:9/mcp"}})
    answer = response.json()
    # A member cannot change the setting, so the refusal names it (by its label, in German).
    assert response.status_code == 400 and answer["code"] == "mcp.err_private_address_member", answer
    assert answer["error"].startswith("127.0.0.1 zeigt auf eine private oder besondere Adresse (127.0.0.1); hier dürfen nur öffentliche Server genutzt werden")
    assert "„Private Adressen erlauben“" in answer["error"]
    response = await setup.host.member("bob")
    english = await response.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": "http://127.0.0.1:9/mcp"}})
    assert "an administrator turns on “Allow private addresses”" in english.json()["error"], english.text
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": "https://x.example/", "command": "sh"}})
    assert response.json()["code"] == "mcp.err_unknown_fields_remote" and "unbekannte Felder: command" in response.json()["error"]


async def test_headers_the_connection_sets_itself_are_refused_by_name(setup: Setup):
    """A member's remote connector (and an admin's) with ``Host`` would address another
    virtual host at the address the SSRF check approved; the framing and MCP session
    headers would smuggle requests or hijack the session. Each is refused, whatever its
    case, naming the header, as a header value with a line break is."""
    from test_member_connectors import grant_remote

    await grant_remote(setup)
    alice = await setup.host.member("alice")
    reserved = ["Host", "content-length", "Transfer-Encoding", "MCP-SESSION-ID", "Mcp-Protocol-Version", "Connection", "Upgrade", "TE",
                "Trailer", "Keep-Alive", "Proxy-Authorization", "Content-Type", "Last-Event-ID"]
    for header in reserved:
        body = {"remote": {"name": "home", "url": "https://x.example/mcp", "headers": {"X-Key": "k", header: "v"}}}
        response = await alice.post(f"{BASE}/my/connectors", json=body)
        answer = response.json()
        assert response.status_code == 400 and answer["code"] == "mcp.err_headers_name_reserved" and answer["field"] == "headers", (header, answer)
        assert f"The header {header} is set by the connection itself" in answer["error"], answer
        body = {"name": "demo", "transport": "http", "url": "https://x.example/mcp", "headers": {header: "v"}, "access": []}
        response = await setup.admin.post(f"{BASE}/servers", json=body)
        assert response.status_code == 400 and response.json()["code"] == "mcp.err_headers_name_reserved", (header, response.text)
    template = {"transport": "http", "url": "https://x.example/mcp", "fields": [{"name": "site", "header": "Host"}]}
    response = await setup.admin.put(f"{BASE}/catalog/web", json=template)
    assert response.status_code == 400 and response.json()["code"] == "mcp.err_headers_name_reserved", response.text
    assert (await alice.get(f"{BASE}/my/connectors")).json()["connectors"] == []
    assert (await setup.admin.get(f"{BASE}/servers")).json()["servers"] == []
    # What a server is signed in to with stays allowed.
    assert parse_spec({"name": "demo", "transport": "http", "url": "https://x.example/", "headers": {"Authorization": "Bearer k", "Cookie": "s=1"}}).headers


async def test_a_failed_connector_names_its_cause_beside_the_technical_detail(setup: Setup):
    """The page explains a cause in a sentence of the reader's language; the detail
    stays for the admin who wants it."""
    body = {"name": "missing", "transport": "stdio", "command": "/nonexistent/bin", "access": []}
    failed = (await setup.admin.post(f"{BASE}/servers", json=body)).json()
    assert failed["state"] == "failed" and failed["cause"] == "command_not_found" and "/nonexistent/bin" in failed["error"], failed
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    body = {"name": "closed", "transport": "http", "url": f"http://127.0.0.1:{port}/mcp", "access": []}
    failed = (await setup.admin.post(f"{BASE}/servers", json=body)).json()
    assert failed["state"] == "failed" and failed["cause"] == "connection_failed" and "ConnectError" in failed["error"], failed


def test_failure_causes_are_found_inside_groups_and_chains():
    from skald_mcp.runtime import failure_cause

    class ConnectError(Exception):  # httpx's and httpx2's, known by name
        pass

    assert failure_cause(ExceptionGroup("task group", [FileNotFoundError(2, "No such file", "/x")])) == "command_not_found"
    try:
        try:
            raise ConnectError("All connection attempts failed")
        except ConnectError:
            raise RuntimeError("session ended") from None
    except RuntimeError as wrapped:
        assert failure_cause(wrapped) == "connection_failed"
    assert failure_cause(TimeoutError()) == "timeout"
    assert failure_cause(ValueError("odd")) == "other"


def test_the_failure_detail_masks_the_connectors_secrets():
    from skald_mcp.runtime import Connection

    spec = parse_spec({"name": "demo", "transport": "http", "url": "https://example.org/", "headers": {"Authorization": "Bearer geheim-token-42"}})
    connection = Connection(spec, on_change=lambda c: None)
    connection.fail(RuntimeError("401 for Bearer geheim-token-42"))
    assert "geheim-token-42" not in connection.error and connection.error == "RuntimeError: 401 for ********"


UNREADABLE = [
    # (body, what the host's one JSON reader says, the field it names)
    (b'{"remote": {"name": "y", "url": "http://127.0.0.1:8623/", "headers": {"a": NaN}}}', "finite", "remote.headers.a"),
    (b'{"remote": {"name": "y",', "not valid JSON", None),
    (b'{"remote": "\xff\xfe"}', "UTF-8", None),
    (b"[" * 40 + b"]" * 40, "nested deeper", None),
]


@pytest.mark.parametrize(("body", "said", "field"), UNREADABLE)
async def test_an_unreadable_body_gets_the_hosts_own_refusal_naming_what_is_wrong(setup: Setup, body, said, field):
    """Not "the body must be a JSON object" (nor, for an accept, "tools is missing"):
    the host's reader says what is wrong and where (SECURITY.md, "one JSON reader")."""
    await setup.add_stdio()
    headers = {"Content-Type": "application/json"}
    for method, path in [("post", "/my/connectors"), ("post", "/servers"), ("put", "/servers/demo"), ("put", "/servers/demo/access"), ("post", "/servers/demo/accept")]:
        response = await setup.admin.request(method.upper(), f"{BASE}{path}", content=body, headers=headers)
        assert response.status_code == 400, (path, response.text)
        answer = response.json()
        assert not answer["code"].startswith("mcp."), (path, answer)
        assert said in answer["error"], (path, answer)
        assert answer.get("field") == field, (path, answer)
    assert [s["name"] for s in (await setup.admin.get(f"{BASE}/servers")).json()["servers"]] == ["demo"]

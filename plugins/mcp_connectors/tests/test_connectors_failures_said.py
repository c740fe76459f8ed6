"""What a failure tells, and to whom (third probe): a member's connector that never
worked reads failed after a new login too, not reconnecting; a sandboxed command that
is not there says so; a call whose connection was refused says it did not run, and one
to a connector reconnecting says it is reconnecting (not that the tool does not exist);
the admin's form shows that it is busy; a withdrawn connector has no Restart; refusals
carry codes, in sentences; a device link the server forgot is noticed when the runtime
reconnects."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys

import pytest

from mcp import Client
from mcp_support import BASE, HttpDemo, Setup, allow, calls, eventually, finished, new_conversation, send, state
from skald_hookspecs import ToolContext, ToolError
from skald_host.testing import Reply, ToolCall
from skald_host.testing.host import ADMIN_PASSWORD, MEMBER_PASSWORD
from skald_mcp import running
from test_connectors_german_refusals import german
from test_connectors_page import TAG
from test_connectors_retry import no_background_retry, quick_retries  # noqa: F401 - fixtures
from test_member_connectors import grant_remote, put_template
from test_oauth import allow_private
from test_sandbox_runtime import sandboxed  # noqa: F401 - fixture


def closed_port() -> int:
    with socket.socket() as probe:  # a port nothing listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def own_states(client) -> dict[str, str]:
    return {c["name"]: c["state"] for c in (await client.get(f"{BASE}/my/connectors")).json()["connectors"]}


async def test_a_members_connector_that_never_worked_reads_failed_after_a_new_login(setup: Setup, quick_retries):
    """Failed at their first start, read failed; after the member's file closed and a
    new login they read reconnecting, tried for ever, "lost its connection"."""
    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    for name, url in (("closed", f"http://127.0.0.1:{closed_port()}/mcp"), ("nowhere", "https://nonexistent.invalid/mcp")):
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": name, "url": url}})
        assert response.status_code == 201 and response.json()["state"] == "failed", response.text
    async with HttpDemo() as demo:
        assert (await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "works", "url": demo.url}})).json()["state"] == "ready"
        await demo.__aexit__()  # one that worked, whose server is away at the next login
        await setup.host.core.users.lock(alice_id)
        alice = await setup.host.member("alice")

        async def settled() -> dict[str, str] | None:
            states = await own_states(alice)
            return states if len(states) == 3 and "starting" not in states.values() else None

        states = await eventually(settled, what="her connectors to start after the login")
        assert states == {"closed": "failed", "nowhere": "failed", "works": "reconnecting"}, states
        await asyncio.sleep(0.5)  # several background rounds (quick_retries): still so
        assert await own_states(alice) == states
        assert {t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("mcp-retry:") and not t.done()} == {"mcp-retry:works"}
        await demo.__aenter__()
        await eventually(lambda: _state_is(alice, "works", "ready"), what="the one that worked to come back")


async def _state_is(client, name: str, wanted: str) -> bool:
    return (await own_states(client)).get(name) == wanted


async def test_a_sandboxed_command_that_is_not_there_says_so(sandboxed: Setup, caplog):  # noqa: F811
    setup = sandboxed
    caplog.set_level(logging.INFO, logger="skald_mcp")
    alice = await setup.host.member("alice")
    template = {"transport": "stdio", "command": "/opt/mcp-7e2d/bin/server", "fields": [{"name": "token", "label": "Token", "env": "TOKEN"}]}
    assert (await setup.admin.put(f"{BASE}/catalog/tool", json=template)).status_code == 200
    response = await alice.post(f"{BASE}/my/connectors", json={"template": "tool", "values": {"token": "tok-5c1a-secret"}})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["state"] == "failed" and body["cause"] == "command_not_found_sandbox", body
    assert "not found in the sandbox" in body["error"] and "7e2d" not in response.text and "tok-5c1a" not in response.text, body
    strings = (await alice.get(f"{BASE}/mine")).json()["strings"]
    assert "not found in your sandbox" in strings["cause_command_not_found_sandbox"]
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("skald_mcp")]
    assert any(line.startswith("connector of a member: command_not_found (") for line in lines), lines
    # Failed at its first start: after a new login too.
    await setup.host.core.users.lock(alice.member["id"])
    alice = await setup.host.member("alice")

    async def settled() -> str | None:
        value = (await own_states(alice)).get("tool")
        return value if value not in (None, "starting") else None

    assert await eventually(settled, what="the connector after the login") == "failed"


async def test_a_call_whose_connection_is_refused_did_not_run_and_one_while_reconnecting_says_so(setup: Setup, no_background_retry):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    await allow(setup.admin, "web__*")
    async with HttpDemo() as demo:
        body = {"name": "web", "transport": "http", "url": demo.url, "access": [alice_id]}
        assert (await setup.admin.post(f"{BASE}/servers", json=body)).json()["state"] == "ready"
        pid = next(t for t in running.runtime.member_tools(alice_id) if t.name == "web__pid")
        await demo.__aexit__()  # the server is down: nothing listens any more
        with pytest.raises(ToolError) as refused:
            await pid.run({}, ToolContext(member_id=alice_id))
        assert "was not sent and did not run" in str(refused.value) and "may or may not" not in str(refused.value), refused.value
        assert (await setup.server("web"))["state"] == "reconnecting"

        # Reconnecting: the tool is still there for the model, and says why it cannot run.
        assert "web__pid" in {t.name for t in running.runtime.member_tools(alice_id)}
        setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("web__pid", {})]), Reply("Done.")])
        cid = await new_conversation(alice)
        await send(alice, cid, "Pid?")
        (done,) = calls(await finished(alice, cid))
        assert done["status"] == "error" and "is reconnecting by itself" in done["result"], done
        await demo.__aenter__()


async def test_the_add_form_is_busy_while_the_connector_starts_in_a_browser(setup: Setup, plugin_browser):
    page = await plugin_browser.open(setup.host, setup.host.admin_username, ADMIN_PASSWORD, "mcp", "connectors")
    form = page.locator(f"{TAG} form.mcp-add")
    await form.locator("input[name=name]").fill("slow")
    await form.locator("input[name=command]").fill(sys.executable)
    await form.locator("textarea[name=args]").fill("-c\nimport time; time.sleep(4)")  # answers nothing, then ends
    submit = form.locator("button[type=submit]")
    await submit.click()
    await form.locator(".mcp-busy").filter(has_text="waiting for its server to answer").wait_for(timeout=3_000)
    assert await submit.is_disabled() and await form.get_attribute("aria-busy") == "true"
    row = page.locator(f"{TAG} tr.mcp-server[data-name=slow]")
    await row.wait_for(timeout=30_000)
    fresh = page.locator(f"{TAG} form.mcp-add")
    assert await fresh.locator("button[type=submit]").is_enabled() and await fresh.locator(".mcp-busy").is_hidden()


async def test_a_withdrawn_connector_has_no_restart_in_a_browser(setup: Setup, plugin_browser):
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        await put_template(setup, demo.url, access=[alice_id])
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "web", "values": {"api_key": "k"}})).status_code == 201
        assert (await setup.admin.delete(f"{BASE}/catalog/web/access/{alice_id}")).status_code == 200
        page = await plugin_browser.open(setup.host, "alice", MEMBER_PASSWORD, "mcp", "connectors")
        row = page.locator(f"{TAG} .mcp-own-connector[data-name=web]")
        await row.locator(".mcp-withdrawn").wait_for(timeout=10_000)
        assert await row.locator("button.mcp-restart").count() == 0 and await row.locator("button.mcp-deactivate").count() == 1
        await row.locator("a.mcp-open").click()
        detail = page.locator(f"{TAG} section.mcp-detail[data-name=web]")
        await detail.locator(".mcp-withdrawn").wait_for(timeout=10_000)
        assert await detail.locator("button.mcp-restart").count() == 0 and await detail.locator("button.mcp-deactivate").count() == 1


async def test_sign_in_and_question_refusals_are_coded_sentences(setup: Setup):
    from oauth_standin import AuthorizationServer
    from test_oauth import put_provider

    await allow_private(setup)
    alice = await setup.host.member("alice")
    async with AuthorizationServer() as idp, HttpDemo() as demo:
        assert (await put_provider(setup, idp.issuer)).status_code == 200
        template = {"transport": "http", "url": demo.url, "oauth": {"provider": "test-idp", "scopes": ["mail.read"]}}
        assert (await setup.admin.put(f"{BASE}/catalog/mail", json=template)).status_code == 200
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "mail"})).status_code == 201
        answer = (await alice.post(f"{BASE}/my/connectors/mail/oauth/complete", json={"state": "forged", "code": "c"})).json()
        assert answer["code"] == "mcp.err_oauth_state_unknown" and answer["error"] == "This sign-in is unknown, expired or already used; start it again.", answer

    # A connector's question: each refusal has its code, in the member's language.
    await setup.add_stdio(access=[alice.member["id"]])
    await allow(setup.admin, "demo__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("demo__ask", {})]), Reply("Greeted.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Greet me.")
    asked = await eventually(lambda: _questions(alice), what="the question")
    path = f"{BASE}/my/elicitations/{asked[0]['id']}"
    answer = (await alice.post(path, json={"action": "accept", "content": {}})).json()
    assert answer["code"] == "mcp.err_elicitation_answer_invalid" and answer["error"] == "The answer was not accepted: Name is required.", answer
    assert (await alice.post(path, json={"action": "maybe"})).json()["code"] == "mcp.err_elicitation_answer_invalid"
    assert (await alice.post(path, json=["x"])).json()["code"] == "mcp.err_body_not_object"
    assert (await alice.post(f"{BASE}/my/elicitations/nothing", json={"action": "decline"})).json()["code"] == "mcp.err_elicitation_gone"
    await german(alice)
    answer = (await alice.post(path, json={"action": "accept", "content": {"name": "x", "pin": "abc"}})).json()
    assert answer["code"] == "mcp.err_elicitation_answer_invalid" and answer["error"].startswith("Die Antwort wurde nicht angenommen: "), answer
    assert (await alice.post(path, json={"action": "decline"})).status_code == 200
    assert calls(await finished(alice, cid))[-1]["result"] == "decline"
    assert (await state(alice, cid))["questions"] == []


async def _questions(client) -> list[dict]:
    return (await client.get(f"{BASE}/my/elicitations")).json()["elicitations"]


async def test_a_device_link_the_server_forgot_is_noticed_when_the_connector_reconnects(setup: Setup):
    """The server restarted and forgot the phone; nobody opened the connector's page:
    the reconnect that the next call makes asks ``login_status`` again, and the tools
    go until the device is linked again."""
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    async with HttpDemo() as demo:
        assert (await setup.admin.put(f"{BASE}/catalog/chat", json={"transport": "http", "url": demo.url, "login": "qr"})).status_code == 200
        assert (await alice.post(f"{BASE}/my/connectors", json={"template": "chat"})).json()["state"] == "needs_login"
        async with Client(demo.url, mode="legacy", cache=None) as phone:
            await phone.call_tool("scan", {})
        await eventually(lambda: _state_is(alice, "chat", "ready"), what="the device link")
        echo = next(t for t in running.runtime.member_tools(alice_id) if t.name == "chat__echo")

        await demo.__aexit__()
        await demo.__aenter__()  # a new server process: the device is unlinked
        assert await echo.run({"text": "x"}, ToolContext(member_id=alice_id)) == "echo: x"  # the session is made again
        await eventually(lambda: _state_is(alice, "chat", "needs_login"), what="the forgotten link to be noticed")
        assert not [t for t in running.runtime.member_tools(alice_id) if t.name.startswith("chat__")]


async def test_connectors_waiting_their_turn_after_a_login_read_starting_not_stopped(setup: Setup, monkeypatch):
    """An unlock starts the member's connectors one after another; one whose turn has
    not come read ``stopped`` on the page meanwhile (a clean-clone run caught it as a
    failed test: under load the read fell between the login and its start). The first
    connector's start is held here, deterministically, while the page is read."""
    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    alice_id = alice.member["id"]
    for name in ("a-first", "b-second"):
        response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": name, "url": f"http://127.0.0.1:{closed_port()}/mcp"}})
        assert response.status_code == 201, response.text
    members = running.runtime.members
    held, release = asyncio.Event(), asyncio.Event()
    may_run = members.may_run

    async def held_first(member_id, record):
        if not held.is_set():  # the first connector's turn: held until the page is read
            held.set()
            await release.wait()
        return await may_run(member_id, record)

    await setup.host.core.users.lock(alice_id)
    monkeypatch.setattr(members, "may_run", held_first)
    alice = await setup.host.member("alice")
    try:
        await asyncio.wait_for(held.wait(), 30)
        states = await own_states(alice)
        assert states == {"a-first": "starting", "b-second": "starting"}, states
    finally:
        release.set()

    async def settled() -> dict[str, str] | None:
        states = await own_states(alice)
        return states if "starting" not in states.values() else None

    assert await eventually(settled, what="both to have started") == {"a-first": "failed", "b-second": "failed"}


async def test_a_remote_connector_where_nothing_listens_fails_at_once_saying_the_connection_was_refused(setup: Setup):
    """The probe's case: adding a member's remote connector at a closed port blocked the
    request for the whole connect wait and more (~30 s) and said "the server did not
    answer within 20 s". A connect that fails ends the wait at once, with its cause."""
    import time

    await grant_remote(setup)
    await allow_private(setup)
    alice = await setup.host.member("alice")
    began = time.monotonic()
    response = await alice.post(f"{BASE}/my/connectors", json={"remote": {"name": "home", "url": f"http://127.0.0.1:{closed_port()}/mcp"}})
    took = time.monotonic() - began
    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer["state"] == "failed" and answer["cause"] == "connection_failed", answer
    assert "ConnectionRefusedError" in answer["error"] and "did not answer" not in answer["error"], answer
    assert took < 5, f"the refused connection took {took:.1f} s to say so"


async def test_a_server_that_never_answers_is_given_up_on_at_the_connect_wait_not_seconds_later():
    """A start that timed out went on to wait ``STOP_SECONDS`` more for a session that
    never began to close in order (the probe's ~30 s for a 20 s wait). A server that
    takes the connection and never answers is given up on at the wait."""
    import time

    from skald_mcp.runtime import Connection
    from skald_mcp.spec import ServerSpec

    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # reads nothing, answers nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 18813)
    try:
        connection = Connection(ServerSpec("silent", "http", url="http://127.0.0.1:18813/mcp"), on_change=lambda c: None)
        began = time.monotonic()
        await connection.start(wait=1.0)
        took = time.monotonic() - began
        assert connection.state == "failed" and connection.cause == "timeout", (connection.state, connection.error)
        assert took < 3, f"the start took {took:.1f} s for a 1 s wait"
        await connection.stop()
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()

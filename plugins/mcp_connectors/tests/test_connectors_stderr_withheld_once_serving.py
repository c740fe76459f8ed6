"""A global stdio connector's stderr is logged while its session starts (a missing
module, a bad key: what the admin needs), and only counted once it serves members: a
server that logs the calls it handles would put a member's tool arguments into the
log, which the admin reads."""

from __future__ import annotations

import logging
import sys

from mcp_support import BASE, Setup, allow, calls, eventually, finished, new_conversation, send
from skald_host.testing import Reply, ToolCall

#: A standard-library MCP server that writes a line to stderr as it starts and one per
#: call, quoting the call's argument (as many servers' request logging does).
SERVER = r'''
import json, sys
sys.stderr.write("starting up, config ok\n"); sys.stderr.flush()
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
TOOLS = [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method = m.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "gl", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": TOOLS}})
    elif method == "tools/call":
        text = m["params"]["arguments"].get("text")
        sys.stderr.write(f"handling request text={text}\n"); sys.stderr.write("Traceback (most recent call last): text=" + str(text) + "\n"); sys.stderr.flush()
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "echoed"}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "unknown method"}})
'''


async def test_a_connectors_stderr_after_its_session_is_ready_is_counted_not_logged(setup: Setup, caplog):
    caplog.set_level(logging.DEBUG)
    alice = await setup.host.member("alice")
    body = {"name": "gl", "transport": "stdio", "command": sys.executable, "args": ["-c", SERVER], "access": [alice.member["id"]]}
    response = await setup.admin.post(f"{BASE}/servers", json=body)
    assert response.status_code == 201 and response.json()["state"] == "ready", response.text

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "skald_mcp.stderr"]

    await eventually(lambda: "connector gl: starting up, config ok" in lines(), what="the startup line")  # the admin's to read
    await allow(setup.admin, "gl__*")
    setup.model.script("model-mcp", [Reply(tool_calls=[ToolCall("gl__echo", {"text": "ZQXMARK-globalarg"})]), Reply("Done.")])
    cid = await new_conversation(alice)
    await send(alice, cid, "Echo it.")
    done = calls(await finished(alice, cid))
    assert [(c["status"], c["result"]) for c in done] == [("done", "echoed")], done

    assert (await setup.admin.delete(f"{BASE}/servers/gl")).status_code == 200  # the session's end says the count
    withheld = "connector gl wrote 2 lines to stderr; withheld: they may quote members' calls"
    await eventually(lambda: withheld in lines(), what="the count of the withheld lines")
    assert lines() == ["connector gl: starting up, config ok", withheld]
    assert "ZQXMARK" not in caplog.text

"""An MCP server in the standard library only (a member's sandbox has no ``mcp``
package), for the per-member runtime's tests: it speaks newline-delimited JSON-RPC on
stdin/stdout, offers ``whoami`` (who and where it runs, the token it was given), and
sends a log notification before each answer. Run as ``python3 -c SOURCE``."""

SOURCE = r'''
import json, os, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
TOOLS = [{"name": "whoami", "description": "Who and where this server runs.", "inputSchema": {"type": "object", "properties": {}}}]
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method = m.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "tiny", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": TOOLS}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "whoami was called"}})
        text = json.dumps({"uid": os.getuid(), "pid": os.getpid(), "token": os.environ.get("DEMO_TOKEN"), "sees_host_tree": os.path.exists(sys.argv[1]), "cwd": os.getcwd()})
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "unknown method"}})
'''

#: The same server in JavaScript, for a local-script connector that runs on node with
#: a package.json (``npm ci`` in the member's sandbox).
NODE_SOURCE = r'''
const readline = require("readline");
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const TOOLS = [{name: "whoami", description: "Who and where this server runs.", inputSchema: {type: "object", properties: {}}}];
readline.createInterface({input: process.stdin}).on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === "initialize") send({jsonrpc: "2.0", id: m.id, result: {protocolVersion: m.params.protocolVersion, capabilities: {tools: {}}, serverInfo: {name: "tiny-node", version: "1"}}});
  else if (m.method === "tools/list") send({jsonrpc: "2.0", id: m.id, result: {tools: TOOLS}});
  else if (m.method === "tools/call") send({jsonrpc: "2.0", id: m.id, result: {content: [{type: "text", text: JSON.stringify({runtime: "node " + process.version, uid: process.getuid(), cwd: process.cwd()})}]}});
  else if (m.method === "ping") send({jsonrpc: "2.0", id: m.id, result: {}});
  else send({jsonrpc: "2.0", id: m.id, error: {code: -32601, message: "unknown method"}});
});
'''
PACKAGE_JSON = '{"name": "tiny-node", "version": "1.0.0", "private": true}\n'
PACKAGE_LOCK = '{"name": "tiny-node", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": {"": {"name": "tiny-node", "version": "1.0.0"}}}\n'

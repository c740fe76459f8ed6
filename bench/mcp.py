"""An MCP connector's tool call through the agent against the bare ``mcp`` SDK calling the
same server program (issue 21's target: at most 1.2x), and proof that no process is
spawned per call.

The server is the connectors plugin's test server (``demo_server.py``, stdio) and the
tool its ``echo``. Three figures, medians of interleaved samples. The scripted model and
the member's WebSocket client run in processes of their own, as in bench/chat.py:

- agent: a member's turn whose scripted model calls ``demo__echo`` (allowed by a rule)
  ``CALLS`` times; each call's ``tool_start`` to ``tool_done`` as the member's WebSocket
  sees them: the call (admitted by the gate and written as running with its round),
  the plugin's tool through its long-lived session, the result written to the
  member's SQLCipher file with the next round's placeholder, and announced;
- tool path: the same call in this process through what the kernel runs — the
  ``member_tools`` hook for the member's list, then ``Tool.run`` — without the store;
- bare: ``Client.call_tool`` on an SDK session of its own to another process of the
  same server program.

The agent figure includes a durable write the bare SDK does not make, and whatever
else the loop does meanwhile (the round's own events going out, the next request). So
whole rounds are printed beside it, ``tool_done`` to ``tool_done``, with ``demo__echo``
and with the built-in ``list_agents`` (rerun-safe: it runs before its round is
written, so its start and end reach the socket together and only rounds can time
it): their difference is what the MCP call adds to a round through the agent. The
tool path is the connector's own overhead.

Last, a per-member runtime's start at unlock: a member's stdio connector (the standard
library server of the tests, ``tiny_server.py``) in their sandbox, from the login that
opens their file to the connector's tools being ready (median of ``UNLOCKS``).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from skald_host.testing import RecordedRequest, Reply, ScriptedModelServer, SkaldHarness, ToolCall

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "plugins" / "mcp_connectors" / "tests" / "demo_server.py"
ROUNDS = 200
CALLS = 20
TARGET_RATIO = 1.2
UNLOCKS = 5
MODEL, KEY = "model-bench-mcp", "sk-bench-mcp"


async def _interleaved(host, member_id: str) -> tuple[list[float], list[float]]:
    """The tool path and the bare SDK, one sample of each in turn, so drift on the
    shared machine hits both alike."""
    from mcp import Client, StdioServerParameters

    from skald_hookspecs import ToolContext

    core = host.core
    member = await core.users.get(member_id)
    ctx = ToolContext(member_id=member_id, cancelled=asyncio.Event())
    path: list[float] = []
    bare: list[float] = []
    async with Client(StdioServerParameters(command=sys.executable, args=[str(DEMO)]), mode="legacy", cache=None) as client:
        await client.call_tool("echo", {"text": "warm"})
        for _ in range(ROUNDS):
            started = time.perf_counter()
            tools = core.chat.tools.member_tools(member_id, lambda plugin_id: core.catalog.usable(member, plugin_id))
            tool = next(t for t in tools if t.name == "demo__echo")
            await tool.tool.run({"text": "bench"}, ctx)
            path.append(time.perf_counter() - started)
            started = time.perf_counter()
            await client.call_tool("echo", {"text": "bench"})
            bare.append(time.perf_counter() - started)
    return path, bare


def _reply(request: RecordedRequest) -> Reply:
    """The scripted model: the member's message names the tool and its arguments
    (``tool {json}``); it calls that tool until the turn holds ``CALLS`` results, then
    answers."""
    tool, _, arguments = (request.last_user_text or "").partition(" ")
    results = 0
    for message in reversed(request.messages):
        if message.get("role") == "user":
            break
        results += message.get("role") == "tool"
    return Reply(tool_calls=[ToolCall(tool, json.loads(arguments))]) if results < CALLS else Reply("Done.")


def model_main() -> None:
    """The model server's process: prints its URL and serves until stdin closes. In
    the host's own process it answered each next request while the measured call was
    being recorded, on the same loop, and charged that to the agent's figure."""

    async def serve() -> None:
        async with ScriptedModelServer(models=(MODEL,), api_key=KEY, responder=_reply) as server:
            print(server.base_url, flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(serve())


async def _agent(host, member, tool: str = "demo__echo", args: dict | None = None) -> tuple[list[float], list[float]]:
    """Turns of CALLS calls each, from the member's WebSocket in a process of its own
    (``client_main``): per call, ``tool_start`` → ``tool_done``; and per round, one
    ``tool_done`` to the next (the model's request and answer, the call, its writes and
    events: a whole round). In this process the client's frame parsing ran on the
    host's loop, inside the intervals it timed."""
    response = await member.post("/api/conversations", json={"title": ""})
    plan = {
        "url": member.base_url, "headers": member.headers("GET"), "conversation": response.json()["id"],
        "text": f"{tool} {json.dumps({'text': 'bench'} if args is None else args)}", "turns": max(1, ROUNDS // CALLS),
    }
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from bench.mcp import client_main; client_main()",
        cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await client.communicate(json.dumps(plan).encode() + b"\n")
    if client.returncode != 0 or not out:
        raise RuntimeError("the bench's WebSocket client failed; its traceback is above")
    samples, rounds, approvals = json.loads(out)
    if approvals:
        print(f"           ({tool}: {approvals} of the calls asked the member first, as check E2 wants after a connector's"
              " result; the client approved each at once, before its tool_start: the call's figure is untouched, a round's includes it)")
    return samples, rounds


def client_main() -> None:
    """The member's WebSocket client: reads the plan (one JSON line), runs its turns,
    prints ``[samples, rounds]`` (one JSON line)."""
    from websockets.asyncio.client import connect

    async def run() -> None:
        plan = json.loads(sys.stdin.readline())
        samples: list[float] = []
        rounds: list[float] = []
        approvals = 0
        url = plan["url"]
        async with connect("ws" + url[4:] + "/api/ws", origin=url, additional_headers=plan["headers"], proxy=None) as ws:
            for _ in range(plan["turns"]):
                await ws.send(json.dumps({"type": "send", "conversation_id": plan["conversation"], "text": plan["text"]}))
                starts: dict[str, float] = {}
                last_done: float | None = None
                finished = False
                while not finished:
                    frame = json.loads(await ws.recv())
                    now = time.perf_counter()
                    events = frame.get("events") if frame.get("type") == "events" else [frame.get("event")] if frame.get("type") == "event" else []
                    for event in events or ():
                        data = event.get("data") or {}
                        if data.get("type") == "tool_start":
                            starts[data["call_id"]] = now
                        elif data.get("type") == "tool_done" and data["call_id"] in starts:
                            samples.append(now - starts.pop(data["call_id"]))
                            if last_done is not None:
                                rounds.append(now - last_done)
                            last_done = now
                        elif data.get("type") == "approval_required":
                            # Check E2: the first connector result marks the conversation, so each
                            # later call asks; approved at once. tool_start follows the answer, so
                            # the call's own figure is untouched; a round's includes the round trip.
                            approvals += 1
                            await ws.send(json.dumps({"type": "approve", "approval_id": data["approval_id"], "decision": "approve"}))
                        elif data.get("type") == "tool_error":
                            raise RuntimeError(f"the call failed: {data.get('result')}")
                        elif data.get("type") == "turn_finished":
                            finished = True
        print(json.dumps([samples, rounds, approvals]), flush=True)

    asyncio.run(run())


def _line(name: str, samples: list[float], bare: float) -> None:
    p50 = statistics.median(samples) * 1000
    ratio = p50 / bare
    verdict = "ok" if ratio <= TARGET_RATIO else f"over the {TARGET_RATIO}x target"
    print(f"{name:<10} p50 {p50:7.2f} ms   bare p50 {bare:7.2f} ms   ratio {ratio:4.2f}x  {verdict}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        harness = SkaldHarness(Path(tmp))
        model = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from bench.mcp import model_main; model_main()",
            cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        assert model.stdin is not None and model.stdout is not None
        model_url = (await model.stdout.readline()).decode().strip()
        try:
            try:
                host = await harness.start(use_entry_points=True, enable=["mcp"])
                admin = await host.admin()
                provider = await admin.post("/api/admin/models/providers", json={"name": "bench", "base_url": model_url, "api_key": KEY})
                await admin.post("/api/admin/models/entries", json={"provider_id": provider.json()["id"], "model": MODEL, "priority": 1, "strength": 60})
                await admin.post("/api/admin/approval-rules", json={"tool_pattern": "demo__*", "action": "allow", "priority": 50})
                member = await host.member("bench")
                body = {"name": "demo", "transport": "stdio", "command": sys.executable, "args": [str(DEMO)], "access": [member.member["id"]]}
                added = await admin.post("/api/plugin/mcp/servers", json=body)
                if added.status_code != 201 or added.json()["state"] != "ready":
                    print(f"not measured: the connector did not start ({added.text})")
                    return
                pid_before = await _pid(host, member.member["id"])
                agent, agent_rounds = await _agent(host, member)
                _, builtin_rounds = await _agent(host, member, "list_agents", {})
                path, bare = await _interleaved(host, member.member["id"])
                pid_after = await _pid(host, member.member["id"])
                bare_p50 = statistics.median(bare) * 1000
                _line("agent", agent, bare_p50)
                echo_round, builtin_round = statistics.median(agent_rounds) * 1000, statistics.median(builtin_rounds) * 1000
                print(f"           a whole round (model request and answer, the call, its writes and events), tool_done to tool_done:"
                      f" p50 {echo_round:.2f} ms; with the built-in list_agents instead: {builtin_round:.2f} ms;"
                      f" the MCP call's share of a round: {echo_round - builtin_round:.2f} ms ({(echo_round - builtin_round) / bare_p50:.2f}x bare)")
                _line("tool path", path, bare_p50)
                same = "yes" if pid_before == pid_after else "NO"
                print(f"one server process for all {len(agent) + len(path) + 2} calls: {same} (pid {pid_before})")
                await _unlock(host, admin)
            finally:
                await harness.close()
        finally:
            model.stdin.close()
            await asyncio.wait_for(model.wait(), 20)


async def _unlock(host, admin) -> None:
    sys.path.insert(0, str(DEMO.parent))
    from tiny_server import SOURCE

    try:
        backend, _ = await host.core.sandbox.backend()
    except Exception as exc:  # noqa: BLE001 - no sandbox here: say so
        print(f"per-member runtime start at unlock: not measured ({exc})")
        return
    template = {"transport": "stdio", "command": "/usr/bin/python3", "args": ["-c", SOURCE, "/nonexistent"]}
    await admin.put("/api/plugin/mcp/catalog/tiny", json=template)
    member = await host.member("unlocker")
    member_id = member.member["id"]
    response = await member.post("/api/plugin/mcp/my/connectors", json={"template": "tiny"})
    if response.status_code != 201 or response.json()["state"] != "ready":
        print(f"per-member runtime start at unlock: not measured ({response.text})")
        return
    from skald_mcp import running

    samples = []
    for _ in range(UNLOCKS):
        await host.core.users.lock(member_id)
        started = time.perf_counter()
        await host.member("unlocker")
        while True:
            connection = running.runtime.members.connections.get(member_id, {}).get("tiny")
            if connection is not None and connection.state == "ready":
                break
            await asyncio.sleep(0.005)
        samples.append(time.perf_counter() - started)
    print(f"per-member runtime start at unlock ({backend} sandbox): p50 {statistics.median(samples) * 1000:.0f} ms (login included)")


async def _pid(host, member_id: str) -> str:
    from skald_hookspecs import ToolContext

    member = await host.core.users.get(member_id)
    tools = host.core.chat.tools.member_tools(member_id, lambda plugin_id: host.core.catalog.usable(member, plugin_id))
    tool = next(t for t in tools if t.name == "demo__pid")
    return await tool.tool.run({}, ToolContext(member_id=member_id))


if __name__ == "__main__":
    asyncio.run(main())

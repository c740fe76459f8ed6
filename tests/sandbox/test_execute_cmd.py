"""``execute_cmd`` end to end: a real server, the real ``openai`` SDK against the
scripted model, a member's WebSocket. The tool runs in the member's sandbox, /stop
kills the command's whole process group, the assistant is offered the tool and the
companion is not, and with no sandbox the refusal says what to install."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest

from chat.support import ALL_MODELS, API_KEY, MODEL_A, ChatSocket, allow_tool, configure_models, messages, new_conversation, types
from skald_hookspecs import hookimpl
from skald_hookspecs.sandbox import ExecResult, SandboxUnavailable
from skald_hookspecs.types import PluginInfo
from skald_host.testing import Reply, ScriptedModelServer, ToolCall

from .support import Box, command_processes, start_box


@asynccontextmanager
async def chatting(skald, backend: str, **sandbox: Any) -> AsyncIterator[tuple[Box, ScriptedModelServer, Any]]:
    """A host on ``backend`` with a scripted model and execute_cmd allowed; alice's
    logged-in client. The host stops before the model server does."""
    async with ScriptedModelServer(models=ALL_MODELS, api_key=API_KEY) as server:
        try:
            box = await start_box(skald, backend, **sandbox)
            admin = await box.host.admin()
            await configure_models(admin, server)
            await allow_tool(admin, "execute_cmd")
            yield box, server, await box.host.member("alice")
        finally:
            await skald.close()


def tool_result(server: ScriptedModelServer, call: int = 1) -> str:
    """What the model was told the tool returned, as it went over the wire."""
    request = server.requests_for(MODEL_A)[call]
    return next(m["content"] for m in request.messages if m["role"] == "tool")


def offered(server: ScriptedModelServer) -> set[str]:
    return {t["function"]["name"] for t in server.requests_for(MODEL_A)[0].tools}


async def test_the_assistant_runs_a_command_in_the_members_sandbox(skald, backend):
    async with chatting(skald, backend) as (box, server, alice):
        server.script(MODEL_A, [
            Reply(tool_calls=[ToolCall("execute_cmd", {"command": "id -u; pwd; exit 3", "workdir": "~"})]),
            Reply("Done."),
        ])
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Who am I in there?")
            await sock.turn(cid, timeout=30)
        assert "execute_cmd" in offered(server)
        assert tool_result(server) == f"Exit code: 3\n{box.uid(box.alice)}\n/home/member\n"


async def test_stop_kills_the_running_commands_whole_process_group(skald, backend):
    marker = f"stopme-{secrets.token_hex(4)}"
    sleeper = f"bash -c 'exec -a {marker} sleep 1000'"
    async with chatting(skald, backend) as (box, server, alice):
        server.script(MODEL_A, [Reply(tool_calls=[ToolCall("execute_cmd", {"command": f"{sleeper} & {sleeper}; wait"})])])
        uid = box.uid(box.alice)
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Sleep for a long time.")
            deadline = time.monotonic() + 20
            while len(command_processes(uid, marker)) < 2:
                assert time.monotonic() < deadline, "the command never started"
                await asyncio.sleep(0.1)
            assert (await sock.stop(cid))["stopped"] is True
            events = await sock.turn(cid, timeout=20)
            deadline = time.monotonic() + 10
            while command_processes(uid, marker):
                assert time.monotonic() < deadline, f"/stop left {command_processes(uid, marker)} running"
                await asyncio.sleep(0.1)
        assert "tool_cancelled" in types(events) and "cancelled" in types(events)
        assert (await messages(alice, cid))[1]["tool_calls"][0]["status"] == "cancelled"
        assert len(server.requests_for(MODEL_A)) == 1


async def test_the_companion_agent_is_not_offered_execute_cmd(skald, docker_engine):
    async with chatting(skald, "docker") as (box, server, alice):
        server.script(MODEL_A, [Reply("Hello.")])
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice, agent="companion")
            await sock.send(cid, "Hi.")
            await sock.turn(cid, timeout=30)
        assert offered(server) and "execute_cmd" not in offered(server)


async def test_with_the_sandbox_switched_off_the_tool_refuses_and_says_what_to_install(skald):
    async with chatting(skald, "none") as (box, server, alice):
        server.script(MODEL_A, [Reply(tool_calls=[ToolCall("execute_cmd", {"command": "cat /etc/shadow"})]), Reply("I cannot.")])
        async with ChatSocket(alice) as sock:
            cid = await new_conversation(alice)
            await sock.send(cid, "Run something.")
            await sock.turn(cid, timeout=30)
        result = tool_result(server)
        assert result.startswith("Refused: Commands cannot run here") and "docker.io" in result and "bubblewrap" in result


async def test_with_no_engine_and_no_bubblewrap_auto_refuses_naming_both(skald, monkeypatch, tmp_path):
    """A machine with neither, for real: the Docker client is pointed at a socket
    nobody serves and PATH holds no bwrap. Nothing runs on the bare host."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    box = await start_box(skald, "auto")
    with pytest.raises(SandboxUnavailable) as refused:
        await box.run(box.alice, "touch /tmp/ran-on-the-host")
    message = str(refused.value)
    assert "docker: no Docker engine is running on this machine" in message and "install docker.io" in message
    assert "Error while fetching" not in message and "Connection" not in message  # the client's own words: the log only
    assert "bubblewrap: bwrap" in message and "install bubblewrap" in message
    assert not os.path.exists("/tmp/ran-on-the-host")


class RecordingBackend:
    """A backend a plugin registers: it records the spec and answers without running
    anything, so the test sees exactly what the host hands a backend."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def available(self) -> str | None:
        return None

    async def ensure(self, spec):
        self.calls.append(("ensure", spec))

    async def execute(self, spec, command, *, workdir, timeout, output_limit, cancelled=None):
        self.calls.append(("execute", (command, workdir, timeout, output_limit)))
        return ExecResult(0, json.dumps({"uid": spec.uid, "home": spec.home}))

    async def remove(self, member_id):
        self.calls.append(("remove", member_id))

    async def existing(self, instance):
        return []


class SandboxPlugin:
    def __init__(self) -> None:
        self.backend = RecordingBackend()

    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="sandbox-probe", title="Sandbox probe", description="A recording sandbox backend.", spec=">=1.0,<2")

    @hookimpl
    def register_sandbox_backends(self, register) -> None:
        register("recording", self.backend)


class BrokenSandboxPlugin:
    @hookimpl
    def plugin_info(self) -> PluginInfo:
        return PluginInfo(id="sandbox-broken", title="Broken sandbox", description="Registers a half backend.", spec=">=1.0,<2")

    @hookimpl
    def register_sandbox_backends(self, register) -> None:
        register("half", object())


async def test_a_plugins_backend_is_chosen_by_name_and_a_broken_one_only_fails_its_plugin(skald):
    plugin = SandboxPlugin()
    settings = skald.settings(sandbox={"backend": "recording", "exec_timeout_seconds": 30.0})
    host = await skald.start(settings=settings, plugins=[plugin, BrokenSandboxPlugin()], enable=["sandbox-probe"])
    alice = (await host.create_member("alice"))["id"]
    (host.core.files.home(alice) / "notes").mkdir()
    result = await host.core.sandbox.execute(alice, "echo hi", workdir="notes", timeout=99)
    assert json.loads(result.output) == {"uid": host.core.files.uid_for(alice), "home": "/home/member"}
    assert plugin.backend.calls[-1] == ("execute", ("echo hi", "/home/member/notes", 30.0, 1024 * 1024))
    status = host.core.plugins.status("sandbox-broken")
    assert status.state == "failed" and "lacks" in status.error

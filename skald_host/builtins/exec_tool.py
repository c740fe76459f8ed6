"""``execute_cmd``: a shell command in the member's own sandbox, through the same
``TurnApi.run_command`` any plugin's tool can use. Stopping the turn kills everything
the command started; a command is never re-run after a crash. What it prints counts as outside text (check
E2): the sandbox sees shared folders, projects and uploads."""

from __future__ import annotations

from typing import Any, Mapping

from skald_hookspecs import hookimpl
from skald_hookspecs.sandbox import SandboxUnavailable
from skald_hookspecs.types import PluginInfo, Tool, ToolContext, ToolError
from skald_host.core.sandbox.quota import KILLED

MAX_COMMAND = 20_000


async def execute_cmd(args: Mapping[str, Any], ctx: ToolContext) -> str:
    assert ctx.turn is not None
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("'command' must be non-empty text")
    if len(command) > MAX_COMMAND:
        raise ToolError(f"'command' is longer than {MAX_COMMAND} characters")
    workdir = args.get("workdir")
    if workdir is not None and not isinstance(workdir, str):
        raise ToolError("'workdir' must be a path")
    timeout = args.get("timeout")
    try:
        result = await ctx.turn.run_command(command, workdir=workdir or None, timeout=timeout)
    except SandboxUnavailable as exc:
        return f"Refused: {exc}"
    # What a command prints may be any file the sandbox sees: shared folders, projects,
    # uploads, a file another member wrote (check E2). Its output is outside text.
    ctx.mark_untrusted(command)
    if result.access_changed:
        head = result.access_changed
    elif result.disk_limit:
        head = KILLED
    elif result.timed_out:
        head = "The command was killed: it ran past its time limit."
    elif result.cancelled:
        head = "The command was stopped."
    else:
        head = f"Exit code: {result.exit_code}"
    output = result.output if result.output else "(no output)"
    note = "\n[output truncated at the sandbox's output limit]" if result.truncated else ""
    return f"{head}\n{output}{note}"


TOOL = Tool(
    "execute_cmd",
    "Run a shell command (/bin/sh -c) in your private sandbox, a Linux machine of your own"
    " with python3, coreutils and ripgrep and no network. Your home (~) is /home/member;"
    " shared/X and projects/owner/slug are under it. Returns the exit code and the output.",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "the command line"},
            "workdir": {"type": "string", "description": "where to run it: ~/…, shared/X/…, projects/o/s/… or an absolute path (default ~)"},
            "timeout": {"type": "number", "description": "seconds before it is killed (capped by the instance)"},
        },
        "required": ["command"],
    },
    execute_cmd,
    concurrency_safe=False,
    restart="mark_interrupted",
)


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="exec-tool",
        title="Shell commands",
        description="The execute_cmd tool: shell commands in each member's private sandbox.",
        icon="terminal",
        spec=">=1.0,<2",
    )


@hookimpl
def register_tools(register) -> None:
    register(TOOL)

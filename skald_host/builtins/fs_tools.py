"""The fs tools over the member's one agent namespace (seed 001 "Filesystem &
containers"): notes, shared folders and projects, the home folder and the sandbox,
routed on the first path component by ``FileService.resolve``. Reads are
``concurrency_safe`` and re-run after a restart; writes are marked interrupted."""

from __future__ import annotations

from typing import Any, Mapping

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool, ToolContext, ToolError

WHOLE_FILE_CHARS = 48 * 1024  # a longer file is shown from its start with a pointer to line ranges
PATH_HELP = (
    "Paths: relative or ~/… is your home folder; user-memory/… your private notes; shared-memory/… shared notes;"
    " shared/<name>/… and projects/<owner>/<name>/… folders you belong to; any other absolute path is inside your sandbox."
)


def _text(args: Mapping[str, Any], name: str, *, required: bool = True, empty: bool = False) -> str:
    value = args.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (not empty and not value):
        raise ToolError(f"'{name}' must be {'text' if empty else 'non-empty text'}")
    return value


def _int(args: Mapping[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"'{name}' must be a whole number of at least 1")
    return value


async def _files(ctx: ToolContext) -> Any:
    return await ctx.host.member_files(ctx.member_id)


#: Where text from outside lies: folders other members write in too, and the member's
#: uploads (documents from anywhere, as an attachment is). What a read there returns is
#: outside text (check E2).
OUTSIDE_PREFIXES = ("shared/", "projects/", "uploads/", "shared-memory/")


def _outside(agent_path: str) -> bool:
    return agent_path in ("shared", "projects", "uploads", "shared-memory") or agent_path.startswith(OUTSIDE_PREFIXES)


async def _mark_if_outside(ctx: ToolContext, files: Any, path: str, found: list[str] = ()) -> None:
    """A read of a shared folder, a project, an upload or the shared notes (or one that
    found files there): its result may carry another member's words, so the turn's side-effecting
    calls ask first from now on (``ToolContext.mark_untrusted``)."""
    try:
        agent_path = (await files.resolve(path)).agent_path
    except Exception:  # the read itself said what was wrong; nothing was read
        agent_path = ""
    # A home listing shows the bare ``shared``/``projects`` entries: names only it has.
    hit = agent_path if _outside(agent_path) else next((name for name in found if name.startswith(OUTSIDE_PREFIXES)), None)
    if hit:
        ctx.mark_untrusted(hit)


async def read_file(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = _text(args, "path")
    start, end = _int(args, "start_line"), _int(args, "end_line")
    if start and end and end < start:
        raise ToolError("'end_line' must not be before 'start_line'")
    files = await _files(ctx)
    await _mark_if_outside(ctx, files, path)
    if start is None and end is None:
        text = await files.read_text(path)
        if not text:
            return f"{path} is empty."
        if len(text) <= WHOLE_FILE_CHARS:
            return text
        lines = text.splitlines()
        head, shown = [], 0
        for line in lines:
            if shown + len(line) + 1 > WHOLE_FILE_CHARS:
                break
            head.append(line)
            shown += len(line) + 1
        return "\n".join(head) + (
            f"\n[{path} has {len(lines)} lines; this is lines 1-{len(head)}. Read more with start_line/end_line.]"
        )
    first = start or 1
    lines, total = await files.read_lines(path, first, end)
    if not lines:
        return f"{path} has only {total} lines." if total is not None else f"{path} has fewer than {first} lines."
    last = first + len(lines) - 1
    of = f" of {total}" if total is not None else ""
    more = "" if total is not None and last >= total or end is not None and last >= end else " (the rest did not fit; continue from the next line)"
    return f"{path}, lines {first}-{last}{of}{more}:\n" + "\n".join(lines)


async def write_file(args: Mapping[str, Any], ctx: ToolContext) -> str:
    return await (await _files(ctx)).write_text(_text(args, "path"), _text(args, "content", empty=True))


async def edit_file(args: Mapping[str, Any], ctx: ToolContext) -> str:
    replace_all = args.get("all", False)
    if not isinstance(replace_all, bool):
        raise ToolError("'all' must be true or false")
    return await (await _files(ctx)).edit(
        _text(args, "path"), _text(args, "old_text"), _text(args, "new_text", empty=True), replace_all=replace_all
    )


async def list_files(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = _text(args, "path", required=False) or "."
    recursive = args.get("recursive", False)
    if not isinstance(recursive, bool):
        raise ToolError("'recursive' must be true or false")
    files = await _files(ctx)
    entries = await files.list(path, recursive=recursive)
    await _mark_if_outside(ctx, files, path, [entry["path"] for entry in entries])
    if not entries:
        return f"{path} is empty."
    lines = []
    for entry in entries:
        suffix = "/" if entry["is_dir"] else ""
        detail = " (read-only)" if entry.get("read_only") else ("" if entry["size"] is None else f" ({entry['size']} bytes)")
        if entry.get("symlink"):
            detail = " (symbolic link)"
        lines.append(f"{entry['path']}{suffix}{detail}")
    return "\n".join(lines)


async def search_file(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = _text(args, "path")
    ignore_case = bool(args.get("ignore_case", False))
    files = await _files(ctx)
    hits = await files.search_file(path, _text(args, "text"), ignore_case=ignore_case)
    await _mark_if_outside(ctx, files, path)
    if not hits:
        return f"No line of {path} contains that text."
    return "\n".join(f"{n}: {line}" for n, line in hits)


async def grep_files(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = _text(args, "path", required=False) or "."
    glob = _text(args, "glob", required=False) or None
    files = await _files(ctx)
    matches, capped = await files.grep(
        _text(args, "pattern"), path, glob=glob, ignore_case=bool(args.get("ignore_case", False))
    )
    await _mark_if_outside(ctx, files, path, [name for name, _, _ in matches])
    if not matches:
        return "No matches." + (" (the search stopped at its file limit)" if capped else "")
    text = "\n".join(f"{name}:{n}: {line}" for name, n, line in matches)
    return text + ("\n[stopped at the match or file limit; narrow the path, glob or pattern]" if capped else "")


async def show_file_to_user(args: Mapping[str, Any], ctx: ToolContext) -> str:
    """The member sees the file in the chat: a note naming its agent path, which the
    chat renders as a preview opened through ``/api/file``."""
    path = _text(args, "path")
    files = await _files(ctx)
    blob = await files.read_blob(path)  # fails clearly if it does not exist or is refused
    resolved = await files.resolve(path)
    assert ctx.turn is not None
    await ctx.turn.notify(f"\U0001f4ce {resolved.agent_path}")
    return f"Shown to the member: {resolved.agent_path} ({blob.mime}, {blob.size} bytes)."


_PATH = {"type": "string", "description": "an agent path, e.g. notes.txt, ~/docs/a.md, user-memory/x.md, shared/team/plan.md"}

TOOLS = (
    Tool(
        "read_file",
        "Read a text file or note. Optional start_line/end_line read part of a long file. " + PATH_HELP,
        {
            "type": "object",
            "properties": {"path": _PATH, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}},
            "required": ["path"],
        },
        read_file,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "write_file",
        "Create or replace a file (folders are created as needed). " + PATH_HELP,
        {"type": "object", "properties": {"path": _PATH, "content": {"type": "string"}}, "required": ["path", "content"]},
        write_file,
        restart="mark_interrupted",
    ),
    Tool(
        "edit_file",
        "Replace exact text in a file: old_text must occur exactly once, unless all is true.",
        {
            "type": "object",
            "properties": {
                "path": _PATH,
                "old_text": {"type": "string"},
                "new_text": {"type": "string"},
                "all": {"type": "boolean"},
            },
            "required": ["path", "old_text", "new_text"],
        },
        edit_file,
        restart="mark_interrupted",
    ),
    Tool(
        "list_files",
        "List a folder (one level, or recursive). Without a path: your home folder. " + PATH_HELP,
        {"type": "object", "properties": {"path": _PATH, "recursive": {"type": "boolean"}}},
        list_files,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "search_file",
        "Show the lines of one file that contain a text, with line numbers.",
        {
            "type": "object",
            "properties": {"path": _PATH, "text": {"type": "string"}, "ignore_case": {"type": "boolean"}},
            "required": ["path", "text"],
        },
        search_file,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "grep_files",
        "Search files under a folder with a regular expression (files on disk; notes are searched with memory_search)."
        " Optional glob filters file names, e.g. *.py.",
        {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": _PATH,
                "glob": {"type": "string"},
                "ignore_case": {"type": "boolean"},
            },
            "required": ["pattern"],
        },
        grep_files,
        concurrency_safe=True,
        restart="rerun",
    ),
    Tool(
        "show_file_to_user",
        "Show a file (an image, a document, a note) to the member in the chat.",
        {"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
        show_file_to_user,
        concurrency_safe=True,
        restart="mark_interrupted",
    ),
)


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="fs-tools",
        title="File tools",
        description="Read, write, edit, list and search the member's files and notes; show a file in the chat.",
        icon="folder",
        spec=">=1.0,<2",
    )


@hookimpl
def register_tools(register) -> None:
    for tool in TOOLS:
        register(tool)

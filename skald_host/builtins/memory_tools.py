"""``memory_search``: ranked full-text recall over the member's notes (seed 001 "Memory
namespace"). Notes are read and written with the fs tools under ``user-memory/…`` and
``shared-memory/…``; this tool finds them by meaning-bearing words, which a regex over
a tree (``grep_files``) does not. It takes a query, not a path, so one path-less rule
allows it: it only reads, and the shared pool only when the member may read it."""

from __future__ import annotations

from typing import Any, Mapping

from skald_hookspecs import hookimpl
from skald_hookspecs.types import PluginInfo, Tool, ToolContext, ToolError

DEFAULT_RESULTS = 8
MAX_RESULTS = 20


async def memory_search(args: Mapping[str, Any], ctx: ToolContext) -> str:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError("'query' must be non-empty text: the words to look for")
    limit = args.get("limit", DEFAULT_RESULTS)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
        raise ToolError(f"'limit' must be a whole number from 1 to {MAX_RESULTS}")
    hits = await ctx.host.memory().search(ctx.member_id, query, limit)
    shared = next((hit.path for hit in hits if hit.path.startswith("shared-memory/")), None)
    if shared is not None:  # a shared note's words may be another member's (check E2)
        ctx.mark_untrusted(shared)
    if not hits:
        return f"No memory note has all of {query.strip()!r}; try fewer or other words."
    lines = [f"{len(hits)} note(s), best match first (read one with read_file):"]
    lines += [f"- {hit.path}: {' '.join(hit.snippet.split())}" for hit in hits]
    return "\n".join(lines)


TOOLS = (
    Tool(
        "memory_search",
        "Search your memory notes (user-memory/ and, where you may, shared-memory/) by words;"
        " results are ranked, best first, each with its path and a snippet.",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "words a note must all contain (a word also matches longer words it starts)"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS},
            },
            "required": ["query"],
        },
        memory_search,
        concurrency_safe=True,
        restart="rerun",
    ),
)


@hookimpl
def plugin_info() -> PluginInfo:
    return PluginInfo(
        id="memory-tools",
        title="Memory search",
        description="Ranked search over the member's private and shared memory notes.",
        icon="tool",
        spec=">=1.0,<2",
    )


@hookimpl
def register_tools(register) -> None:
    for tool in TOOLS:
        register(tool)

"""The tools a turn may offer: every ``register_tools`` contribution, stamped with
its plugin. Offered to a member only while that plugin is usable by them (enabled and
granted; the host's own tools to everyone), while their role holds the tool's
capability if it has one (the host's tools that act on the world), and only if the
agent offers the name."""

from __future__ import annotations

import functools
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Callable

from skald_hookspecs.types import Tool
from skald_host.core.identity.access import GRANTABLE, HOST_TOOL_CAPABILITIES
from skald_host.core.llm.client import wire_json
from skald_host.core.plugins.failures import PLUGIN_EXITS, record_failure
from skald_host.core.plugins.manager import PluginError

log = logging.getLogger(__name__)

MAX_TOOL_NAME = 64


@dataclass(frozen=True)
class RegisteredTool:
    plugin_id: str
    tool: Tool
    #: The capability the member's role must hold to use it, besides the plugin being
    #: usable (``HOST_TOOL_CAPABILITIES``: the host's own tools that act on the world).
    capability: str | None = None

    @property
    def name(self) -> str:
        return self.tool.name

    @functools.cached_property
    def wire(self) -> dict[str, Any]:
        """The tool as a request offers it: built once, since every round of every turn
        sends it. Shared by those requests, so it is never modified."""
        return {
            "type": "function",
            "function": {"name": self.tool.name, "description": self.tool.description, "parameters": dict(self.tool.parameters)},
        }

    @functools.cached_property
    def wire_json(self) -> bytes:
        """``wire`` as a request body carries it, encoded once as well."""
        return wire_json(self.wire)


def validate_tool(plugin_id: str, args: tuple[Any, ...]) -> Tool:
    if len(args) != 1 or not isinstance(args[0], Tool):
        raise PluginError("register() expects one Tool")
    tool = args[0]
    if not tool.name or len(tool.name) > MAX_TOOL_NAME or not tool.name.replace("_", "").replace("-", "").isalnum():
        raise PluginError(f"tool name {tool.name!r} must be 1-{MAX_TOOL_NAME} letters, digits, '_' or '-'")
    if not isinstance(tool.parameters, dict) or tool.parameters.get("type") != "object":
        raise PluginError(f"tool {tool.name!r}: parameters must be a JSON schema object")
    if not _is_async_callable(tool.run):
        raise PluginError(f"tool {tool.name!r}: run must be an async callable (async def)")
    if tool.restart not in ("rerun", "mark_interrupted"):
        raise PluginError(f"tool {tool.name!r}: restart must be 'rerun' or 'mark_interrupted'")
    if getattr(tool, "capability", None) is not None and tool.capability not in GRANTABLE:
        raise PluginError(f"tool {tool.name!r}: capability must be one a role can hold ({', '.join(sorted(GRANTABLE))})")
    return tool


def _is_async_callable(run: Any) -> bool:
    """Whether calling ``run`` gives something to await: refused at registration, a
    plain ``def`` would only fail at its first call, with a TypeError nobody can read.
    An object (a ``functools.partial``'s as well) is asked about its ``__call__``."""
    while isinstance(run, functools.partial):
        run = run.func
    return inspect.iscoroutinefunction(run) or inspect.iscoroutinefunction(getattr(run, "__call__", None))


class ToolRegistry:
    def __init__(self, contributions: list[Any], builtin: Callable[[str], bool] = lambda plugin_id: False, plugins: Any = None) -> None:
        """``builtin(plugin_id)``: whether a plugin is the host's own, whose tools may
        need a capability (a plugin's tool of the same name is gated by its grant).
        ``plugins``: the plugin manager, asked for the member_tools hook."""
        self._tools = {
            c.value.name: RegisteredTool(
                c.plugin_id, c.value, (HOST_TOOL_CAPABILITIES.get(c.value.name) if builtin(c.plugin_id) else None) or c.value.capability
            )
            for c in contributions
        }
        self._by_name = sorted(self._tools.values(), key=lambda t: t.name)  # asked for in every round
        self._plugins = plugins
        #: (plugin id, tool name) -> the last RegisteredTool built for a member tool,
        #: reused while the plugin hands back the same Tool (its wire stays encoded).
        self._member_cache: dict[tuple[str, str], RegisteredTool] = {}
        #: The plugins whose member_tools last returned something other than a list: told
        #: once on their page, not in every round, until they return a list again.
        self._misshapen: set[str] = set()
        #: What was wrong with the items of each plugin's last list (``_refuse_items``).
        self._refused_items: dict[str, tuple[str, ...]] = {}

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def all(self) -> list[RegisteredTool]:
        return list(self._by_name)

    # -- the member_tools hook (spec 1.2): tools that differ per member and change at runtime --

    def member_tools(self, member_id: str, usable: Callable[[str], bool]) -> list[RegisteredTool]:
        """What the plugins the member may use (``usable(plugin_id)``) offer this member
        now, through ``member_tools``. Asked in every round and before a call runs, so a
        tool a plugin withdraws is gone at once. A plugin that raises or returns
        something invalid contributes nothing this round (on its page); a name already
        taken by a fixed tool, or by an earlier plugin, is dropped."""
        if self._plugins is None:
            return []
        out: list[RegisteredTool] = []
        seen: set[str] = set()
        for plugin_id in self._plugins.implementers("member_tools"):
            if not usable(plugin_id):
                continue
            try:
                results = self._plugins.call_now("member_tools", plugin_id, member_id=member_id)
            except (Exception, *PLUGIN_EXITS) as exc:  # its message may quote the member's data: withheld
                record_failure(self._plugins, plugin_id, "hook member_tools", exc)
                continue
            for result in results:
                if result is not None and not isinstance(result, (list, tuple)):
                    self._refuse_shape(plugin_id, result)
                    continue
                self._misshapen.discard(plugin_id)
                not_tools: list[str] = []  # the type names of items that are no Tool
                unusable: list[str] = []  # why a Tool among them cannot be offered
                for tool in result or ():
                    if not isinstance(tool, Tool):  # validate_tool's "register() expects one Tool": no register() was called
                        not_tools.append(type(tool).__name__)
                        continue
                    try:
                        validate_tool(plugin_id, (tool,))
                    except PluginError as exc:
                        unusable.append(str(exc))
                        continue
                    if tool.name in self._tools or tool.name in seen:
                        log.warning("plugin %s: member tool %r clashes with another tool; dropped", plugin_id, tool.name)
                        continue
                    seen.add(tool.name)
                    cached = self._member_cache.get((plugin_id, tool.name))
                    if cached is None or cached.tool is not tool:
                        # The tool's own capability (spec 1.13), asked as each round
                        # offers it and as each call starts (``catalog.tool_refusal``).
                        cached = self._member_cache[(plugin_id, tool.name)] = RegisteredTool(plugin_id, tool, tool.capability)
                    out.append(cached)
                self._refuse_items(plugin_id, not_tools, unusable)
        out.sort(key=lambda t: t.name)
        return out

    def _refuse_items(self, plugin_id: str, not_tools: list[str], unusable: list[str]) -> None:
        """Items of the returned list that are no usable Tool: left out, and said once on
        the plugin's page and in the log, naming the hook (a line in every round named
        ``register()``, which the plugin never called, and its page showed nothing).
        Told again when what is wrong changes; forgotten once every item is a tool."""
        told = tuple(dict.fromkeys(not_tools)) + tuple(unusable)
        if not told:
            self._refused_items.pop(plugin_id, None)
            return
        if self._refused_items.get(plugin_id) == told:
            return
        self._refused_items[plugin_id] = told
        holding = [f"{', '.join(dict.fromkeys(not_tools))} where only Tool objects belong"] if not_tools else []
        holding += [f"a tool it cannot offer ({why})" for why in unusable]
        wrong = PluginError(f"member_tools returned a list holding {'; '.join(holding)}; those items were left out")
        record_failure(self._plugins, plugin_id, "hook member_tools", wrong, say=True)

    def _refuse_shape(self, plugin_id: str, result: Any) -> None:
        """A result that is not a list would be iterated item by item (a string letter
        by letter), each refused on its own: one clear line instead, once."""
        if inspect.iscoroutine(result):
            result.close()  # an ``async def member_tools``: closed, so Python does not also warn it was never awaited
        if plugin_id in self._misshapen:
            return
        self._misshapen.add(plugin_id)
        hint = " (member_tools must be a plain def)" if inspect.iscoroutine(result) else ""
        wrong = PluginError(f"member_tools returned {type(result).__name__}; expected a list of Tool{hint}")
        record_failure(self._plugins, plugin_id, "hook member_tools", wrong, say=True)

"""Agent definitions: a directory per agent with ``AGENT.md`` (the prompt) and
``meta.yaml`` (what it may use). Discovered from the host's ``agents/`` and from the
directories plugins register; read on use, so a prompt edit needs no restart.

meta.yaml::

    title: Assistant
    description: what list_agents shows
    kind: chat            # chat: a member's entry agent; task: callable by execute_task;
                          # project: the entry agent of a project chat, started from a project only
                          # system: a system agent's pass, started by the host's scheduler only
    allow_tools: true     # false: a tool-less agent; its requests carry no tools at all
    tools: ["*"]          # names or fnmatch patterns of the tools offered
    model: null           # pin a model (name or id); else chosen by strength
    strength: 50
    inject_memory: []     # memory files injected into the system prompt
    # Named sub-agents (seed 004 §2.1), for kind: task:
    id: researcher        # optional; must equal the folder's name
    provider: null        # with model: an inline provider+model pair (both or neither)
    delegates: [coder]    # absent: general-purpose only; []: none; ["*"]: any but itself
    skills: []            # the skills (skills/<name>.md of an agent directory) its get_skill may read
    limits: {timeout_secs: 900, max_iterations: 24, max_result_chars: 16000}
    signal: {delivery: queue}   # optional: the run may call emit_signal (subagents.signals)
    enabled: true         # false: kept on disk, shown to the admin, not delegated to

A definition with an unknown key is refused; the fail-closed checks of a whole
generation (symlinks, sizes, unknown tools or delegate targets) are in
``subagents.catalog``.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import logging
import re
import time
import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from skald_hookspecs.types import ToolError

log = logging.getLogger(__name__)

# The repository's agents/, shipped inside the package (skald_host/_shipped/agents links to it).
HOST_AGENTS = (Path(__file__).resolve().parents[2] / "_shipped" / "agents").resolve()
_AGENT_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
KNOWN_KEYS = frozenset({
    "title", "description", "kind", "allow_tools", "tools", "model", "strength", "inject_memory",
    "id", "provider", "delegates", "skills", "limits", "signal", "enabled",
})
LIMIT_KEYS = frozenset({"timeout_secs", "max_iterations", "max_result_chars"})
#: The folder of an agent directory that holds skills (``skills/<name>.md``), never
#: an agent (seed 004 §2.1; loaded with the definitions by ``subagents.catalog``).
SKILLS_FOLDER = "skills"


class AgentError(LookupError, ToolError):  # a ToolError: its message is fit for the model when a tool lets it through
    """An agent that cannot run; the message in English (the model, the log). With a
    ``code``, a turn it ends is worded in the member's language (``error.<code>`` with
    ``values``), live and after a reload."""

    def __init__(self, message: str = "", *, code: str | None = None, values: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.values = values or {}


@dataclass(frozen=True)
class AgentDefinition:
    id: str
    title: str
    description: str
    kind: str
    allow_tools: bool
    tools: tuple[str, ...]
    model: str | None
    strength: int | None
    inject_memory: tuple[str, ...]
    prompt: str
    directory: Path
    provider: str | None = None
    #: None: the field is absent (general-purpose only); () none; ("*",) any but itself.
    delegates: tuple[str, ...] | None = None
    skills: tuple[str, ...] = ()
    limits: "Mapping[str, int]" = dataclasses.field(default_factory=dict)
    signal: "Mapping[str, Any] | None" = None
    enabled: bool = True
    #: SHA-256 of the canonical metadata and the prompt: stored with every run, so a
    #: run says which version of the definition it ran (seed 004 §2.1).
    definition_hash: str = ""

    def offers(self, tool_name: str) -> bool:
        return self.allow_tools and _matches(self.tools, tool_name)

    def summary(self, strings: Any = None, locale: str | None = None, *, plugin: str | None = None) -> dict[str, Any]:
        """With ``strings``: the shipped agents' title and description in ``locale``,
        while their files still say the English the project shipped. ``plugin``: the
        plugin that registered the definition's folder (``register_agent_dirs``), whose
        own bundle is asked first (``<plugin>.agent.<id>.title`` / ``.description``);
        then the host's (``core.agent.<id>.*``)."""
        title, description = self.title, self.description
        if strings is not None:
            for domain in ([plugin] if plugin else []) + ["core"]:
                title = strings.shipped(f"{domain}.agent.{self.id}.title", title, locale)
                description = strings.shipped(f"{domain}.agent.{self.id}.description", description, locale)
        return {"id": self.id, "title": title, "description": description, "kind": self.kind}


@functools.lru_cache(maxsize=4096)
def _matches(patterns: tuple[str, ...], name: str) -> bool:
    """Asked for every registered tool in every round; the answer never changes."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


#: How long a looked-up agent is used without looking at its files again: an edit is
#: picked up within this, with no restart.
FRESH_SECONDS = 1.0
_RECENT: dict[tuple[Any, str], tuple[float, AgentDefinition]] = {}
_RECENT_ALL: dict[tuple[Any, ...], tuple[float, list[AgentDefinition]]] = {}


def _load(directory: Path) -> AgentDefinition:
    """Parsed once per version of the files: an edit (a new mtime) is a new version."""
    meta_path, prompt_path = directory / "meta.yaml", directory / "AGENT.md"
    return _parse(directory, meta_path.stat().st_mtime_ns, prompt_path.stat().st_mtime_ns)


def _with_suggestion(key: str) -> str:
    """An unknown key with the known one it is most likely a typo of: ``allow_tool``
    is one letter from working, and the message should say which."""
    close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
    return f"{key} (did you mean {close[0]!r}?)" if close else key


@functools.lru_cache(maxsize=256)
def _parse(directory: Path, _meta_version: int, _prompt_version: int) -> AgentDefinition:
    meta_path, prompt_path = directory / "meta.yaml", directory / "AGENT.md"
    meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
    if not isinstance(meta, dict):
        raise AgentError(f"{meta_path}: expected a mapping")
    unknown = set(meta) - KNOWN_KEYS
    if unknown:
        raise AgentError(f"{meta_path}: unknown key(s) {', '.join(_with_suggestion(str(key)) for key in sorted(unknown, key=str))}")
    kind = meta.get("kind", "task")
    if kind not in ("chat", "task", "project", "system"):
        raise AgentError(f"{meta_path}: kind must be chat, task, project or system")
    tools = meta.get("tools", ["*"])
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise AgentError(f"{meta_path}: tools must be a list of names")
    if "id" in meta and meta["id"] != directory.name:
        raise AgentError(f"{meta_path}: id {meta['id']!r} does not match its folder {directory.name!r}")
    if bool(meta.get("provider")) and not meta.get("model"):
        raise AgentError(f"{meta_path}: provider and model come as a pair: provider without model")
    delegates = meta.get("delegates")
    if delegates is not None and (not isinstance(delegates, list) or not all(isinstance(d, str) for d in delegates)):
        raise AgentError(f"{meta_path}: delegates must be a list of agent ids")
    skills = meta.get("skills") or []
    if not isinstance(skills, list) or not all(isinstance(k, str) for k in skills):
        raise AgentError(f"{meta_path}: skills must be a list of names")
    limits = {} if meta.get("limits") is None else meta["limits"]  # "limits: 0" is not "no limits"
    if not isinstance(limits, dict) or set(limits) - LIMIT_KEYS:
        raise AgentError(f"{meta_path}: limits may hold only {', '.join(sorted(LIMIT_KEYS))}")
    for key in sorted(limits):
        value = limits[key]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            # Named, with what was written: "limits must be positive" left the author to
            # guess which of three fields was wrong.
            raise AgentError(f"{meta_path}: limits must be positive whole numbers: limits.{key} is {value!r}")
    signal = meta.get("signal")
    if signal is not None and not isinstance(signal, dict):
        raise AgentError(f"{meta_path}: signal must be a mapping")
    enabled = meta.get("enabled", True)
    if not isinstance(enabled, bool):
        raise AgentError(f"{meta_path}: enabled must be true or false")
    prompt = prompt_path.read_text(encoding="utf-8")
    canonical = json.dumps(meta, sort_keys=True, separators=(",", ":"), default=str)
    return AgentDefinition(
        id=directory.name,
        title=str(meta.get("title") or directory.name),
        description=str(meta.get("description") or ""),
        kind=kind,
        allow_tools=bool(meta.get("allow_tools", True)),
        tools=tuple(tools),
        model=meta.get("model") or None,
        strength=meta.get("strength"),
        inject_memory=tuple(meta.get("inject_memory") or ()),
        prompt=prompt,
        directory=directory,
        provider=meta.get("provider") or None,
        delegates=None if delegates is None else tuple(delegates),
        skills=tuple(skills),
        limits=dict(limits),
        signal=dict(signal) if signal is not None else None,
        enabled=enabled,
        definition_hash=hashlib.sha256(f"{canonical}\n---\n{prompt}".encode()).hexdigest(),
    )


class AgentCatalog:
    """Agent directories: the host's own, and each plugin's (stamped with the plugin,
    so a plugin's agents reach a member only while that member may use the plugin)."""

    def __init__(self, directories: Iterable[Path] = (HOST_AGENTS,)) -> None:
        self.sources: list[tuple[Path, str | None]] = [(d, None) for d in directories]

    def add_directory(self, path: Path, plugin_id: str | None = None) -> None:
        self.sources.append((path, plugin_id))

    def visible_to(self, usable: Callable[[str], bool]) -> "AgentCatalog":
        """The catalog as one member sees it: ``usable(plugin_id)`` decides plugins'."""
        view = AgentCatalog(())
        view.sources = [(path, owner) for path, owner in self.sources if owner is None or usable(owner)]
        return view

    def owner(self, definition: AgentDefinition) -> str | None:
        """The plugin whose folder ``definition`` came from, None for the host's own."""
        for root, plugin_id in reversed(self.sources):
            if definition.directory.parent == root:
                return plugin_id
        return None

    @property
    def directories(self) -> list[Path]:
        return [path for path, _ in self.sources]

    def _find(self, agent_id: str) -> Path | None:
        if not _AGENT_ID.match(agent_id) or agent_id == SKILLS_FOLDER:
            return None
        for root in reversed(self.directories):  # later (plugin) directories may override
            candidate = root / agent_id
            if (candidate / "AGENT.md").is_file() and (candidate / "meta.yaml").is_file():
                return candidate
        return None

    def get(self, agent_id: str) -> AgentDefinition:
        """The agent, looked up on disk at most once a second per catalog view (a turn
        asks several times; each look is a few stat calls per directory)."""
        key = (tuple(self.sources), agent_id)
        now = time.monotonic()
        recent = _RECENT.get(key)
        if recent is not None and recent[0] > now:
            return recent[1]
        directory = self._find(agent_id)
        if directory is None:
            raise AgentError(f"no agent named {agent_id!r}")
        definition = _load(directory)
        if len(_RECENT) >= 1024:
            _RECENT.clear()
        _RECENT[key] = (now + FRESH_SECONDS, definition)
        return definition

    def all(self) -> list[AgentDefinition]:
        """Every agent of the view, listed on disk at most once a second, like ``get``
        (``list_agents`` runs in tool rounds; a listing is a directory walk)."""
        key = tuple(self.sources)
        now = time.monotonic()
        recent = _RECENT_ALL.get(key)
        if recent is not None and recent[0] > now:
            return list(recent[1])
        seen: dict[str, AgentDefinition] = {}
        for root in self.directories:
            if not root.is_dir():
                continue
            for directory in sorted(root.iterdir()):
                if directory.name in seen or not self._find(directory.name):
                    continue
                try:
                    seen[directory.name] = self.get(directory.name)
                except (AgentError, OSError, yaml.YAMLError) as exc:
                    log.error("agent %s cannot be loaded: %s", directory.name, exc)
        listed = sorted(seen.values(), key=lambda a: a.id)
        if len(_RECENT_ALL) >= 1024:
            _RECENT_ALL.clear()
        _RECENT_ALL[key] = (now + FRESH_SECONDS, listed)
        return list(listed)

    def task_agents(self) -> list[AgentDefinition]:
        return [a for a in self.all() if a.kind == "task" and a.enabled]

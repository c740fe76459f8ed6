"""Definition generations (seed 004 §2.2): every agent definition the host and its
plugins ship, loaded together, checked together, and used as one immutable value.

A generation with one bad definition is refused whole: the last good generation stays
in use (hot reload never widens nor narrows what agents may do by half), and the
reasons are kept for the admin's definitions page. Nothing is delegated before a first
generation loaded: a host that cannot read its definitions fails closed.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from skald_host.core.agent.definitions import _AGENT_ID, SKILLS_FOLDER, AgentCatalog, AgentDefinition, AgentError, _parse
from skald_host.core.agent.subagents.limits import GENERAL_PURPOSE, RESERVED_IDS, OrchestrationLimits

log = logging.getLogger(__name__)

SEVERITIES = ("info", "warning", "critical")
SIGNAL_DEFAULTS: dict[str, Any] = {
    "delivery": "queue",
    "max_signals": 8,
    "max_summary_chars": 280,
    "max_key_chars": 64,
    "max_payload_bytes": 4096,
    "max_payload_depth": 4,
    "min_interval_secs": 0,
    "burst": 3,
    "severities": list(SEVERITIES),
    "cooldown_secs": 60,
}
#: How often the files are looked at again for a new generation.
FRESH_SECONDS = 1.0
_WILDCARDS = set("*?[")


_SKILL_KEYS = frozenset({"description"})


@dataclass(frozen=True)
class Skill:
    """A named text an agent reads when its task calls for it (seed 004 §2.1: a
    definition's ``skills`` scope its ``get_skill``): ``skills/<name>.md`` in an agent
    directory, with an optional front matter holding its ``description``."""

    name: str
    description: str
    text: str
    path: Path


class GenerationRefused(AgentError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


#: What a member and the model read when no generation could be loaded: the reasons
#: name files on the server, for the admin alone (the Helpers page, the log, the
#: status' warning). As a tool's result it is ``store.HOST_RESULTS["definitions_refused"]``.
DEFINITIONS_REFUSED = "the helper definitions were refused; an admin can see why on the Helpers page."


class DefinitionsUnavailable(GenerationRefused):
    """``SubagentCatalog.current`` with no good generation: its message is neutral (an
    AgentError is a ToolError, so a tool's result and the member's chat show it), its
    ``code`` words it in the reader's language; ``errors`` keep the reasons."""

    def __init__(self, errors: list[str]) -> None:
        AgentError.__init__(self, DEFINITIONS_REFUSED, code="definitions_refused")
        self.errors = errors


@dataclass(frozen=True)
class Generation:
    """One loaded, checked set of definitions. ``owners`` maps an id to the plugin that
    ships it (None: the host)."""

    definitions: Mapping[str, AgentDefinition]
    owners: Mapping[str, str | None]
    fingerprint: tuple[Any, ...] = ()
    loaded_at: float = field(default_factory=time.time)
    skills: Mapping[str, Skill] = field(default_factory=dict)
    skill_owners: Mapping[str, str | None] = field(default_factory=dict)

    def active(self, agent_id: str) -> AgentDefinition | None:
        definition = self.definitions.get(agent_id)
        return definition if definition is not None and definition.enabled and definition.kind == "task" else None

    def task_agents(self) -> list[AgentDefinition]:
        return sorted((d for d in self.definitions.values() if d.enabled and d.kind == "task"), key=lambda d: d.id)

    def visible(self, usable: Callable[[str], bool]) -> "Generation":
        """The generation as one member sees it: a plugin's definitions only while the
        member may use the plugin."""
        keep = {i: d for i, d in self.definitions.items() if self.owners.get(i) is None or usable(self.owners[i])}  # type: ignore[arg-type]
        skills = {n: k for n, k in self.skills.items() if self.skill_owners.get(n) is None or usable(self.skill_owners[n])}  # type: ignore[arg-type]
        return Generation(
            keep, {i: self.owners.get(i) for i in keep}, self.fingerprint, self.loaded_at, skills, {n: self.skill_owners.get(n) for n in skills},
        )

    def skills_of(self, agent: AgentDefinition) -> list[Skill]:
        """The skills ``agent`` may read, in the order its definition names them."""
        return [self.skills[name] for name in agent.skills if name in self.skills]


def signal_contract(raw: Mapping[str, Any] | None, where: str) -> dict[str, Any] | None:
    """A definition's ``signal`` block with every bound filled in; unknown keys and
    values out of range are refused (fail closed)."""
    if raw is None:
        return None
    unknown = set(raw) - set(SIGNAL_DEFAULTS)
    if unknown:
        raise AgentError(f"{where}: unknown signal key(s) {', '.join(sorted(unknown))}")
    contract = {**SIGNAL_DEFAULTS, **raw}
    if contract["delivery"] not in ("queue", "steer"):
        raise AgentError(f"{where}: signal.delivery must be queue or steer")
    for key in ("max_signals", "max_summary_chars", "max_key_chars", "max_payload_bytes", "max_payload_depth", "burst"):
        value = contract[key]
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 1_000_000:
            raise AgentError(f"{where}: signal.{key} must be a positive whole number")
    for key in ("min_interval_secs", "cooldown_secs"):
        value = contract[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise AgentError(f"{where}: signal.{key} must be a number of seconds")
    severities = contract["severities"]
    if not isinstance(severities, list) or not severities or not set(severities) <= set(SEVERITIES):
        raise AgentError(f"{where}: signal.severities must be a non-empty list of {', '.join(SEVERITIES)}")
    return contract


def _regular_file(path: Path, limit: int, errors: list[str]) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        errors.append(f"{path}: a symbolic link is not a definition (copy the file)")
        return False
    if not stat.S_ISREG(info.st_mode):
        errors.append(f"{path}: not a regular file")
        return False
    if info.st_size > limit:
        errors.append(f"{path}: {info.st_size} bytes, more than the {limit} a definition file may have")
        return False
    return True


def _load_skills(folder: Path, limits: OrchestrationLimits, errors: list[str]) -> dict[str, Skill]:
    """Every ``<name>.md`` of one agent directory's ``skills/`` folder, checked as
    strictly as a definition: plain files, bounded sizes, known front matter keys."""
    found: dict[str, Skill] = {}
    if folder.is_symlink():
        errors.append(f"{folder}: a symbolic link is not a skills folder")
        return found
    if not folder.is_dir():
        return found
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.suffix != ".md":
            continue
        if not _regular_file(path, limits.max_definition_bytes, errors):
            continue
        name = path.stem
        if not _AGENT_ID.match(name) or not name[0].isalpha():
            errors.append(f"{path}: a skill's name starts with a lowercase letter and has at most 64 of a-z, 0-9, _ and -")
            continue
        try:
            raw = path.read_text(encoding="utf-8").replace("\r\n", "\n")  # a file saved on Windows has front matter too
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(f"{path}: {exc}")
            continue
        description, text = "", raw
        if raw.startswith("---\n"):
            head, marker, body = raw[4:].partition("\n---\n")
            if not marker:
                errors.append(f"{path}: the front matter has no closing ---")
                continue
            try:
                meta = yaml.safe_load(head) or {}
            except yaml.YAMLError as exc:
                errors.append(f"{path}: {exc}")
                continue
            if not isinstance(meta, dict) or set(meta) - _SKILL_KEYS:
                errors.append(f"{path}: a skill's front matter may hold only {', '.join(sorted(_SKILL_KEYS))}")
                continue
            description, text = str(meta.get("description") or ""), body
        if not text.strip():
            errors.append(f"{path}: the skill is empty")
            continue
        if len(text) > limits.max_prompt_chars:
            errors.append(f"{path}: the skill has more than {limits.max_prompt_chars} characters")
            continue
        found[name] = Skill(name, " ".join(description.split()), text.strip(), path)
    return found


def fingerprint(sources: Iterable[tuple[Path, str | None]]) -> tuple[Any, ...]:
    """What changes when any definition file changes: names, sizes, mtimes."""
    seen: list[Any] = []
    for root, owner in sources:
        try:
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError:
            seen.append((str(root), None))
            continue
        for entry in entries:
            item: list[Any] = [str(root), owner, entry.name, entry.is_symlink()]
            names = ["meta.yaml", "AGENT.md"]
            if entry.name == SKILLS_FOLDER:
                try:
                    names = sorted(os.listdir(entry.path))
                except OSError:
                    names = []
            for name in names:
                try:
                    info = os.lstat(os.path.join(entry.path, name))
                    item.append((name, info.st_mtime_ns, info.st_size, info.st_mode))
                except OSError:
                    item.append((name, None))
            seen.append(tuple(item))
    return tuple(seen)


def load_generation(
    sources: Iterable[tuple[Path, str | None]], tool_names: Iterable[str], limits: OrchestrationLimits = OrchestrationLimits(),
    known_models: Iterable[tuple[str, str]] | None = None,
) -> Generation:
    """Parse and check every definition and skill of ``sources`` (later sources
    override earlier ones of the same id, as plugins override the host); raises
    ``GenerationRefused`` with every reason found. ``known_models``: the (provider
    name, model) pairs of the instance's model catalog, which an inline provider +
    model pair must name (None: not known, so no such pair is accepted)."""
    sources = list(sources)
    errors: list[str] = []
    definitions: dict[str, AgentDefinition] = {}
    owners: dict[str, str | None] = {}
    skills: dict[str, Skill] = {}
    skill_owners: dict[str, str | None] = {}
    tools = set(tool_names)
    for root, owner in sources:
        if not root.is_dir():
            continue
        for entry in sorted(root.iterdir()):
            if entry.name.startswith("."):
                continue
            if entry.name == SKILLS_FOLDER:
                for name, skill in _load_skills(entry, limits, errors).items():
                    skills[name], skill_owners[name] = skill, owner
                continue
            if entry.is_symlink():
                errors.append(f"{entry}: a symbolic link is not a definition folder")
                continue
            if not entry.is_dir():
                continue
            meta_path, prompt_path = entry / "meta.yaml", entry / "AGENT.md"
            if not (_regular_file(meta_path, limits.max_definition_bytes, errors) & _regular_file(prompt_path, limits.max_definition_bytes, errors)):
                if meta_path.exists() or prompt_path.exists():
                    errors.append(f"{entry}: a definition needs both meta.yaml and AGENT.md as plain files")
                continue
            agent_id = entry.name
            if not _AGENT_ID.match(agent_id) or not agent_id[0].isalpha():
                errors.append(f"{entry}: an id starts with a lowercase letter and has at most 64 of a-z, 0-9, _ and -")
                continue
            if agent_id in RESERVED_IDS:
                errors.append(f"{entry}: {agent_id!r} is reserved")
                continue
            try:
                definition = _parse(entry, meta_path.stat().st_mtime_ns, prompt_path.stat().st_mtime_ns)
                signal_contract(definition.signal, str(meta_path))
            except AgentError as exc:  # it names its meta.yaml already
                errors.append(str(exc))
                continue
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                errors.append(f"{entry}: {exc}")
                continue
            if not definition.prompt.strip():
                errors.append(f"{prompt_path}: the prompt is empty")
                continue
            if len(definition.prompt) > limits.max_prompt_chars:
                errors.append(f"{prompt_path}: the prompt has more than {limits.max_prompt_chars} characters")
                continue
            definitions[agent_id] = definition
            owners[agent_id] = owner
    models = None if known_models is None else set(known_models)
    for definition in definitions.values():
        where = definition.directory / "meta.yaml"
        if definition.provider is not None:
            if models is None:
                errors.append(f"{where}: the model catalog could not be read to check provider {definition.provider!r}")
            elif (definition.provider, definition.model) not in models:
                errors.append(
                    f"{where}: provider {definition.provider!r} has no model {definition.model!r} in the model catalog"
                    " (an admin adds it under Models, or the definition names one that exists)"
                )
        for name in definition.skills:
            if name not in skills:
                errors.append(f"{where}: no skill named {name!r} (a skill is skills/{name}.md in an agent directory)")
        if definition.skills and not definition.allow_tools:
            errors.append(f"{where}: skills are read with the get_skill tool, which a tool-less agent (allow_tools: false) cannot call")
        for name in definition.tools:
            if not _WILDCARDS & set(name) and name not in tools:
                errors.append(f"{where}: no tool named {name!r} is registered")
        for target in definition.delegates or ():
            if target == "*":
                if len(definition.delegates or ()) > 1:
                    errors.append(f"{where}: delegates [\"*\"] stands alone")
                continue
            if target == definition.id:
                errors.append(f"{where}: an agent cannot delegate to itself")
            elif target not in definitions or definitions[target].kind != "task":
                errors.append(f"{where}: delegate target {target!r} is not a task agent of this generation")
    if GENERAL_PURPOSE not in definitions:
        errors.append(f"the built-in {GENERAL_PURPOSE!r} definition is missing")
    if errors:
        raise GenerationRefused(errors)
    return Generation(definitions, owners, fingerprint(sources), skills=skills, skill_owners=skill_owners)


@dataclass(frozen=True)
class Refusal:
    errors: tuple[str, ...]
    at: float


class SubagentCatalog:
    """The current generation over an ``AgentCatalog``'s directories, looked at again
    at most once a second. ``tool_names`` is asked at each reload (plugins register
    tools at startup, so the first look is after them)."""

    def __init__(
        self, agents: AgentCatalog, tool_names: Callable[[], Iterable[str]], limits: OrchestrationLimits = OrchestrationLimits(),
        known_models: Callable[[], frozenset[tuple[str, str]] | None] = lambda: None,
        plugin_refused: Callable[[str, list[str]], None] = lambda plugin_id, errors: None,
    ) -> None:
        self.agents = agents
        self.tool_names = tool_names
        self.limits = limits
        self.known_models = known_models
        self.plugin_refused = plugin_refused  # a plugin whose definitions are left out: its card says why
        self.good: Generation | None = None
        self.refused: Refusal | None = None
        self._checked = 0.0
        self._lock = threading.Lock()

    def current(self) -> Generation:
        """The last good generation; raises ``GenerationRefused`` when there never was one."""
        now = time.monotonic()
        if now >= self._checked:
            with self._lock:
                if now >= self._checked:
                    self._checked = now + FRESH_SECONDS
                    self._reload()
        if self.good is None:
            raise DefinitionsUnavailable(list(self.refused.errors) if self.refused else ["no agent definitions loaded"])
        return self.good

    def check(self) -> None:
        """Load the definitions now without counting as the fresh look ``current``
        relies on (the host's start: a plugin's ``meta.yaml`` at fault is on its page at
        once), so the first use still looks at the files: what was written meanwhile
        is in it."""
        with self._lock:
            self._reload()

    def reload(self) -> None:
        """Look at the files now (the admin page's reload; tests)."""
        with self._lock:
            self._checked = time.monotonic() + FRESH_SECONDS
            self._reload()

    def _reload(self) -> None:
        sources = list(self.agents.sources)
        models = self.known_models()
        # A change of the model catalog is a new look too: a pair a definition names
        # may have come or gone.
        seen = (fingerprint(sources), models)
        if self.good is not None and self.good.fingerprint == seen:
            return
        if self.refused is not None and getattr(self, "_refused_fingerprint", None) == seen:
            return
        try:
            generation = dataclasses.replace(load_generation(sources, self.tool_names(), self.limits, models), fingerprint=seen)
        except GenerationRefused as exc:
            self.refused = Refusal(tuple(exc.errors), time.time())
            # With no last good generation to keep (at boot), a plugin's folder at fault
            # is left out, not everyone's helpers with it: the rest is checked again.
            # Later, the last good one stays whole (an edit is taken all or nothing).
            blamed = _blame(sources, exc.errors) if self.good is None else {}
            if blamed:
                try:
                    kept = [source for source in sources if source[1] not in blamed]
                    generation = dataclasses.replace(load_generation(kept, self.tool_names(), self.limits, models), fingerprint=seen)
                except GenerationRefused:
                    pass
                else:
                    log.error("agent definitions of plugin(s) %s refused (%s); the others are in use",
                              ", ".join(sorted(blamed)), "; ".join(exc.errors))
                    for plugin_id, errors in blamed.items():
                        self.plugin_refused(plugin_id, errors)
                    self.good = generation
                    return
            self._refused_fingerprint = seen
            log.error(
                "agent definitions refused (%s); %s", "; ".join(exc.errors),
                "the previous generation stays in use" if self.good else "no sub-agent can be delegated to until this is fixed",
            )
            return
        self.good, self.refused = generation, None


def _blame(sources: list[tuple[Path, str | None]], errors: Iterable[str]) -> dict[str, list[str]]:
    """The plugins whose folders the refusal's errors name (each error starts with the
    path it is about), with their errors."""
    blamed: dict[str, list[str]] = {}
    for error in errors:
        for root, owner in sources:
            if owner is not None and error.startswith(f"{root}/"):
                blamed.setdefault(owner, []).append(error)
                break
    return blamed

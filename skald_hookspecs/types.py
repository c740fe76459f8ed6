"""Small frozen values a plugin hands to the host.

They are dataclasses rather than dicts so a typo is an error at registration, not a
silent missing key three layers later; the host stamps provenance (which plugin
registered what) itself, so none of these carries a plugin id the plugin could forge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Mapping, Protocol


@dataclass(frozen=True)
class ConfigField:
    """One field of an instance or per-user config schema.

    ``secret`` fields are write-only: the host stores them but only ever returns them
    masked, so a settings page cannot leak a bot token or an API key.
    """

    name: str
    type: Literal["string", "integer", "number", "boolean", "choice", "url"] = "string"
    label: str = ""
    description: str = ""
    default: Any = None
    required: bool = False
    secret: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None


@dataclass(frozen=True)
class PluginInfo:
    """Who a plugin is. ``spec`` is the range of SPEC_VERSION it was written for
    (a PEP 440 specifier such as ``">=1.0,<2"``); the host refuses a plugin whose range
    it cannot satisfy, by name, instead of failing later on a missing hook argument.

    ``manages_own_access``: the plugin decides who may use it (a pairing binding, say),
    so it is absent from the per-member grant lists. ``grant_by_default``: members of
    roles with ``auto_grant`` receive it when its registry row is born.
    """

    id: str
    title: str
    spec: str
    description: str = ""
    icon: str = "puzzle"
    config_schema: tuple[ConfigField, ...] = ()
    user_config_schema: tuple[ConfigField, ...] = ()
    manages_own_access: bool = False
    grant_by_default: bool = True


@dataclass(frozen=True)
class WebPage:
    """An ES-module fragment the web shell mounts at ``#plugin/<id>/<page_id>``.
    ``entry`` is a path under the plugin's own router (``/api/plugin/<id>/<entry>``)."""

    page_id: str
    title: str
    entry: str
    icon: str = "puzzle"
    admin_only: bool = False
    priority: int = 100


@dataclass(frozen=True)
class I18nBundle:
    """UI strings of one domain (usually the plugin id): ``{locale: {key: text}}``."""

    domain: str
    strings: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class ConfigSet:
    """A group of instance settings. ``owner`` names the surface that renders it
    (a plugin page id); ``None`` puts it on the general settings page."""

    id: str
    title: str
    fields: tuple[ConfigField, ...]
    owner: str | None = None


class TurnApi(Protocol):
    """What a tool may ask of the turn it runs in. The host's own tools (the sub-agent
    delegate, notify, scheduling) use exactly this, so a plugin's tools can too."""

    depth: int  # 0 in a member's conversation, +1 per sub-agent level
    unattended: bool  # no member is there to answer an approval (a scheduled prompt)

    async def delegate(self, agent_id: str, task: str) -> str:
        """Run a task agent in a frame of its own and return its final answer."""

    async def notify(self, text: str) -> None:
        """Tell the member something now, as a note in this conversation."""

    async def schedule(self, prompt: str, due_at: str) -> str:
        """Deliver ``prompt`` into this conversation at ``due_at`` (ISO 8601, UTC); returns the job id."""

    def agents(self) -> list[dict[str, Any]]:
        """The task agents ``delegate`` accepts: id, title, description."""

    async def run_command(self, command: str, *, workdir: str | None = None, timeout: float | None = None) -> Any:
        """Run a shell command in this member's sandbox (never on the bare host) and
        return its ``ExecResult``. ``workdir`` is an agent path (``~/…``, relative,
        ``shared/X/…``, ``projects/o/s/…``) or an absolute sandbox path; ``timeout`` is
        capped by the instance. Stopping the turn kills the command's process group.
        Raises ``SandboxUnavailable`` (its message says what to install) when no
        sandbox backend can run here."""


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know: whose turn it is and how to stop.

    It carries ids and a cancellation event, never a password, key or another member's
    database handle (check D2: hooks receive only the acting member's data).
    """

    member_id: str
    conversation_id: str | None = None
    frame_id: str | None = None
    cancelled: Any = None  # an asyncio.Event set when the turn is stopped
    host: Any = None  # the HostApi of the plugin that registered the tool
    turn: TurnApi | None = None


class ToolRun(Protocol):
    def __call__(self, args: Mapping[str, Any], ctx: ToolContext) -> Awaitable[str]: ...


@dataclass(frozen=True)
class Tool:
    """An LLM tool. ``parameters`` is a JSON schema object. ``concurrency_safe`` tools of
    one round may run together; ``restart`` says what recovery does with a call that was
    running when the process died: ``"rerun"`` for pure reads, ``"mark_interrupted"``
    for anything with a side effect (never re-run automatically)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], ToolContext], Awaitable[str]]
    concurrency_safe: bool = False
    restart: Literal["rerun", "mark_interrupted"] = "mark_interrupted"


@dataclass(frozen=True)
class SystemAgent:
    """Background work run by the host's one scheduler (seed 000)."""

    id: str
    title: str
    interval_seconds: int
    run: Callable[..., Awaitable[None]]
    scope: Literal["instance", "per_member"] = "per_member"
    extra: Mapping[str, Any] = field(default_factory=dict)


# The speech contract lives in ``skald_hookspecs.tts`` (with its WAV format and the
# optional attributes); importable from here too, beside the other registered types.
from skald_hookspecs.tts import TtsEngine, TtsUnavailable, TtsVoice  # noqa: E402,F401

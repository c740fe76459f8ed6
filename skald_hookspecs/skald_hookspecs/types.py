"""Small frozen values a plugin hands to the host.

They are dataclasses rather than dicts so a typo is an error at registration, not a
silent missing key three layers later; the host stamps provenance (which plugin
registered what) itself, so none of these carries a plugin id the plugin could forge.

Translating what the shell shows of a plugin (since spec 1.2): the texts given here
(``PluginInfo.title``, ``WebPage.title``, ``ConfigField.label``...) are the English
fallback. The host shows each reader the string of the same meaning from the
plugin's own ``I18nBundle`` (domain = the plugin id) when it has one, under these keys:

- ``plugin.title``, ``plugin.description``: ``PluginInfo``
- ``page.<page_id>.title``: a ``WebPage`` (navigation and page heading)
- ``config.<field>.label``, ``config.<field>.description``: ``PluginInfo.config_schema``
- ``user_config.<field>.label``, ``user_config.<field>.description``: ``user_config_schema``
- ``set.<set id>.title``, ``set.<set id>.<field>.label``, ``set.<set id>.<field>.description``: a ``ConfigSet``
- ``<prefix>.<field>.choice.<value>`` (``config``, ``user_config``, ``set.<set id>``): one value of a ``choice`` field as the form shows it (the value itself is what is stored)

Icons (``PluginInfo.icon``, ``WebPage.icon``) are one of ``ICONS``; another name is
drawn as ``"puzzle"``.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Mapping, Protocol, Sequence

#: The icon names the web shell draws (Lucide's SVGs, vendored with their licence).
ICONS: tuple[str, ...] = (
    "bell", "book", "bot", "box", "calendar", "chat", "checklist", "clock", "cloud", "database", "file",
    "folder", "globe", "hand", "heart", "home", "image", "key", "language", "mail", "music", "pin",
    "puzzle", "search", "send", "settings", "shield", "sparkles", "star", "terminal", "tool", "user", "users",
)


@dataclass(frozen=True)
class ConfigField:
    """One field of an instance or per-user config schema.

    ``secret`` fields are write-only: the host stores them but only ever returns them
    masked, so a settings page cannot leak a bot token or an API key.

    The host checks a schema when the plugin registers it and fails the plugin, naming
    the field, for a ``type`` other than the six, a ``"choice"`` without ``choices``, a
    ``default`` the field's own checks refuse (outside ``minimum``/``maximum``, longer
    than ``max_length``, not one of ``choices``), ``minimum`` above ``maximum``, two
    fields of one name in one schema, or a rule the field's type does not use:
    ``minimum``/``maximum`` on anything but ``integer`` or ``number``, ``max_length`` on
    anything but ``string`` or ``url``, ``choices`` on anything but ``choice``.

    ``pattern`` (since 1.8): a regular expression (Python's ``re``) the whole text of a
    ``string`` or ``url`` field must match when it is set (``r"https://\\S+"``,
    ``r"[A-Za-z0-9_-]{1,256}"``); say the form in words in ``description``, which is what
    the admin reads beside the refusal. One that does not compile, or a pattern without
    a ``description``, fails the plugin.

    ``live`` (since 1.12): the plugin reads this setting where it uses it
    (``HostApi.get_config``), so a new value applies without a restart. A running
    plugin whose changed settings are all ``live`` is not restarted when the admin
    saves them; a change to any other field restarts it (``shutdown("reconfigured")``,
    then ``startup``), which ends what it was doing (a connection, a call in flight).
    Only an instance schema's fields are restarted for; the flag means nothing in a
    ``user_config_schema``.
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
    pattern: str | None = None
    live: bool = False


@dataclass(frozen=True)
class PluginInfo:
    """Who a plugin is. ``spec`` is the range of SPEC_VERSION it was written for
    (a PEP 440 specifier such as ``">=1.0,<2"``); the host refuses a plugin whose range
    it cannot satisfy, by name, instead of failing later on a missing hook argument.

    ``manages_own_access``: the plugin decides who may use it (a pairing binding, say),
    so it is absent from the per-member grant lists. ``grant_by_default``: members of
    roles with ``auto_grant`` receive it when its registry row is born.

    ``title``, ``description`` and the schemas' labels and hints are the English text;
    the keys ``plugin.title``, ``plugin.description``, ``config.<field>.label``... of the
    plugin's own bundle translate them (see the module docstring). ``icon`` is one of
    ``ICONS``.
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
    ``entry`` is a path under the plugin's own router (``/api/plugin/<id>/<entry>``):
    a relative path such as ``"page.js"``; a URL, a leading ``/``, a ``..`` segment or a
    backslash is refused at registration and fails the plugin.
    ``page_id``: 1-64 letters, digits, ``-`` or ``_``, starting with a letter or digit
    (it is part of the address and of string keys); another fails the plugin.
    ``title`` is the English text; ``page.<page_id>.title`` in the plugin's bundle
    translates it. ``icon`` is one of ``ICONS``.

    ``slot`` (since 1.3): ``"sidebar"`` (a page of its own, listed in the sidebar) or
    ``"member_admin"``: a section of a member's page in the admin's Members area
    (``#members/<id>``), below the member's plugins, shown to admins only while the
    plugin is enabled; the element is mounted with a ``member-id`` attribute too (a
    connector's grants for that member, say). Any other ``slot`` fails the plugin."""

    page_id: str
    title: str
    entry: str
    icon: str = "puzzle"
    admin_only: bool = False
    priority: int = 100
    slot: Literal["sidebar", "member_admin"] = "sidebar"


@dataclass(frozen=True)
class I18nBundle:
    """UI strings of one domain: ``{locale: {key: text}}``. The domain is the registering
    plugin's id, or ``"core"`` to add to the host's strings (a language). Another
    plugin's domain (since 1.17) may gain only a language it lacks; a string the host or
    that plugin already has is never replaced (dropped, and logged).

    Keep the texts in per-locale JSON files that translators edit with ordinary tools,
    and build the bundle with :meth:`from_folder`; adding a language is adding a file."""

    domain: str
    strings: Mapping[str, Mapping[str, str]]

    @classmethod
    def from_folder(cls, domain: str, folder: Any) -> "I18nBundle":
        """Read every ``<locale>.json`` in ``folder`` (``en.json``, ``de.json``, ...), each one
        flat JSON object of ``key: text``. ``folder`` is a path or an ``importlib.resources``
        traversable, e.g. ``importlib.resources.files("my_plugin") / "locales"``, so it works
        from a wheel too. A file that is not such an object raises ``ValueError`` naming it;
        a folder that is not there raises ``FileNotFoundError`` naming it (in a wheel, the
        folder must be package data: ``[tool.setuptools.package-data] <package> =
        ["locales/*.json"]`` in ``pyproject.toml``). Since spec 1.2."""
        if isinstance(folder, (str, os.PathLike)):
            folder = pathlib.Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"the folder {str(folder)!r} does not exist (a locales/ folder must be package data:"
                f" [tool.setuptools.package-data] <package> = [\"{folder.name}/*.json\"] in pyproject.toml)"
            )
        strings: dict[str, dict[str, str]] = {}
        for entry in sorted(folder.iterdir(), key=lambda item: item.name):
            locale, dot, suffix = entry.name.rpartition(".")
            if not dot or suffix != "json" or not entry.is_file():
                continue
            if not _LOCALE.fullmatch(locale):
                raise ValueError(f"{entry.name}: the file name must be a locale code, like de.json or pt-BR.json")
            try:
                table = json.loads(entry.read_text(encoding="utf-8"))
            except ValueError as error:
                raise ValueError(f"{entry.name}: not valid JSON ({error})") from None
            if not isinstance(table, dict) or not all(isinstance(key, str) and isinstance(text, str) for key, text in table.items()):
                raise ValueError(f"{entry.name}: must be one JSON object of key: text strings")
            strings[locale] = table
        return cls(domain, strings)


_LOCALE = re.compile(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")


@dataclass(frozen=True)
class ConfigSet:
    """A group of instance settings. ``owner`` ``None`` puts it on the general settings
    page; any other value (one of your page ids, say) puts it on your plugin's page in
    the admin's catalog, beside the plugin's own config. Either way the admin saves it
    with the same validation, and the plugin reads it with ``HostApi.get_settings(id)``.
    The keys ``set.<id>.title`` and ``set.<id>.<field>.label`` / ``.description`` of the
    registering plugin's bundle translate the texts."""

    id: str
    title: str
    fields: tuple[ConfigField, ...]
    owner: str | None = None


class TurnApi(Protocol):
    """What a tool may ask of the turn it runs in. The host's own tools (the sub-agent
    delegate, notify, scheduling) use exactly this, so a plugin's tools can too.
    ``delegate``, ``schedule`` and ``run_command`` act for the member only while their
    role holds ``tools.delegate``, ``tools.schedule`` and ``tools.shell``, asked at the
    moment of the call: otherwise they raise ``PermissionError`` (access was withdrawn)."""

    depth: int  # 0 in a member's conversation, +1 per sub-agent level
    unattended: bool  # no member is there to answer an approval (a scheduled prompt)

    async def delegate(self, agent_id: str, task: str, *, mode: str = "foreground", limits: dict[str, Any] | None = None) -> str:
        """Run a task agent in a frame of its own and return its final answer (clipped
        to the agent's ``max_result_chars``; ``agent_run`` has all of it). Since 1.3:
        ``mode="background"`` (the conversation's own agent only) returns at once with
        the run id, and the result arrives in the conversation later; ``limits``
        (``timeout_secs``, ``max_iterations``, ``max_result_chars``) can only narrow the
        agent's own. A delegation the graph or a limit refuses raises ``ToolError``."""

    async def delegate_batch(self, requests: list[tuple[str, str]], *, limits: dict[str, Any] | None = None) -> list[str]:
        """Since 1.3. Several (agent_id, task) in the foreground, concurrently, answered in
        request order; every target is checked before any runs."""

    async def agent_runs(self) -> list[dict[str, Any]]:
        """Since 1.3. The sub-agent runs this frame may see: the conversation's own agent
        sees the conversation's, a sub-agent its own and its descendants."""

    async def agent_run(self, run_id: str) -> dict[str, Any] | None:
        """Since 1.3. One visible run with its whole ``result`` and ``error``; None when
        it is not visible from here (a run id is not a credential)."""

    async def cancel_agent_run(self, run_id: str) -> bool:
        """Since 1.3. Cancel a visible live run and its descendants; False otherwise."""

    async def emit_signal(self, key: str, severity: str, summary: str, details: Any = None, dedupe_key: str | None = None) -> str:
        """Since 1.3. For a sub-agent whose definition has a ``signal`` contract: tell
        the conversation's agent something before the run ends. Every bound of the
        contract is enforced; raises ``ToolError`` when one is exceeded."""

    async def get_skill(self, name: str) -> str:
        """Since 1.4. The whole text of one of the skills this frame's agent definition
        names (``skills: [...]``; a skill is ``skills/<name>.md`` in an agent directory).
        A skill outside that list, or unknown, raises ``ToolError``."""

    async def notify(self, text: str) -> None:
        """Tell the member something now, as a note in this conversation."""

    async def ask(self, message: str, fields: Sequence[Mapping[str, Any]], *, timeout: float = 300.0) -> Mapping[str, Any]:
        """Ask the member for input while the call waits: a card in the conversation
        (and, for a channel's conversation, a ``question`` event to that channel) with
        ``message`` and a form of flat ``fields``, each ``{"name", "type"`` (string,
        number, integer, boolean)``, "title"?, "description"?, "required"?, "enum"?}``.
        Returns ``{"action": "accept", "content": {name: value}}`` (values checked
        against the fields), ``{"action": "decline"}``, or ``{"action": "cancel"}``
        when ``timeout`` (seconds, at most an hour) passes or the turn is stopped.
        The question and its answer live in RAM only: the answer is returned here and
        stored and logged nowhere (it may be a secret). ``ValueError`` for bad fields.
        The member answers in the chat, on a channel (``HostApi.answer_question``), or
        on the asking plugin's own page through the same method. Since 1.3. In a helper's
        run nobody attends (a background run, and the runs below it) a question raises
        ``ToolError`` at once, as its approvals are refused, telling the model to go on
        without the answer."""

    async def schedule(self, prompt: str, due_at: str | None = None, *, every: str | None = None, timezone: str | None = None) -> str:
        """Deliver ``prompt`` into this conversation at ``due_at`` (ISO 8601, UTC), or
        again and again ``every`` (a cron expression such as ``"0 8 * * 1-5"`` or a phrase
        such as ``"every weekday at 8"``) read in ``timezone`` (an IANA name; default:
        the member's own, else UTC); returns the job id. Raises ``ValueError`` (its
        message says why) for a schedule or time zone that cannot be used. ``every`` and
        ``timezone``: since 1.3."""

    async def scheduled_prompts(self) -> list[dict[str, Any]]:
        """The member's scheduled prompts: ``id``, ``prompt``, ``recurring``, ``cron``,
        ``phrase``, ``timezone``, ``paused``, ``status``, ``next_run``, ``last_run_at``,
        ``last_status``, ``runs``, ``conversation_id``. Since 1.3. ``next_run_local``
        (since 1.12): ``next_run`` as the member reads it, to the minute with its zone
        named ("2026-12-06 00:16 (Asia/Tokyo)": a recurring job's own zone, a one-shot's
        the member's), for telling them rather than a UTC instant."""

    async def change_scheduled_prompt(
        self, job_id: str, *, prompt: str | None = None, every: str | None = None, timezone: str | None = None,
        paused: bool | None = None,
    ) -> dict[str, Any]:
        """Edit, pause (``paused=True``) or resume one of the member's scheduled prompts
        (``job_id`` or an unambiguous prefix of at least 6 characters); returns it as
        ``scheduled_prompts`` lists it. A new schedule or a resume runs next at the
        first occurrence after now. Raises ``ValueError`` when there is no such prompt
        or the change cannot be used. Since 1.3."""

    async def delete_scheduled_prompt(self, job_id: str) -> None:
        """Delete one of the member's scheduled prompts (``ValueError`` if none). Since 1.3."""

    def agents(self) -> list[dict[str, Any]]:
        """The task agents ``delegate`` accepts: id, title, description."""

    async def run_command(self, command: str, *, workdir: str | None = None, timeout: float | None = None) -> Any:
        """Run a shell command in this member's sandbox (never on the bare host) and
        return its ``ExecResult``. ``workdir`` is an agent path (``~/…``, relative,
        ``shared/X/…``, ``projects/o/s/…``) or an absolute sandbox path; ``timeout`` is
        capped by the instance. Stopping the turn kills everything the command started;
        so does the member losing (or being made read-only in) a folder it could reach
        while it runs: its ``access_changed`` says so (since 1.12).
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
    #: What ``mark_untrusted`` was told during this call (read by the host after it).
    untrusted_sources: list[str] = field(default_factory=list, repr=False, compare=False)

    def mark_untrusted(self, source: str = "") -> None:
        """Say that this call's result carries text from outside the member's control
        (a web page, another member's file, a message from a stranger): from then on,
        every side-effecting call (``restart`` not ``"rerun"``) this conversation's
        frame proposes that the rules would allow asks the member first (check E2: an
        injection in that text must not act unasked), and the approval card says why.
        It is never cleared for the frame, survives a restart, passes to sub-agents the
        frame starts and to the frame a tainted sub-agent answers. ``source``: a few
        words naming where the text came from (a path, a host name), shown on the card
        after the tool's name. Call it before returning, also when the call fails with
        outside text in its error. A tool whose results always carry outside text sets
        ``Tool.untrusted_output`` instead. Since 1.18."""
        self.untrusted_sources.append(source if isinstance(source, str) else str(source))


class ToolError(Exception):
    """Raise from a tool's ``run`` to tell the model what went wrong, in your words:
    ``raise ToolError("no city called 'Atlantis'")`` reaches the model as
    ``Error: no city called 'Atlantis'``, so write the message for the model (and the
    member reading along), never a secret. Any other exception reaches the model only as
    ``Error: the tool failed (error id …)``; its traceback (the frames and the exception's
    type, not its message, which may hold a member's data) goes to the host log and the
    plugin's page in the catalog, for the admin. Since 1.2."""


class NotReady(Exception):
    """Raise from ``startup`` when the plugin cannot run until the admin does something
    (a setting is missing, a service refused the credentials): the plugin is marked
    unhealthy, as for any failure of ``startup``, and its catalog card and the server's
    status say why in the reader's language. ``key`` is a string of the plugin's own
    ``I18nBundle`` (``"error.no_token"`` for ``<bundle>.error.no_token``) and ``values``
    fill its ``{placeholders}``. The plugin stays enabled but does not run: its tools
    are not offered and its system agents do not run; its routes and pages still
    answer. The message, in English, is what the log shows (``skald plugins`` starts
    no plugin, so never shows it), and what a reader sees when the bundle lacks the
    key. A plugin that runs but cannot do its job for now (a service it keeps retrying,
    a model that failed to load in the background) says so with
    ``HostApi.set_degraded`` instead (since 1.12). Since 1.5."""

    def __init__(self, message: str, *, key: str | None = None, values: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.values = dict(values or {})


class ToolRun(Protocol):
    def __call__(self, args: Mapping[str, Any], ctx: ToolContext) -> Awaitable[str | None]: ...


@dataclass(frozen=True)
class Tool:
    """An LLM tool. ``parameters`` is a JSON schema object. ``concurrency_safe`` tools of
    one round may run together; ``restart`` says what recovery does with a call that was
    running when the process died: ``"rerun"`` for pure reads, ``"mark_interrupted"``
    for anything with a side effect (never re-run automatically).

    ``run(args, ctx)`` is awaited with the model's arguments (a JSON object, not yet
    checked against ``parameters``: check what you use) and returns the text the model
    reads: a ``str``, or ``None`` for an empty result. Anything else (a dict, a number) is
    an error of the plugin: the call fails with an error id, as an exception would.
    Encode structured results yourself (``json.dumps``). Raise ``ToolError`` for a
    failure the model should read about.

    ``capability`` (since 1.13): a role capability the member must hold for this tool
    (one an admin may grant a role, such as ``connectors.remote``; admins hold every
    one). The host offers the tool and starts each of its calls only while the
    member's role holds it, asked at that moment from the member as the host knows
    them now (a role change applies before its request answers), as for its own
    tools. A name the host does not know is refused at registration.

    ``untrusted_output`` (since 1.18): every result of this tool carries text from
    outside the member's control (a connector's service, a fetched page, a message
    from someone else). Once such a result entered a conversation, its side-effecting
    calls that the rules allow ask the member first (see
    ``ToolContext.mark_untrusted``, which says the same for one call)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], ToolContext], Awaitable[str | None]]
    concurrency_safe: bool = False
    restart: Literal["rerun", "mark_interrupted"] = "mark_interrupted"
    capability: str | None = None
    untrusted_output: bool = False


# The system-agent contract lives in ``skald_hookspecs.system_agents`` (since 1.3, with
# its context and reports); importable from here too, as it always was.
from skald_hookspecs.system_agents import SystemAgent  # noqa: E402,F401


# The speech contract lives in ``skald_hookspecs.tts`` (with its WAV format and the
# optional attributes); importable from here too, beside the other registered types.
from skald_hookspecs.tts import TtsEngine, TtsUnavailable, TtsVoice  # noqa: E402,F401

"""Typed settings, loaded once: embedded defaults < YAML file < environment.

Every relative path resolves against the data directory (never the launch cwd: a
service started from another directory must find the same files). Unknown keys are an
error naming them, because a misspelt ``kdf: {memroy_kib: ...}`` silently ignored is a
weaker key nobody asked for.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import os
import stat
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

import yaml

from skald_host.core.identity.crypto import KdfParams, check_at_least_floor


class SettingsError(ValueError):
    """The configuration is wrong; the message names the key and what to do."""


class _DuplicateKey(yaml.YAMLError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping: with the plain
    loader the last one wins silently, so a second ``server:`` section dropped the first's
    proxy settings and ``kdf: {time_cost: 6, time_cost: 2}`` a raised KDF cost."""

    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _value in node.value:  # as written: before ``<<:`` merges, which may be overridden
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base class reports it
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _DuplicateKey(f"the key {key!r} is given twice, on line {first} and on line {line}; keep one")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _normalized_public_url(text: str) -> str:
    """``server.public_url`` as ``scheme://host[:port]``, lower case: the origin browsers
    send, compared by the secure-cookie and same-origin checks. ``HTTPS://…`` once gave a
    cookie without Secure; ``skald.example.org`` (no scheme) or a path meant nothing."""
    where = f"server.public_url: {text!r}"
    parts = urlsplit(text.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise SettingsError(f"{where} must start with https:// or http:// (e.g. https://skald.example.org)")
    try:
        port = parts.port
    except ValueError:
        raise SettingsError(f"{where} has a port that is not a number from 1 to 65535") from None
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise SettingsError(f"{where} must name a host (e.g. https://skald.example.org)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise SettingsError(f"{where} must be the server's address alone, without a path, query or fragment (e.g. https://skald.example.org)")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default_port = {"http": 80, "https": 443}[scheme]  # browsers leave it out of Origin
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default_port else "")



@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str | None = None  # e.g. https://skald.example.org — decides Secure cookies
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_body_bytes: int = 10 * 1024 * 1024
    websocket_max_message_bytes: int = 1024 * 1024
    # One member's open WebSockets at once (check H3): each socket encodes and compresses
    # every event of theirs on the event loop, so a hundred tabs held up every member for
    # seconds per large answer. A member has one per tab (two is usual); the next is closed.
    websocket_max_per_member: int = 20
    # Slow clients (check H3): a request whose headers are not complete within
    # header_timeout_seconds is dropped, one whose body stalls gets 408.
    header_timeout_seconds: float = 5.0
    body_timeout_seconds: float = 30.0
    # Reverse proxies (addresses or CIDRs) whose X-Forwarded-For names the client: the
    # login limits count per client, and behind a proxy every client has its address.
    # A peer not listed here is the client, whatever headers it sends.
    trusted_proxies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.host.strip():
            # Hypercorn binds an empty host on every interface: a blank SKALD_HOST must not
            # quietly publish the server to the whole network.
            raise SettingsError(
                "server.host: empty, which would listen on every interface; set 127.0.0.1 for this machine"
                " only, or 0.0.0.0 (or ::) to listen on every interface on purpose"
            )
        if self.public_url is not None:
            object.__setattr__(self, "public_url", _normalized_public_url(self.public_url))
        for entry in self.trusted_proxies:
            try:
                ipaddress.ip_network(entry.strip(), strict=False)
            except ValueError:
                raise SettingsError(
                    f"server.trusted_proxies: {entry!r} is not an address or network (e.g. 127.0.0.1, 10.0.0.0/8, ::1)"
                ) from None

    @property
    def trusted_proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in self.trusted_proxies)


@dataclass(frozen=True)
class LogSettings:
    level: str = "INFO"
    file: Path | None = Path("logs/skald.log")


@dataclass(frozen=True)
class KdfSettings:
    memory_kib: int = 65536
    time_cost: int = 3
    parallelism: int = 4
    concurrency: int = 2

    @property
    def params(self) -> KdfParams:
        return KdfParams(self.memory_kib, self.time_cost, self.parallelism)


@dataclass(frozen=True)
class AuthSettings:
    session_idle_minutes: int = 12 * 60
    session_absolute_hours: int = 7 * 24
    login_window_minutes: int = 15
    login_failures_per_account: int = 10
    login_failures_per_address: int = 30


@dataclass(frozen=True)
class PluginSettings:
    block: tuple[str, ...] = ()
    safe_mode: bool = False
    strict: bool = False
    hook_timeout_seconds: float = 5.0
    slow_import_ms: int = 100


@dataclass(frozen=True)
class ChatSettings:
    max_rounds: int = 25
    tool_timeout_seconds: float = 300.0
    # A member's own clients (web page, API) may send this many messages at once, then
    # sends_per_second; past that a send is refused with a retry time (check H3).
    send_burst: int = 30
    sends_per_second: float = 2.0
    compact_after_tokens: int | None = None  # automatic compaction is off unless set


@dataclass(frozen=True)
class FileSettings:
    """Members' files: uploads, the file viewer and what a turn may inline for a
    vision model (seed 001 "Multimodal attachments": 4 files / 10 MiB per turn)."""

    upload_max_bytes: int = 256 * 1024 * 1024
    view_max_bytes: int = 50 * 1024 * 1024
    read_max_bytes: int = 2 * 1024 * 1024
    turn_image_count: int = 4
    turn_image_bytes: int = 10 * 1024 * 1024


@dataclass(frozen=True)
class SandboxSettings:
    """Where members' commands run (seed 001 "Filesystem & containers"). ``backend`` is
    ``auto`` (Docker when its engine answers, else bubblewrap, else none), a backend's
    name, or ``none`` (``execute_cmd`` is refused). Limits apply per member sandbox."""

    backend: str = "auto"
    image: str = "skald-sandbox:2"
    network: bool = False
    memory_mib: int = 1024
    cpus: float = 1.0
    pids: int = 256
    exec_timeout_seconds: float = 120.0
    output_limit_bytes: int = 1024 * 1024
    #: The disk limit of each member's home (see ``core/sandbox/quota.py``).
    home_quota_mib: int = 2048


@dataclass(frozen=True)
class BackupSettings:
    """Online backups (check G6): where they go (relative: inside the data dir, and
    never copied into themselves), how often one is taken on a schedule (0: only when
    asked) and how many are kept; older ones are removed after a new one completes."""

    dir: Path = Path("backups")
    every_hours: float = 0.0
    keep: int = 7


@dataclass(frozen=True)
class TtsSettings:
    """Speech (``/api/tts``, ``HostApi.synthesize_speech``): the longest text read aloud,
    syntheses running at once on the instance and per member, each member's cache in
    their own file, and the instance default voice per language (``de=espeak-ng:de``).
    ``engine_timeout_seconds`` bounds one engine call (one sentence, or the short first
    unit of one): an engine that hung (``await asyncio.sleep(60)``) held one of the
    ``max_concurrent`` slots for as long, and every member's speech waited for it and
    was refused as busy. 20 s is many times what a sentence takes on a CPU."""

    max_chars: int = 4000
    max_concurrent: int = 2
    engine_timeout_seconds: float = 20.0
    per_member: int = 2
    cache_mib: int = 32
    defaults: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for entry in self.defaults:
            language, _, voice = entry.partition("=")
            if not language.strip() or ":" not in voice:
                raise SettingsError(f"tts.defaults: {entry!r} should look like de=espeak-ng:de")


@dataclass(frozen=True)
class SystemAgentSettings:
    """The one scheduler of system agents (seed 000): ``time_zone`` is the instance's
    (an IANA name), in which a daily agent's ``run_at_hour`` is read; ``run`` False
    keeps the scheduler's loop from starting (a test drives its passes itself)."""

    time_zone: str = "UTC"
    run: bool = True
    #: How long one agent's ``has_work`` plus ``run`` may take before it is cancelled and
    #: its run recorded as failed ("timed out after N s"): a hung run held the one
    #: scheduler, every member's and every plugin's agents, until a restart.
    run_timeout_seconds: float = 300.0
    #: How many agents' passes run side by side: one slow agent leaves the others theirs.
    concurrent_agents: int = 4

    def __post_init__(self) -> None:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(self.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise SettingsError(f"system_agents.time_zone: {self.time_zone!r} is not a time zone (e.g. Europe/Berlin)") from None


@dataclass(frozen=True)
class SubagentSettings:
    """The bounds of named sub-agents (seed 004 §9, its ``agent_orchestration``), with
    the seed's defaults: how deep and how large one delegation tree may grow, how many
    runs work at once on the instance, per member and per conversation, how many undelivered
    results and signals one conversation's inbox holds, how often a delivery is tried
    before it is dead-lettered, and the fairness between a member's own turns and the
    inbox (after ``max_user_turn_burst_before_inbox`` turns of theirs, or once the
    oldest result waited ``max_inbox_wait_secs``, the next turn is the inbox's)."""

    max_tree_depth: int = 4
    max_runs_per_tree: int = 16
    max_concurrent_runs: int = 6
    max_concurrent_runs_per_session: int = 4
    #: Not the seed's: one member's runs never take every one of the instance's.
    max_concurrent_runs_per_member: int = 4
    max_pending_inbox_events_per_session: int = 128
    max_inbox_delivery_attempts: int = 8
    max_user_turn_burst_before_inbox: int = 4
    max_inbox_wait_secs: float = 30.0


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("data")
    server: ServerSettings = field(default_factory=ServerSettings)
    log: LogSettings = field(default_factory=LogSettings)
    kdf: KdfSettings = field(default_factory=KdfSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    plugins: PluginSettings = field(default_factory=PluginSettings)
    chat: ChatSettings = field(default_factory=ChatSettings)
    files: FileSettings = field(default_factory=FileSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    backup: BackupSettings = field(default_factory=BackupSettings)
    tts: TtsSettings = field(default_factory=TtsSettings)
    system_agents: SystemAgentSettings = field(default_factory=SystemAgentSettings)
    subagents: SubagentSettings = field(default_factory=SubagentSettings)

    @property
    def database_dir(self) -> Path:
        return self.data_dir / "database"

    def resolve(self, path: Path | str) -> Path:
        """A configured path, absolute, relative paths taken from the data dir."""
        path = Path(path)
        return path if path.is_absolute() else self.data_dir / path

    def replace(self, **sections: Any) -> "Settings":
        return dataclasses.replace(self, **sections)


#: Short environment names documented in the README; every field also answers to
#: ``SKALD_<SECTION>_<FIELD>`` (e.g. ``SKALD_KDF_MEMORY_KIB``).
ENV_ALIASES = {
    "SKALD_HOST": ("server", "host"),
    "SKALD_PORT": ("server", "port"),
    "SKALD_PUBLIC_URL": ("server", "public_url"),
    "SKALD_LOG_LEVEL": ("log", "level"),
    "SKALD_BLOCK_PLUGINS": ("plugins", "block"),
    "SKALD_STRICT_PLUGINS": ("plugins", "strict"),
    "SKALD_SAFE_MODE": ("plugins", "safe_mode"),
}


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            if type(None) in args:
                return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off", ""):
            return False
        raise SettingsError(f"{where}: expected true or false, got {value!r}")
    if annotation in (int, float):
        if isinstance(value, bool):
            raise SettingsError(f"{where}: expected a number, got {value!r}")
        if annotation is int and isinstance(value, str):
            # The environment gives text: ``5.0`` is read as YAML reads ``time_cost: 5.0``.
            try:
                value = int(value.strip())
            except ValueError:
                try:
                    value = float(value.strip())
                except ValueError:
                    raise SettingsError(f"{where}: expected a number, got {value!r}") from None
        if annotation is int and isinstance(value, float) and not value.is_integer():
            # int() would truncate: ``port: 8080.9`` must not quietly become 8080.
            raise SettingsError(f"{where}: expected a whole number, got {value!r}")
        try:
            return annotation(value)
        except (TypeError, ValueError):
            raise SettingsError(f"{where}: expected a number, got {value!r}") from None
    if annotation is str:
        if not isinstance(value, (str, int, float)):
            raise SettingsError(f"{where}: expected text, got {value!r}")
        return str(value)
    if annotation is Path:
        if not isinstance(value, (str, Path)):
            raise SettingsError(f"{where}: expected a path, got {value!r}")
        return Path(value)
    if origin is tuple:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise SettingsError(f"{where}: expected a list, got {value!r}")
        return tuple(_coerce(v, args[0], where) for v in value)
    raise SettingsError(f"{where}: unsupported setting type {annotation!r}")


def _section(cls: type, raw: Mapping[str, Any], name: str) -> Any:
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{name}: expected a mapping of settings, got {raw!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SettingsError(
            f"unknown setting{'s' if len(unknown) > 1 else ''} in {name}: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    return cls(**{k: _coerce(v, hints[k], f"{name}.{k}") for k, v in raw.items()})


def load_settings(
    config_file: Path | None = None,
    *,
    data_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Settings:
    """Build the settings: defaults, then the YAML file, then the environment, then
    explicit ``overrides`` (the CLI's flags), each layer replacing single fields."""
    env = os.environ if environ is None else environ
    data_dir = Path(data_dir or env.get("SKALD_DATA_DIR") or "data").expanduser().resolve()
    if data_dir.exists() and not data_dir.is_dir():
        # ``skald backup --data-dir <a file>`` once ended in a NotADirectoryError traceback.
        raise SettingsError(f"the data dir {data_dir} is a file, not a folder; choose a folder with --data-dir or SKALD_DATA_DIR")
    if config_file is None and env.get("SKALD_CONFIG"):
        config_file = Path(env["SKALD_CONFIG"])
    if config_file is None and (data_dir / "skald.yml").exists():
        config_file = data_dir / "skald.yml"

    layered: dict[str, dict[str, Any]] = {}
    if config_file is not None:
        try:
            text = Path(config_file).read_text(encoding="utf-8")
            raw = yaml.load(text, Loader=_UniqueKeyLoader) or {}
        except FileNotFoundError:
            raise SettingsError(f"config file {config_file} does not exist") from None
        except IsADirectoryError:
            raise SettingsError(f"config file {config_file} is a directory, not a file (point --config or SKALD_CONFIG at the YAML file)") from None
        except PermissionError:
            raise SettingsError(f"config file {config_file} cannot be read by this user (check its owner and permissions)") from None
        except OSError as exc:
            raise SettingsError(f"config file {config_file} cannot be read: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise SettingsError(f"config file {config_file} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
        except RecursionError:
            raise SettingsError(f"config file {config_file} is nested too deeply to be a configuration") from None
        except _DuplicateKey as exc:
            raise SettingsError(f"config file {config_file}: {exc}") from None
        except yaml.YAMLError as exc:
            raise SettingsError(f"config file {config_file} is not valid YAML: {exc}") from None
        if not isinstance(raw, dict):
            raise SettingsError(f"config file {config_file} must hold a mapping of sections")
        sections = {f.name for f in dataclasses.fields(Settings)} - {"data_dir"}
        unknown = sorted(set(raw) - sections)
        if unknown:
            raise SettingsError(
                f"unknown section{'s' if len(unknown) > 1 else ''} in {config_file}: {', '.join(unknown)} "
                f"(known: {', '.join(sorted(sections))})"
            )
        for name, values in raw.items():
            if values is None:
                values = {}  # ``server:`` with every key commented out: nothing changed here
            if not isinstance(values, dict):
                raise SettingsError(f"{name}: expected a mapping of settings, got {values!r}")
            layered[name] = dict(values)

    section_types = {f.name: f.type for f in dataclasses.fields(Settings) if f.name != "data_dir"}
    hints = typing.get_type_hints(Settings)
    for name in section_types:
        known = {f"SKALD_{name}_{fld.name}".upper(): fld.name for fld in dataclasses.fields(hints[name])}
        prefix = f"SKALD_{name}_".upper()
        misspelt = sorted(k for k in env if k.startswith(prefix) and k not in known)
        if misspelt:
            raise SettingsError(
                f"unknown environment setting{'s' if len(misspelt) > 1 else ''} {', '.join(misspelt)} "
                f"(known: {', '.join(sorted(known))})"
            )
        for key, fld_name in known.items():
            if key in env:
                layered.setdefault(name, {})[fld_name] = env[key]
    for alias, (name, fld_name) in ENV_ALIASES.items():
        if alias in env:
            full = f"SKALD_{name}_{fld_name}".upper()
            if full in env and env[full] != env[alias]:
                # Neither may win silently: the operator meant one of them.
                raise SettingsError(f"{alias}={env[alias]!r} and {full}={env[full]!r} set the same setting ({name}.{fld_name}) differently; keep one")
            layered.setdefault(name, {})[fld_name] = env[alias]
    for name, values in (overrides or {}).items():
        layered.setdefault(name, {}).update(values)

    built = {name: _section(hints[name], layered.get(name, {}), name) for name in section_types}
    settings = Settings(data_dir=data_dir, **built)
    _validate(settings)
    return settings


def config_path(data_dir: Path, config_file: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The YAML file ``load_settings`` reads for this data dir, in its order (``--config``,
    ``$SKALD_CONFIG``, ``<data dir>/skald.yml``), whether or not it exists yet."""
    env = os.environ if environ is None else environ
    if config_file is not None:
        return Path(config_file)
    if env.get("SKALD_CONFIG"):
        return Path(env["SKALD_CONFIG"])
    return data_dir / "skald.yml"


def save_setting(path: Path, section: str, name: str, value: Any) -> None:
    """Set ``section.name`` in the YAML file ``path`` (made, private, if missing), keeping
    everything else in it, comments included. The file is replaced whole (a temporary
    file renamed over it), so a crash leaves the old file or the new one."""
    from ruamel.yaml import YAML, YAMLError

    yaml_rt = YAML()
    try:
        document = yaml_rt.load(path.read_text(encoding="utf-8")) if path.exists() else None
    except YAMLError as exc:
        raise SettingsError(f"config file {path} is not valid YAML: {exc}") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise SettingsError(f"config file {path} must hold a mapping of sections")
    block = document.get(section)
    if block is None:
        # Missing, or ``kdf:`` with every key commented out (which load accepts): a new
        # mapping; ruamel keeps the comments that followed the empty key.
        block = document[section] = {}
    if not isinstance(block, dict):
        raise SettingsError(f"{section}: expected a mapping of settings, got {block!r}")
    block[name] = value
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o600
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml_rt.dump(document, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Bound:
    """The values one numeric setting may take: from ``low`` to ``high`` (above ``low``
    when ``above``), always finite, or exactly ``off`` where that value switches the
    feature off. A value outside fails at load, naming the key, the value and this range:
    ``auth.login_failures_per_account: 0`` made every sign-in a 500, ``server.max_body_bytes:
    -5`` every POST a 413, ``backup.every_hours: .nan`` a schedule silently never run."""

    low: float
    high: float
    above: bool = False
    off: float | None = None

    def allows(self, value: float) -> bool:
        if self.off is not None and value == self.off:
            return True
        if not math.isfinite(value):
            return False
        return (self.low < value if self.above else self.low <= value) and value <= self.high

    def describe(self, whole: bool) -> str:
        if self.above:
            text = f"more than {self.low:g} and at most {self.high:g}"
        elif whole:
            text = f"a whole number from {int(self.low)} to {int(self.high)}"
        else:
            text = f"from {self.low:g} to {self.high:g}"
        return f"{self.off:g} (off) or {text}" if self.off is not None else text


_GIB = 1024**3

#: Every numeric setting's allowed values, in one place (README "Configuration" lists
#: them). A numeric field without an entry is a test failure, so a new setting gets one.
BOUNDS: dict[str, Bound] = {
    "server.port": Bound(1, 65535),
    "server.max_body_bytes": Bound(1024, _GIB),
    "server.websocket_max_message_bytes": Bound(1024, _GIB),
    "server.websocket_max_per_member": Bound(1, 1000),
    "server.header_timeout_seconds": Bound(0, 3600, above=True),
    "server.body_timeout_seconds": Bound(0, 3600, above=True),
    # The lows are the Argon2id floor (checked first, with its own message); the highs
    # keep a typo from asking each sign-in for 100 GB or a hundred thousand threads.
    "kdf.memory_kib": Bound(19456, 4 * 1024 * 1024),
    "kdf.time_cost": Bound(2, 1000),
    "kdf.parallelism": Bound(1, 64),
    "kdf.concurrency": Bound(1, 64),
    "auth.session_idle_minutes": Bound(1, 366 * 24 * 60),
    "auth.session_absolute_hours": Bound(1, 366 * 24),
    "auth.login_window_minutes": Bound(1, 7 * 24 * 60),
    "auth.login_failures_per_account": Bound(1, 10_000),
    "auth.login_failures_per_address": Bound(1, 100_000),
    "plugins.hook_timeout_seconds": Bound(0, 3600, above=True),
    "system_agents.run_timeout_seconds": Bound(0, 86_400, above=True),
    "system_agents.concurrent_agents": Bound(1, 64),
    "plugins.slow_import_ms": Bound(0, 600_000),
    "chat.max_rounds": Bound(1, 1000),
    "chat.tool_timeout_seconds": Bound(0, 86_400, above=True),
    "chat.send_burst": Bound(1, 10_000),
    "chat.sends_per_second": Bound(0, 1000, above=True),
    "chat.compact_after_tokens": Bound(1, 100_000_000),  # null: off
    "files.upload_max_bytes": Bound(1, 1024 * _GIB),
    "files.view_max_bytes": Bound(1, 1024 * _GIB),
    "files.read_max_bytes": Bound(1, 1024 * _GIB),
    "files.turn_image_count": Bound(0, 64),  # 0: no image is inlined for a model
    "files.turn_image_bytes": Bound(1, _GIB),
    "sandbox.memory_mib": Bound(16, 1024 * 1024),
    "sandbox.cpus": Bound(0, 1024, above=True),
    "sandbox.pids": Bound(8, 1_000_000),
    "sandbox.exec_timeout_seconds": Bound(0, 86_400, above=True),
    "sandbox.output_limit_bytes": Bound(1024, _GIB),
    "sandbox.home_quota_mib": Bound(1, 1024 * 1024 * 1024),
    # 0.0001 h (a third of a second) lets a test run the schedule; an admin means hours.
    "backup.every_hours": Bound(0.0001, 366 * 24, off=0),
    "backup.keep": Bound(1, 10_000),
    "tts.max_chars": Bound(1, 1_000_000),
    "tts.max_concurrent": Bound(1, 256),
    "tts.engine_timeout_seconds": Bound(0, 3600, above=True),
    "tts.per_member": Bound(1, 256),
    "tts.cache_mib": Bound(0, 64 * 1024),  # 0: nothing is cached
    "subagents.max_tree_depth": Bound(1, 16),
    "subagents.max_runs_per_tree": Bound(1, 10_000),
    "subagents.max_concurrent_runs": Bound(1, 10_000),
    "subagents.max_concurrent_runs_per_session": Bound(1, 10_000),
    "subagents.max_concurrent_runs_per_member": Bound(1, 10_000),
    "subagents.max_pending_inbox_events_per_session": Bound(1, 100_000),
    "subagents.max_inbox_delivery_attempts": Bound(1, 1_000),
    "subagents.max_user_turn_burst_before_inbox": Bound(1, 1_000),
    "subagents.max_inbox_wait_secs": Bound(0, 86_400, above=True),
}


def _check_bounds(settings: Settings) -> None:
    for key, bound in BOUNDS.items():
        section, name = key.split(".")
        value = getattr(getattr(settings, section), name)
        if value is None:
            continue  # an optional setting left off (chat.compact_after_tokens)
        if not bound.allows(value):
            raise SettingsError(f"{key}: must be {bound.describe(isinstance(value, int))}, got {value!r}")


def _validate(settings: Settings) -> None:
    try:
        check_at_least_floor(settings.kdf.params)
    except ValueError as exc:
        raise SettingsError(f"kdf: {exc}") from None
    _check_bounds(settings)
    levels = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    if settings.log.level.upper() not in levels:
        raise SettingsError(f"log.level: {settings.log.level!r} is not one of {', '.join(levels)}")
    if bool(settings.server.tls_cert) != bool(settings.server.tls_key):
        raise SettingsError("server.tls_cert and server.tls_key must be set together")
    from skald_host.core.backups.service import BackupError, check_backup_root  # not at import: the core imports settings

    try:
        check_backup_root(settings.data_dir, settings.resolve(settings.backup.dir))
    except BackupError as exc:
        raise SettingsError(f"backup.dir: {exc}") from None
